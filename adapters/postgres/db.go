package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	pgxvec "github.com/pgvector/pgvector-go/pgx"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/agent-context/agent-context/adapters/postgres/textindex"
	"github.com/agent-context/agent-context/migrations"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
	"github.com/agent-context/agent-context/runtime/conversation"
	"github.com/agent-context/agent-context/runtime/memory"
	"github.com/agent-context/agent-context/runtime/operation"
	"github.com/agent-context/agent-context/runtime/transfer"
)

// DBTX is what both *pgxpool.Pool and pgx.Tx offer, so store code runs unchanged
// inside or outside a transaction: every store is built over the DBTX it is given.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	// Begin starts a transaction on a pool and a savepoint inside a transaction.
	Begin(ctx context.Context) (pgx.Tx, error)
}

// inTx is the one transaction helper: it runs fn in a transaction begun on db (a
// savepoint when db is a transaction already), committed when fn returns nil and
// rolled back otherwise. The rollback uses a context that outlives a canceled request,
// so a client hanging up never leaves a transaction open on the connection.
func inTx(ctx context.Context, db DBTX, fn func(tx pgx.Tx) error) error {
	return runTx(ctx, db.Begin, fn)
}

// inSnapshot runs fn as inTx does, in a read-only REPEATABLE READ transaction when db
// is a pool, so that every statement of fn reads one snapshot. Inside a transaction
// it runs in a savepoint, under the snapshot rules of that transaction.
func inSnapshot(ctx context.Context, db DBTX, fn func(tx pgx.Tx) error) error {
	pool, ok := db.(*pgxpool.Pool)
	if !ok {
		return inTx(ctx, db, fn)
	}
	return runTx(ctx, func(ctx context.Context) (pgx.Tx, error) {
		return pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	}, fn)
}

// runTx is the body of inTx and inSnapshot: fn in the transaction begin starts.
func runTx(ctx context.Context, begin func(context.Context) (pgx.Tx, error), fn func(tx pgx.Tx) error) error {
	tx, err := begin(ctx)
	if err != nil {
		return translate(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(tx); err != nil {
		return err
	}
	return translate(tx.Commit(ctx))
}

// setting is a server setting a transaction runs with (setLocal).
type setting struct{ name, value string }

// customPlans makes Postgres plan each statement for its arguments: for statements
// whose generic plan, chosen on the statistics of the moment (none at all after a
// burst of writes, until autovacuum analyzes), can cost far more than planning.
var customPlans = setting{"plan_cache_mode", "force_custom_plan"}

// genericPlans makes Postgres plan each statement once for all arguments: for
// statements written to stay key lookups under any plan, whose custom plans it would
// otherwise keep making (a cost estimate of the generic plan above theirs) at about
// the cost of running them.
var genericPlans = setting{"plan_cache_mode", "force_generic_plan"}

// keyPlans keeps the planner off sequential scans, for batches whose every statement
// is written as key lookups and stays one whatever the table's size. A connection
// keeps a statement's generic plan for its life, made on the statistics of the
// moment: left to choose, the deletes by row address of a post, planned while the
// A2A tables held a few rows (once autovacuum had analyzed them after a deployment),
// stayed scans of the whole table, every tenant's messages read on every post. Every
// batch that runs such a statement applies it, so no connection caches the statement
// planned without it.
var keyPlans = setting{"enable_seqscan", "off"}

// setLocalSQL applies the settings named in $1 with the values in $2 until the
// transaction ends.
const setLocalSQL = `SELECT set_config(s.name, s.value, true) FROM unnest($1::text[], $2::text[]) AS s(name, value)`

// setLocal applies settings for the rest of tx.
func setLocal(ctx context.Context, tx DBTX, settings ...setting) error {
	_, err := tx.Exec(ctx, setLocalSQL, settingArgs(settings)...)
	return translate(err)
}

// queueSetLocal queues into b the statement that applies settings for the rest of the
// batch's transaction (outside a transaction, a batch is one implicit transaction).
func queueSetLocal(b *pgx.Batch, settings ...setting) {
	b.Queue(setLocalSQL, settingArgs(settings)...)
}

// execResults reads the next n results of res, none of whose rows the caller wants.
func execResults(res pgx.BatchResults, n int) error {
	for range n {
		if _, err := res.Exec(); err != nil {
			return err
		}
	}
	return nil
}

// queueResetLocal queues into b the statements that set settings back to their
// session defaults for the rest of the batch's transaction: a batch that applied some
// ends with them when it may run inside a unit of work, whose later statements are
// not written for them.
func queueResetLocal(b *pgx.Batch, settings ...setting) {
	for _, s := range settings {
		b.Queue("SET LOCAL " + pgx.Identifier{s.name}.Sanitize() + " TO DEFAULT")
	}
}

// settingArgs are the arguments of setLocalSQL for settings.
func settingArgs(settings []setting) []any {
	names, values := make([]string, len(settings)), make([]string, len(settings))
	for i, s := range settings {
		names[i], values[i] = s.name, s.value
	}
	return []any{names, values}
}

// setLocalTimeout bounds the statements of tx, until it ends, by d (0: unchanged).
func setLocalTimeout(ctx context.Context, tx DBTX, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	_, err := tx.Exec(ctx, "SELECT set_config('statement_timeout', $1, true)", strconv.FormatInt(d.Milliseconds(), 10))
	return translate(err)
}

var (
	_ DBTX = (*pgxpool.Pool)(nil)
	_ DBTX = (pgx.Tx)(nil)
)

// PoolOptions tune the connection pool.
type PoolOptions struct {
	// MaxConns bounds the pool; 0 keeps pgx's default (max(4, CPUs)).
	MaxConns int32
	// StatementTimeout bounds every statement on the server side, so one slow query
	// cannot hold the database; 0 keeps the server's setting.
	StatementTimeout time.Duration
	// ApplicationName is reported in pg_stat_activity.
	ApplicationName string
	// Tracer traces the statements (nil: none, at no cost).
	Tracer pgx.QueryTracer
	// Settings are session settings of every connection, such as
	// synchronous_commit; they apply before the first statement.
	Settings map[string]string
}

// NewPool connects to dsn. pgvector's types are registered on every new connection
// once the extension exists (before the first migration it does not yet).
func NewPool(ctx context.Context, dsn string, opts PoolOptions) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if opts.StatementTimeout > 0 {
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(opts.StatementTimeout.Milliseconds(), 10)
	}
	name := opts.ApplicationName
	if name == "" {
		name = "agent-context"
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = name
	// Every statement of the service reads or writes a bounded set of rows, and
	// compiling one whose estimate passes jit_above_cost took hundreds of milliseconds
	// for a run of a few (docs/foundation.md). A database URL that sets jit keeps it.
	if _, set := cfg.ConnConfig.RuntimeParams["jit"]; !set {
		cfg.ConnConfig.RuntimeParams["jit"] = "off"
	}
	for k, v := range opts.Settings {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	cfg.AfterConnect = registerVectorTypes
	cfg.ConnConfig.Tracer = opts.Tracer
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("create pool: %w", err)
	}
	return pool, nil
}

func registerVectorTypes(ctx context.Context, conn *pgx.Conn) error {
	var installed bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_type WHERE typname = 'vector')").Scan(&installed); err != nil {
		return err
	}
	if !installed {
		return nil
	}
	return pgxvec.RegisterTypes(ctx, conn)
}

// DBOptions tune the stores.
type DBOptions struct {
	// SearchTimeout is the statement timeout of a message search and of each half of
	// a recall, so that one expensive query cannot hold the database; 0 means
	// DefaultSearchTimeout.
	SearchTimeout time.Duration
	// SearchCandidates is how many of the newest matches of a search are ranked for
	// its best hits; 0 means DefaultSearchCandidates.
	SearchCandidates int
	Logger           *slog.Logger
	// Hints receives the scopes whose events a transaction appended, after it
	// committed (the EventHub, which wakes the long polls of every replica); nil
	// sends none, and long polls then find new events by their periodic re-check.
	Hints EventHints
	// TxAttempts bounds how often WithinTx runs its function when Postgres aborts
	// the transaction for a deadlock or a serialization failure; 0 means
	// DefaultTxAttempts.
	TxAttempts int
}

// EventHints is told, after a commit, which scopes' event logs it changed.
type EventHints interface {
	Hint(scopes ...runtime.Scope)
}

// DefaultTxAttempts is how often a unit of work runs when Postgres keeps aborting it
// for deadlocks or serialization failures.
const DefaultTxAttempts = 4

// DB is the Postgres side of the runtime's ports: a unit of work per area over a
// pool, with an insert-only River client that enqueues jobs in any transaction.
type DB struct {
	Pool    *pgxpool.Pool
	queue   *river.Client[pgx.Tx]
	opts    DBOptions
	catalog *vectorCatalog
	scratch textindex.Pool // the text half's buffers
	// citus tells that the database is a Citus coordinator (OnCitus), for the
	// statements Citus plans differently.
	citus bool
}

// NewDB returns the database over pool; its methods named after the areas return their
// units of work. It asks the database once whether it is a Citus coordinator.
func NewDB(ctx context.Context, pool *pgxpool.Pool, opts DBOptions) (*DB, error) {
	if opts.SearchTimeout <= 0 {
		opts.SearchTimeout = DefaultSearchTimeout
	}
	if opts.SearchCandidates <= 0 {
		opts.SearchCandidates = DefaultSearchCandidates
	}
	if opts.TxAttempts <= 0 {
		opts.TxAttempts = DefaultTxAttempts
	}
	queue, err := river.NewClient(quietDriver{riverpgxv5.New(pool)}, &river.Config{Logger: opts.Logger})
	if err != nil {
		return nil, fmt.Errorf("create the job queue client: %w", err)
	}
	citus, err := OnCitus(ctx, pool)
	if err != nil {
		return nil, fmt.Errorf("look up the Citus extension: %w", err)
	}
	return &DB{Pool: pool, queue: queue, opts: opts, catalog: newVectorCatalog(),
		scratch: textindex.NewPool(), citus: citus}, nil
}

// quietDriver is River's pgx driver for the insert-only client, without its
// notifications: River would otherwise send a pg_notify for the queue inside the
// transaction that enqueues a job, and every transaction with a pending notification
// takes Postgres's one cluster-wide notification lock through its commit (docs/a2a.md).
// The workers find new jobs by polling instead (worker.JobFetchPollInterval).
type quietDriver struct{ *riverpgxv5.Driver }

// SupportsListenNotify reports false, so the client never notifies.
func (quietDriver) SupportsListenNotify() bool { return false }

// conn is what a unit of work builds an area's stores over: the pool, or the unit's
// transaction, which tx then holds too, so that a store that acts differently inside
// a unit of work is told so by its builder instead of guessing from its handle's type;
// and the function their event appends call.
type conn struct {
	h        DBTX
	tx       pgx.Tx // nil outside a unit's transaction
	appended func(runtime.Scope)
}

// unitOfWork is runtime.UnitOfWork[S] over the DB's pool: build makes an area's stores
// over a conn.
type unitOfWork[S any] struct {
	db     *DB
	build  func(c conn) S
	stores S
}

func newUnitOfWork[S any](db *DB, build func(c conn) S) *unitOfWork[S] {
	// Outside a transaction an append commits on its own: its hint goes at once.
	return &unitOfWork[S]{db: db, build: build, stores: build(conn{h: db.Pool, appended: func(s runtime.Scope) { db.hint(s) }})}
}

// Stores implements runtime.UnitOfWork.
func (u *unitOfWork[S]) Stores() S { return u.stores }

// WithinTx implements runtime.UnitOfWork. When Postgres aborts the transaction for a
// deadlock or a serialization failure (it chose this transaction as the victim; the
// other one went on), fn runs again in a new transaction, up to DBOptions.TxAttempts
// times, after a short random pause; the last failure is SERVICE_UNAVAILABLE, which
// the client may retry. The scopes whose logs fn appended to are hinted only after
// the commit, so no notification is ever part of a writing transaction.
func (u *unitOfWork[S]) WithinTx(ctx context.Context, fn func(ctx context.Context, tx S) error) error {
	for attempt := 1; ; attempt++ {
		var scopes []runtime.Scope
		appended := func(s runtime.Scope) {
			if !slices.Contains(scopes, s) {
				scopes = append(scopes, s)
			}
		}
		err := inTx(ctx, u.db.Pool, func(tx pgx.Tx) error { return fn(ctx, u.build(conn{h: tx, tx: tx, appended: appended})) })
		if err == nil {
			u.db.hint(scopes...)
			return nil
		}
		if !txConflict(err) {
			return err
		}
		if attempt >= u.db.opts.TxAttempts || ctx.Err() != nil {
			return translate(err)
		}
		select {
		case <-ctx.Done():
			return translate(err)
		case <-time.After(retryPause(attempt)):
		}
	}
}

// retryPause is the random pause before attempt+1 of a unit of work: up to 2, 4, 8
// ms..., so that the transactions that collided do not collide again in step.
func retryPause(attempt int) time.Duration {
	return time.Duration(rand.Int64N(int64(time.Millisecond) << min(attempt, 6)))
}

// hint passes the scopes of committed appends to the hints, if any.
func (db *DB) hint(scopes ...runtime.Scope) {
	if db.opts.Hints != nil && len(scopes) > 0 {
		db.opts.Hints.Hint(scopes...)
	}
}

// Conversation is the unit of work of messages, windows, derivations and invocations.
func (db *DB) Conversation() runtime.UnitOfWork[conversation.Stores] {
	return newUnitOfWork(db, func(c conn) conversation.Stores {
		return conversation.Stores{Messages: db.messages(c.h), Windows: &WindowStore{db: c.h},
			Events: &EventStore{db: c.h, appended: c.appended}}
	})
}

// Operation is the unit of work of operations, deletion and retention.
func (db *DB) Operation() runtime.UnitOfWork[operation.Stores] {
	return newUnitOfWork(db, func(c conn) operation.Stores {
		return operation.Stores{Operations: &OperationStore{db: c.h}, Conversations: &ConversationStore{db: c.h}, Jobs: db.jobs(c)}
	})
}

// Memory is the unit of work of entries and their vector projection.
func (db *DB) Memory() runtime.UnitOfWork[memory.Stores] {
	return newUnitOfWork(db, func(c conn) memory.Stores {
		return memory.Stores{Entries: &EntryStore{db: c.h}, Projection: db.projection(c.h), Operations: &OperationStore{db: c.h},
			Jobs: db.jobs(c), Events: &EventStore{db: c.h, appended: c.appended}}
	})
}

// A2A is the unit of work of agent-to-agent coordination.
func (db *DB) A2A() runtime.UnitOfWork[a2a.Stores] {
	return newUnitOfWork(db, func(c conn) a2a.Stores {
		return a2a.Stores{Agents: &AgentStore{db: c.h}, AgentMessages: &AgentMessageStore{db: c.h, inUnit: c.tx != nil, appended: c.appended, citus: db.citus},
			Tasks: &TaskStore{db: c.h}, Events: &EventStore{db: c.h, appended: c.appended}, Envelopes: &EnvelopeStore{db: c.h},
			Push: &PushStore{db: c.h}, Jobs: db.jobs(c)}
	})
}

// Transfer is the unit of work of export, import and the advanced operations.
func (db *DB) Transfer() runtime.UnitOfWork[transfer.Stores] {
	return newUnitOfWork(db, func(c conn) transfer.Stores {
		exports := &ExportStore{db: c.h}
		return transfer.Stores{Artifacts: exports, Walks: exports, Maintenance: exports, Steps: &OperationStore{db: c.h},
			Operations: &OperationStore{db: c.h}, Jobs: db.jobs(c), Messages: db.messages(c.h), Windows: &WindowStore{db: c.h},
			Entries: &EntryStore{db: c.h}, Projection: db.projection(c.h)}
	})
}

// Messages is the message store over the pool.
func (db *DB) Messages() *MessageStore { return db.messages(db.Pool) }

// Recall is the recall store over the pool.
func (db *DB) Recall() *RecallStore {
	return &RecallStore{db: db.Pool, catalog: db.catalog, searchTimeout: db.opts.SearchTimeout, fewRows: fewFilterRows,
		scratch: db.scratch, citus: db.citus}
}

// Costs is the cost store over the pool.
func (db *DB) Costs() *CostStore { return &CostStore{db: db.Pool} }

func (db *DB) messages(h DBTX) *MessageStore {
	return &MessageStore{db: h, searchTimeout: db.opts.SearchTimeout, searchCandidates: db.opts.SearchCandidates}
}

func (db *DB) projection(h DBTX) *ProjectionStore {
	return &ProjectionStore{db: h, catalog: db.catalog}
}

func (db *DB) jobs(c conn) *JobQueue { return &JobQueue{tx: c.tx, db: c.h, client: db.queue} }

// Versions reports the applied schema version and the newest embedded one; /ready
// calls it.
func (db *DB) Versions(ctx context.Context) (current, latest int64, err error) {
	err = db.Pool.QueryRow(ctx,
		"SELECT coalesce(max(version_id), 0) FROM goose_db_version WHERE is_applied").Scan(&current)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" {
		return 0, migrations.Latest(), nil
	}
	if err != nil {
		return 0, 0, translate(err)
	}
	return current, migrations.Latest(), nil
}
