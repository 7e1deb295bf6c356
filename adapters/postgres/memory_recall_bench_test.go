package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgvector/pgvector-go"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/embedding/embeddingtest"
	"github.com/agent-context/agent-context/adapters/embedding/hash"
	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/memory"
)

// benchEntries is the size of the recall benchmarks' scope.
const benchEntries = 100_000

// recallFixture is one scope of 100,000 entries embedded with the hash embedder (1%
// tagged "rare"), their text postings packed, and 200 queries with their vectors
// computed up front, so the figures exclude the query's embedding.
type recallFixture struct {
	pool    *pgxpool.Pool
	db      *postgres.DB
	recall  *memory.Recall
	scope   runtime.Scope
	table   string
	queries []string
	numbers []string // questions of the recall playground's shape
	vectors map[string][]float32
	embedNs float64
}

// cachedEmbedder answers queries whose vectors were computed before the clock starts.
type cachedEmbedder struct{ vectors map[string][]float32 }

func (cachedEmbedder) Model() memory.EmbeddingModel { return hashModel }

func (e cachedEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = e.vectors[t]
	}
	return out, nil
}

// benchQueries generates questions in the corpus's vocabulary, a seventh of them
// naming a note by its number.
func benchQueries(n int) []string {
	base := corpus(n, 99)
	r := rand.New(rand.NewPCG(11, 12))
	out := make([]string, n)
	for i, text := range base {
		_, sentence, _ := strings.Cut(text, ": the ")
		words := strings.Fields(strings.TrimSuffix(sentence, "."))
		q := "why does the " + strings.Join(words[:min(len(words), 4+r.IntN(3))], " ")
		if i%7 == 0 {
			q += fmt.Sprintf(" note %d", r.IntN(benchEntries))
		}
		out[i] = strings.TrimSuffix(q, ",") + "?"
	}
	return out
}

// numberQueries generates questions of the console recall playground's shape: a note's
// number, which one entry holds, beside words every entry holds ("note", "service").
func numberQueries(n int) []string {
	r := rand.New(rand.NewPCG(13, 14))
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("note %d about the service", r.IntN(benchEntries))
	}
	return out
}

func loadRecallFixture(b *testing.B) *recallFixture {
	b.Helper()
	pool := pgtest.NewDB(b)
	db := newDB(b, pool)
	scope := runtime.Scope{TenantID: "bench", ProjectID: "p"}
	start := time.Now()
	entries := hashSeed(b, "e", corpus(benchEntries, 42), func(i int) []string {
		if i%100 == 3 {
			return []string{"rare"}
		}
		return []string{}
	})
	seedProjection(b, pool, db, scope, hashModel, entries)
	require.NoError(b, postgres.PackText(context.Background(), pool, scope))
	var table string
	require.NoError(b, pool.QueryRow(context.Background(), `SELECT table_name FROM vector_models`).Scan(&table))
	// What autovacuum does within a minute or two of a bulk load and a pack: the
	// pending postings the pack moved into blocks are dead rows until then, and the
	// loaded tables' visibility maps are unset. Left to autovacuum, those vacuums ran
	// beside the first cases measured.
	_, err := pool.Exec(context.Background(),
		`VACUUM ANALYZE context_entries, entry_text_postings, entry_text_blocks, `+pgx.Identifier{table}.Sanitize())
	require.NoError(b, err)
	b.Logf("loaded %d entries with hash vectors and built the HNSW index in %s", benchEntries, time.Since(start).Round(time.Second))
	queries, numbers := benchQueries(200), numberQueries(200)
	t0 := time.Now()
	vecs, err := hash.New().Embed(context.Background(), queries)
	require.NoError(b, err)
	embedNs := float64(time.Since(t0).Nanoseconds()) / float64(len(queries))
	numberVecs, err := hash.New().Embed(context.Background(), numbers)
	require.NoError(b, err)
	vectors := map[string][]float32{}
	for i, q := range queries {
		vectors[q] = vecs[i]
	}
	for i, q := range numbers {
		vectors[q] = numberVecs[i]
	}
	embedders := embeddingtest.NewSet(embeddingtest.Named{Name: contract.EmbedderHash, Embedder: cachedEmbedder{vectors}})
	projection := memory.NewProjection(memory.ProjectionConfig{DB: db.Memory(), Embedders: embedders})
	return &recallFixture{pool: pool, db: db, recall: memory.NewRecall(db.Recall(), projection, embedders, nil), scope: scope,
		table: table, queries: queries, numbers: numbers, vectors: vectors, embedNs: embedNs}
}

// exactTop returns the IDs of the k nearest entries by an exact sequential scan of
// the scope's vectors (no index), optionally of those tagged tag.
func (f *recallFixture) exactTop(b *testing.B, q []float32, k int, tags []string) []string {
	b.Helper()
	if tags == nil {
		tags = []string{}
	}
	rows, err := f.pool.Query(context.Background(), postgres.VectorSQL(f.table, hashModel, true),
		f.scope.TenantID, f.scope.ProjectID, pgvector.NewVector(q), int64(1), []string{}, tags, nil, int64(0), k)
	require.NoError(b, err)
	return entryIDs(b, rows)
}

// BenchmarkRecall runs the recall benchmarks over one fixture of 100,000 entries
// (loaded once: the HNSW index build takes a minute or more). Last, entries are
// stored outside the HNSW graph, as a burst leaves them before the fold (10,000, the
// fold's bound during a backlog, then 20,000), and the vector half is measured again
// beside them (latency_unindexed_<n>k).
func BenchmarkRecall(b *testing.B) {
	f := loadRecallFixture(b)
	b.Run("accuracy", func(b *testing.B) { benchmarkRecallAccuracy(b, f) })
	b.Run("latency", func(b *testing.B) { benchmarkRecallLatency(b, f, latencyCases) })
	outside := 0
	for _, n := range []int{10_000, 20_000} {
		f.addUnindexed(b, n-outside, n)
		outside = n
		b.Run(fmt.Sprintf("latency_unindexed_%dk", n/1000), func(b *testing.B) {
			benchmarkRecallLatency(b, f, []latencyCase{latencyCases[1], latencyCases[4]})
		})
	}
}

// addUnindexed stores n more entries of the scope with their vectors outside the
// HNSW graph (1% tagged "rare", as the others), which then holds total outside it.
func (f *recallFixture) addUnindexed(b *testing.B, n, total int) {
	b.Helper()
	ctx := context.Background()
	entries := hashSeed(b, fmt.Sprintf("u%d-", total), corpus(n, uint64(total)), func(i int) []string {
		if i%100 == 3 {
			return []string{"rare"}
		}
		return []string{}
	})
	conn, err := f.pool.Acquire(ctx)
	require.NoError(b, err)
	defer conn.Release()
	copyEntries(b, conn, f.scope, hashModel, f.table, 1, entries, false)
	_, err = conn.Exec(ctx, `ANALYZE `+f.table)
	require.NoError(b, err)
	var outside int
	require.NoError(b, conn.QueryRow(ctx, `SELECT count(*) FROM `+f.table+` WHERE NOT indexed`).Scan(&outside))
	require.Equal(b, total, outside)
}

// warmUpQueries is how many questions a latency case asks before it measures.
const warmUpQueries = 20

// latencyCase is a recall request the latency benchmark repeats over its queries (the
// fixture's numberQueries when numbers is set), for topK results (0: the default, 10).
// The k20 cases ask one half for as many as hybrid asks each of its halves.
type latencyCase struct {
	name    string
	mode    string
	filter  *contract.RecallFilter
	numbers bool
	topK    int
}

var latencyCases = []latencyCase{
	{"hybrid", contract.RecallHybrid, nil, false, 0},
	{"vector", contract.RecallVector, nil, false, 0},
	{"text", contract.RecallText, nil, false, 0},
	{"hybrid_filter_1pct", contract.RecallHybrid, &contract.RecallFilter{Tags: []string{"rare"}}, false, 0},
	{"vector_filter_1pct", contract.RecallVector, &contract.RecallFilter{Tags: []string{"rare"}}, false, 0},
	{"text_filter_1pct", contract.RecallText, &contract.RecallFilter{Tags: []string{"rare"}}, false, 0},
	{"text_number", contract.RecallText, nil, true, 0},
	{"hybrid_number", contract.RecallHybrid, nil, true, 0},
	{"text_k20", contract.RecallText, nil, false, 20},
	{"vector_k20", contract.RecallVector, nil, false, 20},
}

// benchmarkRecallAccuracy measures recall@10 of vector-mode recall (the HNSW index
// with the filter inside its iterative scan) against an exact sequential scan of the
// same 100,000 vectors, unfiltered and with a 1% filter; ns/op is the exact scan's.
func benchmarkRecallAccuracy(b *testing.B, f *recallFixture) {
	for _, c := range []struct {
		name string
		tags []string
	}{{"unfiltered", nil}, {"filter_1pct", []string{"rare"}}} {
		b.Run(c.name, func(b *testing.B) {
			found, total := 0, 0
			ctx := context.Background()
			for _, q := range f.queries {
				res, err := f.recall.Recall(ctx, runtime.Principal{Scope: f.scope}, &contract.RecallRequest{
					Query: q, Mode: contract.RecallVector, Filter: &contract.RecallFilter{Tags: c.tags}})
				require.NoError(b, err)
				want := f.exactTop(b, f.vectors[q], 10, c.tags)
				for _, r := range res.Results {
					if slices.Contains(want, r.Entry.ID) {
						found++
					}
				}
				total += len(want)
			}
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				q := f.queries[i%len(f.queries)]
				f.exactTop(b, f.vectors[q], 10, c.tags)
			}
			b.ReportMetric(float64(found)/float64(total), "recall@10")
		})
	}
}

// benchmarkRecallLatency measures recall through the use case (both halves, fusion,
// watermark; the query's vector precomputed) over the 100,000 entries, at 1 and 8
// concurrent clients: p50 and p95 per request in ms. The number cases ask questions of
// the console recall playground's shape (numberQueries). embed-ns is what embedding a
// query with the hash embedder costs on top (the local one: docs/benchmarks.md).
func benchmarkRecallLatency(b *testing.B, f *recallFixture, cases []latencyCase) {
	for _, c := range cases {
		queries := f.queries
		if c.numbers {
			queries = f.numbers
		}
		// A warm-up, untimed: the case's first questions read the pages of its
		// paths from the OS cache into shared buffers, which a recall in a running
		// service finds there (measured without it, the first case's p95 was those
		// first questions).
		for _, q := range queries[:warmUpQueries] {
			_, err := f.recall.Recall(context.Background(), runtime.Principal{Scope: f.scope},
				&contract.RecallRequest{Query: q, Mode: c.mode, Filter: c.filter, TopK: topK(c.topK)})
			require.NoError(b, err)
		}
		for _, clients := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/clients=%d", c.name, clients), func(b *testing.B) {
				ctx := context.Background()
				var mu sync.Mutex
				var latencies []time.Duration
				var failure error
				next := make(chan int)
				var wg sync.WaitGroup
				for range clients {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range next {
							q := queries[i%len(queries)]
							t0 := time.Now()
							_, err := f.recall.Recall(ctx, runtime.Principal{Scope: f.scope},
								&contract.RecallRequest{Query: q, Mode: c.mode, Filter: c.filter, TopK: topK(c.topK)})
							d := time.Since(t0)
							mu.Lock()
							latencies = append(latencies, d)
							if err != nil && failure == nil {
								failure = err
							}
							mu.Unlock()
						}
					}()
				}
				for i := 0; b.Loop(); i++ {
					next <- i
				}
				close(next)
				wg.Wait()
				require.NoError(b, failure)
				slices.Sort(latencies)
				pct := func(p float64) float64 {
					return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds()) / 1000
				}
				b.ReportMetric(pct(0.50), "p50-ms")
				b.ReportMetric(pct(0.95), "p95-ms")
				b.ReportMetric(f.embedNs, "embed-ns")
			})
		}
	}
}

func topK(k int) *int {
	if k == 0 {
		return nil
	}
	return &k
}
