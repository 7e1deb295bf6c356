package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
)

// webhookRecorder is a webhook on 127.0.0.1 that records what it is sent; it answers
// 500 to its first failFirst requests.
type webhookRecorder struct {
	mu        sync.Mutex
	failFirst int
	requests  int
	bodies    []map[string]any
	tokens    []string
}

func newWebhook(t *testing.T, failFirst int) (*webhookRecorder, string) {
	w := &webhookRecorder{failFirst: failFirst}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.mu.Lock()
		defer w.mu.Unlock()
		w.requests++
		if w.requests <= w.failFirst {
			rw.WriteHeader(http.StatusInternalServerError)
			return
		}
		var v map[string]any
		if json.Unmarshal(body, &v) != nil {
			v = map[string]any{"unreadable": string(body)}
		}
		w.bodies = append(w.bodies, v)
		w.tokens = append(w.tokens, r.Header.Get("X-A2A-Notification-Token"))
	}))
	t.Cleanup(srv.Close)
	return w, srv.URL
}

// received waits until the webhook holds n bodies and returns them.
func (w *webhookRecorder) received(t *testing.T, n int) ([]map[string]any, []string) {
	t.Helper()
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.bodies) >= n
	}, time.Minute, 10*time.Millisecond)
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]map[string]any{}, w.bodies...), append([]string{}, w.tokens...)
}

func (w *webhookRecorder) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.requests
}

// states are the task states of pushed bodies, of either generation.
func pushedStates(bodies []map[string]any) []string {
	var out []string
	for _, b := range bodies {
		if task, ok := b["task"].(map[string]any); ok {
			b = task
		}
		out = append(out, b["status"].(map[string]any)["state"].(string))
	}
	return out
}

func pushApp(t *testing.T) *testApp {
	return startApp(t, func(c *Config) { c.A2ALive.PushAllowHosts = []string{"127.0.0.1"} })
}

// pushTask starts a pushApp in which alice has created a task for bob.
func pushTask(t *testing.T) (app *testApp, alice, bob a2aAgent, task contract.Task) {
	app = pushApp(t)
	alice, bob = headerAgent(app, "alice"), headerAgent(app, "bob")
	alice.ok(t, contract.RouteA2ATasksCreate, map[string]any{"toAgent": "bob", "description": "review"}, &task)
	return app, alice, bob, task
}

func TestA2APushDeliversEveryChangeInOrder(t *testing.T) {
	t.Parallel()
	_, alice, bob, task := pushTask(t)
	hook03, url03 := newWebhook(t, 0)
	hook10, url10 := newWebhook(t, 0)
	flaky, urlFlaky := newWebhook(t, 3)

	set := rpc(t, alice, `{"jsonrpc": "2.0", "id": 1, "method": "tasks/pushNotificationConfig/set", "params": {"taskId": "`+task.ID+`",
		"pushNotificationConfig": {"id": "c03", "url": "`+url03+`/hook", "token": "tok-03"}}}`)
	require.Equal(t, map[string]any{"taskId": task.ID, "pushNotificationConfig": map[string]any{"id": "c03", "url": url03 + "/hook", "token": "tok-03"}},
		set["result"], "%v", set)
	set = rpc(t, bob, `{"jsonrpc": "2.0", "id": 2, "method": "CreateTaskPushNotificationConfig", "params": {"taskId": "`+task.ID+`",
		"id": "c10", "url": "`+url10+`/hook", "token": "tok-10"}}`)
	require.Equal(t, map[string]any{"taskId": task.ID, "id": "c10", "url": url10 + "/hook", "token": "tok-10"}, set["result"], "%v", set)
	rpc(t, alice, `{"jsonrpc": "2.0", "id": 3, "method": "tasks/pushNotificationConfig/set", "params": {"taskId": "`+task.ID+`",
		"pushNotificationConfig": {"id": "flaky", "url": "`+urlFlaky+`/hook", "token": "tok-f"}}}`)

	// Each participant sees the other's configs without their secrets.
	list := rpc(t, bob, `{"jsonrpc": "2.0", "id": 4, "method": "ListTaskPushNotificationConfigs", "params": {"taskId": "`+task.ID+`"}}`)
	require.Equal(t, []any{
		map[string]any{"taskId": task.ID, "id": "c03", "url": url03 + "/hook"},
		map[string]any{"taskId": task.ID, "id": "c10", "url": url10 + "/hook", "token": "tok-10"},
		map[string]any{"taskId": task.ID, "id": "flaky", "url": urlFlaky + "/hook"},
	}, list["result"].(map[string]any)["configs"])

	bob.ok(t, contract.RouteA2ATasksUpdate, map[string]any{"taskId": task.ID, "state": "working"}, nil)
	bob.ok(t, contract.RouteA2ATasksMessage, map[string]any{"taskId": task.ID, "parts": []map[string]any{{"type": "text", "text": "on it"}}}, nil)
	bob.ok(t, contract.RouteA2ATasksUpdate, map[string]any{"taskId": task.ID, "state": "completed"}, nil)

	bodies, tokens := hook03.received(t, 3)
	require.Equal(t, []string{"working", "working", "completed"}, pushedStates(bodies))
	require.Equal(t, []string{"tok-03", "tok-03", "tok-03"}, tokens)
	require.Equal(t, "task", bodies[0]["kind"])
	require.Len(t, bodies[0]["history"], 0, "the task as it stood after the first change")
	require.Len(t, bodies[1]["history"], 1, "after the message")
	bodies, tokens = hook10.received(t, 3)
	require.Equal(t, []string{"TASK_STATE_WORKING", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"}, pushedStates(bodies))
	require.Equal(t, []string{"tok-10", "tok-10", "tok-10"}, tokens)
	bodies, tokens = flaky.received(t, 3)
	require.Equal(t, []string{"working", "working", "completed"}, pushedStates(bodies), "a webhook failing three times still gets everything, in order")
	require.Equal(t, []string{"tok-f", "tok-f", "tok-f"}, tokens)
	require.Equal(t, 6, flaky.count())
}

func TestA2APushBadInput(t *testing.T) {
	t.Parallel()
	app, alice, bob, task := pushTask(t)
	eve := headerAgent(app, "eve")
	refused, refusedURL := newWebhook(t, 0)
	port := refusedURL[strings.LastIndex(refusedURL, ":")+1:]
	good, goodURL := newWebhook(t, 0)
	set := func(a a2aAgent, id, url string) map[string]any {
		return rpc(t, a, `{"jsonrpc": "2.0", "id": 1, "method": "tasks/pushNotificationConfig/set", "params": {"taskId": "`+task.ID+`",
			"pushNotificationConfig": {"id": "`+id+`", "url": "`+url+`"}}}`)
	}
	for name, url := range map[string]string{
		"loopback, not allow-listed":          "http://127.0.0.2:" + port + "/hook",
		"https to loopback, not allow-listed": "https://127.0.0.2:" + port + "/hook",
		"not http":                            "ftp://127.0.0.1:" + port + "/hook",
		"a name resolving to loopback":        "https://localhost:" + port + "/hook",
		"not a URL":                           "hook",
		"credentials in the URL":              "https://user:pw@127.0.0.1:" + port + "/hook",
	} {
		code, _ := rpcErrorCode(t, set(alice, "bad", url))
		require.Equal(t, contract.RPCInvalidParams, code, name)
	}
	code, _ := rpcErrorCode(t, set(eve, "eve", goodURL))
	require.Equal(t, contract.RPCTaskNotFound, code, "not a participant")

	for i := range 10 {
		require.Contains(t, set(alice, "c"+string(rune('a'+i)), goodURL), "result")
	}
	code, _ = rpcErrorCode(t, set(alice, "eleventh", goodURL))
	require.Equal(t, contract.RPCInvalidParams, code, "more than 10 configs")
	require.Contains(t, set(alice, "ca", goodURL+"/again"), "result", "replacing one of the ten")

	list := rpc(t, alice, `{"jsonrpc": "2.0", "id": 2, "method": "ListTaskPushNotificationConfigs", "params": {"taskId": "`+task.ID+`"}}`)
	require.Len(t, list["result"].(map[string]any)["configs"], 10)
	got := rpc(t, bob, `{"jsonrpc": "2.0", "id": 3, "method": "tasks/pushNotificationConfig/get", "params": {"id": "`+task.ID+`", "pushNotificationConfigId": "ca"}}`)
	require.Equal(t, goodURL+"/again", got["result"].(map[string]any)["pushNotificationConfig"].(map[string]any)["url"])
	for name, body := range map[string]string{
		"get an unknown config":    `{"jsonrpc": "2.0", "id": 4, "method": "GetTaskPushNotificationConfig", "params": {"taskId": "` + task.ID + `", "id": "nope"}}`,
		"delete an unknown config": `{"jsonrpc": "2.0", "id": 4, "method": "tasks/pushNotificationConfig/delete", "params": {"id": "` + task.ID + `", "pushNotificationConfigId": "nope"}}`,
		"an unknown task":          `{"jsonrpc": "2.0", "id": 4, "method": "tasks/pushNotificationConfig/list", "params": {"id": "nope"}}`,
	} {
		code, _ := rpcErrorCode(t, rpc(t, alice, body))
		require.Equal(t, contract.RPCTaskNotFound, code, name)
	}
	code, _ = rpcErrorCode(t, rpc(t, alice, `{"jsonrpc": "2.0", "id": 5, "method": "DeleteTaskPushNotificationConfig", "params": {"taskId": "`+task.ID+`"}}`))
	require.Equal(t, contract.RPCInvalidParams, code, "delete without a config ID")
	deleted := rpc(t, alice, `{"jsonrpc": "2.0", "id": 6, "method": "DeleteTaskPushNotificationConfig", "params": {"taskId": "`+task.ID+`", "id": "cb"}}`)
	require.Nil(t, deleted["error"])
	list = rpc(t, alice, `{"jsonrpc": "2.0", "id": 7, "method": "tasks/pushNotificationConfig/list", "params": {"id": "`+task.ID+`"}}`)
	require.Len(t, list["result"], 9)

	// A change reaches the nine configs, and never the refused addresses.
	bob.ok(t, contract.RouteA2ATasksUpdate, map[string]any{"taskId": task.ID, "state": "working"}, nil)
	good.received(t, 9)
	require.Zero(t, refused.count())
}

// TestA2APushOnlyForParticipantsMessages: a message naming a task its sender does not
// take part in is refused like a task route's outsider (a2a:admin, which open mode
// gives, does not help): nothing is stored, no event is appended and no push is sent.
// A participant's message is a change of the task: it is pushed on its own.
func TestA2APushOnlyForParticipantsMessages(t *testing.T) {
	t.Parallel()
	app, alice, bob, task := pushTask(t)
	eve := headerAgent(app, "eve")
	hook, url := newWebhook(t, 0)
	rpc(t, alice, `{"jsonrpc": "2.0", "id": 1, "method": "CreateTaskPushNotificationConfig", "params": {"taskId": "`+task.ID+`",
		"id": "c1", "url": "`+url+`/hook"}}`)

	before := a2aState(t, app)
	for i := range 3 {
		e := eve.post(t, contract.RouteA2AMessagesPost, map[string]any{"toAgent": "alice", "privacy": "private",
			"taskId": task.ID, "content": "noise " + string(rune('a'+i))}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
		require.Equal(t, "taskId", e.Details["field"])
	}
	eve.post(t, contract.RouteA2AMessagesPost, map[string]any{"taskId": "t-unknown", "content": "x"}).
		requireError(t, http.StatusNotFound, contract.CodeNotFound)
	require.Equal(t, before, a2aState(t, app), "a refused post stores nothing and appends no event")

	bob.ok(t, contract.RouteA2AMessagesPost, map[string]any{"toAgent": "alice", "taskId": task.ID, "content": "on it"}, nil)
	hook.received(t, 1)
	bob.ok(t, contract.RouteA2ATasksUpdate, map[string]any{"taskId": task.ID, "state": "working"}, nil)
	bodies, _ := hook.received(t, 2)
	require.Equal(t, []string{"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"}, pushedStates(bodies))
	require.Equal(t, 2, hook.count(), "the refused posts triggered nothing")
}

// TestA2APushConfigIDOwnedByItsCreator: a config ID belongs to the participant who set
// it; the other participant may see the config (without its secrets) but neither
// replace nor delete it, in either generation.
func TestA2APushConfigIDOwnedByItsCreator(t *testing.T) {
	t.Parallel()
	_, alice, bob, task := pushTask(t)
	_, url := newWebhook(t, 0)
	_, bobURL := newWebhook(t, 0)
	set := rpc(t, alice, `{"jsonrpc": "2.0", "id": 1, "method": "tasks/pushNotificationConfig/set", "params": {"taskId": "`+task.ID+`",
		"pushNotificationConfig": {"id": "c1", "url": "`+url+`/hook", "token": "alice-secret"}}}`)
	require.Contains(t, set, "result", "%v", set)
	get := `{"jsonrpc": "2.0", "id": 2, "method": "GetTaskPushNotificationConfig", "params": {"taskId": "` + task.ID + `", "id": "c1"}}`
	stored := rpc(t, alice, get)["result"]
	require.Equal(t, map[string]any{"taskId": task.ID, "id": "c1", "url": url + "/hook", "token": "alice-secret"}, stored)

	for name, body := range map[string]string{
		"0.3 set": `{"jsonrpc": "2.0", "id": 3, "method": "tasks/pushNotificationConfig/set", "params": {"taskId": "` + task.ID + `",
			"pushNotificationConfig": {"id": "c1", "url": "` + bobURL + `/hook", "token": "bob-secret"}}}`,
		"1.0 create": `{"jsonrpc": "2.0", "id": 3, "method": "CreateTaskPushNotificationConfig", "params": {"taskId": "` + task.ID + `",
			"id": "c1", "url": "` + bobURL + `/hook"}}`,
		"0.3 delete": `{"jsonrpc": "2.0", "id": 3, "method": "tasks/pushNotificationConfig/delete", "params": {"id": "` + task.ID + `",
			"pushNotificationConfigId": "c1"}}`,
		"1.0 delete": `{"jsonrpc": "2.0", "id": 3, "method": "DeleteTaskPushNotificationConfig", "params": {"taskId": "` + task.ID + `", "id": "c1"}}`,
	} {
		code, _ := rpcErrorCode(t, rpc(t, bob, body))
		require.Equal(t, contract.RPCInvalidParams, code, name)
		require.Equal(t, stored, rpc(t, alice, get)["result"], "%s: the config is unchanged", name)
	}
	require.Equal(t, map[string]any{"taskId": task.ID, "id": "c1", "url": url + "/hook"}, rpc(t, bob, get)["result"],
		"the other participant sees the config without its token")

	set = rpc(t, alice, `{"jsonrpc": "2.0", "id": 4, "method": "CreateTaskPushNotificationConfig", "params": {"taskId": "`+task.ID+`",
		"id": "c1", "url": "`+url+`/again"}}`)
	require.Equal(t, map[string]any{"taskId": task.ID, "id": "c1", "url": url + "/again"}, set["result"], "the owner replaces it")
	deleted := rpc(t, alice, `{"jsonrpc": "2.0", "id": 5, "method": "DeleteTaskPushNotificationConfig", "params": {"taskId": "`+task.ID+`", "id": "c1"}}`)
	require.Nil(t, deleted["error"], "the owner deletes it")
}
