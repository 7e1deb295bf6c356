package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
)

// sseEvents posts a JSON-RPC body to /a2a as agent asking for a stream, asserts a 200
// text/event-stream answer and returns the decoded data events as they arrive; the
// channel closes when the server ends the stream.
func sseEvents(t *testing.T, a a2aAgent, body string) <-chan map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.app.base+contract.PathA2AJSONRPC, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(a.headers); i += 2 {
		req.Header.Set(a.headers[i], a.headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	out := make(chan map[string]any, 64)
	go func() {
		defer cancel()
		defer resp.Body.Close()
		defer close(out)
		lines := bufio.NewScanner(resp.Body)
		lines.Buffer(nil, 16<<20)
		for lines.Scan() {
			data, ok := bytes.CutPrefix(lines.Bytes(), []byte("data: "))
			if !ok {
				continue
			}
			var event map[string]any
			if json.Unmarshal(data, &event) != nil {
				event = map[string]any{"unreadable": string(data)}
			}
			out <- event
		}
	}()
	t.Cleanup(cancel)
	return out
}

// nextEvent is the stream's next event, or fails the test when the stream ended.
func nextEvent(t *testing.T, events <-chan map[string]any) map[string]any {
	t.Helper()
	e, ok := <-events
	require.True(t, ok, "the stream ended early")
	return e
}

// requireEnded asserts that the stream has no more events.
func requireEnded(t *testing.T, events <-chan map[string]any) {
	t.Helper()
	e, ok := <-events
	require.False(t, ok, "the stream goes on: %v", e)
}

// result is an event's result, asserting the request's id.
func result(t *testing.T, e map[string]any, id any) map[string]any {
	t.Helper()
	require.Equal(t, "2.0", e["jsonrpc"], "%v", e)
	require.Equal(t, id, e["id"], "%v", e)
	r, ok := e["result"].(map[string]any)
	require.True(t, ok, "no result in %v", e)
	return r
}

func TestA2AStream03AcrossReplicas(t *testing.T) {
	t.Parallel()
	first := startApp(t)
	second := startAppOn(t, first.dsn, nil)
	alice, bob := headerAgent(first, "alice"), headerAgent(second, "bob")
	events := sseEvents(t, alice, `{"jsonrpc": "2.0", "id": "s1", "method": "message/stream", "params": {"message":
		{"kind": "message", "messageId": "m", "role": "user", "parts": [{"kind": "text", "text": "summarize"}]},
		"metadata": {"toAgent": "bob"}}}`)
	task := result(t, nextEvent(t, events), "s1")
	require.Equal(t, "task", task["kind"])
	require.Equal(t, "submitted", task["status"].(map[string]any)["state"])
	taskID := task["id"].(string)

	// Bob works on the task on the other replica, through the REST routes.
	bob.ok(t, contract.RouteA2ATasksUpdate, map[string]any{"taskId": taskID, "state": "working"}, nil)
	bob.ok(t, contract.RouteA2ATasksMessage, map[string]any{"taskId": taskID, "parts": []map[string]any{{"type": "text", "text": "on it"}}}, nil)
	bob.ok(t, contract.RouteA2ATasksUpdate, map[string]any{"taskId": taskID, "state": "completed",
		"artifacts": []map[string]any{{"artifactId": "summary", "parts": []map[string]any{{"type": "text", "text": "done"}}}}}, nil)

	working := result(t, nextEvent(t, events), "s1")
	require.Equal(t, "status-update", working["kind"])
	require.Equal(t, taskID, working["taskId"])
	require.Equal(t, "working", working["status"].(map[string]any)["state"])
	require.Equal(t, false, working["final"])
	message := result(t, nextEvent(t, events), "s1")
	require.Equal(t, "status-update", message["kind"])
	msg := message["status"].(map[string]any)["message"].(map[string]any)
	require.Equal(t, "agent", msg["role"])
	require.Equal(t, taskID+"-m2", msg["messageId"])
	require.Equal(t, "on it", msg["parts"].([]any)[0].(map[string]any)["text"])
	artifact := result(t, nextEvent(t, events), "s1")
	require.Equal(t, "artifact-update", artifact["kind"])
	require.Equal(t, "summary", artifact["artifact"].(map[string]any)["artifactId"])
	done := result(t, nextEvent(t, events), "s1")
	require.Equal(t, "completed", done["status"].(map[string]any)["state"])
	require.Equal(t, true, done["final"])
	requireEnded(t, events)
}

func TestA2ASubscribe10(t *testing.T) {
	t.Parallel()
	first := startApp(t)
	second := startAppOn(t, first.dsn, nil)
	alice, bob := headerAgent(first, "alice"), headerAgent(second, "bob")
	var task contract.Task
	alice.ok(t, contract.RouteA2ATasksCreate, map[string]any{"toAgent": "bob", "description": "review"}, &task)
	bob.ok(t, contract.RouteA2ATasksUpdate, map[string]any{"taskId": task.ID, "state": "working"}, nil)

	events := sseEvents(t, alice, `{"jsonrpc": "2.0", "id": 7, "method": "SubscribeToTask", "params": {"id": "`+task.ID+`"}}`)
	first10 := result(t, nextEvent(t, events), 7.0)["task"].(map[string]any)
	require.Equal(t, "TASK_STATE_WORKING", first10["status"].(map[string]any)["state"])
	require.NotContains(t, first10, "kind")

	bob.ok(t, contract.RouteA2ATasksUpdate, map[string]any{"taskId": task.ID, "state": "input-required"}, nil)
	alice.ok(t, contract.RouteA2ATasksUpdate, map[string]any{"taskId": task.ID, "state": "working"}, nil)
	alice.ok(t, contract.RouteA2ATasksCancel, map[string]any{"taskId": task.ID}, nil)
	for _, state := range []string{"TASK_STATE_INPUT_REQUIRED", "TASK_STATE_WORKING", "TASK_STATE_CANCELED"} {
		update := result(t, nextEvent(t, events), 7.0)["statusUpdate"].(map[string]any)
		require.Equal(t, state, update["status"].(map[string]any)["state"])
		require.Equal(t, task.ID, update["taskId"])
		require.Equal(t, task.ContextID, update["contextId"])
		require.NotContains(t, update, "final")
	}
	requireEnded(t, events)
}

func TestA2AStreamBadInput(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	alice, bob, eve := headerAgent(app, "alice"), headerAgent(app, "bob"), headerAgent(app, "eve")
	var task contract.Task
	alice.ok(t, contract.RouteA2ATasksCreate, map[string]any{"toAgent": "bob", "description": "review"}, &task)

	errorOf := func(t *testing.T, events <-chan map[string]any, id any) int {
		t.Helper()
		e := nextEvent(t, events)
		require.Equal(t, id, e["id"], "%v", e)
		requireEnded(t, events)
		return int(e["error"].(map[string]any)["code"].(float64))
	}
	t.Run("not a participant", func(t *testing.T) {
		events := sseEvents(t, eve, `{"jsonrpc": "2.0", "id": 1, "method": "tasks/resubscribe", "params": {"id": "`+task.ID+`"}}`)
		require.Equal(t, contract.RPCTaskNotFound, errorOf(t, events, 1.0))
	})
	t.Run("unknown task", func(t *testing.T) {
		events := sseEvents(t, alice, `{"jsonrpc": "2.0", "id": "u", "method": "SubscribeToTask", "params": {"id": "nope"}}`)
		require.Equal(t, contract.RPCTaskNotFound, errorOf(t, events, "u"))
	})
	t.Run("no id", func(t *testing.T) {
		events := sseEvents(t, alice, `{"jsonrpc": "2.0", "id": 2, "method": "SubscribeToTask", "params": {}}`)
		require.Equal(t, contract.RPCInvalidParams, errorOf(t, events, 2.0))
	})
	t.Run("bad send", func(t *testing.T) {
		events := sseEvents(t, alice, `{"jsonrpc": "2.0", "id": 3, "method": "message/stream", "params": {"message": {"parts": []}}}`)
		require.Equal(t, contract.RPCInvalidParams, errorOf(t, events, 3.0))
	})
	t.Run("continuing a terminal task", func(t *testing.T) {
		var done contract.Task
		alice.ok(t, contract.RouteA2ATasksCreate, map[string]any{"toAgent": "bob", "description": "old"}, &done)
		alice.ok(t, contract.RouteA2ATasksCancel, map[string]any{"taskId": done.ID}, nil)
		events := sseEvents(t, alice, `{"jsonrpc": "2.0", "id": 4, "method": "SendStreamingMessage", "params": {"message":
			{"taskId": "`+done.ID+`", "parts": [{"text": "more"}]}}}`)
		require.Equal(t, contract.RPCUnsupportedOperation, errorOf(t, events, 4.0))
	})
	t.Run("a terminal task", func(t *testing.T) {
		var done contract.Task
		alice.ok(t, contract.RouteA2ATasksCreate, map[string]any{"toAgent": "bob", "description": "finished"}, &done)
		bob.ok(t, contract.RouteA2ATasksUpdate, map[string]any{"taskId": done.ID, "state": "failed"}, nil)
		events := sseEvents(t, bob, `{"jsonrpc": "2.0", "id": 5, "method": "tasks/resubscribe", "params": {"id": "`+done.ID+`"}}`)
		final := result(t, nextEvent(t, events), 5.0)
		require.Equal(t, "failed", final["status"].(map[string]any)["state"])
		requireEnded(t, events)
	})
	t.Run("a non-streaming method asking for a stream", func(t *testing.T) {
		out := rpc(t, alice, `{"jsonrpc": "2.0", "id": 6, "method": "tasks/get", "params": {"id": "`+task.ID+`"}}`, "Accept", "text/event-stream")
		require.Equal(t, task.ID, out["result"].(map[string]any)["id"])
	})
}

func TestA2AStreamEndsAtItsMaximum(t *testing.T) {
	t.Parallel()
	app := startApp(t, func(c *Config) { c.A2ALive.StreamMax = time.Second })
	alice := headerAgent(app, "alice")
	var task contract.Task
	alice.ok(t, contract.RouteA2ATasksCreate, map[string]any{"toAgent": "bob", "description": "long"}, &task)
	events := sseEvents(t, alice, `{"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": "`+task.ID+`"}}`)
	require.Equal(t, task.ID, result(t, nextEvent(t, events), 1.0)["task"].(map[string]any)["id"])
	requireEnded(t, events)
}

// resubscribe opens a tasks/resubscribe stream of taskID as subject and returns the
// response, its body unread.
func resubscribe(ctx context.Context, t *testing.T, app *testApp, subject, taskID string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, app.base+contract.PathA2AJSONRPC,
		strings.NewReader(`{"jsonrpc": "2.0", "id": 1, "method": "tasks/resubscribe", "params": {"id": "`+taskID+`"}}`))
	require.NoError(t, err)
	req.Header.Set("x-infra-subject", subject)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	return resp
}

func TestA2AStreamKeepAliveAndShutdown(t *testing.T) {
	t.Parallel()
	app := startApp(t, func(c *Config) { c.A2ALive.StreamKeepAlive = 50 * time.Millisecond })
	alice := headerAgent(app, "alice")
	var task contract.Task
	alice.ok(t, contract.RouteA2ATasksCreate, map[string]any{"toAgent": "bob", "description": "quiet"}, &task)
	resp := resubscribe(context.Background(), t, app, "alice", task.ID)
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	var seen []string
	for lines.Scan() && !strings.HasPrefix(lines.Text(), ":") {
		seen = append(seen, lines.Text())
	}
	require.Equal(t, ": keep-alive", lines.Text(), "after %v", seen)
	require.True(t, strings.HasPrefix(seen[0], `data: {"jsonrpc":"2.0","id":1,"result":{"kind":"task"`), "%v", seen)

	// A replica that shuts down ends its streams instead of holding the drain.
	require.NoError(t, app.main.Close())
	for lines.Scan() {
		require.True(t, lines.Text() == "" || strings.HasPrefix(lines.Text(), ":"), "no event after the task: %q", lines.Text())
	}
}

// A stream writes its keep-alive even while other tasks' events keep waking it: with
// a 1 s keep-alive and another agent posting every 200 ms for 3.5 s, the stream of a
// quiet task writes nothing else, so at least two keep-alives must arrive (three are
// due; one is spared for a slow machine).
func TestA2AStreamKeepAliveWhileTheScopeIsBusy(t *testing.T) {
	t.Parallel()
	app := startApp(t, func(c *Config) { c.A2ALive.StreamKeepAlive = time.Second })
	alice, bob := headerAgent(app, "alice"), headerAgent(app, "bob")
	var task contract.Task
	alice.ok(t, contract.RouteA2ATasksCreate, map[string]any{"toAgent": "bob", "description": "quiet"}, &task)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := resubscribe(ctx, t, app, "alice", task.ID)
	defer resp.Body.Close()
	keepAlives := make(chan struct{}, 16)
	go func() {
		lines := bufio.NewScanner(resp.Body)
		for lines.Scan() {
			if lines.Text() == ": keep-alive" {
				keepAlives <- struct{}{}
			}
		}
	}()

	for end := time.Now().Add(3500 * time.Millisecond); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		bob.ok(t, contract.RouteA2AMessagesPost, map[string]any{"content": "busy"}, nil)
	}
	require.GreaterOrEqual(t, len(keepAlives), 2, "keep-alives in 3.5 s of a busy scope with a 1 s keep-alive")
}
