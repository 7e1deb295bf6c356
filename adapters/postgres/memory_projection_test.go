package postgres_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgvector/pgvector-go"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/embedding/hash"
	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/memory"
)

// seedEntry is an active entry to load with its vector.
type seedEntry struct {
	ID, Kind, Content string
	Tags              []string
	Vector            []float32
}

var entrySeedColumns = []string{
	"tenant_id", "project_id", "entry_id", "kind", "content", "source_record_ids", "tags", "importance",
	"status", "version", "request_sha256", "created_at_ms", "updated_at_ms", "search", "search_length",
}

// seedProjection loads entries of scope and their vectors of model straight into the
// tables with COPY, as a bulk load would, and builds the HNSW index once afterwards
// (inserting 100,000 vectors one by one into the index takes minutes). The scope's
// projection is started first, as its first write would.
func seedProjection(tb testing.TB, pool *pgxpool.Pool, db *postgres.DB, scope runtime.Scope, model memory.EmbeddingModel, entries []seedEntry) {
	tb.Helper()
	ctx := context.Background()
	st := db.Memory().Stores().Projection
	require.NoError(tb, st.EnsureModel(ctx, model))
	require.NoError(tb, st.Enqueue(ctx, scope, []contract.ContextEntry{{ID: entries[0].ID, CreatedAtMs: 1}}, model))
	var table string
	var generation int64
	require.NoError(tb, pool.QueryRow(ctx, `
		SELECT m.table_name, g.generation FROM entry_generations g JOIN vector_models m USING (model_id)
		WHERE g.tenant_id = $1 AND g.project_id = $2 AND g.state = 'active'`, scope.TenantID, scope.ProjectID).
		Scan(&table, &generation))
	conn, err := pool.Acquire(ctx)
	require.NoError(tb, err)
	defer conn.Release()
	var indexDef *string
	require.NoError(tb, conn.QueryRow(ctx, `SELECT (SELECT indexdef FROM pg_indexes WHERE indexname = $1)`, table+"_hnsw").Scan(&indexDef))
	if indexDef != nil {
		_, err = conn.Exec(ctx, `DROP INDEX `+pgx.Identifier{table + "_hnsw"}.Sanitize())
		require.NoError(tb, err)
	}
	copyEntries(tb, conn, scope, model, table, generation, entries, true)
	if indexDef != nil {
		_, err = conn.Exec(ctx, `SET maintenance_work_mem = '512MB'`)
		require.NoError(tb, err)
		_, err = conn.Exec(ctx, *indexDef)
		require.NoError(tb, err)
	}
	for _, stmt := range []string{
		`DELETE FROM entry_projection_queue`, `ANALYZE context_entries`, `ANALYZE ` + pgx.Identifier{table}.Sanitize(),
		// What autovacuum does after a bulk insert: the postings' visibility map set,
		// so that recall reads them from their index alone.
		`VACUUM ANALYZE entry_text_postings`,
	} {
		_, err = conn.Exec(ctx, stmt)
		require.NoError(tb, err)
	}
}

// copyEntries loads active entries of scope and their vectors of model into table's
// generation with COPY, in the HNSW graph or outside it (indexed).
func copyEntries(tb testing.TB, conn *pgxpool.Conn, scope runtime.Scope, model memory.EmbeddingModel, table string, generation int64, entries []seedEntry, indexed bool) {
	tb.Helper()
	ctx := context.Background()
	now := time.Now().UnixMilli()
	_, err := conn.CopyFrom(ctx, pgx.Identifier{"context_entries"}, entrySeedColumns, pgx.CopyFromSlice(len(entries), func(i int) ([]any, error) {
		e := entries[i]
		doc, length := postgres.EntryDocument(scope, e.Content)
		return []any{scope.TenantID, scope.ProjectID, e.ID, e.Kind, e.Content, []string{}, e.Tags, 0.5,
			"active", int64(1), "seeded", now, now, doc, int32(length)}, nil
	}))
	require.NoError(tb, err)
	ids := make([]string, len(entries))
	for i, e := range entries {
		ids[i] = e.ID
	}
	require.NoError(tb, postgres.IndexEntries(ctx, conn, scope, ids))
	half := model.Dimensions > 2000 && model.Dimensions <= 4000
	_, err = conn.CopyFrom(ctx, pgx.Identifier{table}, []string{"tenant_id", "project_id", "generation", "entry_id", "kind", "tags", "embedding", "indexed"},
		pgx.CopyFromSlice(len(entries), func(i int) ([]any, error) {
			e := entries[i]
			var v any = pgvector.NewVector(e.Vector)
			if half {
				v = pgvector.NewHalfVector(e.Vector)
			}
			return []any{scope.TenantID, scope.ProjectID, generation, e.ID, e.Kind, e.Tags, v, indexed}, nil
		}))
	require.NoError(tb, err)
}

// corpus generates n entry texts from a vocabulary, deterministically: a subject, a
// verb, an object, a time and a remark drawn at random (about ten million
// combinations, so near-duplicates are rare), numbered.
func corpus(n int, seed uint64) []string {
	subjects := strings.Fields("billing search auth mail payments reporting analytics checkout inventory shipping " +
		"login signup profile notifications invoices exports imports backups metrics logging " +
		"gateway scheduler crawler indexer cache queue webhook firewall ledger catalog")
	verbs := strings.Fields("deploys fails restarts scales migrates stalls logs caches retries syncs " +
		"crashes throttles rotates rebuilds drains warms pauses resumes upgrades degrades " +
		"leaks replays shards compacts expires archives mirrors signs verifies encrypts")
	objects := strings.Fields("nightly hourly weekly quietly slowly twice often rarely early late " +
		"silently loudly safely manually automatically partially fully randomly steadily briefly " +
		"again remotely locally globally regionally internally externally eagerly lazily cleanly")
	times := []string{"on Fridays", "after midnight", "during audits", "at peak traffic", "before releases",
		"in Frankfurt", "in Lima", "behind the proxy", "under load", "after upgrades", "on weekends", "at noon",
		"in staging", "in production", "during backups", "on holidays", "after incidents", "before dawn",
		"at month end", "during migrations"}
	remarks := []string{"per the runbook", "since the outage", "as Ana noted", "per the new policy",
		"according to Tom", "since last spring", "as logged", "per the contract", "as agreed", "for now",
		"until further notice", "by design", "as a workaround", "per legal", "as tested", "per the SLA",
		"as the dashboard shows", "since the rewrite", "as expected", "to save costs"}
	r := rand.New(rand.NewPCG(seed, 7))
	pick := func(words []string) string { return words[r.IntN(len(words))] }
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("Note %d: the %s service %s %s %s, %s.", i, pick(subjects), pick(verbs), pick(objects),
			pick(times), pick(remarks))
	}
	return out
}

// hashSeed embeds texts with the hash embedder into entries; tag(i) gives the tags of
// the i-th.
func hashSeed(tb testing.TB, prefix string, texts []string, tag func(i int) []string) []seedEntry {
	tb.Helper()
	vectors, err := hash.New().Embed(context.Background(), texts)
	require.NoError(tb, err)
	out := make([]seedEntry, len(texts))
	for i, text := range texts {
		out[i] = seedEntry{ID: fmt.Sprintf("%s%06d", prefix, i), Kind: contract.EntryKinds[i%5], Content: text, Tags: tag(i), Vector: vectors[i]}
	}
	return out
}

// exactNearest returns the IDs of the k entries nearest to q by cosine, nearest first.
func exactNearest(entries []seedEntry, q []float32, k int) []string {
	type scored struct {
		id  string
		sim float64
	}
	all := make([]scored, len(entries))
	for i, e := range entries {
		var dot float64
		for j := range q {
			dot += float64(q[j]) * float64(e.Vector[j])
		}
		all[i] = scored{e.ID, dot}
	}
	slices.SortFunc(all, func(a, b scored) int {
		if a.sim > b.sim {
			return -1
		}
		return 1
	})
	ids := make([]string, 0, k)
	for _, s := range all[:min(k, len(all))] {
		ids = append(ids, s.id)
	}
	return ids
}

func hitIDs(hits []memory.RecallHit) []string {
	ids := make([]string, len(hits))
	for i, h := range hits {
		ids[i] = h.Entry.ID
	}
	return ids
}

func overlap(a, b []string) int {
	n := 0
	for _, x := range a {
		if slices.Contains(b, x) {
			n++
		}
	}
	return n
}

var hashModel = memory.EmbeddingModel{ID: hash.ModelID, Dimensions: hash.Dimensions}

// indexOnlySearch runs the vector half's index statement alone, with sorting and
// bitmap scans disabled so the plan is the HNSW index scan (the test checks it is),
// under pgvector's iterative scan mode (off: the classic trap) and scan bound, and
// returns its hits.
func indexOnlySearch(t *testing.T, pool *pgxpool.Pool, scope runtime.Scope, table string, q []float32, filterTags []string, limit int, iterative string, maxTuples int) []string {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	setLocalEverywhere(t, tx, "hnsw.iterative_scan", iterative, "hnsw.ef_search", "100",
		"hnsw.max_scan_tuples", fmt.Sprint(maxTuples), "enable_sort", "off", "enable_bitmapscan", "off")
	if filterTags == nil {
		filterTags = []string{}
	}
	query := postgres.VectorSQL(table, hashModel, false)
	args := []any{scope.TenantID, scope.ProjectID, pgvector.NewVector(q), int64(1), []string{}, filterTags, nil, int64(0), limit}
	rows, err := tx.Query(ctx, "EXPLAIN "+query, args...)
	require.NoError(t, err)
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Contains(t, strings.Join(plan, "\n"), table+"_hnsw", "the plan uses the HNSW index")
	rows, err = tx.Query(ctx, query, args...)
	require.NoError(t, err)
	return entryIDs(t, rows)
}

// setLocalEverywhere applies settings (name, value pairs) until tx ends, on a Citus
// cluster on the workers too, where the statements run.
func setLocalEverywhere(t *testing.T, tx pgx.Tx, settings ...string) {
	t.Helper()
	ctx := context.Background()
	if onCitus(t, tx) {
		_, err := tx.Exec(ctx, `SET LOCAL citus.propagate_set_commands TO 'local'`)
		require.NoError(t, err)
	}
	for i := 0; i < len(settings); i += 2 {
		_, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL %s TO %s", settings[i], pgQuote(settings[i+1])))
		require.NoError(t, err)
	}
}

// onCitus says whether db is a Citus coordinator.
func onCitus(t *testing.T, db postgres.DBTX) bool {
	t.Helper()
	citus, err := postgres.OnCitus(context.Background(), db)
	require.NoError(t, err)
	return citus
}

func pgQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// hnswScans is how often tx's transaction scanned table's HNSW index in scope: on a
// Citus cluster, on the worker holding the scope's shard, through the connection the
// transaction uses for it.
func hnswScans(t *testing.T, tx pgx.Tx, table string, scope runtime.Scope) (n int64) {
	t.Helper()
	ctx := context.Background()
	if !onCitus(t, tx) {
		require.NoError(t, tx.QueryRow(ctx, `SELECT pg_stat_get_xact_numscans($1::regclass)`, table+"_hnsw").Scan(&n))
		return n
	}
	var shard int64
	require.NoError(t, tx.QueryRow(ctx, `SELECT get_shard_id_for_distribution_column($1::regclass, $2::text)`, table, scope.TenantID).Scan(&shard))
	require.NoError(t, tx.QueryRow(ctx, fmt.Sprintf(`SELECT pg_stat_get_xact_numscans(to_regclass('%s_hnsw_%d'))
		FROM %s WHERE tenant_id = $1 LIMIT 1`, table, shard, pgx.Identifier{table}.Sanitize()), scope.TenantID).Scan(&n))
	return n
}

// entryIDs reads the entry IDs in the first column of rows of the vector half.
func entryIDs(tb testing.TB, rows pgx.Rows) []string {
	tb.Helper()
	defer rows.Close()
	var ids []string
	for rows.Next() {
		vals, err := rows.Values()
		require.NoError(tb, err)
		ids = append(ids, vals[0].(string))
	}
	require.NoError(tb, rows.Err())
	return ids
}

// TestVectorSearchSelectiveFilter: a filter that 1% of 20,000 entries pass still
// returns topK hits, all of them passing it and the nearest of them: the filter is
// applied inside the iterative index scan, which finds them by itself.
func TestVectorSearchSelectiveFilter(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	db := newDB(t, pool)
	scope := runtime.Scope{TenantID: "t", ProjectID: "p"}
	entries := hashSeed(t, "e", corpus(20_000, 1), func(i int) []string {
		if i%100 == 7 {
			return []string{"rare", "common"}
		}
		return []string{"common"}
	})
	seedProjection(t, pool, db, scope, hashModel, entries)
	var rare []seedEntry
	for _, e := range entries {
		if slices.Contains(e.Tags, "rare") {
			rare = append(rare, e)
		}
	}
	require.Len(t, rare, 200)
	var table string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT table_name FROM vector_models`).Scan(&table))

	queries := []string{"the billing service deploys on Fridays", "staging cluster times out", "backup after midnight",
		"payments API retries with two approvals", "login page caches under heavy load"}
	vectors, err := hash.New().Embed(context.Background(), queries)
	require.NoError(t, err)
	for i, q := range vectors {
		hits, err := db.Recall().VectorSearch(context.Background(), scope, memory.VectorRecall{
			RecallFilter: memory.RecallFilter{Tags: []string{"rare"}, NowMs: time.Now().UnixMilli()},
			Generation:   memory.Generation{Number: 1, Model: hashModel}, Vector: q, Limit: 10,
		})
		require.NoError(t, err)
		require.Len(t, hits, 10, queries[i])
		for _, h := range hits {
			require.Contains(t, h.Entry.Tags, "rare")
		}
		want := exactNearest(rare, q, 10)
		require.GreaterOrEqual(t, overlap(hitIDs(hits), want), 9, "%s: %v vs exact %v", queries[i], hitIDs(hits), want)
		for j := 1; j < len(hits); j++ {
			require.GreaterOrEqual(t, hits[j-1].Score, hits[j].Score)
		}
		require.Less(t, len(indexOnlySearch(t, pool, scope, table, q, []string{"rare"}, 10, "off", 20_000)), 10,
			"the trap: without iterative scans, the filter empties the candidate list (%s)", queries[i])
		require.Len(t, indexOnlySearch(t, pool, scope, table, q, []string{"rare"}, 10, "strict_order", 20_000), 10,
			"the iterative scan alone fills topK (%s)", queries[i])
	}
}

// TestVectorSearchFewFilterRowsExact: a tag filter that few rows pass (1% of 5,000)
// is answered by ranking exactly those rows, without walking the HNSW graph, even when
// the statistics say the tag is on every row (they were taken before the tag was
// removed from 99% of them), which makes the index the planner's choice: the nearest
// of them, in order. A tag every row holds is searched through the index.
func TestVectorSearchFewFilterRowsExact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	db := newDB(t, pool)
	scope := runtime.Scope{TenantID: "t", ProjectID: "p"}
	entries := hashSeed(t, "e", corpus(5_000, 3), func(int) []string { return []string{"rare", "common"} })
	seedProjection(t, pool, db, scope, hashModel, entries)
	var table string
	require.NoError(t, pool.QueryRow(ctx, `SELECT table_name FROM vector_models`).Scan(&table))
	var rare []string
	for i, e := range entries {
		if i%100 == 7 {
			rare = append(rare, e.ID)
		}
	}
	for _, tbl := range []string{"context_entries", table} {
		_, err := pool.Exec(ctx, `UPDATE `+pgx.Identifier{tbl}.Sanitize()+` SET tags = '{common}' WHERE NOT entry_id = ANY ($1)`, rare)
		require.NoError(t, err)
	}
	var rareEntries []seedEntry
	for _, e := range entries {
		if slices.Contains(rare, e.ID) {
			rareEntries = append(rareEntries, e)
		}
	}
	search := func(q []float32, tag string) ([]memory.RecallHit, int64) {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		// The counter also holds the session's scans not yet reported: the difference
		// is this search's.
		scans := func() int64 { return hnswScans(t, tx, table, scope) }
		before := scans()
		hits, err := postgres.RecallOver(db, tx).VectorSearch(ctx, scope, memory.VectorRecall{
			RecallFilter: memory.RecallFilter{Tags: []string{tag}, NowMs: time.Now().UnixMilli()},
			Generation:   memory.Generation{Number: 1, Model: hashModel}, Vector: q, Limit: 10,
		})
		require.NoError(t, err)
		return hits, scans() - before
	}
	queries := []string{"the billing service deploys on Fridays", "staging cluster times out", "backup after midnight"}
	vectors, err := hash.New().Embed(ctx, queries)
	require.NoError(t, err)
	for i, q := range vectors {
		hits, walks := search(q, "rare")
		require.Equal(t, exactNearest(rareEntries, q, 10), hitIDs(hits), queries[i])
		require.Zero(t, walks, "the graph is not walked for %d rows (%s)", len(rare), queries[i])
		hits, walks = search(q, "common")
		require.Len(t, hits, 10, queries[i])
		require.Positive(t, walks, "a tag every row holds is searched through the index (%s)", queries[i])
		require.GreaterOrEqual(t, overlap(hitIDs(hits), exactNearest(entries, q, 10)), 9, queries[i])
	}
}

// TestVectorSearchSmallScopeExact: a scope of few entries (300, as the projection's
// status counts them) beside a larger one (2,500, more than the vector half ranks
// exactly) is answered by ranking all its rows exactly, without walking the HNSW graph:
// the nearest, in order. The larger scope is searched as the planner sees fit (at this
// size, it reads the scope whole too), and finds its nearest.
func TestVectorSearchSmallScopeExact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	db := newDB(t, pool)
	small, large := runtime.Scope{TenantID: "small", ProjectID: "p"}, runtime.Scope{TenantID: "large", ProjectID: "p"}
	noTags := func(int) []string { return []string{} }
	smallEntries, largeEntries := hashSeed(t, "s", corpus(300, 5), noTags), hashSeed(t, "l", corpus(2_500, 6), noTags)
	seedProjection(t, pool, db, small, hashModel, smallEntries)
	seedProjection(t, pool, db, large, hashModel, largeEntries)
	var table string
	require.NoError(t, pool.QueryRow(ctx, `SELECT table_name FROM vector_models`).Scan(&table))
	entries := func(scope runtime.Scope) int64 {
		st, err := db.Memory().Stores().Projection.Status(ctx, scope)
		require.NoError(t, err)
		return st.Entries
	}
	require.EqualValues(t, len(smallEntries), entries(small))
	require.EqualValues(t, len(largeEntries), entries(large))
	search := func(scope runtime.Scope, q []float32) ([]memory.RecallHit, int64) {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		scans := func() int64 { return hnswScans(t, tx, table, scope) }
		before := scans()
		hits, err := postgres.RecallOver(db, tx).VectorSearch(ctx, scope, memory.VectorRecall{
			RecallFilter: memory.RecallFilter{NowMs: time.Now().UnixMilli()},
			Generation:   memory.Generation{Number: 1, Model: hashModel}, Vector: q, Limit: 10,
			ScopeEntries: entries(scope),
		})
		require.NoError(t, err)
		return hits, scans() - before
	}
	queries := []string{"the billing service deploys on Fridays", "staging cluster times out", "backup after midnight"}
	vectors, err := hash.New().Embed(ctx, queries)
	require.NoError(t, err)

	// The search's settings end with its batch: the session it ran on has its own.
	cfg := pool.Config().Copy()
	cfg.MaxConns = 1
	single, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer single.Close()
	settings := func() (s [4]string) {
		require.NoError(t, single.QueryRow(ctx, `SELECT current_setting('statement_timeout'), current_setting('plan_cache_mode'),
			current_setting('hnsw.iterative_scan'), current_setting('hnsw.ef_search')`).Scan(&s[0], &s[1], &s[2], &s[3]))
		return s
	}
	// pgvector's settings exist in a session once its library is loaded.
	_, err = single.Exec(ctx, `SELECT '[1]'::vector`)
	require.NoError(t, err)
	before := settings()
	for _, scope := range []runtime.Scope{small, large} {
		hits, err := newDB(t, single).Recall().VectorSearch(ctx, scope, memory.VectorRecall{
			RecallFilter: memory.RecallFilter{NowMs: time.Now().UnixMilli()},
			Generation:   memory.Generation{Number: 1, Model: hashModel}, Vector: vectors[0], Limit: 10,
			ScopeEntries: entries(scope),
		})
		require.NoError(t, err)
		require.Len(t, hits, 10)
		require.Equal(t, before, settings(), "the settings of a search of %s", scope.TenantID)
	}

	// The table keeps its vectors in their rows (toasted only beyond a page).
	var options []string
	require.NoError(t, pool.QueryRow(ctx, `SELECT reloptions FROM pg_class WHERE oid = $1::regclass`, table).Scan(&options))
	require.Equal(t, []string{"toast_tuple_target=8160"}, options)

	for i, q := range vectors {
		hits, walks := search(small, q)
		require.Equal(t, exactNearest(smallEntries, q, 10), hitIDs(hits), queries[i])
		require.Zero(t, walks, "the graph is not walked for a scope of %d entries (%s)", len(smallEntries), queries[i])
		hits, _ = search(large, q)
		require.Len(t, hits, 10, queries[i])
		require.GreaterOrEqual(t, overlap(hitIDs(hits), exactNearest(largeEntries, q, 10)), 9, queries[i])
	}
}

// TestVectorSearchTenantBesideNearerTenant: a tenant whose 500 entries sit beside
// another tenant's 20,000 nearer ones, searched through the graph (as if the scope
// were too large to rank whole), still gets topK hits, its own, the nearest,
// where the index scan without iterative scans finds none of them, and one bounded
// to fewer tuples than the other tenant holds comes up short (the exact scan of the
// tenant's rows answers then).
func TestVectorSearchTenantBesideNearerTenant(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	db := newDB(t, pool)
	r := rand.New(rand.NewPCG(3, 4))
	unit := func(v []float32) []float32 {
		var n float64
		for _, x := range v {
			n += float64(x) * float64(x)
		}
		for i := range v {
			v[i] = float32(float64(v[i]) / math.Sqrt(n))
		}
		return v
	}
	query := make([]float32, hash.Dimensions)
	for i := range query {
		query[i] = float32(r.NormFloat64())
	}
	query = unit(query)
	near := func(i int, spread float64) []float32 {
		v := make([]float32, len(query))
		for j := range v {
			v[j] = query[j] + float32(spread*r.NormFloat64())
		}
		return unit(v)
	}
	big, small := runtime.Scope{TenantID: "big", ProjectID: "p"}, runtime.Scope{TenantID: "small", ProjectID: "p"}
	var bigEntries, smallEntries []seedEntry
	for i := range 20_000 {
		bigEntries = append(bigEntries, seedEntry{ID: fmt.Sprintf("b%05d", i), Kind: "fact", Content: "big", Tags: []string{}, Vector: near(i, 0.02)})
	}
	for i := range 500 {
		smallEntries = append(smallEntries, seedEntry{ID: fmt.Sprintf("s%03d", i), Kind: "fact", Content: "small", Tags: []string{}, Vector: near(i, 0.2)})
	}
	seedProjection(t, pool, db, big, hashModel, bigEntries)
	seedProjection(t, pool, db, small, hashModel, smallEntries)
	var table string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT table_name FROM vector_models`).Scan(&table))

	hits, err := postgres.RecallWalkingFilters(db).VectorSearch(context.Background(), small, memory.VectorRecall{
		RecallFilter: memory.RecallFilter{NowMs: time.Now().UnixMilli()},
		Generation:   memory.Generation{Number: 1, Model: hashModel}, Vector: query, Limit: 10,
	})
	require.NoError(t, err)
	require.Equal(t, exactNearest(smallEntries, query, 10), hitIDs(hits), "the small tenant's own nearest, exactly")
	require.Empty(t, indexOnlySearch(t, pool, small, table, query, nil, 10, "off", 20_000), "the trap")
	require.Less(t, len(indexOnlySearch(t, pool, small, table, query, nil, 10, "strict_order", 5_000)), 10,
		"an iterative scan that may visit fewer tuples than the nearer tenant holds comes up short")
}
