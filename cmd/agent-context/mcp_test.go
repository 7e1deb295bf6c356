package main

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
)

// headerTransport adds fixed headers (the credential) to every request of the SDK's
// client, as an MCP client configured with a bearer token does.
type headerTransport struct {
	headers []string
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for i := 0; i+1 < len(h.headers); i += 2 {
		r.Header.Set(h.headers[i], h.headers[i+1])
	}
	return http.DefaultTransport.RoundTrip(r)
}

// mcpConnect connects the SDK's own client to app's MCP endpoint over its streamable
// HTTP transport; headers (name, value pairs) go with every request.
func mcpConnect(t *testing.T, app *testApp, headers ...string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "agent-context-test", Version: "1"}, nil)
	session, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:             app.base + contract.PathMCP,
		HTTPClient:           &http.Client{Transport: headerTransport{headers: headers}, Timeout: time.Minute},
		DisableStandaloneSSE: true,
	}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = session.Close() })
	return session
}

// mcpCall calls a tool and returns its result; a JSON-RPC error fails the test.
func mcpCall(t *testing.T, s *mcp.ClientSession, tool string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	require.NoError(t, err, "%s", tool)
	return res
}

// mcpOK calls a tool that must succeed and decodes its structuredContent into v (when
// v is not nil); the text item holds the same JSON.
func mcpOK(t *testing.T, s *mcp.ClientSession, tool string, args any, v any) {
	t.Helper()
	res := mcpCall(t, s, tool, args)
	require.False(t, res.IsError, "%s: %s", tool, mcpText(res))
	raw, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	require.JSONEq(t, string(raw), mcpText(res), "%s: the text item holds the structuredContent", tool)
	if v != nil {
		require.NoError(t, json.Unmarshal(raw, v), "%s", tool)
	}
}

// mcpRefused calls a tool that must be refused with code and returns the error object.
func mcpRefused(t *testing.T, s *mcp.ClientSession, tool string, args any, code string) contract.ErrorBody {
	t.Helper()
	res := mcpCall(t, s, tool, args)
	require.True(t, res.IsError, "%s must be refused with %s: %s", tool, code, mcpText(res))
	text := mcpText(res)
	require.True(t, strings.HasPrefix(text, code+": "), "%s: the text starts with the code: %s", tool, text)
	raw, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var body contract.MCPToolError
	require.NoError(t, json.Unmarshal(raw, &body), "%s", raw)
	require.Equal(t, code, body.Error.Code, "%s", raw)
	info := contract.Codes[code]
	require.Equal(t, info.Category, body.Error.Category)
	require.Equal(t, info.Retryable, body.Error.Retryable)
	require.NotNil(t, body.Error.Details)
	require.NotEmpty(t, body.Error.RequestID)
	return body.Error
}

func mcpText(res *mcp.CallToolResult) string {
	require.NotEmpty(nil, res.Content)
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

// requireRPCError asserts err is a JSON-RPC error with code.
func requireRPCError(t *testing.T, err error, code int64) {
	t.Helper()
	var wire *jsonrpc.Error
	require.ErrorAs(t, err, &wire)
	require.Equal(t, code, wire.Code, "%v", err)
}

// TestMCPTools lists the tools with their schemas and calls every one of them
// successfully through the SDK's own client against the real Main.
func TestMCPTools(t *testing.T) {
	t.Parallel()
	app, minter := startSecuredApp(t)
	s := mcpConnect(t, app, "Authorization", minter.bearer(contract.AllCapabilities...))
	require.Equal(t, contract.MCPServerName, s.InitializeResult().ServerInfo.Name)
	require.NotNil(t, s.InitializeResult().Capabilities.Tools)

	list, err := s.ListTools(context.Background(), nil)
	require.NoError(t, err)
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
		require.NotEmpty(t, tool.Description, tool.Name)
		raw, err := json.Marshal(tool.InputSchema)
		require.NoError(t, err)
		var schema struct {
			Type                 string                     `json:"type"`
			Properties           map[string]json.RawMessage `json:"properties"`
			Required             []string                   `json:"required"`
			AdditionalProperties json.RawMessage            `json:"additionalProperties"`
		}
		require.NoError(t, json.Unmarshal(raw, &schema))
		require.Equal(t, "object", schema.Type, tool.Name)
		require.JSONEq(t, `false`, string(schema.AdditionalProperties), "%s: unknown arguments are refused", tool.Name)
		require.NotEmpty(t, schema.Required, tool.Name)
		for name, prop := range schema.Properties {
			var p struct {
				Description string `json:"description"`
			}
			require.NoError(t, json.Unmarshal(prop, &p))
			require.NotEmpty(t, p.Description, "%s.%s has no description", tool.Name, name)
		}
	}
	var want []string
	for _, tr := range contract.MCPToolRoutes() {
		if !slices.Contains(want, tr.Tool) {
			want = append(want, tr.Tool)
		}
	}
	require.ElementsMatch(t, want, names)

	var entry contract.ContextEntry
	mcpOK(t, s, contract.ToolMemoryRemember, map[string]any{"content": "The staging cluster deploys from main.",
		"tags": []string{"deploy"}, "id": "e-1"}, &entry)
	require.Equal(t, "e-1", entry.ID)
	require.Equal(t, contract.EntryKindFact, entry.Kind)
	var recalled contract.RecallResponse
	mcpOK(t, s, contract.ToolMemoryRecall, map[string]any{"query": "staging cluster deploys", "mode": "text",
		"tags": []string{"deploy"}}, &recalled)
	require.Len(t, recalled.Results, 1)
	require.Equal(t, "e-1", recalled.Results[0].Entry.ID)
	var got contract.ContextEntry
	mcpOK(t, s, contract.ToolMemoryGet, map[string]any{"entry_id": "e-1"}, &got)
	require.Equal(t, entry, got)
	var corrected contract.CorrectEntryResponse
	mcpOK(t, s, contract.ToolMemoryCorrect, map[string]any{"entry_id": "e-1", "content": "Staging deploys from release.",
		"reason": "moved"}, &corrected)
	require.Equal(t, contract.EntrySuperseded, corrected.Superseded.Status)
	var forgotten contract.ContextEntry
	mcpOK(t, s, contract.ToolMemoryForget, map[string]any{"entry_id": corrected.Entry.ID}, &forgotten)
	require.Equal(t, contract.EntryExpired, forgotten.Status)

	var appended contract.AppendMessagesResponse
	mcpOK(t, s, contract.ToolConversationAppend, map[string]any{"conversation_id": "conv-1", "messages": []any{
		map[string]any{"role": "user", "content": "where does staging deploy from?", "id": "m-1"},
		map[string]any{"role": "assistant", "content": "from the release branch", "metadata": map[string]any{"k": 1}},
	}}, &appended)
	require.Equal(t, 2, appended.Appended)
	var recent contract.MessagesResponse
	mcpOK(t, s, contract.ToolConversationRecent, map[string]any{"conversation_id": "conv-1", "limit": 10}, &recent)
	require.Len(t, recent.Messages, 2)
	require.Equal(t, "m-1", recent.Messages[0].ID)
	require.NotEmpty(t, recent.Messages[1].ID, "an ID is generated for a message without one")
	var hits contract.SearchMessagesResponse
	mcpOK(t, s, contract.ToolConversationSearch, map[string]any{"query": "release branch", "conversation_id": "conv-1"}, &hits)
	require.Len(t, hits.Hits, 1)

	full := app.typed("Authorization", minter.bearer(contract.AllCapabilities...))
	_, _, err = full.CreateWindow(context.Background(), windowRequest("w-1", "conv-1", "hi"))
	require.NoError(t, err)
	var window contract.Window
	mcpOK(t, s, contract.ToolContextWindowGet, map[string]any{"window_id": "w-1"}, &window)
	require.Equal(t, "w-1", window.ID)

	var knowledgeAnswer contract.KnowledgeQueryResponse
	mcpOK(t, s, contract.ToolKnowledgeQuery, map[string]any{"query": "deploys", "requirement": "optional"}, &knowledgeAnswer)
	require.True(t, knowledgeAnswer.Degraded, "no provider is configured: an optional query degrades")

	var agent contract.Agent
	mcpOK(t, s, contract.ToolCtxAgent, map[string]any{"action": "register", "agent_type": "coder", "capabilities": []string{"go"}}, &agent)
	require.Equal(t, "agent-acme", agent.AgentID)
	var agents contract.AgentList
	mcpOK(t, s, contract.ToolCtxAgent, map[string]any{"action": "list"}, &agents)
	require.Len(t, agents.Agents, 1)
	var ack contract.MessageAck
	mcpOK(t, s, contract.ToolCtxAgent, map[string]any{"action": "post", "message": "build is green", "category": "notification"}, &ack)
	require.Equal(t, contract.AckAccepted, ack.Status)
	var inbox contract.AgentMessages
	mcpOK(t, s, contract.ToolCtxAgent, map[string]any{"action": "read"}, &inbox)
	var snapshot contract.Snapshot
	mcpOK(t, s, contract.ToolCtxAgent, map[string]any{"action": "export"}, &snapshot)
	require.Equal(t, contract.SnapshotSchemaVersion, snapshot.SchemaVersion)
	var events contract.EventPage
	mcpOK(t, s, contract.ToolCtxAgent, map[string]any{"action": "poll_events", "kinds": []string{"message_posted"}}, &events)
	require.NotEmpty(t, events.Events)

	var task contract.Task
	mcpOK(t, s, contract.ToolCtxTask, map[string]any{"action": "create", "task_id": "t-1", "to_agent": "reviewer",
		"description": "review the deploy change", "message": "see the PR"}, &task)
	require.Equal(t, contract.TaskCreated, task.State)
	mcpOK(t, s, contract.ToolCtxTask, map[string]any{"action": "message", "task_id": "t-1", "message": "one more thing"}, &task)
	require.Len(t, task.Messages, 2)
	mcpOK(t, s, contract.ToolCtxTask, map[string]any{"action": "get", "task_id": "t-1"}, &task)
	var tasks contract.TaskList
	mcpOK(t, s, contract.ToolCtxTask, map[string]any{"action": "list", "role": "from"}, &tasks)
	require.Len(t, tasks.Tasks, 1)
	var info contract.TaskInfo
	mcpOK(t, s, contract.ToolCtxTask, map[string]any{"action": "info"}, &info)
	require.EqualValues(t, 1, info.Total)
	mcpOK(t, s, contract.ToolCtxTask, map[string]any{"action": "cancel", "task_id": "t-1", "message": "not needed"}, &task)
	require.Equal(t, contract.TaskCanceled, task.State)
	e := mcpRefused(t, s, contract.ToolCtxTask, map[string]any{"action": "update", "task_id": "t-1", "state": "working"},
		contract.CodeInvalidTransition)
	require.Equal(t, contract.TaskCanceled, e.Details["from"])
}

// mcpToolCalls are valid arguments for every tool and action of contract.MCPToolRoutes
// (the records they name need not exist): the capability matrix calls each.
var mcpToolCalls = map[string]map[string]any{
	"ctx_agent register":    {"action": "register", "agent_type": "coder"},
	"ctx_agent list":        {"action": "list"},
	"ctx_agent post":        {"action": "post", "message": "hello"},
	"ctx_agent read":        {"action": "read"},
	"ctx_agent export":      {"action": "export"},
	"ctx_agent poll_events": {"action": "poll_events"},
	"ctx_task create":       {"action": "create", "task_id": "t-cap", "to_agent": "peer", "description": "x"},
	"ctx_task update":       {"action": "update", "task_id": "t-cap", "state": "working"},
	"ctx_task list":         {"action": "list"},
	"ctx_task get":          {"action": "get", "task_id": "t-cap"},
	"ctx_task cancel":       {"action": "cancel", "task_id": "t-cap"},
	"ctx_task message":      {"action": "message", "task_id": "t-cap", "message": "x"},
	"ctx_task info":         {"action": "info"},
	"memory_remember ":      {"id": "e-cap", "content": "a fact"},
	"memory_recall ":        {"query": "fact"},
	"memory_get ":           {"entry_id": "e-cap"},
	"memory_correct ":       {"entry_id": "e-cap", "content": "another fact"},
	"memory_forget ":        {"entry_id": "e-cap"},
	"conversation_append ":  {"conversation_id": "c-cap", "messages": []any{map[string]any{"id": "m-1", "role": "user", "content": "hi"}}},
	"conversation_recent ":  {"conversation_id": "c-cap"},
	"conversation_search ":  {"query": "hi"},
	"context_window_get ":   {"window_id": "w-cap"},
	"knowledge_query ":      {"query": "anything", "requirement": "optional"},
}

// TestMCPCapabilityMatrix: every tool and action refuses a token without the capability
// of the route it wraps (a tool error INTERNAL_TOKEN_FORBIDDEN naming it, nothing
// stored) and admits a token holding only that capability. It is driven by
// contract.MCPToolRoutes(), so a new tool joins it, and fails until it is given
// arguments here.
func TestMCPCapabilityMatrix(t *testing.T) {
	t.Parallel()
	app, minter := startSecuredApp(t)
	for _, tr := range contract.MCPToolRoutes() {
		key := tr.Tool + " " + tr.Action
		args, ok := mcpToolCalls[key]
		require.True(t, ok, "%s has no arguments in mcpToolCalls: add them", key)
		var others []string
		for _, c := range contract.AllCapabilities {
			if !slices.Contains(tr.Route.Capabilities, c) {
				others = append(others, c)
			}
		}
		lacking := mcpConnect(t, app, "Authorization", minter.bearer(others...))
		e := mcpRefused(t, lacking, tr.Tool, args, contract.CodeTokenForbidden)
		require.Equal(t, tr.Route.Capabilities[0], e.Details["requiredCapability"], key)
		holding := mcpConnect(t, app, "Authorization", minter.bearer(tr.Route.Capabilities...))
		res := mcpCall(t, holding, tr.Tool, args)
		require.NotContains(t, mcpText(res), contract.CodeTokenForbidden, key)
	}

	// Nothing a refused call tried was stored: the refused writes above ran before
	// the admitted ones, so a fresh scope shows that no refused write of another scope
	// leaked in, and the refused writes of this scope are checked through the reads.
	other := mcpConnect(t, app, "Authorization", minter.tenantBearer("other", contract.AllCapabilities...))
	for _, tool := range []string{contract.ToolMemoryRemember, contract.ToolConversationAppend} {
		lacking := mcpConnect(t, app, "Authorization", minter.tenantBearer("other", contract.CapContextRead, contract.CapMessagesRead, contract.CapA2ARead))
		mcpRefused(t, lacking, tool, mcpToolCalls[tool+" "], contract.CodeTokenForbidden)
	}
	lackingTasks := mcpConnect(t, app, "Authorization", minter.tenantBearer("other", contract.CapA2ARead, contract.CapA2ASend))
	mcpRefused(t, lackingTasks, contract.ToolCtxTask, mcpToolCalls["ctx_task create"], contract.CodeTokenForbidden)
	lackingSend := mcpConnect(t, app, "Authorization", minter.tenantBearer("other", contract.CapA2ARead, contract.CapA2ATasks))
	mcpRefused(t, lackingSend, contract.ToolCtxAgent, mcpToolCalls["ctx_agent post"], contract.CodeTokenForbidden)
	mcpRefused(t, lackingSend, contract.ToolCtxAgent, mcpToolCalls["ctx_agent register"], contract.CodeTokenForbidden)
	mcpRefused(t, other, contract.ToolMemoryGet, map[string]any{"entry_id": "e-cap"}, contract.CodeNotFound)
	mcpRefused(t, other, contract.ToolCtxTask, map[string]any{"action": "get", "task_id": "t-cap"}, contract.CodeNotFound)
	var recent contract.MessagesResponse
	mcpOK(t, other, contract.ToolConversationRecent, map[string]any{"conversation_id": "c-cap"}, &recent)
	require.Empty(t, recent.Messages)
	var events contract.EventPage
	mcpOK(t, other, contract.ToolCtxAgent, map[string]any{"action": "poll_events"}, &events)
	require.Empty(t, events.Events, "no agent, message, task or entry was written")
}

// TestMCPAgentPrivacy: a private ctx_agent message reaches its recipient only; a third
// agent of the same scope never reads it, nor sees it in a snapshot.
func TestMCPAgentPrivacy(t *testing.T) {
	t.Parallel()
	app, minter := startSecuredApp(t)
	agent := func(subject string) *mcp.ClientSession {
		return mcpConnect(t, app, "Authorization", minter.subjectBearer(subject, "acme", "alpha", contract.CapA2ASend, contract.CapA2ARead))
	}
	alice, bob, carol := agent("alice"), agent("bob"), agent("carol")
	var ack contract.MessageAck
	mcpOK(t, alice, contract.ToolCtxAgent, map[string]any{"action": "post", "to_agent": "bob", "privacy": "private",
		"message": "the deploy key rotates at noon"}, &ack)
	mcpOK(t, alice, contract.ToolCtxAgent, map[string]any{"action": "post", "message": "standup in five"}, nil)
	var inbox contract.AgentMessages
	mcpOK(t, carol, contract.ToolCtxAgent, map[string]any{"action": "read", "include_read": true}, &inbox)
	require.Len(t, inbox.Messages, 1)
	require.Equal(t, "standup in five", inbox.Messages[0].Content)
	var snapshot contract.Snapshot
	mcpOK(t, carol, contract.ToolCtxAgent, map[string]any{"action": "export"}, &snapshot)
	for _, m := range snapshot.Messages {
		require.NotEqual(t, ack.MessageID, m.ID, "a private message is not in a third agent's snapshot")
	}
	mcpOK(t, bob, contract.ToolCtxAgent, map[string]any{"action": "read"}, &inbox)
	require.Len(t, inbox.Messages, 2)
	require.True(t, slices.ContainsFunc(inbox.Messages, func(m contract.AgentMessage) bool {
		return m.ID == ack.MessageID && m.Content == "the deploy key rotates at noon"
	}))
	e := mcpRefused(t, alice, contract.ToolCtxAgent, map[string]any{"action": "export", "privacy": "full"}, contract.CodeTokenForbidden)
	require.Equal(t, contract.CapA2AAdmin, e.Details["requiredCapability"], "a full snapshot needs a2a:admin, as the route does")
}

// TestMCPAgentPostNamesOwnTasksOnly: a ctx_agent post naming a task its sender does not
// take part in is NOT_FOUND, as on the route; a participant's is accepted.
func TestMCPAgentPostNamesOwnTasksOnly(t *testing.T) {
	t.Parallel()
	app, minter := startSecuredApp(t)
	agent := func(subject string) *mcp.ClientSession {
		return mcpConnect(t, app, "Authorization", minter.subjectBearer(subject, "acme", "alpha",
			contract.CapA2ASend, contract.CapA2ARead, contract.CapA2ATasks))
	}
	alice, bob, carol := agent("alice"), agent("bob"), agent("carol")
	mcpOK(t, alice, contract.ToolCtxTask, map[string]any{"action": "create", "task_id": "t-1", "to_agent": "bob", "description": "x"}, nil)
	e := mcpRefused(t, carol, contract.ToolCtxAgent, map[string]any{"action": "post", "to_agent": "alice", "task_id": "t-1",
		"message": "let me in"}, contract.CodeNotFound)
	require.Equal(t, "taskId", e.Details["field"])
	mcpOK(t, bob, contract.ToolCtxAgent, map[string]any{"action": "post", "to_agent": "alice", "task_id": "t-1", "message": "on it"}, nil)
	var inbox contract.AgentMessages
	mcpOK(t, alice, contract.ToolCtxAgent, map[string]any{"action": "read"}, &inbox)
	require.Len(t, inbox.Messages, 1)
	require.Equal(t, "bob", inbox.Messages[0].FromAgent)
}

// TestMCPBadInput: wrong types, unknown arguments, unknown actions, a private post
// without to_agent, a wait over 30 s, an oversize entry, an unknown tool, a malformed
// or batched JSON-RPC body: each is the contract's error (a tool error, or JSON-RPC
// -32602 / -32700 / -32600), never a 500, and nothing is stored.
func TestMCPBadInput(t *testing.T) {
	t.Parallel()
	app, minter := startSecuredApp(t)
	bearer := minter.bearer(contract.AllCapabilities...)
	s := mcpConnect(t, app, "Authorization", bearer)
	cases := []struct {
		tool  string
		args  map[string]any
		code  string
		field string
	}{
		{contract.ToolMemoryRemember, map[string]any{"content": 5}, contract.CodeValidationFailed, "content"},
		{contract.ToolMemoryRemember, map[string]any{"content": "x", "tenant_id": "other"}, contract.CodeValidationFailed, "tenant_id"},
		{contract.ToolMemoryRemember, map[string]any{"content": "x", "Content": "y"}, contract.CodeValidationFailed, "Content"},
		{contract.ToolMemoryRemember, map[string]any{"content": "x", "kind": "rumour"}, contract.CodeValidationFailed, "kind"},
		{contract.ToolMemoryRemember, map[string]any{"content": strings.Repeat("a", contract.MaxEntryContentBytes+1)},
			contract.CodePayloadTooLarge, "content"},
		{contract.ToolMemoryRemember, map[string]any{}, contract.CodeValidationFailed, "content"},
		{contract.ToolMemoryRecall, map[string]any{"query": "x", "top_k": "ten"}, contract.CodeValidationFailed, "top_k"},
		{contract.ToolMemoryRecall, map[string]any{"query": "x", "top_k": 1e100}, contract.CodeValidationFailed, "top_k"},
		{contract.ToolMemoryRecall, map[string]any{"query": "x", "top_k": 101}, contract.CodeValidationFailed, "topK"},
		{contract.ToolMemoryGet, map[string]any{}, contract.CodeValidationFailed, "entry_id"},
		{contract.ToolMemoryGet, map[string]any{"entry_id": nil}, contract.CodeValidationFailed, "entry_id"},
		{contract.ToolConversationAppend, map[string]any{"conversation_id": "c-1", "messages": []any{
			map[string]any{"role": "user", "content": "x", "sequence": 1}}}, contract.CodeValidationFailed, "messages[0].sequence"},
		{contract.ToolConversationAppend, map[string]any{"conversation_id": "c-1", "messages": []any{
			map[string]any{"role": "robot", "content": "x"}}}, contract.CodeValidationFailed, "messages[0].role"},
		{contract.ToolCtxAgent, map[string]any{}, contract.CodeValidationFailed, "action"},
		{contract.ToolCtxAgent, map[string]any{"action": "dance"}, contract.CodeValidationFailed, "action"},
		{contract.ToolCtxAgent, map[string]any{"action": 3}, contract.CodeValidationFailed, "action"},
		{contract.ToolCtxTask, map[string]any{"action": "delete", "task_id": "t-1"}, contract.CodeValidationFailed, "action"},
		{contract.ToolCtxAgent, map[string]any{"action": "post", "message": "psst", "privacy": "private"}, contract.CodeValidationFailed, "toAgent"},
		{contract.ToolCtxAgent, map[string]any{"action": "poll_events", "wait_ms": 30_001}, contract.CodeValidationFailed, "waitMs"},
		{contract.ToolCtxAgent, map[string]any{"action": "list", "message": "hi"}, contract.CodeValidationFailed, "message"},
		{contract.ToolCtxTask, map[string]any{"action": "create", "to_agent": "peer", "description": "x", "state": "working"},
			contract.CodeValidationFailed, "state"},
		{contract.ToolCtxTask, map[string]any{"action": "create", "to_agent": "peer", "description": "x", "parts": []any{
			map[string]any{"type": "text", "text": "x", "mimeType": "text/plain"}}}, contract.CodeValidationFailed, "parts[0].mimeType"},
	}
	for _, tc := range cases {
		e := mcpRefused(t, s, tc.tool, tc.args, tc.code)
		require.Equal(t, tc.field, e.Details["field"], "%s %v: %s", tc.tool, tc.args, e.Message)
	}

	_, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "memory_delete_everything", Arguments: map[string]any{}})
	requireRPCError(t, err, jsonrpc.CodeInvalidParams)

	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"memory_remember","arguments":{"content":"x"}`,
		`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"memory_remember","arguments":{"content":"x"}}}]`,
		`"tools/call"`,
		`{"jsonrpc":"2.0","id":1}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"memory_remember","arguments":"content"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"memory_remember"}`,
		`{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"memory_remember","arguments":{"content":"x"}}}`,
		`{"jsonrpc":"2.0","id":{"x":1},"method":"tools/call","params":{"name":"memory_remember","arguments":{"content":"x"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///etc/passwd"}}`,
	} {
		r := app.do(t, http.MethodPost, contract.PathMCP, body, "Authorization", bearer, "Accept", "application/json, text/event-stream")
		require.Less(t, r.Status, 500, "%s: %s", body, r.Body)
		if r.Status == http.StatusOK {
			// A JSON-RPC error, or a tool error.
			var answer struct {
				Error  *struct{ Code int } `json:"error"`
				Result *struct {
					IsError bool `json:"isError"`
				} `json:"result"`
			}
			require.NoError(t, json.Unmarshal(r.Body, &answer), "%s", r.Body)
			require.True(t, answer.Error != nil || answer.Result.IsError, "%s: %s", body, r.Body)
		}
	}

	var events contract.EventPage
	mcpOK(t, s, contract.ToolCtxAgent, map[string]any{"action": "poll_events"}, &events)
	require.Empty(t, events.Events, "no entry, agent, message or task was written")
	var recent contract.MessagesResponse
	mcpOK(t, s, contract.ToolConversationRecent, map[string]any{"conversation_id": "c-1"}, &recent)
	require.Empty(t, recent.Messages)
}

// TestMCPStatelessReplicas: a record written through one Main is read through a second
// Main on the same database, by a client that never initialized a session with it (a
// bare tools/call), and by a fresh SDK session.
func TestMCPStatelessReplicas(t *testing.T) {
	t.Parallel()
	first := startApp(t)
	second := startAppOn(t, first.dsn, nil)
	mcpOK(t, mcpConnect(t, first), contract.ToolMemoryRemember, map[string]any{"id": "e-r", "content": "replicas share the database"}, nil)
	res, err := second.typed().MCP(context.Background(), &contract.RPCRequest{JSONRPC: "2.0", ID: json.RawMessage(`7`),
		Method: "tools/call", Params: json.RawMessage(`{"name":"memory_get","arguments":{"entry_id":"e-r"}}`)})
	require.NoError(t, err)
	require.Nil(t, res.Error)
	var result struct {
		IsError           bool                  `json:"isError"`
		StructuredContent contract.ContextEntry `json:"structuredContent"`
	}
	require.NoError(t, json.Unmarshal(res.Result, &result), "%s", res.Result)
	require.False(t, result.IsError)
	require.Equal(t, "replicas share the database", result.StructuredContent.Content)
	var recalled contract.RecallResponse
	mcpOK(t, mcpConnect(t, second), contract.ToolMemoryRecall, map[string]any{"query": "replicas", "mode": "text"}, &recalled)
	require.Len(t, recalled.Results, 1)
}

// TestMCPAuthentication: without a credential the endpoint answers 401 with the
// envelope and a challenge naming the protected resource metadata, which is served
// without one (RFC 9728) and names the configured authorization servers; the SDK's
// client cannot connect.
func TestMCPAuthentication(t *testing.T) {
	t.Parallel()
	app, minter := startSecuredApp(t, func(c *Config) {
		c.MCPAuthorizationServers = []string{"https://id.example.test", "https://id2.example.test"}
	})
	for _, headers := range [][]string{nil, {"Authorization", "Bearer not-a-token"}} {
		r := app.do(t, http.MethodPost, contract.PathMCP, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
			append(headers, "Accept", "application/json, text/event-stream")...)
		e := r.requireError(t, http.StatusUnauthorized, map[bool]string{true: contract.CodeTokenMissing, false: contract.CodeTokenInvalid}[headers == nil])
		require.Empty(t, e.Details)
		require.Equal(t, `Bearer resource_metadata="`+app.base+contract.PathOAuthProtectedResource+`", realm="agent-context-infra"`,
			r.Header.Get("WWW-Authenticate"))
	}
	_, err := mcp.NewClient(&mcp.Implementation{Name: "anon", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: app.base + contract.PathMCP, DisableStandaloneSSE: true}, nil)
	require.Error(t, err)

	r := app.do(t, http.MethodGet, contract.PathOAuthProtectedResource, nil)
	var meta oauthex.ProtectedResourceMetadata
	r.requireOK(t, http.StatusOK, &meta)
	require.Equal(t, app.base+contract.PathMCP, meta.Resource)
	require.Equal(t, []string{"https://id.example.test", "https://id2.example.test"}, meta.AuthorizationServers)
	require.Equal(t, []string{"header"}, meta.BearerMethodsSupported)

	// A credential admits the connection; a scope header the token disagrees with is
	// refused before any tool runs.
	mcpConnect(t, app, "Authorization", minter.bearer(contract.CapContextRead))
	r = app.do(t, http.MethodPost, contract.PathMCP, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		"Authorization", minter.bearer(contract.AllCapabilities...), "x-infra-tenant-id", "elsewhere")
	r.requireError(t, http.StatusForbidden, contract.CodeScopeForbidden)
}
