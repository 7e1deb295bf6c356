package main

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
)

// rpc posts a raw JSON-RPC body to /a2a as agent and returns the decoded answer,
// asserting HTTP 200.
func rpc(t *testing.T, a a2aAgent, body string, headers ...string) map[string]any {
	t.Helper()
	r := a.app.post(t, contract.PathA2AJSONRPC, body, append(append([]string{}, a.headers...), headers...)...)
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
	var out map[string]any
	require.NoError(t, json.Unmarshal(r.Body, &out), "body: %s", r.Body)
	return out
}

func rpcErrorCode(t *testing.T, out map[string]any) (int, any) {
	t.Helper()
	e, ok := out["error"].(map[string]any)
	require.True(t, ok, "no error in %v", out)
	return int(e["code"].(float64)), e["data"]
}

func TestJSONRPCBadInput(t *testing.T) {
	t.Parallel()
	app, m := startSecuredApp(t)
	alice := tokenAgent(app, m, "alice", a2aCaps...)
	before := a2aState(t, app)
	info10 := []any{map[string]any{"@type": contract.RPCErrorInfoType, "domain": contract.RPCErrorInfoDomain}}
	cases := []struct {
		name    string
		body    string
		headers []string
		code    int
		id      any
		gen10   bool
	}{
		{"not JSON", `{"jsonrpc": "2.0",`, nil, -32700, nil, false},
		{"not an object", `[1, 2]`, nil, -32600, nil, false},
		{"not an object, 1.0 header", `"x"`, []string{"A2A-Version", "1.0"}, -32600, nil, true},
		{"wrong jsonrpc", `{"jsonrpc": "1.0", "id": 7, "method": "tasks/get", "params": {"id": "x"}}`, nil, -32600, 7.0, false},
		{"numeric jsonrpc", `{"jsonrpc": 2.0, "id": "a", "method": "GetTask", "params": {"id": "x"}}`, nil, -32600, "a", false},
		{"method not a string", `{"jsonrpc": "2.0", "id": 1, "method": 5}`, nil, -32600, 1.0, false},
		{"id an object", `{"jsonrpc": "2.0", "id": {"x": 1}, "method": "tasks/get"}`, nil, -32600, nil, false},
		{"id an array", `{"jsonrpc": "2.0", "id": [1], "method": "GetTask"}`, nil, -32600, nil, false},
		{"unknown method", `{"jsonrpc": "2.0", "id": 2, "method": "tasks/explode", "params": {}}`, nil, -32601, 2.0, false},
		{"unknown method, 1.0 header", `{"jsonrpc": "2.0", "id": 2, "method": "Explode"}`, []string{"A2A-Version", "1"}, -32601, 2.0, true},
		{"bad A2A-Version", `{"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": "x"}}`, []string{"A2A-Version", "2.0"}, -32009, 3.0, true},
		{"bad A2A-Version, 0.3 method", `{"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"id": "x"}}`, []string{"A2A-Version", "0.2"}, -32009, 3.0, false},
		{"params not an object", `{"jsonrpc": "2.0", "id": 4, "method": "message/send", "params": [1]}`, nil, -32602, 4.0, false},
		{"no message", `{"jsonrpc": "2.0", "id": 4, "method": "SendMessage", "params": {}}`, nil, -32602, 4.0, true},
		{"parts not a list", `{"jsonrpc": "2.0", "id": 4, "method": "message/send", "params": {"message": {"parts": 3}}}`, nil, -32602, 4.0, false},
		{"unknown 0.3 part kind", `{"jsonrpc": "2.0", "id": 5, "method": "message/send", "params": {"message": {"role": "user", "parts": [{"kind": "video"}]}, "metadata": {"toAgent": "bob"}}}`, nil, -32602, 5.0, false},
		{"1.0 part with two kinds", `{"jsonrpc": "2.0", "id": 5, "method": "SendMessage", "params": {"message": {"role": "ROLE_USER", "parts": [{"text": "a", "url": "http://x"}]}, "metadata": {"toAgent": "bob"}}}`, nil, -32602, 5.0, true},
		{"1.0 part with none", `{"jsonrpc": "2.0", "id": 5, "method": "SendMessage", "params": {"message": {"parts": [{"kind": "text"}]}, "metadata": {"toAgent": "bob"}}}`, nil, -32602, 5.0, true},
		{"no recipient", `{"jsonrpc": "2.0", "id": 6, "method": "message/send", "params": {"message": {"parts": [{"kind": "text", "text": "hi"}]}}}`, nil, -32602, 6.0, false},
		{"toAgent not a string", `{"jsonrpc": "2.0", "id": 6, "method": "message/send", "params": {"message": {"parts": [{"kind": "text", "text": "hi"}]}, "metadata": {"toAgent": 1}}}`, nil, -32602, 6.0, false},
		{"bad file bytes", `{"jsonrpc": "2.0", "id": 6, "method": "SendMessage", "params": {"message": {"parts": [{"raw": "!!"}]}, "metadata": {"toAgent": "bob"}}}`, nil, -32602, 6.0, true},
		{"negative historyLength", `{"jsonrpc": "2.0", "id": 8, "method": "tasks/get", "params": {"id": "t", "historyLength": -1}}`, nil, -32602, 8.0, false},
		{"get without id", `{"jsonrpc": "2.0", "id": 8, "method": "GetTask", "params": {}}`, nil, -32602, 8.0, true},
		{"unknown task", `{"jsonrpc": "2.0", "id": "g", "method": "tasks/get", "params": {"id": "nope"}}`, nil, -32001, "g", false},
		{"unknown task 1.0", `{"jsonrpc": "2.0", "id": "g", "method": "GetTask", "params": {"id": "nope"}}`, nil, -32001, "g", true},
		{"extended card", `{"jsonrpc": "2.0", "id": 9, "method": "GetExtendedAgentCard"}`, nil, -32004, 9.0, true},
		{"list tasks", `{"jsonrpc": "2.0", "id": 9, "method": "tasks/list"}`, nil, -32004, 9.0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := rpc(t, alice, tc.body, tc.headers...)
			code, data := rpcErrorCode(t, out)
			require.Equal(t, tc.code, code, "%v", out)
			require.Equal(t, "2.0", out["jsonrpc"])
			require.Contains(t, out, "id")
			require.Equal(t, tc.id, out["id"])
			require.NotContains(t, out, "result")
			if !tc.gen10 {
				require.Nil(t, data, "0.3 errors carry no data")
				return
			}
			require.Len(t, data, 1)
			info := data.([]any)[0].(map[string]any)
			require.Equal(t, info10[0].(map[string]any)["@type"], info["@type"])
			require.Equal(t, contract.RPCErrorInfoDomain, info["domain"])
			require.Equal(t, contract.RPCReasons[tc.code], info["reason"])
		})
	}
	require.Equal(t, before, a2aState(t, app))

	// Authentication comes first, with the REST envelope.
	app.post(t, contract.PathA2AJSONRPC, `{}`).requireError(t, http.StatusUnauthorized, contract.CodeTokenMissing)
	reader := tokenAgent(app, m, "alice", contract.CapA2ARead)
	reader.post(t, contract.RouteA2AJSONRPC, `{}`).requireError(t, http.StatusForbidden, contract.CodeTokenForbidden)
}

func TestJSONRPCTasks(t *testing.T) {
	t.Parallel()
	app, m := startSecuredApp(t)
	alice, bob, carol := tokenAgent(app, m, "alice", a2aCaps...), tokenAgent(app, m, "bob", a2aCaps...), tokenAgent(app, m, "carol", a2aCaps...)

	// 0.3: the task with kinds, the mapped state, role and parts; id echoed as sent.
	out := rpc(t, alice, `{"jsonrpc": "2.0", "id": 1.5, "method": "message/send", "params": {"message": {"kind": "message",
		"messageId": "mine", "role": "agent", "contextId": "ctx-1", "parts": [{"kind": "text", "text": "review this"},
		{"kind": "data", "data": [1, 2]}, {"kind": "file", "file": {"name": "a.txt", "mimeType": "text/plain", "bytes": "aGk="}}]},
		"metadata": {"toAgent": "bob"}, "configuration": {"blocking": true}}}`)
	require.Equal(t, 1.5, out["id"])
	task := out["result"].(map[string]any)
	id := task["id"].(string)
	require.Equal(t, "task", task["kind"])
	require.Equal(t, "ctx-1", task["contextId"])
	require.Equal(t, "submitted", task["status"].(map[string]any)["state"])
	require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`, task["status"].(map[string]any)["timestamp"])
	history := task["history"].([]any)
	require.Len(t, history, 1)
	msg := history[0].(map[string]any)
	require.Equal(t, map[string]any{"kind": "message", "messageId": id + "-m1", "contextId": "ctx-1", "taskId": id,
		"role": "user", "parts": []any{
			map[string]any{"kind": "text", "text": "review this"},
			map[string]any{"kind": "data", "data": map[string]any{"value": []any{1.0, 2.0}}, "metadata": map[string]any{"mimeType": "application/json"}},
			map[string]any{"kind": "file", "file": map[string]any{"name": "a.txt", "mimeType": "text/plain", "bytes": "aGk="}},
		}}, msg)
	require.Equal(t, map[string]any{"toAgent": "bob"}, task["metadata"])

	// An ordinary task: REST shows it, and bob's REST update is what 1.0 reads.
	var rest contract.Task
	bob.ok(t, contract.RouteA2ATasksGet, map[string]any{"taskId": id}, &rest)
	require.Equal(t, "alice", rest.FromAgent)
	require.Equal(t, "review this", rest.Description)
	// A 0.3 data part without metadata.mimeType is stored as application/json.
	require.Len(t, rest.Messages, 1)
	require.Equal(t, contract.PartData, rest.Messages[0].Parts[1].Type)
	require.Equal(t, ptrTo("application/json"), rest.Messages[0].Parts[1].MimeType)
	bob.ok(t, contract.RouteA2ATasksUpdate, map[string]any{"taskId": id, "state": "working"}, nil)
	out = rpc(t, bob, `{"jsonrpc": "2.0", "id": "b", "method": "SendMessage", "params": {"message": {"role": "ROLE_USER",
		"taskId": "`+id+`", "parts": [{"data": {"ok": true}, "mediaType": "application/x"}, {"url": "https://x/y", "filename": "y"}]}}}`)
	task = out["result"].(map[string]any)["task"].(map[string]any)
	require.NotContains(t, task, "kind")
	require.Equal(t, "TASK_STATE_WORKING", task["status"].(map[string]any)["state"])
	history = task["history"].([]any)
	require.Len(t, history, 2)
	require.Equal(t, map[string]any{"messageId": id + "-m2", "contextId": "ctx-1", "taskId": id, "role": "ROLE_AGENT",
		"parts": []any{map[string]any{"data": map[string]any{"ok": true}, "mediaType": "application/x"},
			map[string]any{"url": "https://x/y", "filename": "y"}}}, history[1])
	out = rpc(t, alice, `{"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": "`+id+`", "historyLength": 1}}`)
	history = out["result"].(map[string]any)["history"].([]any)
	require.Len(t, history, 1)
	require.Equal(t, id+"-m2", history[0].(map[string]any)["messageId"])
	out = rpc(t, alice, `{"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": "`+id+`", "historyLength": 0}}`)
	require.Equal(t, []any{}, out["result"].(map[string]any)["history"])

	// A non-participant sees nothing; only the creator cancels; a terminal task takes
	// no message and no second cancel.
	code, _ := rpcErrorCode(t, rpc(t, carol, `{"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"id": "`+id+`"}}`))
	require.Equal(t, -32001, code)
	code, _ = rpcErrorCode(t, rpc(t, carol, `{"jsonrpc": "2.0", "id": 3, "method": "message/send", "params": {"message": {"taskId": "`+id+`", "parts": [{"kind": "text", "text": "x"}]}}}`))
	require.Equal(t, -32001, code)
	code, _ = rpcErrorCode(t, rpc(t, bob, `{"jsonrpc": "2.0", "id": 3, "method": "CancelTask", "params": {"id": "`+id+`"}}`))
	require.Equal(t, -32002, code)
	out = rpc(t, alice, `{"jsonrpc": "2.0", "id": 4, "method": "tasks/cancel", "params": {"id": "`+id+`"}}`)
	require.Equal(t, "canceled", out["result"].(map[string]any)["status"].(map[string]any)["state"])
	code, _ = rpcErrorCode(t, rpc(t, alice, `{"jsonrpc": "2.0", "id": 5, "method": "CancelTask", "params": {"id": "`+id+`"}}`))
	require.Equal(t, -32002, code)
	code, _ = rpcErrorCode(t, rpc(t, bob, `{"jsonrpc": "2.0", "id": 5, "method": "message/send", "params": {"message": {"taskId": "`+id+`", "parts": [{"kind": "text", "text": "late"}]}}}`))
	require.Equal(t, -32004, code)

	// The same events as REST: created, updated, message, updated (cancel).
	page := alice.poll(t, map[string]any{"filter": map[string]any{"taskId": id}})
	require.Equal(t, []string{contract.EventTaskCreated, contract.EventTaskUpdated, contract.EventTaskMessage, contract.EventTaskUpdated},
		eventKindsOf(page))
}

func TestAgentCard(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	var bodies []string
	for _, path := range []string{contract.PathWellKnownAgentCard, contract.PathWellKnownAgentJSON, contract.RouteA2AAgentCard.Path} {
		r := app.do(t, http.MethodGet, path, nil)
		require.Equal(t, http.StatusOK, r.Status)
		bodies = append(bodies, string(r.Body))
	}
	require.Equal(t, bodies[0], bodies[1])
	require.Equal(t, bodies[0], bodies[2])
	base := app.base
	require.JSONEq(t, `{"protocolVersion": "0.3.0", "name": "agent-context",
		"description": "Context and coordination infrastructure for agents: tasks between agents, with their messages, artifacts and history.",
		"version": "`+version+`", "provider": {"organization": "agent-context", "url": "`+base+`"},
		"url": "`+base+`/a2a", "preferredTransport": "JSONRPC",
		"supportedInterfaces": [{"url": "`+base+`/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
		                        {"url": "`+base+`/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}],
		"capabilities": {"streaming": true, "pushNotifications": true, "stateTransitionHistory": true, "extendedAgentCard": false},
		"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT",
		                               "httpAuthSecurityScheme": {"scheme": "bearer", "bearerFormat": "JWT"}}},
		"security": [{"bearer": []}], "securityRequirements": [{"schemes": {"bearer": []}}],
		"defaultInputModes": ["text/plain", "application/json"], "defaultOutputModes": ["text/plain", "application/json"],
		"skills": [{"id": "tasks", "name": "Tasks", "description": "Send a task to another agent, continue it with messages, read its state and cancel it.", "tags": ["tasks"]}]}`,
		bodies[0])

	public := startApp(t, func(c *Config) { c.PublicURL = "https://ctx.example.test" })
	var card contract.AgentCard
	public.do(t, http.MethodGet, contract.PathWellKnownAgentCard, nil).requireOK(t, http.StatusOK, &card)
	require.Equal(t, "https://ctx.example.test/a2a", card.URL)
}

// TestJSONRPCNotifications: a request without an id is a notification (JSON-RPC 2.0),
// which gets no reply: 202 with an empty body, whether it succeeded, failed or named
// no method. It is still executed. An id of null is a request, and answered.
func TestJSONRPCNotifications(t *testing.T) {
	t.Parallel()
	app, m := startSecuredApp(t)
	alice := tokenAgent(app, m, "alice", a2aCaps...)
	noReply := func(body string, headers ...string) {
		t.Helper()
		r := app.post(t, contract.PathA2AJSONRPC, body, append(append([]string{}, alice.headers...), headers...)...)
		require.Equal(t, http.StatusAccepted, r.Status, "body: %s", r.Body)
		require.Empty(t, r.Body)
	}
	before := a2aState(t, app)
	noReply(`{"jsonrpc": "2.0", "method": "tasks/explode"}`)
	noReply(`{"jsonrpc": "2.0", "method": "GetTask", "params": {}}`)
	noReply(`{"jsonrpc": "2.0", "method": "tasks/get", "params": {"id": "nope"}}`, "A2A-Version", "9")
	require.Equal(t, before, a2aState(t, app))

	noReply(`{"jsonrpc": "2.0", "method": "message/send", "params": {"message": {"role": "user",
		"parts": [{"kind": "text", "text": "fire and forget"}]}, "metadata": {"toAgent": "bob"}}}`)
	require.NotEqual(t, before, a2aState(t, app), "a notification is executed")

	out := rpc(t, alice, `{"jsonrpc": "2.0", "id": null, "method": "tasks/get", "params": {"id": "nope"}}`)
	code, _ := rpcErrorCode(t, out)
	require.Equal(t, -32001, code)
	require.Nil(t, out["id"])
	// What cannot be read as a request is answered, with id null.
	code, _ = rpcErrorCode(t, rpc(t, alice, `{"jsonrpc": "1.0", "method": "tasks/get"}`))
	require.Equal(t, -32600, code)
}
