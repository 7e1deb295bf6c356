package server

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/gate"
	"github.com/agent-context/agent-context/runtime"
)

// The helpers here are prefixed "auth" so that they never collide with server_test.go.

type authReady struct{}

func (authReady) Versions(context.Context) (int64, int64, error) { return 1, 1, nil }

// stubVerifier stands in for adapters/jwtauth (the server may not import adapters; the
// real verifier has its own suite and an end-to-end test in cmd): it knows a fixed set
// of tokens and counts its calls.
type stubVerifier struct {
	tokens map[string]runtime.TokenClaims
	calls  atomic.Int64
}

func (v *stubVerifier) Verify(_ context.Context, token string) (runtime.TokenClaims, error) {
	v.calls.Add(1)
	if token == "expired.token.x" {
		return runtime.TokenClaims{}, runtime.Errorf(contract.CodeTokenExpired, "the runtime token has expired")
	}
	c, ok := v.tokens[token]
	if !ok {
		return runtime.TokenClaims{}, runtime.Errorf(contract.CodeTokenInvalid, "the runtime token is not valid")
	}
	return c, nil
}

// authClaims is a verified token of tenant acme, project alpha, subject agent-7.
func authClaims(caps ...string) runtime.TokenClaims {
	return runtime.TokenClaims{Subject: "agent-7", TenantID: "acme", ProjectID: "alpha", Capabilities: caps, TokenID: "jti-1"}
}

func userHash(userToken string) string {
	sum := sha256.Sum256([]byte(userToken))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

const authRoutePath = "/internal/v1/test/auth"

// authBundle is a server with a test-only route requiring messages:append whose
// handler reports the principal it was given and counts how often it ran.
type authBundle struct {
	server   *Server
	verifier *stubVerifier
	reached  atomic.Int64
}

type authSeen struct {
	Tenant            string   `json:"tenant"`
	Project           string   `json:"project"`
	Subject           string   `json:"subject"`
	UserAuthorization string   `json:"userAuthorization"`
	Capabilities      []string `json:"capabilities"`
	TokenID           string   `json:"tokenId"`
}

func newAuthBundle(t *testing.T, static string, tokens map[string]runtime.TokenClaims) *authBundle {
	t.Helper()
	b := &authBundle{}
	auth := gate.Auth{StaticToken: static}
	if tokens != nil {
		b.verifier = &stubVerifier{tokens: tokens}
		auth.Verifier = b.verifier
	}
	b.server = New(withDoors(Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Gate: gate.New(gate.Config{Auth: auth}),
		Ready: authReady{}}))
	route := contract.Route{Method: http.MethodPost, Path: authRoutePath, Capabilities: []string{contract.CapMessagesAppend}}
	b.server.echo.Add(route.Method, route.Path, func(c echo.Context) error {
		b.reached.Add(1)
		p := principal(c)
		var caps []string
		for cap, ok := range p.Capabilities {
			if ok {
				caps = append(caps, cap)
			}
		}
		slices.Sort(caps)
		return c.JSON(http.StatusOK, authSeen{Tenant: p.TenantID, Project: p.ProjectID, Subject: p.Subject,
			UserAuthorization: p.UserAuthorization, Capabilities: caps, TokenID: p.TokenID})
	}, b.server.routeMiddleware(route))
	return b
}

type authResponse struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request to the handler; headers are name, value pairs, added in order.
func (b *authBundle) do(t *testing.T, method, path string, headers ...string) authResponse {
	t.Helper()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(`{}`)
	}
	req := httptest.NewRequest(method, path, body)
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	b.server.Handler().ServeHTTP(rec, req)
	return authResponse{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

func (r authResponse) requireError(t *testing.T, status int, code string) contract.ErrorBody {
	t.Helper()
	require.Equal(t, status, r.status, "body: %s", r.body)
	var env contract.ErrorResponse
	require.NoError(t, json.Unmarshal(r.body, &env), "body: %s", r.body)
	require.Equal(t, code, env.Error.Code, "body: %s", r.body)
	if code != contract.CodeValidationFailed {
		require.Equal(t, contract.CategoryAuth, env.Error.Category)
	}
	if status == http.StatusUnauthorized {
		// The MCP endpoint's challenge also names its protected resource metadata.
		challenge := strings.Replace(r.header.Get("WWW-Authenticate"),
			`resource_metadata="http://example.com/.well-known/oauth-protected-resource", `, "", 1)
		require.Equal(t, `Bearer realm="agent-context-infra"`, challenge)
	} else {
		require.Empty(t, r.header.Get("WWW-Authenticate"))
	}
	return env.Error
}

func (r authResponse) requireSeen(t *testing.T) authSeen {
	t.Helper()
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var seen authSeen
	require.NoError(t, json.Unmarshal(r.body, &seen))
	return seen
}

func TestRuntimeTokenAuthentication(t *testing.T) {
	t.Parallel()
	b := newAuthBundle(t, "", map[string]runtime.TokenClaims{
		"good.token.x": authClaims(contract.CapMessagesAppend, contract.CapMessagesRead, "future:thing"),
	})
	for _, headers := range [][]string{
		nil,
		{"Authorization", ""},
		{"Authorization", "Bearer"},
		{"Authorization", "Bearer    "},
		{"Authorization", "Basic Z29vZC50b2tlbi54"},
		{"Authorization", "good.token.x"},
	} {
		b.do(t, http.MethodPost, authRoutePath, headers...).requireError(t, http.StatusUnauthorized, contract.CodeTokenMissing)
	}
	b.do(t, http.MethodPost, authRoutePath, "Authorization", "Bearer bad.token.x").
		requireError(t, http.StatusUnauthorized, contract.CodeTokenInvalid)
	b.do(t, http.MethodPost, authRoutePath, "Authorization", "Bearer expired.token.x").
		requireError(t, http.StatusUnauthorized, contract.CodeTokenExpired)
	require.Zero(t, b.reached.Load())

	// The scope and subject come from the token; unknown capability strings are dropped.
	seen := b.do(t, http.MethodPost, authRoutePath, "Authorization", "bearer good.token.x").requireSeen(t)
	require.Equal(t, authSeen{Tenant: "acme", Project: "alpha", Subject: "agent-7",
		Capabilities: []string{contract.CapMessagesAppend, contract.CapMessagesRead}, TokenID: "jti-1"}, seen)

	// Public routes need no credential, whatever is sent.
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, contract.PathHealth).status)
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, contract.PathHealth, "Authorization", "Bearer bad.token.x").status)
}

func TestRuntimeTokenCapability(t *testing.T) {
	t.Parallel()
	b := newAuthBundle(t, "", map[string]runtime.TokenClaims{
		"read.only.x":  authClaims(contract.CapMessagesRead),
		"unknown.x.x":  authClaims("messages:append:all", "MESSAGES:APPEND"),
		"nothing.x.x":  authClaims(),
		"append.x.x":   authClaims(contract.CapMessagesAppend),
		"all.caps.x.x": authClaims(contract.AllCapabilities...),
	})
	for _, tok := range []string{"read.only.x", "unknown.x.x", "nothing.x.x"} {
		e := b.do(t, http.MethodPost, authRoutePath, "Authorization", "Bearer "+tok).
			requireError(t, http.StatusForbidden, contract.CodeTokenForbidden)
		require.Equal(t, map[string]any{"requiredCapability": contract.CapMessagesAppend}, e.Details)
	}
	require.Zero(t, b.reached.Load())
	b.do(t, http.MethodPost, authRoutePath, "Authorization", "Bearer append.x.x").requireSeen(t)
	b.do(t, http.MethodPost, authRoutePath, "Authorization", "Bearer all.caps.x.x").requireSeen(t)
}

func TestRuntimeTokenScopeHeaders(t *testing.T) {
	t.Parallel()
	b := newAuthBundle(t, "", map[string]runtime.TokenClaims{"good.token.x": authClaims(contract.CapMessagesAppend)})
	bearer := []string{"Authorization", "Bearer good.token.x"}
	cases := []struct {
		name    string
		headers []string
		field   string
	}{
		{"other tenant", []string{gate.HeaderTenant, "globex"}, gate.HeaderTenant},
		{"other project", []string{gate.HeaderProject, "beta"}, gate.HeaderProject},
		{"other subject", []string{gate.HeaderSubject, "agent-8"}, gate.HeaderSubject},
		{"tenant differing in case", []string{gate.HeaderTenant, "ACME"}, gate.HeaderTenant},
		{"agreeing then disagreeing", []string{gate.HeaderTenant, "acme", gate.HeaderTenant, "globex"}, gate.HeaderTenant},
		{"empty tenant", []string{gate.HeaderTenant, ""}, gate.HeaderTenant},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := b.do(t, http.MethodPost, authRoutePath, append(slices.Clone(bearer), tc.headers...)...).
				requireError(t, http.StatusForbidden, contract.CodeScopeForbidden)
			require.Equal(t, tc.field, e.Details["field"])
		})
	}
	t.Run("agreeing", func(t *testing.T) {
		t.Parallel()
		seen := b.do(t, http.MethodPost, authRoutePath, append(slices.Clone(bearer),
			gate.HeaderTenant, "acme", gate.HeaderProject, "alpha", gate.HeaderSubject, "agent-7")...).requireSeen(t)
		require.Equal(t, "acme", seen.Tenant)
		require.Equal(t, "alpha", seen.Project)
		require.Equal(t, "agent-7", seen.Subject)
	})
}

func TestTokenBinding(t *testing.T) {
	t.Parallel()
	bound := authClaims(contract.CapMessagesAppend)
	bound.UserTokenHash = userHash("user-secret")
	b := newAuthBundle(t, "", map[string]runtime.TokenClaims{
		"bound.token.x":   bound,
		"unbound.token.x": authClaims(contract.CapMessagesAppend),
	})
	cases := []struct {
		name    string
		token   string
		headers []string
		ok      bool
	}{
		{"bound, matching header", "bound.token.x", []string{gate.HeaderUserAuthorization, "Bearer user-secret"}, true},
		{"bound, scheme in another case", "bound.token.x", []string{gate.HeaderUserAuthorization, "bearer user-secret"}, true},
		{"bound, header absent", "bound.token.x", nil, false},
		{"bound, another user token", "bound.token.x", []string{gate.HeaderUserAuthorization, "Bearer user-secreT"}, false},
		{"bound, the hash itself", "bound.token.x", []string{gate.HeaderUserAuthorization, "Bearer " + bound.UserTokenHash}, false},
		{"bound, no Bearer scheme", "bound.token.x", []string{gate.HeaderUserAuthorization, "user-secret"}, false},
		{"bound, other scheme", "bound.token.x", []string{gate.HeaderUserAuthorization, "Basic user-secret"}, false},
		{"bound, empty header", "bound.token.x", []string{gate.HeaderUserAuthorization, ""}, false},
		{"bound, header twice", "bound.token.x", []string{gate.HeaderUserAuthorization, "Bearer user-secret", gate.HeaderUserAuthorization, "Bearer other"}, false},
		{"unbound, header present", "unbound.token.x", []string{gate.HeaderUserAuthorization, "Bearer user-secret"}, false},
		{"unbound, empty header present", "unbound.token.x", []string{gate.HeaderUserAuthorization, ""}, false},
		{"unbound, no header", "unbound.token.x", nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := b.do(t, http.MethodPost, authRoutePath, append([]string{"Authorization", "Bearer " + tc.token}, tc.headers...)...)
			if !tc.ok {
				e := r.requireError(t, http.StatusUnauthorized, contract.CodeTokenBindingMismatch)
				require.NotContains(t, e.Message, "user-secret")
				require.NotContains(t, e.Message, bound.UserTokenHash)
				return
			}
			seen := r.requireSeen(t)
			want := ""
			if len(tc.headers) > 0 {
				want = tc.headers[1]
			}
			require.Equal(t, want, seen.UserAuthorization)
		})
	}

	t.Run("static and open mode forward the header as is", func(t *testing.T) {
		t.Parallel()
		for _, static := range []string{"s3cret", ""} {
			sb := newAuthBundle(t, static, nil)
			seen := sb.do(t, http.MethodPost, authRoutePath, "Authorization", "Bearer s3cret",
				gate.HeaderUserAuthorization, "Bearer anything at all").requireSeen(t)
			require.Equal(t, "Bearer anything at all", seen.UserAuthorization)
		}
	})
}

func TestStaticAndRuntimeTokensTogether(t *testing.T) {
	t.Parallel()
	b := newAuthBundle(t, "s3cret", map[string]runtime.TokenClaims{"good.token.x": authClaims(contract.CapMessagesAppend)})
	require.Equal(t, "runtime-token+static-token", b.server.gate.Auth().Mode())

	// The static token: scope from the trusted headers, every capability, no verifier call.
	seen := b.do(t, http.MethodPost, authRoutePath, "Authorization", "Bearer s3cret", gate.HeaderTenant, "globex").requireSeen(t)
	require.Equal(t, "globex", seen.Tenant)
	require.Equal(t, "service", seen.Subject)
	require.Len(t, seen.Capabilities, len(contract.AllCapabilities))
	require.Zero(t, b.verifier.calls.Load())

	// A JWT that is not the static token goes to the verifier.
	seen = b.do(t, http.MethodPost, authRoutePath, "Authorization", "Bearer good.token.x").requireSeen(t)
	require.Equal(t, "acme", seen.Tenant)
	require.EqualValues(t, 1, b.verifier.calls.Load())

	// Neither: refused by the verifier; near misses of the static token too.
	for _, tok := range []string{"bad.token.x", "s3cre", "s3cret2", "S3CRET"} {
		b.do(t, http.MethodPost, authRoutePath, "Authorization", "Bearer "+tok).
			requireError(t, http.StatusUnauthorized, contract.CodeTokenInvalid)
	}
	require.EqualValues(t, 5, b.verifier.calls.Load())
	b.do(t, http.MethodPost, authRoutePath).requireError(t, http.StatusUnauthorized, contract.CodeTokenMissing)
}

// TestGarbageHeaders sends hostile headers in every mode: none reaches the handler,
// none is answered with a 5xx.
func TestGarbageHeaders(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("A", 1<<20)
	tokens := map[string]runtime.TokenClaims{"good.token.x": authClaims(contract.CapMessagesAppend)}
	cases := []struct {
		name    string
		headers []string
	}{
		{"huge token", []string{"Authorization", "Bearer " + huge}},
		{"huge scheme", []string{"Authorization", huge}},
		{"non-ASCII token", []string{"Authorization", "Bearer jéton.ü.ñ"}},
		{"invalid UTF-8 token", []string{"Authorization", "Bearer \xff\xfe.\x00.x"}},
		{"control characters", []string{"Authorization", "Bearer a\x01b\x7fc"}},
		{"two Authorization headers, valid first", []string{"Authorization", "Bearer good.token.x", "Authorization", "Bearer s3cret"}},
		{"two Authorization headers, valid last", []string{"Authorization", "Bearer nope", "Authorization", "Bearer good.token.x"}},
		{"many Authorization headers", slices.Repeat([]string{"Authorization", "Bearer good.token.x"}, 1000)},
		{"huge tenant header", []string{"Authorization", "Bearer s3cret", gate.HeaderTenant, huge}},
		{"non-ASCII tenant header", []string{"Authorization", "Bearer s3cret", gate.HeaderTenant, "acme\u00a0corp"}},
		{"tenant header with a newline", []string{"Authorization", "Bearer s3cret", gate.HeaderSubject, "a\nb"}},
		{"many tenant headers", append([]string{"Authorization", "Bearer s3cret"}, slices.Repeat([]string{gate.HeaderTenant, "acme"}, 1000)...)},
	}
	modes := map[string]*authBundle{
		"runtime":        newAuthBundle(t, "", tokens),
		"static":         newAuthBundle(t, "s3cret", nil),
		"runtime+static": newAuthBundle(t, "s3cret", tokens),
	}
	for mode, b := range modes {
		for _, tc := range cases {
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				r := b.do(t, http.MethodPost, authRoutePath, tc.headers...)
				require.Contains(t, []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden}, r.status, "body: %.300s", r.body)
				var env contract.ErrorResponse
				require.NoError(t, json.Unmarshal(r.body, &env))
				require.Less(t, len(r.body), 4<<10, "an error never echoes the garbage back")
			})
		}
	}
	t.Cleanup(func() {
		for mode, b := range modes {
			require.Zero(t, b.reached.Load(), mode)
		}
	})
}

// routeRequestPath turns a route template into a concrete path (":id" → "x").
func routeRequestPath(template string) string {
	segs := strings.Split(template, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, ":") || s == "*" {
			segs[i] = "x"
		}
	}
	return strings.Join(segs, "/")
}

// requireRouteCapabilities proves, for each route, that a token holding none of its
// capabilities is refused with 403 naming the first, and that a token holding any one
// of them gets past authentication (the empty body may then fail validation: fine).
func requireRouteCapabilities(t *testing.T, routes []contract.Route, build func(*Server)) {
	t.Helper()
	tokens := map[string]runtime.TokenClaims{}
	for _, route := range routes {
		var others []string
		for _, c := range contract.AllCapabilities {
			if !slices.Contains(route.Capabilities, c) {
				others = append(others, c)
			}
		}
		tokens["lacking."+route.Method+route.Path] = authClaims(others...)
		for _, c := range route.Capabilities {
			tokens["holding."+c] = authClaims(c)
		}
	}
	b := newAuthBundle(t, "", tokens)
	if build != nil {
		build(b.server)
	}
	for _, route := range routes {
		path := routeRequestPath(route.Path)
		if route.Public() {
			r := b.do(t, route.Method, path)
			require.NotContains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, r.status, "%s %s", route.Method, route.Path)
			continue
		}
		r := b.do(t, route.Method, path)
		require.NotEqual(t, http.StatusNotFound, r.status,
			"%s %s is declared in contract.Routes but the server does not serve it", route.Method, route.Path)
		r.requireError(t, http.StatusUnauthorized, contract.CodeTokenMissing)
		if route.PerCall() {
			// The route needs a credential only; its calls are checked one by one
			// (the MCP door's capability matrix, cmd/agent-context).
			r := b.do(t, route.Method, path, "Authorization", "Bearer lacking."+route.Method+route.Path)
			require.NotContains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, r.status, "%s %s", route.Method, route.Path)
			continue
		}
		e := b.do(t, route.Method, path, "Authorization", "Bearer lacking."+route.Method+route.Path).
			requireError(t, http.StatusForbidden, contract.CodeTokenForbidden)
		require.Equal(t, route.Capabilities[0], e.Details["requiredCapability"], "%s %s", route.Method, route.Path)
		for _, c := range route.Capabilities {
			r := b.do(t, route.Method, path, "Authorization", "Bearer holding."+c)
			require.NotContains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, r.status,
				"%s %s with %s: %s", route.Method, route.Path, c, r.body)
		}
	}
}

// TestEveryRouteRequiresItsCapability is driven by contract.Routes(), so every route
// added later is covered without touching this test.
func TestEveryRouteRequiresItsCapability(t *testing.T) {
	t.Parallel()
	requireRouteCapabilities(t, contract.Routes(), nil)
}

// TestRouteCapabilityHarness runs the same check over test-only routes, one with two
// admitting capabilities (as POST /operations has), so the harness is proven to catch
// what it must even while contract.Routes() holds few protected routes.
func TestRouteCapabilityHarness(t *testing.T) {
	t.Parallel()
	routes := []contract.Route{
		{Method: http.MethodPost, Path: "/internal/v1/test/ops", Capabilities: []string{contract.CapMessagesDelete, contract.CapContextAdmin}},
		{Method: http.MethodGet, Path: "/internal/v1/test/items/:id", Capabilities: []string{contract.CapContextRead}},
	}
	requireRouteCapabilities(t, routes, func(s *Server) {
		for _, r := range routes {
			s.echo.Add(r.Method, r.Path, func(c echo.Context) error { return c.NoContent(http.StatusNoContent) }, s.routeMiddleware(r))
		}
	})
}

// TestScopeHeaderIDRules: in static-token and open mode the scope headers follow the ID
// rules of docs/api.md (1–191 characters, no whitespace or control characters,
// valid UTF-8, given once); a violation is 400 naming the header, and never reaches the
// handler.
func TestScopeHeaderIDRules(t *testing.T) {
	t.Parallel()
	ok191 := strings.Repeat("t", contract.MaxIDChars)
	okWide := strings.Repeat("é", contract.MaxIDChars)
	cases := []struct {
		name   string
		values []string
		limit  bool
	}{
		{"192 characters", []string{strings.Repeat("t", contract.MaxIDChars+1)}, true},
		{"192 two-byte characters", []string{strings.Repeat("é", contract.MaxIDChars+1)}, true},
		{"empty", []string{""}, false},
		{"space", []string{"a b"}, false},
		{"tab", []string{"a\tb"}, false},
		{"no-break space", []string{"a\u00a0b"}, false},
		{"line separator", []string{"a\u2028b"}, false},
		{"invalid UTF-8", []string{"a\xe9b"}, false},
		{"C1 control", []string{"a\u0085b"}, false},
		{"given twice", []string{"a", "a"}, false},
	}
	for _, static := range []string{"s3cret", ""} {
		b := newAuthBundle(t, static, nil)
		for _, header := range []string{gate.HeaderTenant, gate.HeaderProject, gate.HeaderSubject} {
			for _, tc := range cases {
				t.Run(fmt.Sprintf("static=%t/%s/%s", static != "", header, tc.name), func(t *testing.T) {
					t.Parallel()
					headers := []string{"Authorization", "Bearer s3cret"}
					for _, v := range tc.values {
						headers = append(headers, header, v)
					}
					e := b.do(t, http.MethodPost, authRoutePath, headers...).
						requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
					require.Equal(t, header, e.Details["field"])
					if tc.limit {
						require.EqualValues(t, contract.MaxIDChars, e.Details["limit"])
					}
				})
			}
			seen := b.do(t, http.MethodPost, authRoutePath, "Authorization", "Bearer s3cret", header, ok191).requireSeen(t)
			require.Contains(t, []string{seen.Tenant, seen.Project, seen.Subject}, ok191)
			seen = b.do(t, http.MethodPost, authRoutePath, "Authorization", "Bearer s3cret", header, okWide).requireSeen(t)
			require.Contains(t, []string{seen.Tenant, seen.Project, seen.Subject}, okWide)
		}
		t.Cleanup(func() { require.EqualValues(t, 2*3, b.reached.Load()) })
	}
}
