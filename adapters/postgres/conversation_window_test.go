package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/conversation"
)

// windowBundle is the window use cases over a real store on a fresh database.
type windowBundle struct {
	pool    *pgxpool.Pool
	store   conversation.WindowStore
	windows *conversation.Windows
	p       runtime.Principal
}

func setupWindows(tb testing.TB) *windowBundle {
	tb.Helper()
	pool := pgtest.NewDB(tb)
	db := newDB(tb, pool)
	return &windowBundle{
		pool:    pool,
		store:   db.Conversation().Stores().Windows,
		windows: conversation.NewWindows(db.Conversation(), runtime.NewCursorCodec([]byte("windows-test-cursor-key-32-bytes")), runtime.SystemClock{}),
		p:       windowPrincipal("tenant-a", "project-a", "agent-1"),
	}
}

func windowPrincipal(tenant, project, subject string) runtime.Principal {
	return runtime.Principal{Scope: runtime.Scope{TenantID: tenant, ProjectID: project}, Subject: subject}
}

func windowPtr[T any](v T) *T { return &v }

// windowRequest builds a create request with n items whose content comes from content;
// an empty id leaves the ID to the server.
func windowRequest(id, conversation, stage string, n int, content func(i int) string) *contract.CreateWindowRequest {
	items := make([]contract.WindowItemInput, n)
	for i := range items {
		items[i] = contract.WindowItemInput{
			ID: fmt.Sprintf("item-%d", i), Ordinal: windowPtr(i), Kind: contract.ItemKindMessage,
			Role: windowPtr(contract.RoleUser), Content: windowPtr(content(i)),
		}
	}
	var windowID *string
	if id != "" {
		windowID = &id
	}
	return &contract.CreateWindowRequest{
		ID: windowID, Conversation: &contract.ConversationRef{ConversationID: conversation},
		Stage: stage, Purpose: "chat_completion", TokenCount: windowPtr(int64(n * 10)), Items: items,
	}
}

// trickyContent cycles through content that must survive byte for byte.
func trickyContent(i int) string {
	samples := []string{
		"",
		"hello",
		"héllo wörld — 你好，世界 — こんにちは — 🙂👩‍💻",
		`{"json": "special", "chars": "\"\\/\b\f\n\r\t"}`,
		"nul\x00byte and \x1f unit separator and \u2028 line separator",
		"<script>&amp;</script>",
		strings.Repeat("long ", 200),
	}
	return fmt.Sprintf("%d:", i) + samples[i%len(samples)]
}

func requireWindowError(t *testing.T, err error, code, field string) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, code, runtime.ErrorCode(err), "%v", err)
	if field != "" {
		var re *runtime.Error
		require.ErrorAs(t, err, &re)
		require.Equal(t, field, re.Details["field"], "%v", err)
	}
}

func TestWindowStoreRoundTrip2000Items(t *testing.T) {
	t.Parallel()
	b := setupWindows(t)
	ctx := context.Background()
	req := windowRequest("window-1", "conversation-1", contract.StageAssembled, contract.MaxWindowItems, trickyContent)
	req.Items[3].SourceRecordID = windowPtr("message-3")
	req.Items[4].Metadata = []byte(`{"b": 1, "a": [true, null]}`)
	req.Items[5].Role = nil
	req.Metadata = []byte(`{"trace": "t-1"}`)

	created, isNew, err := b.windows.CreateWindow(ctx, b.p, req)
	require.NoError(t, err)
	require.True(t, isNew)
	require.Nil(t, created.Items)
	require.Equal(t, contract.MaxWindowItems, created.ItemCount)

	got, err := b.windows.GetWindow(ctx, b.p, &contract.GetWindowRequest{WindowID: "window-1"})
	require.NoError(t, err)
	require.Len(t, got.Items, contract.MaxWindowItems)
	var total int64
	for i, it := range got.Items {
		require.Equal(t, i, it.Ordinal)
		require.Equal(t, trickyContent(i), it.Content, "item %d", i)
		require.Equal(t, fmt.Sprintf("item-%d", i), it.ID)
		total += int64(len(it.Content))
	}
	require.Equal(t, "message-3", *got.Items[3].SourceRecordID)
	require.JSONEq(t, `{"b": 1, "a": [true, null]}`, string(got.Items[4].Metadata))
	require.Nil(t, got.Items[5].Role)
	require.Nil(t, got.Items[0].Metadata)
	require.JSONEq(t, `{"trace": "t-1"}`, string(got.Metadata))
	require.Equal(t, total, got.ContentBytes)
	require.Equal(t, created.ContentSHA256, got.ContentSHA256)
	require.Equal(t, created.CreatedAtMs, got.CreatedAtMs)

	// The stored items hash to the stored digest: nothing changed on the way.
	bytes, sum, err := runtime.WindowDigest(got.Items)
	require.NoError(t, err)
	require.Equal(t, got.ContentBytes, bytes)
	require.Equal(t, got.ContentSHA256, sum)
}

func TestWindowStoreIdempotentCreate(t *testing.T) {
	t.Parallel()
	b := setupWindows(t)
	ctx := context.Background()
	req := windowRequest("window-1", "conversation-1", contract.StageOriginal, 3, trickyContent)
	req.Metadata = []byte(`{"a": 1, "b": 2}`)
	first, created, err := b.windows.CreateWindow(ctx, b.p, req)
	require.NoError(t, err)
	require.True(t, created)

	// Member order and whitespace of metadata are not content.
	req.Metadata = []byte(`{"b":2,"a":1}`)
	again, created, err := b.windows.CreateWindow(ctx, b.p, req)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, first.CreatedAtMs, again.CreatedAtMs)
	require.Equal(t, first.ContentSHA256, again.ContentSHA256)

	changes := map[string]func(r *contract.CreateWindowRequest){
		"content":      func(r *contract.CreateWindowRequest) { r.Items[1].Content = windowPtr("changed") },
		"stage":        func(r *contract.CreateWindowRequest) { r.Stage = contract.StageCompressed },
		"purpose":      func(r *contract.CreateWindowRequest) { r.Purpose = "other" },
		"tokenCount":   func(r *contract.CreateWindowRequest) { r.TokenCount = windowPtr(int64(1)) },
		"conversation": func(r *contract.CreateWindowRequest) { r.Conversation.ConversationID = "conversation-2" },
		"metadata":     func(r *contract.CreateWindowRequest) { r.Metadata = []byte(`{"a": 2}`) },
		"item removed": func(r *contract.CreateWindowRequest) { r.Items = r.Items[:2] },
		"item role":    func(r *contract.CreateWindowRequest) { r.Items[0].Role = nil },
	}
	for name, change := range changes {
		r := windowRequest("window-1", "conversation-1", contract.StageOriginal, 3, trickyContent)
		r.Metadata = []byte(`{"a": 1, "b": 2}`)
		change(r)
		_, _, err := b.windows.CreateWindow(ctx, b.p, r)
		requireWindowError(t, err, contract.CodeIdempotencyConflict, "")
		var re *runtime.Error
		require.ErrorAs(t, err, &re, name)
		require.Equal(t, []string{"window-1"}, re.Details["ids"], name)
	}

	// Without an ID the server makes one, so two creates are two windows.
	r1, _, err := b.windows.CreateWindow(ctx, b.p, windowRequest("", "conversation-1", contract.StageOriginal, 1, trickyContent))
	require.NoError(t, err)
	r2, _, err := b.windows.CreateWindow(ctx, b.p, windowRequest("", "conversation-1", contract.StageOriginal, 1, trickyContent))
	require.NoError(t, err)
	require.NotEmpty(t, r1.ID)
	require.NotEqual(t, r1.ID, r2.ID)
}

// TestWindowStoreRetryWritesNothing retries a create naming another conversation: the
// 409 must not leave that conversation implicitly created, nor anything else.
func TestWindowStoreRetryWritesNothing(t *testing.T) {
	t.Parallel()
	b := setupWindows(t)
	ctx := context.Background()
	_, _, err := b.windows.CreateWindow(ctx, b.p, windowRequest("w1", "c1", contract.StageOriginal, 2, trickyContent))
	require.NoError(t, err)
	_, _, err = b.windows.CreateWindow(ctx, b.p, windowRequest("w1", "c-new", contract.StageOriginal, 2, trickyContent))
	requireWindowError(t, err, contract.CodeIdempotencyConflict, "")
	_, created, err := b.windows.CreateWindow(ctx, b.p, windowRequest("w1", "c1", contract.StageOriginal, 2, trickyContent))
	require.NoError(t, err)
	require.False(t, created)

	rows, err := b.pool.Query(ctx, `SELECT conversation_id FROM conversations ORDER BY conversation_id`)
	require.NoError(t, err)
	conversations, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"c1"}, conversations)
	var windows, items int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM context_windows), (SELECT count(*) FROM context_window_items)`).Scan(&windows, &items))
	require.Equal(t, [2]int{1, 2}, [2]int{windows, items})
}

func TestWindowStoreEmptyWindowAndEvidence(t *testing.T) {
	t.Parallel()
	b := setupWindows(t)
	ctx := context.Background()
	_, _, err := b.windows.CreateWindow(ctx, b.p, windowRequest("empty", "c", contract.StageOriginal, 0, trickyContent))
	require.NoError(t, err)
	got, err := b.windows.GetWindow(ctx, b.p, &contract.GetWindowRequest{WindowID: "empty"})
	require.NoError(t, err)
	require.NotNil(t, got.Items)
	require.Empty(t, got.Items)
	require.Equal(t, 0, got.ItemCount)

	evidence := &contract.KnowledgeEvidence{
		Provider: "enterprise-knowledge", ResourceRef: "space-1/page 7?rev=a&b=c", RevisionRef: windowPtr("rev-9"),
		Excerpt: "Deploys go through the release branch — 发布", Score: windowPtr(0.8125), RetrievedAtMs: 1700000000123,
	}
	req := windowRequest("evidence", "c", contract.StageAssembled, 2, trickyContent)
	req.Items[1].Kind = contract.ItemKindKnowledgeEvidence
	req.Items[1].Role = nil
	req.Items[1].KnowledgeEvidence = evidence
	_, _, err = b.windows.CreateWindow(ctx, b.p, req)
	require.NoError(t, err)
	got, err = b.windows.GetWindow(ctx, b.p, &contract.GetWindowRequest{WindowID: "evidence"})
	require.NoError(t, err)
	require.Nil(t, got.Items[0].KnowledgeEvidence)
	require.Equal(t, evidence, got.Items[1].KnowledgeEvidence)
	_, sum, err := runtime.WindowDigest(got.Items)
	require.NoError(t, err)
	require.Equal(t, got.ContentSHA256, sum)
}

// tombstoneWindowConversation marks a conversation deleted, as the delete route does first.
func tombstoneWindowConversation(t *testing.T, pool *pgxpool.Pool, scope runtime.Scope, conversation string) {
	t.Helper()
	tag, err := pool.Exec(context.Background(), `
		UPDATE conversations SET deleted_at_ms = 1
		WHERE tenant_id = $1 AND project_id = $2 AND conversation_id = $3`,
		scope.TenantID, scope.ProjectID, conversation)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())
}

func TestWindowStoreDeletedConversation(t *testing.T) {
	t.Parallel()
	b := setupWindows(t)
	ctx := context.Background()
	_, _, err := b.windows.CreateWindow(ctx, b.p, windowRequest("w1", "doomed", contract.StageOriginal, 2, trickyContent))
	require.NoError(t, err)
	_, _, err = b.windows.CreateWindow(ctx, b.p, windowRequest("w2", "doomed", contract.StageAssembled, 1, trickyContent))
	require.NoError(t, err)
	_, _, err = b.windows.CreateWindow(ctx, b.p, windowRequest("w3", "other", contract.StageCompressed, 1, trickyContent))
	require.NoError(t, err)
	_, _, err = b.windows.CreateDerivation(ctx, b.p, &contract.CreateDerivationRequest{ID: windowPtr("d1"), SourceWindowID: "w1", TargetWindowID: "w2", Kind: contract.DerivationAssemble})
	require.NoError(t, err)
	_, _, err = b.windows.CreateDerivation(ctx, b.p, &contract.CreateDerivationRequest{ID: windowPtr("d2"), SourceWindowID: "w2", TargetWindowID: "w3", Kind: contract.DerivationCompress})
	require.NoError(t, err)
	_, err = b.windows.SaveInvocation(ctx, b.p, invocationRequest("i1", "doomed", "w2"))
	require.NoError(t, err)

	tombstoneWindowConversation(t, b.pool, b.p.Scope, "doomed")

	_, err = b.windows.GetWindow(ctx, b.p, &contract.GetWindowRequest{WindowID: "w1"})
	requireWindowError(t, err, contract.CodeNotFound, "windowId")
	_, err = b.windows.Lineage(ctx, b.p, &contract.LineageRequest{WindowID: "w2"})
	requireWindowError(t, err, contract.CodeNotFound, "windowId")
	_, err = b.windows.GetInvocation(ctx, b.p, &contract.GetModelInvocationRequest{InvocationID: "i1"})
	requireWindowError(t, err, contract.CodeNotFound, "invocationId")
	// The lineage of a live window stops where a deleted conversation begins.
	l, err := b.windows.Lineage(ctx, b.p, &contract.LineageRequest{WindowID: "w3"})
	require.NoError(t, err)
	require.Len(t, l.Windows, 1)
	require.Empty(t, l.Derivations)

	_, _, err = b.windows.CreateWindow(ctx, b.p, windowRequest("w4", "doomed", contract.StageOriginal, 1, trickyContent))
	requireWindowError(t, err, contract.CodeConflict, "")
	var re *runtime.Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, "conversation_deleted", re.Details["reason"])
	_, err = b.windows.SaveInvocation(ctx, b.p, invocationRequest("i2", "doomed", "w2"))
	requireWindowError(t, err, contract.CodeConflict, "")
	_, _, err = b.windows.CreateDerivation(ctx, b.p, &contract.CreateDerivationRequest{SourceWindowID: "w3", TargetWindowID: "w1", Kind: contract.DerivationTrim})
	requireWindowError(t, err, contract.CodeNotFound, "targetWindowId")
}

func TestDerivationStoreRules(t *testing.T) {
	t.Parallel()
	b := setupWindows(t)
	ctx := context.Background()
	for _, id := range []string{"a", "b", "c"} {
		_, _, err := b.windows.CreateWindow(ctx, b.p, windowRequest(id, "conversation-1", contract.StageOriginal, 1, trickyContent))
		require.NoError(t, err)
	}
	req := &contract.CreateDerivationRequest{
		ID: windowPtr("ab"), SourceWindowID: "a", TargetWindowID: "b", Kind: contract.DerivationCompress,
		Strategy: windowPtr("summarize-oldest"), StrategyVersion: windowPtr("1"),
		InputTokenCount: windowPtr(int64(9000)), OutputTokenCount: windowPtr(int64(3000)), Metadata: []byte(`{"k": 1}`),
	}
	d, created, err := b.windows.CreateDerivation(ctx, b.p, req)
	require.NoError(t, err)
	require.True(t, created)
	require.NotZero(t, d.CreatedAtMs)

	again, created, err := b.windows.CreateDerivation(ctx, b.p, req)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, d, again)

	changed := *req
	changed.Kind = contract.DerivationTrim
	_, _, err = b.windows.CreateDerivation(ctx, b.p, &changed)
	requireWindowError(t, err, contract.CodeIdempotencyConflict, "")

	// Several derivations between the same two windows are allowed.
	second := *req
	second.ID = windowPtr("ab-2")
	_, created, err = b.windows.CreateDerivation(ctx, b.p, &second)
	require.NoError(t, err)
	require.True(t, created)

	_, _, err = b.windows.CreateDerivation(ctx, b.p, &contract.CreateDerivationRequest{SourceWindowID: "missing", TargetWindowID: "b", Kind: contract.DerivationTrim})
	requireWindowError(t, err, contract.CodeNotFound, "sourceWindowId")
	_, _, err = b.windows.CreateDerivation(ctx, b.p, &contract.CreateDerivationRequest{SourceWindowID: "a", TargetWindowID: "missing", Kind: contract.DerivationTrim})
	requireWindowError(t, err, contract.CodeNotFound, "targetWindowId")

	_, _, err = b.windows.CreateDerivation(ctx, b.p, &contract.CreateDerivationRequest{ID: windowPtr("bc"), SourceWindowID: "b", TargetWindowID: "c", Kind: contract.DerivationTrim})
	require.NoError(t, err)
	// c → a would close a → b → c → a.
	_, _, err = b.windows.CreateDerivation(ctx, b.p, &contract.CreateDerivationRequest{ID: windowPtr("ca"), SourceWindowID: "c", TargetWindowID: "a", Kind: contract.DerivationReorder})
	requireWindowError(t, err, contract.CodeConflict, "")
	// b → a too (a direct back edge).
	_, _, err = b.windows.CreateDerivation(ctx, b.p, &contract.CreateDerivationRequest{ID: windowPtr("ba"), SourceWindowID: "b", TargetWindowID: "a", Kind: contract.DerivationReorder})
	requireWindowError(t, err, contract.CodeConflict, "")
	// A shortcut a → c is no cycle.
	_, _, err = b.windows.CreateDerivation(ctx, b.p, &contract.CreateDerivationRequest{ID: windowPtr("ac"), SourceWindowID: "a", TargetWindowID: "c", Kind: contract.DerivationAssemble})
	require.NoError(t, err)
}

// TestDerivationConcurrentCycle races pairs of creates a → b and b → a: each alone is
// fine, together they would close a cycle, so exactly one of each pair may succeed.
func TestDerivationConcurrentCycle(t *testing.T) {
	t.Parallel()
	b := setupWindows(t)
	ctx := context.Background()
	const pairs = 20
	for i := range pairs {
		for _, side := range []string{"x", "y"} {
			_, _, err := b.windows.CreateWindow(ctx, b.p, windowRequest(fmt.Sprintf("%s%d", side, i), "c", contract.StageOriginal, 1, trickyContent))
			require.NoError(t, err)
		}
	}
	errs := make([][2]error, pairs)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range pairs {
		x, y := fmt.Sprintf("x%d", i), fmt.Sprintf("y%d", i)
		for k, edge := range [2][2]string{{x, y}, {y, x}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, _, errs[i][k] = b.windows.CreateDerivation(ctx, b.p, &contract.CreateDerivationRequest{
					SourceWindowID: edge[0], TargetWindowID: edge[1], Kind: contract.DerivationAssemble,
				})
			}()
		}
	}
	close(start)
	wg.Wait()
	for i, pair := range errs {
		ok := 0
		for _, err := range pair {
			if err == nil {
				ok++
			} else {
				require.Equal(t, contract.CodeConflict, runtime.ErrorCode(err), "pair %d: %v", i, err)
			}
		}
		require.Equal(t, 1, ok, "pair %d: exactly one direction may win", i)
	}
	var edges int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM window_derivations`).Scan(&edges))
	require.Equal(t, pairs, edges)
}

func TestLineageStore(t *testing.T) {
	t.Parallel()
	b := setupWindows(t)
	ctx := context.Background()
	for _, w := range [][2]string{{"original", contract.StageOriginal}, {"assembled", contract.StageAssembled}, {"compressed", contract.StageCompressed}, {"unrelated", contract.StageOriginal}} {
		_, _, err := b.windows.CreateWindow(ctx, b.p, windowRequest(w[0], "c", w[1], 2, trickyContent))
		require.NoError(t, err)
	}
	for _, d := range [][3]string{{"d1", "original", "assembled"}, {"d2", "assembled", "compressed"}} {
		_, _, err := b.windows.CreateDerivation(ctx, b.p, &contract.CreateDerivationRequest{ID: windowPtr(d[0]), SourceWindowID: d[1], TargetWindowID: d[2], Kind: contract.DerivationAssemble})
		require.NoError(t, err)
	}
	l, err := b.windows.Lineage(ctx, b.p, &contract.LineageRequest{WindowID: "compressed"})
	require.NoError(t, err)
	require.Equal(t, []string{"compressed", "assembled", "original"}, lineageIDs(l))
	require.Equal(t, []string{"d2", "d1"}, derivationIDs(l))
	require.Equal(t, 2, l.Windows[0].ItemCount)
	require.Equal(t, contract.StageCompressed, l.Windows[0].Stage)

	l, err = b.windows.Lineage(ctx, b.p, &contract.LineageRequest{WindowID: "compressed", MaxDepth: windowPtr(1)})
	require.NoError(t, err)
	require.Equal(t, []string{"compressed", "assembled"}, lineageIDs(l))
	require.Equal(t, []string{"d2"}, derivationIDs(l))

	l, err = b.windows.Lineage(ctx, b.p, &contract.LineageRequest{WindowID: "original"})
	require.NoError(t, err)
	require.Equal(t, []string{"original"}, lineageIDs(l))
	require.Empty(t, l.Derivations)

	_, err = b.windows.Lineage(ctx, b.p, &contract.LineageRequest{WindowID: "missing"})
	requireWindowError(t, err, contract.CodeNotFound, "windowId")
}

// TestLineageDeepChain walks the longest lineage the contract allows.
func TestLineageDeepChain(t *testing.T) {
	t.Parallel()
	b := setupWindows(t)
	ctx := context.Background()
	const n = contract.MaxLineageDepth + 5
	for i := range n {
		_, _, err := b.windows.CreateWindow(ctx, b.p, windowRequest(fmt.Sprintf("w%03d", i), "c", contract.StageCompressed, 0, trickyContent))
		require.NoError(t, err)
		if i > 0 {
			_, _, err = b.windows.CreateDerivation(ctx, b.p, &contract.CreateDerivationRequest{SourceWindowID: fmt.Sprintf("w%03d", i-1), TargetWindowID: fmt.Sprintf("w%03d", i), Kind: contract.DerivationCompress})
			require.NoError(t, err)
		}
	}
	l, err := b.windows.Lineage(ctx, b.p, &contract.LineageRequest{WindowID: fmt.Sprintf("w%03d", n-1), MaxDepth: windowPtr(contract.MaxLineageDepth)})
	require.NoError(t, err)
	require.Len(t, l.Windows, contract.MaxLineageDepth+1)
	require.Len(t, l.Derivations, contract.MaxLineageDepth)
	require.Equal(t, fmt.Sprintf("w%03d", n-1-contract.MaxLineageDepth), l.Windows[len(l.Windows)-1].ID)
}

func lineageIDs(l contract.Lineage) []string {
	var ids []string
	for _, w := range l.Windows {
		ids = append(ids, w.ID)
	}
	return ids
}

func derivationIDs(l contract.Lineage) []string {
	var ids []string
	for _, d := range l.Derivations {
		ids = append(ids, d.ID)
	}
	return ids
}

func invocationRequest(id, conversation, window string) *contract.CreateModelInvocationRequest {
	return &contract.CreateModelInvocationRequest{
		ID: &id, Conversation: &contract.ConversationRef{ConversationID: conversation}, RequestWindowID: window,
		Provider: "openai", Model: "gpt-4.1-mini", State: contract.InvocationSucceeded,
		InputTokens: 3000, OutputTokens: 250, CachedTokens: 1024, LatencyMs: 840,
		FinishReason: windowPtr("stop"), ResponseContent: windowPtr("answer\x00with NUL — ✓"),
	}
}

func TestInvocationStore(t *testing.T) {
	t.Parallel()
	b := setupWindows(t)
	ctx := context.Background()
	_, _, err := b.windows.CreateWindow(ctx, b.p, windowRequest("w1", "c1", contract.StageAssembled, 1, trickyContent))
	require.NoError(t, err)
	_, _, err = b.windows.CreateWindow(ctx, b.p, windowRequest("w2", "c2", contract.StageAssembled, 1, trickyContent))
	require.NoError(t, err)

	req := invocationRequest("i1", "c1", "w1")
	saved, err := b.windows.SaveInvocation(ctx, b.p, req)
	require.NoError(t, err)
	require.Equal(t, "agent-1", saved.AgentID)
	require.NotZero(t, saved.StartedAtMs)
	got, err := b.windows.GetInvocation(ctx, b.p, &contract.GetModelInvocationRequest{InvocationID: "i1"})
	require.NoError(t, err)
	require.Equal(t, saved, got)

	// An identical retry (startedAtMs still left to the server) returns the stored record.
	again, err := b.windows.SaveInvocation(ctx, b.p, invocationRequest("i1", "c1", "w1"))
	require.NoError(t, err)
	require.Equal(t, saved, again)
	explicit := invocationRequest("i1", "c1", "w1")
	explicit.StartedAtMs = saved.StartedAtMs
	_, err = b.windows.SaveInvocation(ctx, b.p, explicit)
	require.NoError(t, err)

	different := invocationRequest("i1", "c1", "w1")
	different.OutputTokens = 251
	_, err = b.windows.SaveInvocation(ctx, b.p, different)
	requireWindowError(t, err, contract.CodeIdempotencyConflict, "")

	failed := invocationRequest("i2", "c1", "w1")
	failed.State = contract.InvocationFailed
	failed.Error = &contract.InvocationError{Code: "rate_limited", Message: "slow down"}
	failed.ResponseContent = nil
	failed.ToolName = windowPtr("web_search")
	failed.AgentID = windowPtr("planner")
	failed.Metadata = []byte(`{"attempt": 2}`)
	saved, err = b.windows.SaveInvocation(ctx, b.p, failed)
	require.NoError(t, err)
	got, err = b.windows.GetInvocation(ctx, b.p, &contract.GetModelInvocationRequest{InvocationID: "i2"})
	require.NoError(t, err)
	require.Equal(t, saved, got)
	require.Equal(t, "planner", got.AgentID)
	require.Nil(t, got.ResponseContent)

	_, err = b.windows.SaveInvocation(ctx, b.p, invocationRequest("i3", "c1", "missing"))
	requireWindowError(t, err, contract.CodeNotFound, "requestWindowId")
	_, err = b.windows.SaveInvocation(ctx, b.p, invocationRequest("i3", "c1", "w2"))
	requireWindowError(t, err, contract.CodeConflict, "requestWindowId")
	_, err = b.windows.GetInvocation(ctx, b.p, &contract.GetModelInvocationRequest{InvocationID: "i3"})
	requireWindowError(t, err, contract.CodeNotFound, "invocationId")
}

// TestWindowInvocations lists the invocations that sent a window, the latest started
// first, a page at a time, in the caller's scope only.
func TestWindowInvocations(t *testing.T) {
	t.Parallel()
	b := setupWindows(t)
	ctx := context.Background()
	other := windowPrincipal("tenant-b", "project-a", "agent-1")
	for _, p := range []runtime.Principal{b.p, other} {
		for _, w := range []string{"w1", "w2"} {
			_, _, err := b.windows.CreateWindow(ctx, p, windowRequest(w, "c1", contract.StageAssembled, 1, trickyContent))
			require.NoError(t, err)
		}
	}
	for i := range 5 {
		req := invocationRequest(fmt.Sprintf("i%d", i), "c1", "w1")
		if i == 2 {
			req.RequestWindowID = "w2"
		}
		req.StartedAtMs = int64(1000 + i)
		req.CompletedAtMs = int64(2000 + i)
		_, err := b.windows.SaveInvocation(ctx, b.p, req)
		require.NoError(t, err)
	}
	_, err := b.windows.SaveInvocation(ctx, other, invocationRequest("i9", "c1", "w1"))
	require.NoError(t, err)
	ids := func(l *contract.InvocationList) []string {
		var out []string
		for _, m := range l.Invocations {
			out = append(out, m.ID)
		}
		return out
	}
	limit := 2
	page, err := b.windows.WindowInvocations(ctx, b.p, "w1", nil, &limit)
	require.NoError(t, err)
	require.Equal(t, []string{"i4", "i3"}, ids(page))
	require.NotNil(t, page.NextCursor)
	page, err = b.windows.WindowInvocations(ctx, b.p, "w1", page.NextCursor, &limit)
	require.NoError(t, err)
	require.Equal(t, []string{"i1", "i0"}, ids(page))
	require.Nil(t, page.NextCursor)
	page, err = b.windows.WindowInvocations(ctx, b.p, "w2", nil, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"i2"}, ids(page))
	page, err = b.windows.WindowInvocations(ctx, other, "w1", nil, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"i9"}, ids(page))
	// A cursor of one window's list does not page another's.
	first, err := b.windows.WindowInvocations(ctx, b.p, "w1", nil, &limit)
	require.NoError(t, err)
	_, err = b.windows.WindowInvocations(ctx, b.p, "w2", first.NextCursor, &limit)
	requireWindowError(t, err, contract.CodeInvalidCursor, "")
}

// TestWindowStoreScopes writes the same IDs in two scopes: neither sees the other's.
func TestWindowStoreScopes(t *testing.T) {
	t.Parallel()
	b := setupWindows(t)
	ctx := context.Background()
	other := windowPrincipal("tenant-b", "project-a", "agent-1")
	sameTenant := windowPrincipal("tenant-a", "project-b", "agent-1")
	_, _, err := b.windows.CreateWindow(ctx, b.p, windowRequest("w1", "c", contract.StageOriginal, 2, trickyContent))
	require.NoError(t, err)
	_, _, err = b.windows.CreateWindow(ctx, b.p, windowRequest("w2", "c", contract.StageAssembled, 1, trickyContent))
	require.NoError(t, err)
	_, _, err = b.windows.CreateDerivation(ctx, b.p, &contract.CreateDerivationRequest{ID: windowPtr("d"), SourceWindowID: "w1", TargetWindowID: "w2", Kind: contract.DerivationAssemble})
	require.NoError(t, err)
	_, err = b.windows.SaveInvocation(ctx, b.p, invocationRequest("i", "c", "w2"))
	require.NoError(t, err)

	for _, q := range []runtime.Principal{other, sameTenant} {
		_, err = b.windows.GetWindow(ctx, q, &contract.GetWindowRequest{WindowID: "w1"})
		requireWindowError(t, err, contract.CodeNotFound, "windowId")
		_, err = b.windows.Lineage(ctx, q, &contract.LineageRequest{WindowID: "w2"})
		requireWindowError(t, err, contract.CodeNotFound, "windowId")
		_, err = b.windows.GetInvocation(ctx, q, &contract.GetModelInvocationRequest{InvocationID: "i"})
		requireWindowError(t, err, contract.CodeNotFound, "invocationId")
		_, _, err = b.windows.CreateDerivation(ctx, q, &contract.CreateDerivationRequest{SourceWindowID: "w1", TargetWindowID: "w2", Kind: contract.DerivationAssemble})
		requireWindowError(t, err, contract.CodeNotFound, "sourceWindowId")
		_, err = b.windows.SaveInvocation(ctx, q, invocationRequest("i", "c", "w2"))
		requireWindowError(t, err, contract.CodeNotFound, "requestWindowId")
	}
	// The other scope may use the same IDs for different content.
	_, created, err := b.windows.CreateWindow(ctx, other, windowRequest("w1", "c", contract.StageCompressed, 5, trickyContent))
	require.NoError(t, err)
	require.True(t, created)
	got, err := b.windows.GetWindow(ctx, b.p, &contract.GetWindowRequest{WindowID: "w1"})
	require.NoError(t, err)
	require.Equal(t, contract.StageOriginal, got.Stage)
	require.Len(t, got.Items, 2)
}

// TestWindowStoreOneStatementPerWindow checks the write and read paths do not grow with
// the item count: a 2,000-item create is one header insert plus one COPY, and a get is
// one statement, whatever the number of items.
func TestWindowStoreOneStatementPerWindow(t *testing.T) {
	t.Parallel()
	b := setupWindows(t)
	ctx := context.Background()
	counter := &windowStatementCounter{}
	cfg := b.pool.Config()
	cfg.ConnConfig.Tracer = counter
	// One connection, opened before counting: its setup queries are not the store's.
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, pool.Ping(ctx))
	windows := conversation.NewWindows(newDB(t, pool).Conversation(), nil, runtime.SystemClock{})

	counts := map[int][2]int{}
	for _, n := range []int{1, contract.MaxWindowItems} {
		counter.reset()
		_, _, err := windows.CreateWindow(ctx, b.p, windowRequest(fmt.Sprintf("w%d", n), "c", contract.StageOriginal, n, trickyContent))
		require.NoError(t, err)
		writes := counter.get()
		counter.reset()
		_, err = windows.GetWindow(ctx, b.p, &contract.GetWindowRequest{WindowID: fmt.Sprintf("w%d", n)})
		require.NoError(t, err)
		counts[n] = [2]int{writes, counter.get()}
	}
	require.Equal(t, counts[1], counts[contract.MaxWindowItems])
	require.Equal(t, 1, counts[1][1], "a get is one statement")
}

// windowStatementCounter counts the statements and COPYs a pool sends.
type windowStatementCounter struct {
	mu sync.Mutex
	n  int
}

func (c *windowStatementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return ctx
}

func (c *windowStatementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *windowStatementCounter) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return ctx
}

func (c *windowStatementCounter) TraceCopyFromEnd(context.Context, *pgx.Conn, pgx.TraceCopyFromEndData) {
}

func (c *windowStatementCounter) reset() {
	c.mu.Lock()
	c.n = 0
	c.mu.Unlock()
}

func (c *windowStatementCounter) get() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}
