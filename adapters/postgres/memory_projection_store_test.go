package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/embedding/embeddingtest"
	"github.com/agent-context/agent-context/adapters/embedding/hash"
	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgmetrics"
	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/memory"
	"github.com/agent-context/agent-context/runtime/operation"
)

// projectionBundle is the entry, projection and operation use cases over one
// database, with the hash embedder configured.
type projectionBundle struct {
	pool       *pgxpool.Pool
	db         *postgres.DB
	entries    *memory.Entries
	projection *memory.Projection
	ops        *operation.Maintenance
	scope      runtime.Scope
	p          runtime.Principal
}

func setupProjection(t *testing.T, embedders memory.Embedders) *projectionBundle {
	t.Helper()
	pool := pgtest.NewDB(t)
	db := newDB(t, pool)
	if embedders == nil {
		embedders = embeddingtest.NewSet(embeddingtest.Named{Name: contract.EmbedderHash, Embedder: hash.New()})
	}
	projection := memory.NewProjection(memory.ProjectionConfig{DB: db.Memory(), Embedders: embedders, Batch: 4})
	require.NoError(t, projection.Prepare(context.Background()))
	scope := runtime.Scope{TenantID: "t", ProjectID: "p"}
	return &projectionBundle{
		pool: pool, db: db, projection: projection, scope: scope, p: runtime.Principal{Scope: scope},
		entries: memory.NewEntries(db.Memory(), nil, nil, embedders.Configured().Model()),
		ops:     operation.NewMaintenance(operation.MaintenanceConfig{DB: db.Operation(), Schema: db, Projection: projection, Rebuilds: projection}),
	}
}

func (b *projectionBundle) create(t *testing.T, id, content string) {
	t.Helper()
	_, _, err := b.entries.Create(context.Background(), b.p, &contract.CreateEntryRequest{ID: &id, Kind: "fact", Content: content})
	require.NoError(t, err)
}

func (b *projectionBundle) drain(t *testing.T) {
	t.Helper()
	done, err := b.projection.EmbedBacklog(context.Background(), b.scope, time.Now().Add(time.Minute))
	require.NoError(t, err)
	require.True(t, done)
}

// vectorIDs lists the entries with a vector in each generation of the scope.
func (b *projectionBundle) vectorIDs(t *testing.T) map[int64][]string {
	t.Helper()
	ctx := context.Background()
	var table string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT table_name FROM vector_models WHERE model_id = $1`, hash.ModelID).Scan(&table))
	rows, err := b.pool.Query(ctx, `SELECT generation, entry_id FROM `+table+` WHERE tenant_id = $1 ORDER BY 1, 2`, b.scope.TenantID)
	require.NoError(t, err)
	defer rows.Close()
	out := map[int64][]string{}
	for rows.Next() {
		var g int64
		var id string
		require.NoError(t, rows.Scan(&g, &id))
		out[g] = append(out[g], id)
	}
	require.NoError(t, rows.Err())
	return out
}

// TestEmbedBacklogLanes: one run with three lanes drains a backlog of many claims
// (41 entries, claims of 4): every active entry gets exactly one vector, an entry
// that is no longer active but still queued (its status changed behind the store's
// back) gets none, and the queue is left empty.
func TestEmbedBacklogLanes(t *testing.T) {
	b := setupProjection(t, nil)
	want := make([]string, 0, 41)
	for i := range 41 {
		id := fmt.Sprintf("lane-%02d", i)
		b.create(t, id, fmt.Sprintf("memory %d of a burst", i))
		want = append(want, id)
	}
	_, err := b.pool.Exec(context.Background(), `UPDATE context_entries SET status = 'expired', ended_at_ms = updated_at_ms WHERE entry_id = 'lane-07'`)
	require.NoError(t, err)
	want = append(want[:7], want[8:]...)
	set := embeddingtest.NewSet(embeddingtest.Named{Name: contract.EmbedderHash, Embedder: hash.New()})
	lanes := memory.NewProjection(memory.ProjectionConfig{DB: b.db.Memory(), Embedders: set, Batch: 4, Parallel: 3})
	jobs := b.projectionJobs(t)
	done, err := lanes.EmbedBacklog(context.Background(), b.scope, time.Now().Add(time.Minute))
	require.NoError(t, err)
	require.True(t, done)
	require.Equal(t, map[int64][]string{1: want}, b.vectorIDs(t))
	var queued int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM entry_projection_queue`).Scan(&queued))
	require.Zero(t, queued)
	require.Equal(t, jobs, b.projectionJobs(t), "a run that drains its backlog within its budget enqueues no successor")
}

// projectionJobs counts the scope's projection jobs in the queue.
func (b *projectionBundle) projectionJobs(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job
		WHERE kind = $1 AND args->>'tenantId' = $2 AND args->>'projectId' = $3`,
		memory.ProjectionJob{}.Kind(), b.scope.TenantID, b.scope.ProjectID).Scan(&n))
	return n
}

// startJobs marks the scope's waiting projection jobs running, as if the run a test
// makes stood for them: a scope with a job waiting to start gets no other one.
func (b *projectionBundle) startJobs(t *testing.T) {
	t.Helper()
	_, err := b.pool.Exec(context.Background(), `UPDATE river_job SET state = 'running', attempted_at = now()
		WHERE kind = $1 AND state = 'available'`, memory.ProjectionJob{}.Kind())
	require.NoError(t, err)
}

// A run whose budget ends with entries still queued hands the rest over: before the
// lane's last batch it enqueues the scope's next projection job, once, and reports
// that it finished (so its own job is not snoozed into a second successor). Here the
// deadline has passed before the first batch: that batch is the last.
func TestEmbedBacklogHandsOver(t *testing.T) {
	b := setupProjection(t, nil)
	for i := range 20 {
		b.create(t, fmt.Sprintf("handover-%02d", i), fmt.Sprintf("memory %d of a burst", i))
	}
	set := embeddingtest.NewSet(embeddingtest.Named{Name: contract.EmbedderHash, Embedder: hash.New()})
	lanes := memory.NewProjection(memory.ProjectionConfig{DB: b.db.Memory(), Embedders: set, Batch: 4, Parallel: 2})
	b.startJobs(t)
	jobs := b.projectionJobs(t)
	done, err := lanes.EmbedBacklog(context.Background(), b.scope, time.Now())
	require.NoError(t, err)
	require.True(t, done, "the job it enqueued carries on")
	require.Len(t, b.vectorIDs(t)[1], 8, "each of the two lanes embedded its last batch")
	var queued int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM entry_projection_queue`).Scan(&queued))
	require.Equal(t, 12, queued)
	require.Equal(t, jobs+1, b.projectionJobs(t), "one successor for the run, not one per lane")
}

// A lane stores a batch while it claims and embeds the next: the store of each batch
// here goes ahead only once a later claim of the lane returned, which a lane that
// stores before it claims again never does (its store gives up and the drain fails).
func TestEmbedLaneStoresWhileItClaimsTheNext(t *testing.T) {
	b := setupProjection(t, nil)
	for i := range 10 {
		b.create(t, fmt.Sprintf("overlap-%02d", i), fmt.Sprintf("memory %d of a burst", i))
	}
	store := &overlapStore{ProjectionStore: b.db.Memory().Stores().Projection, nth: map[string]int{}}
	store.cond = sync.NewCond(&store.mu)
	set := embeddingtest.NewSet(embeddingtest.Named{Name: contract.EmbedderHash, Embedder: hash.New()})
	lane := memory.NewProjection(memory.ProjectionConfig{DB: projectionUoW{UnitOfWork: b.db.Memory(), store: store},
		Embedders: set, Batch: 4, Parallel: 1})
	done, err := lane.EmbedBacklog(context.Background(), b.scope, time.Now().Add(time.Minute))
	require.NoError(t, err)
	require.True(t, done)
	require.Len(t, b.vectorIDs(t)[1], 10)
	require.Equal(t, 4, store.claims, "three batches and the claim that found none")
}

// projectionUoW is a unit of work whose stores outside a transaction use store for the
// projection.
type projectionUoW struct {
	runtime.UnitOfWork[memory.Stores]
	store memory.ProjectionStore
}

func (u projectionUoW) Stores() memory.Stores {
	s := u.UnitOfWork.Stores()
	s.Projection = u.store
	return s
}

// overlapStore lets a batch's store go ahead only after a claim made later than the
// batch's own returned.
type overlapStore struct {
	memory.ProjectionStore
	mu     sync.Mutex
	cond   *sync.Cond
	claims int
	// nth numbers each claim by the claims returned up to it, itself included.
	nth map[string]int
}

func (s *overlapStore) ClaimBacklog(ctx context.Context, scope runtime.Scope, limit int, nowMs int64, lease time.Duration) (memory.Backlog, error) {
	b, err := s.ProjectionStore.ClaimBacklog(ctx, scope, limit, nowMs, lease)
	s.mu.Lock()
	s.claims++
	s.nth[b.Claim] = s.claims
	s.cond.Broadcast()
	s.mu.Unlock()
	return b, err
}

func (s *overlapStore) StoreBacklog(ctx context.Context, scope runtime.Scope, claim string, ids []string, vectors map[string][][]float32) error {
	s.mu.Lock()
	before := s.nth[claim]
	giveUp := time.AfterFunc(10*time.Second, func() {
		s.mu.Lock()
		s.claims = -1
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	defer giveUp.Stop()
	for s.claims == before {
		s.cond.Wait()
	}
	gaveUp := s.claims < 0
	s.mu.Unlock()
	if gaveUp {
		return errors.New("no claim of the lane came while its batch waited to be stored")
	}
	return s.ProjectionStore.StoreBacklog(ctx, scope, claim, ids, vectors)
}

// TestRebuildWritesBothGenerations: while a rebuild fills its generation, entries
// written meanwhile are embedded into both the active and the building generation,
// and entries retired meanwhile leave both; after the switch the new generation holds
// exactly the active entries and the old one is gone.
func TestRebuildWritesBothGenerations(t *testing.T) {
	t.Parallel()
	b := setupProjection(t, nil)
	ctx := context.Background()
	for i := range 6 {
		b.create(t, fmt.Sprintf("e%d", i), fmt.Sprintf("entry number %d", i))
	}
	b.drain(t)
	require.Equal(t, map[int64][]string{1: {"e0", "e1", "e2", "e3", "e4", "e5"}}, b.vectorIDs(t))

	res, created, err := b.projection.Rebuild(ctx, b.scope, &contract.RebuildProjectionRequest{})
	require.NoError(t, err)
	require.True(t, created)
	op := res.Operation
	step := func() bool {
		t.Helper()
		done, err := b.ops.RunOperation(ctx, b.scope, op.ID, time.Now()) // one step
		require.NoError(t, err)
		return done
	}
	step() // starts generation 2
	step() // embeds e0–e3 into it
	b.create(t, "new", "written during the rebuild")
	_, err = b.entries.Expire(ctx, b.p, &contract.ExpireEntryRequest{EntryID: "e1"})
	require.NoError(t, err)
	_, err = b.entries.Expire(ctx, b.p, &contract.ExpireEntryRequest{EntryID: "e5"})
	require.NoError(t, err)
	b.drain(t)
	require.Equal(t, map[int64][]string{1: {"e0", "e2", "e3", "e4", "new"}, 2: {"e0", "e2", "e3", "new"}}, b.vectorIDs(t))
	st, err := b.projection.Status(ctx, b.scope)
	require.NoError(t, err)
	require.EqualValues(t, 1, st.Generation, "the old generation serves until the switch")

	for !step() {
	}
	require.Equal(t, map[int64][]string{2: {"e0", "e2", "e3", "e4", "new"}}, b.vectorIDs(t))
	st, err = b.projection.Status(ctx, b.scope)
	require.NoError(t, err)
	require.EqualValues(t, 2, st.Generation)
	done, err := b.db.Operation().Stores().Operations.Operation(ctx, b.scope, op.ID)
	require.NoError(t, err)
	require.Equal(t, contract.OperationSucceeded, done.State)
	require.JSONEq(t, fmt.Sprintf(`{"generation":2,"model":%q,"dimensions":384,"embeddedEntries":6}`, hash.ModelID), string(done.Result))
}

// TestClaimBacklogLeases: concurrent workers claim disjoint batches; a released or
// expired claim is claimed again; storing under a lost claim keeps the new holder's
// rows queued.
func TestClaimBacklogLeases(t *testing.T) {
	t.Parallel()
	b := setupProjection(t, nil)
	ctx := context.Background()
	for i := range 5 {
		b.create(t, fmt.Sprintf("e%d", i), "text")
	}
	st := b.db.Memory().Stores().Projection
	now := time.Now().UnixMilli()
	first, err := st.ClaimBacklog(ctx, b.scope, 3, now, time.Minute)
	require.NoError(t, err)
	second, err := st.ClaimBacklog(ctx, b.scope, 3, now, time.Minute)
	require.NoError(t, err)
	require.Len(t, first.Entries, 3)
	require.Len(t, second.Entries, 2)
	require.Equal(t, []memory.Generation{{Number: 1, Model: hashModel}}, first.Generations)
	third, err := st.ClaimBacklog(ctx, b.scope, 3, now, time.Minute)
	require.NoError(t, err)
	require.Empty(t, third.Entries, "every row is leased")
	require.NoError(t, st.ReleaseBacklog(ctx, b.scope, second.Claim))
	again, err := st.ClaimBacklog(ctx, b.scope, 3, now, time.Minute)
	require.NoError(t, err)
	require.Equal(t, second.Entries, again.Entries)
	// The first worker's lease runs out; another takes its rows.
	late, err := st.ClaimBacklog(ctx, b.scope, 3, now+time.Minute.Milliseconds()+1, time.Minute)
	require.NoError(t, err)
	require.Equal(t, first.Entries, late.Entries)
	vectors, err := hash.New().Embed(ctx, []string{"text", "text", "text"})
	require.NoError(t, err)
	ids := []string{first.Entries[0].ID, first.Entries[1].ID, first.Entries[2].ID}
	require.NoError(t, st.StoreBacklog(ctx, b.scope, first.Claim, ids, map[string][][]float32{hash.ModelID: vectors}))
	status, err := st.Status(ctx, b.scope)
	require.NoError(t, err)
	require.EqualValues(t, 5, status.Pending, "the lost claim removed no queue row")
	require.NoError(t, st.StoreBacklog(ctx, b.scope, late.Claim, ids, map[string][][]float32{hash.ModelID: vectors}))
	status, err = st.Status(ctx, b.scope)
	require.NoError(t, err)
	require.EqualValues(t, 2, status.Pending)
	err = st.StoreBacklog(ctx, b.scope, again.Claim, []string{again.Entries[0].ID}, map[string][][]float32{"other-model": vectors[:1]})
	require.ErrorIs(t, err, memory.ErrProjectionChanged)
}

// TestStaleScopesFollowTheConfiguration: the sweep rebuilds a scope whose active model
// is not the configured one, unless a rebuild named its embedder (pinned) or one is in
// flight.
func TestStaleScopesFollowTheConfiguration(t *testing.T) {
	t.Parallel()
	local := memory.EmbeddingModel{ID: "fake-local", Dimensions: 8}
	set := embeddingtest.NewSet(embeddingtest.Named{Name: contract.EmbedderHash, Embedder: hash.New()},
		embeddingtest.Named{Name: contract.EmbedderLocal, Embedder: fixedEmbedder{local}})
	b := setupProjection(t, set)
	ctx := context.Background()
	scopes := map[string]runtime.Principal{}
	for _, tenant := range []string{"follows", "pinned", "busy"} {
		p := runtime.Principal{Scope: runtime.Scope{TenantID: tenant, ProjectID: "p"}}
		scopes[tenant] = p
		id := "e"
		_, _, err := b.entries.Create(ctx, p, &contract.CreateEntryRequest{ID: &id, Kind: "fact", Content: "x"})
		require.NoError(t, err)
	}
	name := contract.EmbedderHash
	res, _, err := b.projection.Rebuild(ctx, scopes["pinned"].Scope, &contract.RebuildProjectionRequest{Embedder: &name})
	require.NoError(t, err)
	for {
		done, err := b.ops.RunOperation(ctx, scopes["pinned"].Scope, res.Operation.ID, time.Now())
		require.NoError(t, err)
		if done {
			break
		}
	}
	_, _, err = b.projection.Rebuild(ctx, scopes["busy"].Scope, &contract.RebuildProjectionRequest{})
	require.NoError(t, err)
	var due []runtime.Scope
	require.NoError(t, b.db.Memory().WithinTx(ctx, func(ctx context.Context, tx memory.Stores) error {
		due, _, err = tx.Projection.StaleScopes(ctx, local.ID, nil, 10)
		return err
	}))
	require.Equal(t, []runtime.Scope{scopes["follows"].Scope}, due)
}

// fixedEmbedder embeds every text as the same unit vector of its model.
type fixedEmbedder struct{ model memory.EmbeddingModel }

func (e fixedEmbedder) Model() memory.EmbeddingModel { return e.model }

func (e fixedEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i := range out {
		out[i] = make([]float32, e.model.Dimensions)
		out[i][0] = 1
	}
	return out, nil
}

// TestWideModels: above 2,000 dimensions the vector table has a halfvec column with
// its HNSW index, above 4,000 a vector column without one (recall scans exactly);
// both find the nearest entries.
func TestWideModels(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	db := newDB(t, pool)
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		dims   int
		column string
		hnsw   bool
	}{{2048, "halfvec(2048)", true}, {4096, "vector(4096)", false}} {
		model := memory.EmbeddingModel{ID: fmt.Sprintf("wide-%d", c.dims), Dimensions: c.dims}
		scope := runtime.Scope{TenantID: model.ID, ProjectID: "p"}
		var entries []seedEntry
		for i := range 50 {
			v := make([]float32, c.dims)
			var n float64
			for j := range v {
				v[j] = float32(r.NormFloat64())
				n += float64(v[j]) * float64(v[j])
			}
			for j := range v {
				v[j] = float32(float64(v[j]) / math.Sqrt(n))
			}
			entries = append(entries, seedEntry{ID: fmt.Sprintf("e%02d", i), Kind: "fact", Content: "wide", Tags: []string{}, Vector: v})
		}
		seedProjection(t, pool, db, scope, model, entries)
		var table, column string
		require.NoError(t, pool.QueryRow(context.Background(), `
			SELECT m.table_name, format_type(a.atttypid, a.atttypmod) FROM vector_models m
			JOIN pg_attribute a ON a.attrelid = m.table_name::regclass AND a.attname = 'embedding'
			WHERE m.model_id = $1`, model.ID).Scan(&table, &column))
		require.Equal(t, c.column, column)
		var indexes int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_indexes WHERE indexname = $1`, table+"_hnsw").Scan(&indexes))
		require.Equal(t, c.hnsw, indexes == 1)
		hits, err := db.Recall().VectorSearch(context.Background(), scope, memory.VectorRecall{
			RecallFilter: memory.RecallFilter{NowMs: time.Now().UnixMilli()},
			Generation:   memory.Generation{Number: 1, Model: model}, Vector: entries[17].Vector, Limit: 5,
		})
		require.NoError(t, err)
		require.Len(t, hits, 5)
		require.Equal(t, "e17", hits[0].Entry.ID)
		require.InDelta(t, 1, hits[0].Score, 1e-3)
		require.Equal(t, exactNearest(entries, entries[17].Vector, 5), hitIDs(hits))
	}
}

// TestVectorTablesAreDistributedAsMade: on a Citus coordinator a model's vector table,
// made at run time, is distributed by tenant beside the schema's tables as it is made.
func TestVectorTablesAreDistributedAsMade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	db := newDB(t, pool)
	model := memory.EmbeddingModel{ID: "made-at-run-time", Dimensions: 8}
	require.NoError(t, db.Memory().Stores().Projection.EnsureModel(ctx, model))
	var table string
	var citus bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT table_name, EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')
		FROM vector_models WHERE model_id = $1`, model.ID).Scan(&table, &citus))
	if !citus {
		return
	}
	var colocated bool
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT p.partmethod = 'h' AND p.colocationid = (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'messages'::regclass)
		FROM pg_dist_partition p WHERE p.logicalrelid = $1::regclass`, table).Scan(&colocated))
	require.True(t, colocated, "%s is distributed by tenant beside messages", table)
}

// TestProjectionCollector: the backlog gauge counts every scope's queued entries.
func TestProjectionCollector(t *testing.T) {
	t.Parallel()
	b := setupProjection(t, nil)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(pgmetrics.NewProjectionCollector(b.pool, time.Nanosecond)) // every scrape reads
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP agent_context_vector_projection_backlog Entries written and not yet embedded into the vector projection, all scopes.
# TYPE agent_context_vector_projection_backlog gauge
agent_context_vector_projection_backlog 0
`), "agent_context_vector_projection_backlog"))
	b.create(t, "a", "one")
	b.create(t, "b", "two")
	require.Equal(t, 2.0, gaugeValue(t, reg, "agent_context_vector_projection_backlog"))
	require.Positive(t, gaugeValue(t, reg, "agent_context_vector_projection_oldest_pending_age_seconds")+1)
	require.Equal(t, 0.0, gaugeValue(t, reg, "agent_context_vector_projection_unindexed"))
	b.storeUnfolded(t, b.scope)
	require.Equal(t, 0.0, gaugeValue(t, reg, "agent_context_vector_projection_backlog"))
	require.Equal(t, 0.0, gaugeValue(t, reg, "agent_context_vector_projection_oldest_pending_age_seconds"))
	require.Equal(t, 2.0, gaugeValue(t, reg, "agent_context_vector_projection_unindexed"), "stored, not yet folded")
	b.drain(t)
	require.Equal(t, 0.0, gaugeValue(t, reg, "agent_context_vector_projection_unindexed"))
}

// gaugeValue gathers reg and returns the value of the gauge called name.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	require.Failf(t, "no such metric", "%s", name)
	return 0
}

// TestTextHalf: a keyword query finds every entry with any of its words; a question
// finds entries sharing two of its uncommon words, or an identifier, and nothing for
// words most entries contain; another scope's entries never count or match.
// TestTextHalf: the text half ranks by Okapi BM25 over the scope's active entries: any
// query term matches, terms are stemmed with stop words left out, a short entry
// outranks a long one holding the term once, a rare term outweighs a common one, and
// the score is the formula's, with the scope's own statistics (another scope's entries
// and the scope's superseded ones do not count).
func TestTextHalf(t *testing.T) {
	t.Parallel()
	b := setupProjection(t, nil)
	contents := map[string]string{
		"billing": "The billing service retries nightly.",
		"short":   "Quokkas deploy.",
		"long":    "The quokka team reviews every release note, the changelog and the staging calendar before lunch.",
		"zebra":   "A zebra crossing near the office.",
		"service": "A service crossing near the office.",
		"cache":   "The cache service warms up in the morning.",
		"lunch":   "The team service has lunch at noon.",
	}
	for id, content := range contents {
		b.create(t, id, content)
	}
	other := runtime.Principal{Scope: runtime.Scope{TenantID: "other", ProjectID: "p"}}
	for i := range 20 {
		id := fmt.Sprintf("o%d", i)
		_, _, err := b.entries.Create(context.Background(), other, &contract.CreateEntryRequest{ID: &id, Kind: "fact",
			Content: "the zebra quokka deploy runs slowly"})
		require.NoError(t, err)
	}
	_, err := b.entries.Correct(context.Background(), b.p, &contract.CorrectEntryRequest{EntryID: "lunch", Content: "The team has lunch at noon."})
	require.NoError(t, err)
	search := func(text string) []memory.RecallHit {
		t.Helper()
		hits, err := b.db.Recall().TextSearch(context.Background(), b.scope, memory.TextRecall{
			RecallFilter: memory.RecallFilter{NowMs: time.Now().UnixMilli()}, Text: text, Limit: 10})
		require.NoError(t, err)
		return hits
	}
	ids := func(text string) []string { return hitIDs(search(text)) }

	require.Equal(t, []string{"billing"}, ids("why does billing fail on mondays"), "one shared term is a match")
	require.Equal(t, []string{"short", "long"}, ids("quokka"), "the short entry first; quokkas is quokka")
	found := ids("zebra service crossing")
	require.Equal(t, []string{"zebra", "service"}, found[:2], "the rare term's entry first")
	require.ElementsMatch(t, []string{"billing", "cache"}, found[2:], "then those holding the common term only")
	require.Empty(t, ids("the and of"), "stop words alone match nothing")

	// The score is BM25's over this scope's active entries (the corrected one's new
	// version counted, its old one not).
	var docs, total float64
	lengths := map[string]float64{}
	for id, content := range contents {
		if id == "lunch" {
			content = "The team has lunch at noon."
		}
		_, n := postgres.EntryDocument(b.scope, content)
		lengths[id] = float64(n)
		docs, total = docs+1, total+float64(n)
	}
	avgdl := total / docs
	bm25 := func(df, length float64) float64 {
		idf := math.Log(1 + (docs-df+0.5)/(df+0.5))
		return idf * 2.2 / (1 + 1.2*(0.25+0.75*length/avgdl))
	}
	hits := search("zebra")
	require.Len(t, hits, 1)
	require.InDelta(t, bm25(1, lengths["zebra"]), hits[0].Score, 1e-9)
	hits = search("services")
	require.Len(t, hits, 3, "billing, service, cache: the corrected entry's old version holds it, its new one not")
	for _, h := range hits {
		require.InDelta(t, bm25(3, lengths[h.Entry.ID]), h.Score, 1e-9, h.Entry.ID)
	}
}

// TestEnglishTermsMatchPostgres: the service's stemmer and stop words are Postgres's
// english_stem dictionary's, on which the migration of existing documents relies.
func TestEnglishTermsMatchPostgres(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	words := strings.Fields(`the a running runs ran deployments deploying deployed quokkas billing retries nightly
		caroline's généralement naïve café привет 4711 ops generalization happiness was were being don t i've ours
		yourselves agreed agreement conditional relational hopefully skating sky dying lying news`)
	var stems []*string
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT array_agg((ts_lexize('english_stem', w))[1] ORDER BY ord) FROM unnest($1::text[]) WITH ORDINALITY AS u(w, ord)`,
		words).Scan(&stems))
	for i, w := range words {
		got, ok := postgres.EnglishTerm(w)
		if stems[i] == nil {
			require.False(t, ok, "%q is a stop word", w)
			continue
		}
		require.True(t, ok, w)
		require.Equal(t, *stems[i], got, w)
	}
}

// TestReplicasRebuildAlternately: two replicas (two DBs, each with its own catalog
// cache, on one database) rebuild one scope hash → local → hash → local → hash in
// turn. Each rebuild back to hash drops local's table, which the other replica still
// has in its cache; every step of every rebuild must succeed all the same, and
// the entries end up in the last generation.
func TestReplicasRebuildAlternately(t *testing.T) {
	t.Parallel()
	local := memory.EmbeddingModel{ID: "fake-local", Dimensions: 8}
	set := embeddingtest.NewSet(embeddingtest.Named{Name: contract.EmbedderHash, Embedder: hash.New()},
		embeddingtest.Named{Name: contract.EmbedderLocal, Embedder: fixedEmbedder{local}})
	a := setupProjection(t, set)
	ctx := context.Background()
	dbB := newDB(t, a.pool)
	projectionB := memory.NewProjection(memory.ProjectionConfig{DB: dbB.Memory(), Embedders: set, Batch: 4})
	require.NoError(t, projectionB.Prepare(ctx))
	replicas := []struct {
		projection *memory.Projection
		ops        *operation.Maintenance
	}{
		{a.projection, a.ops},
		{projectionB, operation.NewMaintenance(operation.MaintenanceConfig{DB: dbB.Operation(), Schema: dbB, Projection: projectionB, Rebuilds: projectionB})},
	}
	for i := range 6 {
		a.create(t, fmt.Sprintf("e%d", i), fmt.Sprintf("entry number %d", i))
	}
	a.drain(t)

	for i, name := range []string{contract.EmbedderLocal, contract.EmbedderHash, contract.EmbedderLocal, contract.EmbedderHash} {
		r := replicas[i%2]
		res, created, err := r.projection.Rebuild(ctx, a.scope, &contract.RebuildProjectionRequest{Embedder: &name})
		require.NoError(t, err, "rebuild %d to %s", i, name)
		require.True(t, created)
		for {
			done, err := r.ops.RunOperation(ctx, a.scope, res.Operation.ID, time.Now())
			require.NoError(t, err, "rebuild %d to %s", i, name)
			if done {
				break
			}
		}
		op, err := a.db.Operation().Stores().Operations.Operation(ctx, a.scope, res.Operation.ID)
		require.NoError(t, err)
		require.Equal(t, contract.OperationSucceeded, op.State, "rebuild %d to %s: %+v", i, name, op)
		var models []string
		require.NoError(t, a.pool.QueryRow(ctx, `SELECT array_agg(model_id ORDER BY model_id) FROM vector_models`).Scan(&models))
		want := []string{local.ID, hash.ModelID}
		if name == contract.EmbedderHash {
			want = []string{hash.ModelID} // the configured model's table stays; the other is dropped
		}
		require.Equal(t, want, models)
	}
	// The other replica writes and recalls on the model its cache last saw dropped.
	b := &projectionBundle{pool: a.pool, db: dbB, projection: projectionB, scope: a.scope, p: a.p,
		entries: memory.NewEntries(dbB.Memory(), nil, nil, set.Configured().Model())}
	b.create(t, "late", "written through the other replica")
	b.drain(t)
	ids := b.vectorIDs(t)
	require.Len(t, ids, 1)
	for _, got := range ids {
		require.Equal(t, []string{"e0", "e1", "e2", "e3", "e4", "e5", "late"}, got)
	}
}

// storeUnfolded embeds the scope's backlog and stores the vectors without folding
// them into the graph: what a burst leaves behind while its lanes embed.
func (b *projectionBundle) storeUnfolded(t *testing.T, scope runtime.Scope) {
	t.Helper()
	ctx := context.Background()
	st := b.db.Memory().Stores().Projection
	backlog, err := st.ClaimBacklog(ctx, scope, 1000, time.Now().UnixMilli(), time.Minute)
	require.NoError(t, err)
	texts := make([]string, len(backlog.Entries))
	ids := make([]string, len(backlog.Entries))
	for i, e := range backlog.Entries {
		texts[i], ids[i] = e.Content, e.ID
	}
	vectors, err := hash.New().Embed(ctx, texts)
	require.NoError(t, err)
	require.NoError(t, st.StoreBacklog(ctx, scope, backlog.Claim, ids, map[string][][]float32{hash.ModelID: vectors}))
}

// outside counts the vectors of every scope outside the graph.
func (b *projectionBundle) outside(t *testing.T) int {
	t.Helper()
	ctx := context.Background()
	var table string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT table_name FROM vector_models WHERE model_id = $1`, hash.ModelID).Scan(&table))
	var n int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM `+table+` WHERE NOT indexed`).Scan(&n))
	return n
}

// vectorSearch is the vector half of a recall of text in scope, for limit entries.
func (b *projectionBundle) vectorSearch(t *testing.T, scope runtime.Scope, text string, limit int, f memory.RecallFilter) []string {
	t.Helper()
	vectors, err := hash.New().Embed(context.Background(), []string{text})
	require.NoError(t, err)
	hits, err := b.db.Recall().VectorSearch(context.Background(), scope, memory.VectorRecall{
		RecallFilter: f, Generation: memory.Generation{Number: 1, Model: hash.New().Model()}, Vector: vectors[0], Limit: limit})
	require.NoError(t, err)
	return hitIDs(hits)
}

// TestUnfoldedVectorsAreRecalled: a vector stored and not yet folded into the graph
// is found by the vector half beside the graph's (with a filter, as of an instant,
// never from another scope); after the fold the answers are the same; an entry that
// stops being active leaves the projection whether its vector was folded or not.
func TestUnfoldedVectorsAreRecalled(t *testing.T) {
	t.Parallel()
	b := setupProjection(t, nil)
	ctx := context.Background()
	st := b.db.Memory().Stores().Projection
	for i := range 4 {
		b.create(t, fmt.Sprintf("old-%d", i), fmt.Sprintf("the archive job %d compresses the logs", i))
	}
	b.drain(t)
	require.Zero(t, b.outside(t), "the drained backlog is folded")

	const query = "billing retries nightly after the invoice run"
	other := runtime.Scope{TenantID: "u", ProjectID: "p"}
	create := func(p runtime.Principal, id, content string, tags ...string) contract.ContextEntry {
		e, _, err := b.entries.Create(ctx, p, &contract.CreateEntryRequest{ID: &id, Kind: "fact", Content: content, Tags: tags})
		require.NoError(t, err)
		return e
	}
	billing := create(b.p, "billing", query, "ops")
	create(b.p, "search", "search caches warm up before releases")
	create(runtime.Principal{Scope: other}, "theirs", query, "ops")
	b.storeUnfolded(t, b.scope)
	b.storeUnfolded(t, other)
	require.Equal(t, 3, b.outside(t))
	due, _, err := st.UnindexedScopes(ctx, nil, 10)
	require.NoError(t, err)
	require.Equal(t, []runtime.Scope{b.scope, other}, due, "the sweep finds both scopes to fold")

	now := time.Now().UnixMilli()
	before := billing.CreatedAtMs - 1
	answers := func() {
		t.Helper()
		// Limit 2: the graph's old entries alone fill it, so only the merge brings
		// the nearer unfolded ones.
		ids := b.vectorSearch(t, b.scope, query, 2, memory.RecallFilter{NowMs: now})
		require.Len(t, ids, 2)
		require.Equal(t, "billing", ids[0])
		require.Equal(t, []string{"billing"}, b.vectorSearch(t, b.scope, query, 1, memory.RecallFilter{NowMs: now, Tags: []string{"ops"}}))
		require.Equal(t, []string{"theirs"}, b.vectorSearch(t, other, query, 1, memory.RecallFilter{NowMs: now, Tags: []string{"ops"}}))
		require.ElementsMatch(t, []string{"old-0", "old-1", "old-2", "old-3"},
			b.vectorSearch(t, b.scope, query, 10, memory.RecallFilter{NowMs: now, AsOfMs: &before}),
			"billing and search were not created yet at that instant")
		require.Len(t, b.vectorSearch(t, b.scope, query, 2, memory.RecallFilter{NowMs: now, AsOfMs: &before}), 2,
			"entries created since, nearer to the query, do not take the places of the limit")
		require.Equal(t, "billing", b.vectorSearch(t, b.scope, query, 2, memory.RecallFilter{NowMs: now, AsOfMs: &now})[0])
	}
	answers()

	folded, err := st.FoldVectors(ctx, b.scope, 100, 5)
	require.NoError(t, err)
	require.Zero(t, folded, "within the bound nothing folds")
	folded, err = st.FoldVectors(ctx, b.scope, 1, 0)
	require.NoError(t, err)
	require.Equal(t, 1, folded, "a batch at most")
	folded, err = st.FoldVectors(ctx, b.scope, 100, 0)
	require.NoError(t, err)
	require.Equal(t, 1, folded)
	require.Equal(t, 1, b.outside(t), "the other scope's vector waits for its own fold")
	answers()
	folded, err = st.FoldVectors(ctx, other, 100, 0)
	require.NoError(t, err)
	require.Equal(t, 1, folded)
	require.Zero(t, b.outside(t))
	answers()
	due, _, err = st.UnindexedScopes(ctx, nil, 10)
	require.NoError(t, err)
	require.Empty(t, due)

	create(b.p, "unfolded", query+" again")
	b.storeUnfolded(t, b.scope)
	require.Equal(t, 1, b.outside(t))
	require.Contains(t, b.vectorSearch(t, b.scope, query, 2, memory.RecallFilter{NowMs: now}), "unfolded")
	for _, id := range []string{"unfolded", "billing"} {
		_, err := b.entries.Expire(ctx, b.p, &contract.ExpireEntryRequest{EntryID: id})
		require.NoError(t, err)
	}
	ids := b.vectorSearch(t, b.scope, query, 10, memory.RecallFilter{NowMs: time.Now().UnixMilli()})
	require.NotContains(t, ids, "unfolded")
	require.NotContains(t, ids, "billing")
	require.Zero(t, b.outside(t), "the unfolded vector is gone")
	require.Equal(t, map[int64][]string{1: {"old-0", "old-1", "old-2", "old-3", "search"}}, b.vectorIDs(t))
}

// TestRetiredVectorsOutsideAreNotDue: a scope whose only vectors outside the graph
// are of a retired generation is examined by the sweep's walk but not due (a fold
// would move nothing: it folds live generations only), and those vectors do not count
// towards the bound of a fold either; a live generation's vector outside makes the
// scope due again.
func TestRetiredVectorsOutsideAreNotDue(t *testing.T) {
	t.Parallel()
	b := setupProjection(t, nil)
	ctx := context.Background()
	st := b.db.Memory().Stores().Projection
	b.create(t, "first", "the archive job compresses the logs")
	b.storeUnfolded(t, b.scope)
	require.Equal(t, 1, b.outside(t))
	due, last, err := st.UnindexedScopes(ctx, nil, 10)
	require.NoError(t, err)
	require.Equal(t, []runtime.Scope{b.scope}, due)
	require.Equal(t, &b.scope, last)

	_, err = b.pool.Exec(ctx, `UPDATE entry_generations SET state = 'retired' WHERE tenant_id = $1 AND project_id = $2`,
		b.scope.TenantID, b.scope.ProjectID)
	require.NoError(t, err)
	due, last, err = st.UnindexedScopes(ctx, nil, 10)
	require.NoError(t, err)
	require.Empty(t, due, "only a retired generation's vector is outside")
	require.Equal(t, &b.scope, last, "the scope was examined")
	folded, err := st.FoldVectors(ctx, b.scope, 100, 0)
	require.NoError(t, err)
	require.Zero(t, folded)
	require.Equal(t, 1, b.outside(t))

	_, err = b.pool.Exec(ctx, `INSERT INTO entry_generations (tenant_id, project_id, generation, model_id, state, created_at_ms)
		VALUES ($1, $2, 2, $3, 'active', 0)`, b.scope.TenantID, b.scope.ProjectID, hash.ModelID)
	require.NoError(t, err)
	b.create(t, "second", "the billing job retries nightly")
	b.storeUnfolded(t, b.scope)
	require.Equal(t, 2, b.outside(t))
	due, _, err = st.UnindexedScopes(ctx, nil, 10)
	require.NoError(t, err)
	require.Equal(t, []runtime.Scope{b.scope}, due, "the active generation's vector is outside")
	folded, err = st.FoldVectors(ctx, b.scope, 100, 1)
	require.NoError(t, err)
	require.Zero(t, folded, "one live vector outside is within a bound of 1; the retired one does not count")
	folded, err = st.FoldVectors(ctx, b.scope, 100, 0)
	require.NoError(t, err)
	require.Equal(t, 1, folded, "the active generation's vector, not the retired one's")
	require.Equal(t, 1, b.outside(t))
}

// probeEmbedder runs probe before each Embed of the embedder it wraps.
type probeEmbedder struct {
	memory.Embedder
	probe func()
}

func (e probeEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	e.probe()
	return e.Embedder.Embed(ctx, texts)
}

// TestFoldBoundDuringBacklog: while a backlog is embedded, the scope never holds more
// than the bound outside the graph, plus the one batch a lane may have stored but not
// yet folded (it stores in the background while it embeds the next batch), when a
// batch starts: the lanes fold as they go. Once the backlog is empty, the job folds the
// rest.
func TestFoldBoundDuringBacklog(t *testing.T) {
	t.Parallel()
	b := setupProjection(t, nil)
	for i := range 30 {
		b.create(t, fmt.Sprintf("burst-%02d", i), fmt.Sprintf("memory %d of a burst", i))
	}
	var seen []int
	// Each probe first waits for the batches embedded before to be stored (the lane
	// stores them in the background), so that what it sees does not depend on how fast
	// the store runs beside the embedding.
	probe := probeEmbedder{Embedder: hash.New(), probe: func() {
		stored := 4 * len(seen)
		require.Eventually(t, func() bool { return len(b.vectorIDs(t)[1]) >= stored }, 10*time.Second, 5*time.Millisecond,
			"the %d vectors of the batches before are stored", stored)
		seen = append(seen, b.outside(t))
	}}
	set := embeddingtest.NewSet(embeddingtest.Named{Name: contract.EmbedderHash, Embedder: probe})
	const bound = 6
	p := memory.NewProjection(memory.ProjectionConfig{DB: b.db.Memory(), Embedders: set, Batch: 4, Parallel: 1,
		FoldBatch: 8, Unindexed: bound})
	done, err := p.EmbedBacklog(context.Background(), b.scope, time.Now().Add(time.Minute))
	require.NoError(t, err)
	require.True(t, done)
	require.Len(t, seen, 8, "30 entries in batches of 4")
	require.LessOrEqual(t, slices.Max(seen), bound+4, "outside the graph by batch: %v", seen)
	require.Positive(t, slices.Max(seen), "the backlog stores before it folds: %v", seen)
	require.Zero(t, b.outside(t), "the rest is folded once the backlog is empty")
	ids := b.vectorIDs(t)[1]
	require.Len(t, ids, 30)
}

// TestProjectionPacksText: a scope holding more text postings unpacked than the bound
// is due for the sweep, and a projection run packs them until the bound holds; a
// deleted entry's packed postings make the scope due again whatever the bound, and
// the next run takes them out of the blocks. Recall finds the same entries throughout.
func TestProjectionPacksText(t *testing.T) {
	t.Parallel()
	b := setupProjection(t, nil)
	ctx := context.Background()
	st := b.db.Memory().Stores().Projection
	for i := range 30 {
		b.create(t, fmt.Sprintf("e-%02d", i), fmt.Sprintf("the ledger service %d retries billing nightly", i))
	}
	count := func(query string) int {
		t.Helper()
		var n int
		require.NoError(t, b.pool.QueryRow(ctx, query, b.scope.TenantID, b.scope.ProjectID).Scan(&n))
		return n
	}
	pending := func() int {
		return count(`SELECT count(*) FROM entry_text_postings WHERE tenant_id = $1 AND project_id = $2`)
	}
	packed := func() int {
		return count(`SELECT coalesce(sum(postings), 0) FROM entry_text_blocks WHERE tenant_id = $1 AND project_id = $2`)
	}
	recalled := func() []string {
		t.Helper()
		hits, err := b.db.Recall().TextSearch(ctx, b.scope, memory.TextRecall{
			RecallFilter: memory.RecallFilter{NowMs: time.Now().UnixMilli()}, Text: "ledger 7", Limit: 3})
		require.NoError(t, err)
		return hitIDs(hits)
	}
	before := recalled()
	require.Equal(t, "e-07", before[0])
	total := pending()
	require.Equal(t, 30*6, total, "six terms each (the stop word left out)")
	const bound = 40
	due, last, err := st.PendingTextScopes(ctx, nil, 10, bound)
	require.NoError(t, err)
	require.Equal(t, []runtime.Scope{b.scope}, due)
	require.Equal(t, &b.scope, last)

	set := embeddingtest.NewSet(embeddingtest.Named{Name: contract.EmbedderHash, Embedder: hash.New()})
	p := memory.NewProjection(memory.ProjectionConfig{DB: b.db.Memory(), Embedders: set, Batch: 4, PendingPostings: bound})
	done, err := p.EmbedBacklog(ctx, b.scope, time.Now().Add(time.Minute))
	require.NoError(t, err)
	require.True(t, done)
	require.Zero(t, pending(), "a pack takes up to 20,000")
	require.Equal(t, total, packed())
	require.Equal(t, before, recalled())
	b.create(t, "e-30", "the ledger service 30 retries billing nightly")
	b.drain(t)
	due, last, err = st.PendingTextScopes(ctx, nil, 10, bound)
	require.NoError(t, err)
	require.Empty(t, due, "within the bound")
	require.Equal(t, &b.scope, last, "examined all the same")
	total += 6

	var packedID string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT entry_id FROM context_entries
		WHERE text_ord = (SELECT min(first_ord) FROM entry_text_blocks WHERE tenant_id = $1)`,
		b.scope.TenantID).Scan(&packedID))
	require.NoError(t, postgres.DeleteEntries(ctx, b.pool, b.scope, []string{packedID}))
	require.Equal(t, 6, count(`SELECT count(*) FROM entry_text_dropped WHERE tenant_id = $1 AND project_id = $2`))
	due, _, err = st.PendingTextScopes(ctx, nil, 10, bound)
	require.NoError(t, err)
	require.Equal(t, []runtime.Scope{b.scope}, due, "a dropped posting makes the scope due")
	b.startJobs(t)
	jobs := b.projectionJobs(t)
	finished, err := p.Sweep(ctx, time.Now().Add(time.Minute))
	require.NoError(t, err)
	require.True(t, finished)
	require.Equal(t, jobs+1, b.projectionJobs(t), "the sweep enqueues the scope's job")
	done, err = p.EmbedBacklog(ctx, b.scope, time.Now().Add(time.Minute))
	require.NoError(t, err)
	require.True(t, done)
	require.Zero(t, count(`SELECT count(*) FROM entry_text_dropped WHERE tenant_id = $1 AND project_id = $2`))
	require.Equal(t, total-6, pending()+packed(), "the deleted entry's postings are out of the blocks")
}

// TestEmbedInputsHoldThePreviousEntry: the backlog and a rebuild read, with every
// entry, the content of the entry written just before it in its conversation, in any
// status, but not of one it supersedes; an entry of no conversation has none.
func TestEmbedInputsHoldThePreviousEntry(t *testing.T) {
	t.Parallel()
	b := setupProjection(t, nil)
	ctx := context.Background()
	create := func(id, conversation, content string) {
		req := &contract.CreateEntryRequest{ID: &id, Kind: "observation", Content: content}
		if conversation != "" {
			req.ConversationID = &conversation
		}
		_, _, err := b.entries.Create(ctx, b.p, req)
		require.NoError(t, err)
	}
	create("a1", "a", "Ann: How was the trip?")
	create("b1", "b", "Bob: Hello.")
	create("a2", "a", "Cid: Long, but the mountains were worth it.")
	create("x", "", "A fact of no conversation.")
	create("a3", "a", "Ann: Which mountains?")
	corrected, err := b.entries.Correct(ctx, b.p, &contract.CorrectEntryRequest{EntryID: "a3", Content: "Ann: Which mountains did you see?"})
	require.NoError(t, err)
	want := map[string]string{
		"a1": "", "b1": "", "x": "",
		"a2":               "Ann: How was the trip?",
		corrected.Entry.ID: "Cid: Long, but the mountains were worth it.",
	}
	backlog, err := b.db.Memory().Stores().Projection.ClaimBacklog(ctx, b.scope, 100, time.Now().UnixMilli(), time.Minute)
	require.NoError(t, err)
	got := map[string]string{}
	for _, in := range backlog.Entries {
		got[in.ID] = in.Previous
	}
	require.Equal(t, want, got, "the backlog")
	active, err := b.db.Memory().Stores().Entries.ActiveEntries(ctx, b.scope, "", 100, time.Now().UnixMilli())
	require.NoError(t, err)
	got = map[string]string{}
	for _, in := range active {
		got[in.ID] = in.Previous
	}
	require.Equal(t, want, got, "a rebuild")
}
