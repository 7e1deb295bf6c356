package main

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime/ratelimit"
)

// consoleBrowser is a cookie-keeping HTTP client of the console that does not follow
// redirects, so a test sees each answer.
type consoleBrowser struct {
	t    *testing.T
	app  *testApp
	http *http.Client
}

func newConsoleBrowser(t *testing.T, app *testApp) *consoleBrowser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &consoleBrowser{t: t, app: app, http: &http.Client{Jar: jar, Timeout: time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// consolePage is one answer of the console.
type consolePage struct {
	Status int
	Header http.Header
	Body   string
}

func (b *consoleBrowser) send(method, path string, form url.Values, headers ...string) consolePage {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.app.base+path, body)
	require.NoError(b.t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := b.http.Do(req)
	require.NoError(b.t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(b.t, err)
	page := consolePage{Status: resp.StatusCode, Header: resp.Header, Body: string(out)}
	requireConsoleHeaders(b.t, page)
	return page
}

func (b *consoleBrowser) get(path string) consolePage {
	b.t.Helper()
	return b.send(http.MethodGet, path, nil)
}

var csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the CSRF token of the first form of page.
func csrf(t *testing.T, page consolePage) string {
	t.Helper()
	m := csrfInput.FindStringSubmatch(page.Body)
	require.NotNil(t, m, "no form with a CSRF token: %s", page.Body)
	return m[1]
}

// login signs in with token (and tenant, project for the service token).
func (b *consoleBrowser) login(token, tenant, project string) consolePage {
	b.t.Helper()
	form := b.get("/console/login")
	require.Equal(b.t, http.StatusOK, form.Status, form.Body)
	return b.send(http.MethodPost, "/console/login", url.Values{"csrf": {csrf(b.t, form)}, "token": {token},
		"tenant": {tenant}, "project": {project}})
}

// requireConsoleHeaders asserts the safety headers every console answer carries, and
// that no answer leaks internal error text.
func requireConsoleHeaders(t *testing.T, page consolePage) {
	t.Helper()
	require.Equal(t, "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
		page.Header.Get("Content-Security-Policy"))
	require.Equal(t, "nosniff", page.Header.Get("X-Content-Type-Options"))
	require.Equal(t, "no-referrer", page.Header.Get("Referrer-Policy"))
	require.Less(t, page.Status, 500, page.Body)
	require.NotContains(t, strings.ToLower(page.Body), "internal error")
	require.NotContains(t, page.Body, "goroutine")
	require.NotContains(t, page.Body, "SQLSTATE")
}

// consoleWindow is the body of a window of one message item in conv-1.
func consoleWindow(id, content string) map[string]any {
	return map[string]any{"id": id, "conversation": map[string]any{"conversationId": "conv-1"}, "stage": "original",
		"purpose": "chat", "tokenCount": 12, "items": []any{map[string]any{"id": "i-0", "ordinal": 0, "kind": "message", "content": content}}}
}

func bare(bearer string) string { return strings.TrimPrefix(bearer, "Bearer ") }

// consoleSessions counts the stored sessions.
func consoleSessions(t *testing.T, app *testApp) int {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), app.dsn)
	require.NoError(t, err)
	defer pool.Close()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM console_sessions").Scan(&n))
	return n
}

// TestConsoleSignInAndBadInput drives the console's sign-in, CSRF and error pages over
// plain HTTP: every refusal is the page the contract names, never a 500.
func TestConsoleSignInAndBadInput(t *testing.T) {
	t.Parallel()
	app, minter := startSecuredApp(t)
	ctx := context.Background()
	app.post(t, contract.RouteWindowsCreate.Path, consoleWindow("w-mine", "hello"),
		"Authorization", minter.bearer(contract.AllCapabilities...)).requireOK(t, http.StatusCreated, nil)

	b := newConsoleBrowser(t, app)
	page := b.get("/console/")
	require.Equal(t, http.StatusUnauthorized, page.Status)
	require.Contains(t, page.Body, `id="login-form"`)

	t.Run("a token of another audience starts no session", func(t *testing.T) {
		s := newSigner(t, minter.getenv)
		page := b.login(s.valid(t, map[string]any{"aud": "other-service"}), "", "")
		require.Equal(t, http.StatusUnauthorized, page.Status)
		require.Contains(t, page.Body, "The token was not accepted.")
		require.Zero(t, consoleSessions(t, app))
		page = b.login("not-a-token", "", "")
		require.Equal(t, http.StatusUnauthorized, page.Status)
		require.Zero(t, consoleSessions(t, app))
	})

	t.Run("a form without its CSRF token is refused", func(t *testing.T) {
		page := b.send(http.MethodPost, "/console/login", url.Values{"token": {bare(minter.bearer(contract.AllCapabilities...))}})
		require.Equal(t, http.StatusForbidden, page.Status)
		require.Zero(t, consoleSessions(t, app))
	})

	page = b.login(bare(minter.bearer(contract.AllCapabilities...)), "", "")
	require.Equal(t, http.StatusSeeOther, page.Status, page.Body)
	cookie := page.Header.Get("Set-Cookie")
	require.Contains(t, cookie, "ac_console_session=")
	require.Contains(t, cookie, "Path=/console")
	require.Contains(t, cookie, "HttpOnly")
	require.Contains(t, cookie, "SameSite=Strict")
	require.NotContains(t, cookie, "Secure")
	require.NotContains(t, cookie, bare(minter.bearer(contract.AllCapabilities...))[:40], "the cookie never holds the token")
	require.Equal(t, 1, consoleSessions(t, app))
	overview := b.get("/console/")
	require.Equal(t, http.StatusOK, overview.Status, overview.Body)
	require.Contains(t, overview.Body, "acme/alpha")

	t.Run("bad input answers its page", func(t *testing.T) {
		for _, c := range []struct {
			path   string
			status int
		}{
			{"/console/windows/w-mine", http.StatusOK},
			{"/console/windows/w-nobody", http.StatusNotFound},
			{"/console/windows/" + url.PathEscape("bad id!"), http.StatusBadRequest},
			{"/console/windows/w-mine?sentBy=forged", http.StatusBadRequest},
			{"/console/invocations/inv-nobody", http.StatusNotFound},
			{"/console/entries/e-nobody", http.StatusNotFound},
			{"/console/a2a/tasks/t-nobody", http.StatusNotFound},
			{"/console/conversations/conv-nobody", http.StatusNotFound},
			{"/console/no-such-page", http.StatusNotFound},
			{"/console/windows/w-mine?" + strings.Repeat("a=b&", 2000), http.StatusBadRequest},
			{"/console/costs?range=%zz", http.StatusBadRequest},
			{"/console/costs?range=forever", http.StatusBadRequest},
			{"/console/costs?groupBy=colour", http.StatusBadRequest},
			{"/console/conversations/conv-1?cursor=forged", http.StatusBadRequest},
			{"/console/events?cursor=forged", http.StatusBadRequest},
			{"/console/recall?q=x&topK=-1", http.StatusBadRequest},
			{"/console/recall?q=x&asOfMs=yesterday", http.StatusBadRequest},
			{"/console/recall?q=x&mode=text&asOfMs=1", http.StatusOK},
			{"/console/assets/console.css", http.StatusOK},
		} {
			page := b.get(c.path)
			require.Equal(t, c.status, page.Status, "%.80s: %s", c.path, page.Body)
		}
	})

	t.Run("a page needs the capabilities of its routes", func(t *testing.T) {
		narrow := newConsoleBrowser(t, app)
		require.Equal(t, http.StatusSeeOther, narrow.login(bare(minter.bearer(contract.CapMessagesRead)), "", "").Status)
		page := narrow.get("/console/windows/w-mine")
		require.Equal(t, http.StatusForbidden, page.Status)
		require.Contains(t, page.Body, contract.CapContextRead)
		require.Equal(t, http.StatusOK, narrow.get("/console/").Status)
	})

	t.Run("a wrong CSRF token changes nothing", func(t *testing.T) {
		page := b.send(http.MethodPost, "/console/logout", url.Values{"csrf": {"wrong"}})
		require.Equal(t, http.StatusForbidden, page.Status)
		page = b.send(http.MethodPost, "/console/logout", url.Values{})
		require.Equal(t, http.StatusForbidden, page.Status)
		require.Equal(t, http.StatusOK, b.get("/console/").Status, "the session is still live")
	})

	t.Run("a forged or expired session cookie answers the sign-in page", func(t *testing.T) {
		forged := newConsoleBrowser(t, app)
		u, err := url.Parse(app.base + "/console/")
		require.NoError(t, err)
		forged.http.Jar.SetCookies(u, []*http.Cookie{{Name: "ac_console_session", Value: "forged", Path: "/console"}})
		page := forged.get("/console/")
		require.Equal(t, http.StatusUnauthorized, page.Status)
		require.Contains(t, page.Body, `id="login-form"`)

		expiring := newConsoleBrowser(t, app)
		require.Equal(t, http.StatusSeeOther, expiring.login(bare(minter.bearer(contract.AllCapabilities...)), "", "").Status)
		require.Equal(t, http.StatusOK, expiring.get("/console/").Status)
		pool, err := pgxpool.New(ctx, app.dsn)
		require.NoError(t, err)
		defer pool.Close()
		// Every session but b's ends now.
		_, err = pool.Exec(ctx, "UPDATE console_sessions SET expires_at = now() - interval '1 second' WHERE created_at > (SELECT min(created_at) FROM console_sessions)")
		require.NoError(t, err)
		page = expiring.get("/console/")
		require.Equal(t, http.StatusUnauthorized, page.Status)
		require.Contains(t, page.Body, `id="login-form"`)
	})

	t.Run("sign-out ends the session", func(t *testing.T) {
		page := b.send(http.MethodPost, "/console/logout", url.Values{"csrf": {csrf(t, b.get("/console/"))}})
		require.Equal(t, http.StatusSeeOther, page.Status, page.Body)
		require.Equal(t, http.StatusUnauthorized, b.get("/console/").Status)
	})

	t.Run("behind HTTPS the cookie is Secure", func(t *testing.T) {
		tls := newConsoleBrowser(t, app)
		form := tls.get("/console/login")
		page := tls.send(http.MethodPost, "/console/login", url.Values{"csrf": {csrf(t, form)},
			"token": {bare(minter.bearer(contract.AllCapabilities...))}}, "X-Forwarded-Proto", "https")
		require.Equal(t, http.StatusSeeOther, page.Status)
		require.Contains(t, page.Header.Get("Set-Cookie"), "Secure")
	})
}

// TestConsoleStaticToken signs in with the service token and a chosen scope, and
// proves another scope's window answers 404.
func TestConsoleStaticToken(t *testing.T) {
	t.Parallel()
	app := startApp(t, func(c *Config) { c.ServiceToken = "console-service-token" })
	app.post(t, contract.RouteWindowsCreate.Path, consoleWindow("w-a", "tenant a's window"),
		"Authorization", "Bearer console-service-token", "x-infra-tenant-id", "tenant-a").requireOK(t, http.StatusCreated, nil)

	a := newConsoleBrowser(t, app)
	require.Equal(t, http.StatusSeeOther, a.login("console-service-token", "tenant-a", "local").Status)
	page := a.get("/console/windows/w-a")
	require.Equal(t, http.StatusOK, page.Status)
	require.Contains(t, page.Body, "tenant a&#39;s window")

	b := newConsoleBrowser(t, app)
	require.Equal(t, http.StatusUnauthorized, b.login("wrong-token", "tenant-b", "local").Status)
	require.Equal(t, http.StatusBadRequest, b.login("console-service-token", "bad tenant!", "local").Status)
	require.Equal(t, http.StatusSeeOther, b.login("console-service-token", "tenant-b", "local").Status)
	page = b.get("/console/windows/w-a")
	require.Equal(t, http.StatusNotFound, page.Status)
	require.NotContains(t, page.Body, "tenant a")
}

// TestConsoleOpenMode: no sign-in; the scope is local/local until the scope form,
// whose CSRF token is required, picks another.
func TestConsoleOpenMode(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	app.post(t, contract.RouteWindowsCreate.Path, consoleWindow("w-x", "project x's window"),
		"x-infra-tenant-id", "tenant-x", "x-infra-project-id", "proj-x").requireOK(t, http.StatusCreated, nil)
	b := newConsoleBrowser(t, app)
	page := b.get("/console/")
	require.Equal(t, http.StatusOK, page.Status, page.Body)
	require.Contains(t, page.Body, "Overview of local/local")
	require.NotContains(t, page.Body, `id="logout"`)
	require.Equal(t, http.StatusNotFound, b.get("/console/windows/w-x").Status)
	require.Equal(t, http.StatusSeeOther, b.get("/console/login").Status, "open mode has no sign-in")

	scope := url.Values{"tenant": {"tenant-x"}, "project": {"proj-x"}}
	require.Equal(t, http.StatusForbidden, b.send(http.MethodPost, "/console/scope", scope).Status)
	require.Contains(t, b.get("/console/").Body, "Overview of local/local", "a refused form changes nothing")
	scope.Set("csrf", csrf(t, page))
	require.Equal(t, http.StatusSeeOther, b.send(http.MethodPost, "/console/scope", scope).Status)
	require.Contains(t, b.get("/console/").Body, "Overview of tenant-x/proj-x")
	page = b.get("/console/windows/w-x")
	require.Equal(t, http.StatusOK, page.Status)
	require.Contains(t, page.Body, "project x&#39;s window")
	scope.Set("tenant", "bad tenant!")
	require.Equal(t, http.StatusBadRequest, b.send(http.MethodPost, "/console/scope", scope).Status)
}

// TestConsoleRateLimited: a signed-in console request takes its tokens like an API
// request of the same subject, from the same budget; a refusal is the 429 page with
// Retry-After, and the sign-in form takes nothing.
func TestConsoleRateLimited(t *testing.T) {
	t.Parallel()
	app, minter := startSecuredApp(t, func(c *Config) { c.RateLimits = ratelimit.RateLimits{AgentPerMin: 3} })
	alice := newConsoleBrowser(t, app)
	require.Equal(t, http.StatusSeeOther, alice.login(bare(minter.subjectBearer("alice", "acme", "alpha", contract.AllCapabilities...)), "", "").Status)
	for range 2 {
		page := alice.get("/console/entries")
		require.Equal(t, http.StatusOK, page.Status, page.Body)
	}
	// The API request takes the budget's last token: the console's next page is refused.
	body := map[string]any{"scope": map[string]any{"conversationId": "c"}}
	app.post(t, contract.RouteMessagesRecent.Path, body, "Authorization",
		minter.subjectBearer("alice", "acme", "alpha", contract.AllCapabilities...)).requireOK(t, http.StatusOK, nil)
	page := alice.get("/console/windows/w-1")
	require.Equal(t, http.StatusTooManyRequests, page.Status, page.Body)
	require.NotEmpty(t, page.Header.Get("Retry-After"))
	requireRateLimited(t, app.post(t, contract.RouteMessagesRecent.Path, body, "Authorization",
		minter.subjectBearer("alice", "acme", "alpha", contract.AllCapabilities...)), contract.RateLevelAgent)
	// Another subject has a budget of its own; the sign-in form costs nothing.
	bob := newConsoleBrowser(t, app)
	require.Equal(t, http.StatusSeeOther, bob.login(bare(minter.subjectBearer("bob", "acme", "alpha", contract.AllCapabilities...)), "", "").Status)
	require.Equal(t, http.StatusOK, bob.get("/console/entries").Status)
	metrics := app.do(t, http.MethodGet, contract.PathMetrics, nil)
	require.Contains(t, string(metrics.Body), `agent_context_ratelimit_refusals_total{level="agent"} 2`)
}
