package memory_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/memory"
	"github.com/agent-context/agent-context/runtime/runtimetest"
)

// stubRecall answers both halves with fixed hits.
type stubRecall struct {
	vector, text []memory.RecallHit
	queries      []memory.VectorRecall
}

func (s *stubRecall) VectorSearch(_ context.Context, _ runtime.Scope, q memory.VectorRecall) ([]memory.RecallHit, error) {
	s.queries = append(s.queries, q)
	return s.vector, nil
}

func (s *stubRecall) TextSearch(context.Context, runtime.Scope, memory.TextRecall) ([]memory.RecallHit, error) {
	return s.text, nil
}

// stubProjection reports a fixed status; the projection's other methods are not
// called by recall.
type stubProjection struct {
	memory.ProjectionStore
	status memory.ProjectionStatus
}

func (s stubProjection) Status(context.Context, runtime.Scope) (memory.ProjectionStatus, error) {
	return s.status, nil
}

// unitEmbedder embeds every text as the first axis; err, when set, is its failure.
type unitEmbedder struct {
	model memory.EmbeddingModel
	err   error
	out   [][]float32
}

func (e unitEmbedder) Model() memory.EmbeddingModel { return e.model }

func (e unitEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	if e.err != nil {
		return nil, e.err
	}
	if e.out != nil {
		return e.out, nil
	}
	out := make([][]float32, len(texts))
	for i := range out {
		out[i] = make([]float32, e.model.Dimensions)
		out[i][0] = 1
	}
	return out, nil
}

type oneEmbedder struct{ e memory.Embedder }

func (s oneEmbedder) Configured() memory.Embedder                { return s.e }
func (s oneEmbedder) Named(string) (memory.Embedder, error)      { return s.e, nil }
func (s oneEmbedder) ForModel(id string) (memory.Embedder, bool) { return s.e, id == s.e.Model().ID }

var testModel = memory.EmbeddingModel{ID: "m", Dimensions: 3}

func hit(id string, created int64, score float64) memory.RecallHit {
	return memory.RecallHit{Entry: contract.ContextEntry{ID: id, CreatedAtMs: created}, Score: score, Coverage: 1}
}

func resultIDs(results []contract.RecallResult) []string {
	ids := []string{}
	for _, x := range results {
		ids = append(ids, x.Entry.ID)
	}
	return ids
}

func newRecall(t *testing.T, store *stubRecall, emb memory.Embedder, opts ...memory.RecallOption) *memory.Recall {
	t.Helper()
	db := runtimetest.DB[memory.Stores]{S: memory.Stores{
		Projection: stubProjection{status: memory.ProjectionStatus{Generation: memory.Generation{Number: 3, Model: testModel}, Pending: 2, IndexedThroughMs: 9}}}}
	embedders := oneEmbedder{emb}
	projection := memory.NewProjection(memory.ProjectionConfig{DB: db, Embedders: embedders})
	return memory.NewRecall(store, projection, embedders, nil, opts...)
}

// hungEmbedder stands for a provider that accepts and never answers: each call waits
// for its context, as an HTTP client does, and counts.
type hungEmbedder struct{ calls *atomic.Int64 }

func (e hungEmbedder) Model() memory.EmbeddingModel { return testModel }

func (e hungEmbedder) Embed(ctx context.Context, _ []string) ([][]float32, error) {
	e.calls.Add(1)
	<-ctx.Done()
	return nil, memory.EmbeddingUnavailable(ctx.Err())
}

// A hung provider costs a recall its query budget, not the embedder's own timeouts;
// after CircuitFailures such failures recalls stop calling it; a recall whose caller
// went away is not held against the provider.
func TestRecallQueryBudget(t *testing.T) {
	t.Parallel()
	store := &stubRecall{text: []memory.RecallHit{hit("t", 1, 0.2)}}
	calls := new(atomic.Int64)
	r := newRecall(t, store, hungEmbedder{calls: calls},
		memory.WithQueryBudget(memory.QueryBudget{Timeout: 20 * time.Millisecond, CircuitFailures: 3, CircuitOpen: time.Hour}))

	// The caller leaving does not count: the circuit stays closed.
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for range 5 {
		_, _ = r.Recall(gone, runtime.Principal{}, &contract.RecallRequest{Query: "q"})
	}
	require.EqualValues(t, 5, calls.Load())

	for i := range 3 {
		res, err := r.Recall(context.Background(), runtime.Principal{}, &contract.RecallRequest{Query: "q"})
		require.NoError(t, err)
		require.True(t, res.Degraded, i)
		require.Equal(t, contract.DegradationEmbeddingUnavailable, *res.DegradationReason)
		require.Len(t, res.Results, 1)
	}
	require.EqualValues(t, 8, calls.Load())
	// Open: hybrid degrades and vector fails without calling the provider.
	res, err := r.Recall(context.Background(), runtime.Principal{}, &contract.RecallRequest{Query: "q"})
	require.NoError(t, err)
	require.True(t, res.Degraded)
	_, err = r.Recall(context.Background(), runtime.Principal{}, &contract.RecallRequest{Query: "q", Mode: "vector"})
	require.Equal(t, contract.CodeEmbeddingUnavailable, runtime.ErrorCode(err))
	require.EqualValues(t, 8, calls.Load())

	// A failure that is not the provider's (a bug) does not open the circuit.
	broken := newRecall(t, store, unitEmbedder{model: testModel, err: errors.New("a bug")},
		memory.WithQueryBudget(memory.QueryBudget{CircuitFailures: 1}))
	for range 3 {
		_, err = broken.Recall(context.Background(), runtime.Principal{}, &contract.RecallRequest{Query: "q"})
		require.Equal(t, contract.CodeInternal, runtime.ErrorCode(err))
	}
}

// Score fusion: a result's text part is 0.4 × its BM25 score over the best (beside a
// full vector half: × its coverage), its vector part its cosine's margin over the
// vector half's last candidate, up to 0.4; ties go to the better single rank, then the
// newer entry, then the smaller ID; minScore and topK cut the fused list.
func TestRecallFusion(t *testing.T) {
	t.Parallel()
	store := &stubRecall{
		vector: []memory.RecallHit{hit("a", 1, 0.9), hit("b", 1, 0.8), hit("c", 1, 0.7)},
		text:   []memory.RecallHit{hit("c", 1, 0.5), hit("d", 5, 0.42), hit("e", 9, 0.3), hit("f", 9, 0.2)},
	}
	store.text[2].Coverage = 0.4
	store.text[3].Coverage = 0.2
	r := newRecall(t, store, unitEmbedder{model: testModel})
	res, err := r.Recall(context.Background(), runtime.Principal{}, &contract.RecallRequest{Query: "q"})
	require.NoError(t, err)
	// The vector half came back short (it saw all it could rank): the text part is not
	// scaled by coverage. c: 0.4 (+ 0, the vector half's last); d 0.336; e 0.24; the
	// vector half's a (margin 0.2); f 0.16; b (0.1).
	require.Equal(t, []string{"c", "d", "e", "a", "f", "b"}, resultIDs(res.Results))
	require.InDelta(t, 0.4, res.Results[0].Score, 1e-12)
	require.InDelta(t, 0.2, res.Results[3].Score, 1e-12)
	require.InDelta(t, 0.16, res.Results[4].Score, 1e-12)
	c := res.Results[0].Breakdown
	require.Equal(t, 3, *c.VectorRank)
	require.Equal(t, 0.7, *c.VectorScore)
	require.Equal(t, 1, *c.TextRank)
	require.Equal(t, 0.5, *c.TextScore)
	require.Nil(t, res.Results[3].Breakdown.TextRank)
	require.Equal(t, contract.RecallWatermark{Generation: 3, PendingEntries: 2, IndexedThroughMs: 9}, res.Watermark)
	require.Equal(t, 20, store.queries[0].Limit, "a hybrid half asks for more candidates than topK")
	require.Equal(t, memory.Generation{Number: 3, Model: testModel}, store.queries[0].Generation)

	// Beside a full vector half (20 hits, the candidates of topK 10, the last at 0.52)
	// coverage scales the text part: c 0.4 and the vector half's v00 (margin 0.47,
	// capped at 0.4) tie, both first in their half and as new, and c has the smaller
	// ID; then v01 0.36, v02 0.34, d 0.336, v03 0.32 … v07 0.24; e (0.24 × 0.4) and f
	// (0.16 × 0.2) fall behind them.
	full := &stubRecall{text: store.text}
	for i := range 20 {
		full.vector = append(full.vector, hit(fmt.Sprintf("v%02d", i), 1, 0.9-0.02*float64(i)))
	}
	full.vector[0].Score = 0.99
	res, err = newRecall(t, full, unitEmbedder{model: testModel}).Recall(context.Background(), runtime.Principal{},
		&contract.RecallRequest{Query: "q"})
	require.NoError(t, err)
	require.Equal(t, []string{"c", "v00", "v01", "v02", "d", "v03", "v04", "v05", "v06", "v07"}, resultIDs(res.Results))
	require.InDelta(t, 0.4, res.Results[1].Score, 1e-12)
	require.InDelta(t, 0.336, res.Results[4].Score, 1e-12)

	// An entry both halves found adds its parts: v05, 0.28 + 0.4 × 0.5, goes first.
	both := &stubRecall{vector: full.vector, text: []memory.RecallHit{hit("v05", 1, 0.8)}}
	both.text[0].Coverage = 0.5
	res, err = newRecall(t, both, unitEmbedder{model: testModel}).Recall(context.Background(), runtime.Principal{},
		&contract.RecallRequest{Query: "q"})
	require.NoError(t, err)
	require.Equal(t, []string{"v05", "v00", "v01"}, resultIDs(res.Results)[:3])
	require.InDelta(t, 0.28+0.2, res.Results[0].Score, 1e-12)
	require.Equal(t, 1, *res.Results[0].Breakdown.TextRank)
	require.Equal(t, 6, *res.Results[0].Breakdown.VectorRank)

	top := 2
	minScore := 0.22
	res, err = r.Recall(context.Background(), runtime.Principal{}, &contract.RecallRequest{Query: "q", MinScore: &minScore})
	require.NoError(t, err)
	require.Equal(t, []string{"c", "d", "e"}, resultIDs(res.Results))
	res, err = r.Recall(context.Background(), runtime.Principal{}, &contract.RecallRequest{Query: "q", TopK: &top, MinScore: &minScore})
	require.NoError(t, err)
	require.Len(t, res.Results, 2)
	res, err = r.Recall(context.Background(), runtime.Principal{}, &contract.RecallRequest{Query: "q", MinScore: &minScore, Mode: "vector"})
	require.NoError(t, err)
	require.Len(t, res.Results, 3, "vector scores are similarities: all pass 0.22")
	require.Equal(t, 10, store.queries[len(store.queries)-1].Limit)
}

// An embedder failure degrades hybrid recall and fails vector recall; any other
// failure fails both.
func TestRecallDegradation(t *testing.T) {
	t.Parallel()
	store := &stubRecall{text: []memory.RecallHit{hit("t", 1, 0.2)}}
	down := unitEmbedder{model: testModel, err: memory.EmbeddingUnavailable(errors.New("connection refused"))}
	r := newRecall(t, store, down)
	res, err := r.Recall(context.Background(), runtime.Principal{}, &contract.RecallRequest{Query: "q"})
	require.NoError(t, err)
	require.True(t, res.Degraded)
	require.Equal(t, contract.DegradationEmbeddingUnavailable, *res.DegradationReason)
	require.Len(t, res.Results, 1)
	_, err = r.Recall(context.Background(), runtime.Principal{}, &contract.RecallRequest{Query: "q", Mode: "vector"})
	require.Equal(t, contract.CodeEmbeddingUnavailable, runtime.ErrorCode(err))
	res, err = r.Recall(context.Background(), runtime.Principal{}, &contract.RecallRequest{Query: "q", Mode: "text"})
	require.NoError(t, err)
	require.False(t, res.Degraded)

	broken := newRecall(t, store, unitEmbedder{model: testModel, err: errors.New("a bug")})
	_, err = broken.Recall(context.Background(), runtime.Principal{}, &contract.RecallRequest{Query: "q"})
	require.Equal(t, contract.CodeInternal, runtime.ErrorCode(err))
}

// EmbedChecked refuses every answer that could corrupt the projection.
func TestEmbedCheckedRefusesGarbage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	texts := []string{"a", "b"}
	v, err := memory.EmbedChecked(ctx, unitEmbedder{model: testModel}, testModel, texts)
	require.NoError(t, err)
	require.Len(t, v, 2)
	nan := float32(math.NaN())
	for name, out := range map[string][][]float32{
		"one vector short":    {{1, 0, 0}},
		"a dimension short":   {{1, 0, 0}, {1, 0}},
		"a dimension more":    {{1, 0, 0}, {1, 0, 0, 0}},
		"NaN":                 {{1, 0, 0}, {nan, 0, 0}},
		"infinite":            {{1, 0, 0}, {float32(math.Inf(1)), 0, 0}},
		"zero":                {{1, 0, 0}, {0, 0, 0}},
		"not unit length":     {{1, 0, 0}, {3, 4, 0}},
		"no vectors at all":   {},
		"more vectors than 2": {{1, 0, 0}, {1, 0, 0}, {1, 0, 0}},
	} {
		_, err := memory.EmbedChecked(ctx, unitEmbedder{model: testModel, out: out}, testModel, texts)
		require.Equal(t, contract.CodeEmbeddingUnavailable, runtime.ErrorCode(err), name)
		require.ErrorIs(t, err, memory.ErrEmbeddingUnavailable, name)
	}
	_, err = memory.EmbedChecked(ctx, unitEmbedder{model: memory.EmbeddingModel{ID: "other", Dimensions: 3}}, testModel, texts)
	require.Equal(t, contract.CodeEmbeddingUnavailable, runtime.ErrorCode(err), "another model's vectors")
}

// countingEmbedder embeds every text as the first axis and counts the texts it saw.
type countingEmbedder struct{ texts *atomic.Int64 }

func (e countingEmbedder) Model() memory.EmbeddingModel { return testModel }

func (e countingEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	e.texts.Add(int64(len(texts)))
	return unitEmbedder{model: testModel}.Embed(context.Background(), texts)
}

// A query asked again is not embedded again while it is among the cache's most
// recently used; a cache of none embeds every query.
func TestRecallQueryCache(t *testing.T) {
	t.Parallel()
	ask := func(r *memory.Recall, queries ...string) {
		for _, q := range queries {
			for _, mode := range []string{contract.RecallVector, contract.RecallHybrid} {
				_, err := r.Recall(context.Background(), runtime.Principal{}, &contract.RecallRequest{Query: q, Mode: mode})
				require.NoError(t, err)
			}
		}
	}
	embedded := new(atomic.Int64)
	r := newRecall(t, &stubRecall{}, countingEmbedder{embedded}, memory.WithQueryBudget(memory.QueryBudget{CacheEntries: 2}))
	ask(r, "a", "b", "a", "b")
	require.EqualValues(t, 2, embedded.Load(), "each query once")
	ask(r, "c", "a", "b")
	require.EqualValues(t, 5, embedded.Load(), "c pushed out a, and a pushed out b")

	embedded.Store(0)
	r = newRecall(t, &stubRecall{}, countingEmbedder{embedded}, memory.WithQueryBudget(memory.QueryBudget{CacheEntries: -1}))
	ask(r, "a", "a")
	require.EqualValues(t, 4, embedded.Load(), "no cache")
}
