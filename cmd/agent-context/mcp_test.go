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
