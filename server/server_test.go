package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/gate"
	"github.com/agent-context/agent-context/runtime"
)

type stubReady struct {
	current, latest int64
	err             error
}

func (s stubReady) Versions(context.Context) (int64, int64, error) { return s.current, s.latest, s.err }

type echoRequest struct {
	Name  string          `json:"name"`
	Count int             `json:"count"`
	Items []echoItem      `json:"items"`
	Meta  json.RawMessage `json:"metadata"`
}

type echoItem struct {
	Content string `json:"content"`
}

const testRoutePath = "/internal/v1/test/echo"

// testBundle is a server with one extra JSON route that echoes what it decoded, so the
// host's pipeline (routing, auth, capability, decoding, errors) is tested end to end.
type testBundle struct {
	server *Server
	logs   *strings.Builder
	// registry holds the gate's rate-limit metrics, when the test gave it one.
	registry *prometheus.Registry
}

func setup(t *testing.T, cfg Config) *testBundle {
	t.Helper()
	logs := &strings.Builder{}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	}
	if cfg.Ready == nil {
		cfg.Ready = stubReady{current: 1, latest: 1}
	}
	s := New(cfg)
	route := contract.Route{Method: http.MethodPost, Path: testRoutePath, Capabilities: []string{contract.CapMessagesAppend}}
	s.echo.Add(route.Method, route.Path, jsonBody(s.gate, func(_ context.Context, p runtime.Principal, req *echoRequest) (int, any, error) {
		if req.Name == "panic" {
			panic("boom")
		}
		if req.Name == "fail" {
			return 0, nil, errors.New("pq: relation \"secret_table\" does not exist")
		}
		return http.StatusOK, map[string]any{"name": req.Name, "tenant": p.TenantID, "subject": p.Subject}, nil
	}), s.routeMiddleware(route))
	return &testBundle{server: s, logs: logs}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (b *testBundle) do(t *testing.T, method, path, contentType, body string, headers ...string) response {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	b.server.Handler().ServeHTTP(rec, req)
	return response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

func requireEnvelope(t *testing.T, r response, status int, code string) contract.ErrorBody {
	t.Helper()
	require.Equal(t, status, r.status, "body: %s", r.body)
	var env contract.ErrorResponse
	require.NoError(t, json.Unmarshal(r.body, &env), "body: %s", r.body)
	require.Equal(t, status, env.Status)
	require.Equal(t, code, env.Error.Code)
	require.Equal(t, contract.Codes[code].Category, env.Error.Category)
	require.Equal(t, contract.Codes[code].Retryable, env.Error.Retryable)
	require.NotEmpty(t, env.Error.Message)
	require.Equal(t, env.Message, env.Error.Message)
	require.NotNil(t, env.Error.Details)
	require.Equal(t, r.header.Get("X-Request-Id"), env.Error.RequestID)
	return env.Error
}

func TestHealth(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Ready: stubReady{err: errors.New("database down")}})
	r := b.do(t, http.MethodGet, "/health", "", "")
	require.Equal(t, http.StatusOK, r.status)
	require.JSONEq(t, `{"status":"ok","service":"agent-context-infra"}`, string(r.body))
	require.NotEmpty(t, r.header.Get("X-Request-Id"))
}

func TestReady(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		ready  stubReady
		status int
		reason string
	}{
		{"current", stubReady{current: 3, latest: 3}, http.StatusOK, ""},
		{"pending migrations", stubReady{current: 2, latest: 3}, http.StatusServiceUnavailable, "migrations_pending"},
		{"database down", stubReady{err: errors.New("dial tcp: connection refused")}, http.StatusServiceUnavailable, "database"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{Ready: tc.ready})
			r := b.do(t, http.MethodGet, "/ready", "", "")
			if tc.status == http.StatusOK {
				require.Equal(t, http.StatusOK, r.status)
				require.JSONEq(t, `{"status":"ok","schemaVersion":3,"latestVersion":3}`, string(r.body))
				return
			}
			e := requireEnvelope(t, r, tc.status, contract.CodeServiceUnavailable)
			require.Equal(t, tc.reason, e.Details["reason"])
			require.NotContains(t, string(r.body), "connection refused")
		})
	}
}

func TestReadyWhileDraining(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.server.Drain()
	e := requireEnvelope(t, b.do(t, http.MethodGet, "/ready", "", ""), http.StatusServiceUnavailable, contract.CodeServiceUnavailable)
	require.Equal(t, "draining", e.Details["reason"])
}

func TestRequestID(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	r := b.do(t, http.MethodGet, "/health", "", "", "X-Request-Id", "caller-id-42")
	require.Equal(t, "caller-id-42", r.header.Get("X-Request-Id"))

	for _, good := range []string{strings.Repeat("a", 128), "!", "~", `"quoted"/<x>`} {
		r := b.do(t, http.MethodGet, "/nope", "", "", "X-Request-Id", good)
		require.Equal(t, good, r.header.Get("X-Request-Id"))
		requireEnvelope(t, r, http.StatusNotFound, contract.CodeRouteNotFound)
	}
	for _, bad := range []string{"has space", strings.Repeat("a", 129), "tab\there", "ünïcode", "del\x7f"} {
		r := b.do(t, http.MethodGet, "/nope", "", "", "X-Request-Id", bad)
		got := r.header.Get("X-Request-Id")
		require.NotEqual(t, bad, got)
		require.True(t, validRequestID(got))
		requireEnvelope(t, r, http.StatusNotFound, contract.CodeRouteNotFound)
	}
	r = b.do(t, http.MethodGet, "/health", "", "", "X-Request-Id", "")
	require.True(t, validRequestID(r.header.Get("X-Request-Id")))
}

func TestRoutingErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Gate: staticToken("secret")})
	// Routing comes first: unknown routes are 404 with or without a credential.
	requireEnvelope(t, b.do(t, http.MethodPost, "/internal/v1/context/nope", "application/json", "{}"), http.StatusNotFound, contract.CodeRouteNotFound)
	requireEnvelope(t, b.do(t, http.MethodGet, "/nope", "", "", "Authorization", "Bearer secret"), http.StatusNotFound, contract.CodeRouteNotFound)
	requireEnvelope(t, b.do(t, http.MethodGet, testRoutePath, "", ""), http.StatusMethodNotAllowed, contract.CodeMethodNotAllowed)
	requireEnvelope(t, b.do(t, http.MethodPost, "/health", "application/json", "{}"), http.StatusMethodNotAllowed, contract.CodeMethodNotAllowed)
}

// staticToken is a gate in static-token mode.
func staticToken(token string) *gate.Gate {
	return gate.New(gate.Config{Auth: gate.Auth{StaticToken: token}})
}

// foreignRoutes are the routes of contract.Routes that the host does not serve itself:
// other doors (MCP, Google A2A) serve them, mounted by the binary.
func foreignRoutes() []contract.Route {
	s := New(Config{Ready: stubReady{}})
	served := map[string]bool{}
	for _, r := range s.echo.Routes() {
		served[r.Method+" "+r.Path] = true
	}
	var out []contract.Route
	for _, r := range contract.Routes() {
		if !served[r.Method+" "+r.Path] {
			out = append(out, r)
		}
	}
	return out
}

// gateDoor stands in for another door: like every door it authenticates and admits
// its requests through the gate (the route's capability), then answers 200.
type gateDoor struct {
	gate   *gate.Gate
	routes []contract.Route
}

func (d gateDoor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for _, route := range d.routes {
		if route.Method != r.Method || route.Path != r.URL.Path {
			continue
		}
		if !route.Public() {
			p, err := d.gate.Authenticate(r)
			if err == nil {
				err = d.gate.Admit(r.Context(), p, gate.RateName(route), route)
			}
			if err != nil {
				d.gate.WriteError(w, r, err)
				return
			}
		}
		w.WriteHeader(http.StatusOK)
		return
	}
	http.NotFound(w, r)
}

// withDoors is cfg with a stand-in for every other door, over cfg's gate.
func withDoors(cfg Config) Config {
	if cfg.Gate == nil {
		cfg.Gate = gate.New(gate.Config{})
	}
	routes := foreignRoutes()
	cfg.Doors = []Door{{Routes: routes, Handler: gateDoor{gate: cfg.Gate, routes: routes}}}
	return cfg
}

func TestStaticTokenMode(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Gate: staticToken("s3cret")})
	body := `{"name":"x"}`
	requireEnvelope(t, b.do(t, http.MethodPost, testRoutePath, "application/json", body), http.StatusUnauthorized, contract.CodeTokenMissing)
	requireEnvelope(t, b.do(t, http.MethodPost, testRoutePath, "application/json", body, "Authorization", "Bearer wrong"), http.StatusUnauthorized, contract.CodeTokenInvalid)
	requireEnvelope(t, b.do(t, http.MethodPost, testRoutePath, "application/json", body, "Authorization", "Basic s3cret"), http.StatusUnauthorized, contract.CodeTokenMissing)

	r := b.do(t, http.MethodPost, testRoutePath, "application/json", body, "Authorization", "Bearer s3cret")
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.JSONEq(t, `{"name":"x","tenant":"local","subject":"service"}`, string(r.body))

	r = b.do(t, http.MethodPost, testRoutePath, "application/json", body, "Authorization", "Bearer s3cret",
		"x-infra-tenant-id", "acme", "x-infra-subject", "planner")
	require.JSONEq(t, `{"name":"x","tenant":"acme","subject":"planner"}`, string(r.body))

	e := requireEnvelope(t, b.do(t, http.MethodPost, testRoutePath, "application/json", body, "Authorization", "Bearer s3cret",
		"x-infra-project-id", "bad id"), http.StatusBadRequest, contract.CodeValidationFailed)
	require.Equal(t, "x-infra-project-id", e.Details["field"])
	// Authentication happens before the body is read: a bad token with a broken body is 401.
	requireEnvelope(t, b.do(t, http.MethodPost, testRoutePath, "text/plain", "{", "Authorization", "Bearer wrong"), http.StatusUnauthorized, contract.CodeTokenInvalid)
}

func TestOpenMode(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	r := b.do(t, http.MethodPost, testRoutePath, "application/json", `{"name":"x"}`, "x-infra-tenant-id", "t1")
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.JSONEq(t, `{"name":"x","tenant":"t1","subject":"service"}`, string(r.body))
}

func TestDecodingErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Gate: gate.New(gate.Config{MaxBodyBytes: 1 << 10})})
	cases := []struct {
		name        string
		contentType string
		body        string
		status      int
		code        string
		field       string
	}{
		{"unknown field", "application/json", `{"name":"x","tenantId":"other"}`, 400, contract.CodeValidationFailed, "tenantId"},
		{"wrong case", "application/json", `{"Name":"x"}`, 400, contract.CodeValidationFailed, "Name"},
		{"nested unknown field", "application/json", `{"items":[{"content":"a"},{"content":"b","extra":1}]}`, 400, contract.CodeValidationFailed, "items[1].extra"},
		{"duplicate key", "application/json", `{"name":"x","name":"y"}`, 400, contract.CodeValidationFailed, "name"},
		{"duplicate key in metadata", "application/json", `{"metadata":{"a":1,"a":2}}`, 400, contract.CodeValidationFailed, "metadata.a"},
		{"wrong type", "application/json", `{"count":"3"}`, 400, contract.CodeValidationFailed, "count"},
		{"fraction for integer", "application/json", `{"count":1.5}`, 400, contract.CodeValidationFailed, "count"},
		{"truncated value", "application/json", `{"name":`, 400, contract.CodeValidationFailed, "name"},
		{"malformed", "application/json", `{name}`, 400, contract.CodeValidationFailed, "body"},
		{"trailing data", "application/json", `{"name":"x"} {}`, 400, contract.CodeValidationFailed, "body"},
		{"empty body", "application/json", ``, 400, contract.CodeValidationFailed, "body"},
		{"not an object", "application/json", `[1,2]`, 400, contract.CodeValidationFailed, "body"},
		{"invalid utf-8", "application/json", "{\"name\":\"\xff\"}", 400, contract.CodeValidationFailed, "name"},
		{"text content type", "text/plain", `{"name":"x"}`, 415, contract.CodeUnsupportedMediaType, "Content-Type"},
		{"missing content type", "", `{"name":"x"}`, 415, contract.CodeUnsupportedMediaType, "Content-Type"},
		{"latin-1 charset", "application/json; charset=latin1", `{"name":"x"}`, 415, contract.CodeUnsupportedMediaType, "Content-Type"},
		{"oversized body", "application/json", `{"name":"` + strings.Repeat("x", 2<<10) + `"}`, 413, contract.CodePayloadTooLarge, "body"},
		{"null body", "application/json", `null`, 400, contract.CodeValidationFailed, "body"},
		{"number body", "application/json", ` 42`, 400, contract.CodeValidationFailed, "body"},
		{"whitespace body", "application/json", " \r\n\t ", 400, contract.CodeValidationFailed, "body"},
		{"BOM only", "application/json", "\uFEFF", 400, contract.CodeValidationFailed, "body"},
		{"two BOMs", "application/json", "\uFEFF\uFEFF{}", 400, contract.CodeValidationFailed, "body"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := requireEnvelope(t, b.do(t, http.MethodPost, testRoutePath, tc.contentType, tc.body), tc.status, tc.code)
			require.Equal(t, tc.field, e.Details["field"])
			if tc.code == contract.CodePayloadTooLarge {
				require.EqualValues(t, 1<<10, e.Details["limit"])
			}
		})
	}
	r := b.do(t, http.MethodPost, testRoutePath, "application/json; charset=UTF-8", `{"name":"ok","metadata":{"k":[1,2]}}`)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	// RFC 8259 §8.1: a leading byte order mark is ignored.
	r = b.do(t, http.MethodPost, testRoutePath, "application/json", "\uFEFF"+`{"name":"bom"}`)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.JSONEq(t, `{"name":"bom","tenant":"local","subject":"service"}`, string(r.body))
}

// TestCompressedBodiesAreRefused: a body with a content coding is 415 naming the
// header, whatever it holds; it is never read as JSON (nor answered 500).
func TestCompressedBodiesAreRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	_, err := w.Write([]byte(`{"name":"x"}`))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	for _, tc := range []struct {
		name, encoding, body string
	}{
		{"gzip body", "gzip", gz.String()},
		{"plain body labelled gzip", "gzip", `{"name":"x"}`},
		{"deflate", "deflate", `{"name":"x"}`},
		{"list", "identity, br", `{"name":"x"}`},
		{"unknown coding", "x-custom", `{"name":"x"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := requireEnvelope(t, b.do(t, http.MethodPost, testRoutePath, "application/json", tc.body,
				"Content-Encoding", tc.encoding), http.StatusUnsupportedMediaType, contract.CodeUnsupportedMediaType)
			require.Equal(t, "Content-Encoding", e.Details["field"])
		})
	}
	for _, identity := range []string{"identity", "IDENTITY", ""} {
		r := b.do(t, http.MethodPost, testRoutePath, "application/json", `{"name":"x"}`, "Content-Encoding", identity)
		require.Equal(t, http.StatusOK, r.status, string(r.body))
	}
}

// failingReader fails the test when anything reads it.
type failingReader struct {
	t    *testing.T
	read *atomic.Bool
}

func (f failingReader) Read([]byte) (int, error) {
	f.read.Store(true)
	return 0, errors.New("the body must not be read")
}

func TestDeclaredLengthOverLimitIsRefusedUnread(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Gate: gate.New(gate.Config{MaxBodyBytes: 1 << 10})})
	var read atomic.Bool
	req := httptest.NewRequest(http.MethodPost, testRoutePath, failingReader{t: t, read: &read})
	req.ContentLength = 1<<10 + 1
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	b.server.Handler().ServeHTTP(rec, req)
	e := requireEnvelope(t, response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()},
		http.StatusRequestEntityTooLarge, contract.CodePayloadTooLarge)
	require.Equal(t, "body", e.Details["field"])
	require.EqualValues(t, 1<<10, e.Details["limit"])
	require.False(t, read.Load())
}

// TestMethods: HEAD answers every GET route without a body; OPTIONS on a known path is
// 204 with Allow (echo's answer, kept: it is what HTTP says OPTIONS means); any other
// method on a known path is 405 with Allow; an unknown path is 404 whatever the method;
// a trailing slash is another path.
func TestMethods(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Gate: staticToken("s3cret")})

	// (net/http drops the body of a HEAD answer; the end-to-end test sees that.)
	r := b.do(t, http.MethodHead, "/health", "", "")
	require.Equal(t, http.StatusOK, r.status)
	r = b.do(t, http.MethodHead, "/ready", "", "")
	require.Equal(t, http.StatusOK, r.status)

	// HEAD goes through authentication like GET.
	route := contract.Route{Method: http.MethodGet, Path: "/internal/v1/test/status", Capabilities: []string{contract.CapMessagesRead}}
	b.server.handleForTest(t, route, func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]any{"ok": true}) })
	r = b.do(t, http.MethodHead, route.Path, "", "")
	require.Equal(t, http.StatusUnauthorized, r.status)
	require.Empty(t, r.body)
	require.Equal(t, http.StatusOK, b.do(t, http.MethodHead, route.Path, "", "", "Authorization", "Bearer s3cret").status)

	r = b.do(t, http.MethodOptions, "/health", "", "")
	require.Equal(t, http.StatusNoContent, r.status)
	require.Equal(t, "OPTIONS, GET, HEAD", r.header.Get("Allow"))

	for _, m := range []string{http.MethodPut, http.MethodDelete, http.MethodPatch, "TRACE", "FOO"} {
		r := b.do(t, m, "/health", "", "")
		requireEnvelope(t, r, http.StatusMethodNotAllowed, contract.CodeMethodNotAllowed)
		require.Equal(t, "OPTIONS, GET, HEAD", r.header.Get("Allow"))
	}
	r = b.do(t, http.MethodGet, testRoutePath, "", "", "Authorization", "Bearer s3cret")
	requireEnvelope(t, r, http.StatusMethodNotAllowed, contract.CodeMethodNotAllowed)
	require.Equal(t, http.StatusMethodNotAllowed, b.do(t, http.MethodHead, testRoutePath, "", "").status)

	for _, path := range []string{"/health/", testRoutePath + "/", "/Health", "//health", "/health?x=1/"} {
		if strings.Contains(path, "?") {
			require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, path, "", "").status, "a query string is not part of the path")
			continue
		}
		requireEnvelope(t, b.do(t, http.MethodPost, path, "application/json", "{}", "Authorization", "Bearer s3cret"),
			http.StatusNotFound, contract.CodeRouteNotFound)
		r := b.do(t, http.MethodHead, path, "", "")
		require.Equal(t, http.StatusNotFound, r.status, path)
		require.Empty(t, r.body)
	}
}

// handleForTest registers a test-only route the way handle does, without the
// contract.Routes check.
func (s *Server) handleForTest(t *testing.T, route contract.Route, h echo.HandlerFunc) {
	t.Helper()
	mw := s.routeMiddleware(route)
	s.echo.Add(route.Method, route.Path, h, mw)
	if route.Method == http.MethodGet {
		s.echo.Add(http.MethodHead, route.Path, h, mw)
	}
}

func TestInternalErrorsDoNotLeak(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	r := b.do(t, http.MethodPost, testRoutePath, "application/json", `{"name":"fail"}`, "X-Request-Id", "req-fail")
	requireEnvelope(t, r, http.StatusInternalServerError, contract.CodeInternal)
	require.NotContains(t, string(r.body), "secret_table")
	require.Contains(t, b.logs.String(), "secret_table")
	require.Contains(t, b.logs.String(), "req-fail")
}

func TestPanicBecomes500(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	r := b.do(t, http.MethodPost, testRoutePath, "application/json", `{"name":"panic"}`, "X-Request-Id", "req-panic")
	requireEnvelope(t, r, http.StatusInternalServerError, contract.CodeInternal)
	require.NotContains(t, string(r.body), "boom")
	logs := b.logs.String()
	require.Contains(t, logs, `"panic":"boom"`)
	require.Contains(t, logs, "req-panic")
}

func TestRequestLogLine(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Gate: staticToken("tok-must-not-be-logged")})
	r := b.do(t, http.MethodPost, testRoutePath, "application/json", `{"name":"content-must-not-be-logged"}`,
		"Authorization", "Bearer tok-must-not-be-logged", "X-Request-Id", "req-log", "x-infra-tenant-id", "acme")
	require.Equal(t, http.StatusOK, r.status)
	b.do(t, http.MethodGet, "/random/scanner/path", "", "")

	var lines []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.logs.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m))
		lines = append(lines, m)
	}
	require.Len(t, lines, 2)
	require.Equal(t, "req-log", lines[0]["request_id"])
	require.Equal(t, testRoutePath, lines[0]["route"])
	require.EqualValues(t, 200, lines[0]["status"])
	require.Equal(t, "acme", lines[0]["tenant"])
	require.Contains(t, lines[0], "latency_ms")
	require.Equal(t, "unmatched", lines[1]["route"])
	require.Equal(t, contract.CodeRouteNotFound, lines[1]["code"])
	require.NotContains(t, b.logs.String(), "tok-must-not-be-logged")
	require.NotContains(t, b.logs.String(), "content-must-not-be-logged")
}

func TestEveryRouteDeclaresACapability(t *testing.T) {
	t.Parallel()
	s := New(withDoors(Config{Ready: stubReady{}}))
	require.NoError(t, checkRoutes(s.echo.Routes(), contract.Routes()))
	for _, r := range contract.Routes() {
		if r.Public() {
			require.Contains(t, []string{contract.PathHealth, contract.PathReady, contract.PathMetrics,
				contract.PathOpenAPIJSON, contract.PathOpenAPIYAML, contract.RouteA2AAgentCard.Path,
				contract.PathWellKnownAgentCard, contract.PathWellKnownAgentJSON, contract.PathOAuthProtectedResource}, r.Path,
				"only health, readiness, metrics, the OpenAPI document, the agent card and the MCP endpoint's "+
					"protected resource metadata may be public; %s %s has no capability", r.Method, r.Path)
		}
	}
}

func TestCheckRoutesFails(t *testing.T) {
	t.Parallel()
	e := echo.New()
	e.GET("/health", func(echo.Context) error { return nil })
	e.POST("/internal/v1/undeclared", func(echo.Context) error { return nil })
	err := checkRoutes(e.Routes(), []contract.Route{contract.RouteHealth})
	require.ErrorContains(t, err, "POST /internal/v1/undeclared is served but has no entry")

	healthOnly := echo.New()
	healthOnly.GET("/health", func(echo.Context) error { return nil })
	err = checkRoutes(healthOnly.Routes(), []contract.Route{contract.RouteHealth, {Method: "POST", Path: "/x", Capabilities: []string{"a"}}})
	require.ErrorContains(t, err, "POST /x is declared in contract.Routes but not served")

	// HEAD may only mirror a declared GET.
	head := echo.New()
	head.GET("/health", func(echo.Context) error { return nil })
	head.HEAD("/health", func(echo.Context) error { return nil })
	require.NoError(t, checkRoutes(head.Routes(), []contract.Route{contract.RouteHealth}))
	head.HEAD("/internal/v1/undeclared", func(echo.Context) error { return nil })
	err = checkRoutes(head.Routes(), []contract.Route{contract.RouteHealth})
	require.ErrorContains(t, err, "HEAD /internal/v1/undeclared is served but has no entry")

	require.Panics(t, func() {
		s := New(Config{Ready: stubReady{}})
		s.handle(contract.Route{Method: http.MethodPost, Path: "/internal/v1/undeclared"}, func(echo.Context) error { return nil })
	})
}

func TestBodyNotReadBeforeCapabilityCheck(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	route := contract.Route{Method: http.MethodPost, Path: "/internal/v1/test/admin", Capabilities: []string{contract.CapContextAdmin}}
	read := false
	b.server.echo.Add(route.Method, route.Path, func(c echo.Context) error {
		read = true
		_, _ = io.ReadAll(c.Request().Body)
		return nil
	}, b.server.routeMiddleware(route))
	b.server.gate = gate.New(gate.Config{Auth: gate.Auth{Verifier: denyAllCaps{}}})
	// The body is a reader that records any read: neither the middleware nor the
	// handler may touch it.
	var bodyRead atomic.Bool
	req := httptest.NewRequest(http.MethodPost, route.Path, failingReader{t: t, read: &bodyRead})
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer x.y.z")
	rec := httptest.NewRecorder()
	b.server.Handler().ServeHTTP(rec, req)
	e := requireEnvelope(t, response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()},
		http.StatusForbidden, contract.CodeTokenForbidden)
	require.Equal(t, contract.CapContextAdmin, e.Details["requiredCapability"])
	require.False(t, read)
	require.False(t, bodyRead.Load())
}

type denyAllCaps struct{}

func (denyAllCaps) Verify(context.Context, string) (runtime.TokenClaims, error) {
	return runtime.TokenClaims{Subject: "s", TenantID: "t", ProjectID: "p", Capabilities: []string{contract.CapMessagesRead}}, nil
}
