package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/gate"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
	"github.com/agent-context/agent-context/runtime/conversation"
	"github.com/agent-context/agent-context/runtime/cost"
	"github.com/agent-context/agent-context/runtime/memory"
	"github.com/agent-context/agent-context/runtime/operation"
	"github.com/agent-context/agent-context/runtime/session"
)

// Prefix is where the console is served.
const Prefix = "/console"

// maxQueryBytes bounds a page's query string: filters and a cursor fit well within it.
const maxQueryBytes = 4 << 10

// maxBodyBytes bounds a console request's body (a sign-in form: a token and a scope),
// whether or not the request is signed in; a larger one is refused with 413 before a
// byte of it is parsed.
const maxBodyBytes = 64 << 10

// contentSecurityPolicy admits the console's own scripts, styles and images only: no
// inline script or style, nothing from elsewhere, no framing.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

//go:embed assets
var assets embed.FS

// Config is what the console reads through: the gate every door comes in by, the
// session store and the use cases of each area.
type Config struct {
	Logger *slog.Logger
	// Gate verifies the sign-in token as a bearer credential, admits every signed-in
	// request (the API's rate limits, as the tool "GET /console/<page>", then the
	// capabilities of the routes the page reads) and bounds the bodies.
	Gate          *gate.Gate
	Sessions      *session.Sessions
	Messages      *conversation.Messages
	Windows       *conversation.Windows
	Operations    *operation.Maintenance
	Entries       *memory.Entries
	Recall        *memory.Recall
	Agents        *a2a.Agents
	AgentMessages *a2a.Messages
	Tasks         *a2a.Tasks
	Events        *a2a.Events
	Costs         *cost.Attribution
	Clock         runtime.Clock
}

// Console is the console's http.Handler.
type Console struct {
	cfg      Config
	log      *slog.Logger
	mux      *http.ServeMux
	pages    *templates
	auth     gate.Auth
	throttle *signInThrottle
}

// New builds the console.
func New(cfg Config) *Console {
	c := &Console{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux(), pages: parseTemplates(), auth: cfg.Gate.Auth(),
		throttle: newSignInThrottle()}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.cfg.Clock == nil {
		c.cfg.Clock = runtime.SystemClock{}
	}
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err)
	}
	c.mux.Handle("GET "+Prefix+"/assets/", http.StripPrefix(Prefix+"/assets/", http.FileServerFS(static)))
	c.mux.HandleFunc("GET "+Prefix+"/login", c.loginForm)
	c.mux.HandleFunc("POST "+Prefix+"/login", c.login)
	c.mux.HandleFunc("POST "+Prefix+"/logout", c.signedIn(nil, c.logout))
	c.mux.HandleFunc("POST "+Prefix+"/scope", c.chooseScope)
	c.routes()
	c.mux.HandleFunc(Prefix+"/", c.signedIn(nil, func(w http.ResponseWriter, r *http.Request, v *viewer) {
		c.fail(w, r, v, runtime.NotFound("path", "page"))
	}))
	return c
}

// ServeHTTP implements http.Handler: the safety headers on every answer, the bounds
// of the body and the query string, then the page.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	if r.URL.Path == Prefix {
		http.Redirect(w, r, Prefix+"/", http.StatusSeeOther)
		return
	}
	if err := c.readForm(r); err != nil {
		if !errors.Is(err, gate.ErrClientClosed) {
			c.fail(w, r, nil, err)
		}
		return
	}
	if len(r.URL.RawQuery) > maxQueryBytes {
		c.fail(w, r, nil, runtime.Invalid("query", "the query string exceeds %d bytes", maxQueryBytes))
		return
	}
	if _, err := url.ParseQuery(r.URL.RawQuery); err != nil {
		c.fail(w, r, nil, runtime.Invalid("query", "the query string is malformed"))
		return
	}
	c.mux.ServeHTTP(w, r)
}

// page is a page handler: it answers with the data of its template, or an error the
// console renders as an error page.
type page func(ctx context.Context, r *http.Request, v *viewer) (string, any, error)

// handle registers a GET page that reads routes: the viewer needs their capabilities.
func (c *Console) handle(pattern string, routes []contract.Route, p page) {
	c.mux.HandleFunc("GET "+Prefix+pattern, c.signedIn(routes, func(w http.ResponseWriter, r *http.Request, v *viewer) {
		name, data, err := p(r.Context(), r, v)
		var to redirectError
		if errors.As(err, &to) {
			http.Redirect(w, r, to.to, http.StatusSeeOther)
			return
		}
		if err != nil {
			c.fail(w, r, v, err)
			return
		}
		c.render(w, r, http.StatusOK, name, v, data)
	}))
}

// fail renders err as an error page with its contract status. The text of an internal
// error stays in the log.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, v *viewer, err error) {
	status, e := c.cfg.Gate.Refuse(r.Context(), err)
	message := e.Message
	switch {
	case status >= 500:
		message = "The service could not answer this page. Try again shortly."
		if status != http.StatusServiceUnavailable {
			status = http.StatusInternalServerError
		}
	case e.Code == contract.CodeTokenForbidden && e.Details["requiredCapability"] != nil:
		message = fmt.Sprintf("This page needs the capability %v.", e.Details["requiredCapability"])
	}
	if after, ok := gate.RetryAfter(e); ok {
		w.Header().Set("Retry-After", after)
	}
	if status == http.StatusUnauthorized {
		c.renderLogin(w, r, status, message)
		return
	}
	c.render(w, r, status, "error", v, errorPage{Status: status, Text: http.StatusText(status), Message: message})
}

type errorPage struct {
	Status  int
	Text    string
	Message string
}

// pathID is the {id} of a page's path, checked by the ID rules (a malformed one is
// 400, as on the API).
func pathID(r *http.Request, field string) (string, error) {
	id := r.PathValue("id")
	if err := runtime.ValidateID(field, id); err != nil {
		return "", err
	}
	return id, nil
}

// trimmed is a query parameter without surrounding space.
func trimmed(r *http.Request, name string) string {
	return strings.TrimSpace(r.URL.Query().Get(name))
}
