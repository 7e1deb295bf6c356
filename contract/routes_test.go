package contract_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
)

// specCapabilities is the capability table of docs/api.md written out by hand, so that a
// wrong entry in contract.Routes() (which the server enforces as it stands) is caught.
// A route added to contract.Routes() must be added here too.
var specCapabilities = map[string][]string{
	"GET /health":       nil,
	"GET /ready":        nil,
	"GET /metrics":      nil,
	"GET /openapi.json": nil,
	"GET /openapi.yaml": nil,
	"POST /internal/v1/context/messages/batch":             {"messages:append"},
	"POST /internal/v1/context/messages/recent":            {"messages:read"},
	"POST /internal/v1/context/messages":                   {"messages:read"},
	"GET /internal/v1/context/maintenance/status":          {"messages:read"},
	"POST /internal/v1/context/messages/search":            {"messages:search"},
	"POST /internal/v1/context/conversations/list":         {"messages:read"},
	"POST /internal/v1/context/conversations/delete":       {"messages:delete"},
	"POST /internal/v1/context/conversations/retention":    {"messages:delete"},
	"POST /internal/v1/context/operations":                 {"messages:delete", "context:admin"},
	"POST /internal/v1/context/windows":                    {"context:write"},
	"POST /internal/v1/context/derivations":                {"context:write"},
	"POST /internal/v1/context/model-invocations":          {"context:write"},
	"POST /internal/v1/context/windows/get":                {"context:read"},
	"POST /internal/v1/context/windows/lineage":            {"context:read"},
	"POST /internal/v1/context/model-invocations/get":      {"context:read"},
	"POST /internal/v1/context/model-invocations/list":     {"context:read"},
	"POST /internal/v1/context/windows/list":               {"context:read"},
	"GET /internal/v1/knowledge/capabilities":              {"knowledge:read"},
	"POST /internal/v1/knowledge/query":                    {"knowledge:query"},
	"POST /internal/v1/knowledge/resolve-resources":        {"knowledge:query"},
	"POST /internal/v1/a2a/agents/register":                {"a2a:send"},
	"POST /internal/v1/a2a/messages/post":                  {"a2a:send"},
	"POST /internal/v1/a2a/messages/read":                  {"a2a:read"},
	"POST /internal/v1/a2a/events/poll":                    {"a2a:read"},
	"POST /internal/v1/a2a/agents/list":                    {"a2a:read"},
	"POST /internal/v1/a2a/snapshot":                       {"a2a:read"},
	"POST /internal/v1/a2a/handoff":                        {"a2a:send"},
	"GET /internal/v1/a2a/versions":                        {"a2a:read"},
	"GET /internal/v1/a2a/agent-card":                      nil,
	"GET /.well-known/agent-card.json":                     nil,
	"GET /.well-known/agent.json":                          nil,
	"POST /a2a":                                            {"a2a:tasks"},
	"POST /internal/v1/a2a/tasks":                          {"a2a:tasks"},
	"POST /internal/v1/a2a/tasks/get":                      {"a2a:tasks"},
	"POST /internal/v1/a2a/tasks/list":                     {"a2a:tasks"},
	"POST /internal/v1/a2a/tasks/update":                   {"a2a:tasks"},
	"POST /internal/v1/a2a/tasks/cancel":                   {"a2a:tasks"},
	"POST /internal/v1/a2a/tasks/message":                  {"a2a:tasks"},
	"POST /internal/v1/a2a/tasks/info":                     {"a2a:tasks"},
	"POST /internal/v1/a2a/costs":                          {"costs:read"},
	"POST /internal/v1/context/entries":                    {"context:write"},
	"POST /internal/v1/context/entries/merge":              {"context:write"},
	"POST /internal/v1/context/entries/correct":            {"context:write"},
	"POST /internal/v1/context/entries/expire":             {"context:write"},
	"POST /internal/v1/context/entries/get":                {"context:read"},
	"POST /internal/v1/context/entries/list":               {"context:read"},
	"POST /internal/v1/context/entries/history":            {"context:read"},
	"POST /internal/v1/context/recall":                     {"context:retrieve"},
	"POST /internal/v1/context/projections/vector/rebuild": {"context:admin"},
	"POST /internal/v1/context/exports":                    {"context:admin"},
	"POST /internal/v1/context/export-artifacts/get":       {"context:admin"},
	"POST /internal/v1/context/export-artifacts/chunk":     {"context:admin"},
	"POST /internal/v1/context/imports":                    {"context:admin"},
	"POST /internal/v1/context/advanced-operations":        {"context:admin"},
	// The MCP endpoint needs a credential; each tool call the capability of its tool
	// (specToolCapabilities).
	"POST /internal/v1/mcp":                     {},
	"GET /.well-known/oauth-protected-resource": nil,
}

// specToolCapabilities is the contract's MCP tool table written out by hand: each tool
// (and action) with the capability its call needs.
var specToolCapabilities = map[string]string{
	"ctx_agent register":    "a2a:send",
	"ctx_agent list":        "a2a:read",
	"ctx_agent post":        "a2a:send",
	"ctx_agent read":        "a2a:read",
	"ctx_agent export":      "a2a:read",
	"ctx_agent poll_events": "a2a:read",
	"ctx_task create":       "a2a:tasks",
	"ctx_task update":       "a2a:tasks",
	"ctx_task list":         "a2a:tasks",
	"ctx_task get":          "a2a:tasks",
	"ctx_task cancel":       "a2a:tasks",
	"ctx_task message":      "a2a:tasks",
	"ctx_task info":         "a2a:tasks",
	"memory_remember ":      "context:write",
	"memory_recall ":        "context:retrieve",
	"memory_get ":           "context:read",
	"memory_correct ":       "context:write",
	"memory_forget ":        "context:write",
	"conversation_append ":  "messages:append",
	"conversation_recent ":  "messages:read",
	"conversation_search ":  "messages:search",
	"context_window_get ":   "context:read",
	"knowledge_query ":      "knowledge:query",
}

func TestMCPToolsMatchTheSpecTable(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, tr := range contract.MCPToolRoutes() {
		key := tr.Tool + " " + tr.Action
		require.False(t, seen[key], "%s is listed twice", key)
		seen[key] = true
		want, ok := specToolCapabilities[key]
		require.True(t, ok, "%s is not in the tool table of this test: add it with its capability from the contract's tool table", key)
		require.Equal(t, []string{want}, tr.Route.Capabilities, key)
		require.True(t, slices.ContainsFunc(contract.Routes(), func(r contract.Route) bool {
			return r.Method == tr.Route.Method && r.Path == tr.Route.Path
		}), "%s wraps a route that is not served", key)
		got, ok := contract.MCPToolRouteOf(tr.Tool, tr.Action)
		require.True(t, ok)
		require.Equal(t, tr.Route, got)
	}
	require.Len(t, seen, len(specToolCapabilities), "a tool of the table is missing from contract.MCPToolRoutes()")
	_, ok := contract.MCPToolRouteOf(contract.ToolCtxAgent, "")
	require.False(t, ok, "ctx_agent has no call without an action")
	require.Equal(t, []string{"create", "update", "list", "get", "cancel", "message", "info"}, contract.MCPToolActions(contract.ToolCtxTask))
}

func TestRoutesMatchTheSpecTable(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, r := range contract.Routes() {
		key := r.Method + " " + r.Path
		require.False(t, seen[key], "%s is listed twice", key)
		seen[key] = true
		want, ok := specCapabilities[key]
		require.True(t, ok, "%s is not in the spec table of this test: add it with its capabilities from docs/api.md", key)
		require.Equal(t, want, r.Capabilities, key)
		for _, c := range r.Capabilities {
			require.True(t, slices.Contains(contract.AllCapabilities, c), "%s requires unknown capability %s", key, c)
		}
	}
	require.Len(t, seen, len(specCapabilities), "a route of the table is missing from contract.Routes()")
}

// TestCodeTable: every code has a status that matches its class, and the code table's
// retryable codes are exactly the spec's.
func TestCodeTable(t *testing.T) {
	t.Parallel()
	retryable := []string{}
	for code, info := range contract.Codes {
		require.NotEmpty(t, info.Category, code)
		require.GreaterOrEqual(t, info.Status, 400, code)
		if info.Retryable {
			retryable = append(retryable, code)
		}
	}
	slices.Sort(retryable)
	require.Equal(t, []string{
		contract.CodeEmbeddingUnavailable, contract.CodeKnowledgeUnavailable, contract.CodeKnowledgeUpstreamError,
		contract.CodeRateLimited, contract.CodeServiceUnavailable,
	}, retryable)
	// The base table has 22; the envelopes add VERSION_NOT_SUPPORTED, SIGNATURE_INVALID and
	// ENVELOPE_EXPIRED (INVALID_TRANSITION is in both).
	require.Len(t, contract.Codes, 25)
}
