package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/agent-context/agent-context/adapters/knowledge/knowledgetest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/contract/client"
	"github.com/agent-context/agent-context/runtime/ratelimit"
)

// contractRig is a running Main, a contract check on the wire, and typed clients with
// different credentials that all send through the check.
type contractRig struct {
	app    *testApp
	check  *contractCheck
	hc     *http.Client
	full   *client.Client // runtime token with every capability
	peer   *client.Client // runtime token of another agent ("peer") of the same scope
	noCap  *client.Client // runtime token with a capability no route requires first (a2a:admin)
	anon   *client.Client // no credential
	static *client.Client // the static token
	// token mints a runtime token of the rig's agent holding caps.
	token func(caps ...string) string
}

const rigStaticToken = "static-secret"

func newContractRig(t *testing.T, opts ...func(*Config)) *contractRig {
	t.Helper()
	app, minter := startSecuredApp(t, append([]func(*Config){func(c *Config) { c.ServiceToken = rigStaticToken }}, opts...)...)
	check := newContractCheck(t, http.DefaultTransport)
	hc := &http.Client{Transport: check, Timeout: time.Minute}
	token := func(caps ...string) string { return strings.TrimPrefix(minter.bearer(caps...), "Bearer ") }
	newClient := func(o ...client.Option) *client.Client {
		return client.New(append([]client.Option{client.WithBaseURL(app.base), client.WithHTTPClient(hc)}, o...)...)
	}
	return &contractRig{
		app: app, check: check, hc: hc,
		full: newClient(client.WithBearerToken(token(contract.AllCapabilities...))),
		peer: newClient(client.WithBearerToken(strings.TrimPrefix(
			minter.subjectBearer("peer", "acme", "alpha", contract.AllCapabilities...), "Bearer "))),
		noCap:  newClient(client.WithBearerToken(token(contract.CapA2AAdmin))),
		anon:   newClient(),
		static: newClient(client.WithBearerToken(rigStaticToken)),
		token:  token,
	}
}

// raw sends a request by hand through the contract check; headers are name, value
// pairs. A body of type io.Reader with a declared length is sent as it is.
func (r *contractRig) raw(t *testing.T, exp expectation, method, path, contentType string, body io.Reader, length int64, headers ...string) (int, contract.ErrorBody) {
	t.Helper()
	exp.raw = true
	req, err := http.NewRequestWithContext(expect(context.Background(), exp), method, r.app.base+path, body)
	require.NoError(t, err)
	if length > 0 {
		req.ContentLength = length
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := r.hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var env contract.ErrorResponse
	answer, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	// POST /internal/v1/mcp answers a body that is not a JSON-RPC message with a
	// JSON-RPC error rather than the envelope.
	if resp.StatusCode >= 400 && method != http.MethodHead && !bytes.HasPrefix(answer, []byte(`{"jsonrpc"`)) {
		require.NoError(t, json.Unmarshal(answer, &env), "%s", answer)
	}
	return resp.StatusCode, env.Error
}

// requireCode asserts err is the client's typed error with code and status, carrying
// the request ID.
func requireCode(t *testing.T, err error, status int, code string) *client.Error {
	t.Helper()
	var e *client.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, status, e.StatusCode, "%v", err)
	require.Equal(t, code, e.Code, "%v", err)
	require.NotEmpty(t, e.RequestID)
	return e
}

// invalid marks a typed-client call whose request the document must refuse too.
func invalid() context.Context { return expect(context.Background(), expectation{invalid: true}) }

// routeCall calls one route through c with a valid request (the body need not name
// existing records): the generic error loops send it with the wrong credential, and
// to a database that fails.
//
//nolint:gocyclo // one case per route: a flat dispatch table, not branching logic
func routeCall(ctx context.Context, c *client.Client, route contract.Route) error {
	conv := contract.ConversationScope{ConversationID: "c-any"}
	var err error
	switch route.Path {
	case contract.RouteHealth.Path:
		_, err = c.Health(ctx)
	case contract.RouteReady.Path:
		_, err = c.Ready(ctx)
	case contract.RouteMetrics.Path:
		_, err = c.Metrics(ctx)
	case contract.RouteOpenAPIJSON.Path:
		_, err = c.OpenAPIJSON(ctx)
	case contract.RouteOpenAPIYAML.Path:
		_, err = c.OpenAPIYAML(ctx)
	case contract.RouteMessagesBatch.Path:
		_, err = c.AppendMessages(ctx, &contract.AppendMessagesRequest{Messages: []contract.ConversationRecord{
			{ID: "m-any", Scope: conv, Role: contract.RoleUser, Content: "x"}}})
	case contract.RouteMessagesRecent.Path:
		_, err = c.RecentMessages(ctx, &contract.RecentMessagesRequest{Scope: conv})
	case contract.RouteMessages.Path:
		_, err = c.PageMessages(ctx, &contract.PageMessagesRequest{Scope: conv})
	case contract.RouteMessagesSearch.Path:
		_, err = c.SearchMessages(ctx, &contract.SearchMessagesRequest{Query: "x"})
	case contract.RouteWindowsCreate.Path:
		_, _, err = c.CreateWindow(ctx, windowRequest("w-any", "c-any", "x"))
	case contract.RouteWindowsGet.Path:
		_, err = c.GetWindow(ctx, &contract.GetWindowRequest{WindowID: "w-any"})
	case contract.RouteWindowsLineage.Path:
		_, err = c.WindowLineage(ctx, &contract.LineageRequest{WindowID: "w-any"})
	case contract.RouteDerivationsCreate.Path:
		_, _, err = c.CreateDerivation(ctx, &contract.CreateDerivationRequest{SourceWindowID: "w-a", TargetWindowID: "w-b", Kind: contract.DerivationTrim})
	case contract.RouteModelInvocationsCreate.Path:
		_, err = c.SaveModelInvocation(ctx, invocationRequest("inv-any", "c-any", "w-any"))
	case contract.RouteModelInvocationsGet.Path:
		_, err = c.GetModelInvocation(ctx, &contract.GetModelInvocationRequest{InvocationID: "inv-any"})
	case contract.RouteConversationsDelete.Path:
		_, _, err = c.DeleteConversation(ctx, &contract.DeleteConversationRequest{ConversationID: "c-any"})
	case contract.RouteConversationsRetention.Path:
		_, err = c.ApplyRetention(ctx, &contract.RetentionRequest{Policy: &contract.RetentionPolicy{KeepLastMessages: ptrTo[int64](10)}, DryRun: true})
	case contract.RouteOperations.Path:
		_, err = c.GetOperation(ctx, &contract.GetOperationRequest{OperationID: "op-any"})
	case contract.RouteMaintenanceStatus.Path:
		_, err = c.MaintenanceStatus(ctx)
	case contract.RouteKnowledgeCapabilities.Path:
		_, err = c.KnowledgeCapabilities(ctx)
	case contract.RouteKnowledgeQuery.Path:
		_, err = c.QueryKnowledge(ctx, &contract.KnowledgeQueryRequest{Query: "deploy"})
	case contract.RouteKnowledgeResolve.Path:
		_, err = c.ResolveResources(ctx, &contract.ResolveResourcesRequest{ResourceRefs: []string{"doc-0"}})
	case contract.RouteA2AAgentsRegister.Path:
		_, err = c.RegisterAgent(ctx, &contract.RegisterAgentRequest{AgentType: "planner"})
	case contract.RouteA2AAgentsList.Path:
		_, err = c.ListAgents(ctx, &contract.ListAgentsRequest{})
	case contract.RouteA2AMessagesPost.Path:
		_, err = c.PostAgentMessage(ctx, &contract.PostMessageRequest{Content: ptrTo("x")})
	case contract.RouteA2AMessagesRead.Path:
		_, err = c.ReadAgentMessages(ctx, &contract.ReadMessagesRequest{})
	case contract.RouteA2ATasksCreate.Path:
		_, _, err = c.CreateTask(ctx, &contract.CreateTaskRequest{ToAgent: "peer-any", Description: ptrTo("d")})
	case contract.RouteA2ATasksGet.Path:
		_, err = c.GetTask(ctx, &contract.TaskRequest{TaskID: "t-any"})
	case contract.RouteA2ATasksList.Path:
		_, err = c.ListTasks(ctx, &contract.ListTasksRequest{})
	case contract.RouteA2ATasksUpdate.Path:
		_, err = c.UpdateTask(ctx, &contract.UpdateTaskRequest{TaskID: "t-any", State: contract.TaskWorking})
	case contract.RouteA2ATasksCancel.Path:
		_, err = c.CancelTask(ctx, &contract.CancelTaskRequest{TaskID: "t-any"})
	case contract.RouteA2ATasksMessage.Path:
		_, err = c.MessageTask(ctx, &contract.TaskMessageRequest{TaskID: "t-any", Parts: []contract.Part{{Type: contract.PartText, Text: ptrTo("x")}}})
	case contract.RouteA2ATasksInfo.Path:
		_, err = c.TaskInfo(ctx)
	case contract.RouteA2AEventsPoll.Path:
		_, err = c.PollEvents(ctx, &contract.PollEventsRequest{})
	case contract.RouteA2ASnapshot.Path:
		_, err = c.Snapshot(ctx, &contract.SnapshotRequest{})
	case contract.RouteCosts.Path:
		_, err = c.Costs(ctx, &contract.CostsRequest{GroupBy: contract.CostsByAgent})
	case contract.RouteEntriesCreate.Path:
		_, _, err = c.CreateEntry(ctx, &contract.CreateEntryRequest{Kind: contract.EntryKindFact, Content: "x"})
	case contract.RouteEntriesGet.Path:
		_, err = c.GetEntry(ctx, &contract.GetEntryRequest{EntryID: "e-any"})
	case contract.RouteEntriesCorrect.Path:
		_, err = c.CorrectEntry(ctx, &contract.CorrectEntryRequest{EntryID: "e-any", Content: "x"})
	case contract.RouteEntriesMerge.Path:
		_, _, err = c.MergeEntries(ctx, &contract.MergeEntriesRequest{EntryIDs: []string{"e-a", "e-b"},
			Merged: &contract.MergedEntry{Kind: contract.EntryKindFact, Content: "x"}})
	case contract.RouteEntriesExpire.Path:
		_, err = c.ExpireEntry(ctx, &contract.ExpireEntryRequest{EntryID: "e-any"})
	case contract.RouteEntriesList.Path:
		_, err = c.ListEntries(ctx, &contract.ListEntriesRequest{})
	case contract.RouteEntriesHistory.Path:
		_, err = c.EntryHistory(ctx, &contract.EntryHistoryRequest{EntryID: "e-any"})
	case contract.RouteConversationsList.Path:
		_, err = c.ListConversations(ctx, &contract.ListConversationsRequest{})
	case contract.RouteWindowsList.Path:
		_, err = c.ListWindows(ctx, &contract.ListByConversationRequest{})
	case contract.RouteModelInvocationsList.Path:
		_, err = c.ListModelInvocations(ctx, &contract.ListByConversationRequest{})
	case contract.RouteRecall.Path:
		_, err = c.Recall(ctx, &contract.RecallRequest{Query: "x"})
	case contract.RouteVectorRebuild.Path:
		_, _, err = c.RebuildVectorProjection(ctx, &contract.RebuildProjectionRequest{})
	case contract.RouteA2AHandoff.Path:
		_, err = c.Handoff(ctx, &contract.Envelope{MessageID: "env-any", From: "agent-acme", To: "peer-any",
			Ts: time.Now().UTC().Format(time.RFC3339Nano), TTLMs: 60_000, Version: "1.0",
			ContentType: contract.ContentContextPackage, Payload: json.RawMessage(`{"note":"x"}`)})
	case contract.RouteA2AVersions.Path:
		_, err = c.A2AVersions(ctx)
	case contract.RouteA2AAgentCard.Path:
		_, err = c.AgentCard(ctx)
	case contract.RouteWellKnownAgentCard.Path:
		_, err = c.WellKnownAgentCard(ctx)
	case contract.RouteWellKnownAgentJSON.Path:
		_, err = c.WellKnownAgentJSON(ctx)
	case contract.RouteMCP.Path:
		_, err = c.MCP(ctx, &contract.RPCRequest{JSONRPC: "2.0", ID: json.RawMessage(`1`), Method: "tools/list"})
	case contract.RouteOAuthProtectedResource.Path:
		_, err = c.ProtectedResourceMetadata(ctx)
	case contract.RouteA2AJSONRPC.Path:
		_, err = c.A2ARPC(ctx, "", &contract.RPCRequest{JSONRPC: "2.0", ID: json.RawMessage(`1`), Method: contract.MethodV03TasksGet,
			Params: json.RawMessage(`{"id":"t-any"}`)})
	case contract.RouteExports.Path:
		_, err = c.Export(ctx, &contract.ExportRequest{})
	case contract.RouteExportArtifactsGet.Path:
		_, err = c.GetArtifact(ctx, &contract.GetArtifactRequest{ArtifactID: "art-any"})
	case contract.RouteExportArtifactsChunk.Path:
		_, err = c.GetChunk(ctx, &contract.GetChunkRequest{ArtifactID: "art-any", Index: ptrTo(0)})
	case contract.RouteImports.Path:
		_, err = c.Import(ctx, importOneMessage())
	case contract.RouteAdvancedOperations.Path:
		_, err = c.StartAdvancedOperation(ctx, &contract.AdvancedOperationRequest{Kind: contract.AdvancedVerifyIntegrity})
	default:
		return fmt.Errorf("routeCall does not know %s %s: add it", route.Method, route.Path)
	}
	return err
}

// importOneMessage is an inline import of one message.
func importOneMessage() *contract.ImportRequest {
	data := base64.StdEncoding.EncodeToString([]byte(`{"type":"header","formatVersion":1,"exportedAtMs":1,` +
		`"counts":{"messages":1,"windows":0,"derivations":0,"invocations":0,"entries":0}}` + "\n" +
		`{"type":"message","record":{"id":"m-any","scope":{"conversationId":"c-any"},"role":"user","content":"x"}}` + "\n"))
	return &contract.ImportRequest{Format: ptrTo(contract.FormatNDJSON), Data: &data}
}

func windowRequest(id, conversation, content string) *contract.CreateWindowRequest {
	return &contract.CreateWindowRequest{ID: ptrTo(id), Conversation: &contract.ConversationRef{ConversationID: conversation},
		Stage: contract.StageOriginal, Purpose: "chat", TokenCount: ptrTo[int64](3),
		Items: []contract.WindowItemInput{{ID: "i-0", Ordinal: ptrTo(0), Kind: contract.ItemKindMessage, Content: ptrTo(content)}}}
}

func invocationRequest(id, conversation, window string) *contract.CreateModelInvocationRequest {
	return &contract.CreateModelInvocationRequest{ID: ptrTo(id), Conversation: &contract.ConversationRef{ConversationID: conversation},
		RequestWindowID: window, Provider: "openai", Model: "gpt-4.1-mini", State: contract.InvocationSucceeded,
		InputTokens: 10, OutputTokens: 2, ResponseContent: ptrTo("an answer")}
}

// TestOpenAPIContract drives the running service through every documented route, with
// the typed client wherever a client would, and validates every request and response
// against contract/openapi.yaml: successes, route-specific errors, and every error
// status each route documents (a database that times out or fails provides 503 and
// 500; knowledge providers that fail or are gone provide 502 and 503). It fails when a served route is undocumented or the reverse, when an answer's
// shape or status differs from the document, when a documented status was never
// observed, and when a route has no client method.
func TestOpenAPIContract(t *testing.T) {
	t.Parallel()
	docs := knowledgetest.NewProvider(t, knowledgetest.ByPath(knowledgetest.Hits(2, "an excerpt"),
		knowledgetest.JSON(http.StatusOK, `{"resources":[{"resourceRef":"doc-0","title":"Zero","metadata":{"pages":1}}],"missing":["doc-9"]}`)))
	broken := knowledgetest.NewProvider(t, knowledgetest.JSON(http.StatusInternalServerError, `{"error":"boom"}`))
	kit := newPeerKit(t)
	rig := newContractRig(t, withProviders(t, map[string]any{"default": "docs", "providers": []any{
		providerEntry("docs", docs.URL), providerEntry("broken", broken.URL), providerEntry("gone", knowledgetest.RefusedURL(t))}}),
		kit.configure)
	ctx := context.Background()

	require.NoError(t, compareRoutes(rig.check.documentedRoutes(), rig.app.main.server.ServedRoutes()))
	var declared []string
	for _, r := range contract.Routes() {
		declared = append(declared, r.Method+" "+r.Path)
	}
	require.NoError(t, compareRoutes(rig.check.documentedRoutes(), declared))

	t.Run("host", func(t *testing.T) {
		health, err := rig.anon.Health(ctx)
		require.NoError(t, err)
		require.Equal(t, contract.Service, health.Service)
		_, err = rig.anon.Ready(ctx)
		require.NoError(t, err)
		metrics, err := rig.anon.Metrics(ctx)
		require.NoError(t, err)
		require.Contains(t, string(metrics), "agent_context_build_info")

		// The JSON document is the YAML one, converted.
		asJSON, err := rig.anon.OpenAPIJSON(ctx)
		require.NoError(t, err)
		asYAML, err := rig.anon.OpenAPIYAML(ctx)
		require.NoError(t, err)
		require.Equal(t, contract.OpenAPIYAML(), asYAML)
		var fromYAML, fromJSON any
		require.NoError(t, yaml.Unmarshal(asYAML, &fromYAML))
		canonical, err := json.Marshal(fromYAML)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(canonical, &fromYAML))
		require.NoError(t, json.Unmarshal(asJSON, &fromJSON))
		require.Equal(t, fromYAML, fromJSON)
	})

	t.Run("messages", func(t *testing.T) {
		conv := contract.ConversationScope{ConversationID: "conv-1"}
		res, err := rig.full.AppendMessages(ctx, &contract.AppendMessagesRequest{Messages: []contract.ConversationRecord{
			{ID: "m-1", Scope: conv, Role: contract.RoleUser, Content: "hello deployment"},
			{ID: "m-2", Scope: conv, Role: contract.RoleAssistant, Content: "the deployment policy", Metadata: json.RawMessage(`{"k":[1,null]}`)},
			{ID: "m-3", Scope: conv, Role: contract.RoleTool, Content: "done", Sequence: 10, CreatedAtMs: 1_700_000_000_000},
		}})
		require.NoError(t, err)
		require.Equal(t, 3, res.Appended)
		res, err = rig.full.AppendMessages(ctx, &contract.AppendMessagesRequest{Messages: []contract.ConversationRecord{
			{ID: "m-1", Scope: conv, Role: contract.RoleUser, Content: "hello deployment"}}})
		require.NoError(t, err)
		require.Equal(t, []string{"m-1"}, res.SkippedIDs)

		recent, err := rig.full.RecentMessages(ctx, &contract.RecentMessagesRequest{Scope: conv, Limit: ptrTo(2), Roles: []string{contract.RoleAssistant, contract.RoleTool}})
		require.NoError(t, err)
		require.Len(t, recent.Messages, 2)
		page, err := rig.full.PageMessages(ctx, &contract.PageMessagesRequest{Scope: conv, Limit: ptrTo(2), Order: contract.OrderDesc})
		require.NoError(t, err)
		require.NotNil(t, page.NextCursor)
		page, err = rig.full.PageMessages(ctx, &contract.PageMessagesRequest{Scope: conv, Limit: ptrTo(2), Order: contract.OrderDesc, Cursor: page.NextCursor})
		require.NoError(t, err)
		require.Nil(t, page.NextCursor)
		hits, err := rig.full.SearchMessages(ctx, &contract.SearchMessagesRequest{Query: "deployment", Limit: ptrTo(5)})
		require.NoError(t, err)
		require.Len(t, hits.Hits, 2)
		hits, err = rig.full.SearchMessages(ctx, &contract.SearchMessagesRequest{Query: "policy", Scope: &conv})
		require.NoError(t, err)
		require.Len(t, hits.Hits, 1)

		_, err = rig.full.AppendMessages(ctx, &contract.AppendMessagesRequest{Messages: []contract.ConversationRecord{
			{ID: "m-1", Scope: conv, Role: contract.RoleUser, Content: "changed"}}})
		e := requireCode(t, err, http.StatusConflict, contract.CodeIdempotencyConflict)
		require.Equal(t, []any{"m-1"}, e.Details["ids"])
		_, err = rig.full.PageMessages(ctx, &contract.PageMessagesRequest{Scope: conv, Cursor: ptrTo("bm90LWEtY3Vyc29y")})
		requireCode(t, err, http.StatusBadRequest, contract.CodeInvalidCursor)
		_, err = rig.full.RecentMessages(invalid(), &contract.RecentMessagesRequest{Scope: conv, Limit: ptrTo(contract.MaxMessagesLimit + 1)})
		e = requireCode(t, err, http.StatusBadRequest, contract.CodeValidationFailed)
		require.Equal(t, "limit", e.Field())
		_, err = rig.full.AppendMessages(invalid(), &contract.AppendMessagesRequest{Messages: []contract.ConversationRecord{
			{ID: "m-big", Scope: conv, Role: contract.RoleUser, Content: strings.Repeat("x", contract.MaxMessageContentBytes+1)}}})
		e = requireCode(t, err, http.StatusRequestEntityTooLarge, contract.CodePayloadTooLarge)
		require.Equal(t, "messages[0].content", e.Field())
		_, err = rig.full.SearchMessages(invalid(), &contract.SearchMessagesRequest{Query: strings.Repeat("q", contract.MaxSearchQueryBytes+1)})
		requireCode(t, err, http.StatusRequestEntityTooLarge, contract.CodePayloadTooLarge)
	})

	t.Run("windows", func(t *testing.T) {
		w1, created, err := rig.full.CreateWindow(ctx, windowRequest("w-1", "conv-w", "hello"))
		require.NoError(t, err)
		require.True(t, created)
		require.Nil(t, w1.Items)
		_, created, err = rig.full.CreateWindow(ctx, windowRequest("w-1", "conv-w", "hello"))
		require.NoError(t, err)
		require.False(t, created)
		_, _, err = rig.full.CreateWindow(ctx, windowRequest("w-1", "conv-w", "changed"))
		requireCode(t, err, http.StatusConflict, contract.CodeIdempotencyConflict)

		rich := &contract.CreateWindowRequest{ID: ptrTo("w-2"), Conversation: &contract.ConversationRef{ConversationID: "conv-w"},
			Stage: contract.StageAssembled, Purpose: "chat_completion", TokenCount: ptrTo[int64](320), Metadata: json.RawMessage(`{"a":1}`),
			Items: []contract.WindowItemInput{
				{ID: "i-0", Ordinal: ptrTo(0), Kind: contract.ItemKindMessage, Role: ptrTo(contract.RoleUser), Content: ptrTo("hello"), SourceRecordID: ptrTo("m-1")},
				{ID: "i-1", Ordinal: ptrTo(1), Kind: contract.ItemKindKnowledgeEvidence, Content: ptrTo(""),
					KnowledgeEvidence: &contract.KnowledgeEvidence{Provider: "docs", ResourceRef: "doc://1", Excerpt: "an excerpt", Score: ptrTo(0.8), RetrievedAtMs: 1}},
			}}
		_, created, err = rig.full.CreateWindow(ctx, rich)
		require.NoError(t, err)
		require.True(t, created)
		got, err := rig.full.GetWindow(ctx, &contract.GetWindowRequest{WindowID: "w-2"})
		require.NoError(t, err)
		require.Len(t, got.Items, 2)
		_, err = rig.full.GetWindow(ctx, &contract.GetWindowRequest{WindowID: "w-none"})
		requireCode(t, err, http.StatusNotFound, contract.CodeNotFound)

		_, created, err = rig.full.CreateDerivation(ctx, &contract.CreateDerivationRequest{ID: ptrTo("d-1"), SourceWindowID: "w-1", TargetWindowID: "w-2",
			Kind: contract.DerivationAssemble, Strategy: ptrTo("s"), InputTokenCount: ptrTo[int64](3)})
		require.NoError(t, err)
		require.True(t, created)
		_, created, err = rig.full.CreateDerivation(ctx, &contract.CreateDerivationRequest{ID: ptrTo("d-1"), SourceWindowID: "w-1", TargetWindowID: "w-2",
			Kind: contract.DerivationAssemble, Strategy: ptrTo("s"), InputTokenCount: ptrTo[int64](3)})
		require.NoError(t, err)
		require.False(t, created)
		_, _, err = rig.full.CreateDerivation(ctx, &contract.CreateDerivationRequest{SourceWindowID: "w-2", TargetWindowID: "w-1", Kind: contract.DerivationTrim})
		requireCode(t, err, http.StatusConflict, contract.CodeConflict)
		_, _, err = rig.full.CreateDerivation(ctx, &contract.CreateDerivationRequest{SourceWindowID: "w-none", TargetWindowID: "w-1", Kind: contract.DerivationTrim})
		requireCode(t, err, http.StatusNotFound, contract.CodeNotFound)

		lineage, err := rig.full.WindowLineage(ctx, &contract.LineageRequest{WindowID: "w-2", MaxDepth: ptrTo(4)})
		require.NoError(t, err)
		require.Len(t, lineage.Windows, 2)
		_, err = rig.full.WindowLineage(ctx, &contract.LineageRequest{WindowID: "w-none"})
		requireCode(t, err, http.StatusNotFound, contract.CodeNotFound)

		failed := invocationRequest("inv-1", "conv-w", "w-2")
		failed.State, failed.ResponseContent = contract.InvocationFailed, nil
		failed.Error = &contract.InvocationError{Code: "rate_limited", Message: "try later"}
		failed.FinishReason, failed.ToolName, failed.CachedTokens = ptrTo("error"), ptrTo("search"), 4
		_, err = rig.full.SaveModelInvocation(ctx, failed)
		require.NoError(t, err)
		inv, err := rig.full.GetModelInvocation(ctx, &contract.GetModelInvocationRequest{InvocationID: "inv-1"})
		require.NoError(t, err)
		require.Equal(t, "try later", inv.Error.Message)
		_, err = rig.full.SaveModelInvocation(ctx, invocationRequest("inv-1", "conv-w", "w-2"))
		requireCode(t, err, http.StatusConflict, contract.CodeIdempotencyConflict)
		_, err = rig.full.SaveModelInvocation(ctx, invocationRequest("inv-2", "conv-w", "w-none"))
		requireCode(t, err, http.StatusNotFound, contract.CodeNotFound)
		_, err = rig.full.GetModelInvocation(ctx, &contract.GetModelInvocationRequest{InvocationID: "inv-none"})
		requireCode(t, err, http.StatusNotFound, contract.CodeNotFound)

		windows, err := rig.full.ListWindows(ctx, &contract.ListByConversationRequest{ConversationID: ptrTo("conv-w"), Limit: ptrTo(1)})
		require.NoError(t, err)
		require.Len(t, windows.Windows, 1)
		windows, err = rig.full.ListWindows(ctx, &contract.ListByConversationRequest{ConversationID: ptrTo("conv-w"), Cursor: windows.NextCursor})
		require.NoError(t, err)
		require.Len(t, windows.Windows, 1)
		invocations, err := rig.full.ListModelInvocations(ctx, &contract.ListByConversationRequest{})
		require.NoError(t, err)
		require.Len(t, invocations.Invocations, 1)
		conversations, err := rig.full.ListConversations(ctx, &contract.ListConversationsRequest{Prefix: ptrTo("conv-w")})
		require.NoError(t, err)
		require.Len(t, conversations.Conversations, 1)
	})

	t.Run("operations", func(t *testing.T) {
		_, err := rig.full.AppendMessages(ctx, &contract.AppendMessagesRequest{Messages: []contract.ConversationRecord{
			{ID: "m-1", Scope: contract.ConversationScope{ConversationID: "conv-del"}, Role: contract.RoleUser, Content: "bye"}}})
		require.NoError(t, err)
		del, created, err := rig.full.DeleteConversation(ctx, &contract.DeleteConversationRequest{ConversationID: "conv-del"})
		require.NoError(t, err)
		require.True(t, created)
		_, created, err = rig.full.DeleteConversation(ctx, &contract.DeleteConversationRequest{ConversationID: "conv-del"})
		require.NoError(t, err)
		require.False(t, created)
		_, _, err = rig.full.CreateWindow(ctx, windowRequest("w-del", "conv-del", "x"))
		requireCode(t, err, http.StatusConflict, contract.CodeConflict)
		ret, err := rig.full.ApplyRetention(ctx, &contract.RetentionRequest{
			Policy: &contract.RetentionPolicy{MaxAgeMs: ptrTo[int64](86_400_000), KeepLastMessages: ptrTo[int64](1)}, ConversationID: ptrTo("conv-1"), DryRun: true})
		require.NoError(t, err)
		for _, id := range []string{del.Operation.ID, ret.Operation.ID} {
			require.Eventually(t, func() bool {
				op, err := rig.full.GetOperation(ctx, &contract.GetOperationRequest{OperationID: id})
				require.NoError(t, err)
				require.NotEqual(t, contract.OperationFailed, op.Operation.State)
				return op.Operation.State == contract.OperationSucceeded
			}, time.Minute, 50*time.Millisecond)
		}
		_, err = rig.full.GetOperation(ctx, &contract.GetOperationRequest{OperationID: "op-none"})
		requireCode(t, err, http.StatusNotFound, contract.CodeNotFound)
		status, err := rig.full.MaintenanceStatus(ctx)
		require.NoError(t, err)
		require.True(t, status.Database.OK)
	})

	t.Run("knowledge", func(t *testing.T) {
		caps, err := rig.full.KnowledgeCapabilities(ctx)
		require.NoError(t, err)
		require.Len(t, caps.Providers, 3)
		hits, err := rig.full.QueryKnowledge(ctx, &contract.KnowledgeQueryRequest{Query: "deploy", TopK: ptrTo(5),
			ScopeRef: ptrTo("space-1"), Filters: json.RawMessage(`{"lang":"en"}`), Requirement: contract.RequirementRequired})
		require.NoError(t, err)
		require.Len(t, hits.Hits, 2)
		degraded, err := rig.full.QueryKnowledge(ctx, &contract.KnowledgeQueryRequest{Query: "deploy", Provider: ptrTo("gone")})
		require.NoError(t, err)
		require.True(t, degraded.Degraded)
		disabled, err := rig.full.QueryKnowledge(ctx, &contract.KnowledgeQueryRequest{Query: "deploy", Requirement: contract.RequirementDisabled})
		require.NoError(t, err)
		require.Equal(t, contract.ReasonDisabled, *disabled.DegradationReason)
		_, err = rig.full.QueryKnowledge(ctx, &contract.KnowledgeQueryRequest{Query: "deploy", Provider: ptrTo("broken"), Requirement: contract.RequirementRequired})
		requireCode(t, err, http.StatusBadGateway, contract.CodeKnowledgeUpstreamError)
		_, err = rig.full.QueryKnowledge(ctx, &contract.KnowledgeQueryRequest{Query: "deploy", Provider: ptrTo("gone"), Requirement: contract.RequirementRequired})
		e := requireCode(t, err, http.StatusServiceUnavailable, contract.CodeKnowledgeUnavailable)
		require.Equal(t, contract.ReasonProviderUnavailable, e.Details["reason"])
		_, err = rig.full.QueryKnowledge(ctx, &contract.KnowledgeQueryRequest{Query: "deploy", Provider: ptrTo("nope")})
		require.Equal(t, "provider", requireCode(t, err, http.StatusBadRequest, contract.CodeValidationFailed).Field())
		_, err = rig.full.QueryKnowledge(invalid(), &contract.KnowledgeQueryRequest{Query: strings.Repeat("q", contract.MaxKnowledgeQueryBytes+1)})
		requireCode(t, err, http.StatusRequestEntityTooLarge, contract.CodePayloadTooLarge)

		resolved, err := rig.full.ResolveResources(ctx, &contract.ResolveResourcesRequest{ResourceRefs: []string{"doc-0", "doc-9"}})
		require.NoError(t, err)
		require.Equal(t, []string{"doc-9"}, resolved.Missing)
		_, err = rig.full.ResolveResources(ctx, &contract.ResolveResourcesRequest{Provider: ptrTo("broken"), ResourceRefs: []string{"doc-0"}})
		requireCode(t, err, http.StatusBadGateway, contract.CodeKnowledgeUpstreamError)
		_, err = rig.full.ResolveResources(ctx, &contract.ResolveResourcesRequest{Provider: ptrTo("gone"), ResourceRefs: []string{"doc-0"}})
		requireCode(t, err, http.StatusServiceUnavailable, contract.CodeKnowledgeUnavailable)
		_, err = rig.full.ResolveResources(invalid(), &contract.ResolveResourcesRequest{ResourceRefs: []string{}})
		requireCode(t, err, http.StatusBadRequest, contract.CodeValidationFailed)
	})

	t.Run("a2a", func(t *testing.T) {
		_, err := rig.full.RegisterAgent(ctx, &contract.RegisterAgentRequest{AgentType: "planner", Role: ptrTo("lead"),
			Capabilities: []string{"plan"}, SupportedVersions: []string{"1.0"}})
		require.NoError(t, err)
		_, err = rig.peer.RegisterAgent(ctx, &contract.RegisterAgentRequest{AgentType: "coder"})
		require.NoError(t, err)
		agents, err := rig.full.ListAgents(ctx, &contract.ListAgentsRequest{Limit: ptrTo(1)})
		require.NoError(t, err)
		require.NotNil(t, agents.NextCursor)
		agents, err = rig.full.ListAgents(ctx, &contract.ListAgentsRequest{Cursor: agents.NextCursor})
		require.NoError(t, err)
		require.Len(t, agents.Agents, 1)

		post := &contract.PostMessageRequest{MessageID: ptrTo("am-1"), Content: ptrTo("the plan"), Category: ptrTo(contract.CategoryContextShare),
			Priority: ptrTo(contract.PriorityHigh), TTLHours: ptrTo[int64](2), Metadata: json.RawMessage(`{"step":1}`)}
		ack, err := rig.full.PostAgentMessage(ctx, post)
		require.NoError(t, err)
		require.Equal(t, contract.AckAccepted, ack.Status)
		ack, err = rig.full.PostAgentMessage(ctx, post)
		require.NoError(t, err)
		require.Equal(t, contract.AckDuplicate, ack.Status)
		post.Content = ptrTo("another plan")
		_, err = rig.full.PostAgentMessage(ctx, post)
		requireCode(t, err, http.StatusConflict, contract.CodeIdempotencyConflict)
		_, err = rig.full.PostAgentMessage(ctx, &contract.PostMessageRequest{ToAgent: ptrTo("peer"), Privacy: ptrTo(contract.PrivacyPrivate),
			TaskID: ptrTo("no-such-task"), Content: ptrTo("between us")})
		requireCode(t, err, http.StatusNotFound, contract.CodeNotFound)
		_, err = rig.full.PostAgentMessage(ctx, &contract.PostMessageRequest{ToAgent: ptrTo("peer"), Privacy: ptrTo(contract.PrivacyPrivate),
			Content: ptrTo("between us")})
		require.NoError(t, err)
		_, err = rig.full.PostAgentMessage(invalid(), &contract.PostMessageRequest{Content: ptrTo("")})
		requireCode(t, err, http.StatusBadRequest, contract.CodeValidationFailed)
		msgs, err := rig.peer.ReadAgentMessages(ctx, &contract.ReadMessagesRequest{Limit: ptrTo(10), MarkRead: ptrTo(true)})
		require.NoError(t, err)
		require.Len(t, msgs.Messages, 2)

		create := &contract.CreateTaskRequest{ID: ptrTo("at-1"), ContextID: ptrTo("ctx-1"), ToAgent: "peer", Description: ptrTo("write it"),
			Metadata: json.RawMessage(`{"k":true}`), Parts: []contract.Part{
				{Type: contract.PartText, Text: ptrTo("by friday")},
				{Type: contract.PartData, MimeType: ptrTo("application/json"), Data: json.RawMessage(`{"pages":3}`)},
				{Type: contract.PartFile, Name: ptrTo("brief.txt"), MimeType: ptrTo("text/plain"), Bytes: ptrTo("aGk=")},
				{Type: contract.PartFile, URI: ptrTo("https://example.invalid/brief")},
			}}
		task, created, err := rig.full.CreateTask(ctx, create)
		require.NoError(t, err)
		require.True(t, created)
		require.Len(t, task.Messages[0].Parts, 4)
		_, created, err = rig.full.CreateTask(ctx, create)
		require.NoError(t, err)
		require.False(t, created)
		create.Description = ptrTo("something else")
		_, _, err = rig.full.CreateTask(ctx, create)
		requireCode(t, err, http.StatusConflict, contract.CodeIdempotencyConflict)
		_, err = rig.peer.GetTask(ctx, &contract.TaskRequest{TaskID: "at-1"})
		require.NoError(t, err)
		_, err = rig.peer.GetTask(ctx, &contract.TaskRequest{TaskID: "at-none"})
		requireCode(t, err, http.StatusNotFound, contract.CodeNotFound)
		task, err = rig.peer.UpdateTask(ctx, &contract.UpdateTaskRequest{TaskID: "at-1", State: contract.TaskWorking, Message: ptrTo("on it"),
			ExpectedVersion: ptrTo[int64](1), Artifacts: []contract.TaskArtifactInput{{ArtifactID: ptrTo("draft"), Name: ptrTo("draft.md"),
				Parts: []contract.Part{{Type: contract.PartText, Text: ptrTo("# draft")}}}}})
		require.NoError(t, err)
		require.Len(t, task.Artifacts, 1)
		_, err = rig.peer.UpdateTask(ctx, &contract.UpdateTaskRequest{TaskID: "at-1", State: contract.TaskCreated})
		requireCode(t, err, http.StatusConflict, contract.CodeInvalidTransition)
		_, err = rig.peer.UpdateTask(ctx, &contract.UpdateTaskRequest{TaskID: "at-none", State: contract.TaskWorking})
		requireCode(t, err, http.StatusNotFound, contract.CodeNotFound)
		_, err = rig.peer.MessageTask(ctx, &contract.TaskMessageRequest{TaskID: "at-1", Parts: []contract.Part{{Type: contract.PartText, Text: ptrTo("halfway")}}})
		require.NoError(t, err)
		_, err = rig.peer.MessageTask(ctx, &contract.TaskMessageRequest{TaskID: "at-none", Parts: []contract.Part{{Type: contract.PartText, Text: ptrTo("x")}}})
		requireCode(t, err, http.StatusNotFound, contract.CodeNotFound)
		tasks, err := rig.peer.ListTasks(ctx, &contract.ListTasksRequest{Role: ptrTo(contract.TaskListTo), States: []string{contract.TaskWorking}, Limit: ptrTo(5)})
		require.NoError(t, err)
		require.Len(t, tasks.Tasks, 1)
		require.EqualValues(t, 1, tasks.PendingCount)
		info, err := rig.full.TaskInfo(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 1, info.Active)
		_, err = rig.peer.CancelTask(ctx, &contract.CancelTaskRequest{TaskID: "at-1"})
		requireCode(t, err, http.StatusForbidden, contract.CodeScopeForbidden)
		_, err = rig.full.CancelTask(ctx, &contract.CancelTaskRequest{TaskID: "at-1", Reason: ptrTo("not needed")})
		require.NoError(t, err)
		_, err = rig.full.CancelTask(ctx, &contract.CancelTaskRequest{TaskID: "at-1"})
		requireCode(t, err, http.StatusConflict, contract.CodeInvalidTransition)
		_, err = rig.full.CancelTask(ctx, &contract.CancelTaskRequest{TaskID: "at-none"})
		requireCode(t, err, http.StatusNotFound, contract.CodeNotFound)
		_, err = rig.full.MessageTask(ctx, &contract.TaskMessageRequest{TaskID: "at-1", Parts: []contract.Part{{Type: contract.PartText, Text: ptrTo("late")}}})
		requireCode(t, err, http.StatusConflict, contract.CodeConflict)

		page, err := rig.peer.PollEvents(ctx, &contract.PollEventsRequest{Limit: ptrTo(100), WaitMs: ptrTo[int64](0),
			Filter: &contract.EventFilter{Kinds: []string{contract.EventTaskCreated, contract.EventTaskUpdated}, Actors: []string{"agent-acme", "peer"},
				MinConsistency: ptrTo(contract.ConsistencyStrong), TaskID: ptrTo("at-1")}})
		require.NoError(t, err)
		require.Len(t, page.Events, 3)
		_, err = rig.peer.PollEvents(invalid(), &contract.PollEventsRequest{WaitMs: ptrTo[int64](contract.MaxPollWaitMs + 1)})
		requireCode(t, err, http.StatusBadRequest, contract.CodeValidationFailed)
		snap, err := rig.peer.Snapshot(ctx, &contract.SnapshotRequest{})
		require.NoError(t, err)
		require.Len(t, snap.Messages, 2)
		snap, err = rig.full.Snapshot(ctx, &contract.SnapshotRequest{Privacy: ptrTo(contract.SnapshotFull)})
		require.NoError(t, err)
		require.Equal(t, contract.SnapshotFull, snap.Privacy)
	})

	t.Run("envelopes", func(t *testing.T) {
		signed := func(env map[string]any, flags ...string) *contract.Envelope {
			var out contract.Envelope
			require.NoError(t, json.Unmarshal(kit.sign(env, flags...), &out))
			return &out
		}
		msg := func(id string) map[string]any {
			return envelope(id, "agent-a", "peer", contract.ContentA2AMessage, map[string]any{"content": "from a peer"})
		}
		env := signed(msg("env-1"), kit.key("agent-a", "k1")...)
		ack, err := rig.full.Handoff(ctx, env)
		require.NoError(t, err)
		require.Equal(t, contract.AckAccepted, ack.Status)
		replay, err := rig.full.Handoff(ctx, env)
		require.NoError(t, err)
		require.Equal(t, contract.MessageAck{MessageID: "env-1", Status: contract.AckDuplicate, Ts: ack.Ts}, *replay)
		ack, err = rig.full.Handoff(ctx, signed(envelope("env-2", "agent-z", "peer", contract.ContentA2ATask,
			map[string]any{"description": "from a peer", "parts": []any{map[string]any{"type": "text", "text": "x"}}}), "--hmac", "h1"))
		require.NoError(t, err)
		require.Equal(t, contract.AckAccepted, ack.Status)

		other := msg("env-1")
		other["payload"] = map[string]any{"content": "something else"}
		_, err = rig.full.Handoff(ctx, signed(other, kit.key("agent-a", "k1")...))
		requireCode(t, err, http.StatusConflict, contract.CodeIdempotencyConflict)
		forged := signed(msg("env-3"), kit.key("agent-a", "k1")...)
		forged.To = "someone-else"
		_, err = rig.full.Handoff(ctx, forged)
		requireCode(t, err, http.StatusUnauthorized, contract.CodeSignatureInvalid)
		newer := msg("env-4")
		newer["version"] = "1.3"
		_, err = rig.full.Handoff(ctx, signed(newer, kit.key("agent-a", "k1")...))
		e := requireCode(t, err, http.StatusBadRequest, contract.CodeVersionNotSupported)
		require.Equal(t, []any{"1.0"}, e.Details["supportedVersions"])
		stale := msg("env-5")
		stale["ts"], stale["ttl_ms"] = time.Now().Add(-time.Minute).UTC().Format(time.RFC3339Nano), 1000
		_, err = rig.full.Handoff(ctx, signed(stale, kit.key("agent-a", "k1")...))
		requireCode(t, err, http.StatusGone, contract.CodeEnvelopeExpired)
		endless := msg("env-6")
		endless["ttl_ms"] = contract.MaxEnvelopeTTLMs + 1
		_, err = rig.full.Handoff(invalid(), signed(endless, kit.key("agent-a", "k1")...))
		require.Equal(t, "ttl_ms", requireCode(t, err, http.StatusBadRequest, contract.CodeValidationFailed).Field())
		big := envelope("env-7", "agent-a", "peer", contract.ContentContextPackage,
			map[string]any{"blob": strings.Repeat("x", contract.MaxEnvelopePayloadBytes)})
		_, err = rig.full.Handoff(ctx, signed(big, kit.key("agent-a", "k1")...))
		require.Equal(t, "payload", requireCode(t, err, http.StatusRequestEntityTooLarge, contract.CodePayloadTooLarge).Field())
		impostor := msg("env-8")
		impostor["payload"] = map[string]any{"content": "x", "fromAgent": "mallory"}
		_, err = rig.full.Handoff(ctx, signed(impostor, kit.key("agent-a", "k1")...))
		requireCode(t, err, http.StatusForbidden, contract.CodeScopeForbidden)

		versions, err := rig.full.A2AVersions(ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"1.0"}, versions.SupportedVersions)
	})

	t.Run("a2a protocol", func(t *testing.T) {
		for _, get := range []func(context.Context) (*contract.AgentCard, error){rig.anon.AgentCard, rig.anon.WellKnownAgentCard, rig.anon.WellKnownAgentJSON} {
			card, err := get(ctx)
			require.NoError(t, err)
			require.Equal(t, rig.app.base+contract.PathA2AJSONRPC, card.URL)
			require.Equal(t, "1.0", card.SupportedInterfaces[0].ProtocolVersion)
		}
		call := func(c *client.Client, version, method string, params any) *contract.RPCResponse {
			t.Helper()
			raw, err := json.Marshal(params)
			require.NoError(t, err)
			res, err := c.A2ARPC(ctx, version, &contract.RPCRequest{JSONRPC: "2.0", ID: json.RawMessage(`"r-1"`), Method: method, Params: raw})
			require.NoError(t, err)
			require.JSONEq(t, `"r-1"`, string(res.ID))
			return res
		}
		task := func(res *contract.RPCResponse) contract.RPCTask {
			t.Helper()
			require.Nil(t, res.Error)
			var out contract.RPCTask
			require.NoError(t, json.Unmarshal(res.Result, &out))
			return out
		}
		parts03 := []any{map[string]any{"kind": "text", "text": "review"}, map[string]any{"kind": "data", "data": []any{1, 2}},
			map[string]any{"kind": "file", "file": map[string]any{"name": "a.txt", "mimeType": "text/plain", "bytes": "aGk="}},
			map[string]any{"kind": "file", "file": map[string]any{"uri": "https://example.invalid/a"}}}
		t03 := task(call(rig.full, "", contract.MethodV03MessageSend, map[string]any{"message": map[string]any{"role": "user",
			"parts": parts03}, "metadata": map[string]any{"toAgent": "peer"}}))
		// A notification (no id) gets no reply.
		require.NoError(t, rig.full.A2ANotify(ctx, "", &contract.RPCRequest{JSONRPC: "2.0", Method: contract.MethodV03TasksGet,
			Params: json.RawMessage(`{"id": "none"}`)}))
		require.Equal(t, "submitted", t03.Status.State)
		_, err := rig.peer.UpdateTask(ctx, &contract.UpdateTaskRequest{TaskID: t03.ID, State: contract.TaskWorking, Message: ptrTo("on it"),
			Artifacts: []contract.TaskArtifactInput{{ArtifactID: ptrTo("a-1"), Name: ptrTo("notes"), Parts: []contract.Part{{Type: contract.PartText, Text: ptrTo("x")}}}}})
		require.NoError(t, err)
		got := task(call(rig.full, "0.3", contract.MethodV03TasksGet, map[string]any{"id": t03.ID, "historyLength": 1}))
		require.Equal(t, "working", got.Status.State)
		require.Len(t, got.Artifacts, 1)
		task(call(rig.full, "", contract.MethodV03TasksCancel, map[string]any{"id": t03.ID}))

		parts1 := []any{map[string]any{"text": "review"}, map[string]any{"data": map[string]any{"k": 1}, "mediaType": "application/json"},
			map[string]any{"raw": "aGk=", "filename": "a.txt", "mediaType": "text/plain"}, map[string]any{"url": "https://example.invalid/a"}}
		sent := call(rig.full, "1.0", contract.MethodV1SendMessage, map[string]any{"message": map[string]any{"role": "ROLE_USER",
			"parts": parts1}, "metadata": map[string]any{"toAgent": "peer"}})
		require.Nil(t, sent.Error)
		var result contract.RPCSendResult
		require.NoError(t, json.Unmarshal(sent.Result, &result))
		require.Equal(t, "TASK_STATE_SUBMITTED", result.Task.Status.State)
		_, err = rig.peer.UpdateTask(ctx, &contract.UpdateTaskRequest{TaskID: result.Task.ID, State: contract.TaskWorking,
			Artifacts: []contract.TaskArtifactInput{{ArtifactID: ptrTo("a-1"), Parts: []contract.Part{{Type: contract.PartData, Data: json.RawMessage(`[1]`)}}}}})
		require.NoError(t, err)
		require.Len(t, task(call(rig.full, "", contract.MethodV1GetTask, map[string]any{"id": result.Task.ID})).Artifacts, 1)
		require.Equal(t, "TASK_STATE_CANCELED", task(call(rig.full, "", contract.MethodV1CancelTask, map[string]any{"id": result.Task.ID})).Status.State)

		for _, tc := range []struct {
			version, method string
			code            int
			data            bool
		}{
			{"", contract.MethodV03TasksGet, contract.RPCTaskNotFound, false},
			{"", contract.MethodV1GetTask, contract.RPCTaskNotFound, true},
			{"", contract.MethodV1CancelTask, contract.RPCTaskNotFound, true},
			{"1.0", "tasks/explode", contract.RPCMethodNotFound, true},
			{"2.0", contract.MethodV03TasksGet, contract.RPCVersionNotSupported, false},
			{"", contract.MethodV03PushSet, contract.RPCInvalidParams, false},
			{"", contract.MethodV03PushList, contract.RPCTaskNotFound, false},
			{"", contract.MethodV1GetPushConfig, contract.RPCInvalidParams, true},
		} {
			res := call(rig.full, tc.version, tc.method, map[string]any{"id": "t-none"})
			require.Nil(t, res.Result)
			require.Equal(t, tc.code, res.Error.Code, tc.method)
			require.Equal(t, tc.data, res.Error.Data != nil, tc.method)
		}

		// After authentication every body gets a JSON-RPC answer with HTTP 200.
		auth := []string{"Authorization", "Bearer " + rigStaticToken}
		rawRPC := func(exp expectation, contentType string, body io.Reader, length int64) contract.RPCResponse {
			t.Helper()
			exp.raw = true
			req, err := http.NewRequestWithContext(expect(ctx, exp), http.MethodPost, rig.app.base+contract.PathA2AJSONRPC, body)
			require.NoError(t, err)
			req.ContentLength = length
			req.Header.Set("Content-Type", contentType)
			req.Header.Set(auth[0], auth[1])
			resp, err := rig.hc.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			var out contract.RPCResponse
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
			require.NotNil(t, out.Error)
			return out
		}
		require.Equal(t, contract.RPCInvalidRequest, rawRPC(expectation{invalid: true}, "application/json", strings.NewReader(`{"bogus":1}`), 11).Error.Code)
		require.Equal(t, contract.RPCParseError, rawRPC(expectation{invalid: true}, "application/json", strings.NewReader(`{"jsonrpc":`), 11).Error.Code)
		require.Equal(t, contract.RPCInvalidRequest, rawRPC(expectation{invalid: true}, "text/plain", strings.NewReader(`{}`), 2).Error.Code)
		over := int64(contract.MaxRequestBodyBytes + 1)
		require.Equal(t, contract.RPCInvalidRequest, rawRPC(expectation{skipRequest: "a 32 MiB body"}, "application/json",
			io.LimitReader(zeros{}, over), over).Error.Code)
	})

	t.Run("costs", func(t *testing.T) {
		_, _, err := rig.full.CreateWindow(ctx, windowRequest("w-cost", "conv-cost", "x"))
		require.NoError(t, err)
		inv := invocationRequest("inv-cost", "conv-cost", "w-cost")
		inv.ToolName = ptrTo("search")
		_, err = rig.full.SaveModelInvocation(ctx, inv)
		require.NoError(t, err)
		report, err := rig.full.Costs(ctx, &contract.CostsRequest{GroupBy: contract.CostsByTool, TopN: ptrTo(100),
			FromMs: ptrTo[int64](0), ToMs: ptrTo[int64](1 << 52)})
		require.NoError(t, err)
		require.NotEmpty(t, report.Groups)
		_, err = rig.full.Costs(invalid(), &contract.CostsRequest{GroupBy: "user"})
		require.Equal(t, "groupBy", requireCode(t, err, http.StatusBadRequest, contract.CodeValidationFailed).Field())
		_, err = rig.full.Costs(ctx, &contract.CostsRequest{GroupBy: contract.CostsByModel, FromMs: ptrTo[int64](2), ToMs: ptrTo[int64](1)})
		require.Equal(t, "fromMs", requireCode(t, err, http.StatusBadRequest, contract.CodeValidationFailed).Field())
	})

	t.Run("mcp", func(t *testing.T) {
		meta, err := rig.anon.ProtectedResourceMetadata(ctx)
		require.NoError(t, err)
		require.Equal(t, rig.app.base+contract.PathMCP, meta.Resource)
		require.Equal(t, []string{"header"}, meta.BearerMethodsSupported)
		require.NotNil(t, meta.AuthorizationServers)
		res, err := rig.full.MCP(ctx, &contract.RPCRequest{JSONRPC: "2.0", ID: json.RawMessage(`"l-1"`), Method: "tools/list"})
		require.NoError(t, err)
		require.Nil(t, res.Error)
		require.JSONEq(t, `"l-1"`, string(res.ID))
		res, err = rig.full.MCP(ctx, &contract.RPCRequest{JSONRPC: "2.0", Method: "notifications/initialized"})
		require.NoError(t, err)
		require.Nil(t, res, "a notification is answered 202 without a body")
		for _, body := range []string{`{"jsonrpc":"2.0","id":1,`, `[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`} {
			status, _ := rig.raw(t, expectation{invalid: true}, http.MethodPost, contract.PathMCP, "application/json",
				strings.NewReader(body), 0, "Authorization", "Bearer "+rigStaticToken)
			require.Equal(t, http.StatusBadRequest, status, body)
		}
	})

	t.Run("every route's rate limit", func(t *testing.T) {
		limited := newContractRig(t, func(c *Config) { c.RateLimits = ratelimit.RateLimits{AgentPerMin: 1} })
		limited.check = rig.check
		limited.hc.Transport = rig.check
		_, err := limited.full.MaintenanceStatus(ctx)
		require.NoError(t, err, "the only token of the minute")
		for _, route := range contract.Routes() {
			if route.Public() {
				continue
			}
			e := requireCode(t, routeCall(ctx, limited.full, route), http.StatusTooManyRequests, contract.CodeRateLimited)
			require.Equal(t, contract.RateLevelAgent, e.Details["level"], route.Path)
			require.True(t, e.Retryable)
		}
	})

	t.Run("entries", func(t *testing.T) {
		first := &contract.CreateEntryRequest{ID: ptrTo("e-1"), Kind: contract.EntryKindFact, Content: "The staging cluster deploys from main.",
			ConversationID: ptrTo("conv-e"), SourceRecordIDs: []string{"m-1"}, Tags: []string{"deploy"}, Importance: ptrTo(0.7),
			ExpiresAtMs: ptrTo(time.Now().Add(time.Hour).UnixMilli()), Metadata: json.RawMessage(`{"k":[1,null]}`)}
		e, created, err := rig.full.CreateEntry(ctx, first)
		require.NoError(t, err)
		require.True(t, created)
		_, created, err = rig.full.CreateEntry(ctx, first)
		require.NoError(t, err)
		require.False(t, created)
		_, _, err = rig.full.CreateEntry(ctx, &contract.CreateEntryRequest{ID: ptrTo("e-1"), Kind: contract.EntryKindFact, Content: "changed"})
		requireCode(t, err, http.StatusConflict, contract.CodeIdempotencyConflict)
		got, err := rig.full.GetEntry(ctx, &contract.GetEntryRequest{EntryID: "e-1"})
		require.NoError(t, err)
		require.Equal(t, e, got)
		_, err = rig.full.GetEntry(ctx, &contract.GetEntryRequest{EntryID: "e-none"})
		requireCode(t, err, http.StatusNotFound, contract.CodeNotFound)
		_, err = rig.full.EntryHistory(ctx, &contract.EntryHistoryRequest{EntryID: "e-none"})
		requireCode(t, err, http.StatusNotFound, contract.CodeNotFound)

		fixed, err := rig.full.CorrectEntry(ctx, &contract.CorrectEntryRequest{EntryID: "e-1", Content: "Staging deploys from release.",
			Reason: ptrTo("moved"), Tags: []string{}})
		require.NoError(t, err)
		require.Equal(t, contract.EntrySuperseded, fixed.Superseded.Status)
		_, err = rig.full.CorrectEntry(ctx, &contract.CorrectEntryRequest{EntryID: "e-1", Content: "again"})
		requireCode(t, err, http.StatusConflict, contract.CodeConflict)
		_, err = rig.full.CorrectEntry(ctx, &contract.CorrectEntryRequest{EntryID: "e-none", Content: "x"})
		requireCode(t, err, http.StatusNotFound, contract.CodeNotFound)

		for _, id := range []string{"e-2", "e-3", "e-4"} {
			_, _, err := rig.full.CreateEntry(ctx, &contract.CreateEntryRequest{ID: ptrTo(id), Kind: contract.EntryKindObservation, Content: "note " + id})
			require.NoError(t, err)
		}
		merge := &contract.MergeEntriesRequest{EntryIDs: []string{"e-2", "e-3"},
			Merged: &contract.MergedEntry{ID: ptrTo("e-23"), Kind: contract.EntryKindSummary, Content: "notes two and three", Tags: []string{"notes"}}}
		merged, created, err := rig.full.MergeEntries(ctx, merge)
		require.NoError(t, err)
		require.True(t, created)
		replay, created, err := rig.full.MergeEntries(ctx, merge)
		require.NoError(t, err)
		require.False(t, created)
		require.Equal(t, merged, replay)
		_, _, err = rig.full.MergeEntries(ctx, &contract.MergeEntriesRequest{EntryIDs: []string{"e-4", "e-none"}, Merged: merge.Merged})
		requireCode(t, err, http.StatusNotFound, contract.CodeNotFound)
		_, _, err = rig.full.MergeEntries(ctx, &contract.MergeEntriesRequest{EntryIDs: []string{"e-4", "e-1"},
			Merged: &contract.MergedEntry{Kind: contract.EntryKindFact, Content: "x"}})
		requireCode(t, err, http.StatusConflict, contract.CodeConflict)

		history, err := rig.full.EntryHistory(ctx, &contract.EntryHistoryRequest{EntryID: "e-1"})
		require.NoError(t, err)
		require.Len(t, history.Versions, 2)
		listed, err := rig.full.ListEntries(ctx, &contract.ListEntriesRequest{Status: ptrTo(contract.EntryMerged), Kinds: []string{contract.EntryKindObservation},
			Tags: []string{}, ConversationID: nil, Limit: ptrTo(1)})
		require.NoError(t, err)
		require.NotNil(t, listed.NextCursor)
		_, err = rig.full.ListEntries(ctx, &contract.ListEntriesRequest{Cursor: listed.NextCursor})
		requireCode(t, err, http.StatusBadRequest, contract.CodeInvalidCursor)
		expired, err := rig.full.ExpireEntry(ctx, &contract.ExpireEntryRequest{EntryID: "e-4", Reason: ptrTo("done")})
		require.NoError(t, err)
		require.Equal(t, contract.EntryExpired, expired.Status)
		_, err = rig.full.ExpireEntry(ctx, &contract.ExpireEntryRequest{EntryID: "e-1"})
		requireCode(t, err, http.StatusConflict, contract.CodeConflict)
		_, err = rig.full.ExpireEntry(ctx, &contract.ExpireEntryRequest{EntryID: "e-none"})
		requireCode(t, err, http.StatusNotFound, contract.CodeNotFound)

		require.Eventually(t, func() bool {
			st, err := rig.full.MaintenanceStatus(ctx)
			return err == nil && st.VectorProjection.PendingEntries == 0
		}, time.Minute, 20*time.Millisecond)
		for _, mode := range contract.RecallModes {
			res, err := rig.full.Recall(ctx, &contract.RecallRequest{Query: "staging release deploys", Mode: mode, TopK: ptrTo(5),
				Filter: &contract.RecallFilter{Kinds: []string{contract.EntryKindFact}, ConversationID: ptrTo("conv-e")}, MinScore: ptrTo(-1.0)})
			require.NoError(t, err)
			require.Equal(t, fixed.Entry.ID, res.Results[0].Entry.ID, mode)
		}
		_, err = rig.full.Recall(invalid(), &contract.RecallRequest{Query: "q", TopK: ptrTo(contract.MaxRecallTopK + 1)})
		require.Equal(t, "topK", requireCode(t, err, http.StatusBadRequest, contract.CodeValidationFailed).Field())
		_, err = rig.full.Recall(invalid(), &contract.RecallRequest{Query: strings.Repeat("q", contract.MaxRecallQueryBytes+1)})
		requireCode(t, err, http.StatusRequestEntityTooLarge, contract.CodePayloadTooLarge)
		_, _, err = rig.full.CreateEntry(invalid(), &contract.CreateEntryRequest{Kind: contract.EntryKindFact, Content: strings.Repeat("x", contract.MaxEntryContentBytes+1)})
		requireCode(t, err, http.StatusRequestEntityTooLarge, contract.CodePayloadTooLarge)

		// Rebuilds, on a replica that works no jobs, so the first one stays in flight.
		api := newContractRig(t, func(c *Config) { c.JobWorkers = 0 })
		api.hc.Transport = rig.check
		op, created, err := api.full.RebuildVectorProjection(ctx, &contract.RebuildProjectionRequest{})
		require.NoError(t, err)
		require.True(t, created)
		again, created, err := api.full.RebuildVectorProjection(ctx, &contract.RebuildProjectionRequest{})
		require.NoError(t, err)
		require.False(t, created)
		require.Equal(t, op.Operation.ID, again.Operation.ID)
		_, _, err = api.full.RebuildVectorProjection(ctx, &contract.RebuildProjectionRequest{Embedder: ptrTo(contract.EmbedderHash)})
		requireCode(t, err, http.StatusConflict, contract.CodeConflict)
		_, _, err = api.full.RebuildVectorProjection(ctx, &contract.RebuildProjectionRequest{Embedder: ptrTo(contract.EmbedderOpenAI)})
		require.Equal(t, "embedder", requireCode(t, err, http.StatusBadRequest, contract.CodeValidationFailed).Field())
		rebuilt, _, err := rig.full.RebuildVectorProjection(ctx, &contract.RebuildProjectionRequest{Embedder: ptrTo(contract.EmbedderHash)})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			got, err := rig.full.GetOperation(ctx, &contract.GetOperationRequest{OperationID: rebuilt.Operation.ID})
			require.NoError(t, err)
			return got.Operation.State == contract.OperationSucceeded
		}, time.Minute, 20*time.Millisecond)

		// The embedding provider down: hybrid degrades, vector is 503.
		down := newContractRig(t, func(c *Config) {
			c.Embedder, c.EmbeddingURL, c.EmbeddingModel, c.EmbeddingDimensions = EmbedderOpenAI, knowledgetest.RefusedURL(t), "m", 8
		})
		down.hc.Transport = rig.check
		degraded, err := down.full.Recall(ctx, &contract.RecallRequest{Query: "anything"})
		require.NoError(t, err)
		require.True(t, degraded.Degraded)
		_, err = down.full.Recall(ctx, &contract.RecallRequest{Query: "anything", Mode: contract.RecallVector})
		requireCode(t, err, http.StatusServiceUnavailable, contract.CodeEmbeddingUnavailable)
	})

	t.Run("exports", func(t *testing.T) {
		_, err := rig.full.AppendMessages(ctx, &contract.AppendMessagesRequest{Messages: []contract.ConversationRecord{
			{ID: "m-x", Scope: contract.ConversationScope{ConversationID: "conv-x"}, Role: contract.RoleUser, Content: "exported"}}})
		require.NoError(t, err)
		started, err := rig.full.Export(ctx, &contract.ExportRequest{ConversationID: ptrTo("conv-x"), Include: []string{contract.IncludeMessages}})
		require.NoError(t, err)
		var op *contract.OperationResponse
		require.Eventually(t, func() bool {
			op, err = rig.full.GetOperation(ctx, &contract.GetOperationRequest{OperationID: started.Operation.ID})
			require.NoError(t, err)
			return op.Operation.State == contract.OperationSucceeded
		}, time.Minute, 20*time.Millisecond)
		var result contract.ExportResult
		require.NoError(t, json.Unmarshal(op.Operation.Result, &result))
		art, err := rig.full.GetArtifact(ctx, &contract.GetArtifactRequest{ArtifactID: result.ArtifactID})
		require.NoError(t, err)
		require.Equal(t, contract.ArtifactReady, art.State)
		chunk, err := rig.full.GetChunk(ctx, &contract.GetChunkRequest{ArtifactID: art.ID, Index: ptrTo(0)})
		require.NoError(t, err)
		_, err = rig.full.GetChunk(ctx, &contract.GetChunkRequest{ArtifactID: art.ID, Index: ptrTo(art.ChunkCount)})
		requireCode(t, err, http.StatusNotFound, contract.CodeNotFound)
		_, err = rig.full.GetArtifact(ctx, &contract.GetArtifactRequest{ArtifactID: "art-none"})
		requireCode(t, err, http.StatusNotFound, contract.CodeNotFound)
		_, err = rig.full.GetChunk(invalid(), &contract.GetChunkRequest{ArtifactID: art.ID})
		require.Equal(t, "index", requireCode(t, err, http.StatusBadRequest, contract.CodeValidationFailed).Field())

		res, err := rig.full.Import(ctx, &contract.ImportRequest{ArtifactID: &art.ID})
		require.NoError(t, err)
		require.EqualValues(t, 1, res.Skipped.Messages)
		var raw []byte
		for i := range art.ChunkCount {
			c, err := rig.full.GetChunk(ctx, &contract.GetChunkRequest{ArtifactID: art.ID, Index: &i})
			require.NoError(t, err)
			data, err := base64.StdEncoding.DecodeString(c.Data)
			require.NoError(t, err)
			raw = append(raw, data...)
		}
		whole := base64.StdEncoding.EncodeToString(raw)
		res, err = rig.full.Import(ctx, &contract.ImportRequest{Format: ptrTo(contract.FormatNDJSON), Data: &whole})
		require.NoError(t, err)
		require.EqualValues(t, 1, res.Skipped.Messages)
		changed := base64.StdEncoding.EncodeToString(bytes.Replace(raw, []byte(`"exported"`), []byte(`"changed"`), 1))
		_, err = rig.full.Import(ctx, &contract.ImportRequest{Format: ptrTo(contract.FormatNDJSON), Data: &changed})
		e := requireCode(t, err, http.StatusConflict, contract.CodeIdempotencyConflict)
		require.Equal(t, []any{"message:conv-x/m-x"}, e.Details["ids"])
		_, err = rig.full.Import(ctx, &contract.ImportRequest{ArtifactID: ptrTo("art-none")})
		requireCode(t, err, http.StatusNotFound, contract.CodeNotFound)
		_, err = rig.full.Import(invalid(), &contract.ImportRequest{Format: ptrTo("csv"), Data: &chunk.Data})
		require.Equal(t, "format", requireCode(t, err, http.StatusBadRequest, contract.CodeValidationFailed).Field())
		big := strings.Repeat("A", (contract.MaxImportDataBytes/3+1)*4)
		_, err = rig.full.Import(ctx, &contract.ImportRequest{Format: ptrTo(contract.FormatNDJSON), Data: &big})
		requireCode(t, err, http.StatusRequestEntityTooLarge, contract.CodePayloadTooLarge)

		// An expired artifact's chunks are refused.
		conn, err := pgx.Connect(ctx, rig.app.dsn)
		require.NoError(t, err)
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, `UPDATE export_artifacts SET expires_at_ms = 0 WHERE artifact_id = $1`, art.ID)
		require.NoError(t, err)
		expired, err := rig.full.GetArtifact(ctx, &contract.GetArtifactRequest{ArtifactID: art.ID})
		require.NoError(t, err)
		require.Equal(t, contract.ArtifactExpired, expired.State)
		_, err = rig.full.GetChunk(ctx, &contract.GetChunkRequest{ArtifactID: art.ID, Index: ptrTo(0)})
		requireCode(t, err, http.StatusConflict, contract.CodeConflict)

		for _, kind := range contract.AdvancedKinds {
			started, err := rig.full.StartAdvancedOperation(ctx, &contract.AdvancedOperationRequest{Kind: kind, Params: json.RawMessage(`{}`)})
			require.NoError(t, err)
			require.Eventually(t, func() bool {
				op, err = rig.full.GetOperation(ctx, &contract.GetOperationRequest{OperationID: started.Operation.ID})
				require.NoError(t, err)
				return op.Operation.State == contract.OperationSucceeded
			}, time.Minute, 20*time.Millisecond)
		}
		_, err = rig.full.StartAdvancedOperation(invalid(), &contract.AdvancedOperationRequest{Kind: "defrag"})
		require.Equal(t, "kind", requireCode(t, err, http.StatusBadRequest, contract.CodeValidationFailed).Field())
		_, err = rig.full.Export(invalid(), &contract.ExportRequest{Include: []string{"gadgets"}})
		require.Equal(t, "include[0]", requireCode(t, err, http.StatusBadRequest, contract.CodeValidationFailed).Field())

		snap, err := rig.full.Snapshot(ctx, &contract.SnapshotRequest{Write: true})
		require.NoError(t, err)
		require.NotNil(t, snap.ArtifactID)
	})

	t.Run("every route's generic errors", func(t *testing.T) {
		for _, route := range contract.Routes() {
			if route.Public() {
				continue
			}
			e := requireCode(t, routeCall(invalid(), rig.anon, route), http.StatusUnauthorized, contract.CodeTokenMissing)
			require.Empty(t, e.Field(), route.Path)
			if route.PerCall() {
				// Each MCP tool call is checked on its own (TestMCPCapabilityMatrix); the
				// route itself refuses a scope header the token disagrees with.
				outside := client.New(client.WithBaseURL(rig.app.base), client.WithHTTPClient(rig.hc),
					client.WithBearerToken(rig.token(contract.AllCapabilities...)), client.WithHeader("x-infra-tenant-id", "elsewhere"))
				requireCode(t, routeCall(ctx, outside, route), http.StatusForbidden, contract.CodeScopeForbidden)
			} else {
				e = requireCode(t, routeCall(ctx, rig.noCap, route), http.StatusForbidden, contract.CodeTokenForbidden)
				require.Equal(t, route.Capabilities[0], e.Details["requiredCapability"])
			}
			auth := []string{"Authorization", "Bearer " + rigStaticToken}
			if route.Method == http.MethodGet || route.Path == contract.PathA2AJSONRPC {
				// POST /a2a answers every body with JSON-RPC ("a2a protocol" above); a bad
				// scope header comes before, with the credential.
				status, env := rig.raw(t, expectation{invalid: true}, route.Method, route.Path, "", nil, 0,
					append(auth, "x-infra-tenant-id", "a b")...)
				require.Equal(t, http.StatusBadRequest, status, route.Path)
				require.Equal(t, "x-infra-tenant-id", env.Details["field"])
				continue
			}
			bogus := `{"bogus":1}`
			if route.Path == contract.RouteA2AHandoff.Path {
				// An envelope's sender is checked before its members: unsigned, it must be
				// the caller (the static token's subject).
				bogus = `{"from":"service","bogus":1}`
			}
			status, env := rig.raw(t, expectation{invalid: true}, route.Method, route.Path, "application/json",
				strings.NewReader(bogus), 0, auth...)
			require.Equal(t, http.StatusBadRequest, status, route.Path)
			if !route.PerCall() {
				// POST /internal/v1/mcp answers a body without a method with a JSON-RPC
				// error (the "mcp" subtest).
				require.Equal(t, "bogus", env.Details["field"], route.Path)
			}
			status, env = rig.raw(t, expectation{invalid: true}, route.Method, route.Path, "text/plain",
				strings.NewReader(`{}`), 0, auth...)
			require.Equal(t, http.StatusUnsupportedMediaType, status, route.Path)
			require.Equal(t, contract.CodeUnsupportedMediaType, env.Code)
			over := int64(contract.MaxRequestBodyBytes + 1)
			status, env = rig.raw(t, expectation{skipRequest: "a 32 MiB body"}, route.Method, route.Path, "application/json",
				io.LimitReader(zeros{}, over), over, auth...)
			require.Equal(t, http.StatusRequestEntityTooLarge, status, route.Path)
			require.Equal(t, "body", env.Details["field"])
		}
	})

	t.Run("unknown routes answer the envelope", func(t *testing.T) {
		status, env := rig.raw(t, expectation{unrouted: true}, http.MethodPost, contract.PrefixContext+"/nope", "application/json", strings.NewReader(`{}`), 0)
		require.Equal(t, http.StatusNotFound, status)
		require.Equal(t, contract.CodeRouteNotFound, env.Code)
		status, env = rig.raw(t, expectation{unrouted: true}, http.MethodDelete, contract.RouteMessagesBatch.Path, "", nil, 0)
		require.Equal(t, http.StatusMethodNotAllowed, status)
		require.Equal(t, contract.CodeMethodNotAllowed, env.Code)
	})

	t.Run("a failing database", func(t *testing.T) {
		// A connection for every route called at once below.
		broken := newContractRig(t, func(c *Config) {
			c.StatementTimeout, c.JobWorkers, c.MaxConns = 300*time.Millisecond, 0, int32(len(contract.Routes()))
		})
		broken.check = rig.check
		broken.hc.Transport = rig.check
		conn, err := pgx.Connect(ctx, broken.app.dsn)
		require.NoError(t, err)
		defer conn.Close(ctx)
		var tables []string
		rows, err := conn.Query(ctx, "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")
		require.NoError(t, err)
		tables, err = pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)

		// Every table locked: each statement waits out its timeout, 503. The routes are
		// called at once, so that the subtest waits one timeout rather than one a route.
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, "LOCK TABLE "+strings.Join(quoted(tables), ", ")+" IN ACCESS EXCLUSIVE MODE")
		require.NoError(t, err)
		var locked []contract.Route
		for _, route := range contract.Routes() {
			if usesDatabase(route) && documents(rig.check, route, http.StatusServiceUnavailable) {
				locked = append(locked, route)
			}
		}
		errs := make([]error, len(locked))
		var calls sync.WaitGroup
		for i, route := range locked {
			calls.Go(func() { errs[i] = routeCall(ctx, broken.full, route) })
		}
		calls.Wait()
		for i, route := range locked {
			e := requireCode(t, errs[i], http.StatusServiceUnavailable, contract.CodeServiceUnavailable)
			require.True(t, e.Retryable, route.Path)
		}
		rpcInternal := func() {
			t.Helper()
			res, err := broken.full.A2ARPC(ctx, "1.0", &contract.RPCRequest{JSONRPC: "2.0", ID: json.RawMessage(`7`),
				Method: contract.MethodV1GetTask, Params: json.RawMessage(`{"id":"t-any"}`)})
			require.NoError(t, err, "POST /a2a answers a failing database with HTTP 200")
			require.Equal(t, contract.RPCInternalError, res.Error.Code)
			require.Equal(t, "internal error", res.Error.Message, "never the cause's text")
			require.Equal(t, "INTERNAL_ERROR", res.Error.Data[0].Reason)
		}
		rpcInternal()
		require.NoError(t, tx.Rollback(ctx))

		// Every table but the migration record gone: an internal error, 500.
		for _, table := range tables {
			if table != "goose_db_version" {
				_, err := conn.Exec(ctx, fmt.Sprintf("ALTER TABLE %s RENAME TO %s", quote(table), quote(table+"_gone")))
				require.NoError(t, err)
			}
		}
		for _, route := range contract.Routes() {
			if !usesDatabase(route) || !documents(rig.check, route, http.StatusInternalServerError) {
				continue
			}
			e := requireCode(t, routeCall(ctx, broken.full, route), http.StatusInternalServerError, contract.CodeInternal)
			require.NotContains(t, e.Message, "_gone", "an internal error never leaks its cause")
		}
		rpcInternal()
		_, err = broken.full.Ready(ctx)
		require.NoError(t, err, "readiness reads the migration record only")
	})

	rig.check.requireClean(t)
	require.Empty(t, rig.check.unobserved(), "documented statuses no request provoked: provoke them here, or stop documenting them")
	require.Empty(t, rig.check.notViaClient(), "routes without a typed client method (contract/client)")
}

// usesDatabase reports whether a route answers from the database (and so fails with
// it); the knowledge routes answer from their providers.
func usesDatabase(route contract.Route) bool {
	return strings.HasPrefix(route.Path, contract.PrefixContext) || strings.HasPrefix(route.Path, contract.PrefixA2A) ||
		route.Path == contract.PathReady
}

func documents(c *contractCheck, route contract.Route, status int) bool {
	for _, s := range c.documentedStatuses()[route.Method+" "+route.Path] {
		if s == status {
			return true
		}
	}
	return false
}

func quote(name string) string { return pgx.Identifier{name}.Sanitize() }

func quoted(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = quote(n)
	}
	return out
}

// zeros is an endless reader of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
