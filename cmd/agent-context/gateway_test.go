package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
)

// The gateway tests run Debian's nginx with deploy/gateway's configuration, rendered by
// deploy/gateway/render.sh exactly as the gateway image renders it, in front of the
// real service (or, where the test must see what arrives upstream, a recording
// upstream). deploy/local/setup.sh installs nginx; without it these tests fail.

// gatewayRenderScript is the renderer the gateway image runs too.
var gatewayRenderScript = filepath.Join("..", "..", "deploy", "gateway", "render.sh")

// nginxBinary finds Debian's nginx or fails the test with what to do.
func nginxBinary(t testing.TB) string {
	t.Helper()
	if path, err := exec.LookPath("nginx"); err == nil {
		return path
	}
	const debian = "/usr/sbin/nginx"
	if _, err := os.Stat(debian); err == nil {
		return debian
	}
	t.Fatalf("nginx not found (looked in PATH and %s): the gateway end-to-end tests need Debian's nginx; "+
		"run `bash deploy/local/setup.sh` (make test runs it) or `apt-get install nginx`", debian)
	return ""
}

// gateway is one nginx process serving deploy/gateway's configuration. Its embedded
// testApp talks to the gateway (base is the gateway's URL).
type gateway struct {
	*testApp
	addr      string
	accessLog string
}

// syncBuffer collects a process's output for the failure message.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startGateway renders the configuration for upstream (host:port) and starts nginx on
// a free loopback port. As root, the workers run as nobody, the way an operator runs it.
func startGateway(t testing.TB, upstream string) *gateway {
	t.Helper()
	nginx := nginxBinary(t)
	runDir, err := os.MkdirTemp("", "agent-context-gateway-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(runDir) })
	// nginx's workers reach their temp directories through this one.
	require.NoError(t, os.Chmod(runDir, 0o755))
	env := append(os.Environ(),
		"GATEWAY_UPSTREAM="+upstream,
		"GATEWAY_RUN_DIR="+runDir,
		"GATEWAY_WORKERS=1",
		"GATEWAY_ACCESS_LOG="+filepath.Join(runDir, "access.log"),
		"GATEWAY_ERROR_LOG=stderr",
	)
	if os.Geteuid() == 0 {
		u, err := user.Lookup("nobody")
		require.NoError(t, err, "running nginx as root needs an unprivileged user for its workers")
		g, err := user.LookupGroupId(u.Gid)
		require.NoError(t, err)
		env = append(env, "GATEWAY_USER="+u.Username, "GATEWAY_GROUP="+g.Name)
	}
	// The port is found by binding :0 and released for nginx; another process may take
	// it in between, so a failed bind is retried with a fresh port.
	for attempt := 1; ; attempt++ {
		addr := freeLoopbackAddr(t)
		render := exec.Command("sh", gatewayRenderScript)
		render.Env = append(env, "GATEWAY_LISTEN="+addr)
		out, err := render.CombinedOutput()
		require.NoError(t, err, "render.sh: %s", out)
		conf := strings.TrimSpace(string(out))

		var logs syncBuffer
		cmd := exec.Command(nginx, "-e", "stderr", "-c", conf)
		cmd.Stdout, cmd.Stderr = &logs, &logs
		// Its own process group: the cleanup can end master and workers together.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		require.NoError(t, cmd.Start())
		proc := &process{cmd: cmd, done: make(chan struct{})}
		go func() { proc.err = cmd.Wait(); close(proc.done) }()

		if err := proc.waitListening(addr, filepath.Join(runDir, "nginx.pid")); err != nil {
			proc.stop()
			if strings.Contains(logs.String(), "Address already in use") && attempt < 5 {
				continue
			}
			t.Fatalf("nginx did not start: %v\n%s", err, logs.String())
		}
		t.Cleanup(func() {
			proc.stop()
			if t.Failed() {
				t.Logf("nginx output:\n%s", logs.String())
			}
		})
		return &gateway{
			testApp:   &testApp{base: "http://" + addr, client: &http.Client{Timeout: time.Minute}},
			addr:      addr,
			accessLog: filepath.Join(runDir, "access.log"),
		}
	}
}

// freeLoopbackAddr returns a loopback address whose port was free a moment ago.
func freeLoopbackAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// process is a started nginx master; done closes when it has exited.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// waitListening returns once this nginx has written its pid file (it does so after it
// bound its port, so another process that took the port cannot pass for it) and addr
// accepts connections, or an error when nginx exits first or is not up in a minute.
func (p *process) waitListening(addr, pidFile string) error {
	want := strconv.Itoa(p.cmd.Process.Pid)
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("nginx exited: %v", p.err)
		default:
		}
		if pid, err := os.ReadFile(pidFile); err == nil && strings.TrimSpace(string(pid)) == want {
			if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				return conn.Close()
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.New("nginx is not listening after a minute")
}

// stop asks nginx to shut down gracefully and kills its process group (master and
// workers) if it has not exited after ten seconds.
func (p *process) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// seenRequest is what the recording upstream received.
type seenRequest struct {
	Method string
	URI    string
	Host   string
	Header http.Header
	Body   int
}

// recordingUpstream stands in for the service where a test must see exactly what
// arrives: it records every request and answers 200, echoing X-Request-Id as the
// service does.
type recordingUpstream struct {
	server *httptest.Server
	mu     sync.Mutex
	seen   []seenRequest
}

func startRecordingUpstream(t *testing.T) *recordingUpstream {
	t.Helper()
	u := &recordingUpstream{}
	u.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		u.mu.Lock()
		u.seen = append(u.seen, seenRequest{Method: r.Method, URI: r.RequestURI, Host: r.Host, Header: r.Header.Clone(), Body: int(n)})
		u.mu.Unlock()
		w.Header().Set("X-Request-Id", r.Header.Get("X-Request-Id"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"upstream":true}`)
	}))
	t.Cleanup(u.server.Close)
	return u
}

func (u *recordingUpstream) addr() string { return strings.TrimPrefix(u.server.URL, "http://") }

// take returns the requests seen since the last call.
func (u *recordingUpstream) take() []seenRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	seen := u.seen
	u.seen = nil
	return seen
}

// requireGatewayError asserts an error answer is the service's envelope exactly: the
// code table's status, category and retryability, no member the contract does not
// name, application/json, and requestId equal to the X-Request-Id header.
func requireGatewayError(t *testing.T, r *testResponse, status int, code string) contract.ErrorBody {
	t.Helper()
	e := r.requireError(t, status, code)
	info := contract.Codes[code]
	require.Equal(t, info.Status, status)
	require.Equal(t, info.Category, e.Category, "body: %s", r.Body)
	require.Equal(t, info.Retryable, e.Retryable, "body: %s", r.Body)
	require.NotEmpty(t, e.Message)
	require.NotEmpty(t, e.RequestID)
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.DisallowUnknownFields()
	var env contract.ErrorResponse
	require.NoError(t, dec.Decode(&env), "body: %s", r.Body)
	require.Equal(t, env.Error.Message, env.Message)
	require.Equal(t, "application/json", r.Header.Get("Content-Type"))
	return e
}

// rawGatewayRequest sends request as it is (net/http cleans or refuses some of these)
// and reads the one answer.
func rawGatewayRequest(t *testing.T, addr, request string) *testResponse {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(time.Minute)))
	_, err = io.WriteString(conn, request)
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return &testResponse{Status: resp.StatusCode, Header: resp.Header, Body: body}
}

// rawJSONRequest is a request for path with the body {}, its path sent as it is.
func rawJSONRequest(method, path string) string {
	return method + " " + path + " HTTP/1.1\r\nHost: gw.test\r\nConnection: close\r\n" +
		"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
}

// TestGatewayRewritesPrefixes proves the mapping on the wire: each public prefix
// arrives upstream under /internal/v1/..., the A2A root endpoints unchanged, paths
// normalized so that none leaves its prefix, and nothing else reaches the upstream.
func TestGatewayRewritesPrefixes(t *testing.T) {
	t.Parallel()
	up := startRecordingUpstream(t)
	gw := startGateway(t, up.addr())

	for _, c := range []struct{ method, public, upstream string }{
		{http.MethodPost, "/v1/context/messages/batch", "/internal/v1/context/messages/batch"},
		{http.MethodPost, "/v1/context/windows/get?trace=1", "/internal/v1/context/windows/get?trace=1"},
		{http.MethodPost, "/v1/knowledge/query", "/internal/v1/knowledge/query"},
		{http.MethodGet, "/v1/knowledge/capabilities", "/internal/v1/knowledge/capabilities"},
		{http.MethodPost, "/v1/a2a/messages/post", "/internal/v1/a2a/messages/post"},
		{http.MethodGet, "/v1/a2a/versions", "/internal/v1/a2a/versions"},
		{http.MethodPost, "/a2a", "/a2a"},
		{http.MethodGet, "/.well-known/agent-card.json", "/.well-known/agent-card.json"},
		{http.MethodGet, "/.well-known/agent.json", "/.well-known/agent.json"},
		{http.MethodPost, "/v1/mcp", "/internal/v1/mcp"},
		{http.MethodGet, "/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource"},
		// nginx resolves dot segments (also escaped ones) and doubled slashes before it
		// matches a prefix, and sends the normalized path.
		{http.MethodGet, "/v1/context/%2e%2e/knowledge/capabilities", "/internal/v1/knowledge/capabilities"},
		{http.MethodPost, "/v1/context//messages/recent", "/internal/v1/context/messages/recent"},
		{http.MethodPost, "/v1/a2a/x/../tasks/get", "/internal/v1/a2a/tasks/get"},
	} {
		r := rawGatewayRequest(t, gw.addr, rawJSONRequest(c.method, c.public))
		require.Equal(t, http.StatusOK, r.Status, "%s %s: %s", c.method, c.public, r.Body)
		require.JSONEq(t, `{"upstream":true}`, string(r.Body))
		seen := up.take()
		require.Len(t, seen, 1, "%s %s", c.method, c.public)
		require.Equal(t, c.method, seen[0].Method)
		require.Equal(t, c.upstream, seen[0].URI, "%s %s", c.method, c.public)
		require.Equal(t, "gw.test", seen[0].Host, "Host is forwarded as the client sent it")
		require.Equal(t, 2, seen[0].Body)
	}

	// Everything else is the gateway's own 404 envelope and never reaches the upstream:
	// the internal API itself, the service's operational endpoints, look-alike prefixes,
	// paths that climb out of a prefix, and the gateway's internal error locations.
	for _, path := range []string{
		"/", "/v1", "/v1/context", "/v1/contextual/x", "/v1/other/x", "/v2/context/messages/recent",
		"/internal/v1/context/messages/recent", "/internal/v1/knowledge/query",
		"/health", "/ready", "/metrics", "/openapi.json",
		"/a2a/", "/a2a/x", "/A2A", "/.well-known",
		"/v1/mcp/", "/v1/mcp/x", "/v1/mcpx", "/internal/v1/mcp",
		"/v1/context/x/../../../health", "/v1/context/%2e%2e/%2e%2e/internal/v1/context/messages/recent",
		"/.agent-context-gateway/404", "/.agent-context-gateway/502",
	} {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			r := rawGatewayRequest(t, gw.addr, rawJSONRequest(method, path))
			requireGatewayError(t, r, http.StatusNotFound, contract.CodeRouteNotFound)
		}
		require.Empty(t, up.take(), "%s must not reach the upstream", path)
	}
	// HEAD is answered like GET, without a body.
	r := gw.do(t, http.MethodHead, "/nope", nil)
	require.Equal(t, http.StatusNotFound, r.Status)
	require.Empty(t, r.Body)
	require.NotEmpty(t, r.Header.Get("X-Request-Id"))
}

// TestGatewayForwardsOnlyAllowedHeaders shows exactly which request headers arrive
// upstream: every x-infra-* header a client sends is gone, whatever its spelling, and
// so is anything else not on the allow-list; Authorization, the request ID, tracing and
// A2A headers arrive; X-Forwarded-For is the gateway's view of the client, not the
// client's claim. The access log holds neither the credential nor the query string.
func TestGatewayForwardsOnlyAllowedHeaders(t *testing.T) {
	t.Parallel()
	up := startRecordingUpstream(t)
	gw := startGateway(t, up.addr())

	const token = "Bearer secret-runtime-token-value"
	const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	sent := []string{
		"Authorization", token,
		"X-Request-Id", "caller-request-42",
		"traceparent", traceparent,
		"tracestate", "vendor=value",
		"A2A-Version", "1.0",
		"A2A-Extensions", "ext-1",
		"MCP-Protocol-Version", "2025-06-18",
		"Mcp-Method", "tools/call",
		"Mcp-Name", "memory_recall",
		"User-Agent", "gateway-test/1",
		"Accept", "application/json",
		"x-infra-tenant-id", "evil-tenant",
		"X-Infra-Project-Id", "evil-project",
		"X-INFRA-SUBJECT", "mallory",
		"x-infra-user-authorization", "Bearer stolen-user-token",
		"X-Infra-Some-Future-Header", "1",
		"x-infra-", "1",
		"x_infra_tenant_id", "underscore-tenant",
		"X-Infra_Tenant-Id", "mixed-tenant",
		"Cookie", "session=abc",
		"Proxy-Authorization", "Basic Zm9vOmJhcg==",
		"X-Forwarded-For", "203.0.113.7",
		"X-Forwarded-Host", "spoofed.test",
		"Forwarded", "for=203.0.113.7",
		"X-Real-Ip", "203.0.113.7",
	}
	r := gw.post(t, "/v1/context/messages/batch?apiKey=query-secret", `{"messages":[]}`, sent...)
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
	require.Equal(t, "caller-request-42", r.Header.Get("X-Request-Id"))
	seen := up.take()
	require.Len(t, seen, 1)
	got := seen[0].Header

	allowed := map[string]bool{}
	for _, name := range []string{"Authorization", "Content-Type", "Content-Length", "Content-Encoding", "Accept",
		"User-Agent", "X-Request-Id", "X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host",
		"Traceparent", "Tracestate", "A2a-Version", "A2a-Extensions", "X-A2a-Extensions",
		"Mcp-Protocol-Version", "Mcp-Method", "Mcp-Name"} {
		allowed[name] = true
	}
	for name := range got {
		require.True(t, allowed[name], "header %s is not on the gateway's allow-list but reached the upstream", name)
		lower := strings.ToLower(name)
		require.False(t, strings.HasPrefix(lower, "x-infra") || strings.HasPrefix(lower, "x_infra"), "%s reached the upstream", name)
	}
	require.Equal(t, token, got.Get("Authorization"))
	require.Equal(t, "caller-request-42", got.Get("X-Request-Id"))
	require.Equal(t, traceparent, got.Get("Traceparent"))
	require.Equal(t, "vendor=value", got.Get("Tracestate"))
	require.Equal(t, "1.0", got.Get("A2A-Version"))
	require.Equal(t, "ext-1", got.Get("A2A-Extensions"))
	require.Equal(t, "2025-06-18", got.Get("MCP-Protocol-Version"))
	require.Equal(t, "tools/call", got.Get("Mcp-Method"))
	require.Equal(t, "memory_recall", got.Get("Mcp-Name"))
	require.Equal(t, "gateway-test/1", got.Get("User-Agent"))
	require.Equal(t, "application/json", got.Get("Content-Type"))
	require.Equal(t, "127.0.0.1", got.Get("X-Forwarded-For"))
	require.Equal(t, gw.addr, got.Get("X-Forwarded-Host"))
	require.Equal(t, "http", got.Get("X-Forwarded-Proto"))
	require.Equal(t, "/internal/v1/context/messages/batch?apiKey=query-secret", seen[0].URI)

	// Without a credential none is invented.
	gw.post(t, "/v1/context/messages/recent", `{}`)
	seen = up.take()
	require.Len(t, seen, 1)
	require.Empty(t, seen[0].Header.Values("Authorization"))

	log, err := os.ReadFile(gw.accessLog)
	require.NoError(t, err)
	require.Contains(t, string(log), `"request_id":"caller-request-42"`)
	require.Contains(t, string(log), `"path":"/v1/context/messages/batch"`)
	for _, secret := range []string{"secret-runtime-token-value", "query-secret", "stolen-user-token", "session=abc"} {
		require.NotContains(t, string(log), secret)
	}
}

// TestGatewayInfraHeadersNeverReachTheService sends x-infra-* headers through the
// gateway to the real service, in both modes where they would matter, and shows the
// service never saw them.
func TestGatewayInfraHeadersNeverReachTheService(t *testing.T) {
	t.Parallel()
	evil := []string{
		"x-infra-tenant-id", "evil",
		"x-infra-project-id", "evil",
		"x-infra-subject", "mallory",
		"x-infra-user-authorization", "Bearer someone-elses-user-token",
	}

	t.Run("runtime tokens", func(t *testing.T) {
		t.Parallel()
		app, mint := startSecuredApp(t)
		gw := startGateway(t, strings.TrimPrefix(app.base, "http://"))
		bearer := mint.bearer(contract.CapMessagesAppend, contract.CapMessagesRead)
		body := batchOf(rec("c1", "m1", "user", "through the gateway"))

		// Sent straight to the service, each header changes the answer ...
		app.post(t, pathBatch, body, "Authorization", bearer, "x-infra-tenant-id", "evil").
			requireError(t, http.StatusForbidden, contract.CodeScopeForbidden)
		app.post(t, pathBatch, body, "Authorization", bearer, "x-infra-user-authorization", "Bearer u").
			requireError(t, http.StatusUnauthorized, contract.CodeTokenBindingMismatch)
		// ... through the gateway none arrives, and the credential does.
		var res contract.AppendMessagesResponse
		gw.post(t, "/v1/context/messages/batch", body, append([]string{"Authorization", bearer}, evil...)...).
			requireOK(t, http.StatusOK, &res)
		require.Equal(t, 1, res.Appended)
		var msgs contract.MessagesResponse
		gw.post(t, "/v1/context/messages/recent", map[string]any{"scope": map[string]any{"conversationId": "c1"}},
			append([]string{"Authorization", bearer}, evil...)...).requireOK(t, http.StatusOK, &msgs)
		require.Equal(t, []string{"m1"}, recordIDs(msgs.Messages))
		require.Equal(t, "through the gateway", msgs.Messages[0].Content)

		// The service itself refuses a request without a credential: the gateway adds none.
		requireGatewayError(t, gw.post(t, "/v1/context/messages/recent", map[string]any{"scope": map[string]any{"conversationId": "c1"}}),
			http.StatusUnauthorized, contract.CodeTokenMissing)
	})

	t.Run("open mode", func(t *testing.T) {
		t.Parallel()
		app := startApp(t)
		gw := startGateway(t, strings.TrimPrefix(app.base, "http://"))
		res := contract.AppendMessagesResponse{}
		gw.post(t, "/v1/context/messages/batch", batchOf(rec("c1", "m1", "user", "which scope?")), evil...).
			requireOK(t, http.StatusOK, &res)
		require.Equal(t, 1, res.Appended)
		// The message is in the default scope (local/local), not in the one the client named.
		scope := map[string]any{"scope": map[string]any{"conversationId": "c1"}}
		require.Equal(t, []string{"m1"}, recordIDs(app.recent(t, scope)))
		require.Empty(t, app.recent(t, scope, "x-infra-tenant-id", "evil", "x-infra-project-id", "evil"))
		// Reading through the gateway finds the same data.
		var msgs contract.MessagesResponse
		gw.post(t, "/v1/context/messages/recent", scope, evil...).requireOK(t, http.StatusOK, &msgs)
		require.Equal(t, []string{"m1"}, recordIDs(msgs.Messages))
	})
}

// TestGatewayReachesEveryArea sends the same request to the service directly and
// through the gateway for each area: the answers agree, and an error answer is the
// service's, carrying the request ID the caller sent.
func TestGatewayReachesEveryArea(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	gw := startGateway(t, strings.TrimPrefix(app.base, "http://"))
	app.appendOK(t, batchOf(rec("c1", "m1", "user", "hello")))

	for i, c := range []struct{ method, public, internal, body string }{
		{http.MethodPost, "/v1/context/messages/recent", contract.RouteMessagesRecent.Path, `{"scope":{"conversationId":"c1"}}`},
		{http.MethodPost, "/v1/context/messages/nope", contract.PrefixContext + "/messages/nope", `{}`},
		{http.MethodGet, "/v1/context/messages/batch", contract.RouteMessagesBatch.Path, ``},
		{http.MethodGet, "/v1/knowledge/capabilities", contract.PrefixKnowledge + "/capabilities", ``},
		{http.MethodPost, "/v1/knowledge/query", contract.PrefixKnowledge + "/query", `{"query":"q"}`},
		{http.MethodPost, "/v1/a2a/agents/list", contract.PrefixA2A + "/agents/list", `{}`},
		{http.MethodPost, "/a2a", "/a2a", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"t"}}`},
		{http.MethodGet, "/.well-known/agent-card.json", "/.well-known/agent-card.json", ``},
	} {
		var body any
		if c.body != "" {
			body = c.body
		}
		id := fmt.Sprintf("area-check-%d", i)
		direct := app.do(t, c.method, c.internal, body, "X-Request-Id", id)
		via := gw.do(t, c.method, c.public, body, "X-Request-Id", id)
		require.Equal(t, direct.Status, via.Status, "%s %s: direct %s, via the gateway %s", c.method, c.public, direct.Body, via.Body)
		require.Equal(t, id, via.Header.Get("X-Request-Id"))
		if via.Status >= 400 {
			var d, v contract.ErrorResponse
			require.NoError(t, json.Unmarshal(direct.Body, &d), "body: %s", direct.Body)
			require.NoError(t, json.Unmarshal(via.Body, &v), "body: %s", via.Body)
			require.Equal(t, d, v, "%s %s", c.method, c.public)
			require.Equal(t, id, v.Error.RequestID)
		}
	}
	// The service's 405 carries its Allow header through the gateway.
	r := gw.do(t, http.MethodGet, "/v1/context/messages/batch", nil)
	requireGatewayError(t, r, http.StatusMethodNotAllowed, contract.CodeMethodNotAllowed)
	require.Contains(t, r.Header.Get("Allow"), http.MethodPost)
	require.Equal(t, app.do(t, http.MethodGet, pathBatch, nil).Header.Get("Allow"), r.Header.Get("Allow"))
}

// TestGatewayMCPToolCall: the SDK's MCP client reaches the real service's tools
// through the gateway at /v1/mcp, with the caller's token, and the protected resource
// metadata is served at the root's well-known path.
func TestGatewayMCPToolCall(t *testing.T) {
	t.Parallel()
	app, minter := startSecuredApp(t)
	gw := startGateway(t, strings.TrimPrefix(app.base, "http://"))
	client := mcp.NewClient(&mcp.Implementation{Name: "via-gateway", Version: "1"}, nil)
	session, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: gw.base + "/v1/mcp",
		HTTPClient: &http.Client{Timeout: time.Minute, Transport: headerTransport{headers: []string{
			"Authorization", minter.bearer(contract.AllCapabilities...), "x-infra-tenant-id", "evil-tenant"}}},
		DisableStandaloneSSE: true,
	}, nil)
	require.NoError(t, err)
	defer session.Close()
	var entry contract.ContextEntry
	mcpOK(t, session, contract.ToolMemoryRemember, map[string]any{"id": "e-gw", "content": "through the gateway"}, &entry)
	var recalled contract.RecallResponse
	mcpOK(t, session, contract.ToolMemoryRecall, map[string]any{"query": "gateway", "mode": "text"}, &recalled)
	require.Len(t, recalled.Results, 1, "the x-infra-tenant-id the client sent never reached the service")
	got, err := app.typed("Authorization", minter.bearer(contract.CapContextRead)).GetEntry(context.Background(),
		&contract.GetEntryRequest{EntryID: "e-gw"})
	require.NoError(t, err)
	require.Equal(t, "through the gateway", got.Content)

	r := gw.post(t, "/v1/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	requireGatewayError(t, r, http.StatusUnauthorized, contract.CodeTokenMissing)
	require.Contains(t, r.Header.Get("WWW-Authenticate"), `resource_metadata="`)
	meta := gw.do(t, http.MethodGet, contract.PathOAuthProtectedResource, nil)
	require.Equal(t, http.StatusOK, meta.Status, "body: %s", meta.Body)
}

// TestGatewayRequestID: a caller's valid X-Request-Id is kept end to end, a missing or
// invalid one is replaced by the gateway, and the service answers with the same ID.
func TestGatewayRequestID(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	gw := startGateway(t, strings.TrimPrefix(app.base, "http://"))
	hex32 := regexp.MustCompile(`^[0-9a-f]{32}$`)
	path := "/v1/context/messages/nope" // the service's own 404: its envelope shows the ID it used

	r := gw.post(t, path, `{}`)
	e := requireGatewayError(t, r, http.StatusNotFound, contract.CodeRouteNotFound)
	require.Regexp(t, hex32, e.RequestID, "the gateway made the ID and the service kept it")

	var visible strings.Builder
	for c := byte(0x21); c <= 0x7e && visible.Len() < contract.MaxRequestIDChars; c++ {
		if c != '"' && c != '\\' {
			visible.WriteByte(c)
		}
	}
	for visible.Len() < contract.MaxRequestIDChars {
		visible.WriteByte('z')
	}
	for _, keep := range []string{"a", "01J0000000000000000000000", visible.String()} {
		r := gw.post(t, path, `{}`, "X-Request-Id", keep)
		require.Equal(t, keep, requireGatewayError(t, r, http.StatusNotFound, contract.CodeRouteNotFound).RequestID)
	}
	// Too long, or holding a character the gateway could not write into its own JSON
	// body: replaced, and the service keeps the replacement.
	for _, replace := range []string{strings.Repeat("r", contract.MaxRequestIDChars+1), `has"quote`, `back\slash`} {
		r := gw.post(t, path, `{}`, "X-Request-Id", replace)
		require.Regexp(t, hex32, requireGatewayError(t, r, http.StatusNotFound, contract.CodeRouteNotFound).RequestID, replace)
	}
	// A success carries the ID too.
	r = gw.post(t, "/v1/context/messages/recent", `{"scope":{"conversationId":"c"}}`)
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
	require.Regexp(t, hex32, r.Header.Get("X-Request-Id"))
}

// TestGatewayBodyLimit: the gateway's bound is the service's, 32 MiB exactly.
func TestGatewayBodyLimit(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	gw := startGateway(t, strings.TrimPrefix(app.base, "http://"))

	// A body of exactly the limit (JSON padded with whitespace) passes and is served.
	body := []byte(`{"scope":{"conversationId":"c"}}`)
	body = append(body, bytes.Repeat([]byte{' '}, contract.MaxRequestBodyBytes-len(body))...)
	r := gw.post(t, "/v1/context/messages/recent", body)
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)

	// One byte more is refused before the body is read: the declared length suffices.
	for _, path := range []string{"/v1/context/messages/batch", "/v1/knowledge/query", "/a2a"} {
		r = rawGatewayRequest(t, gw.addr, fmt.Sprintf("POST %s HTTP/1.1\r\nHost: gw.test\r\nContent-Type: application/json\r\n"+
			"X-Request-Id: too-big\r\nContent-Length: %d\r\n\r\n{", path, contract.MaxRequestBodyBytes+1))
		e := requireGatewayError(t, r, http.StatusRequestEntityTooLarge, contract.CodePayloadTooLarge)
		require.Equal(t, "too-big", e.RequestID)
		require.Equal(t, map[string]any{"field": "body", "limit": float64(contract.MaxRequestBodyBytes)}, e.Details)
	}
	// A chunked body cannot slip past: a chunk declared over the limit is refused as
	// soon as its size line arrives.
	r = rawGatewayRequest(t, gw.addr, fmt.Sprintf("POST /v1/context/messages/batch HTTP/1.1\r\nHost: gw.test\r\n"+
		"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n{", contract.MaxRequestBodyBytes+1))
	require.Equal(t, map[string]any{"field": "body", "limit": float64(contract.MaxRequestBodyBytes)},
		requireGatewayError(t, r, http.StatusRequestEntityTooLarge, contract.CodePayloadTooLarge).Details)
	// The service says the same for the same body (the gateway only answers first).
	r = rawGatewayRequest(t, strings.TrimPrefix(app.base, "http://"), fmt.Sprintf(
		"POST %s HTTP/1.1\r\nHost: svc\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{",
		pathBatch, contract.MaxRequestBodyBytes+1))
	require.Equal(t, map[string]any{"field": "body", "limit": float64(contract.MaxRequestBodyBytes)},
		requireGatewayError(t, r, http.StatusRequestEntityTooLarge, contract.CodePayloadTooLarge).Details)
}

// TestGatewayOwnErrors: what nginx itself refuses still answers in the envelope.
func TestGatewayOwnErrors(t *testing.T) {
	t.Parallel()
	up := startRecordingUpstream(t)
	gw := startGateway(t, up.addr())
	const head = "HTTP/1.1\r\nHost: gw.test\r\nConnection: close\r\n"

	// A header line or request line over 64 KiB.
	e := requireGatewayError(t, rawGatewayRequest(t, gw.addr, "GET /v1/context/x "+head+"X-Filler: "+
		strings.Repeat("f", 65<<10)+"\r\n\r\n"), http.StatusRequestEntityTooLarge, contract.CodePayloadTooLarge)
	require.Equal(t, map[string]any{"field": "headers", "limit": float64(65536)}, e.Details)
	e = requireGatewayError(t, rawGatewayRequest(t, gw.addr, "GET /v1/context/"+strings.Repeat("u", 65<<10)+" "+head+"\r\n"),
		http.StatusRequestEntityTooLarge, contract.CodePayloadTooLarge)
	require.Equal(t, map[string]any{"field": "uri", "limit": float64(65536)}, e.Details)
	// Malformed: a path above the root, a bad Host; TRACE is never served.
	requireGatewayError(t, rawGatewayRequest(t, gw.addr, "GET /../x "+head+"\r\n"), http.StatusBadRequest, contract.CodeValidationFailed)
	requireGatewayError(t, rawGatewayRequest(t, gw.addr, "GET /v1/context/x HTTP/1.1\r\nHost: a/b\r\n\r\n"),
		http.StatusBadRequest, contract.CodeValidationFailed)
	requireGatewayError(t, rawGatewayRequest(t, gw.addr, "TRACE /v1/context/x "+head+"\r\n"),
		http.StatusMethodNotAllowed, contract.CodeMethodNotAllowed)
	require.Empty(t, up.take())
}

// TestGatewayUpstreamDown: with the service stopped, the gateway answers 503
// SERVICE_UNAVAILABLE (retryable) in the envelope, keeping the caller's request ID.
func TestGatewayUpstreamDown(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	gw := startGateway(t, strings.TrimPrefix(app.base, "http://"))
	scope := map[string]any{"scope": map[string]any{"conversationId": "c"}}
	// A first request leaves a kept-alive upstream connection behind.
	gw.post(t, "/v1/context/messages/recent", scope).requireOK(t, http.StatusOK, nil)

	require.NoError(t, app.main.Close())
	for _, path := range []string{"/v1/context/messages/recent", "/v1/knowledge/query", "/a2a", "/.well-known/agent-card.json"} {
		r := gw.post(t, path, scope, "X-Request-Id", "while-down")
		e := requireGatewayError(t, r, http.StatusServiceUnavailable, contract.CodeServiceUnavailable)
		require.Equal(t, "while-down", e.RequestID)
		require.Equal(t, map[string]any{"reason": "upstream"}, e.Details)
	}
}

// TestGatewayRenderRefusesUnsafeValues: a value that could end an nginx directive never
// reaches the configuration.
func TestGatewayRenderRefusesUnsafeValues(t *testing.T) {
	t.Parallel()
	for name, value := range map[string]string{
		"GATEWAY_UPSTREAM": "svc:5120; include /etc/passwd",
		"GATEWAY_LISTEN":   "8080 ssl",
		"GATEWAY_RUN_DIR":  "relative/dir",
		"GATEWAY_USER":     "nobody}",
	} {
		env := map[string]string{"GATEWAY_UPSTREAM": "svc:5120", "GATEWAY_RUN_DIR": t.TempDir()}
		env[name] = value
		cmd := exec.CommandContext(context.Background(), "sh", gatewayRenderScript)
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		out, err := cmd.CombinedOutput()
		require.Error(t, err, "%s=%q was accepted: %s", name, value, out)
		require.Contains(t, string(out), name)
	}
}

// BenchmarkGatewayOverhead measures what the gateway costs: 8 clients read
// messages/recent (limit 50) of random conversations among 100,000 messages, once
// straight from the service and once through nginx (one worker), both over loopback.
// It reports both reads/s, their ratio and each path's latency quantiles. Each b.N
// round is one second-long run of each half.
//
//	go test -run '^$' -bench BenchmarkGatewayOverhead -benchtime 5x -timeout 30m ./cmd/agent-context
func BenchmarkGatewayOverhead(b *testing.B) {
	app := startMsgBenchApp(b)
	const conversations, perConversation = 1_000, 100
	loadMessages(b, app.pool, conversations, perConversation)
	gw := startGateway(b, strings.TrimPrefix(app.base, "http://"))

	transport := &http.Transport{MaxIdleConnsPerHost: throughputClients}
	client := &http.Client{Transport: transport, Timeout: time.Minute}
	b.Cleanup(transport.CloseIdleConnections)
	reader := func(url string) func(*rand.Rand) error {
		return func(rng *rand.Rand) error {
			body := fmt.Appendf(nil, `{"scope":{"conversationId":"conv-%d"},"limit":50}`, rng.IntN(conversations))
			resp, err := client.Post(url, "application/json", bytes.NewReader(body))
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			n, err := io.Copy(io.Discard, resp.Body)
			if err == nil && (resp.StatusCode != http.StatusOK || n < 50*100) {
				err = fmt.Errorf("%s: status %d, %d bytes", url, resp.StatusCode, n)
			}
			return err
		}
	}
	direct := reader(app.base + pathRecent)
	proxied := reader(gw.base + "/v1/context/messages/recent")
	for range 200 {
		require.NoError(b, direct(rand.New(rand.NewPCG(9, 9))))
		require.NoError(b, proxied(rand.New(rand.NewPCG(9, 9))))
	}

	var directReads, gatewayReads int64
	var elapsed time.Duration
	var directLat, gatewayLat []time.Duration
	for b.Loop() {
		n, lat := runClients(b, throughputClients, time.Second, direct)
		directReads, directLat = directReads+n, append(directLat, lat...)
		n, lat = runClients(b, throughputClients, time.Second, proxied)
		gatewayReads, gatewayLat = gatewayReads+n, append(gatewayLat, lat...)
		elapsed += time.Second
	}
	directRate := float64(directReads) / elapsed.Seconds()
	gatewayRate := float64(gatewayReads) / elapsed.Seconds()
	b.ReportMetric(directRate, "direct-reads/s")
	b.ReportMetric(gatewayRate, "gateway-reads/s")
	b.ReportMetric(gatewayRate/directRate, "gateway/direct")
	for name, lat := range map[string][]time.Duration{"direct": directLat, "gateway": gatewayLat} {
		slices.Sort(lat)
		for _, q := range []float64{0.50, 0.99} {
			b.ReportMetric(float64(lat[int(q*float64(len(lat)-1))].Microseconds())/1000, fmt.Sprintf("%s-p%d-ms", name, int(q*100)))
		}
	}
}
