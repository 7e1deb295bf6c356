package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/knowledge/knowledgetest"
	"github.com/agent-context/agent-context/contract"
)

// tenantClient calls the service as one tenant, with a runtime token holding every
// capability, and records which routes it exercised.
type tenantClient struct {
	app    *testApp
	name   string
	bearer string
	used   *routeSet
}

type routeSet struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (s *routeSet) add(method, path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen[method+" "+path] = true
}

func (c *tenantClient) call(t *testing.T, method, path string, body any) *testResponse {
	t.Helper()
	c.used.add(method, path)
	return c.app.do(t, method, path, body, "Authorization", c.bearer)
}

func (c *tenantClient) post(t *testing.T, path string, body any) *testResponse {
	t.Helper()
	return c.call(t, http.MethodPost, path, body)
}

// ok posts and decodes a 2xx answer into a generic JSON value.
func (c *tenantClient) ok(t *testing.T, status int, path string, body any) map[string]any {
	t.Helper()
	var out map[string]any
	c.post(t, path, body).requireOK(t, status, &out)
	return out
}

// TestTenantIsolation writes the same IDs in two tenants and proves, on every route and
// every MCP tool, that neither reads, searches, deletes or counts the other's records,
// and that a third tenant, and the first tenant in another project, see nothing at all.
// It fails when a route of contract.Routes() or a tool of contract.MCPToolRoutes() is
// not exercised here, so every new route and tool must join the suite.
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	knowledgeProvider := knowledgetest.NewProvider(t, scopedKnowledge)
	app, minter := startSecuredApp(t, withProviders(t, map[string]any{"default": "scoped", "providers": []any{
		providerEntry("scoped", knowledgeProvider.URL),
	}}))
	used := &routeSet{seen: map[string]bool{}}
	client := func(tenant, project string) *tenantClient {
		return &tenantClient{app: app, name: tenant + "-" + project,
			bearer: minter.scopeBearer(tenant, project, contract.AllCapabilities...), used: used}
	}
	a, b := client("tenant-a", "alpha"), client("tenant-b", "alpha")
	// Scopes without data: another tenant, and a's tenant in another project.
	strangers := []*tenantClient{client("tenant-c", "alpha"), client("tenant-a", "beta")}
	secret := func(c *tenantClient) string { return "zq" + strings.ReplaceAll(c.name, "-", "") + "secret" }

	// The same IDs in both tenants, each with content only it knows. Appends dedupe
	// within a scope only: each tenant's batch is written in full.
	for _, c := range []*tenantClient{a, b} {
		appended := c.ok(t, http.StatusOK, contract.RouteMessagesBatch.Path, map[string]any{"messages": []any{
			map[string]any{"id": "m-1", "scope": map[string]any{"conversationId": "conv-1"}, "role": "user", "content": "hello " + secret(c)},
			map[string]any{"id": "m-2", "scope": map[string]any{"conversationId": "conv-1"}, "role": "assistant", "content": "answer " + secret(c)},
		}})
		require.EqualValues(t, 2, appended["appended"], "%s: %v", c.name, appended)
		require.EqualValues(t, 0, appended["skipped"], "%s: %v", c.name, appended)
		for _, w := range []struct{ id, stage string }{{"w-1", "original"}, {"w-2", "assembled"}} {
			c.ok(t, http.StatusCreated, contract.RouteWindowsCreate.Path, map[string]any{
				"id": w.id, "conversation": map[string]any{"conversationId": "conv-1"}, "stage": w.stage,
				"purpose": "chat", "tokenCount": 10,
				"items": []any{map[string]any{"id": "i-0", "ordinal": 0, "kind": "message", "content": "item " + secret(c)}},
			})
		}
		c.ok(t, http.StatusCreated, contract.RouteDerivationsCreate.Path, map[string]any{
			"id": "d-1", "sourceWindowId": "w-1", "targetWindowId": "w-2", "kind": "assemble",
		})
		c.ok(t, http.StatusOK, contract.RouteModelInvocationsCreate.Path, map[string]any{
			"id": "inv-1", "conversation": map[string]any{"conversationId": "conv-1"}, "requestWindowId": "w-2",
			"provider": "openai", "model": "gpt-4.1-mini", "state": "succeeded",
			"inputTokens": 10, "outputTokens": 2, "responseContent": "response " + secret(c),
		})
		for _, e := range []map[string]any{
			{"id": "e-1", "kind": "fact", "content": "entry " + secret(c), "conversationId": "conv-1", "tags": []string{"shared"}},
			{"id": "e-2", "kind": "fact", "content": "second entry " + secret(c), "tags": []string{"shared"}},
			{"id": "e-3", "kind": "fact", "content": "third entry " + secret(c), "tags": []string{"shared"}},
			{"id": "e-4", "kind": "fact", "content": "fourth entry " + secret(c), "tags": []string{"shared"}},
		} {
			c.ok(t, http.StatusCreated, contract.RouteEntriesCreate.Path, e)
		}
		// The same IDs corrected, merged and expired in each tenant, each on its own.
		c.ok(t, http.StatusCreated, contract.RouteEntriesCorrect.Path, map[string]any{"entryId": "e-2", "content": "corrected " + secret(c)})
		c.ok(t, http.StatusCreated, contract.RouteEntriesMerge.Path, map[string]any{"entryIds": []string{"e-3", "e-4"},
			"merged": map[string]any{"id": "e-34", "kind": "summary", "content": "merged " + secret(c)}})
		c.ok(t, http.StatusCreated, contract.RouteEntriesCreate.Path, map[string]any{"id": "e-5", "kind": "fact", "content": "doomed " + secret(c)})
		c.ok(t, http.StatusOK, contract.RouteEntriesExpire.Path, map[string]any{"entryId": "e-5"})
		awaitProjected(t, c)
	}

	for _, pair := range [][2]*tenantClient{{a, b}, {b, a}} {
		self, other := pair[0], pair[1]
		t.Run("reads of "+self.name, func(t *testing.T) {
			mine, theirs := secret(self), secret(other)
			for _, route := range []contract.Route{contract.RouteMessagesRecent, contract.RouteMessages} {
				body := self.post(t, route.Path, map[string]any{"scope": map[string]any{"conversationId": "conv-1"}})
				body.requireOK(t, http.StatusOK, nil)
				require.Contains(t, string(body.Body), mine)
				require.NotContains(t, string(body.Body), theirs)
			}
			var hits struct {
				Hits []struct {
					Message contract.ConversationRecord `json:"message"`
				} `json:"hits"`
			}
			self.post(t, contract.RouteMessagesSearch.Path, map[string]any{"query": theirs}).requireOK(t, http.StatusOK, &hits)
			require.Empty(t, hits.Hits, "search must not cross tenants")
			self.post(t, contract.RouteMessagesSearch.Path, map[string]any{"query": mine}).requireOK(t, http.StatusOK, &hits)
			require.Len(t, hits.Hits, 2)

			for _, get := range []struct {
				route contract.Route
				body  map[string]any
			}{
				{contract.RouteWindowsGet, map[string]any{"windowId": "w-1"}},
				{contract.RouteModelInvocationsGet, map[string]any{"invocationId": "inv-1"}},
			} {
				r := self.post(t, get.route.Path, get.body)
				r.requireOK(t, http.StatusOK, nil)
				require.Contains(t, string(r.Body), mine)
				require.NotContains(t, string(r.Body), theirs)
			}
			var lineage struct {
				Windows     []map[string]any `json:"windows"`
				Derivations []map[string]any `json:"derivations"`
			}
			r := self.post(t, contract.RouteWindowsLineage.Path, map[string]any{"windowId": "w-2"})
			r.requireOK(t, http.StatusOK, &lineage)
			require.Len(t, lineage.Windows, 2)
			require.Len(t, lineage.Derivations, 1)
			require.NotContains(t, string(r.Body), theirs)

			// The provider is asked with the caller's own runtime token, so it answers
			// for the caller's scope only.
			requireOwnKnowledge(t, self, other)

			// Costs count the scope's own invocation only, under its own agent.
			costs := tenantCosts(t, self)
			require.EqualValues(t, 1, costs.Totals.Calls)
			require.EqualValues(t, 10, costs.Totals.InputTokens)
			require.Len(t, costs.Groups, 1)
			require.Equal(t, "agent-"+strings.TrimSuffix(self.name, "-alpha"), *costs.Groups[0].Key)
			for id, status := range map[string]string{"e-1": "active", "e-2": "superseded", "e-3": "merged", "e-34": "active", "e-5": "expired"} {
				var e contract.ContextEntry
				r := self.post(t, contract.RouteEntriesGet.Path, map[string]any{"entryId": id})
				r.requireOK(t, http.StatusOK, &e)
				require.Equal(t, status, e.Status, id)
				require.Contains(t, string(r.Body), mine)
				require.NotContains(t, string(r.Body), theirs)
			}
			// The lists hold the caller's own records only, and a cursor of the other
			// scope is refused.
			for _, list := range []struct {
				route contract.Route
				body  map[string]any
				items string
				want  int
			}{
				{contract.RouteEntriesList, map[string]any{"limit": 500}, "entries", 7},
				{contract.RouteConversationsList, map[string]any{}, "conversations", 1},
				{contract.RouteWindowsList, map[string]any{}, "windows", 2},
				{contract.RouteModelInvocationsList, map[string]any{"conversationId": "conv-1"}, "invocations", 1},
			} {
				var page map[string]json.RawMessage
				r := self.post(t, list.route.Path, list.body)
				r.requireOK(t, http.StatusOK, &page)
				require.NotContains(t, string(r.Body), theirs, list.route.Path)
				var items []json.RawMessage
				require.NoError(t, json.Unmarshal(page[list.items], &items))
				require.Len(t, items, list.want, list.route.Path)
				one := maps.Clone(list.body)
				one["limit"] = 1
				var first struct {
					NextCursor *string `json:"nextCursor"`
				}
				self.post(t, list.route.Path, one).requireOK(t, http.StatusOK, &first)
				if list.want > 1 {
					require.NotNil(t, first.NextCursor, list.route.Path)
					next := maps.Clone(one)
					next["cursor"] = *first.NextCursor
					other.post(t, list.route.Path, next).requireError(t, http.StatusBadRequest, contract.CodeInvalidCursor)
				}
			}
			var history contract.EntryHistory
			r = self.post(t, contract.RouteEntriesHistory.Path, map[string]any{"entryId": "e-2"})
			r.requireOK(t, http.StatusOK, &history)
			require.Len(t, history.Versions, 2)
			require.NotContains(t, string(r.Body), theirs)
			for _, mode := range contract.RecallModes {
				r := self.post(t, contract.RouteRecall.Path, map[string]any{"query": theirs, "mode": mode, "topK": 100})
				r.requireOK(t, http.StatusOK, nil)
				require.NotContains(t, string(r.Body), theirs, mode)
				var res contract.RecallResponse
				r = self.post(t, contract.RouteRecall.Path, map[string]any{"query": mine, "mode": mode, "topK": 100})
				r.requireOK(t, http.StatusOK, &res)
				require.NotContains(t, string(r.Body), theirs, mode)
				require.Equal(t, contract.RecallWatermark{Generation: 1, IndexedThroughMs: res.Watermark.IndexedThroughMs}, res.Watermark)
				ids := []string{}
				for _, x := range res.Results {
					ids = append(ids, x.Entry.ID)
				}
				require.Subset(t, ids, []string{"e-1", "e-34"}, mode)
				require.Len(t, ids, 3, "the caller's active entries: e-1, e-34 and e-2's correction (%s)", mode)
			}
		})
	}

	for _, stranger := range strangers {
		t.Run(stranger.name+" sees nothing", func(t *testing.T) {
			for _, route := range []contract.Route{contract.RouteMessagesRecent, contract.RouteMessages} {
				var page struct {
					Messages []any `json:"messages"`
				}
				stranger.post(t, route.Path, map[string]any{"scope": map[string]any{"conversationId": "conv-1"}}).requireOK(t, http.StatusOK, &page)
				require.Empty(t, page.Messages)
			}
			var hits struct {
				Hits []any `json:"hits"`
			}
			for _, query := range []string{secret(a), secret(b), "hello"} {
				stranger.post(t, contract.RouteMessagesSearch.Path, map[string]any{"query": query}).requireOK(t, http.StatusOK, &hits)
				require.Empty(t, hits.Hits, query)
			}
			stranger.post(t, contract.RouteWindowsGet.Path, map[string]any{"windowId": "w-1"}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
			stranger.post(t, contract.RouteWindowsLineage.Path, map[string]any{"windowId": "w-2"}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
			stranger.post(t, contract.RouteModelInvocationsGet.Path, map[string]any{"invocationId": "inv-1"}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
			require.Equal(t, contract.CostsResponse{Totals: contract.CostTotals{CostUSD: "0"}, Groups: []contract.CostGroup{}},
				tenantCosts(t, stranger), "no invocations to count")
			// Entries: none to read, correct, merge or expire, nothing to recall.
			stranger.post(t, contract.RouteEntriesGet.Path, map[string]any{"entryId": "e-1"}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
			stranger.post(t, contract.RouteEntriesHistory.Path, map[string]any{"entryId": "e-1"}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
			for path, items := range map[string]string{contract.RouteEntriesList.Path: "entries", contract.RouteConversationsList.Path: "conversations",
				contract.RouteWindowsList.Path: "windows", contract.RouteModelInvocationsList.Path: "invocations"} {
				var page map[string]json.RawMessage
				stranger.post(t, path, map[string]any{}).requireOK(t, http.StatusOK, &page)
				require.JSONEq(t, `[]`, string(page[items]), path)
				require.JSONEq(t, `null`, string(page["nextCursor"]), path)
			}
			stranger.post(t, contract.RouteEntriesCorrect.Path, map[string]any{"entryId": "e-1", "content": "x"}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
			stranger.post(t, contract.RouteEntriesExpire.Path, map[string]any{"entryId": "e-1"}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
			stranger.post(t, contract.RouteEntriesMerge.Path, map[string]any{"entryIds": []string{"e-1", "e-34"},
				"merged": map[string]any{"kind": "fact", "content": "x"}}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
			for _, query := range []string{secret(a), secret(b), "entry"} {
				for _, mode := range contract.RecallModes {
					var res contract.RecallResponse
					stranger.post(t, contract.RouteRecall.Path, map[string]any{"query": query, "mode": mode}).requireOK(t, http.StatusOK, &res)
					require.Empty(t, res.Results, query)
					require.Equal(t, contract.RecallWatermark{Generation: 1}, res.Watermark)
				}
			}
			// A stranger's rebuild rebuilds the stranger's (empty) projection only.
			op := stranger.ok(t, http.StatusAccepted, contract.RouteVectorRebuild.Path, map[string]any{"embedder": nil})
			rebuilt := awaitTenantOperation(t, stranger, op["operation"].(map[string]any)["id"].(string))
			require.EqualValues(t, 0, rebuilt["result"].(map[string]any)["embeddedEntries"])
			// Another scope's windows cannot be linked to or invoked against.
			stranger.post(t, contract.RouteDerivationsCreate.Path, map[string]any{
				"id": "d-x", "sourceWindowId": "w-1", "targetWindowId": "w-2", "kind": "trim",
			}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
			stranger.post(t, contract.RouteModelInvocationsCreate.Path, map[string]any{
				"id": "inv-x", "conversation": map[string]any{"conversationId": "conv-1"}, "requestWindowId": "w-2",
				"provider": "openai", "model": "m", "state": "succeeded", "inputTokens": 1, "outputTokens": 1,
			}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
			// Nothing to count and nothing to delete.
			var status contract.MaintenanceStatus
			stranger.call(t, http.MethodGet, contract.RouteMaintenanceStatus.Path, nil).requireOK(t, http.StatusOK, &status)
			require.Equal(t, contract.OperationCounts{}, status.Operations)
			require.Zero(t, status.VectorProjection.IndexedThroughMs)
			require.Zero(t, status.VectorProjection.PendingEntries)
			dry := stranger.ok(t, http.StatusAccepted, contract.RouteConversationsRetention.Path, map[string]any{
				"policy": map[string]any{"keepLastMessages": 1}, "dryRun": true,
			})
			result := awaitTenantOperation(t, stranger, dry["operation"].(map[string]any)["id"].(string))
			require.JSONEq(t, `{"deletedMessages":0,"affectedConversations":0}`, mustJSON(t, result["result"]))
			requireOwnKnowledge(t, stranger, a)
			requireOwnKnowledge(t, stranger, b)
		})
	}

	t.Run("retention and deletion stay in their tenant", func(t *testing.T) {
		dry := b.ok(t, http.StatusAccepted, contract.RouteConversationsRetention.Path, map[string]any{
			"policy": map[string]any{"keepLastMessages": 1}, "dryRun": true,
		})
		opID := dry["operation"].(map[string]any)["id"].(string)
		result := awaitTenantOperation(t, b, opID)
		require.EqualValues(t, 1, result["result"].(map[string]any)["deletedMessages"], "only tenant-b's conversation counts")

		// A real retention run in tenant-b deletes tenant-b's oldest message only, and
		// only tenant-b's status records the run.
		run := b.ok(t, http.StatusAccepted, contract.RouteConversationsRetention.Path, map[string]any{
			"policy": map[string]any{"keepLastMessages": 1},
		})
		result = awaitTenantOperation(t, b, run["operation"].(map[string]any)["id"].(string))
		require.JSONEq(t, `{"deletedMessages":1,"affectedConversations":1}`, mustJSON(t, result["result"]))
		var recent contract.MessagesResponse
		a.post(t, contract.RouteMessagesRecent.Path, map[string]any{"scope": map[string]any{"conversationId": "conv-1"}}).
			requireOK(t, http.StatusOK, &recent)
		require.Len(t, recent.Messages, 2, "tenant-a's messages with the same IDs are untouched")
		var statusA, statusB contract.MaintenanceStatus
		a.call(t, http.MethodGet, contract.RouteMaintenanceStatus.Path, nil).requireOK(t, http.StatusOK, &statusA)
		b.call(t, http.MethodGet, contract.RouteMaintenanceStatus.Path, nil).requireOK(t, http.StatusOK, &statusB)
		require.Nil(t, statusA.Retention.LastRunAtMs, "tenant-b's retention run is not tenant-a's")
		require.NotNil(t, statusB.Retention.LastRunAtMs)

		deleted := b.ok(t, http.StatusAccepted, contract.RouteConversationsDelete.Path, map[string]any{"conversationId": "conv-1"})
		deleteID := deleted["operation"].(map[string]any)["id"].(string)
		awaitTenantOperation(t, b, deleteID)
		// tenant-a cannot see tenant-b's operations, nor count them.
		a.post(t, contract.RouteOperations.Path, map[string]any{"operationId": deleteID}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
		var status map[string]any
		a.call(t, http.MethodGet, contract.RouteMaintenanceStatus.Path, nil).requireOK(t, http.StatusOK, &status)
		ops := status["operations"].(map[string]any)
		require.EqualValues(t, 0, ops["pending"])
		require.EqualValues(t, 0, ops["running"])

		// tenant-a's entries are untouched, and tenant-a's projection is still its first
		// generation after the strangers' rebuilds.
		var e contract.ContextEntry
		a.post(t, contract.RouteEntriesGet.Path, map[string]any{"entryId": "e-1"}).requireOK(t, http.StatusOK, &e)
		require.Contains(t, e.Content, secret(a))
		b.post(t, contract.RouteEntriesGet.Path, map[string]any{"entryId": "e-1"}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
		var recall contract.RecallResponse
		a.post(t, contract.RouteRecall.Path, map[string]any{"query": secret(a), "mode": "vector"}).requireOK(t, http.StatusOK, &recall)
		require.EqualValues(t, 1, recall.Watermark.Generation)
		require.Len(t, recall.Results, 3)
		// tenant-a's conversation with the same ID is untouched.
		r := a.post(t, contract.RouteMessagesRecent.Path, map[string]any{"scope": map[string]any{"conversationId": "conv-1"}})
		r.requireOK(t, http.StatusOK, nil)
		require.Contains(t, string(r.Body), secret(a))
		a.post(t, contract.RouteWindowsGet.Path, map[string]any{"windowId": "w-1"}).requireOK(t, http.StatusOK, nil)
		a.ok(t, http.StatusOK, contract.RouteMessagesBatch.Path, map[string]any{"messages": []any{
			map[string]any{"id": "m-3", "scope": map[string]any{"conversationId": "conv-1"}, "role": "user", "content": "still open"},
		}})
		// and tenant-b's is gone for tenant-b.
		var page struct {
			Messages []any `json:"messages"`
		}
		b.post(t, contract.RouteMessagesRecent.Path, map[string]any{"scope": map[string]any{"conversationId": "conv-1"}}).requireOK(t, http.StatusOK, &page)
		require.Empty(t, page.Messages)
		// The deleted conversation's invocation leaves tenant-b's costs, not tenant-a's.
		require.Zero(t, tenantCosts(t, b).Totals.Calls)
		require.EqualValues(t, 1, tenantCosts(t, a).Totals.Calls)
	})

	t.Run("exports, imports and advanced operations stay in their scope", func(t *testing.T) {
		checkTransferIsolation(t, a, b, strangers, secret)
	})

	t.Run("agent-to-agent coordination stays in its scope", func(t *testing.T) {
		// peerOf is the agent "peer" in c's scope (c's name is tenant-project).
		peerOf := func(c *tenantClient) *tenantClient {
			cut := strings.LastIndex(c.name, "-")
			return &tenantClient{app: app, name: c.name + "-peer", used: used,
				bearer: minter.subjectBearer("peer", c.name[:cut], c.name[cut+1:], contract.AllCapabilities...)}
		}
		cursors := map[*tenantClient]string{}
		for _, c := range []*tenantClient{a, b} {
			c.ok(t, http.StatusOK, contract.RouteA2AAgentsRegister.Path, map[string]any{"agentType": "planner", "role": "r" + secret(c)})
			c.ok(t, http.StatusOK, contract.RouteA2AMessagesPost.Path, map[string]any{"messageId": "am-1", "content": "broadcast " + secret(c)})
			c.ok(t, http.StatusOK, contract.RouteA2AMessagesPost.Path, map[string]any{"messageId": "am-2", "toAgent": "peer",
				"privacy": "private", "content": "private " + secret(c)})
			c.ok(t, http.StatusCreated, contract.RouteA2ATasksCreate.Path, map[string]any{"id": "at-1", "toAgent": "peer", "description": "task " + secret(c)})
			c.ok(t, http.StatusOK, contract.RouteA2ATasksMessage.Path, map[string]any{"taskId": "at-1", "parts": []any{
				map[string]any{"type": "text", "text": "part " + secret(c)}}})
			c.ok(t, http.StatusOK, contract.RouteA2ATasksUpdate.Path, map[string]any{"taskId": "at-1", "state": "working"})
			c.ok(t, http.StatusCreated, contract.RouteA2ATasksCreate.Path, map[string]any{"id": "at-2", "toAgent": "peer", "description": "second"})
			c.ok(t, http.StatusOK, contract.RouteA2ATasksCancel.Path, map[string]any{"taskId": "at-2"})
		}
		for _, pair := range [][2]*tenantClient{{a, b}, {b, a}} {
			self, other := pair[0], pair[1]
			mine, theirs := secret(self), secret(other)
			peer := peerOf(self)
			for _, read := range []struct {
				route contract.Route
				body  map[string]any
			}{
				{contract.RouteA2AAgentsList, map[string]any{}},
				{contract.RouteA2AMessagesRead, map[string]any{"includeRead": true}},
				{contract.RouteA2ATasksGet, map[string]any{"taskId": "at-1"}},
				{contract.RouteA2ATasksList, map[string]any{}},
				{contract.RouteA2ASnapshot, map[string]any{}},
			} {
				r := peer.post(t, read.route.Path, read.body)
				r.requireOK(t, http.StatusOK, nil)
				require.Contains(t, string(r.Body), mine, read.route.Path)
				require.NotContains(t, string(r.Body), theirs, read.route.Path)
			}
			var page contract.EventPage
			peer.post(t, contract.RouteA2AEventsPoll.Path, map[string]any{}).requireOK(t, http.StatusOK, &page)
			var coordination []string
			entryEvents := 0
			for _, e := range page.Events {
				switch e.Kind {
				case contract.EventEntryWritten:
					entryEvents++
				case contract.EventWindowCreated: // tenant-b deleted the conversation of its windows
				default:
					coordination = append(coordination, e.Kind)
				}
			}
			// The caller's own entry writes: 4 creates, a correction (2), a merge (3), a
			// create and an expiry; tenant-b deleted conv-1, and with it the event of e-1.
			wantEntryEvents := 11
			if self == b {
				wantEntryEvents = 10
			}
			require.Equal(t, wantEntryEvents, entryEvents, self.name)
			require.Equal(t, []string{"agent_registered", "message_posted", "message_posted", "task_created", "task_message",
				"task_updated", "task_created", "task_updated"}, coordination, self.name)
			cursors[self] = page.NextCursor
			var info contract.TaskInfo
			peer.post(t, contract.RouteA2ATasksInfo.Path, map[string]any{}).requireOK(t, http.StatusOK, &info)
			require.Equal(t, contract.TaskInfo{Total: 2, Active: 1, Canceled: 1}, info)
		}
		// An events cursor is bound to its scope.
		b.post(t, contract.RouteA2AEventsPoll.Path, map[string]any{"cursor": cursors[a]}).requireError(t, http.StatusBadRequest, contract.CodeInvalidCursor)
		for _, stranger := range strangers {
			var agents contract.AgentList
			stranger.post(t, contract.RouteA2AAgentsList.Path, map[string]any{}).requireOK(t, http.StatusOK, &agents)
			require.Empty(t, agents.Agents)
			for _, c := range []*tenantClient{stranger, peerOf(stranger)} {
				var msgs contract.AgentMessages
				c.post(t, contract.RouteA2AMessagesRead.Path, map[string]any{"includeRead": true}).requireOK(t, http.StatusOK, &msgs)
				require.Empty(t, msgs.Messages, c.name)
				var page contract.EventPage
				c.post(t, contract.RouteA2AEventsPoll.Path, map[string]any{}).requireOK(t, http.StatusOK, &page)
				require.Empty(t, page.Events, c.name)
				for _, route := range []contract.Route{contract.RouteA2ATasksGet, contract.RouteA2ATasksCancel} {
					c.post(t, route.Path, map[string]any{"taskId": "at-1"}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
				}
				c.post(t, contract.RouteA2ATasksUpdate.Path, map[string]any{"taskId": "at-1", "state": "completed"}).
					requireError(t, http.StatusNotFound, contract.CodeNotFound)
				c.post(t, contract.RouteA2ATasksMessage.Path, map[string]any{"taskId": "at-1", "parts": []any{
					map[string]any{"type": "text", "text": "x"}}}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
				var tasks contract.TaskList
				c.post(t, contract.RouteA2ATasksList.Path, map[string]any{}).requireOK(t, http.StatusOK, &tasks)
				require.Empty(t, tasks.Tasks)
				require.Zero(t, tasks.PendingCount)
				var info contract.TaskInfo
				c.post(t, contract.RouteA2ATasksInfo.Path, map[string]any{}).requireOK(t, http.StatusOK, &info)
				require.Equal(t, contract.TaskInfo{}, info)
				var snap contract.Snapshot
				c.post(t, contract.RouteA2ASnapshot.Path, map[string]any{}).requireOK(t, http.StatusOK, &snap)
				require.Empty(t, snap.Agents)
				require.Empty(t, snap.Messages)
				require.Empty(t, snap.Tasks)
			}
		}
	})

	t.Run("envelopes and JSON-RPC", func(t *testing.T) {
		// The same envelope message_id in both scopes: each is accepted on its own,
		// never a duplicate of the other's.
		for _, c := range []*tenantClient{a, b} {
			subject := "agent-" + strings.TrimSuffix(c.name, "-alpha")
			ack := c.ok(t, http.StatusOK, contract.RouteA2AHandoff.Path, map[string]any{"message_id": "env-1",
				"from": subject, "to": "peer", "ts": time.Now().UTC().Format(time.RFC3339Nano), "ttl_ms": 60_000,
				"version": "1.0", "content_type": contract.ContentContextPackage, "payload": map[string]any{"s": secret(c)}})
			require.Equal(t, contract.AckAccepted, ack["status"], c.name)
			var versions contract.A2AVersions
			c.call(t, http.MethodGet, contract.RouteA2AVersions.Path, nil).requireOK(t, http.StatusOK, &versions)
			require.Equal(t, contract.SupportedA2AVersions, versions.SupportedVersions)
			// Over JSON-RPC, its own task reads; the other scope's is not found.
			out := c.ok(t, http.StatusOK, contract.RouteA2AJSONRPC.Path, map[string]any{"jsonrpc": "2.0", "id": 1,
				"method": contract.MethodV1GetTask, "params": map[string]any{"id": "at-1"}})
			require.Equal(t, "at-1", out["result"].(map[string]any)["id"], c.name)
		}
		for _, stranger := range strangers {
			out := stranger.ok(t, http.StatusOK, contract.RouteA2AJSONRPC.Path, map[string]any{"jsonrpc": "2.0", "id": 1,
				"method": contract.MethodV03TasksGet, "params": map[string]any{"id": "at-1"}})
			require.Equal(t, float64(contract.RPCTaskNotFound), out["error"].(map[string]any)["code"], stranger.name)
			out = stranger.ok(t, http.StatusOK, contract.RouteA2AJSONRPC.Path, map[string]any{"jsonrpc": "2.0", "id": 2,
				"method": contract.MethodV03TasksCancel, "params": map[string]any{"id": "at-1"}})
			require.Equal(t, float64(contract.RPCTaskNotFound), out["error"].(map[string]any)["code"], stranger.name)
		}
	})

	tools := &toolSet{seen: map[string]bool{}}
	t.Run("every MCP tool stays in its scope", func(t *testing.T) {
		requireMCPIsolation(t, a, b, strangers, secret, tools)
	})

	t.Run("console", func(t *testing.T) {
		requireConsoleIsolation(t, app, a, b, strangers, secret)
	})

	require.Empty(t, unexercised(contract.Routes(), used), "routes not covered by the tenant isolation suite: add them")
	require.Empty(t, unexercisedTools(tools), "MCP tools not covered by the tenant isolation suite: add them")
}

// checkTransferIsolation exports every scope, checks each artifact holds its own scope's
// records only, re-imports and verifies it in place, and checks another scope's artifact
// is missing on every transfer route.
func checkTransferIsolation(t *testing.T, a, b *tenantClient, strangers []*tenantClient, secret func(*tenantClient) string) {
	exported := map[*tenantClient]string{}
	for _, c := range append([]*tenantClient{a, b}, strangers...) {
		op := c.ok(t, http.StatusAccepted, contract.RouteExports.Path, map[string]any{})
		done := awaitTenantOperation(t, c, op["operation"].(map[string]any)["id"].(string))
		id := done["result"].(map[string]any)["artifactId"].(string)
		var art contract.ExportArtifact
		c.post(t, contract.RouteExportArtifactsGet.Path, map[string]any{"artifactId": id}).requireOK(t, http.StatusOK, &art)
		var data []byte
		for i := range art.ChunkCount {
			var chunk contract.ExportChunk
			c.post(t, contract.RouteExportArtifactsChunk.Path, map[string]any{"artifactId": id, "index": i}).requireOK(t, http.StatusOK, &chunk)
			raw, err := base64.StdEncoding.DecodeString(chunk.Data)
			require.NoError(t, err)
			data = append(data, raw...)
		}
		for _, other := range []*tenantClient{a, b} {
			if other != c {
				require.NotContains(t, string(data), secret(other), "%s exports %s's records", c.name, other.name)
			}
		}
		if c == a || c == b {
			require.Contains(t, string(data), secret(c))
		} else {
			require.Contains(t, string(data), `"counts":{"messages":0,"windows":0,"derivations":0,"invocations":0,"entries":0}`)
		}
		exported[c] = id
		// Re-importing its own artifact changes nothing in the scope.
		var res contract.ImportResponse
		c.post(t, contract.RouteImports.Path, map[string]any{"artifactId": id}).requireOK(t, http.StatusOK, &res)
		require.Equal(t, contract.RecordCounts{}, res.Imported, c.name)
		verify := c.ok(t, http.StatusAccepted, contract.RouteAdvancedOperations.Path, map[string]any{"kind": "verify_integrity"})
		checked := awaitTenantOperation(t, c, verify["operation"].(map[string]any)["id"].(string))["result"].(map[string]any)["windowsChecked"]
		want := 0
		if c == a {
			want = 2 // tenant-b deleted its conversation, windows and all
		}
		require.EqualValues(t, want, checked, c.name)
	}
	// Another scope's artifact is missing, whatever the route.
	for _, pair := range [][2]*tenantClient{{a, b}, {b, a}, {strangers[0], a}, {strangers[1], a}} {
		self, other := pair[0], pair[1]
		id := exported[other]
		self.post(t, contract.RouteExportArtifactsGet.Path, map[string]any{"artifactId": id}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
		self.post(t, contract.RouteExportArtifactsChunk.Path, map[string]any{"artifactId": id, "index": 0}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
		self.post(t, contract.RouteImports.Path, map[string]any{"artifactId": id}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
	}
}

// scopedKnowledge is a provider that answers for the scope of the runtime token it is
// called with: one document, "doc-<tenant>-<project>", per scope.
func scopedKnowledge(w http.ResponseWriter, r *http.Request) {
	doc := "doc-" + tokenScope(r.Header.Get("Authorization"))
	if r.URL.Path == "/resolve" {
		knowledgetest.JSON(http.StatusOK, `{"resources": [{"resourceRef": "`+doc+`", "title": "`+doc+`"}]}`)(w, r)
		return
	}
	knowledgetest.JSON(http.StatusOK, `{"hits": [{"resourceRef": "`+doc+`", "excerpt": "only for `+doc+`"}]}`)(w, r)
}

// tokenScope reads tenant-project from a bearer JWT's claims, as a provider that
// trusts the runtime identity service would after verifying it.
func tokenScope(authorization string) string {
	parts := strings.Split(strings.TrimPrefix(authorization, "Bearer "), ".")
	if len(parts) != 3 {
		return "none"
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	var claims struct {
		Tenant  string `json:"tenant_id"`
		Project string `json:"project_id"`
	}
	if err != nil || json.Unmarshal(payload, &claims) != nil {
		return "none"
	}
	return claims.Tenant + "-" + claims.Project
}

// requireOwnKnowledge: self's queries and resolutions get self's scope's knowledge,
// and a ref of other's scope is missing for self.
func requireOwnKnowledge(t *testing.T, self, other *tenantClient) {
	t.Helper()
	mine, theirs := "doc-"+self.name, "doc-"+other.name
	var caps contract.KnowledgeCapabilities
	self.call(t, http.MethodGet, contract.RouteKnowledgeCapabilities.Path, nil).requireOK(t, http.StatusOK, &caps)
	require.Len(t, caps.Providers, 1)
	var answer contract.KnowledgeQueryResponse
	self.post(t, contract.RouteKnowledgeQuery.Path, map[string]any{"query": "anything", "requirement": "required"}).
		requireOK(t, http.StatusOK, &answer)
	require.Len(t, answer.Hits, 1)
	require.Equal(t, mine, answer.Hits[0].ResourceRef)
	var resolved contract.ResolveResourcesResponse
	self.post(t, contract.RouteKnowledgeResolve.Path, map[string]any{"resourceRefs": []string{theirs, mine}}).
		requireOK(t, http.StatusOK, &resolved)
	require.Equal(t, []string{theirs}, resolved.Missing)
	require.Len(t, resolved.Resources, 1)
	require.Equal(t, mine, resolved.Resources[0].ResourceRef)
}

// awaitProjected waits until the client's scope has no entry waiting to be embedded.
func awaitProjected(t *testing.T, c *tenantClient) {
	t.Helper()
	require.Eventually(t, func() bool {
		var st contract.MaintenanceStatus
		r := c.call(t, http.MethodGet, contract.RouteMaintenanceStatus.Path, nil)
		return r.Status == http.StatusOK && json.Unmarshal(r.Body, &st) == nil && st.VectorProjection.PendingEntries == 0
	}, 60*time.Second, 20*time.Millisecond)
}

// unexercised lists the protected routes of routes that the suite never called.
func unexercised(routes []contract.Route, used *routeSet) []string {
	var missing []string
	for _, r := range routes {
		if !r.Public() && !used.seen[r.Method+" "+r.Path] {
			missing = append(missing, r.Method+" "+r.Path)
		}
	}
	slices.Sort(missing)
	return missing
}

// TestIsolationSuiteNoticesNewRoutes proves the guard at the end of TestTenantIsolation
// bites: a route added to the table but not called is reported, a public one is not.
func TestIsolationSuiteNoticesNewRoutes(t *testing.T) {
	t.Parallel()
	used := &routeSet{seen: map[string]bool{}}
	for _, r := range contract.Routes() {
		used.add(r.Method, r.Path)
	}
	require.Empty(t, unexercised(contract.Routes(), used))
	added := append(contract.Routes(),
		contract.Route{Method: http.MethodPost, Path: contract.PrefixContext + "/not-yet-built", Capabilities: []string{contract.CapContextWrite}},
		contract.Route{Method: http.MethodGet, Path: "/metrics"})
	require.Equal(t, []string{"POST " + contract.PrefixContext + "/not-yet-built"}, unexercised(added, used))
	// Likewise for MCP tools: each (tool, action) of the table must be called.
	tools := &toolSet{seen: map[string]bool{}}
	require.Len(t, unexercisedTools(tools), len(contract.MCPToolRoutes()))
	for _, tr := range contract.MCPToolRoutes() {
		tools.add(tr.Tool, map[string]any{"action": tr.Action})
	}
	require.Empty(t, unexercisedTools(tools))
}

// tenantCosts is c's cost report by agent.
func tenantCosts(t *testing.T, c *tenantClient) contract.CostsResponse {
	t.Helper()
	var report contract.CostsResponse
	c.post(t, contract.RouteCosts.Path, map[string]any{"groupBy": "agent"}).requireOK(t, http.StatusOK, &report)
	return report
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// awaitTenantOperation polls an operation until it finishes and returns it; it fails the
// test when the operation fails.
func awaitTenantOperation(t *testing.T, c *tenantClient, id string) map[string]any {
	t.Helper()
	c.used.add(contract.RouteOperations.Method, contract.RouteOperations.Path)
	typed := c.app.typed("Authorization", c.bearer)
	var op *contract.OperationResponse
	require.Eventually(t, func() bool {
		var err error
		op, err = typed.GetOperation(context.Background(), &contract.GetOperationRequest{OperationID: id})
		require.NoError(t, err)
		return op.Operation.State == contract.OperationSucceeded || op.Operation.State == contract.OperationFailed
	}, 60*time.Second, 50*time.Millisecond)
	require.Equal(t, contract.OperationSucceeded, op.Operation.State, "operation %s: %v", id, op.Operation.Error)
	var generic map[string]any
	require.NoError(t, json.Unmarshal([]byte(mustJSON(t, op.Operation)), &generic))
	return generic
}

// requireConsoleIsolation: signed in to the console, each tenant sees its own records
// under the shared IDs and never the other's; a scope without data sees nothing and
// gets 404s.
func requireConsoleIsolation(t *testing.T, app *testApp, a, b *tenantClient, strangers []*tenantClient, secret func(*tenantClient) string) {
	t.Helper()
	// Signed in to the console, each tenant sees its own records under the shared
	// IDs and never the other's; a scope without data sees nothing and gets 404s.
	details := []string{"/console/conversations/conv-1", "/console/windows/w-2", "/console/invocations/inv-1",
		"/console/entries/e-1", "/console/a2a/tasks/at-1"}
	lists := []string{"/console/", "/console/conversations", "/console/invocations", "/console/entries",
		"/console/a2a", "/console/events", "/console/costs?range=all"}
	for _, pair := range [][2]*tenantClient{{a, b}, {b, a}} {
		self, other := pair[0], pair[1]
		br := newConsoleBrowser(t, app)
		require.Equal(t, http.StatusSeeOther, br.login(bare(self.bearer), "", "").Status)
		for _, path := range append(append([]string{}, details...), lists...) {
			page := br.get(path)
			// tenant-b deleted its conv-1 above, with what it held: its pages
			// of them are gone, tenant-a's stay.
			if self == a || !slices.Contains(details, path) {
				require.Equal(t, http.StatusOK, page.Status, "%s %s", self.name, path)
			}
			require.NotContains(t, page.Body, secret(other), "%s %s", self.name, path)
		}
		if self == a {
			for _, path := range details[:4] {
				require.Contains(t, br.get(path).Body, secret(self), "%s %s", self.name, path)
			}
		}
		page := br.get("/console/recall?mode=text&q=" + secret(other))
		require.Equal(t, http.StatusOK, page.Status)
		require.Contains(t, page.Body, "Nothing recalled.", "the query shows in its box; no result does")
	}
	for _, stranger := range strangers {
		br := newConsoleBrowser(t, app)
		require.Equal(t, http.StatusSeeOther, br.login(bare(stranger.bearer), "", "").Status)
		for _, path := range details {
			require.Equal(t, http.StatusNotFound, br.get(path).Status, "%s %s", stranger.name, path)
		}
		for _, path := range lists {
			page := br.get(path)
			require.Equal(t, http.StatusOK, page.Status, "%s %s", stranger.name, path)
			require.NotContains(t, page.Body, secret(a))
			require.NotContains(t, page.Body, secret(b))
			require.NotContains(t, page.Body, "conv-1", "%s %s", stranger.name, path)
		}
		// The overview counts none of the others' records.
		overview := br.get("/console/").Body
		counts := consoleCount.FindAllStringSubmatch(overview, -1)
		require.Len(t, counts, 8, stranger.name)
		for _, c := range counts {
			require.Equal(t, "0", c[2], "%s %s", stranger.name, c[1])
		}
	}
}

// consoleCount is one record count of the console's overview: its name and figure.
var consoleCount = regexp.MustCompile(`data-count="([a-z-]+)"><div class="muted">[^<]*</div><div class="n">([^<]*)</div>`)
