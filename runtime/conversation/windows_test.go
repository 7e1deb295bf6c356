package conversation_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/conversation"
	"github.com/agent-context/agent-context/runtime/runtimetest"
)

// stubWindowStore answers creates with created=true (or with the stored record set in
// the test, created=false) and counts calls: validation tests assert it was never
// reached.
type stubWindowStore struct {
	calls      int
	window     *contract.Window
	derivation *contract.Derivation
	invocation *contract.ModelInvocation
	lineage    struct {
		id    string
		depth int
	}
}

func (s *stubWindowStore) CreateWindow(_ context.Context, _ runtime.Scope, w *contract.Window) (contract.Window, bool, error) {
	s.calls++
	if s.window != nil {
		return *s.window, false, nil
	}
	return *w, true, nil
}

func (s *stubWindowStore) GetWindow(context.Context, runtime.Scope, string) (contract.Window, error) {
	s.calls++
	return contract.Window{}, nil
}

func (s *stubWindowStore) CreateDerivation(_ context.Context, _ runtime.Scope, d *contract.Derivation) (contract.Derivation, bool, error) {
	s.calls++
	if s.derivation != nil {
		return *s.derivation, false, nil
	}
	return *d, true, nil
}

func (s *stubWindowStore) Lineage(_ context.Context, _ runtime.Scope, id string, depth int) (contract.Lineage, error) {
	s.calls++
	s.lineage.id, s.lineage.depth = id, depth
	return contract.Lineage{}, nil
}

func (s *stubWindowStore) SaveInvocation(_ context.Context, _ runtime.Scope, inv *contract.ModelInvocation) (contract.ModelInvocation, bool, error) {
	s.calls++
	if s.invocation != nil {
		return *s.invocation, false, nil
	}
	return *inv, true, nil
}

func (s *stubWindowStore) GetInvocation(context.Context, runtime.Scope, string) (contract.ModelInvocation, error) {
	s.calls++
	return contract.ModelInvocation{}, nil
}

type winClock time.Time

func (c winClock) Now() time.Time { return time.Time(c) }

const winNowMs = 1_700_000_000_000

func setupWindowUseCases() (*conversation.Windows, *stubWindowStore, runtime.Principal) {
	windows, store, _, p := setupWindowUseCasesWithEvents()
	return windows, store, p
}

func setupWindowUseCasesWithEvents() (*conversation.Windows, *stubWindowStore, *runtimetest.Events, runtime.Principal) {
	store, events := &stubWindowStore{}, &runtimetest.Events{}
	p := runtime.Principal{Scope: runtime.Scope{TenantID: "t", ProjectID: "p"}, Subject: "agent-7"}
	db := runtimetest.DB[conversation.Stores]{S: conversation.Stores{Windows: store, Events: events}}
	return conversation.NewWindows(db, nil, winClock(time.UnixMilli(winNowMs))), store, events, p
}

func validWindow() *contract.CreateWindowRequest {
	return &contract.CreateWindowRequest{
		ID: runtimetest.Ptr("window-1"), Conversation: &contract.ConversationRef{ConversationID: "conversation-1"},
		Stage: contract.StageAssembled, Purpose: "chat_completion", TokenCount: runtimetest.Ptr(int64(320)),
		Items: []contract.WindowItemInput{
			{ID: "item-0", Ordinal: runtimetest.Ptr(0), Kind: contract.ItemKindMessage, Role: runtimetest.Ptr(contract.RoleUser), Content: runtimetest.Ptr("hello"), SourceRecordID: runtimetest.Ptr("message-1")},
			{ID: "item-1", Ordinal: runtimetest.Ptr(1), Kind: contract.ItemKindKnowledgeEvidence, Content: runtimetest.Ptr(""),
				KnowledgeEvidence: &contract.KnowledgeEvidence{Provider: "p", ResourceRef: "r", Excerpt: "x", Score: runtimetest.Ptr(0.8)}},
		},
	}
}

// requireWinError asserts the code, the HTTP status the code maps to, the field and,
// when limit is not 0, details.limit.
func requireWinError(t *testing.T, err error, status int, code, field string, limit int64) {
	t.Helper()
	require.Error(t, err)
	var re *runtime.Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, code, re.Code, "%v", err)
	require.Equal(t, status, contract.Codes[code].Status)
	require.Equal(t, field, re.Details["field"], "%v", err)
	if limit != 0 {
		require.Equal(t, limit, re.Details["limit"], "%v", err)
	}
}

type windowCase struct {
	name   string
	change func(r *contract.CreateWindowRequest)
	status int
	code   string
	field  string
	limit  int64
}

func invalidWindow(name, field string, change func(r *contract.CreateWindowRequest)) windowCase {
	return windowCase{name: name, change: change, status: 400, code: contract.CodeValidationFailed, field: field}
}

func TestCreateWindowValidation(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", contract.MaxIDChars+1)
	cases := []windowCase{
		invalidWindow("id too long", "id", func(r *contract.CreateWindowRequest) { r.ID = &long }),
		invalidWindow("id with space", "id", func(r *contract.CreateWindowRequest) { r.ID = runtimetest.Ptr("a b") }),
		invalidWindow("id empty string", "id", func(r *contract.CreateWindowRequest) { r.ID = runtimetest.Ptr("") }),
		invalidWindow("conversation missing", "conversation", func(r *contract.CreateWindowRequest) { r.Conversation = nil }),
		invalidWindow("conversationId empty", "conversation.conversationId", func(r *contract.CreateWindowRequest) { r.Conversation.ConversationID = "" }),
		invalidWindow("conversationId too long", "conversation.conversationId", func(r *contract.CreateWindowRequest) { r.Conversation.ConversationID = long }),
		invalidWindow("stage missing", "stage", func(r *contract.CreateWindowRequest) { r.Stage = "" }),
		invalidWindow("stage unknown", "stage", func(r *contract.CreateWindowRequest) { r.Stage = "final" }),
		invalidWindow("purpose empty", "purpose", func(r *contract.CreateWindowRequest) { r.Purpose = "" }),
		{name: "purpose 192 characters", status: 400, code: contract.CodeValidationFailed, field: "purpose", limit: 191,
			change: func(r *contract.CreateWindowRequest) { r.Purpose = strings.Repeat("é", 192) }},
		invalidWindow("purpose control character", "purpose", func(r *contract.CreateWindowRequest) { r.Purpose = "a\x00b" }),
		invalidWindow("tokenCount missing", "tokenCount", func(r *contract.CreateWindowRequest) { r.TokenCount = nil }),
		invalidWindow("tokenCount negative", "tokenCount", func(r *contract.CreateWindowRequest) { r.TokenCount = runtimetest.Ptr(int64(-1)) }),
		invalidWindow("items missing", "items", func(r *contract.CreateWindowRequest) { r.Items = nil }),
		{name: "2001 items", status: 400, code: contract.CodeValidationFailed, field: "items", limit: 2000,
			change: func(r *contract.CreateWindowRequest) { r.Items = winItems(2001, 1) }},
		invalidWindow("item id empty", "items[1].id", func(r *contract.CreateWindowRequest) { r.Items[1].ID = "" }),
		invalidWindow("item id too long", "items[1].id", func(r *contract.CreateWindowRequest) { r.Items[1].ID = long }),
		invalidWindow("item id repeated", "items[1].id", func(r *contract.CreateWindowRequest) { r.Items[1].ID = "item-0" }),
		invalidWindow("ordinal missing", "items[0].ordinal", func(r *contract.CreateWindowRequest) { r.Items[0].Ordinal = nil }),
		invalidWindow("ordinal gap", "items[1].ordinal", func(r *contract.CreateWindowRequest) { r.Items[1].Ordinal = runtimetest.Ptr(2) }),
		invalidWindow("ordinal repeated", "items[1].ordinal", func(r *contract.CreateWindowRequest) { r.Items[1].Ordinal = runtimetest.Ptr(0) }),
		invalidWindow("ordinals out of order", "items[0].ordinal", func(r *contract.CreateWindowRequest) {
			r.Items[0].Ordinal, r.Items[1].Ordinal = runtimetest.Ptr(1), runtimetest.Ptr(0)
		}),
		invalidWindow("ordinal negative", "items[0].ordinal", func(r *contract.CreateWindowRequest) { r.Items[0].Ordinal = runtimetest.Ptr(-1) }),
		invalidWindow("kind missing", "items[0].kind", func(r *contract.CreateWindowRequest) { r.Items[0].Kind = "" }),
		invalidWindow("kind unknown", "items[0].kind", func(r *contract.CreateWindowRequest) { r.Items[0].Kind = "image" }),
		invalidWindow("role unknown", "items[0].role", func(r *contract.CreateWindowRequest) { r.Items[0].Role = runtimetest.Ptr("developer") }),
		invalidWindow("role empty", "items[0].role", func(r *contract.CreateWindowRequest) { r.Items[0].Role = runtimetest.Ptr("") }),
		invalidWindow("content missing", "items[0].content", func(r *contract.CreateWindowRequest) { r.Items[0].Content = nil }),
		{name: "content over 4 MiB", status: 413, code: contract.CodePayloadTooLarge, field: "items[0].content", limit: 4 << 20,
			change: func(r *contract.CreateWindowRequest) {
				r.Items[0].Content = runtimetest.Ptr(strings.Repeat("a", 4<<20+1))
			}},
		{name: "total content over 16 MiB", status: 413, code: contract.CodePayloadTooLarge, field: "items", limit: 16 << 20,
			change: func(r *contract.CreateWindowRequest) { r.Items = winItems(5, 4<<20); *r.Items[4].Content = "a" }},
		invalidWindow("sourceRecordId empty", "items[0].sourceRecordId", func(r *contract.CreateWindowRequest) { r.Items[0].SourceRecordID = runtimetest.Ptr("") }),
		invalidWindow("sourceRecordId too long", "items[0].sourceRecordId", func(r *contract.CreateWindowRequest) { r.Items[0].SourceRecordID = runtimetest.Ptr(long) }),
		invalidWindow("evidence missing for knowledge_evidence", "items[1].knowledgeEvidence", func(r *contract.CreateWindowRequest) { r.Items[1].KnowledgeEvidence = nil }),
		invalidWindow("evidence on a message", "items[0].knowledgeEvidence", func(r *contract.CreateWindowRequest) {
			r.Items[0].KnowledgeEvidence = &contract.KnowledgeEvidence{Provider: "p", ResourceRef: "r"}
		}),
		invalidWindow("evidence provider empty", "items[1].knowledgeEvidence.provider", func(r *contract.CreateWindowRequest) { r.Items[1].KnowledgeEvidence.Provider = "" }),
		invalidWindow("evidence resourceRef empty", "items[1].knowledgeEvidence.resourceRef", func(r *contract.CreateWindowRequest) { r.Items[1].KnowledgeEvidence.ResourceRef = "" }),
		{name: "evidence resourceRef too long", status: 400, code: contract.CodeValidationFailed, field: "items[1].knowledgeEvidence.resourceRef", limit: 2048,
			change: func(r *contract.CreateWindowRequest) {
				r.Items[1].KnowledgeEvidence.ResourceRef = strings.Repeat("r", 2049)
			}},
		invalidWindow("evidence revisionRef empty", "items[1].knowledgeEvidence.revisionRef", func(r *contract.CreateWindowRequest) { r.Items[1].KnowledgeEvidence.RevisionRef = runtimetest.Ptr("") }),
		invalidWindow("evidence segmentRef empty", "items[1].knowledgeEvidence.segmentRef", func(r *contract.CreateWindowRequest) { r.Items[1].KnowledgeEvidence.SegmentRef = runtimetest.Ptr("") }),
		{name: "evidence excerpt over 64 KiB", status: 413, code: contract.CodePayloadTooLarge, field: "items[1].knowledgeEvidence.excerpt", limit: 64 << 10,
			change: func(r *contract.CreateWindowRequest) {
				r.Items[1].KnowledgeEvidence.Excerpt = strings.Repeat("e", 64<<10+1)
			}},
		invalidWindow("evidence retrievedAtMs negative", "items[1].knowledgeEvidence.retrievedAtMs", func(r *contract.CreateWindowRequest) { r.Items[1].KnowledgeEvidence.RetrievedAtMs = -1 }),
		{name: "metadata over 64 KiB", status: 413, code: contract.CodePayloadTooLarge, field: "metadata", limit: 64 << 10,
			change: func(r *contract.CreateWindowRequest) { r.Metadata = winBigJSON() }},
		invalidWindow("item metadata number beyond a double", "items[0].metadata", func(r *contract.CreateWindowRequest) {
			r.Items[0].Metadata = json.RawMessage(`{"a":[1,{"n":1e400}]}`)
		}),
		invalidWindow("metadata number beyond a double", "metadata", func(r *contract.CreateWindowRequest) { r.Metadata = json.RawMessage(`-1e309`) }),
		{name: "item metadata over 64 KiB", status: 413, code: contract.CodePayloadTooLarge, field: "items[1].metadata", limit: 64 << 10,
			change: func(r *contract.CreateWindowRequest) { r.Items[1].Metadata = winBigJSON() }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			windows, store, p := setupWindowUseCases()
			req := validWindow()
			tc.change(req)
			_, _, err := windows.CreateWindow(context.Background(), p, req)
			requireWinError(t, err, tc.status, tc.code, tc.field, tc.limit)
			require.Zero(t, store.calls)
		})
	}
}

// winItems returns n message items of size bytes each.
func winItems(n, size int) []contract.WindowItemInput {
	items := make([]contract.WindowItemInput, n)
	content := strings.Repeat("a", size)
	for i := range items {
		items[i] = contract.WindowItemInput{ID: fmt.Sprintf("item-%d", i), Ordinal: runtimetest.Ptr(i), Kind: contract.ItemKindMessage, Content: runtimetest.Ptr(content)}
	}
	return items
}

func winBigJSON() json.RawMessage {
	return json.RawMessage(`{"k":"` + strings.Repeat("m", 64<<10) + `"}`)
}

func TestCreateWindowAcceptsTheBounds(t *testing.T) {
	t.Parallel()
	windows, store, p := setupWindowUseCases()
	cases := map[string]func(r *contract.CreateWindowRequest){
		"2000 items":                func(r *contract.CreateWindowRequest) { r.Items = winItems(2000, 1) },
		"no items":                  func(r *contract.CreateWindowRequest) { r.Items = []contract.WindowItemInput{} },
		"exactly 16 MiB in 4 MiB":   func(r *contract.CreateWindowRequest) { r.Items = winItems(4, 4<<20) },
		"purpose of 191 characters": func(r *contract.CreateWindowRequest) { r.Purpose = strings.Repeat("é", 191) },
		"tokenCount 0":              func(r *contract.CreateWindowRequest) { r.TokenCount = runtimetest.Ptr(int64(0)) },
		"explicit null metadata":    func(r *contract.CreateWindowRequest) { r.Metadata = json.RawMessage("null") },
		"largest and tiniest double": func(r *contract.CreateWindowRequest) {
			r.Items[0].Metadata = json.RawMessage(`[1.7976931348623157e308, -1e-400, 123456789012345678901234567890]`)
		},
		"every role":                 func(r *contract.CreateWindowRequest) { r.Items[0].Role = runtimetest.Ptr(contract.RoleTool) },
		"evidence with all optional": func(r *contract.CreateWindowRequest) { r.Items[1].KnowledgeEvidence.RevisionRef = runtimetest.Ptr("v") },
	}
	for name, change := range cases {
		req := validWindow()
		change(req)
		w, created, err := windows.CreateWindow(context.Background(), p, req)
		require.NoError(t, err, name)
		require.True(t, created, name)
		require.Nil(t, w.Items, name)
		require.Equal(t, len(req.Items), w.ItemCount, name)
	}
	require.Equal(t, len(cases), store.calls)
}

func TestCreateWindowNormalizes(t *testing.T) {
	t.Parallel()
	windows, _, p := setupWindowUseCases()
	req := validWindow()
	req.ID = nil
	req.Metadata = json.RawMessage(" { \"a\" : [1, 2] } ")
	w, _, err := windows.CreateWindow(context.Background(), p, req)
	require.NoError(t, err)
	require.NoError(t, runtime.ValidateID("id", w.ID))
	require.Equal(t, `{"a":[1,2]}`, string(w.Metadata))
	require.EqualValues(t, winNowMs, w.CreatedAtMs)
	require.EqualValues(t, 5, w.ContentBytes)
	require.Len(t, w.ContentSHA256, 64)

	req.Metadata = json.RawMessage("null")
	w, _, err = windows.CreateWindow(context.Background(), p, req)
	require.NoError(t, err)
	require.Nil(t, w.Metadata)
}

func TestCreateWindowComparesWithTheStoredWindow(t *testing.T) {
	t.Parallel()
	windows, store, events, p := setupWindowUseCasesWithEvents()
	first, _, err := windows.CreateWindow(context.Background(), p, validWindow())
	require.NoError(t, err)
	first.CreatedAtMs = 42
	store.window = &first
	// A created window is announced, with IDs only, and its conversation recorded so
	// that deleting the conversation removes the event.
	require.Len(t, events.Appended, 1)
	e := events.Appended[0]
	require.Equal(t, contract.EventWindowCreated, e.Event.Kind)
	require.Equal(t, "agent-7", e.Event.Actor)
	require.Equal(t, "conversation-1", e.Event.CorrelationID)
	require.Equal(t, contract.ConsistencyLocal, e.Event.ConsistencyLevel)
	require.Empty(t, e.Event.TargetAgents)
	require.Equal(t, "conversation-1", e.ConversationID)
	require.JSONEq(t, `{"windowId":"window-1","conversationId":"conversation-1","stage":"assembled"}`, string(e.Event.Payload))

	again, created, err := windows.CreateWindow(context.Background(), p, validWindow())
	require.NoError(t, err)
	require.False(t, created)
	require.EqualValues(t, 42, again.CreatedAtMs)
	require.Len(t, events.Appended, 1, "an identical retry announces nothing")

	changed := validWindow()
	changed.Items[0].Content = runtimetest.Ptr("hello!")
	_, _, err = windows.CreateWindow(context.Background(), p, changed)
	require.Equal(t, contract.CodeIdempotencyConflict, runtime.ErrorCode(err))
	var re *runtime.Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, []string{"window-1"}, re.Details["ids"])
}

func TestGetWindowAndLineageValidation(t *testing.T) {
	t.Parallel()
	windows, store, p := setupWindowUseCases()
	ctx := context.Background()
	_, err := windows.GetWindow(ctx, p, &contract.GetWindowRequest{})
	requireWinError(t, err, 400, contract.CodeValidationFailed, "windowId", 0)
	_, err = windows.GetInvocation(ctx, p, &contract.GetModelInvocationRequest{InvocationID: "a b"})
	requireWinError(t, err, 400, contract.CodeValidationFailed, "invocationId", 0)
	_, err = windows.Lineage(ctx, p, &contract.LineageRequest{})
	requireWinError(t, err, 400, contract.CodeValidationFailed, "windowId", 0)
	for _, depth := range []int{0, -1, 257} {
		_, err = windows.Lineage(ctx, p, &contract.LineageRequest{WindowID: "w", MaxDepth: runtimetest.Ptr(depth)})
		requireWinError(t, err, 400, contract.CodeValidationFailed, "maxDepth", 256)
	}
	require.Zero(t, store.calls)

	_, err = windows.Lineage(ctx, p, &contract.LineageRequest{WindowID: "w"})
	require.NoError(t, err)
	require.Equal(t, 32, store.lineage.depth)
	for _, depth := range []int{1, 256} {
		_, err = windows.Lineage(ctx, p, &contract.LineageRequest{WindowID: "w", MaxDepth: runtimetest.Ptr(depth)})
		require.NoError(t, err)
		require.Equal(t, depth, store.lineage.depth)
	}
}

func validDerivation() *contract.CreateDerivationRequest {
	return &contract.CreateDerivationRequest{
		ID: runtimetest.Ptr("derivation-1"), SourceWindowID: "window-1", TargetWindowID: "window-2", Kind: contract.DerivationCompress,
		Strategy: runtimetest.Ptr("summarize-oldest"), StrategyVersion: runtimetest.Ptr("1"),
		InputTokenCount: runtimetest.Ptr(int64(9000)), OutputTokenCount: runtimetest.Ptr(int64(3000)),
		InputItemCount: runtimetest.Ptr(int64(40)), OutputItemCount: runtimetest.Ptr(int64(12)),
	}
}

func TestCreateDerivationValidation(t *testing.T) {
	t.Parallel()
	invalid := func(field string, change func(r *contract.CreateDerivationRequest)) struct {
		field  string
		change func(r *contract.CreateDerivationRequest)
	} {
		return struct {
			field  string
			change func(r *contract.CreateDerivationRequest)
		}{field, change}
	}
	cases := map[string]struct {
		field  string
		change func(r *contract.CreateDerivationRequest)
	}{
		"id invalid":       invalid("id", func(r *contract.CreateDerivationRequest) { r.ID = runtimetest.Ptr("a\tb") }),
		"id empty string":  invalid("id", func(r *contract.CreateDerivationRequest) { r.ID = runtimetest.Ptr("") }),
		"source missing":   invalid("sourceWindowId", func(r *contract.CreateDerivationRequest) { r.SourceWindowID = "" }),
		"target missing":   invalid("targetWindowId", func(r *contract.CreateDerivationRequest) { r.TargetWindowID = "" }),
		"source is target": invalid("targetWindowId", func(r *contract.CreateDerivationRequest) { r.TargetWindowID = r.SourceWindowID }),
		"kind missing":     invalid("kind", func(r *contract.CreateDerivationRequest) { r.Kind = "" }),
		"kind unknown":     invalid("kind", func(r *contract.CreateDerivationRequest) { r.Kind = "summarize" }),
		"strategy empty":   invalid("strategy", func(r *contract.CreateDerivationRequest) { r.Strategy = runtimetest.Ptr("") }),
		"strategyVersion too long": invalid("strategyVersion", func(r *contract.CreateDerivationRequest) {
			r.StrategyVersion = runtimetest.Ptr(strings.Repeat("v", 192))
		}),
		"inputTokenCount negative": invalid("inputTokenCount", func(r *contract.CreateDerivationRequest) { r.InputTokenCount = runtimetest.Ptr(int64(-1)) }),
		"outputItemCount negative": invalid("outputItemCount", func(r *contract.CreateDerivationRequest) { r.OutputItemCount = runtimetest.Ptr(int64(-1)) }),
	}
	for name, tc := range cases {
		windows, store, p := setupWindowUseCases()
		req := validDerivation()
		tc.change(req)
		_, _, err := windows.CreateDerivation(context.Background(), p, req)
		require.Error(t, err, name)
		requireWinError(t, err, 400, contract.CodeValidationFailed, tc.field, 0)
		require.Zero(t, store.calls, name)
	}
	windows, _, p := setupWindowUseCases()
	req := validDerivation()
	req.Metadata = winBigJSON()
	_, _, err := windows.CreateDerivation(context.Background(), p, req)
	requireWinError(t, err, 413, contract.CodePayloadTooLarge, "metadata", 64<<10)
}

func TestCreateDerivationIdempotency(t *testing.T) {
	t.Parallel()
	windows, store, p := setupWindowUseCases()
	ctx := context.Background()
	d, created, err := windows.CreateDerivation(ctx, p, validDerivation())
	require.NoError(t, err)
	require.True(t, created)
	require.EqualValues(t, winNowMs, d.CreatedAtMs)
	d.CreatedAtMs = 1
	store.derivation = &d

	again, created, err := windows.CreateDerivation(ctx, p, validDerivation())
	require.NoError(t, err)
	require.False(t, created)
	require.EqualValues(t, 1, again.CreatedAtMs)

	for name, change := range map[string]func(r *contract.CreateDerivationRequest){
		"kind":            func(r *contract.CreateDerivationRequest) { r.Kind = contract.DerivationTrim },
		"strategy absent": func(r *contract.CreateDerivationRequest) { r.Strategy = nil },
		"count":           func(r *contract.CreateDerivationRequest) { r.OutputItemCount = runtimetest.Ptr(int64(13)) },
		"target":          func(r *contract.CreateDerivationRequest) { r.TargetWindowID = "window-3" },
		"metadata":        func(r *contract.CreateDerivationRequest) { r.Metadata = json.RawMessage(`{}`) },
	} {
		req := validDerivation()
		change(req)
		_, _, err := windows.CreateDerivation(ctx, p, req)
		require.Equal(t, contract.CodeIdempotencyConflict, runtime.ErrorCode(err), name)
	}
}

func validInvocation() *contract.CreateModelInvocationRequest {
	return &contract.CreateModelInvocationRequest{
		ID: runtimetest.Ptr("invocation-1"), Conversation: &contract.ConversationRef{ConversationID: "conversation-1"},
		RequestWindowID: "window-2", Provider: "openai", Model: "gpt-4.1-mini", State: contract.InvocationSucceeded,
		InputTokens: 3000, OutputTokens: 250, CachedTokens: 1024, LatencyMs: 840,
		FinishReason: runtimetest.Ptr("stop"), ResponseContent: runtimetest.Ptr("..."),
	}
}

func TestSaveInvocationValidation(t *testing.T) {
	t.Parallel()
	type invocationCase struct {
		name   string
		change func(r *contract.CreateModelInvocationRequest)
		status int
		code   string
		field  string
		limit  int64
	}
	invalid := func(name, field string, change func(r *contract.CreateModelInvocationRequest)) invocationCase {
		return invocationCase{name, change, 400, contract.CodeValidationFailed, field, 0}
	}
	failed := func(r *contract.CreateModelInvocationRequest) {
		r.State = contract.InvocationFailed
		r.Error = &contract.InvocationError{Code: "upstream_error", Message: "boom"}
	}
	cases := []invocationCase{
		invalid("id invalid", "id", func(r *contract.CreateModelInvocationRequest) { r.ID = runtimetest.Ptr(strings.Repeat("i", 192)) }),
		invalid("id empty string", "id", func(r *contract.CreateModelInvocationRequest) { r.ID = runtimetest.Ptr("") }),
		invalid("conversation missing", "conversation", func(r *contract.CreateModelInvocationRequest) { r.Conversation = nil }),
		invalid("conversationId invalid", "conversation.conversationId", func(r *contract.CreateModelInvocationRequest) { r.Conversation.ConversationID = "" }),
		invalid("requestWindowId missing", "requestWindowId", func(r *contract.CreateModelInvocationRequest) { r.RequestWindowID = "" }),
		invalid("agentId invalid", "agentId", func(r *contract.CreateModelInvocationRequest) { r.AgentID = runtimetest.Ptr("a b") }),
		invalid("agentId empty string", "agentId", func(r *contract.CreateModelInvocationRequest) { r.AgentID = runtimetest.Ptr("") }),
		invalid("toolName empty", "toolName", func(r *contract.CreateModelInvocationRequest) { r.ToolName = runtimetest.Ptr("") }),
		invalid("provider missing", "provider", func(r *contract.CreateModelInvocationRequest) { r.Provider = "" }),
		invalid("model missing", "model", func(r *contract.CreateModelInvocationRequest) { r.Model = "" }),
		invalid("state missing", "state", func(r *contract.CreateModelInvocationRequest) { r.State = "" }),
		invalid("state unknown", "state", func(r *contract.CreateModelInvocationRequest) { r.State = "running" }),
		invalid("inputTokens negative", "inputTokens", func(r *contract.CreateModelInvocationRequest) { r.InputTokens = -1 }),
		invalid("outputTokens negative", "outputTokens", func(r *contract.CreateModelInvocationRequest) { r.OutputTokens = -1 }),
		invalid("cachedTokens negative", "cachedTokens", func(r *contract.CreateModelInvocationRequest) { r.CachedTokens = -1 }),
		invalid("cachedTokens above inputTokens", "cachedTokens", func(r *contract.CreateModelInvocationRequest) { r.CachedTokens = r.InputTokens + 1 }),
		invalid("startedAtMs negative", "startedAtMs", func(r *contract.CreateModelInvocationRequest) { r.StartedAtMs = -1 }),
		invalid("completedAtMs negative", "completedAtMs", func(r *contract.CreateModelInvocationRequest) { r.CompletedAtMs = -1 }),
		invalid("latencyMs negative", "latencyMs", func(r *contract.CreateModelInvocationRequest) { r.LatencyMs = -1 }),
		{"finishReason 65 characters", func(r *contract.CreateModelInvocationRequest) {
			r.FinishReason = runtimetest.Ptr(strings.Repeat("f", 65))
		},
			400, contract.CodeValidationFailed, "finishReason", 64},
		invalid("finishReason empty", "finishReason", func(r *contract.CreateModelInvocationRequest) { r.FinishReason = runtimetest.Ptr("") }),
		{"responseContent over 1 MiB", func(r *contract.CreateModelInvocationRequest) {
			r.ResponseContent = runtimetest.Ptr(strings.Repeat("r", 1<<20+1))
		},
			413, contract.CodePayloadTooLarge, "responseContent", 1 << 20},
		invalid("failed without error", "error", func(r *contract.CreateModelInvocationRequest) { r.State = contract.InvocationFailed }),
		invalid("error when succeeded", "error", func(r *contract.CreateModelInvocationRequest) {
			r.Error = &contract.InvocationError{Code: "x", Message: "y"}
		}),
		invalid("error when canceled", "error", func(r *contract.CreateModelInvocationRequest) {
			r.State = contract.InvocationCanceled
			r.Error = &contract.InvocationError{Code: "x", Message: "y"}
		}),
		invalid("error code empty", "error.code", func(r *contract.CreateModelInvocationRequest) { failed(r); r.Error.Code = "" }),
		invalid("error message empty", "error.message", func(r *contract.CreateModelInvocationRequest) { failed(r); r.Error.Message = "" }),
		{"metadata over 64 KiB", func(r *contract.CreateModelInvocationRequest) { r.Metadata = winBigJSON() },
			413, contract.CodePayloadTooLarge, "metadata", 64 << 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			windows, store, p := setupWindowUseCases()
			req := validInvocation()
			tc.change(req)
			_, err := windows.SaveInvocation(context.Background(), p, req)
			requireWinError(t, err, tc.status, tc.code, tc.field, tc.limit)
			require.Zero(t, store.calls)
		})
	}
}

func TestSaveInvocationDefaultsAndIdempotency(t *testing.T) {
	t.Parallel()
	windows, store, p := setupWindowUseCases()
	ctx := context.Background()
	req := validInvocation()
	req.ResponseContent = runtimetest.Ptr(strings.Repeat("r", 1<<20))
	req.FinishReason = runtimetest.Ptr(strings.Repeat("f", 64))
	saved, err := windows.SaveInvocation(ctx, p, req)
	require.NoError(t, err)
	require.Equal(t, "agent-7", saved.AgentID, "agentId defaults to the caller's subject")
	require.EqualValues(t, winNowMs, saved.StartedAtMs, "startedAtMs 0 is the server's clock")
	require.EqualValues(t, winNowMs, saved.CreatedAtMs)

	saved.StartedAtMs = 5
	store.invocation = &saved
	// startedAtMs left to the server matches any stored time; an explicit one must match.
	again, err := windows.SaveInvocation(ctx, p, req)
	require.NoError(t, err)
	require.Equal(t, saved, again)
	req.StartedAtMs = 5
	_, err = windows.SaveInvocation(ctx, p, req)
	require.NoError(t, err)
	req.StartedAtMs = 6
	_, err = windows.SaveInvocation(ctx, p, req)
	require.Equal(t, contract.CodeIdempotencyConflict, runtime.ErrorCode(err))

	other := *req
	other.StartedAtMs = 0
	other.AgentID = runtimetest.Ptr("someone-else")
	_, err = windows.SaveInvocation(ctx, p, &other)
	require.Equal(t, contract.CodeIdempotencyConflict, runtime.ErrorCode(err))
	other.AgentID = runtimetest.Ptr("agent-7")
	_, err = windows.SaveInvocation(ctx, p, &other)
	require.NoError(t, err, "the defaulted agentId, sent explicitly, is the same content")

	// agentId left to the server is a server-filled default: a retry by another caller
	// without agentId is the same content and returns the stored record.
	byOther := runtime.Principal{Scope: p.Scope, Subject: "agent-8"}
	other.AgentID = nil
	again, err = windows.SaveInvocation(ctx, byOther, &other)
	require.NoError(t, err)
	require.Equal(t, "agent-7", again.AgentID)
}

func (s *stubWindowStore) ListWindows(context.Context, runtime.Scope, string, runtime.PageQuery) ([]contract.Window, error) {
	s.calls++
	return nil, nil
}

func (s *stubWindowStore) WindowInvocations(context.Context, runtime.Scope, string, runtime.PageQuery) ([]contract.ModelInvocation, error) {
	return nil, nil
}

func (s *stubWindowStore) ListInvocations(context.Context, runtime.Scope, string, runtime.PageQuery) ([]contract.ModelInvocation, error) {
	s.calls++
	return nil, nil
}
