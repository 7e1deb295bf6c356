package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/contract"
)

// a2aCaps are the capabilities of an ordinary agent.
var a2aCaps = []string{contract.CapA2ASend, contract.CapA2ARead, contract.CapA2ATasks}

// a2aAgent calls the service as one agent: with a runtime token of its own, or, on an
// app without tokens, with the trusted subject header.
type a2aAgent struct {
	app     *testApp
	headers []string
}

func (a a2aAgent) post(t *testing.T, route contract.Route, body any) *testResponse {
	t.Helper()
	return a.app.post(t, route.Path, body, a.headers...)
}

// ok posts and decodes a 2xx answer.
func (a a2aAgent) ok(t *testing.T, route contract.Route, body, out any) {
	t.Helper()
	status := http.StatusOK
	if route.Path == contract.RouteA2ATasksCreate.Path {
		status = http.StatusCreated
	}
	a.post(t, route, body).requireOK(t, status, out)
}

// tokenAgent is subject of acme/alpha with a runtime token holding caps.
func tokenAgent(app *testApp, m minter, subject string, caps ...string) a2aAgent {
	return a2aAgent{app: app, headers: []string{"Authorization", m.subjectBearer(subject, "acme", "alpha", caps...)}}
}

// pollInBackground sends a poll off the test's goroutine (no assertions there) and
// returns where its page arrives; a failed request arrives as an empty page with the
// error in the test's log.
func (a a2aAgent) pollInBackground(t *testing.T, body map[string]any) <-chan contract.EventPage {
	out := make(chan contract.EventPage, 1)
	go func() {
		var page contract.EventPage
		r, err := a.app.send(context.Background(), http.MethodPost, contract.RouteA2AEventsPoll.Path, body, a.headers...)
		switch {
		case err != nil:
			t.Errorf("poll: %v", err)
		case r.Status != http.StatusOK:
			t.Errorf("poll: %d %s", r.Status, r.Body)
		default:
			if err := json.Unmarshal(r.Body, &page); err != nil {
				t.Errorf("poll: %v", err)
			}
		}
		out <- page
	}()
	return out
}

// headerAgent is subject on an app in open mode.
func headerAgent(app *testApp, subject string) a2aAgent {
	return a2aAgent{app: app, headers: []string{"x-infra-subject", subject}}
}

func (a a2aAgent) poll(t *testing.T, body map[string]any) contract.EventPage {
	t.Helper()
	var page contract.EventPage
	a.ok(t, contract.RouteA2AEventsPoll, body, &page)
	return page
}

func (a a2aAgent) read(t *testing.T, body map[string]any) []contract.AgentMessage {
	t.Helper()
	var res contract.AgentMessages
	a.ok(t, contract.RouteA2AMessagesRead, body, &res)
	return res.Messages
}

func eventKindsOf(page contract.EventPage) []string {
	kinds := make([]string, len(page.Events))
	for i, e := range page.Events {
		kinds[i] = e.Kind
	}
	return kinds
}

func TestA2AEndToEnd(t *testing.T) {
	t.Parallel()
	app, m := startSecuredApp(t)
	alice, bob, carol := tokenAgent(app, m, "alice", a2aCaps...), tokenAgent(app, m, "bob", a2aCaps...), tokenAgent(app, m, "carol", a2aCaps...)
	admin := tokenAgent(app, m, "ops", append([]string{contract.CapA2AAdmin}, a2aCaps...)...)

	// Agents: each registers itself; another agent's entry needs a2a:admin.
	var agent contract.Agent
	alice.ok(t, contract.RouteA2AAgentsRegister, map[string]any{"agentType": "planner", "capabilities": []string{"plan"}}, &agent)
	require.Equal(t, "alice", agent.AgentID)
	require.Equal(t, contract.AgentActive, agent.Status)
	require.Equal(t, []string{"1.0"}, agent.SupportedVersions)
	e := alice.post(t, contract.RouteA2AAgentsRegister, map[string]any{"agentId": "bob", "agentType": "x"}).
		requireError(t, http.StatusForbidden, contract.CodeTokenForbidden)
	require.Equal(t, contract.CapA2AAdmin, e.Details["requiredCapability"])
	admin.ok(t, contract.RouteA2AAgentsRegister, map[string]any{"agentId": "bob", "agentType": "coder", "role": "worker"}, &agent)
	require.Equal(t, "bob", agent.AgentID)
	var list contract.AgentList
	carol.ok(t, contract.RouteA2AAgentsList, map[string]any{"limit": 1}, &list)
	require.Len(t, list.Agents, 1)
	require.Equal(t, "alice", list.Agents[0].AgentID)
	carol.ok(t, contract.RouteA2AAgentsList, map[string]any{"limit": 1, "cursor": *list.NextCursor}, &list)
	require.Equal(t, "bob", list.Agents[0].AgentID)
	require.Nil(t, list.NextCursor)

	// Messages: a receipt-only ack, idempotent on messageId.
	broadcast := map[string]any{"messageId": "m-1", "category": "context_share", "content": "the plan is ready",
		"metadata": map[string]any{"step": 1}}
	r := alice.post(t, contract.RouteA2AMessagesPost, broadcast)
	var ack map[string]any
	r.requireOK(t, http.StatusOK, &ack)
	require.Len(t, ack, 3, "the ack echoes nothing of the message: %s", r.Body)
	require.Equal(t, "m-1", ack["messageId"])
	require.Equal(t, "accepted", ack["status"])
	first := ack["ts"]
	alice.post(t, contract.RouteA2AMessagesPost, broadcast).requireOK(t, http.StatusOK, &ack)
	require.Equal(t, map[string]any{"messageId": "m-1", "status": "duplicate", "ts": first}, ack)
	broadcast["content"] = "another plan"
	e = alice.post(t, contract.RouteA2AMessagesPost, broadcast).requireError(t, http.StatusConflict, contract.CodeIdempotencyConflict)
	require.Equal(t, []any{"m-1"}, e.Details["ids"])
	alice.ok(t, contract.RouteA2AMessagesPost, map[string]any{"messageId": "m-2", "toAgent": "bob", "privacy": "private",
		"priority": "critical", "content": "between us"}, nil)

	msgs := bob.read(t, map[string]any{})
	require.Len(t, msgs, 2)
	require.Equal(t, "m-1", msgs[0].ID)
	require.Equal(t, "the plan is ready", msgs[0].Content)
	require.JSONEq(t, `{"step":1}`, string(msgs[0].Metadata))
	require.Equal(t, "m-1", msgs[0].CorrelationID)
	require.Equal(t, msgs[0].CreatedAtMs+12*3600*1000, msgs[0].ExpiresAtMs)
	require.Equal(t, "private", msgs[1].Privacy)
	require.Empty(t, bob.read(t, map[string]any{}), "reading marked them read")
	require.Len(t, bob.read(t, map[string]any{"includeRead": true}), 2)
	require.Empty(t, alice.read(t, map[string]any{}), "an agent does not read its own messages")
	onlyShare := carol.read(t, map[string]any{"category": "context_share", "markRead": false})
	require.Len(t, onlyShare, 1, "carol sees the broadcast, never the private message")
	require.Len(t, carol.read(t, map[string]any{}), 1, "markRead false left it unread")

	// Tasks.
	var task contract.Task
	create := map[string]any{"id": "t-1", "toAgent": "bob", "description": "write the report",
		"parts": []any{map[string]any{"type": "text", "text": "by friday"}}}
	alice.ok(t, contract.RouteA2ATasksCreate, create, &task)
	require.Equal(t, contract.TaskCreated, task.State)
	require.Equal(t, "alice", task.FromAgent)
	alice.post(t, contract.RouteA2ATasksCreate, create).requireOK(t, http.StatusOK, &task)
	carol.post(t, contract.RouteA2ATasksGet, map[string]any{"taskId": "t-1"}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
	admin.ok(t, contract.RouteA2ATasksGet, map[string]any{"taskId": "t-1"}, &task)
	bob.ok(t, contract.RouteA2ATasksUpdate, map[string]any{"taskId": "t-1", "state": "working", "expectedVersion": 1}, &task)
	bob.ok(t, contract.RouteA2ATasksMessage, map[string]any{"taskId": "t-1", "parts": []any{
		map[string]any{"type": "data", "mimeType": "application/json", "data": map[string]any{"progress": 0.5}},
	}}, &task)
	require.Equal(t, contract.TaskRoleAgent, task.Messages[1].Role)
	e = bob.post(t, contract.RouteA2ATasksUpdate, map[string]any{"taskId": "t-1", "state": "created"}).
		requireError(t, http.StatusConflict, contract.CodeInvalidTransition)
	require.Equal(t, map[string]any{"from": "working", "to": "created"}, e.Details)
	bob.post(t, contract.RouteA2ATasksCancel, map[string]any{"taskId": "t-1"}).requireError(t, http.StatusForbidden, contract.CodeScopeForbidden)
	bob.ok(t, contract.RouteA2ATasksUpdate, map[string]any{"taskId": "t-1", "state": "completed", "artifacts": []any{
		map[string]any{"artifactId": "report", "name": "report.md", "parts": []any{map[string]any{"type": "file", "uri": "https://example.invalid/r.md"}}},
	}}, &task)
	require.Equal(t, contract.TaskCompleted, task.State)
	require.EqualValues(t, 4, task.Version)
	alice.ok(t, contract.RouteA2ATasksCreate, map[string]any{"id": "t-2", "toAgent": "bob", "description": "second"}, &task)
	alice.ok(t, contract.RouteA2ATasksCancel, map[string]any{"taskId": "t-2", "reason": "obsolete"}, &task)
	require.Equal(t, contract.TaskCanceled, task.State)
	alice.ok(t, contract.RouteA2ATasksCreate, map[string]any{"id": "t-3", "toAgent": "bob", "description": "third"}, &task)
	var tasks contract.TaskList
	bob.ok(t, contract.RouteA2ATasksList, map[string]any{"role": "to"}, &tasks)
	require.Len(t, tasks.Tasks, 3)
	require.EqualValues(t, 1, tasks.PendingCount)
	var info contract.TaskInfo
	alice.ok(t, contract.RouteA2ATasksInfo, map[string]any{}, &info)
	require.Equal(t, contract.TaskInfo{Total: 3, Active: 1, Completed: 1, Canceled: 1}, info)
	carol.ok(t, contract.RouteA2ATasksInfo, map[string]any{}, &info)
	require.Equal(t, contract.TaskInfo{}, info)

	// Events: every change, in commit order, directed ones only to their agents.
	page := bob.poll(t, map[string]any{"limit": 1000})
	require.Equal(t, []string{"agent_registered", "agent_registered", "message_posted", "message_posted",
		"task_created", "task_updated", "task_message", "task_updated", "task_created", "task_updated", "task_created"},
		eventKindsOf(page))
	for i, ev := range page.Events {
		require.EqualValues(t, i+1, ev.Sequence)
	}
	third := carol.poll(t, map[string]any{"limit": 1000})
	require.Equal(t, []string{"agent_registered", "agent_registered", "message_posted"}, eventKindsOf(third),
		"carol sees neither the private message's event nor the tasks' events")
	require.Equal(t, page.NextCursor, third.NextCursor)

	// A long poll wakes when an event commits.
	answer := bob.pollInBackground(t, map[string]any{"cursor": page.NextCursor, "waitMs": 30000})
	require.Eventually(t, func() bool { return app.main.hub.Waiting() == 1 }, time.Minute, time.Millisecond)
	alice.ok(t, contract.RouteA2AMessagesPost, map[string]any{"messageId": "m-3", "toAgent": "bob", "content": "wake up"}, nil)
	woken := <-answer
	require.Equal(t, []string{"message_posted"}, eventKindsOf(woken))
	require.Equal(t, "m-3", woken.Events[0].CorrelationID)
}

// In runtime-token mode the sender is the token's subject; with trusted headers
// (static token, open mode) fromAgent may name it.
func TestA2ASenderIsTheCaller(t *testing.T) {
	t.Parallel()
	secured, m := startSecuredApp(t)
	alice := tokenAgent(secured, m, "alice", a2aCaps...)
	for _, c := range []struct {
		route contract.Route
		body  map[string]any
	}{
		{contract.RouteA2AMessagesPost, map[string]any{"fromAgent": "mallory", "content": "hi"}},
		{contract.RouteA2ATasksCreate, map[string]any{"fromAgent": "mallory", "toAgent": "bob", "description": "d"}},
	} {
		e := alice.post(t, c.route, c.body).requireError(t, http.StatusForbidden, contract.CodeScopeForbidden)
		require.Equal(t, "fromAgent", e.Details["field"])
	}
	alice.ok(t, contract.RouteA2AMessagesPost, map[string]any{"fromAgent": "alice", "toAgent": "bob", "content": "hi"}, nil)

	open := startApp(t)
	service := headerAgent(open, "gateway")
	service.ok(t, contract.RouteA2AMessagesPost, map[string]any{"fromAgent": "planner", "toAgent": "coder", "content": "hi"}, nil)
	msgs := headerAgent(open, "coder").read(t, map[string]any{})
	require.Len(t, msgs, 1)
	require.Equal(t, "planner", msgs[0].FromAgent)
}

// a2aState counts every A2A row and the scope's last sequence, to prove a refused
// request changed nothing.
func a2aState(t *testing.T, app *testApp) string {
	t.Helper()
	var state string
	require.NoError(t, openPool(t, app.dsn).QueryRow(context.Background(), `
		SELECT concat_ws(',', (SELECT count(*) FROM a2a_agents), (SELECT count(*) FROM a2a_messages),
		    (SELECT count(*) FROM a2a_message_reads), (SELECT count(*) FROM a2a_tasks),
		    (SELECT count(*) FROM a2a_task_messages), (SELECT count(*) FROM a2a_task_artifacts),
		    (SELECT count(*) FROM a2a_task_history), (SELECT count(*) FROM a2a_events),
		    (SELECT coalesce(sum(last_seq), 0) FROM a2a_heads), (SELECT coalesce(sum(version), 0) FROM a2a_tasks))`).Scan(&state))
	return state
}

func TestA2ABadInput(t *testing.T) {
	t.Parallel()
	app, m := startSecuredApp(t)
	alice, bob := tokenAgent(app, m, "alice", a2aCaps...), tokenAgent(app, m, "bob", a2aCaps...)
	alice.ok(t, contract.RouteA2ATasksCreate, map[string]any{"id": "t-1", "toAgent": "bob", "description": "d"}, nil)
	bob.ok(t, contract.RouteA2ATasksUpdate, map[string]any{"taskId": "t-1", "state": "working"}, nil)
	before := a2aState(t, app)

	text := func(s string) map[string]any { return map[string]any{"type": "text", "text": s} }
	manyParts := make([]any, contract.MaxTaskParts+1)
	for i := range manyParts {
		manyParts[i] = text("x")
	}
	bigPart := []any{text(strings.Repeat("p", contract.MaxTaskPartBytes+1))}
	for _, c := range []struct {
		name   string
		who    a2aAgent
		route  contract.Route
		body   any
		status int
		code   string
		field  string
		limit  any
	}{
		{"unknown category", alice, contract.RouteA2AMessagesPost, map[string]any{"content": "x", "category": "urgent"}, 400, contract.CodeValidationFailed, "category", nil},
		{"empty category", alice, contract.RouteA2AMessagesPost, map[string]any{"content": "x", "category": ""}, 400, contract.CodeValidationFailed, "category", nil},
		{"unknown priority", alice, contract.RouteA2AMessagesPost, map[string]any{"content": "x", "priority": "p0"}, 400, contract.CodeValidationFailed, "priority", nil},
		{"unknown privacy", alice, contract.RouteA2AMessagesPost, map[string]any{"content": "x", "privacy": "secret"}, 400, contract.CodeValidationFailed, "privacy", nil},
		{"private broadcast", alice, contract.RouteA2AMessagesPost, map[string]any{"content": "x", "privacy": "private"}, 400, contract.CodeValidationFailed, "toAgent", nil},
		{"ttlHours 0", alice, contract.RouteA2AMessagesPost, map[string]any{"content": "x", "ttlHours": 0}, 400, contract.CodeValidationFailed, "ttlHours", 720.0},
		{"ttlHours 721", alice, contract.RouteA2AMessagesPost, map[string]any{"content": "x", "ttlHours": 721}, 400, contract.CodeValidationFailed, "ttlHours", 720.0},
		{"ttlHours absurd", alice, contract.RouteA2AMessagesPost, `{"content":"x","ttlHours":1e30}`, 400, contract.CodeValidationFailed, "ttlHours", 720.0},
		{"ttlHours fraction", alice, contract.RouteA2AMessagesPost, `{"content":"x","ttlHours":1.5}`, 400, contract.CodeValidationFailed, "ttlHours", 720.0},
		{"oversize content", alice, contract.RouteA2AMessagesPost, map[string]any{"content": strings.Repeat("c", contract.MaxAgentMessageContentBytes+1)}, 413, contract.CodePayloadTooLarge, "content", float64(contract.MaxAgentMessageContentBytes)},
		{"no content", alice, contract.RouteA2AMessagesPost, map[string]any{"toAgent": "bob"}, 400, contract.CodeValidationFailed, "content", nil},
		{"NUL in content", alice, contract.RouteA2AMessagesPost, map[string]any{"content": "a\x00b"}, 400, contract.CodeValidationFailed, "content", nil},
		{"to oneself", alice, contract.RouteA2AMessagesPost, map[string]any{"content": "x", "toAgent": "alice"}, 400, contract.CodeValidationFailed, "toAgent", nil},
		{"another sender", alice, contract.RouteA2AMessagesPost, map[string]any{"content": "x", "fromAgent": "bob"}, 403, contract.CodeScopeForbidden, "fromAgent", nil},
		{"a tenant in the body", alice, contract.RouteA2AMessagesPost, map[string]any{"content": "x", "tenantId": "other"}, 400, contract.CodeValidationFailed, "tenantId", nil},
		{"empty messageId", alice, contract.RouteA2AMessagesPost, map[string]any{"content": "x", "messageId": ""}, 400, contract.CodeValidationFailed, "messageId", nil},
		{"read limit 0", bob, contract.RouteA2AMessagesRead, map[string]any{"limit": 0}, 400, contract.CodeValidationFailed, "limit", 500.0},
		{"read limit 501", bob, contract.RouteA2AMessagesRead, map[string]any{"limit": 501}, 400, contract.CodeValidationFailed, "limit", 500.0},
		{"read unknown category", bob, contract.RouteA2AMessagesRead, map[string]any{"category": "gossip"}, 400, contract.CodeValidationFailed, "category", nil},
		{"register without type", alice, contract.RouteA2AAgentsRegister, map[string]any{"agentType": ""}, 400, contract.CodeValidationFailed, "agentType", nil},
		{"register a bad version", alice, contract.RouteA2AAgentsRegister, map[string]any{"agentType": "p", "supportedVersions": []string{"one"}}, 400, contract.CodeValidationFailed, "supportedVersions[0]", nil},
		{"register another agent", alice, contract.RouteA2AAgentsRegister, map[string]any{"agentId": "bob", "agentType": "p"}, 403, contract.CodeTokenForbidden, "", nil},
		{"agents bad cursor", alice, contract.RouteA2AAgentsList, map[string]any{"cursor": "bm90IGEgY3Vyc29y"}, 400, contract.CodeInvalidCursor, "cursor", nil},
		{"task without recipient", alice, contract.RouteA2ATasksCreate, map[string]any{"description": "d"}, 400, contract.CodeValidationFailed, "toAgent", nil},
		{"task without description", alice, contract.RouteA2ATasksCreate, map[string]any{"toAgent": "bob"}, 400, contract.CodeValidationFailed, "description", nil},
		{"oversize description", alice, contract.RouteA2ATasksCreate, map[string]any{"toAgent": "bob", "description": strings.Repeat("d", contract.MaxTaskDescriptionBytes+1)}, 413, contract.CodePayloadTooLarge, "description", float64(contract.MaxTaskDescriptionBytes)},
		{"too many parts", alice, contract.RouteA2ATasksCreate, map[string]any{"toAgent": "bob", "description": "d", "parts": manyParts}, 400, contract.CodeValidationFailed, "parts", 100.0},
		{"oversize part", alice, contract.RouteA2ATasksCreate, map[string]any{"toAgent": "bob", "description": "d", "parts": bigPart}, 413, contract.CodePayloadTooLarge, "parts[0]", float64(contract.MaxTaskPartBytes)},
		{"unknown part type", alice, contract.RouteA2ATasksCreate, map[string]any{"toAgent": "bob", "description": "d", "parts": []any{map[string]any{"type": "image"}}}, 400, contract.CodeValidationFailed, "parts[0].type", nil},
		{"text part with a uri", alice, contract.RouteA2ATasksCreate, map[string]any{"toAgent": "bob", "description": "d", "parts": []any{map[string]any{"type": "text", "text": "x", "uri": "u"}}}, 400, contract.CodeValidationFailed, "parts[0].uri", nil},
		{"file with bytes and uri", alice, contract.RouteA2ATasksCreate, map[string]any{"toAgent": "bob", "description": "d", "parts": []any{map[string]any{"type": "file", "bytes": "aGk=", "uri": "u"}}}, 400, contract.CodeValidationFailed, "parts[0].bytes", nil},
		{"file bytes not base64", alice, contract.RouteA2ATasksCreate, map[string]any{"toAgent": "bob", "description": "d", "parts": []any{map[string]any{"type": "file", "bytes": "***"}}}, 400, contract.CodeValidationFailed, "parts[0].bytes", nil},
		{"data part without data", alice, contract.RouteA2ATasksCreate, map[string]any{"toAgent": "bob", "description": "d", "parts": []any{map[string]any{"type": "data"}}}, 400, contract.CodeValidationFailed, "parts[0].data", nil},
		{"a part's unknown member", alice, contract.RouteA2ATasksCreate, map[string]any{"toAgent": "bob", "description": "d", "parts": []any{map[string]any{"type": "text", "text": "x", "kind": "text"}}}, 400, contract.CodeValidationFailed, "parts[0].kind", nil},
		{"task to oneself", alice, contract.RouteA2ATasksCreate, map[string]any{"toAgent": "alice", "description": "d"}, 400, contract.CodeValidationFailed, "toAgent", nil},
		{"task by another sender", alice, contract.RouteA2ATasksCreate, map[string]any{"toAgent": "bob", "description": "d", "fromAgent": "carol"}, 403, contract.CodeScopeForbidden, "fromAgent", nil},
		{"unknown state", bob, contract.RouteA2ATasksUpdate, map[string]any{"taskId": "t-1", "state": "done"}, 400, contract.CodeValidationFailed, "state", nil},
		{"stale expectedVersion", bob, contract.RouteA2ATasksUpdate, map[string]any{"taskId": "t-1", "state": "completed", "expectedVersion": 1}, 409, contract.CodeConflict, "", nil},
		{"expectedVersion 0", bob, contract.RouteA2ATasksUpdate, map[string]any{"taskId": "t-1", "state": "completed", "expectedVersion": 0}, 400, contract.CodeValidationFailed, "expectedVersion", float64(1<<53 - 1)},
		{"transition not allowed", bob, contract.RouteA2ATasksUpdate, map[string]any{"taskId": "t-1", "state": "created"}, 409, contract.CodeInvalidTransition, "", nil},
		{"cancel by the recipient", bob, contract.RouteA2ATasksUpdate, map[string]any{"taskId": "t-1", "state": "canceled"}, 403, contract.CodeScopeForbidden, "taskId", nil},
		{"artifact without parts", bob, contract.RouteA2ATasksUpdate, map[string]any{"taskId": "t-1", "state": "completed", "artifacts": []any{map[string]any{"name": "n"}}}, 400, contract.CodeValidationFailed, "artifacts[0].parts", nil},
		{"message without parts", bob, contract.RouteA2ATasksMessage, map[string]any{"taskId": "t-1", "parts": []any{}}, 400, contract.CodeValidationFailed, "parts", nil},
		{"unknown task", bob, contract.RouteA2ATasksMessage, map[string]any{"taskId": "t-9", "parts": []any{text("x")}}, 404, contract.CodeNotFound, "taskId", nil},
		{"unknown list role", bob, contract.RouteA2ATasksList, map[string]any{"role": "boss"}, 400, contract.CodeValidationFailed, "role", nil},
		{"unknown list state", bob, contract.RouteA2ATasksList, map[string]any{"states": []string{"working", "done"}}, 400, contract.CodeValidationFailed, "states[1]", nil},
		{"tasks bad cursor", bob, contract.RouteA2ATasksList, map[string]any{"cursor": "AAAA"}, 400, contract.CodeInvalidCursor, "cursor", nil},
		{"info with a member", bob, contract.RouteA2ATasksInfo, map[string]any{"agent": "alice"}, 400, contract.CodeValidationFailed, "agent", nil},
		{"waitMs 30001", bob, contract.RouteA2AEventsPoll, map[string]any{"waitMs": 30001}, 400, contract.CodeValidationFailed, "waitMs", 30000.0},
		{"waitMs absurd", bob, contract.RouteA2AEventsPoll, `{"waitMs":1e300}`, 400, contract.CodeValidationFailed, "waitMs", 30000.0},
		{"poll limit 1001", bob, contract.RouteA2AEventsPoll, map[string]any{"limit": 1001}, 400, contract.CodeValidationFailed, "limit", 1000.0},
		{"poll bad cursor", bob, contract.RouteA2AEventsPoll, map[string]any{"cursor": "garbage"}, 400, contract.CodeInvalidCursor, "cursor", nil},
		{"poll unknown kind", bob, contract.RouteA2AEventsPoll, map[string]any{"filter": map[string]any{"kinds": []string{"task_deleted"}}}, 400, contract.CodeValidationFailed, "filter.kinds[0]", nil},
		{"poll unknown consistency", bob, contract.RouteA2AEventsPoll, map[string]any{"filter": map[string]any{"minConsistency": "linearizable"}}, 400, contract.CodeValidationFailed, "filter.minConsistency", nil},
		{"snapshot unknown privacy", bob, contract.RouteA2ASnapshot, map[string]any{"privacy": "raw"}, 400, contract.CodeValidationFailed, "privacy", nil},
		{"full snapshot without admin", bob, contract.RouteA2ASnapshot, map[string]any{"privacy": "full"}, 403, contract.CodeTokenForbidden, "", nil},
	} {
		e := c.who.post(t, c.route, c.body).requireError(t, c.status, c.code)
		if c.field != "" {
			require.Equal(t, c.field, e.Details["field"], "%s: %v", c.name, e)
		}
		if c.limit != nil {
			require.Equal(t, c.limit, e.Details["limit"], "%s: %v", c.name, e)
		}
		require.Equal(t, before, a2aState(t, app), "%s changed what is stored", c.name)
	}
}

// A long poll on one replica wakes when an event commits through another: both
// replicas listen on the database.
func TestA2ALongPollWakesAcrossInstances(t *testing.T) {
	t.Parallel()
	first := startApp(t)
	second := startAppOn(t, first.dsn, nil)
	bob := headerAgent(first, "bob")
	start := bob.poll(t, map[string]any{})
	answer := bob.pollInBackground(t, map[string]any{"cursor": start.NextCursor, "waitMs": 30000})
	require.Eventually(t, func() bool { return first.main.hub.Waiting() == 1 }, time.Minute, time.Millisecond)
	headerAgent(second, "alice").ok(t, contract.RouteA2AMessagesPost, map[string]any{"messageId": "across", "toAgent": "bob", "content": "hi"}, nil)
	page := <-answer
	require.Equal(t, []string{"message_posted"}, eventKindsOf(page), "woken by the other replica's commit")
	require.Equal(t, "across", page.Events[0].CorrelationID)
}

// AGENT_CONTEXT_LISTEN_DATABASE_URL gives the event listener connections of its own
// DSN (here the same database under another application name, as a direct
// connection beside a PgBouncer pool would be): the LISTEN runs on it, and a long
// poll on the replica still wakes on another replica's commit.
func TestA2AListenDatabaseURL(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t)
	listenURL, err := url.Parse(dsn)
	require.NoError(t, err)
	q := listenURL.Query()
	q.Set("application_name", "agent-context-direct-listener")
	listenURL.RawQuery = q.Encode()
	first := startAppOn(t, dsn, nil, func(c *Config) { c.ListenDatabaseURL = listenURL.String() })
	second := startAppOn(t, dsn, nil)
	var listening int
	require.NoError(t, first.main.pool.QueryRow(context.Background(), `
		SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = 'agent-context-direct-listener a2a-listener'`).
		Scan(&listening))
	require.Equal(t, 1, listening)

	bob := headerAgent(first, "bob")
	start := bob.poll(t, map[string]any{})
	answer := bob.pollInBackground(t, map[string]any{"cursor": start.NextCursor, "waitMs": 30000})
	require.Eventually(t, func() bool { return first.main.hub.Waiting() == 1 }, time.Minute, time.Millisecond)
	headerAgent(second, "alice").ok(t, contract.RouteA2AMessagesPost, map[string]any{"messageId": "direct", "toAgent": "bob", "content": "hi"}, nil)
	page := <-answer
	require.Equal(t, "direct", page.Events[0].CorrelationID)
}

// snapshotSecrets are credentials planted where a snapshot shows text.
var snapshotSecrets = []string{
	"eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlLWJ5dGVz",
	"AKIAIOSFODNN7EXAMPLE",
	"hunter2-is-my-password",
	"ghp_abcdefghijklmnopqrstuvwxyz0123456789",
	"MIIEowIBAAKCAQEA7xq9secretkeymaterial",
	"s3cr3t-api-value",
	"dGhpcyBpcyBhIHZlcnkgc2VjcmV0IHRva2VuIHZhbHVlIQ9x",
	"opaque-bearer-value-123",
}

func TestA2ASnapshotRedactsSecrets(t *testing.T) {
	t.Parallel()
	app, m := startSecuredApp(t)
	alice, bob := tokenAgent(app, m, "alice", a2aCaps...), tokenAgent(app, m, "bob", a2aCaps...)
	carol := tokenAgent(app, m, "carol", a2aCaps...)
	admin := tokenAgent(app, m, "alice", append([]string{contract.CapA2AAdmin}, a2aCaps...)...)
	alice.ok(t, contract.RouteA2AAgentsRegister, map[string]any{"agentType": "planner", "role": "token=" + snapshotSecrets[5]}, nil)
	alice.ok(t, contract.RouteA2AMessagesPost, map[string]any{"messageId": "m-1", "content": fmt.Sprintf(
		"send it as Bearer %s or key %s with password=%s; ci token %s", snapshotSecrets[0], snapshotSecrets[1],
		snapshotSecrets[2], snapshotSecrets[3]),
		"metadata": map[string]any{"apiKey": snapshotSecrets[5], "note": "random " + snapshotSecrets[6], "n": 1.50}}, nil)
	alice.ok(t, contract.RouteA2AMessagesPost, map[string]any{"messageId": "m-2", "toAgent": "bob", "privacy": "private",
		"content": "curl -H 'Authorization: Bearer " + snapshotSecrets[7] + "'"}, nil)
	alice.ok(t, contract.RouteA2ATasksCreate, map[string]any{"toAgent": "bob", "description": "deploy with\n-----BEGIN RSA PRIVATE KEY-----\n" +
		snapshotSecrets[4] + "\n-----END RSA PRIVATE KEY-----\nthen report", "metadata": map[string]any{"secret": snapshotSecrets[2]}}, nil)

	r := bob.post(t, contract.RouteA2ASnapshot, map[string]any{})
	var snap contract.Snapshot
	r.requireOK(t, http.StatusOK, &snap)
	for _, s := range snapshotSecrets {
		require.NotContains(t, string(r.Body), s)
	}
	require.Equal(t, 1, snap.SchemaVersion)
	require.Equal(t, "bob", snap.AgentID)
	require.Equal(t, contract.SnapshotRedacted, snap.Privacy)
	require.Len(t, snap.Agents, 1)
	require.Equal(t, []string{"m-1", "m-2"}, []string{snap.Messages[0].ID, snap.Messages[1].ID})
	require.Contains(t, snap.Messages[0].Content, "[REDACTED:bearer]")
	require.Contains(t, snap.Messages[0].Content, "[REDACTED:aws_access_key]")
	require.Contains(t, snap.Messages[0].Content, "password=[REDACTED:password]")
	require.Contains(t, snap.Messages[0].Content, "[REDACTED:github_token]")
	require.JSONEq(t, `{"apiKey":"[REDACTED:key]","note":"random [REDACTED:high_entropy]","n":1.50}`, string(snap.Messages[0].Metadata))
	require.Equal(t, "curl -H 'Authorization: [REDACTED:authorization]'", snap.Messages[1].Content)
	require.Equal(t, "deploy with\n[REDACTED:private_key]\nthen report", snap.Tasks[0].Description)
	require.Equal(t, "token=[REDACTED:token]", *snap.Agents[0].Role)

	// A third agent's snapshot holds no private message and no task of others.
	carol.post(t, contract.RouteA2ASnapshot, map[string]any{}).requireOK(t, http.StatusOK, &snap)
	require.Len(t, snap.Messages, 1)
	require.Equal(t, "m-1", snap.Messages[0].ID)
	require.Empty(t, snap.Tasks)

	// privacy full needs a2a:admin and redacts nothing.
	r = admin.post(t, contract.RouteA2ASnapshot, map[string]any{"privacy": "full"})
	r.requireOK(t, http.StatusOK, &snap)
	for _, s := range snapshotSecrets {
		require.Contains(t, string(r.Body), s)
	}
	var raw map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(r.Body, &raw))
	require.NotContains(t, raw, "artifactId")
}

// The sweeper runs as a River periodic job: with a tiny event retention the log
// empties on its own, with no request to trigger a purge.
func TestA2ASweeperRunsPeriodically(t *testing.T) {
	t.Parallel()
	app := startApp(t, func(c *Config) {
		c.A2AEventRetention, c.A2ASweepInterval = time.Millisecond, 50*time.Millisecond
	})
	alice, bob := headerAgent(app, "alice"), headerAgent(app, "bob")
	alice.ok(t, contract.RouteA2AMessagesPost, map[string]any{"messageId": "m-1", "content": "hi"}, nil)
	require.Eventually(t, func() bool {
		return len(bob.poll(t, map[string]any{}).Events) == 0
	}, time.Minute, 20*time.Millisecond, "the periodic sweep purged the event")
	require.Len(t, bob.read(t, map[string]any{}), 1, "messages live by their own TTL")
}

// A shutdown answers waiting long polls at once (with no events) instead of letting
// them hold the drain.
func TestA2AShutdownAnswersWaitingPolls(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	bob := headerAgent(app, "bob")
	type result struct {
		r   *testResponse
		err error
	}
	answer := make(chan result, 1)
	go func() {
		r, err := app.send(context.Background(), http.MethodPost, contract.RouteA2AEventsPoll.Path, map[string]any{"waitMs": 30000}, bob.headers...)
		answer <- result{r, err}
	}()
	require.Eventually(t, func() bool { return app.main.hub.Waiting() == 1 }, time.Minute, time.Millisecond)
	require.NoError(t, app.main.Close())
	got := <-answer
	require.NoError(t, got.err)
	r := got.r
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var page contract.EventPage
	require.NoError(t, json.Unmarshal(r.Body, &page))
	require.Empty(t, page.Events)
}
