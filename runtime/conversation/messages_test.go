package conversation_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/conversation"
	"github.com/agent-context/agent-context/runtime/runtimetest"
)

// stubMessages records what the use cases ask of the store and answers with fixed
// results; validation tests assert it was never reached.
type stubMessages struct {
	appended []contract.ConversationRecord
	nowMs    int64
	list     conversation.MessageQuery
	listed   []contract.ConversationRecord
	more     bool
	search   conversation.SearchQuery
	hits     []contract.SearchHit
	calls    int
}

func (s *stubMessages) AppendMessages(_ context.Context, _ runtime.Scope, batch []contract.ConversationRecord, _ conversation.AppendPlanner, nowMs int64) (conversation.AppendResult, error) {
	s.calls++
	s.appended, s.nowMs = batch, nowMs
	return conversation.AppendResult{Appended: len(batch)}, nil
}

func (s *stubMessages) ListMessages(_ context.Context, _ runtime.Scope, q conversation.MessageQuery) ([]contract.ConversationRecord, bool, error) {
	s.calls++
	s.list = q
	return s.listed, s.more, nil
}

func (s *stubMessages) SearchMessages(_ context.Context, _ runtime.Scope, q conversation.SearchQuery) ([]contract.SearchHit, error) {
	s.calls++
	s.search = q
	return s.hits, nil
}

type convBundle struct {
	store *stubMessages
	conv  *conversation.Messages
	scope runtime.Scope
}

func setupConversations(t *testing.T) *convBundle {
	t.Helper()
	store := &stubMessages{}
	codec := runtime.NewCursorCodec([]byte(strings.Repeat("k", 32)))
	return &convBundle{
		store: store,
		conv:  conversation.NewMessages(store, codec, runtimetest.FixedClock(time.UnixMilli(1_700_000_000_000))),
		scope: runtime.Scope{TenantID: "t", ProjectID: "p"},
	}
}

func record(conversation, id string) contract.ConversationRecord {
	return contract.ConversationRecord{
		ID: id, Scope: contract.ConversationScope{ConversationID: conversation}, Role: contract.RoleUser, Content: "hello",
	}
}

func intp(v int) *int { return &v }

func TestAppendValidation(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", contract.MaxIDChars+1)
	for name, tc := range map[string]struct {
		mutate  func(r *contract.ConversationRecord)
		code    string
		details map[string]any
	}{
		"missing id":            {func(r *contract.ConversationRecord) { r.ID = "" }, contract.CodeValidationFailed, map[string]any{"field": "messages[1].id"}},
		"id with space":         {func(r *contract.ConversationRecord) { r.ID = "a b" }, contract.CodeValidationFailed, map[string]any{"field": "messages[1].id"}},
		"id too long":           {func(r *contract.ConversationRecord) { r.ID = long }, contract.CodeValidationFailed, map[string]any{"field": "messages[1].id", "limit": int64(contract.MaxIDChars)}},
		"missing conversation":  {func(r *contract.ConversationRecord) { r.Scope.ConversationID = "" }, contract.CodeValidationFailed, map[string]any{"field": "messages[1].scope.conversationId"}},
		"conversation with tab": {func(r *contract.ConversationRecord) { r.Scope.ConversationID = "a\tb" }, contract.CodeValidationFailed, map[string]any{"field": "messages[1].scope.conversationId"}},
		"missing role":          {func(r *contract.ConversationRecord) { r.Role = "" }, contract.CodeValidationFailed, map[string]any{"field": "messages[1].role"}},
		"unknown role":          {func(r *contract.ConversationRecord) { r.Role = "User" }, contract.CodeValidationFailed, map[string]any{"field": "messages[1].role"}},
		"content over 1 MiB": {func(r *contract.ConversationRecord) {
			r.Content = strings.Repeat("a", contract.MaxMessageContentBytes+1)
		},
			contract.CodePayloadTooLarge, map[string]any{"field": "messages[1].content", "limit": int64(contract.MaxMessageContentBytes)}},
		"content with NUL":   {func(r *contract.ConversationRecord) { r.Content = "a\x00b" }, contract.CodeValidationFailed, map[string]any{"field": "messages[1].content"}},
		"negative sequence":  {func(r *contract.ConversationRecord) { r.Sequence = -1 }, contract.CodeValidationFailed, map[string]any{"field": "messages[1].sequence"}},
		"sequence too large": {func(r *contract.ConversationRecord) { r.Sequence = runtime.MaxSequence + 1 }, contract.CodeValidationFailed, map[string]any{"field": "messages[1].sequence", "limit": int64(runtime.MaxSequence)}},
		"negative time":      {func(r *contract.ConversationRecord) { r.CreatedAtMs = -5 }, contract.CodeValidationFailed, map[string]any{"field": "messages[1].createdAtMs"}},
		"metadata over 64 KiB": {func(r *contract.ConversationRecord) {
			r.Metadata = json.RawMessage(`"` + strings.Repeat("m", contract.MaxMetadataBytes-1) + `"`)
		}, contract.CodePayloadTooLarge, map[string]any{"field": "messages[1].metadata", "limit": int64(contract.MaxMetadataBytes)}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setupConversations(t)
			bad := record("c", "m2")
			tc.mutate(&bad)
			_, err := b.conv.Append(context.Background(), b.scope, &contract.AppendMessagesRequest{
				Messages: []contract.ConversationRecord{record("c", "m1"), bad},
			})
			runtimetest.RequireError(t, err, tc.code, tc.details)
			require.Zero(t, b.store.calls)
		})
	}
}

func TestAppendBatchSize(t *testing.T) {
	t.Parallel()
	b := setupConversations(t)
	_, err := b.conv.Append(context.Background(), b.scope, &contract.AppendMessagesRequest{})
	runtimetest.RequireError(t, err, contract.CodeValidationFailed, map[string]any{"field": "messages"})

	batch := make([]contract.ConversationRecord, contract.MaxAppendMessages+1)
	for i := range batch {
		batch[i] = record("c", "m"+strconv.Itoa(i))
	}
	_, err = b.conv.Append(context.Background(), b.scope, &contract.AppendMessagesRequest{Messages: batch})
	runtimetest.RequireError(t, err, contract.CodeValidationFailed, map[string]any{"field": "messages", "limit": int64(500)})
	require.Zero(t, b.store.calls)

	res, err := b.conv.Append(context.Background(), b.scope, &contract.AppendMessagesRequest{Messages: batch[:500]})
	require.NoError(t, err)
	require.Equal(t, 500, res.Appended)
	require.Equal(t, []string{}, res.SkippedIDs)
}

func TestAppendNormalizesRecords(t *testing.T) {
	t.Parallel()
	b := setupConversations(t)
	withMeta := record("c", "m1")
	withMeta.Metadata = json.RawMessage(" { \"b\" : [1, 2], \"a\": null } ")
	withNull := record("c", "m2")
	withNull.Metadata = json.RawMessage("null")
	full := record("c", "m3")
	full.Content = strings.Repeat("a", contract.MaxMessageContentBytes)
	full.Sequence, full.CreatedAtMs = 7, 42
	_, err := b.conv.Append(context.Background(), b.scope, &contract.AppendMessagesRequest{
		Messages: []contract.ConversationRecord{withMeta, withNull, full},
	})
	require.NoError(t, err)
	require.Equal(t, int64(1_700_000_000_000), b.store.nowMs)
	require.Equal(t, `{"b":[1,2],"a":null}`, string(b.store.appended[0].Metadata))
	require.Nil(t, b.store.appended[1].Metadata)
	require.Equal(t, contract.ConversationRecord{Scope: contract.ConversationScope{ConversationID: "c"}, ID: "m3", Role: contract.RoleUser, Content: full.Content, Sequence: 7, CreatedAtMs: 42}, b.store.appended[2])
}

func digestOf(m contract.ConversationRecord) conversation.MessageDigest {
	return conversation.MessageDigest{
		ConversationID: m.Scope.ConversationID, ID: m.ID, Role: m.Role, Sequence: m.Sequence, CreatedAtMs: m.CreatedAtMs,
		ContentSHA256: sha256.Sum256([]byte(m.Content)), Metadata: m.Metadata,
	}
}

func msg(conversation, id, content string) contract.ConversationRecord {
	return contract.ConversationRecord{Scope: contract.ConversationScope{ConversationID: conversation}, ID: id, Role: contract.RoleUser, Content: content}
}

func TestPlanAppendAssignsSequencesInBatchOrder(t *testing.T) {
	t.Parallel()
	given := msg("a", "a3", "x")
	given.Sequence = 10
	dated := msg("b", "b1", "x")
	dated.CreatedAtMs = 5
	plan, err := conversation.PlanAppend(
		[]contract.ConversationRecord{msg("a", "a1", "x"), msg("b", "b0", "x"), given, msg("a", "a4", "x"), dated},
		map[string]int64{"a": 3, "b": 0}, nil, 99)
	require.NoError(t, err)
	var got []int64
	for _, m := range plan.Insert {
		got = append(got, m.Sequence)
	}
	require.Equal(t, []int64{4, 1, 10, 11, 2}, got)
	require.Equal(t, map[string]int64{"a": 11, "b": 2}, plan.LastSequence)
	require.Equal(t, int64(99), plan.Insert[0].CreatedAtMs)
	require.Equal(t, int64(5), plan.Insert[4].CreatedAtMs)
	require.Empty(t, plan.SkippedIDs)
}

func TestPlanAppendSkipsIdenticalRetries(t *testing.T) {
	t.Parallel()
	stored := msg("a", "m1", "hello")
	stored.Sequence, stored.CreatedAtMs, stored.Metadata = 4, 1000, []byte(`{"x":1.0,"y":"z"}`)
	// The retry leaves sequence and time to the server, spells the metadata differently,
	// and repeats itself within the batch.
	retry := stored
	retry.Sequence, retry.CreatedAtMs, retry.Metadata = 0, 0, []byte(`{"y":"z","x":1}`)
	exact := stored
	plan, err := conversation.PlanAppend([]contract.ConversationRecord{retry, exact, msg("a", "m2", "new"), msg("a", "m2", "new")},
		map[string]int64{"a": 4}, []conversation.MessageDigest{digestOf(stored)}, 2000)
	require.NoError(t, err)
	require.Equal(t, []string{"m1", "m1", "m2"}, plan.SkippedIDs)
	require.Len(t, plan.Insert, 1)
	require.Equal(t, int64(5), plan.Insert[0].Sequence)
}

func TestPlanAppendIdempotencyConflicts(t *testing.T) {
	t.Parallel()
	stored := msg("a", "m1", "hello")
	stored.Sequence, stored.CreatedAtMs = 4, 1000
	for name, change := range map[string]func(m *contract.ConversationRecord){
		"content":   func(m *contract.ConversationRecord) { m.Content = "hullo" },
		"role":      func(m *contract.ConversationRecord) { m.Role = contract.RoleAssistant },
		"metadata":  func(m *contract.ConversationRecord) { m.Metadata = []byte(`{}`) },
		"sequence":  func(m *contract.ConversationRecord) { m.Sequence = 5 },
		"createdAt": func(m *contract.ConversationRecord) { m.CreatedAtMs = 1001 },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			other := stored
			change(&other)
			_, err := conversation.PlanAppend([]contract.ConversationRecord{msg("a", "m0", "fine"), other},
				map[string]int64{"a": 4}, []conversation.MessageDigest{digestOf(stored)}, 2000)
			runtimetest.RequireError(t, err, contract.CodeIdempotencyConflict, map[string]any{"ids": []string{"m1"}})
		})
	}
	t.Run("within the batch", func(t *testing.T) {
		t.Parallel()
		_, err := conversation.PlanAppend([]contract.ConversationRecord{msg("a", "m9", "one"), msg("b", "m9", "two"), msg("a", "m9", "three")},
			map[string]int64{}, nil, 2000)
		runtimetest.RequireError(t, err, contract.CodeIdempotencyConflict, map[string]any{"ids": []string{"m9"}})
	})
	t.Run("within the batch against the server's time", func(t *testing.T) {
		t.Parallel()
		dated := msg("a", "m9", "one")
		dated.CreatedAtMs = 1
		_, err := conversation.PlanAppend([]contract.ConversationRecord{msg("a", "m9", "one"), dated}, map[string]int64{}, nil, 2000)
		runtimetest.RequireError(t, err, contract.CodeIdempotencyConflict, map[string]any{"ids": []string{"m9"}})
	})
}

func TestPlanAppendSequenceConflicts(t *testing.T) {
	t.Parallel()
	at := func(id string, seq int64) contract.ConversationRecord {
		m := msg("a", id, "x")
		m.Sequence = seq
		return m
	}
	for name, batch := range map[string][]contract.ConversationRecord{
		"equal to the last":          {at("m1", 3)},
		"below the last":             {at("m1", 1)},
		"below an earlier record":    {at("m1", 8), at("m2", 6)},
		"equal to an assigned one":   {msg("a", "m1", "x"), at("m2", 4)},
		"repeated within the batch":  {at("m1", 9), at("m2", 9)},
		"after valid ones (nothing)": {at("m0", 20), msg("a", "mx", "x"), at("m1", 21)},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := conversation.PlanAppend(batch, map[string]int64{"a": 3}, nil, 1)
			runtimetest.RequireError(t, err, contract.CodeConflict, map[string]any{"reason": "sequence_conflict"})
		})
	}
	plan, err := conversation.PlanAppend([]contract.ConversationRecord{at("m1", 4), at("m2", 9)}, map[string]int64{"a": 3}, nil, 1)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"a": 9}, plan.LastSequence)
}

func TestRecentAndPageValidation(t *testing.T) {
	t.Parallel()
	b := setupConversations(t)
	ctx := context.Background()
	scope := contract.ConversationScope{ConversationID: "c"}
	for name, tc := range map[string]struct {
		recent *contract.RecentMessagesRequest
		page   *contract.PageMessagesRequest
		field  string
		limit  any
	}{
		"recent without conversation": {recent: &contract.RecentMessagesRequest{}, field: "scope.conversationId"},
		"recent limit 0":              {recent: &contract.RecentMessagesRequest{Scope: scope, Limit: intp(0)}, field: "limit", limit: int64(500)},
		"recent limit 501":            {recent: &contract.RecentMessagesRequest{Scope: scope, Limit: intp(501)}, field: "limit", limit: int64(500)},
		"recent unknown role":         {recent: &contract.RecentMessagesRequest{Scope: scope, Roles: []string{"user", "robot"}}, field: "roles[1]"},
		"page without conversation":   {page: &contract.PageMessagesRequest{}, field: "scope.conversationId"},
		"page limit -1":               {page: &contract.PageMessagesRequest{Scope: scope, Limit: intp(-1)}, field: "limit", limit: int64(500)},
		"page limit 501":              {page: &contract.PageMessagesRequest{Scope: scope, Limit: intp(501)}, field: "limit", limit: int64(500)},
		"page bad order":              {page: &contract.PageMessagesRequest{Scope: scope, Order: "newest"}, field: "order"},
		"page unknown role":           {page: &contract.PageMessagesRequest{Scope: scope, Roles: []string{"ghost"}}, field: "roles[0]"},
	} {
		var err error
		if tc.recent != nil {
			_, err = b.conv.Recent(ctx, b.scope, tc.recent)
		} else {
			_, err = b.conv.Page(ctx, b.scope, tc.page)
		}
		details := map[string]any{"field": tc.field}
		if tc.limit != nil {
			details["limit"] = tc.limit
		}
		runtimetest.RequireError(t, err, contract.CodeValidationFailed, details)
		require.Zero(t, b.store.calls, name)
	}
}

func TestRecentReturnsOldestFirst(t *testing.T) {
	t.Parallel()
	b := setupConversations(t)
	b.store.listed = []contract.ConversationRecord{msg("c", "m3", "x"), msg("c", "m2", "x"), msg("c", "m1", "x")}
	res, err := b.conv.Recent(context.Background(), b.scope, &contract.RecentMessagesRequest{
		Scope: contract.ConversationScope{ConversationID: "c"}, Roles: []string{"user", "assistant", "user"},
	})
	require.NoError(t, err)
	require.Equal(t, conversation.MessageQuery{
		ConversationID: "c", Roles: []string{"assistant", "user"}, Descending: true, Limit: 50,
		MaxBytes: contract.MaxMessagesResponseBytes,
	}, b.store.list)
	var ids []string
	for _, m := range res.Messages {
		ids = append(ids, m.ID)
	}
	require.Equal(t, []string{"m1", "m2", "m3"}, ids)
}

func TestPageCursorRoundTrip(t *testing.T) {
	t.Parallel()
	b := setupConversations(t)
	ctx := context.Background()
	last := msg("c", "m7", "x")
	last.Sequence = 7
	b.store.listed, b.store.more = []contract.ConversationRecord{last}, true
	req := &contract.PageMessagesRequest{Scope: contract.ConversationScope{ConversationID: "c"}, Order: "desc", Limit: intp(1)}
	page, err := b.conv.Page(ctx, b.scope, req)
	require.NoError(t, err)
	require.NotNil(t, page.NextCursor)
	require.Equal(t, conversation.MessageQuery{ConversationID: "c", Descending: true, Limit: 1, MaxBytes: contract.MaxMessagesResponseBytes}, b.store.list)

	b.store.more = false
	req.Cursor = page.NextCursor
	page, err = b.conv.Page(ctx, b.scope, req)
	require.NoError(t, err)
	require.Nil(t, page.NextCursor)
	require.Equal(t, int64(7), b.store.list.After)

	// The cursor belongs to the desc listing of c in scope t/p, and nothing else.
	calls := b.store.calls
	for name, other := range map[string]struct {
		scope runtime.Scope
		req   contract.PageMessagesRequest
	}{
		"asc":                {b.scope, contract.PageMessagesRequest{Scope: req.Scope, Order: "asc"}},
		"default order":      {b.scope, contract.PageMessagesRequest{Scope: req.Scope}},
		"roles":              {b.scope, contract.PageMessagesRequest{Scope: req.Scope, Order: "desc", Roles: []string{"user"}}},
		"conversation":       {b.scope, contract.PageMessagesRequest{Scope: contract.ConversationScope{ConversationID: "d"}, Order: "desc"}},
		"tenant":             {runtime.Scope{TenantID: "u", ProjectID: "p"}, contract.PageMessagesRequest{Scope: req.Scope, Order: "desc"}},
		"project":            {runtime.Scope{TenantID: "t", ProjectID: "q"}, contract.PageMessagesRequest{Scope: req.Scope, Order: "desc"}},
		"tenant and project": {runtime.Scope{TenantID: "tp", ProjectID: ""}, contract.PageMessagesRequest{Scope: req.Scope, Order: "desc"}},
	} {
		other.req.Cursor = req.Cursor
		_, err := b.conv.Page(ctx, other.scope, &other.req)
		runtimetest.RequireError(t, err, contract.CodeInvalidCursor, map[string]any{"field": "cursor"})
		require.Equal(t, calls, b.store.calls, name)
	}
}

func TestSearchValidation(t *testing.T) {
	t.Parallel()
	b := setupConversations(t)
	ctx := context.Background()
	for name, tc := range map[string]struct {
		req     contract.SearchMessagesRequest
		code    string
		details map[string]any
	}{
		"empty query":       {contract.SearchMessagesRequest{}, contract.CodeValidationFailed, map[string]any{"field": "query"}},
		"blank query":       {contract.SearchMessagesRequest{Query: " \t\n"}, contract.CodeValidationFailed, map[string]any{"field": "query"}},
		"query over 4 KiB":  {contract.SearchMessagesRequest{Query: strings.Repeat("q", 4097)}, contract.CodePayloadTooLarge, map[string]any{"field": "query", "limit": int64(4096)}},
		"limit 0":           {contract.SearchMessagesRequest{Query: "q", Limit: intp(0)}, contract.CodeValidationFailed, map[string]any{"field": "limit", "limit": int64(100)}},
		"limit 101":         {contract.SearchMessagesRequest{Query: "q", Limit: intp(101)}, contract.CodeValidationFailed, map[string]any{"field": "limit", "limit": int64(100)}},
		"scope without id":  {contract.SearchMessagesRequest{Query: "q", Scope: &contract.ConversationScope{}}, contract.CodeValidationFailed, map[string]any{"field": "scope.conversationId"}},
		"unknown role":      {contract.SearchMessagesRequest{Query: "q", Roles: []string{"admin"}}, contract.CodeValidationFailed, map[string]any{"field": "roles[0]"}},
		"1-byte over bound": {contract.SearchMessagesRequest{Query: strings.Repeat("é", 2048) + "x"}, contract.CodePayloadTooLarge, map[string]any{"field": "query"}},
	} {
		_, err := b.conv.Search(ctx, b.scope, &tc.req)
		runtimetest.RequireError(t, err, tc.code, tc.details)
		require.Zero(t, b.store.calls, name)
	}

	_, err := b.conv.Search(ctx, b.scope, &contract.SearchMessagesRequest{Query: strings.Repeat("q", 4096), Limit: intp(100)})
	require.NoError(t, err)
	require.Equal(t, conversation.SearchQuery{Text: strings.Repeat("q", 4096), Limit: 100, MaxBytes: contract.MaxMessagesResponseBytes}, b.store.search)
	_, err = b.conv.Search(ctx, b.scope, &contract.SearchMessagesRequest{Query: "q", Scope: &contract.ConversationScope{ConversationID: "c"}})
	require.NoError(t, err)
	require.Equal(t, conversation.SearchQuery{Text: "q", ConversationID: "c", Limit: 20, MaxBytes: contract.MaxMessagesResponseBytes}, b.store.search)
}

func (s *stubMessages) ListConversations(context.Context, runtime.Scope, string, runtime.PageQuery) ([]contract.ConversationSummary, error) {
	s.calls++
	return nil, nil
}
