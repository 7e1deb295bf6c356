package runtime_test

// Fuzz targets for every request validator, called through the use cases' public
// entry points with bodies decoded as the server decodes them. Each asserts what the
// contract promises of any input: a refusal is a *runtime.Error with a 4xx code of
// the contract's table naming the offending field, nothing reaches the store then,
// and whatever is accepted reaches the store within every limit. Seed corpora are in
// testdata/fuzz/<target>/.

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// decodeRequest decodes body as the server does (strict: unknown and duplicate
// members refused); bodies the server would refuse are not the validators' concern.
func decodeRequest(body []byte, v any) bool {
	return json.Unmarshal(body, v, json.RejectUnknownMembers(true)) == nil
}

// requireRefusal asserts err is what a validator may answer: VALIDATION_FAILED,
// PAYLOAD_TOO_LARGE or INVALID_CURSOR, a 4xx of the contract's table, with a message
// and details.field; byte-size bounds carry details.limit.
func requireRefusal(t *testing.T, err error) {
	t.Helper()
	var re *runtime.Error
	require.ErrorAs(t, err, &re)
	require.Contains(t, []string{contract.CodeValidationFailed, contract.CodePayloadTooLarge, contract.CodeInvalidCursor}, re.Code, "%v", err)
	require.Equal(t, 4, contract.Codes[re.Code].Status/100)
	require.NotEmpty(t, re.Message)
	field, _ := re.Details["field"].(string)
	require.NotEmpty(t, field, "%v", err)
	if re.Code == contract.CodePayloadTooLarge {
		require.IsType(t, int64(0), re.Details["limit"], "%v", err)
	}
	if limit, ok := re.Details["limit"]; ok {
		require.Positive(t, limit.(int64))
	}
}

// fuzzBody fuzzes check with every body that decodes as a Req.
func fuzzBody[Req any](f *testing.F, check func(t *testing.T, req *Req)) {
	f.Fuzz(func(t *testing.T, body []byte) {
		var req Req
		if decodeRequest(body, &req) {
			check(t, &req)
		}
	})
}

// accepted reports whether a validator accepted the request; a refusal is checked
// with requireRefusal, and reached (the store calls made) must be 0 then: a refused
// request reaches no store.
func accepted(t *testing.T, err error, reached int) bool {
	t.Helper()
	if err == nil {
		return true
	}
	requireRefusal(t, err)
	require.Zero(t, reached, "a refused request reaches no store")
	return false
}

// requireID asserts an accepted ID follows the contract's ID rules (ValidateID is
// tested on its own in id_test.go).
func requireID(t *testing.T, field, id string) {
	t.Helper()
	require.NoError(t, runtime.ValidateID(field, id))
}

// requireStoredJSON asserts an accepted JSON member is absent or one compact JSON
// value of at most maxBytes.
func requireStoredJSON(t *testing.T, raw []byte, maxBytes int) {
	t.Helper()
	if raw == nil {
		return
	}
	require.True(t, jsontext.Value(raw).IsValid(), "%q", raw)
	compact := jsontext.Value(bytes.Clone(raw))
	require.NoError(t, compact.Compact())
	require.Equal(t, string(compact), string(raw), "stored JSON is compact")
	require.LessOrEqual(t, len(raw), maxBytes)
	require.NotEqual(t, "null", string(raw), "null is stored as absent")
}

// requireRoleFilter asserts an accepted roles filter is sorted, without repeats, and
// made of roles only.
func requireRoleFilter(t *testing.T, roles []string) {
	t.Helper()
	require.True(t, slices.IsSorted(roles), "%v", roles)
	require.Len(t, slices.Compact(slices.Clone(roles)), len(roles))
	for _, r := range roles {
		require.Contains(t, contract.Roles, r)
	}
}

func requireLimit(t *testing.T, got int, sent *int, def, maxLimit int) {
	t.Helper()
	require.GreaterOrEqual(t, got, 1)
	require.LessOrEqual(t, got, maxLimit)
	if sent == nil {
		require.Equal(t, def, got)
	} else {
		require.Equal(t, *sent, got)
	}
}

func FuzzAppendMessages(f *testing.F) {
	fuzzBody(f, func(t *testing.T, req *contract.AppendMessagesRequest) {
		b := setupConversations(t)
		res, err := b.conv.Append(context.Background(), b.scope, req)
		if !accepted(t, err, b.store.calls) {
			return
		}
		batch := b.store.appended
		require.Len(t, batch, len(req.Messages))
		require.GreaterOrEqual(t, len(batch), 1)
		require.LessOrEqual(t, len(batch), contract.MaxAppendMessages)
		require.Equal(t, len(batch), res.Appended)
		for i, m := range batch {
			sent := req.Messages[i]
			requireID(t, "id", m.ID)
			requireID(t, "conversationId", m.Scope.ConversationID)
			require.Equal(t, sent.ID, m.ID)
			require.Equal(t, sent.Scope.ConversationID, m.Scope.ConversationID)
			require.Contains(t, contract.Roles, m.Role)
			require.Equal(t, sent.Content, m.Content, "content is stored as sent")
			require.LessOrEqual(t, len(m.Content), contract.MaxMessageContentBytes)
			require.NotContains(t, m.Content, "\x00")
			require.True(t, utf8.ValidString(m.Content))
			require.GreaterOrEqual(t, m.Sequence, int64(0))
			require.LessOrEqual(t, m.Sequence, int64(runtime.MaxSequence))
			require.GreaterOrEqual(t, m.CreatedAtMs, int64(0))
			require.LessOrEqual(t, m.CreatedAtMs, int64(runtime.MaxSequence))
			requireStoredJSON(t, m.Metadata, contract.MaxMetadataBytes)
		}
	})
}

func FuzzRecentMessages(f *testing.F) {
	fuzzBody(f, func(t *testing.T, req *contract.RecentMessagesRequest) {
		b := setupConversations(t)
		if _, err := b.conv.Recent(context.Background(), b.scope, req); !accepted(t, err, b.store.calls) {
			return
		}
		q := b.store.list
		require.Equal(t, req.Scope.ConversationID, q.ConversationID)
		requireID(t, "conversationId", q.ConversationID)
		requireLimit(t, q.Limit, req.Limit, contract.DefaultMessagesLimit, contract.MaxMessagesLimit)
		requireRoleFilter(t, q.Roles)
		require.True(t, q.Descending, "recent reads newest first")
		require.Zero(t, q.After)
		require.Positive(t, q.MaxBytes)
	})
}

// FuzzPageMessages also checks the cursor round trip: the nextCursor of a page
// resumes, with the same request, right after the page's last message.
func FuzzPageMessages(f *testing.F) {
	fuzzBody(f, func(t *testing.T, req *contract.PageMessagesRequest) {
		b := setupConversations(t)
		b.store.listed = []contract.ConversationRecord{{ID: "m", Scope: req.Scope, Role: contract.RoleUser, Sequence: 41}}
		b.store.more = true
		page, err := b.conv.Page(context.Background(), b.scope, req)
		if !accepted(t, err, b.store.calls) {
			return
		}
		q := b.store.list
		require.Equal(t, req.Scope.ConversationID, q.ConversationID)
		requireID(t, "conversationId", q.ConversationID)
		requireLimit(t, q.Limit, req.Limit, contract.DefaultMessagesLimit, contract.MaxMessagesLimit)
		requireRoleFilter(t, q.Roles)
		require.Equal(t, req.Order == contract.OrderDesc, q.Descending)
		require.Contains(t, []string{"", contract.OrderAsc, contract.OrderDesc}, req.Order)
		require.GreaterOrEqual(t, q.After, int64(0))
		if req.Cursor == nil || *req.Cursor == "" {
			require.Zero(t, q.After)
		}
		require.NotNil(t, page.NextCursor)

		next := *req
		next.Cursor = page.NextCursor
		_, err = b.conv.Page(context.Background(), b.scope, &next)
		require.NoError(t, err)
		require.Equal(t, int64(41), b.store.list.After)
		// The cursor is bound to the request: another conversation refuses it.
		next.Scope.ConversationID += "x"
		_, err = b.conv.Page(context.Background(), b.scope, &next)
		if runtime.ValidateID("scope.conversationId", next.Scope.ConversationID) == nil {
			require.Equal(t, contract.CodeInvalidCursor, runtime.ErrorCode(err), "%v", err)
		}
	})
}

func FuzzSearchMessages(f *testing.F) {
	fuzzBody(f, func(t *testing.T, req *contract.SearchMessagesRequest) {
		b := setupConversations(t)
		if _, err := b.conv.Search(context.Background(), b.scope, req); !accepted(t, err, b.store.calls) {
			return
		}
		q := b.store.search
		require.Equal(t, req.Query, q.Text)
		require.NotEmpty(t, strings.TrimSpace(q.Text))
		require.LessOrEqual(t, len(q.Text), contract.MaxSearchQueryBytes)
		requireLimit(t, q.Limit, req.Limit, contract.DefaultSearchLimit, contract.MaxSearchLimit)
		requireRoleFilter(t, q.Roles)
		if req.Scope == nil {
			require.Empty(t, q.ConversationID)
		} else {
			requireID(t, "conversationId", q.ConversationID)
		}
	})
}

// FuzzCreateWindow checks the use case and the window it stores: at most 2,000 items
// with unique valid IDs and ordinals 0..n-1, each within 4 MiB and all within 16 MiB,
// evidence exactly on knowledge_evidence items, and a digest that depends on the
// request only.
func FuzzCreateWindow(f *testing.F) {
	fuzzBody(f, func(t *testing.T, req *contract.CreateWindowRequest) {
		uc, store, p := setupWindowUseCases()
		created, _, err := uc.CreateWindow(context.Background(), p, req)
		w, verr := runtime.ValidateWindow(req)
		if err != nil {
			requireRefusal(t, err)
			require.Zero(t, store.calls)
			require.Equal(t, runtime.ErrorCode(err), runtime.ErrorCode(verr), "the use case validates with ValidateWindow")
			return
		}
		require.NoError(t, verr)
		if req.ID != nil {
			require.Equal(t, *req.ID, w.ID)
			require.Equal(t, w.ID, created.ID)
		}
		requireID(t, "id", w.ID)
		requireID(t, "conversationId", w.Conversation.ConversationID)
		require.Contains(t, contract.Stages, w.Stage)
		require.GreaterOrEqual(t, w.TokenCount, int64(0))
		require.LessOrEqual(t, utf8.RuneCountInString(w.Purpose), contract.MaxPurposeChars)
		requireStoredJSON(t, w.Metadata, contract.MaxMetadataBytes)
		require.Len(t, w.Items, len(req.Items))
		require.LessOrEqual(t, len(w.Items), contract.MaxWindowItems)
		require.Equal(t, len(w.Items), w.ItemCount)
		ids := map[string]bool{}
		var total int64
		for i, item := range w.Items {
			requireID(t, "items.id", item.ID)
			require.False(t, ids[item.ID], "item IDs are unique")
			ids[item.ID] = true
			require.Equal(t, i, item.Ordinal)
			require.Contains(t, contract.ItemKinds, item.Kind)
			require.LessOrEqual(t, len(item.Content), contract.MaxWindowItemContentBytes)
			require.Equal(t, item.Kind == contract.ItemKindKnowledgeEvidence, item.KnowledgeEvidence != nil)
			if item.Role != nil {
				require.Contains(t, contract.Roles, *item.Role)
			}
			requireStoredJSON(t, item.Metadata, contract.MaxMetadataBytes)
			total += int64(len(item.Content))
		}
		require.LessOrEqual(t, total, int64(contract.MaxWindowContentBytes))
		require.Equal(t, total, w.ContentBytes)
		require.Len(t, w.ContentSHA256, 64)
		again, err := runtime.ValidateWindow(req)
		require.NoError(t, err)
		require.Equal(t, w.ContentSHA256, again.ContentSHA256)
		require.Equal(t, w.ContentSHA256, created.ContentSHA256)
	})
}

func FuzzCreateDerivation(f *testing.F) {
	fuzzBody(f, func(t *testing.T, req *contract.CreateDerivationRequest) {
		uc, store, p := setupWindowUseCases()
		d, _, err := uc.CreateDerivation(context.Background(), p, req)
		if !accepted(t, err, store.calls) {
			return
		}
		requireID(t, "id", d.ID)
		requireID(t, "sourceWindowId", d.SourceWindowID)
		requireID(t, "targetWindowId", d.TargetWindowID)
		require.NotEqual(t, d.SourceWindowID, d.TargetWindowID)
		require.Contains(t, contract.DerivationKinds, d.Kind)
		for _, n := range []*int64{d.InputTokenCount, d.OutputTokenCount, d.InputItemCount, d.OutputItemCount} {
			if n != nil {
				require.GreaterOrEqual(t, *n, int64(0))
			}
		}
		requireStoredJSON(t, d.Metadata, contract.MaxMetadataBytes)
	})
}

func FuzzSaveInvocation(f *testing.F) {
	fuzzBody(f, func(t *testing.T, req *contract.CreateModelInvocationRequest) {
		uc, store, p := setupWindowUseCases()
		inv, err := uc.SaveInvocation(context.Background(), p, req)
		if !accepted(t, err, store.calls) {
			return
		}
		requireID(t, "id", inv.ID)
		requireID(t, "conversationId", inv.Conversation.ConversationID)
		requireID(t, "requestWindowId", inv.RequestWindowID)
		requireID(t, "agentId", inv.AgentID)
		if req.AgentID == nil {
			require.Equal(t, p.Subject, inv.AgentID, "the caller is the default agent")
		}
		requireID(t, "provider", inv.Provider)
		requireID(t, "model", inv.Model)
		require.Contains(t, contract.InvocationStates, inv.State)
		for _, n := range []int64{inv.InputTokens, inv.OutputTokens, inv.CachedTokens, inv.StartedAtMs, inv.CompletedAtMs, inv.LatencyMs} {
			require.GreaterOrEqual(t, n, int64(0))
		}
		require.LessOrEqual(t, inv.CachedTokens, inv.InputTokens)
		require.Positive(t, inv.StartedAtMs, "a missing start time is the server's clock")
		require.Equal(t, inv.State == contract.InvocationFailed, inv.Error != nil)
		if inv.Error != nil {
			require.NotEmpty(t, inv.Error.Message)
			require.LessOrEqual(t, len(inv.Error.Message), contract.MaxInvocationErrorMsgBytes)
		}
		if inv.ResponseContent != nil {
			require.LessOrEqual(t, len(*inv.ResponseContent), contract.MaxResponseContentBytes)
		}
		requireStoredJSON(t, inv.Metadata, contract.MaxMetadataBytes)
	})
}

// FuzzWindowLookups covers the reads by ID: windows/get, windows/lineage (and its
// depth bound) and model-invocations/get, decoding the same body for each.
func FuzzWindowLookups(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		ctx := context.Background()
		var get contract.GetWindowRequest
		if decodeRequest(body, &get) {
			uc, store, p := setupWindowUseCases()
			if _, err := uc.GetWindow(ctx, p, &get); accepted(t, err, store.calls) {
				requireID(t, "windowId", get.WindowID)
			}
		}
		var lineage contract.LineageRequest
		if decodeRequest(body, &lineage) {
			uc, store, p := setupWindowUseCases()
			if _, err := uc.Lineage(ctx, p, &lineage); accepted(t, err, store.calls) {
				require.Equal(t, lineage.WindowID, store.lineage.id)
				requireID(t, "windowId", store.lineage.id)
				requireLimit(t, store.lineage.depth, lineage.MaxDepth, contract.DefaultLineageDepth, contract.MaxLineageDepth)
			}
		}
		var inv contract.GetModelInvocationRequest
		if decodeRequest(body, &inv) {
			uc, store, p := setupWindowUseCases()
			if _, err := uc.GetInvocation(ctx, p, &inv); accepted(t, err, store.calls) {
				requireID(t, "invocationId", inv.InvocationID)
			}
		}
	})
}

// FuzzDeleteConversation: an accepted deletion creates one pending operation whose
// request echo is exactly the conversation it deletes.
func FuzzDeleteConversation(f *testing.F) {
	fuzzBody(f, func(t *testing.T, req *contract.DeleteConversationRequest) {
		store := newStubOperations()
		res, _, err := newOps(store, 0).DeleteConversation(context.Background(), opScope, req)
		if !accepted(t, err, len(store.created)) {
			return
		}
		requireID(t, "conversationId", req.ConversationID)
		require.Len(t, store.created, 1)
		require.Equal(t, contract.OperationConversationDelete, res.Operation.Kind)
		require.Equal(t, contract.OperationPending, res.Operation.State)
		var echo contract.DeleteConversationRequest
		require.True(t, decodeRequest(res.Operation.Request, &echo), "%s", res.Operation.Request)
		require.Equal(t, *req, echo)
	})
}

// FuzzRetention: an accepted retention request has a policy with at least one bound,
// both within 0..2^53-1, a valid conversation when it names one, and its operation
// echoes it normalized.
func FuzzRetention(f *testing.F) {
	fuzzBody(f, func(t *testing.T, req *contract.RetentionRequest) {
		store := newStubOperations()
		res, err := newOps(store, 0).Retention(context.Background(), opScope, req)
		if !accepted(t, err, len(store.created)) {
			return
		}
		require.NotNil(t, req.Policy)
		require.True(t, req.Policy.MaxAgeMs != nil || req.Policy.KeepLastMessages != nil)
		for _, v := range []*int64{req.Policy.MaxAgeMs, req.Policy.KeepLastMessages} {
			if v != nil {
				require.GreaterOrEqual(t, *v, int64(0))
				require.LessOrEqual(t, *v, int64(runtime.MaxSequence))
			}
		}
		if req.ConversationID != nil {
			requireID(t, "conversationId", *req.ConversationID)
		}
		require.Len(t, store.created, 1)
		var echo contract.RetentionRequest
		require.True(t, decodeRequest(res.Operation.Request, &echo), "%s", res.Operation.Request)
		require.Equal(t, *req, echo)
	})
}

// FuzzCursorDecode: a cursor from the wire is INVALID_CURSOR (field cursor) or it is
// exactly the cursor Encode makes for the position it decodes to: no other spelling
// of a cursor is accepted, and no position outside 0..2^62.
func FuzzCursorDecode(f *testing.F) {
	codec := runtime.NewCursorCodec([]byte(strings.Repeat("k", 32)))
	binding := runtime.CursorBinding{Kind: "messages", Scope: runtime.Scope{TenantID: "t", ProjectID: "p"},
		ConversationID: "c", Order: contract.OrderAsc}
	f.Fuzz(func(t *testing.T, cursor string) {
		pos, err := codec.Decode(binding, cursor)
		if err != nil {
			requireRefusal(t, err)
			require.Equal(t, contract.CodeInvalidCursor, runtime.ErrorCode(err))
			return
		}
		require.GreaterOrEqual(t, pos, int64(0))
		require.LessOrEqual(t, pos, int64(1)<<62)
		require.Equal(t, codec.Encode(binding, pos), cursor)
	})
}

// FuzzCursorRoundTrip: any position round-trips under its binding, and the cursor is
// refused under any other binding.
func FuzzCursorRoundTrip(f *testing.F) {
	codec := runtime.NewCursorCodec([]byte(strings.Repeat("k", 32)))
	f.Fuzz(func(t *testing.T, position int64, tenant, conversation, order, role string) {
		if position < 0 || position > 1<<62 {
			return
		}
		b := runtime.CursorBinding{Kind: "messages", Scope: runtime.Scope{TenantID: tenant, ProjectID: "p"},
			ConversationID: conversation, Order: order, Roles: []string{role}}
		cursor := codec.Encode(b, position)
		require.Less(t, len(cursor), 128)
		got, err := codec.Decode(b, cursor)
		require.NoError(t, err)
		require.Equal(t, position, got)
		for _, other := range []runtime.CursorBinding{
			{Kind: b.Kind, Scope: runtime.Scope{TenantID: tenant + "x", ProjectID: "p"}, ConversationID: conversation, Order: order, Roles: b.Roles},
			{Kind: b.Kind, Scope: b.Scope, ConversationID: conversation + "x", Order: order, Roles: b.Roles},
			{Kind: b.Kind, Scope: b.Scope, ConversationID: conversation, Order: order + "x", Roles: b.Roles},
			{Kind: b.Kind, Scope: b.Scope, ConversationID: conversation, Order: order, Roles: []string{role + "x"}},
		} {
			_, err := codec.Decode(other, cursor)
			require.Equal(t, contract.CodeInvalidCursor, runtime.ErrorCode(err))
		}
	})
}

// stubKnowledge is one configured provider, "docs", the default, required unless a
// query says otherwise; it records what it is asked and finds nothing.
type stubKnowledge struct {
	calls   int
	queried runtime.KnowledgeQuery
	refs    []string
}

var stubDocs = runtime.KnowledgeProviderInfo{Name: "docs", DefaultRequirement: contract.RequirementRequired,
	ResourceResolution: true, MaxHits: contract.MaxKnowledgeTopK, Status: contract.ProviderUp}

func (s *stubKnowledge) Providers() []runtime.KnowledgeProviderInfo {
	return []runtime.KnowledgeProviderInfo{stubDocs}
}
func (s *stubKnowledge) Default() string { return stubDocs.Name }
func (s *stubKnowledge) Provider(name string) (runtime.KnowledgeProviderInfo, bool) {
	return stubDocs, name == stubDocs.Name
}

func (s *stubKnowledge) Query(_ context.Context, _ string, _ runtime.KnowledgeCredentials, q runtime.KnowledgeQuery) ([]contract.KnowledgeHit, error) {
	s.calls++
	s.queried = q
	return nil, nil
}

func (s *stubKnowledge) Resolve(_ context.Context, _ string, _ runtime.KnowledgeCredentials, refs []string) ([]contract.KnowledgeResource, error) {
	s.calls++
	s.refs = refs
	return nil, nil
}

// requireRef asserts an accepted provider reference: 1 to 2,048 characters.
func requireRef(t *testing.T, ref string) {
	t.Helper()
	require.NotEmpty(t, ref)
	require.LessOrEqual(t, utf8.RuneCountInString(ref), contract.MaxEvidenceRefChars)
}

// FuzzKnowledgeQuery: an accepted query reaches the provider (unless disabled) with
// the text as sent, non-blank and within 16 KiB, topK within 1..100 (default 10), a
// valid scopeRef and filters that are absent or one compact JSON object.
func FuzzKnowledgeQuery(f *testing.F) {
	fuzzBody(f, func(t *testing.T, req *contract.KnowledgeQueryRequest) {
		providers := &stubKnowledge{}
		res, err := runtime.NewKnowledge(providers).Query(context.Background(), runtime.Principal{}, req)
		if !accepted(t, err, providers.calls) {
			return
		}
		require.NotNil(t, res.Hits)
		if req.Requirement == contract.RequirementDisabled {
			require.Zero(t, providers.calls, "a disabled query calls no provider")
			return
		}
		require.Equal(t, 1, providers.calls)
		q := providers.queried
		require.Equal(t, req.Query, q.Text)
		require.NotEmpty(t, strings.TrimSpace(q.Text))
		require.LessOrEqual(t, len(q.Text), contract.MaxKnowledgeQueryBytes)
		requireLimit(t, q.TopK, req.TopK, contract.DefaultKnowledgeTopK, contract.MaxKnowledgeTopK)
		if q.ScopeRef != nil {
			requireRef(t, *q.ScopeRef)
		}
		requireStoredJSON(t, q.Filters, contract.MaxMetadataBytes)
		if q.Filters != nil {
			require.Equal(t, jsontext.KindBeginObject, jsontext.Value(q.Filters).Kind())
		}
	})
}

// FuzzResolveResources: an accepted request asks the provider for 1..100 distinct
// valid refs in request order, and answers every one of them, resolved or missing.
func FuzzResolveResources(f *testing.F) {
	fuzzBody(f, func(t *testing.T, req *contract.ResolveResourcesRequest) {
		providers := &stubKnowledge{}
		res, err := runtime.NewKnowledge(providers).Resolve(context.Background(), runtime.Principal{}, req)
		if !accepted(t, err, providers.calls) {
			return
		}
		require.GreaterOrEqual(t, len(providers.refs), 1)
		require.LessOrEqual(t, len(req.ResourceRefs), contract.MaxResourceRefs)
		seen := map[string]bool{}
		var first []string
		for _, ref := range req.ResourceRefs {
			requireRef(t, ref)
			if !seen[ref] {
				seen[ref] = true
				first = append(first, ref)
			}
		}
		require.Equal(t, first, providers.refs, "each ref once, in request order")
		require.Equal(t, first, res.Missing, "the stub resolves none: all are missing")
		require.Empty(t, res.Resources)
	})
}
