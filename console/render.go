package console

import (
	"bytes"
	"embed"
	"encoding/json"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/operation"
)

//go:embed templates
var templateFS embed.FS

// templates holds one template set per page: the layout with that page's content.
type templates struct {
	sets map[string]*template.Template
}

// foldLines is how many lines of a long content show before it folds.
const foldLines = 6

var funcs = template.FuncMap{
	"ms":    formatMs,
	"deref": func(s *string) string { return derefOr(s, "") },
	"orDash": func(s *string) string {
		return derefOr(s, "—")
	},
	"json": func(raw json.RawMessage) string {
		if len(raw) == 0 || string(raw) == "null" {
			return ""
		}
		var b bytes.Buffer
		if json.Indent(&b, raw, "", "  ") != nil {
			return string(raw)
		}
		return b.String()
	},
	"long": func(s string) bool {
		return strings.Count(s, "\n") >= foldLines || len(s) > 600
	},
	"head": func(s string) string {
		lines := strings.SplitN(s, "\n", foldLines+1)
		if len(lines) > foldLines {
			lines = lines[:foldLines]
		}
		out := strings.Join(lines, "\n")
		if len(out) > 600 {
			out = out[:600]
		}
		return out + " …"
	},
	"link":  pageLink,
	"query": url.QueryEscape,
	"path":  url.PathEscape,
	"intp": func(p *int) string {
		if p == nil {
			return "—"
		}
		return strconv.Itoa(*p)
	},
	"floatp": func(p *float64) string {
		if p == nil {
			return "—"
		}
		return strconv.FormatFloat(*p, 'f', 4, 64)
	},
	"float": func(f float64) string { return strconv.FormatFloat(f, 'f', 4, 64) },
	"has":   func(v *viewer, cap string) bool { return v != nil && v.Principal.Can(cap) },
	"sub":   func(a, b int64) int64 { return a - b },
	// count shows a bounded count: the bound itself means that many or more.
	"count": func(c *operation.RecordCounts, n int64) string {
		if c.AtLeast(n) {
			return strconv.FormatInt(n, 10) + "+"
		}
		return strconv.FormatInt(n, 10)
	},
}

func derefOr(s *string, fallback string) string {
	if s == nil {
		return fallback
	}
	return *s
}

// formatMs shows a time in ms since the epoch as UTC.
func formatMs(ms int64) string {
	if ms == 0 {
		return "—"
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05.000Z")
}

// pageLink is a console path with a query string: pairs of name, value; empty values
// are left out, so links stay short and stable.
func pageLink(path string, pairs ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			q.Set(pairs[i], pairs[i+1])
		}
	}
	if len(q) == 0 {
		return Prefix + path
	}
	return Prefix + path + "?" + q.Encode()
}

func parseTemplates() *templates {
	t := &templates{sets: map[string]*template.Template{}}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		panic(err)
	}
	for _, name := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(name, "templates/"), ".html")
		if base == "layout" {
			continue
		}
		t.sets[base] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", name))
	}
	return t
}

// layout is what the layout template gets.
type layout struct {
	Title  string
	Viewer *viewer
	Nav    string
	Page   any
}

// titles name each page in the browser's title bar and the navigation.
var titles = map[string]string{
	"overview": "Overview", "conversations": "Conversations", "conversation": "Conversation",
	"window": "Window", "invocations": "Model invocations", "invocation": "Model invocation",
	"entries": "Entries", "entry": "Entry", "recall": "Recall", "a2a": "Agents and tasks",
	"task": "Task", "events": "Events", "costs": "Costs", "login": "Sign in", "error": "Error",
}

// navs map a page to the navigation item it belongs to.
var navs = map[string]string{
	"conversation": "conversations", "window": "conversations", "invocation": "invocations",
	"entry": "entries", "task": "a2a",
}

// render writes the page name with data at status. A template that fails renders
// nothing of itself: the error page replaces it.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, v *viewer, data any) {
	set := c.pages.sets[name]
	nav := navs[name]
	if nav == "" {
		nav = name
	}
	var b bytes.Buffer
	if err := set.Execute(&b, layout{Title: titles[name], Viewer: v, Nav: nav, Page: data}); err != nil {
		c.log.ErrorContext(r.Context(), "console template failed", slog.String("page", name), slog.Any("error", err))
		if name == "error" {
			http.Error(w, "The service could not answer this page.", http.StatusInternalServerError)
			return
		}
		c.render(w, r, http.StatusInternalServerError, "error", v, errorPage{Status: 500,
			Text: http.StatusText(500), Message: "The service could not answer this page. Try again shortly."})
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// jsonAnswer writes v as JSON (the live tail's answers).
func jsonAnswer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// queryInt reads an optional integer parameter within [lo, hi].
func queryInt(r *http.Request, name string, lo, hi int) (*int, error) {
	s := trimmed(r, name)
	if s == "" {
		return nil, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return nil, runtime.Invalid(name, "%s must be a whole number from %d to %d", name, lo, hi)
	}
	return &n, nil
}

// optional is a pointer to s, or nil for "".
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
