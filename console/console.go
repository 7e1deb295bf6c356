package console

import (
	"context"
	"embed"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
	"github.com/agent-context/agent-context/runtime/conversation"
	"github.com/agent-context/agent-context/runtime/cost"
	"github.com/agent-context/agent-context/runtime/memory"
	"github.com/agent-context/agent-context/runtime/operation"
	"github.com/agent-context/agent-context/runtime/session"
	"github.com/agent-context/agent-context/server"
)

// Prefix is where the console is served.
const Prefix = "/console"

// maxQueryBytes bounds a page's query string: filters and a cursor fit well within it.
const maxQueryBytes = 4 << 10

// contentSecurityPolicy admits the console's own scripts, styles and images only: no
// inline script or style, nothing from elsewhere, no framing.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

//go:embed assets
var assets embed.FS

// Config is what the console reads through: the use cases of each area, the
// server's credential verification and the session store.
type Config struct {
	Logger *slog.Logger
	Auth   server.AuthConfig
	// RateLimiter checks every signed-in request against the API's rate limits, as
	// the tool "GET /console/<page>" (nil: none).
	RateLimiter *server.RateLimiter
	Sessions    *session.Sessions
	Messages    *conversation.Messages
	Windows     *conversation.Windows
	Operations  *operation.Operations
	Entries     *memory.Entries
	Recall      *memory.Recall
	A2A         *a2a.Service
	Costs       *cost.Costs
	Clock       runtime.Clock
}

// Console is the console's http.Handler.
type Console struct {
	cfg   Config
	log   *slog.Logger
	mux   *http.ServeMux
	pages *templates
}

// New builds the console.
func New(cfg Config) *Console {
	c := &Console{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux(), pages: parseTemplates()}
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
	c.mux.HandleFunc("POST "+Prefix+"/logout", c.signedIn(c.logout))
	c.mux.HandleFunc("POST "+Prefix+"/scope", c.chooseScope)
	c.routes()
	c.mux.HandleFunc(Prefix+"/", c.signedIn(func(w http.ResponseWriter, r *http.Request, v *viewer) {
		c.fail(w, r, v, runtime.NotFound("path", "page"))
	}))
	return c
}

// ServeHTTP implements http.Handler: the safety headers on every answer, the bounds
// of the query string, then the page.
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

// handle registers a GET page that needs caps.
func (c *Console) handle(pattern string, caps []string, p page) {
	c.mux.HandleFunc("GET "+Prefix+pattern, c.signedIn(func(w http.ResponseWriter, r *http.Request, v *viewer) {
		for _, cap := range caps {
			if !v.Principal.Can(cap) {
				c.fail(w, r, v, needs(cap))
				return
			}
		}
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
	var re *runtime.Error
	status, message := http.StatusInternalServerError, "The service could not answer this page. Try again shortly."
	if errors.As(err, &re) {
		if info, ok := contract.Codes[re.Code]; ok && info.Status < 500 {
			status, message = info.Status, re.Message
		} else if ok && info.Status == http.StatusServiceUnavailable {
			status = info.Status
		}
	}
	if re != nil && re.Code == contract.CodeRateLimited {
		// As on the API: the wait in whole seconds, rounded up, at least 1.
		if ms, ok := re.Details["retryAfterMs"].(int64); ok {
			w.Header().Set("Retry-After", strconv.FormatInt(max(1, (ms+999)/1000), 10))
		}
	}
	if status >= 500 {
		c.log.ErrorContext(r.Context(), "console page failed", slog.String("path", r.URL.Path), slog.Any("error", err))
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
