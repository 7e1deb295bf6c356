package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/contract/client"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// testApp is the real Main serving on a loopback port over a fresh database cloned
// from the migrated template. End-to-end tests talk to it over HTTP, as clients do.
type testApp struct {
	main   *Main
	base   string
	client *http.Client
	dsn    string
}

// startApp starts Main in open mode on its own database with the hash embedder; opts
// may change the config (auth mode, limits, the embedder) before it starts.
func startApp(t testing.TB, opts ...func(*Config)) *testApp {
	t.Helper()
	return startMain(t, nil, opts...)
}

// startMain is startApp with a hook that prepares Main before it runs (tracing).
func startMain(t testing.TB, prepare func(*Main), opts ...func(*Config)) *testApp {
	t.Helper()
	return startAppOn(t, pgtest.NewDSN(t), prepare, opts...)
}

// startAppOn is startMain on the database dsn: a second app on the database of a first
// is a second replica of the same service.
func startAppOn(t testing.TB, dsn string, prepare func(*Main), opts ...func(*Config)) *testApp {
	t.Helper()
	cfg, err := LoadConfig(func(string) string { return "" })
	require.NoError(t, err)
	cfg.Bind = "127.0.0.1:0"
	cfg.DatabaseURL = dsn
	cfg.AutoMigrate = false
	cfg.LogLevel = slog.LevelError + 1 // above error: tests assert on responses, not log noise
	cfg.DrainTimeout = 5 * time.Second
	cfg.DrainDelay = 0 // no load balancer to tell
	// The hash embedder is fast and needs no model; tests of the local one say so.
	cfg.Embedder = EmbedderHash
	for _, o := range opts {
		o(&cfg)
	}
	m := NewMain(cfg)
	if prepare != nil {
		prepare(m)
	}
	require.NoError(t, m.Run(context.Background()))
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	return &testApp{main: m, base: "http://" + m.Addr(), client: &http.Client{Timeout: time.Minute}, dsn: dsn}
}

// typed returns the typed client of the app; headers (name, value pairs) go with every
// request, Authorization included.
func (a *testApp) typed(headers ...string) *client.Client {
	opts := []client.Option{client.WithBaseURL(a.base), client.WithHTTPClient(a.client)}
	for i := 0; i+1 < len(headers); i += 2 {
		opts = append(opts, client.WithHeader(headers[i], headers[i+1]))
	}
	return client.New(opts...)
}

// testResponse is a response read whole.
type testResponse struct {
	Status int
	Header http.Header
	Body   []byte
}

// do sends a request; body is JSON-encoded unless it is a string or []byte, which go
// as they are. headers are name, value pairs.
func (a *testApp) do(t *testing.T, method, path string, body any, headers ...string) *testResponse {
	t.Helper()
	r, err := a.send(context.Background(), method, path, body, headers...)
	require.NoError(t, err)
	return r
}

// send is do without assertions, for requests sent off the test's goroutine.
func (a *testApp) send(ctx context.Context, method, path string, body any, headers ...string) (*testResponse, error) {
	var reader io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		reader = bytes.NewReader([]byte(b))
	case []byte:
		reader = bytes.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		reader = bytes.NewReader(buf)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, reader)
	if err != nil {
		return nil, err
	}
	if reader != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return &testResponse{Status: resp.StatusCode, Header: resp.Header, Body: out}, err
}

// post sends a JSON POST.
func (a *testApp) post(t *testing.T, path string, body any, headers ...string) *testResponse {
	t.Helper()
	return a.do(t, http.MethodPost, path, body, headers...)
}

// requireOK asserts the status and decodes the body into v (when v is not nil).
func (r *testResponse) requireOK(t *testing.T, status int, v any) {
	t.Helper()
	require.Equal(t, status, r.Status, "body: %s", r.Body)
	if v != nil {
		require.NoError(t, json.Unmarshal(r.Body, v), "body: %s", r.Body)
	}
}

// requireError asserts the status and the envelope's code and returns the envelope.
func (r *testResponse) requireError(t *testing.T, status int, code string) contract.ErrorBody {
	t.Helper()
	require.Equal(t, status, r.Status, "body: %s", r.Body)
	var env contract.ErrorResponse
	require.NoError(t, json.Unmarshal(r.Body, &env), "body: %s", r.Body)
	require.Equal(t, code, env.Error.Code, "body: %s", r.Body)
	require.Equal(t, status, env.Status)
	require.Equal(t, r.Header.Get("X-Request-Id"), env.Error.RequestID)
	require.NotNil(t, env.Error.Details)
	return env.Error
}

// minter mints runtime tokens with the key `token keygen` wrote for a securedApp.
type minter struct {
	t      *testing.T
	getenv func(string) string
}

// bearer returns an Authorization value for subject "agent" of tenant/project
// acme/alpha holding caps.
func (m minter) bearer(caps ...string) string {
	m.t.Helper()
	return m.tenantBearer("acme", caps...)
}

// tenantBearer returns an Authorization value for subject "agent-<tenant>" of tenant
// in project "alpha" holding caps.
func (m minter) tenantBearer(tenant string, caps ...string) string {
	m.t.Helper()
	return m.scopeBearer(tenant, "alpha", caps...)
}

// scopeBearer returns an Authorization value for subject "agent-<tenant>" of
// tenant/project holding caps.
func (m minter) scopeBearer(tenant, project string, caps ...string) string {
	m.t.Helper()
	return m.subjectBearer("agent-"+tenant, tenant, project, caps...)
}

// subjectBearer returns an Authorization value for subject of tenant/project holding
// caps.
func (m minter) subjectBearer(subject, tenant, project string, caps ...string) string {
	m.t.Helper()
	args := []string{"mint", "--sub", subject, "--tenant", tenant, "--project", project}
	for _, c := range caps {
		args = append(args, "--cap", c)
	}
	return "Bearer " + strings.TrimSpace(mustToken(m.t, m.getenv, args...))
}

// startSecuredApp starts Main in runtime-token mode with a key pair from `token keygen`
// and returns it with a minter of tokens it accepts.
func startSecuredApp(t *testing.T, opts ...func(*Config)) (*testApp, minter) {
	t.Helper()
	env, getenv := tokenEnv(t)
	mustToken(t, getenv, "keygen")
	app := startApp(t, append([]func(*Config){func(c *Config) {
		c.DataDir = env["AGENT_CONTEXT_DATA_DIR"]
		c.JWKSFile = filepath.Join(c.DataDir, "keys", "jwks.json")
	}}, opts...)...)
	return app, minter{t: t, getenv: getenv}
}
