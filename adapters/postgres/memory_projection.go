package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pgvector/pgvector-go"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/memory"
	"github.com/agent-context/agent-context/runtime/operation"
)

// The vector projection's tables (migration 00007, docs/entries.md): one vector table
// per embedding model, entry_vectors_<n>, created by EnsureModel and listed in
// vector_models; in it, every scope's generations of that model, keyed by
// (tenant_id, project_id, generation, entry_id). The filter columns of recall (kind,
// tags, conversation_id, expires_at_ms) are copied from the entry, since they never
// change while an entry is active (and an entry that stops being active loses its
// vectors in the same transaction), so the filter is applied inside the index scan.
//
// A vector lands outside the HNSW graph (indexed = false; the HNSW index is partial,
// WHERE indexed), so storing it costs a heap row and two btree entries, not a graph
// insert; recall searches those rows exactly beside the graph (vectorSQL), found by
// the partial index <table>_unindexed, and the projection job folds them into the
// graph in batches (FoldVectors) once the scope's backlog is empty, or during a
// backlog once a scope holds more than a bound of them. A flag rather than a twin
// table: every path that deletes or rewrites a scope's vectors (retirement,
// conversation deletion, the drop of a retired generation) stays one statement on
// one table, and the fold is an UPDATE that either commits or leaves its rows as they
// were. Tables without a graph (above 4,000 dimensions) store their rows as indexed:
// there is nothing to fold them into.

// Vector column types by dimensions: vector up to 2,000 dimensions, halfvec up to
// 4,000 (pgvector's HNSW index takes halfvec up to 4,000), vector again above that, in
// a table with no HNSW index whose scopes recall scans exactly. The graph indexes the
// vectors as halfvec whatever the column (migration 00030): half the pages of a graph
// of vectors, so twice as much of it stays in shared buffers, at the same recall@10
// against an exact scan (docs/benchmarks.md, "The HNSW graph over halfvec"). It
// orders the candidates only: their distances, and the order recall returns, are the
// column's own.
const (
	maxVectorIndexDims  = 2000
	maxHalfvecIndexDims = 4000
)

// HNSW build parameters: m links per node and the candidate list of a build. With
// them, recall@10 of the vector half stays at or above 0.98 against an exact scan at
// 100,000 entries (docs/benchmarks.md).
const (
	hnswM              = 16
	hnswEfConstruction = 200
)

// vectorTable is the vector table of one model.
type vectorTable struct {
	Name  string
	Model memory.EmbeddingModel
}

// column is the SQL type of the embedding column.
func (t vectorTable) column() string {
	if t.Model.Dimensions > maxVectorIndexDims && t.Model.Dimensions <= maxHalfvecIndexDims {
		return fmt.Sprintf("halfvec(%d)", t.Model.Dimensions)
	}
	return fmt.Sprintf("vector(%d)", t.Model.Dimensions)
}

func (t vectorTable) ident() string { return pgx.Identifier{t.Name}.Sanitize() }

// vectorCatalog caches vector_models for the statements that read and write vectors:
// a model's table never changes its name while it exists. Another replica may drop it
// (its last generation retired) and a later rebuild create the model's table again
// under a new name, so the cache is a hint, never trusted where it matters: a
// statement that finds the table gone (42P01) forgets it, and whatever starts a
// generation of a model checks the model's table under the catalog's advisory lock
// (ensureModelLocked), which a drop takes too.
type vectorCatalog struct {
	mu      sync.RWMutex
	byModel map[string]vectorTable
}

func newVectorCatalog() *vectorCatalog { return &vectorCatalog{byModel: map[string]vectorTable{}} }

// lookup returns the table of model.
func (c *vectorCatalog) lookup(ctx context.Context, db DBTX, model string) (vectorTable, error) {
	c.mu.RLock()
	t, ok := c.byModel[model]
	c.mu.RUnlock()
	if ok {
		return t, nil
	}
	t, found, err := readVectorModel(ctx, db, model)
	if err != nil {
		return vectorTable{}, err
	}
	if !found {
		return vectorTable{}, fmt.Errorf("no vector table for model %q", model)
	}
	c.remember(t)
	return t, nil
}

// readVectorModel reads the catalog row of model.
func readVectorModel(ctx context.Context, db DBTX, model string) (vectorTable, bool, error) {
	t := vectorTable{Model: memory.EmbeddingModel{ID: model}}
	err := db.QueryRow(ctx, `SELECT table_name, dimensions FROM vector_models WHERE model_id = $1`, model).
		Scan(&t.Name, &t.Model.Dimensions)
	if errors.Is(err, pgx.ErrNoRows) {
		return vectorTable{}, false, nil
	}
	if err != nil {
		return vectorTable{}, false, translate(err)
	}
	return t, true, nil
}

func (c *vectorCatalog) remember(t vectorTable) {
	c.mu.Lock()
	c.byModel[t.Model.ID] = t
	c.mu.Unlock()
}

func (c *vectorCatalog) forget(model string) {
	c.mu.Lock()
	delete(c.byModel, model)
	c.mu.Unlock()
}

// translate translates an error of a statement on t, forgetting t when it was dropped
// meanwhile (by another replica), so the next lookup reads vector_models again.
func (c *vectorCatalog) translate(t vectorTable, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == sqlstateUndefinedTable {
		c.forget(t.Model.ID)
	}
	return translate(err)
}

// ProjectionStore implements memory.ProjectionStore.
type ProjectionStore struct {
	db      DBTX
	catalog *vectorCatalog
}

var _ memory.ProjectionStore = (*ProjectionStore)(nil)

// catalogLock serializes the changes of vector_models across replicas.
const catalogLock = `SELECT pg_advisory_xact_lock(hashtext('agent-context.vector_models'))`

// EnsureModel implements memory.ProjectionStore. It reads the catalog under its
// advisory lock every time, never from this process's cache: another replica may have
// dropped the model's table since. Replicas serialize on the lock, so a model gets
// exactly one table.
func (s *ProjectionStore) EnsureModel(ctx context.Context, model memory.EmbeddingModel) error {
	return inTx(ctx, s.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, catalogLock); err != nil {
			return translate(err)
		}
		_, err := s.ensureModelLocked(ctx, tx, model)
		return err
	})
}

// ensureModelLocked returns the vector table of model, creating it when there is
// none. The caller holds the catalog's advisory lock until its transaction ends, so
// that no replica drops the table before a generation of the model, written in the
// same transaction, holds it (dropUnused takes the lock too).
func (s *ProjectionStore) ensureModelLocked(ctx context.Context, tx DBTX, model memory.EmbeddingModel) (vectorTable, error) {
	t, found, err := readVectorModel(ctx, tx, model.ID)
	if err != nil {
		return vectorTable{}, err
	}
	if found {
		s.catalog.remember(t)
		return t, sameDimensions(t, model)
	}
	s.catalog.forget(model.ID)
	t = vectorTable{Model: model}
	var n int64
	if err := tx.QueryRow(ctx, `SELECT nextval('vector_model_tables')`).Scan(&n); err != nil {
		return vectorTable{}, translate(err)
	}
	t.Name = "entry_vectors_" + strconv.FormatInt(n, 10)
	ddl := []string{
		fmt.Sprintf(`CREATE TABLE %s (
			tenant_id        text   NOT NULL,
			project_id       text   NOT NULL,
			generation       bigint NOT NULL,
			entry_id         text   NOT NULL,
			conversation_id  text,
			kind             text   NOT NULL,
			tags             text[] NOT NULL,
			expires_at_ms    bigint,
			embedding        %s NOT NULL,
			indexed          boolean NOT NULL DEFAULT false,
			PRIMARY KEY (tenant_id, project_id, generation, entry_id))
			WITH (toast_tuple_target = %d)`, t.ident(), t.column(), vectorToastTarget),
		fmt.Sprintf(`CREATE INDEX %s ON %s (tenant_id, project_id, conversation_id)`,
			pgx.Identifier{t.Name + "_by_conversation"}.Sanitize(), t.ident()),
		fmt.Sprintf(`CREATE INDEX %s ON %s USING gin (tenant_id, project_id, generation, tags)`,
			pgx.Identifier{t.Name + "_by_tags"}.Sanitize(), t.ident()),
		fmt.Sprintf(`CREATE INDEX %s ON %s (tenant_id, project_id, generation, entry_id) WHERE NOT indexed`,
			pgx.Identifier{t.Name + "_unindexed"}.Sanitize(), t.ident()),
		fmt.Sprintf(`COMMENT ON TABLE %s IS %s`, t.ident(), quoteLiteral("vectors of model "+model.ID)),
	}
	if t.graphed() {
		ddl = append(ddl, fmt.Sprintf(`CREATE INDEX %s ON %s USING hnsw (%s halfvec_cosine_ops) WITH (m = %d, ef_construction = %d) WHERE indexed`,
			pgx.Identifier{t.Name + "_hnsw"}.Sanitize(), t.ident(), t.graphKey(""), hnswM, hnswEfConstruction))
	}
	for _, stmt := range ddl {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return vectorTable{}, translate(err)
		}
	}
	if err := distributeCreated(ctx, tx, t.Name); err != nil {
		return vectorTable{}, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO vector_models (model_id, dimensions, table_name, created_at_ms)
		VALUES ($1, $2, $3, $4)`, model.ID, model.Dimensions, t.Name, time.Now().UnixMilli()); err != nil {
		return vectorTable{}, translate(err)
	}
	s.catalog.remember(t)
	return t, nil
}

// vectorToastTarget is the vector tables' toast_tuple_target, the largest Postgres
// accepts: a row is toasted only when it does not fit a page, so a vector of up to
// about 1,900 dimensions (twice as many as halfvec) stays in its row. At the default (2 KiB) a row of 512
// dimensions had its vector moved out of line, and ranking a scope exactly read it
// back through the TOAST table's index, row by row: 3,000 buffers for 369 rows
// (docs/benchmarks.md, "Recall latency on LoCoMo conversations"). Migration 00035 sets
// it on the tables created before.
const vectorToastTarget = 8160

// graphed reports whether the table has an HNSW graph.
func (t vectorTable) graphed() bool { return t.Model.Dimensions <= maxHalfvecIndexDims }

// graphKey is the expression the table's HNSW graph indexes, the embedding as halfvec,
// with the table's alias in a query (alias "v." or "").
func (t vectorTable) graphKey(alias string) string {
	if t.Model.Dimensions <= maxVectorIndexDims {
		return fmt.Sprintf("(%sembedding::halfvec(%d))", alias, t.Model.Dimensions)
	}
	return alias + "embedding"
}

func sameDimensions(t vectorTable, model memory.EmbeddingModel) error {
	if t.Model.Dimensions != model.Dimensions {
		return fmt.Errorf("model %q has %d dimensions here, and its vector table %s has %d",
			model.ID, model.Dimensions, t.Name, t.Model.Dimensions)
	}
	return nil
}

func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// Enqueue implements memory.ProjectionStore.
func (s *ProjectionStore) Enqueue(ctx context.Context, scope runtime.Scope, entries []contract.ContextEntry, model memory.EmbeddingModel) error {
	n := len(entries)
	ids, conversations, created := make([]string, n), make([]*string, n), make([]int64, n)
	for i, e := range entries {
		ids[i], conversations[i], created[i] = e.ID, e.ConversationID, e.CreatedAtMs
	}
	var active bool
	err := s.db.QueryRow(ctx, `
		WITH queued AS (
			INSERT INTO entry_projection_queue (tenant_id, project_id, entry_id, conversation_id, created_at_ms)
			SELECT $1, $2, u.entry_id, u.conversation_id, u.created_at_ms
			FROM unnest($3::text[], $4::text[], $5::bigint[]) AS u(entry_id, conversation_id, created_at_ms)
			ON CONFLICT DO NOTHING
		)
		SELECT EXISTS (SELECT 1 FROM entry_generations
		               WHERE tenant_id = $1 AND project_id = $2 AND state = 'active')`,
		scope.TenantID, scope.ProjectID, ids, conversations, created).Scan(&active)
	if err != nil || active {
		return translate(err)
	}
	// The scope's first entry: its projection starts at the next generation of the
	// configured model (1, unless a rebuild ran before any entry existed).
	next, err := lockProjectionHead(ctx, s.db, scope)
	if err != nil {
		return err
	}
	// The model's table may have been dropped by another replica since this one
	// prepared it: check under the catalog's lock, held until the generation commits.
	if _, err := s.db.Exec(ctx, catalogLock); err != nil {
		return translate(err)
	}
	if _, err := s.ensureModelLocked(ctx, s.db, model); err != nil {
		return err
	}
	_, err = s.db.Exec(ctx, `
		WITH started AS (
			INSERT INTO entry_generations (tenant_id, project_id, generation, model_id, state, created_at_ms)
			SELECT $1, $2, $3, $4, 'active', $5
			WHERE NOT EXISTS (SELECT 1 FROM entry_generations
			                  WHERE tenant_id = $1 AND project_id = $2 AND state = 'active')
			RETURNING generation
		)
		UPDATE entry_projections SET next_generation = next_generation + 1
		WHERE tenant_id = $1 AND project_id = $2 AND EXISTS (SELECT 1 FROM started)`,
		scope.TenantID, scope.ProjectID, next, model.ID, time.Now().UnixMilli())
	return translate(err)
}

// lockProjectionHead creates the scope's projection head when it has none, locks it until the
// transaction ends and returns its next generation number.
func lockProjectionHead(ctx context.Context, db DBTX, scope runtime.Scope) (int64, error) {
	var next int64
	// The no-op update takes the row lock, and returns the row whether it was created
	// now or existed.
	err := db.QueryRow(ctx, `
		INSERT INTO entry_projections AS p (tenant_id, project_id, next_generation) VALUES ($1, $2, 1)
		ON CONFLICT (tenant_id, project_id) DO UPDATE SET next_generation = p.next_generation
		RETURNING next_generation`,
		scope.TenantID, scope.ProjectID).Scan(&next)
	return next, translate(err)
}

// LockProjection implements memory.ProjectionStore.
func (s *ProjectionStore) LockProjection(ctx context.Context, scope runtime.Scope) error {
	_, err := lockProjectionHead(ctx, s.db, scope)
	return err
}

// scopeTables returns the vector tables holding generations of the scope, with the
// generation numbers in each (states as given; none: every state).
func (s *ProjectionStore) scopeTables(ctx context.Context, db DBTX, scope runtime.Scope, states ...string) (map[vectorTable][]int64, error) {
	if len(states) == 0 {
		states = []string{"building", "active", "retired"}
	}
	rows, err := db.Query(ctx, `
		SELECT g.model_id, g.generation FROM entry_generations g
		WHERE g.tenant_id = $1 AND g.project_id = $2 AND g.state = ANY($3)
		ORDER BY g.generation`, scope.TenantID, scope.ProjectID, states)
	if err != nil {
		return nil, translate(err)
	}
	type gen struct {
		Model      string
		Generation int64
	}
	gens, err := pgx.CollectRows(rows, pgx.RowToStructByPos[gen])
	if err != nil {
		return nil, translate(err)
	}
	out := map[vectorTable][]int64{}
	for _, g := range gens {
		t, err := s.catalog.lookup(ctx, db, g.Model)
		if err != nil {
			return nil, err
		}
		out[t] = append(out[t], g.Generation)
	}
	return out, nil
}

// Retire implements memory.ProjectionStore: one delete per vector table of the
// scope, each an index lookup by (generation, entry) pairs.
func (s *ProjectionStore) Retire(ctx context.Context, scope runtime.Scope, ids []string) error {
	if _, err := s.db.Exec(ctx, `
		DELETE FROM entry_projection_queue WHERE tenant_id = $1 AND project_id = $2 AND entry_id = ANY($3)`,
		scope.TenantID, scope.ProjectID, ids); err != nil {
		return translate(err)
	}
	tables, err := s.scopeTables(ctx, s.db, scope)
	if err != nil {
		return err
	}
	for t, gens := range tables {
		if _, err := s.db.Exec(ctx, fmt.Sprintf(`
			DELETE FROM %s WHERE tenant_id = $1 AND project_id = $2 AND generation = ANY($3) AND entry_id = ANY($4)`,
			t.ident()), scope.TenantID, scope.ProjectID, gens, ids); err != nil {
			return s.catalog.translate(t, err)
		}
	}
	return nil
}

// Status implements memory.ProjectionStore with one statement.
func (s *ProjectionStore) Status(ctx context.Context, scope runtime.Scope) (memory.ProjectionStatus, error) {
	var st memory.ProjectionStatus
	var generation *int64
	var model *string
	var dims *int
	var oldestPending, newest *int64
	err := s.db.QueryRow(ctx, `
		SELECT g.generation, g.model_id, m.dimensions,
		       (SELECT count(*) FROM entry_projection_queue q WHERE q.tenant_id = $1 AND q.project_id = $2),
		       (SELECT min(created_at_ms) FROM entry_projection_queue q WHERE q.tenant_id = $1 AND q.project_id = $2),
		       (SELECT max(created_at_ms) FROM context_entries e WHERE e.tenant_id = $1 AND e.project_id = $2),
		       (SELECT coalesce(sum(s.docs), 0) FROM entry_text_stats s WHERE s.tenant_id = $1 AND s.project_id = $2)
		FROM (SELECT 1) one
		LEFT JOIN entry_generations g ON g.tenant_id = $1 AND g.project_id = $2 AND g.state = 'active'
		LEFT JOIN vector_models m ON m.model_id = g.model_id`,
		scope.TenantID, scope.ProjectID).Scan(&generation, &model, &dims, &st.Pending, &oldestPending, &newest, &st.Entries)
	if err != nil {
		return memory.ProjectionStatus{}, translate(err)
	}
	if generation != nil && model != nil && dims != nil {
		st.Generation = memory.Generation{Number: *generation, Model: memory.EmbeddingModel{ID: *model, Dimensions: *dims}}
	}
	switch {
	case oldestPending != nil:
		st.IndexedThroughMs = max(*oldestPending-1, 0)
	case newest != nil:
		st.IndexedThroughMs = *newest
	}
	return st, nil
}

// liveGenerations returns the generations new vectors go into: the active one and a
// building one whose rebuild is still in flight.
func liveGenerations(ctx context.Context, db DBTX, scope runtime.Scope) ([]memory.Generation, error) {
	rows, err := db.Query(ctx, `
		SELECT g.generation, g.model_id, m.dimensions
		FROM entry_generations g
		JOIN vector_models m ON m.model_id = g.model_id
		LEFT JOIN operations o ON o.tenant_id = g.tenant_id AND o.project_id = g.project_id AND o.operation_id = g.operation_id
		WHERE g.tenant_id = $1 AND g.project_id = $2
		  AND (g.state = 'active' OR (g.state = 'building' AND o.state IN ('pending', 'running')))
		ORDER BY g.generation`, scope.TenantID, scope.ProjectID)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	var gens []memory.Generation
	for rows.Next() {
		var g memory.Generation
		if err := rows.Scan(&g.Number, &g.Model.ID, &g.Model.Dimensions); err != nil {
			return nil, translate(err)
		}
		gens = append(gens, g)
	}
	return gens, translate(rows.Err())
}

// ClaimBacklog implements memory.ProjectionStore: one statement claims the oldest
// unleased rows (skipping those another worker is claiming right now), a second reads
// their entries by primary key, and a third drops the rows whose entry is no longer to
// be embedded. Every statement finds its rows by key, never by a join the planner
// could turn into a pass over the scope per row, and is planned for its arguments
// (customPlans): a burst into a scope the statistics have not seen yet is exactly
// when the estimates are wrong. The claim walks the queue's index in its order
// (created_at_ms, entry_id), so it reads about limit rows however long the backlog,
// and updates the rows it locked by their keys.
func (s *ProjectionStore) ClaimBacklog(ctx context.Context, scope runtime.Scope, limit int, nowMs int64, lease time.Duration) (memory.Backlog, error) {
	b := memory.Backlog{Claim: uuid.NewString()}
	err := inTx(ctx, s.db, func(tx pgx.Tx) error {
		if err := setLocal(ctx, tx, customPlans); err != nil {
			return err
		}
		var err error
		if b.Generations, err = liveGenerations(ctx, tx, scope); err != nil || len(b.Generations) == 0 {
			return err
		}
		rows, err := tx.Query(ctx, `
			UPDATE entry_projection_queue q SET claim = $5, claimed_until_ms = $6
			WHERE q.tenant_id = $1 AND q.project_id = $2 AND q.entry_id = ANY(ARRAY(
				SELECT p.entry_id FROM entry_projection_queue p
				WHERE p.tenant_id = $1 AND p.project_id = $2 AND p.claimed_until_ms <= $3
				ORDER BY p.created_at_ms, p.entry_id
				LIMIT $4
				FOR UPDATE SKIP LOCKED))
			RETURNING q.entry_id`,
			scope.TenantID, scope.ProjectID, nowMs, limit, b.Claim, nowMs+lease.Milliseconds())
		if err != nil {
			return translate(err)
		}
		claimed, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(claimed) == 0 {
			return translate(err)
		}
		rows, err = tx.Query(ctx, `
			SELECT e.entry_id, e.content, `+previousContent("e")+` FROM context_entries e
			WHERE e.tenant_id = $1 AND e.project_id = $2 AND e.entry_id = ANY($3)
			  AND e.status = 'active' AND (e.expires_at_ms IS NULL OR e.expires_at_ms > $4) AND `+liveConversation("e")+`
			ORDER BY e.created_at_ms, e.entry_id`,
			scope.TenantID, scope.ProjectID, claimed, nowMs)
		if err != nil {
			return translate(err)
		}
		b.Entries, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (memory.EmbedInput, error) {
			var in memory.EmbedInput
			return in, row.Scan(&in.ID, &in.Content, &in.Previous)
		})
		if err != nil {
			return translate(err)
		}
		if len(b.Entries) == len(claimed) {
			return nil
		}
		live := make(map[string]bool, len(b.Entries))
		for _, e := range b.Entries {
			live[e.ID] = true
		}
		var gone []string
		for _, id := range claimed {
			if !live[id] {
				gone = append(gone, id)
			}
		}
		_, err = tx.Exec(ctx, `
			DELETE FROM entry_projection_queue WHERE tenant_id = $1 AND project_id = $2 AND entry_id = ANY($3)`,
			scope.TenantID, scope.ProjectID, gone)
		return translate(err)
	})
	if err != nil {
		return memory.Backlog{}, err
	}
	return b, nil
}

// ReleaseBacklog implements memory.ProjectionStore.
func (s *ProjectionStore) ReleaseBacklog(ctx context.Context, scope runtime.Scope, claim string) error {
	_, err := s.db.Exec(ctx, `
		UPDATE entry_projection_queue SET claim = NULL, claimed_until_ms = 0
		WHERE tenant_id = $1 AND project_id = $2 AND claim = $3`, scope.TenantID, scope.ProjectID, claim)
	return translate(err)
}

// StoreBacklog implements memory.ProjectionStore. The head is held FOR SHARE, so a
// generation switch (which takes it FOR UPDATE) comes entirely before or after. Its
// statements are planned for their arguments, as the claim's are.
func (s *ProjectionStore) StoreBacklog(ctx context.Context, scope runtime.Scope, claim string, ids []string, vectors map[string][][]float32) error {
	return inTx(ctx, s.db, func(tx pgx.Tx) error {
		if err := setLocal(ctx, tx, customPlans); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT 1 FROM entry_projections WHERE tenant_id = $1 AND project_id = $2 FOR SHARE`,
			scope.TenantID, scope.ProjectID); err != nil {
			return translate(err)
		}
		gens, err := liveGenerations(ctx, tx, scope)
		if err != nil {
			return err
		}
		for _, g := range gens {
			v, ok := vectors[g.Model.ID]
			if !ok {
				return memory.ErrProjectionChanged
			}
			if err := s.storeVectors(ctx, tx, scope, g, ids, v); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `
			DELETE FROM entry_projection_queue
			WHERE tenant_id = $1 AND project_id = $2 AND entry_id = ANY($3) AND claim = $4`,
			scope.TenantID, scope.ProjectID, ids, claim)
		return translate(err)
	})
}

// storeVectors inserts the vectors of ids into generation g with one statement, for
// the entries that are active and of a live conversation right now, found by primary
// key (= ANY, whatever the statistics say). It locks those
// entries FOR SHARE: a transition that retires one either committed before (then the
// entry is not active any more and gets no vector) or waits until this commits (and
// then deletes the vector stored here).
func (s *ProjectionStore) storeVectors(ctx context.Context, db DBTX, scope runtime.Scope, g memory.Generation, ids []string, vectors [][]float32) error {
	t, err := s.catalog.lookup(ctx, db, g.Model.ID)
	if err != nil {
		return err
	}
	if err := sameDimensions(t, g.Model); err != nil {
		return err
	}
	vecs := make([]pgvector.Vector, len(vectors))
	for i, v := range vectors {
		vecs[i] = pgvector.NewVector(v)
	}
	_, err = db.Exec(ctx, fmt.Sprintf(`
		INSERT INTO %s (tenant_id, project_id, generation, entry_id, conversation_id, kind, tags, expires_at_ms, embedding, indexed)
		SELECT e.tenant_id, e.project_id, $3, e.entry_id, e.conversation_id, e.kind, e.tags, e.expires_at_ms,
		       u.embedding::%s, $6
		FROM context_entries e
		JOIN unnest($4::text[], $5::vector[]) AS u(entry_id, embedding) ON u.entry_id = e.entry_id
		WHERE e.tenant_id = $1 AND e.project_id = $2 AND e.entry_id = ANY($4)
		  AND e.status = 'active' AND `+liveConversation("e")+`
		FOR SHARE OF e
		ON CONFLICT DO NOTHING`, t.ident(), t.column()),
		scope.TenantID, scope.ProjectID, g.Number, ids, vecs, !t.graphed())
	return s.catalog.translate(t, err)
}

// FoldVectors implements memory.ProjectionStore: per vector table of the scope's live
// generations (a retired one's rows are about to be dropped), one statement counts
// those generations' rows outside the graph up to over+1 (a bounded range of the
// partial index) and, when there are more than over, sets indexed on up to limit of
// them, skipping rows another fold holds. The UPDATE inserts each
// row into the HNSW graph; until it commits the rows stay outside and recall finds
// them there.
func (s *ProjectionStore) FoldVectors(ctx context.Context, scope runtime.Scope, limit, over int) (int, error) {
	tables, err := s.scopeTables(ctx, s.db, scope, "building", "active")
	if err != nil {
		return 0, err
	}
	folded := 0
	for t, gens := range tables {
		if !t.graphed() {
			continue
		}
		tag, err := s.db.Exec(ctx, fmt.Sprintf(`
			WITH outside AS (
				SELECT count(*) AS n FROM (
					SELECT 1 FROM %[1]s
					WHERE tenant_id = $1 AND project_id = $2 AND generation = ANY($5) AND NOT indexed
					LIMIT $4::bigint + 1) o
			), batch AS (
				SELECT generation, entry_id FROM %[1]s
				WHERE tenant_id = $1 AND project_id = $2 AND generation = ANY($5) AND NOT indexed
				  AND (SELECT n FROM outside) > $4
				LIMIT $3
				FOR UPDATE SKIP LOCKED
			)
			UPDATE %[1]s v SET indexed = true
			FROM batch
			WHERE v.tenant_id = $1 AND v.project_id = $2
			  AND v.generation = batch.generation AND v.entry_id = batch.entry_id`, t.ident()),
			scope.TenantID, scope.ProjectID, limit, over, gens)
		if err != nil {
			return folded, s.catalog.translate(t, err)
		}
		folded += int(tag.RowsAffected())
	}
	return folded, nil
}

// UnindexedScopes implements memory.ProjectionStore: per vector table, a loose index
// scan of its partial index of the rows outside the graph, at most limit scopes each.
// A scope is due when one of its building or active generations has such rows: a
// retired generation's rows are never folded (they are dropped with it).
func (s *ProjectionStore) UnindexedScopes(ctx context.Context, after *runtime.Scope, limit int) ([]runtime.Scope, *runtime.Scope, error) {
	rows, err := s.db.Query(ctx, `SELECT table_name FROM vector_models ORDER BY table_name`)
	if err != nil {
		return nil, nil, translate(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(names) == 0 {
		return nil, nil, translate(err)
	}
	const due = `SELECT s.tenant_id, s.project_id, EXISTS (
			    SELECT 1 FROM entry_generations g
			    WHERE g.tenant_id = s.tenant_id AND g.project_id = s.project_id AND g.state IN ('building', 'active')
			      AND EXISTS (SELECT 1 FROM %[1]s v
			                  WHERE v.tenant_id = g.tenant_id AND v.project_id = g.project_id
			                    AND v.generation = g.generation AND NOT v.indexed)) AS due`
	walks, citusWalks := make([]string, len(names)), make([]string, len(names))
	for i, n := range names {
		table := pgx.Identifier{n}.Sanitize()
		citusWalks[i] = fmt.Sprintf(due, table) + ` FROM ` + everyScope(n, "NOT indexed") + ` s`
		walks[i] = fmt.Sprintf(`(WITH RECURSIVE scopes AS (
			    (SELECT tenant_id, project_id, 1 AS depth FROM %[1]s
			     WHERE NOT indexed AND (tenant_id, project_id) > ($1::text, $2::text)
			     ORDER BY tenant_id, project_id LIMIT 1)
			    UNION ALL
			    SELECT n.tenant_id, n.project_id, p.depth + 1 FROM scopes p
			    CROSS JOIN LATERAL (
			        SELECT tenant_id, project_id FROM %[1]s
			        WHERE NOT indexed AND (tenant_id, project_id) > (p.tenant_id, p.project_id)
			        ORDER BY tenant_id, project_id LIMIT 1) n
			    WHERE p.depth < $3
			) `+due+` FROM scopes s)`, table)
	}
	const merged = `
		SELECT tenant_id, project_id, bool_or(due) FROM (%s) w
		GROUP BY tenant_id, project_id
		ORDER BY tenant_id, project_id
		LIMIT $3`
	return scopeWalk(ctx, s.db, after, scopeQueries{
		postgres: fmt.Sprintf(merged, strings.Join(walks, " UNION ALL ")),
		citus:    fmt.Sprintf(merged, strings.Join(citusWalks, " UNION ALL ")),
	}, limit)
}

// InFlightRebuild implements memory.ProjectionStore.
func (s *ProjectionStore) InFlightRebuild(ctx context.Context, scope runtime.Scope) (contract.Operation, error) {
	return scanOperation(s.db.QueryRow(ctx, `
		SELECT `+operationColumns+` FROM operations
		WHERE tenant_id = $1 AND project_id = $2 AND kind = 'vector_rebuild' AND state IN ('pending', 'running')
		ORDER BY created_at_ms LIMIT 1`, scope.TenantID, scope.ProjectID))
}

// RebuildCursor implements memory.ProjectionStore.
func (s *ProjectionStore) RebuildCursor(ctx context.Context, scope runtime.Scope, operationID string) (*memory.RebuildCursor, error) {
	var raw []byte
	err := s.db.QueryRow(ctx, `SELECT cursor FROM operations WHERE tenant_id = $1 AND project_id = $2 AND operation_id = $3`,
		scope.TenantID, scope.ProjectID, operationID).Scan(&raw)
	if err != nil {
		return nil, translate(err)
	}
	if raw == nil {
		return nil, nil
	}
	var cur memory.RebuildCursor
	if err := json.Unmarshal(raw, &cur); err != nil {
		return nil, fmt.Errorf("decode the cursor of operation %s: %w", operationID, err)
	}
	return &cur, nil
}

// rebuildStep runs fn in a transaction in which the rebuild operation is locked, when
// it is still running and its cursor is cur (nil: not started); otherwise it does
// nothing, so a step repeated by a second run of the job changes nothing.
func rebuildStep(ctx context.Context, db DBTX, scope runtime.Scope, operationID string, cur *memory.RebuildCursor, fn func(tx pgx.Tx) error) error {
	return inTx(ctx, db, func(tx pgx.Tx) error {
		var stored *memory.RebuildCursor
		running, err := lockRunning(ctx, tx, scope, operationID, &stored)
		if err != nil || !running {
			return err
		}
		if (stored == nil) != (cur == nil) || (cur != nil && *stored != *cur) {
			return nil
		}
		return fn(tx)
	})
}

func setCursor(ctx context.Context, tx DBTX, scope runtime.Scope, operationID string, cur memory.RebuildCursor, done int64, nowMs int64) error {
	raw, err := json.Marshal(cur)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `
		UPDATE operations SET cursor = $4, progress_done = progress_done + $5, updated_at_ms = $6
		WHERE tenant_id = $1 AND project_id = $2 AND operation_id = $3`,
		scope.TenantID, scope.ProjectID, operationID, raw, done, nowMs)
	return translate(err)
}

// StartRebuild implements memory.ProjectionStore.
func (s *ProjectionStore) StartRebuild(ctx context.Context, scope runtime.Scope, operationID string, model memory.EmbeddingModel, pinned bool, nowMs int64) error {
	return rebuildStep(ctx, s.db, scope, operationID, nil, func(tx pgx.Tx) error {
		next, err := lockProjectionHead(ctx, tx, scope)
		if err != nil {
			return err
		}
		// EnsureModel ran before, but another replica may have dropped the table since
		// (its last generation retired): check again under the catalog's lock, which
		// keeps any drop out until the building generation below commits.
		if _, err := tx.Exec(ctx, catalogLock); err != nil {
			return translate(err)
		}
		if _, err := s.ensureModelLocked(ctx, tx, model); err != nil {
			return err
		}
		var total int64
		if err := tx.QueryRow(ctx, `
			WITH retired AS (
				UPDATE entry_generations SET state = 'retired', operation_id = NULL
				WHERE tenant_id = $1 AND project_id = $2 AND state = 'building'
			), building AS (
				INSERT INTO entry_generations (tenant_id, project_id, generation, model_id, state, operation_id, created_at_ms)
				VALUES ($1, $2, $3, $4, 'building', $5, $6)
			), head AS (
				UPDATE entry_projections SET next_generation = $3 + 1 WHERE tenant_id = $1 AND project_id = $2
			)
			SELECT count(*) FROM context_entries e
			WHERE e.tenant_id = $1 AND e.project_id = $2 AND e.status = 'active'`,
			scope.TenantID, scope.ProjectID, next, model.ID, operationID, nowMs).Scan(&total); err != nil {
			return translate(err)
		}
		raw, err := json.Marshal(memory.RebuildCursor{Phase: memory.RebuildFill, Generation: next, Model: model.ID,
			Dimensions: model.Dimensions, Pinned: pinned})
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `
			UPDATE operations SET cursor = $4, progress_total = $5, updated_at_ms = $6
			WHERE tenant_id = $1 AND project_id = $2 AND operation_id = $3`,
			scope.TenantID, scope.ProjectID, operationID, raw, total, nowMs)
		return translate(err)
	})
}

// FillRebuild implements memory.ProjectionStore.
func (s *ProjectionStore) FillRebuild(ctx context.Context, scope runtime.Scope, operationID string, cur, next memory.RebuildCursor, ids []string, vectors [][]float32, nowMs int64) error {
	return rebuildStep(ctx, s.db, scope, operationID, &cur, func(tx pgx.Tx) error {
		g := memory.Generation{Number: cur.Generation, Model: memory.EmbeddingModel{ID: cur.Model, Dimensions: cur.Dimensions}}
		if err := s.storeVectors(ctx, tx, scope, g, ids, vectors); err != nil {
			return err
		}
		return setCursor(ctx, tx, scope, operationID, next, int64(len(ids)), nowMs)
	})
}

// SwitchGeneration implements memory.ProjectionStore.
func (s *ProjectionStore) SwitchGeneration(ctx context.Context, scope runtime.Scope, operationID string, cur memory.RebuildCursor, nowMs int64) error {
	return rebuildStep(ctx, s.db, scope, operationID, &cur, func(tx pgx.Tx) error {
		if _, err := lockProjectionHead(ctx, tx, scope); err != nil {
			return err
		}
		// Two statements in this order: at no moment has the scope two active
		// generations (a unique index forbids it).
		if _, err := tx.Exec(ctx, `
			UPDATE entry_generations SET state = 'retired'
			WHERE tenant_id = $1 AND project_id = $2 AND state = 'active'`, scope.TenantID, scope.ProjectID); err != nil {
			return translate(err)
		}
		tag, err := tx.Exec(ctx, `
			WITH head AS (
				UPDATE entry_projections SET pinned = $5 WHERE tenant_id = $1 AND project_id = $2
			)
			UPDATE entry_generations SET state = 'active', operation_id = NULL
			WHERE tenant_id = $1 AND project_id = $2 AND generation = $3 AND state = 'building' AND operation_id = $4`,
			scope.TenantID, scope.ProjectID, cur.Generation, operationID, cur.Pinned)
		if err != nil {
			return translate(err)
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("operation %s: its building generation %d is gone", operationID, cur.Generation)
		}
		next := cur
		next.Phase = memory.RebuildDrop
		return setCursor(ctx, tx, scope, operationID, next, 0, nowMs)
	})
}

// DropRetiredStep implements memory.ProjectionStore. Each statement deletes an index
// range of one retired generation, at most the step's rows and about its bytes.
func (s *ProjectionStore) DropRetiredStep(ctx context.Context, scope runtime.Scope, operationID string, bounds operation.StepBounds, keep string, result contract.RebuildProjectionResult, nowMs int64) (bool, error) {
	return boundedStep(ctx, s.db, scope, operationID, bounds, func(tx pgx.Tx) (bool, error) {
		tables, err := s.scopeTables(ctx, tx, scope, "retired")
		if err != nil {
			return false, err
		}
		for t, gens := range tables {
			rowBytes := int64(t.Model.Dimensions)*4 + 128
			limit := max(min(int64(bounds.Rows), bounds.Bytes/rowBytes), 1)
			tag, err := tx.Exec(ctx, fmt.Sprintf(`
				DELETE FROM %[1]s WHERE tenant_id = $1 AND project_id = $2 AND (generation, entry_id) IN (
					SELECT generation, entry_id FROM %[1]s WHERE tenant_id = $1 AND project_id = $2 AND generation = ANY($3) LIMIT $4)`,
				t.ident()), scope.TenantID, scope.ProjectID, gens, limit)
			if err != nil {
				return false, s.catalog.translate(t, err)
			}
			if tag.RowsAffected() > 0 {
				_, err := tx.Exec(ctx, `UPDATE operations SET updated_at_ms = $4
					WHERE tenant_id = $1 AND project_id = $2 AND operation_id = $3`,
					scope.TenantID, scope.ProjectID, operationID, nowMs)
				return false, translate(err)
			}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM entry_generations WHERE tenant_id = $1 AND project_id = $2 AND state = 'retired'`,
			scope.TenantID, scope.ProjectID); err != nil {
			return false, translate(err)
		}
		for t := range tables {
			if err := s.dropUnused(ctx, tx, t, keep); err != nil {
				return false, err
			}
		}
		res, err := json.Marshal(result)
		if err != nil {
			return false, err
		}
		_, err = tx.Exec(ctx, `
			UPDATE operations
			SET state = 'succeeded', progress_total = progress_done, result = $4, updated_at_ms = $5, completed_at_ms = $5
			WHERE tenant_id = $1 AND project_id = $2 AND operation_id = $3`,
			scope.TenantID, scope.ProjectID, operationID, res, nowMs)
		return err == nil, translate(err)
	})
}

// dropUnused drops t when no generation of any scope uses its model any more, unless
// it is keep's. The foreign key from entry_generations makes a generation created
// concurrently either visible to the check or fail the delete, never lose its table.
// Two scopes retiring the model's last generations at once would each still see the
// other's uncommitted ones and neither drop the table, so the check runs under the
// catalog's advisory lock: the second waits for the first to commit and then sees
// its generations gone.
func (s *ProjectionStore) dropUnused(ctx context.Context, tx DBTX, t vectorTable, keep string) error {
	if t.Model.ID == keep {
		return nil
	}
	if _, err := tx.Exec(ctx, catalogLock); err != nil {
		return translate(err)
	}
	// Two statements: Citus deletes from a reference table (vector_models) with no
	// distributed table (entry_generations) in the same statement, and after a read of
	// every shard only when that read ran its shards one at a time.
	if citus, err := OnCitus(ctx, tx); err != nil {
		return err
	} else if citus {
		if _, err := tx.Exec(ctx, `SET LOCAL citus.multi_shard_modify_mode TO 'sequential'`); err != nil {
			return translate(err)
		}
	}
	var used bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM entry_generations WHERE model_id = $1)`,
		t.Model.ID).Scan(&used); err != nil || used {
		return translate(err)
	}
	tag, err := tx.Exec(ctx, `DELETE FROM vector_models WHERE model_id = $1`, t.Model.ID)
	if err != nil || tag.RowsAffected() == 0 {
		return translate(err)
	}
	if _, err := tx.Exec(ctx, `DROP TABLE `+t.ident()); err != nil {
		return translate(err)
	}
	s.catalog.forget(t.Model.ID)
	return nil
}

// BacklogScopes implements memory.ProjectionStore with a loose index scan of the
// queue's primary key (on Citus, every shard's distinct scopes).
func (s *ProjectionStore) BacklogScopes(ctx context.Context, after *runtime.Scope, limit int, nowMs int64) ([]runtime.Scope, *runtime.Scope, error) {
	const due = `
		SELECT s.tenant_id, s.project_id, EXISTS (
		    SELECT 1 FROM entry_projection_queue q
		    WHERE q.tenant_id = s.tenant_id AND q.project_id = s.project_id AND q.claimed_until_ms <= $4)`
	return scopeWalk(ctx, s.db, after, scopeQueries{
		postgres: distinctScopes("entry_projection_queue") + due + ` FROM (SELECT * FROM scopes LIMIT $3) s`,
		citus:    due + ` FROM ` + everyScope("entry_projection_queue", "") + ` s ORDER BY s.tenant_id, s.project_id LIMIT $3`,
	}, limit, nowMs)
}

// StaleScopes implements memory.ProjectionStore. The heads it examines stay locked
// until the transaction ends, so that a rebuild requested meanwhile and the one the
// sweep starts cannot both begin. Citus locks no rows of several tenants in one
// statement: there the heads are listed first, then each locked by a statement and
// examined by the next, in one batch.
func (s *ProjectionStore) StaleScopes(ctx context.Context, model string, after *runtime.Scope, limit int) ([]runtime.Scope, *runtime.Scope, error) {
	// The scope's head is p; on Citus the statement names the scope itself ($1, $2) in
	// the join and the sub-select, since Citus locks with FOR UPDATE only in a
	// statement whose every table it sees filtered by the tenant.
	const stale = `
		SELECT p.tenant_id, p.project_id,
		       coalesce(NOT p.pinned AND g.model_id <> %[1]s AND NOT EXISTS (
		           SELECT 1 FROM operations o
		           WHERE o.tenant_id = %[2]s AND o.project_id = %[3]s
		             AND o.kind = 'vector_rebuild' AND o.state IN ('pending', 'running')), false)
		FROM entry_projections p
		LEFT JOIN entry_generations g ON g.tenant_id = %[2]s AND g.project_id = %[3]s AND g.state = 'active'`
	citus, err := OnCitus(ctx, s.db)
	if err != nil || !citus {
		return scopeWalk(ctx, s.db, after, scopeQueries{postgres: fmt.Sprintf(stale, "$4", "p.tenant_id", "p.project_id") + `
			WHERE (p.tenant_id, p.project_id) > ($1::text, $2::text)
			ORDER BY p.tenant_id, p.project_id
			LIMIT $3
			FOR UPDATE OF p`}, limit, model)
	}
	var afterScope runtime.Scope
	if after != nil {
		afterScope = *after
	}
	rows, err := s.db.Query(ctx, `
		SELECT tenant_id, project_id FROM entry_projections
		WHERE (tenant_id, project_id) > ($1::text, $2::text)
		ORDER BY tenant_id, project_id
		LIMIT $3`, afterScope.TenantID, afterScope.ProjectID, limit)
	if err != nil {
		return nil, nil, translate(err)
	}
	listed, err := pgx.CollectRows(rows, pgx.RowToStructByPos[runtime.Scope])
	if err != nil || len(listed) == 0 {
		return nil, nil, translate(err)
	}
	// Each head is locked by a statement of its own and examined by the next, which
	// reads after the lock was granted: a sweep that waited for another's lock then
	// sees the rebuild the other started (one statement would examine the operations
	// as of before its wait).
	b := &pgx.Batch{}
	for _, sc := range listed {
		b.Queue(`SELECT 1 FROM entry_projections WHERE tenant_id = $1 AND project_id = $2 FOR UPDATE`,
			sc.TenantID, sc.ProjectID)
		b.Queue(fmt.Sprintf(stale, "$3", "$1", "$2")+`
			WHERE p.tenant_id = $1 AND p.project_id = $2`, sc.TenantID, sc.ProjectID, model)
	}
	res := s.db.SendBatch(ctx, b)
	defer func() { _ = res.Close() }() // checked below on success; an earlier error is the one reported
	found := make([]scheduledScope, 0, len(listed))
	for range listed {
		if _, err := res.Exec(); err != nil {
			return nil, nil, translate(err)
		}
		rows, err := res.Query()
		if err != nil {
			return nil, nil, translate(err)
		}
		head, err := pgx.CollectRows(rows, pgx.RowToStructByPos[scheduledScope])
		if err != nil {
			return nil, nil, translate(err)
		}
		found = append(found, head...)
	}
	if err := res.Close(); err != nil {
		return nil, nil, translate(err)
	}
	due, _, err := dueScopes(found)
	return due, &listed[len(listed)-1], err
}

// vectorDeletionTables lists the vector tables as tables holding rows of
// conversations, for conversation deletion.
func vectorDeletionTables(ctx context.Context, db DBTX) ([]conversationTable, error) {
	rows, err := db.Query(ctx, `SELECT table_name FROM vector_models ORDER BY table_name`)
	if err != nil {
		return nil, translate(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, translate(err)
	}
	tables := make([]conversationTable, len(names))
	for i, n := range names {
		tables[i] = conversationTable{Name: n, Column: "conversation_id", Size: []string{"embedding", "tags"},
			Key: []string{"generation", "entry_id"}}
	}
	return tables, nil
}
