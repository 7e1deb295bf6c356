package console

import (
	"crypto/rand"
	"crypto/subtle"
	"net/http"
	"strings"
	"time"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/gate"
	"github.com/agent-context/agent-context/runtime"
)

// Cookies of the console, all HttpOnly, SameSite=Strict and scoped to its path.
const (
	// sessionCookie holds a session's ID (the token it came from is never stored).
	sessionCookie = "ac_console_session"
	// formCookie holds the CSRF token of the forms shown before a session exists (the
	// sign-in form, and the scope form of open mode): the form must repeat it.
	formCookie = "ac_console_form"
	// scopeCookie holds the tenant and project chosen in open mode.
	scopeCookie = "ac_console_scope"
)

// csrfField is the form field of the CSRF token.
const csrfField = "csrf"

// formTokenLen is the length of rand.Text's 128 random bits.
const formTokenLen = 26

// viewer is who looks at a page: the principal its reads run as, and the CSRF token
// its forms carry.
type viewer struct {
	Principal runtime.Principal
	CSRF      string
	// Open is set in open mode, which has no sign-in.
	Open bool
	// sessionID is the session's cookie value (empty in open mode).
	sessionID string
}

// signedIn resolves the viewer of r, has the gate admit the request (the rate limits,
// then the capabilities of the routes the page reads) and passes it to h. In open
// mode everyone is the viewer of the chosen scope; otherwise a live session is needed,
// and a missing, forged or expired one answers the sign-in form with 401 (and takes no
// token: there is no one to charge it to).
func (c *Console) signedIn(routes []contract.Route, h func(http.ResponseWriter, *http.Request, *viewer)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		admitted := func(v *viewer) {
			gate.RecordOf(r.Context()).Principal = &v.Principal
			// The tool is the page's route pattern, such as "GET /console/windows/{id}".
			tool := r.Pattern
			if tool == "" {
				tool = r.Method + " " + Prefix + "/"
			}
			if err := c.cfg.Gate.Admit(r.Context(), v.Principal, tool, routes...); err != nil {
				c.fail(w, r, v, err)
				return
			}
			h(w, r, v)
		}
		if c.auth.Open() {
			admitted(&viewer{Open: true, Principal: openPrincipal(r), CSRF: c.formToken(w, r)})
			return
		}
		cookie, err := r.Cookie(sessionCookie)
		if err != nil {
			c.renderLogin(w, r, http.StatusUnauthorized, "Sign in to use the console.")
			return
		}
		s, err := c.cfg.Sessions.Resume(r.Context(), cookie.Value)
		if err != nil {
			if runtime.ErrorCode(err) != contract.CodeNotFound {
				c.fail(w, r, nil, err)
				return
			}
			clearCookie(w, r, sessionCookie)
			c.renderLogin(w, r, http.StatusUnauthorized, "The session has ended; sign in again.")
			return
		}
		admitted(&viewer{Principal: s.Principal, CSRF: s.CSRFToken, sessionID: s.ID})
	}
}

// openPrincipal is open mode's viewer: the trusted caller of open mode, in the scope
// the scope form chose (local/local until then).
func openPrincipal(r *http.Request) runtime.Principal {
	scope := runtime.Scope{TenantID: gate.DefaultTenant, ProjectID: gate.DefaultProject}
	if cookie, err := r.Cookie(scopeCookie); err == nil {
		tenant, project, ok := strings.Cut(cookie.Value, "/")
		if ok && runtime.ValidateID("tenant", tenant) == nil && runtime.ValidateID("project", project) == nil {
			scope = runtime.Scope{TenantID: tenant, ProjectID: project}
		}
	}
	return gate.TrustedPrincipal(scope, gate.DefaultSubject)
}

// loginForm shows the sign-in form (open mode has none: it goes to the overview).
func (c *Console) loginForm(w http.ResponseWriter, r *http.Request) {
	if c.auth.Open() {
		http.Redirect(w, r, Prefix+"/", http.StatusSeeOther)
		return
	}
	c.renderLogin(w, r, http.StatusOK, "")
}

type loginPage struct {
	CSRF        string
	Message     string
	StaticToken bool
	Tenant      string
	Project     string
}

func (c *Console) renderLogin(w http.ResponseWriter, r *http.Request, status int, message string) {
	if c.auth.Open() {
		c.render(w, r, status, "error", nil, errorPage{Status: status, Text: http.StatusText(status), Message: message})
		return
	}
	c.render(w, r, status, "login", nil, loginPage{CSRF: c.formToken(w, r), Message: message,
		StaticToken: c.auth.StaticToken != "", Tenant: r.PostFormValue("tenant"), Project: r.PostFormValue("project")})
}

// login verifies the token of the form exactly as a bearer credential and starts a
// session; a token that does not verify answers the form again with 401 and starts
// nothing. A client address with too many failed attempts in the last minute is
// answered 429 until the minute has passed, whatever it sends.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if c.auth.Open() {
		http.Redirect(w, r, Prefix+"/", http.StatusSeeOther)
		return
	}
	client := clientAddress(r)
	if wait, ok := c.throttle.admit(client, time.Now()); !ok {
		c.fail(w, r, nil, runtime.Errorf(contract.CodeRateLimited, "too many failed sign-ins from this address; try again later").
			With("level", "sign-in").With("retryAfterMs", wait.Milliseconds()))
		return
	}
	if !c.formPosted(w, r) {
		return
	}
	p, exp, err := c.auth.Login(r.Context(), r.PostFormValue("token"), strings.TrimSpace(r.PostFormValue("tenant")),
		strings.TrimSpace(r.PostFormValue("project")))
	if err != nil {
		status := http.StatusUnauthorized
		if info, ok := contract.Codes[runtime.ErrorCode(err)]; ok && info.Status != http.StatusUnauthorized && info.Status < 500 {
			status = info.Status
		}
		if status >= 500 {
			c.fail(w, r, nil, err)
			return
		}
		c.throttle.failed(client, time.Now())
		c.renderLogin(w, r, status, "The token was not accepted.")
		return
	}
	s, err := c.cfg.Sessions.Start(r.Context(), p, exp)
	if err != nil {
		if runtime.ErrorCode(err) == contract.CodeTokenExpired {
			c.throttle.failed(client, time.Now())
			c.renderLogin(w, r, http.StatusUnauthorized, "The token was not accepted.")
			return
		}
		c.fail(w, r, nil, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: s.ID, Path: Prefix, Expires: s.ExpiresAt,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure(r)})
	http.Redirect(w, r, Prefix+"/", http.StatusSeeOther)
}

// logout ends the session; its CSRF token must come with it.
func (c *Console) logout(w http.ResponseWriter, r *http.Request, v *viewer) {
	if !v.Open {
		if !c.csrfMatches(w, r, v.CSRF) {
			return
		}
		if err := c.cfg.Sessions.End(r.Context(), v.sessionID); err != nil {
			c.fail(w, r, v, err)
			return
		}
		clearCookie(w, r, sessionCookie)
		http.Redirect(w, r, Prefix+"/login", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, Prefix+"/", http.StatusSeeOther)
}

// chooseScope is open mode's tenant/project form; it is remembered in a cookie.
func (c *Console) chooseScope(w http.ResponseWriter, r *http.Request) {
	if !c.auth.Open() {
		c.signedIn(nil, func(w http.ResponseWriter, r *http.Request, v *viewer) {
			c.fail(w, r, v, runtime.NotFound("path", "page"))
		})(w, r)
		return
	}
	if !c.formPosted(w, r) {
		return
	}
	tenant, project := strings.TrimSpace(r.PostFormValue("tenant")), strings.TrimSpace(r.PostFormValue("project"))
	if err := runtime.ValidateID("tenant", tenant); err != nil {
		c.fail(w, r, nil, err)
		return
	}
	if err := runtime.ValidateID("project", project); err != nil {
		c.fail(w, r, nil, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: scopeCookie, Value: tenant + "/" + project, Path: Prefix,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure(r)})
	http.Redirect(w, r, Prefix+"/", http.StatusSeeOther)
}

// formPosted checks a pre-session form's CSRF token against the form cookie; on
// failure it has answered 403.
func (c *Console) formPosted(w http.ResponseWriter, r *http.Request) bool {
	want := ""
	if cookie, err := r.Cookie(formCookie); err == nil {
		want = cookie.Value
	}
	return c.csrfMatches(w, r, want)
}

// csrfMatches checks the CSRF token of r's form (read by readForm) against want; on
// failure it has answered 403.
func (c *Console) csrfMatches(w http.ResponseWriter, r *http.Request, want string) bool {
	got := r.PostFormValue(csrfField)
	if want == "" || got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		c.fail(w, r, nil, runtime.Errorf(contract.CodeTokenForbidden, "the form's CSRF token is missing or wrong; reload the page and try again"))
		return false
	}
	return true
}

// formToken returns the CSRF token of the pre-session forms, setting its cookie when
// the browser has none.
func (c *Console) formToken(w http.ResponseWriter, r *http.Request) string {
	if cookie, err := r.Cookie(formCookie); err == nil && len(cookie.Value) == formTokenLen {
		return cookie.Value
	}
	token := rand.Text()
	http.SetCookie(w, &http.Cookie{Name: formCookie, Value: token, Path: Prefix,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure(r)})
	return token
}

func clearCookie(w http.ResponseWriter, r *http.Request, name string) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: Prefix, Expires: time.Unix(0, 0), MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure(r)})
}

// secure reports whether the browser reached the console over HTTPS, directly or
// through a proxy that says so.
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}
