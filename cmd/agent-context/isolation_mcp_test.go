package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
)

// toolSet records the MCP tools (and actions) a suite called.
type toolSet struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (s *toolSet) add(tool string, args map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	action, _ := args["action"].(string)
	s.seen[tool+" "+action] = true
}

// unexercisedTools lists the tools and actions of contract.MCPToolRoutes the suite
// never called.
func unexercisedTools(used *toolSet) []string {
	var missing []string
	for _, tr := range contract.MCPToolRoutes() {
		if key := tr.Tool + " " + tr.Action; !used.seen[key] {
			missing = append(missing, key)
		}
	}
	return missing
}

// mcpTenant is a tenant's MCP session in the isolation suite.
type mcpTenant struct {
	c       *tenantClient
	session *mcp.ClientSession
	tools   *toolSet
}

func (c *tenantClient) mcp(t *testing.T, tools *toolSet) *mcpTenant {
	t.Helper()
	c.used.add(http.MethodPost, contract.PathMCP)
	return &mcpTenant{c: c, session: mcpConnect(t, c.app, "Authorization", c.bearer), tools: tools}
}

// ok calls a tool that must succeed and returns its structuredContent as JSON text.
func (m *mcpTenant) ok(t *testing.T, tool string, args map[string]any) string {
	t.Helper()
	m.tools.add(tool, args)
	res := mcpCall(t, m.session, tool, args)
	require.False(t, res.IsError, "%s %s: %s", m.c.name, tool, mcpText(res))
	raw, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	return string(raw)
}

// notFound calls a tool that must answer NOT_FOUND, exactly as the route does.
func (m *mcpTenant) notFound(t *testing.T, tool string, args map[string]any) {
	t.Helper()
	m.tools.add(tool, args)
	mcpRefused(t, m.session, tool, args, contract.CodeNotFound)
}

// subjectOf is the agent ID of a tenant's runtime token in the isolation suite.
func subjectOf(c *tenantClient) string { return "agent-" + strings.TrimSuffix(c.name, "-alpha") }

// requireMCPIsolation is the tenant isolation suite through the MCP door: both tenants
// write the same IDs with tools, each reads only its own through every tool, and the
// strangers see nothing.
func requireMCPIsolation(t *testing.T, a, b *tenantClient, strangers []*tenantClient, secret func(*tenantClient) string, tools *toolSet) {
	sessions := map[*tenantClient]*mcpTenant{}
	for _, c := range append([]*tenantClient{a, b}, strangers...) {
		sessions[c] = c.mcp(t, tools)
	}
	for _, c := range []*tenantClient{a, b} {
		m, s := sessions[c], "mcp "+secret(c)
		c.ok(t, http.StatusCreated, contract.RouteWindowsCreate.Path, map[string]any{
			"id": "mcp-w", "conversation": map[string]any{"conversationId": "mcp-conv"}, "stage": "original",
			"purpose": "chat", "tokenCount": 10,
			"items": []any{map[string]any{"id": "i-0", "ordinal": 0, "kind": "message", "content": s}},
		})
		m.ok(t, contract.ToolMemoryRemember, map[string]any{"id": "mcp-e", "content": s, "tags": []string{"mcp"}})
		m.ok(t, contract.ToolConversationAppend, map[string]any{"conversation_id": "mcp-conv", "messages": []any{
			map[string]any{"id": "mm-1", "role": "user", "content": s}}})
		m.ok(t, contract.ToolCtxAgent, map[string]any{"action": "register", "agent_type": "planner", "role": "r" + secret(c)})
		m.ok(t, contract.ToolCtxAgent, map[string]any{"action": "post", "message_id": "mcp-am", "message": s})
		m.ok(t, contract.ToolCtxTask, map[string]any{"action": "create", "task_id": "mcp-t", "to_agent": "peer", "description": s})
		m.ok(t, contract.ToolCtxTask, map[string]any{"action": "message", "task_id": "mcp-t", "message": "more " + s})
		m.ok(t, contract.ToolCtxTask, map[string]any{"action": "update", "task_id": "mcp-t", "state": "working", "message": s})
	}
	for _, pair := range [][2]*tenantClient{{a, b}, {b, a}} {
		m, mine, theirs := sessions[pair[0]], secret(pair[0]), secret(pair[1])
		own := func(tool string, args map[string]any) {
			t.Helper()
			out := m.ok(t, tool, args)
			require.Contains(t, out, mine, "%s %v", tool, args)
			require.NotContains(t, out, theirs, "%s %v", tool, args)
		}
		own(contract.ToolMemoryRecall, map[string]any{"query": "mcp " + mine, "mode": "text", "tags": []string{"mcp"}})
		require.NotContains(t, m.ok(t, contract.ToolMemoryRecall, map[string]any{"query": theirs, "mode": "text"}), theirs)
		own(contract.ToolMemoryGet, map[string]any{"entry_id": "mcp-e"})
		own(contract.ToolConversationRecent, map[string]any{"conversation_id": "mcp-conv"})
		own(contract.ToolConversationSearch, map[string]any{"query": mine})
		require.Equal(t, `{"hits":[]}`, m.ok(t, contract.ToolConversationSearch, map[string]any{"query": theirs}))
		own(contract.ToolContextWindowGet, map[string]any{"window_id": "mcp-w"})
		out := m.ok(t, contract.ToolKnowledgeQuery, map[string]any{"query": "anything", "requirement": "required"})
		require.Contains(t, out, "doc-"+pair[0].name)
		require.NotContains(t, out, "doc-"+pair[1].name)
		own(contract.ToolCtxAgent, map[string]any{"action": "list"})
		own(contract.ToolCtxAgent, map[string]any{"action": "export"})
		events := m.ok(t, contract.ToolCtxAgent, map[string]any{"action": "poll_events", "kinds": []string{"message_posted"}})
		require.Contains(t, events, `"actor":"`+subjectOf(pair[0])+`"`)
		require.NotContains(t, events, subjectOf(pair[1]))
		own(contract.ToolCtxTask, map[string]any{"action": "get", "task_id": "mcp-t"})
		own(contract.ToolCtxTask, map[string]any{"action": "list", "role": "from"})
		require.NotContains(t, m.ok(t, contract.ToolCtxAgent, map[string]any{"action": "read", "include_read": true}), theirs)
		var info contract.TaskInfo
		require.NoError(t, json.Unmarshal([]byte(m.ok(t, contract.ToolCtxTask, map[string]any{"action": "info"})), &info))
		require.NotZero(t, info.Active)
	}
	for _, stranger := range strangers {
		m := sessions[stranger]
		for _, other := range []*tenantClient{a, b} {
			require.Equal(t, `{"hits":[]}`, m.ok(t, contract.ToolConversationSearch, map[string]any{"query": secret(other)}))
			out := m.ok(t, contract.ToolMemoryRecall, map[string]any{"query": "mcp " + secret(other), "mode": "text"})
			require.Contains(t, out, `"results":[]`)
		}
		m.notFound(t, contract.ToolMemoryGet, map[string]any{"entry_id": "mcp-e"})
		m.notFound(t, contract.ToolMemoryCorrect, map[string]any{"entry_id": "mcp-e", "content": "x"})
		m.notFound(t, contract.ToolMemoryForget, map[string]any{"entry_id": "mcp-e"})
		m.notFound(t, contract.ToolContextWindowGet, map[string]any{"window_id": "mcp-w"})
		require.Equal(t, `{"messages":[]}`, m.ok(t, contract.ToolConversationRecent, map[string]any{"conversation_id": "mcp-conv"}))
		for _, action := range []map[string]any{{"action": "get"}, {"action": "cancel"}, {"action": "message", "message": "x"},
			{"action": "update", "state": "completed"}} {
			action["task_id"] = "mcp-t"
			m.notFound(t, contract.ToolCtxTask, action)
		}
		require.Contains(t, m.ok(t, contract.ToolCtxTask, map[string]any{"action": "list"}), `"tasks":[]`)
		require.JSONEq(t, `{"total":0,"active":0,"completed":0,"failed":0,"canceled":0}`,
			m.ok(t, contract.ToolCtxTask, map[string]any{"action": "info"}))
		require.Contains(t, m.ok(t, contract.ToolCtxAgent, map[string]any{"action": "list"}), `"agents":[]`)
		require.Equal(t, `{"messages":[]}`, m.ok(t, contract.ToolCtxAgent, map[string]any{"action": "read", "include_read": true}))
		require.Contains(t, m.ok(t, contract.ToolCtxAgent, map[string]any{"action": "poll_events"}), `"events":[]`)
	}
	// The writes of a tenant's own records, each in its scope: a correction and an
	// expiry in a, a cancel in b; the other tenant's records with the same IDs stay.
	ma, mb := sessions[a], sessions[b]
	var fixed contract.CorrectEntryResponse
	require.NoError(t, json.Unmarshal([]byte(ma.ok(t, contract.ToolMemoryCorrect, map[string]any{"entry_id": "mcp-e",
		"content": "corrected " + secret(a)})), &fixed))
	ma.ok(t, contract.ToolMemoryForget, map[string]any{"entry_id": fixed.Entry.ID})
	mb.ok(t, contract.ToolCtxTask, map[string]any{"action": "cancel", "task_id": "mcp-t"})
	var entry contract.ContextEntry
	require.NoError(t, json.Unmarshal([]byte(mb.ok(t, contract.ToolMemoryGet, map[string]any{"entry_id": "mcp-e"})), &entry))
	require.Equal(t, contract.EntryActive, entry.Status, "tenant-a's correction is not tenant-b's")
	var task contract.Task
	require.NoError(t, json.Unmarshal([]byte(ma.ok(t, contract.ToolCtxTask, map[string]any{"action": "get", "task_id": "mcp-t"})), &task))
	require.Equal(t, contract.TaskWorking, task.State, "tenant-b's cancel is not tenant-a's")
}
