package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	goruntime "runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime/ratelimit"
)

// mcpPost sends one raw JSON-RPC message to the MCP endpoint.
func mcpPost(t *testing.T, app *testApp, body string, headers ...string) *testResponse {
	t.Helper()
	return app.do(t, http.MethodPost, contract.PathMCP, body,
		append([]string{"Accept", "application/json, text/event-stream"}, headers...)...)
}

// mcpErrorCode is the JSON-RPC error code of an answer (0 when it has none).
func mcpErrorCode(t *testing.T, r *testResponse) int {
	t.Helper()
	var answer struct {
		Error *struct{ Code int } `json:"error"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &answer), "%s", r.Body)
	if answer.Error == nil {
		return 0
	}
	return answer.Error.Code
}

// TestMCPBodyBound: a body over AGENT_CONTEXT_MCP_MAX_BODY is 413 with the error
// envelope, refused on its declared length before a byte is parsed; one within it is
// served.
func TestMCPBodyBound(t *testing.T) {
	t.Parallel()
	app := startApp(t, func(c *Config) { c.MCPMaxBodyBytes = 256 << 10 })
	call := func(size int) *testResponse {
		return mcpPost(t, app, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"pad":"`+
			strings.Repeat("a", size)+`"}}}`)
	}
	r := call(300 << 10)
	r.requireError(t, http.StatusRequestEntityTooLarge, contract.CodePayloadTooLarge)
	r = call(200 << 10)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
}

// TestMCPArgumentsBoundedWhileDecoded: a memory_remember whose metadata is a 1 MiB
// array of numbers is refused (PAYLOAD_TOO_LARGE, the route's bound) without building
// a tree of its half a million elements: it allocates no more than the same call whose
// metadata is one 1 MiB string, which has no tree to build (a tree of the array costs
// 40 bytes and more per element: over 20 MiB more; with the tree, 3 MiB cost 275 MiB
// against the string's 121). It runs alone (not parallel), so the allocations counted
// are its calls'. 1 MiB keeps the call quick under the race detector.
func TestMCPArgumentsBoundedWhileDecoded(t *testing.T) {
	app := startApp(t)
	const size = 1 << 20
	call := func(metadata string) uint64 {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"memory_remember","arguments":` +
			`{"content":"x","metadata":` + metadata + `}}}`
		var before, after goruntime.MemStats
		goruntime.GC()
		goruntime.ReadMemStats(&before)
		r := mcpPost(t, app, body)
		goruntime.ReadMemStats(&after)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		var answer struct {
			Result struct {
				IsError           bool                  `json:"isError"`
				StructuredContent contract.MCPToolError `json:"structuredContent"`
			} `json:"result"`
		}
		require.NoError(t, json.Unmarshal(r.Body, &answer), "%s", r.Body)
		require.True(t, answer.Result.IsError)
		require.Equal(t, contract.CodePayloadTooLarge, answer.Result.StructuredContent.Error.Code)
		require.Equal(t, "metadata", answer.Result.StructuredContent.Error.Details["field"])
		return after.TotalAlloc - before.TotalAlloc
	}
	// One call first, so that the pools and buffers of a first request are in place.
	call(`"` + strings.Repeat("a", 100<<10) + `"`)
	text := call(`"` + strings.Repeat("1,", size/2) + `"`)
	array := call(`[` + strings.TrimSuffix(strings.Repeat("1,", size/2), ",") + `]`)
	require.Less(t, array, text+text/2, "the array allocated %d MiB, the string %d MiB", array>>20, text>>20)
}

// TestMCPOneReadingOfAMessage: a duplicate member, or one differing from a protocol
// key only in case, is refused with -32600 before anything is served or counted; so
// a body that names one method to the door and another to the SDK never passes the
// route's rate limit.
func TestMCPOneReadingOfAMessage(t *testing.T) {
	t.Parallel()
	app := startApp(t, func(c *Config) { c.RateLimits = ratelimit.RateLimits{ToolPerMin: 2} })
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","METHOD":"tools/call","params":{"name":"memory_recall","arguments":{"query":"x"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{"name":"memory_recall","arguments":{"query":"x"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"memory_recall","Name":"memory_remember","arguments":{"query":"x"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"memory_recall","arguments":{"query":"x"},"arguments":{"query":"y"}}}`,
		`{"jsonrpc":"2.0","id":1,"Method":"tools/call","params":{"name":"memory_recall","arguments":{"query":"x"}}}`,
	} {
		for range 3 {
			r := mcpPost(t, app, body)
			require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", body, r.Body)
			require.Equal(t, contract.RPCInvalidRequest, mcpErrorCode(t, r), "%s: %s", body, r.Body)
		}
	}
	// None of them was counted: the route's budget of 2 is whole.
	for range 2 {
		r := mcpPost(t, app, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	}
	requireRateLimited(t, mcpPost(t, app, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), contract.RateLevelTool)
}

// TestMCPServedMethods: only the methods of the contract are served; anything else,
// subscriptions/listen of the newest protocol among them, is -32601 at once and holds
// no connection open.
func TestMCPServedMethods(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	for _, method := range []string{"subscriptions/listen", "resources/list", "resources/read", "prompts/list",
		"logging/setLevel", "completion/complete", "tasks/list"} {
		done := make(chan *testResponse, 1)
		go func() {
			r, err := app.send(t.Context(), http.MethodPost, contract.PathMCP,
				`{"jsonrpc":"2.0","id":7,"method":"`+method+`","params":{}}`, "Accept", "application/json, text/event-stream")
			if err != nil {
				r = &testResponse{Body: []byte(err.Error())}
			}
			done <- r
		}()
		select {
		case r := <-done:
			require.Equal(t, http.StatusOK, r.Status, "%s: %s", method, r.Body)
			require.Equal(t, contract.RPCMethodNotFound, mcpErrorCode(t, r), "%s: %s", method, r.Body)
			require.Contains(t, string(r.Body), `"id":7`)
		case <-time.After(time.Minute):
			t.Fatalf("%s held the connection open", method)
		}
	}
	for _, method := range []string{"ping", "tools/list"} {
		r := mcpPost(t, app, `{"jsonrpc":"2.0","id":1,"method":"`+method+`"}`)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		require.Zero(t, mcpErrorCode(t, r), "%s: %s", method, r.Body)
	}
}

// TestConsoleBodyBound: a console body over 64 KiB is 413 before any form is parsed,
// signed in or not; a multipart body of 100 MB is refused on its declared length,
// unread; a form that is not URL-encoded is 415.
func TestConsoleBodyBound(t *testing.T) {
	t.Parallel()
	app := startApp(t, func(c *Config) { c.ServiceToken = "console-bound-token" })
	browser := newConsoleBrowser(t, app)
	big := url.Values{"token": {strings.Repeat("a", 70<<10)}}
	for _, path := range []string{"/console/login", "/console/logout", "/console/scope", "/console/anything"} {
		page := browser.send(http.MethodPost, path, big)
		require.Equal(t, http.StatusRequestEntityTooLarge, page.Status, "%s: %s", path, page.Body)
	}
	require.Equal(t, http.StatusSeeOther, browser.login("console-bound-token", "", "").Status)
	page := browser.send(http.MethodPost, "/console/logout", big)
	require.Equal(t, http.StatusRequestEntityTooLarge, page.Status, page.Body)
	require.Equal(t, http.StatusOK, browser.get("/console/").Status, "the refused logout ended nothing")

	// 100 MB declared: answered without the body being sent (the client stops at the
	// answer; a server that read it would take the whole upload first).
	sent := &countingReader{limit: 100 << 20}
	req, err := http.NewRequest(http.MethodPost, app.base+"/console/login", sent)
	require.NoError(t, err)
	req.ContentLength = sent.limit
	req.Header.Set("Content-Type", "multipart/form-data; boundary=x")
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	}
	require.Less(t, sent.n.Load(), int64(16<<20), "the server read %d bytes of a refused body", sent.n.Load())

	form := browser.get("/console/login")
	page = browser.send(http.MethodPost, "/console/scope", nil, "Content-Type", "text/plain")
	require.Less(t, page.Status, 500)
	multipart := browser.send(http.MethodPost, "/console/login", url.Values{"csrf": {csrf(t, form)}},
		"Content-Type", "multipart/form-data; boundary=x")
	require.Equal(t, http.StatusUnsupportedMediaType, multipart.Status, multipart.Body)
}

// countingReader yields limit bytes of a form, counting what was read (the client's
// transport may still be reading it while the test looks).
type countingReader struct {
	n     atomic.Int64
	limit int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	read := c.n.Load()
	if read >= c.limit {
		return 0, io.EOF
	}
	n := min(int64(len(p)), c.limit-read)
	for i := range n {
		p[i] = 'a'
	}
	c.n.Add(n)
	return int(n), nil
}

// TestConsoleSignInThrottled: after 10 failed sign-ins from one address within a
// minute, every attempt is 429 with Retry-After, a correct token included; an attempt
// refused for its size is not counted.
func TestConsoleSignInThrottled(t *testing.T) {
	t.Parallel()
	app := startApp(t, func(c *Config) { c.ServiceToken = "console-throttle-token" })
	b := newConsoleBrowser(t, app)
	big := url.Values{"token": {strings.Repeat("a", 70<<10)}}
	for range 3 {
		require.Equal(t, http.StatusRequestEntityTooLarge, b.send(http.MethodPost, "/console/login", big).Status)
	}
	for i := range 10 {
		page := b.login(fmt.Sprintf("wrong-%d", i), "", "")
		require.Equal(t, http.StatusUnauthorized, page.Status, "attempt %d: %s", i, page.Body)
	}
	page := b.login("console-throttle-token", "", "")
	require.Equal(t, http.StatusTooManyRequests, page.Status, page.Body)
	require.NotEmpty(t, page.Header.Get("Retry-After"))
	require.Equal(t, 0, consoleSessions(t, app), "no session was started")
}
