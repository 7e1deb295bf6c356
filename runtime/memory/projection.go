package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	goruntime "runtime"
	"slices"
	"sync"
	"time"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/operation"
)

// The vector projection (docs/entries.md): every scope has generations
// of (entry, vector) rows, each embedded with one model. The active generation serves
// recall; a rebuild fills a new one while the active one keeps serving, switches, and
// drops the old one. Entries reach the projection through a queue written in the
// entry's own transaction and drained by background jobs, in batches. A stored vector
// is recallable at once: it lands outside the store's nearest-neighbour graph, where
// recall searches it exactly, and the same jobs fold it into the graph later.

// Embedders are the embedders this process can run.
type Embedders interface {
	// Configured is the embedder the configuration names: a scope's projection starts
	// with it, and a scope that follows the configuration is rebuilt when it changes.
	Configured() Embedder
	// Named returns the embedder of a name of contract.Embedders. Errors:
	// VALIDATION_FAILED (field embedder) for a name this process cannot run (an
	// unknown one, openai without its endpoint, local without its model).
	Named(name string) (Embedder, error)
	// ForModel returns the embedder whose vectors have the model ID, when this
	// process can run it.
	ForModel(modelID string) (Embedder, bool)
}

// Generation is one generation of a scope's projection.
type Generation struct {
	Number int64
	Model  EmbeddingModel
}

// ProjectionStatus is the state of a scope's projection. Generation is 0 while the
// scope has none (no entry was ever written and no rebuild ran).
type ProjectionStatus struct {
	Generation Generation
	// Pending counts the scope's queued entries; IndexedThroughMs is the creation
	// time through which every entry is embedded (0 when the scope has none).
	Pending          int64
	IndexedThroughMs int64
	// Entries counts the scope's active entries.
	Entries int64
}

// Backlog is a batch of queued entries claimed by one worker until its lease ends,
// with the generations they are to be embedded into.
type Backlog struct {
	Claim       string
	Generations []Generation
	Entries     []EmbedInput
}

// RebuildCursor is where a vector_rebuild operation stands, kept with the operation.
type RebuildCursor struct {
	// Phase is "fill" (embedding the active entries after After into Generation) or
	// "drop" (the generation switched; retired generations are being removed).
	Phase      string `json:"phase"`
	Generation int64  `json:"generation"`
	Model      string `json:"model"`
	Dimensions int    `json:"dimensions"`
	After      string `json:"after"`
	Embedded   int64  `json:"embedded"`
	// Pinned records that the rebuild named its embedder.
	Pinned bool `json:"pinned"`
}

// Rebuild phases.
const (
	RebuildFill = "fill"
	RebuildDrop = "drop"
)

// ErrProjectionChanged is returned by StoreBacklog when the scope's live generations
// are no longer those the vectors were computed for (a rebuild started or switched).
var ErrProjectionChanged = errors.New("the projection's generations changed")

// ProjectionStore is the storage of the vector projection: its queue, its backlog and
// its rebuilds. Every method is confined to scope (the sweeps walk them all).
type ProjectionStore interface {
	ProjectionQueue
	ProjectionBacklog
	ProjectionRebuild
}

// ProjectionQueue is the projection as the writers of entries see it: entries queued
// for embedding when they are written, removed when they stop being active.
type ProjectionQueue interface {
	// EnsureModel creates the vector table of model when there is none. It is DDL,
	// serialized between replicas. Errors: SERVICE_UNAVAILABLE.
	EnsureModel(ctx context.Context, model EmbeddingModel) error
	// Enqueue queues new active entries for embedding, in the writer's transaction,
	// and starts the scope's projection at a generation of model when it has no active
	// one. Errors: SERVICE_UNAVAILABLE.
	Enqueue(ctx context.Context, scope runtime.Scope, entries []contract.ContextEntry, model EmbeddingModel) error
	// Retire removes entries that stopped being active from the projection: their
	// vectors in every generation and their queue rows. Errors: SERVICE_UNAVAILABLE.
	Retire(ctx context.Context, scope runtime.Scope, ids []string) error
	// Status returns the scope's projection state. Errors: SERVICE_UNAVAILABLE.
	Status(ctx context.Context, scope runtime.Scope) (ProjectionStatus, error)
}

// ProjectionBacklog is the projection's work behind the writers: the embedding of the
// queued entries, the fold of vectors into the graph, the text postings' packs, and
// the sweeps that find the scopes with such work.
type ProjectionBacklog interface {
	// ClaimBacklog claims up to limit queued entries that no live lease holds, until
	// nowMs + lease, and returns them (content included) with the scope's live
	// generations; queue rows of entries that are no longer active are dropped.
	ClaimBacklog(ctx context.Context, scope runtime.Scope, limit int, nowMs int64, lease time.Duration) (Backlog, error)
	// ReleaseBacklog gives up a claim, so the next worker takes its rows at once.
	ReleaseBacklog(ctx context.Context, scope runtime.Scope, claim string) error
	// StoreBacklog stores the vectors of a claim (vectors[model][i] is the vector of
	// the claim's i-th entry, ids[i]) into every live generation and removes the
	// claim's queue rows, in one transaction. A vector is stored only for an entry
	// that is still active. Errors: ErrProjectionChanged when a live generation has a
	// model vectors lacks, SERVICE_UNAVAILABLE.
	StoreBacklog(ctx context.Context, scope runtime.Scope, claim string, ids []string, vectors map[string][][]float32) error
	// BacklogScopes examines up to limit scopes holding queued entries no live lease
	// holds, in order after after (nil: from the first), and returns them and the
	// last one examined (nil when none was left).
	BacklogScopes(ctx context.Context, after *runtime.Scope, limit int, nowMs int64) (due []runtime.Scope, last *runtime.Scope, err error)
	// FoldVectors moves up to limit of the scope's stored vectors that are outside the
	// nearest-neighbour graph into it, when the scope holds more than over of them
	// (0: any), and returns how many it moved. An interrupted fold leaves its vectors
	// outside, where recall still finds them; a repeated one moves only what is left.
	// Errors: SERVICE_UNAVAILABLE.
	FoldVectors(ctx context.Context, scope runtime.Scope, limit, over int) (int, error)
	// UnindexedScopes examines up to limit scopes holding vectors outside the graph,
	// in order after after, and returns those whose vectors outside are of a building
	// or active generation (a fold moves them) and the last one examined (nil when
	// none was left).
	UnindexedScopes(ctx context.Context, after *runtime.Scope, limit int) (due []runtime.Scope, last *runtime.Scope, err error)
	// PackText packs up to limit of the scope's pending text postings (those written
	// since its last pack) into the blocks recall reads, when the scope holds more
	// than over of them (0: any), and removes up to limit postings of documents that
	// are gone from the blocks; it returns how many it packed or removed (0 as well
	// when another pack or a deletion holds the scope: it is not waited for). An
	// interrupted pack leaves the postings pending, where recall reads them too.
	// Errors: SERVICE_UNAVAILABLE.
	PackText(ctx context.Context, scope runtime.Scope, limit, over int) (int, error)
	// PendingTextScopes examines up to limit scopes holding pending text postings or
	// postings of gone documents, in order after after, and returns those holding more
	// than over pending postings or any gone, and the last one examined.
	PendingTextScopes(ctx context.Context, after *runtime.Scope, limit, over int) (due []runtime.Scope, last *runtime.Scope, err error)
}

// ProjectionRebuild is a vector_rebuild operation's steps, and the sweep that finds
// the scopes whose projection follows another model than the configured one.
type ProjectionRebuild interface {
	// LockProjection creates the scope's projection head when it has none and locks
	// it until the transaction ends. Errors: SERVICE_UNAVAILABLE.
	LockProjection(ctx context.Context, scope runtime.Scope) error
	// InFlightRebuild returns the scope's pending or running vector_rebuild
	// operation. Errors: NOT_FOUND, SERVICE_UNAVAILABLE.
	InFlightRebuild(ctx context.Context, scope runtime.Scope) (contract.Operation, error)
	// RebuildCursor returns the cursor of a rebuild operation, nil before its first
	// step. Errors: SERVICE_UNAVAILABLE.
	RebuildCursor(ctx context.Context, scope runtime.Scope, operationID string) (*RebuildCursor, error)
	// StartRebuild creates the building generation of a running rebuild operation
	// (any older non-active generation is retired), sets its cursor and counts the
	// scope's active entries into its progress. An operation that already started
	// keeps its cursor. pinned records whether the rebuild named its embedder.
	StartRebuild(ctx context.Context, scope runtime.Scope, operationID string, model EmbeddingModel, pinned bool, nowMs int64) error
	// FillRebuild stores the vectors of ids into the operation's building generation
	// (for entries still active) and advances its cursor from cur to next, in one
	// transaction; nothing happens when the operation is no longer running or its
	// cursor is no longer cur.
	FillRebuild(ctx context.Context, scope runtime.Scope, operationID string, cur, next RebuildCursor, ids []string, vectors [][]float32, nowMs int64) error
	// SwitchGeneration makes the operation's building generation the active one and
	// retires the previous one, atomically, and moves the cursor to the drop phase.
	SwitchGeneration(ctx context.Context, scope runtime.Scope, operationID string, cur RebuildCursor, nowMs int64) error
	// DropRetiredStep deletes rows of the scope's retired generations within bounds;
	// when none is left it forgets them, drops the vector tables no generation uses
	// any more (except keep's) and marks the operation succeeded with result.
	DropRetiredStep(ctx context.Context, scope runtime.Scope, operationID string, bounds operation.StepBounds, keep string, result contract.RebuildProjectionResult, nowMs int64) (done bool, err error)
	// StaleScopes examines up to limit scopes whose projection follows the
	// configuration (not pinned) and whose active generation has another model than
	// model, in order after after, and returns those with no rebuild in flight and the
	// last one examined.
	StaleScopes(ctx context.Context, model string, after *runtime.Scope, limit int) (due []runtime.Scope, last *runtime.Scope, err error)
}

// ProjectionJob embeds the queued entries of one scope.
type ProjectionJob struct {
	TenantID  string `json:"tenantId"`
	ProjectID string `json:"projectId"`
}

// Kind implements Job.
func (ProjectionJob) Kind() string { return "agent_context_entry_projection" }

// ProjectionConfig configures the projection use cases.
type ProjectionConfig struct {
	DB        runtime.UnitOfWork[Stores]
	Embedders Embedders
	Clock     runtime.Clock
	Logger    *slog.Logger
	// Batch is how many entries one Embed call and one step take (default 64).
	Batch int
	// Parallel is how many batches this process embeds at once, over all the scopes'
	// jobs together (default GOMAXPROCS: the local embedder runs a call on its
	// caller's goroutine, one core each).
	Parallel int
	// Lease is how long a claimed batch stays with its worker (default 2 minutes); a
	// worker that died leaves it to another after this.
	Lease time.Duration
	// Bounds bound a step that drops a retired generation.
	Bounds operation.StepBounds
	// FoldBatch is how many vectors one fold into the graph takes (default 256).
	FoldBatch int
	// Unindexed is how many of a scope's vectors may wait outside the graph while its
	// backlog is being embedded (default 10,000): beyond it, the lanes fold as they
	// embed, so that recall's exact search of those vectors stays cheap.
	Unindexed int
	// PendingPostings is how many text postings a scope may hold unpacked (default
	// 20,000, about 1,500 entries of a few sentences): beyond it, a projection job
	// packs them once its backlog is embedded, so that recall's text half reads few of
	// them one row each. While a backlog is being embedded nothing is packed: packing
	// (and counting what waits, after every stored batch) took the cores the embedder
	// needed, and MaxScore reads the pending postings of a question's weighty terms
	// only, which are few.
	PendingPostings int
}

// Projection holds the use cases of the vector projection: its background work (the
// backlog, the sweep, rebuilds), the rebuild route and its status.
type Projection struct {
	db        runtime.UnitOfWork[Stores]
	store     ProjectionStore
	entries   EntryStore
	embedders Embedders
	clock     runtime.Clock
	log       *slog.Logger
	batch     int
	lease     time.Duration
	bounds    operation.StepBounds
	foldBatch int
	unindexed int
	pending   int
	// slots holds a token per batch in flight in this process (Parallel of them).
	slots chan struct{}
}

// Defaults of the projection.
const (
	DefaultProjectionBatch = 64
	DefaultProjectionLease = 2 * time.Minute
	DefaultFoldBatch       = 256
	DefaultUnindexed       = 10_000
	DefaultPendingPostings = 20_000
	// packBatch is how many text postings one pack takes: one step, well within a
	// job's statement bound (50,000 took 0.34 s on an idle machine and several
	// seconds beside a backlog's embedding, past the job's timeout).
	packBatch = 20_000
)

// NewProjection returns the projection use cases.
func NewProjection(cfg ProjectionConfig) *Projection {
	p := &Projection{db: cfg.DB, store: cfg.DB.Stores().Projection, entries: cfg.DB.Stores().Entries,
		embedders: cfg.Embedders, clock: cfg.Clock, log: cfg.Logger, batch: cfg.Batch, lease: cfg.Lease, bounds: cfg.Bounds,
		foldBatch: cfg.FoldBatch, unindexed: cfg.Unindexed, pending: cfg.PendingPostings}
	if p.clock == nil {
		p.clock = runtime.SystemClock{}
	}
	if p.log == nil {
		p.log = slog.Default()
	}
	if p.batch <= 0 {
		p.batch = DefaultProjectionBatch
	}
	if p.lease <= 0 {
		p.lease = DefaultProjectionLease
	}
	if p.foldBatch <= 0 {
		p.foldBatch = DefaultFoldBatch
	}
	if p.unindexed <= 0 {
		p.unindexed = DefaultUnindexed
	}
	if p.pending <= 0 {
		p.pending = DefaultPendingPostings
	}
	parallel := cfg.Parallel
	if parallel <= 0 {
		parallel = goruntime.GOMAXPROCS(0)
	}
	p.slots = make(chan struct{}, parallel)
	p.bounds = p.bounds.WithDefaults()
	return p
}

// Prepare creates the vector table of the configured embedder, so that writes can
// start scopes on it. The service calls it once at start.
func (p *Projection) Prepare(ctx context.Context) error {
	return p.store.EnsureModel(ctx, p.embedders.Configured().Model())
}

// Status reports the scope's projection for the maintenance status. A scope without
// one reports the generation its first entry will start: 1, of the configured model.
func (p *Projection) Status(ctx context.Context, scope runtime.Scope) (contract.VectorProjectionStatus, error) {
	st, err := p.status(ctx, scope)
	if err != nil {
		return contract.VectorProjectionStatus{}, err
	}
	return contract.VectorProjectionStatus{
		Generation: st.Generation.Number, Model: st.Generation.Model.ID, Dimensions: st.Generation.Model.Dimensions,
		PendingEntries: st.Pending, IndexedThroughMs: st.IndexedThroughMs,
	}, nil
}

func (p *Projection) status(ctx context.Context, scope runtime.Scope) (ProjectionStatus, error) {
	st, err := p.store.Status(ctx, scope)
	if err != nil {
		return ProjectionStatus{}, err
	}
	if st.Generation.Number == 0 {
		st.Generation = Generation{Number: 1, Model: p.embedders.Configured().Model()}
	}
	return st, nil
}

// EmbedBacklog embeds the scope's queued entries, batch by batch, and then folds the
// scope's stored vectors into the graph, until none is left of either or deadline has
// passed, and reports whether it finished. It runs as many
// lanes as the process has slots, each claiming, embedding and storing a batch of its
// own, so a burst keeps every core busy; the slots are shared with the other scopes'
// jobs of this process, so several jobs at once never run more batches than that.
// Entries whose generation's model this process cannot run stay queued (the rebuild
// that the model change starts embeds them); an error (the provider is down) is
// transient. The fold waits for the backlog, since a vector is recallable before it
// is in the graph and the graph's insert costs about what embedding the text did;
// only a scope holding more than the bound outside the graph folds while it embeds.
//
// A run whose deadline comes while entries are still queued hands the rest over
// instead of stopping: before a lane starts the batch that will end past the deadline,
// the run enqueues the scope's next projection job, which is picked up while the
// lanes finish their last batches and takes each slot as it frees. Without it the
// cores would wait for the last lane to finish and for the queue to start the job
// again. A handed-over run reports that it finished: the job it enqueued carries on.
func (p *Projection) EmbedBacklog(ctx context.Context, scope runtime.Scope, deadline time.Time) (bool, error) {
	lanes := cap(p.slots)
	finished := make([]bool, lanes)
	errs := make([]error, lanes)
	h := &handover{enqueue: func() error {
		return p.db.Stores().Jobs.Enqueue(ctx, ProjectionJob{TenantID: scope.TenantID, ProjectID: scope.ProjectID})
	}}
	var wg sync.WaitGroup
	for i := range lanes {
		wg.Go(func() { finished[i], errs[i] = p.embedLane(ctx, scope, deadline, h) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return false, err
	}
	if h.err != nil && ctx.Err() == nil {
		p.log.WarnContext(ctx, "the projection job could not hand its backlog over; it is snoozed instead",
			slog.String("tenant", scope.TenantID), slog.String("project", scope.ProjectID), slog.Any("error", h.err))
	}
	return h.handed || !slices.Contains(finished, false), nil
}

// handover enqueues a run's successor once, for the first lane to reach its last
// batch; err and handed are read once every lane has ended.
type handover struct {
	once    sync.Once
	enqueue func() error
	err     error
	handed  bool
}

func (h *handover) start() {
	h.once.Do(func() {
		h.err = h.enqueue()
		h.handed = h.err == nil
	})
}

// embedLane is one lane of EmbedBacklog: it claims and embeds one batch at a time, each
// in a slot of the process, and stores a batch while it claims and embeds the next, so
// that its core embeds while the database writes (a lane has at most one store in
// flight). After each store it folds a batch into the graph when the scope holds more
// than the bound outside the graph. Once none is left to claim it folds until nothing
// is left outside (finished), or until deadline has passed. A batch that, taking as
// long as the lane's last one, would end past deadline is the lane's last, and the run
// hands over (h) before it starts.
func (p *Projection) embedLane(ctx context.Context, scope runtime.Scope, deadline time.Time, h *handover) (bool, error) {
	var storing chan storeOutcome // the store of the batch before, while this one embeds
	settle := func() storeOutcome {
		if storing == nil {
			return storeOutcome{}
		}
		out := <-storing
		storing = nil
		return out
	}
	var took time.Duration // by the lane's last claim and embedding
	for {
		started := p.clock.Now()
		if !started.Add(took).Before(deadline) {
			h.start()
		}
		b, vectors, err := p.claimBatch(ctx, scope)
		took = p.clock.Now().Sub(started)
		stored := settle()
		if err := errors.Join(err, stored.err); err != nil {
			return false, err
		}
		if len(b.Entries) == 0 {
			if stored.requeued {
				continue
			}
			return p.foldLane(ctx, scope, deadline)
		}
		storing = make(chan storeOutcome, 1)
		go func() { storing <- p.storeBatch(ctx, scope, b, vectors) }()
		if !p.clock.Now().Before(deadline) {
			return false, settle().err
		}
	}
}

// foldLane folds the scope's vectors into the graph, a batch at a time in a slot of
// the process, until none is left outside, and then packs its text postings while it
// holds more than the bound unpacked (finished), or until deadline has passed.
func (p *Projection) foldLane(ctx context.Context, scope runtime.Scope, deadline time.Time) (bool, error) {
	for {
		if !p.clock.Now().Before(deadline) {
			return false, nil
		}
		select {
		case p.slots <- struct{}{}:
		case <-ctx.Done():
			return false, ctx.Err()
		}
		n, err := p.store.FoldVectors(ctx, scope, p.foldBatch, 0)
		if err == nil && n == 0 {
			n, err = p.store.PackText(ctx, scope, packBatch, p.pending)
		}
		<-p.slots
		if err != nil || n == 0 {
			return err == nil, err
		}
	}
}

// claimBatch claims and embeds one batch of the scope's backlog in a slot of the
// process. It returns an empty batch when there is none to claim, or when the batch's
// generation needs a model this process cannot run (the claim is released: the entries
// wait for the rebuild that the model change starts).
func (p *Projection) claimBatch(ctx context.Context, scope runtime.Scope) (Backlog, map[string][][]float32, error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return Backlog{}, nil, ctx.Err()
	}
	defer func() { <-p.slots }()
	b, err := p.store.ClaimBacklog(ctx, scope, p.batch, p.clock.Now().UnixMilli(), p.lease)
	if err != nil || len(b.Entries) == 0 {
		return Backlog{}, nil, err
	}
	vectors, err := p.embedBacklog(ctx, b)
	switch {
	case errors.Is(err, errNoEmbedder):
		p.log.WarnContext(ctx, "entries wait for a rebuild: no embedder for their generation's model",
			slog.String("tenant", scope.TenantID), slog.String("project", scope.ProjectID), slog.Any("error", err))
		return Backlog{}, nil, p.store.ReleaseBacklog(context.WithoutCancel(ctx), scope, b.Claim)
	case err != nil:
		return Backlog{}, nil, errors.Join(err, p.store.ReleaseBacklog(context.WithoutCancel(ctx), scope, b.Claim))
	}
	return b, vectors, nil
}

// storeOutcome is how a batch's store ended: requeued when its claim was released to
// be claimed again at once (the generations changed meanwhile).
type storeOutcome struct {
	requeued bool
	err      error
}

// storeBatch stores the vectors of a claimed batch and then folds a batch into the
// graph when the scope holds more than the bound outside it.
func (p *Projection) storeBatch(ctx context.Context, scope runtime.Scope, b Backlog, vectors map[string][][]float32) storeOutcome {
	err := p.store.StoreBacklog(ctx, scope, b.Claim, inputIDs(b.Entries), vectors)
	switch {
	case errors.Is(err, ErrProjectionChanged):
		return storeOutcome{requeued: true, err: p.store.ReleaseBacklog(ctx, scope, b.Claim)}
	case err != nil:
		return storeOutcome{err: errors.Join(err, p.store.ReleaseBacklog(context.WithoutCancel(ctx), scope, b.Claim))}
	}
	_, err = p.store.FoldVectors(ctx, scope, p.foldBatch, p.unindexed)
	return storeOutcome{err: err}
}

var errNoEmbedder = errors.New("no embedder for the model")

// embedBacklog embeds a claim's texts once per model of its live generations.
func (p *Projection) embedBacklog(ctx context.Context, b Backlog) (map[string][][]float32, error) {
	vectors := map[string][][]float32{}
	for _, g := range b.Generations {
		if _, done := vectors[g.Model.ID]; done {
			continue
		}
		emb, ok := p.embedders.ForModel(g.Model.ID)
		if !ok {
			return nil, fmt.Errorf("%w %s (generation %d)", errNoEmbedder, g.Model.ID, g.Number)
		}
		v, err := EmbedChecked(ctx, emb, g.Model, inputTexts(b.Entries, g.Model))
		if err != nil {
			return nil, err
		}
		vectors[g.Model.ID] = v
	}
	return vectors, nil
}

// inputTexts are the texts to embed of in, for a generation of model.
func inputTexts(in []EmbedInput, model EmbeddingModel) []string {
	texts := make([]string, len(in))
	for i, e := range in {
		texts[i] = e.Text(model)
	}
	return texts
}

func inputIDs(in []EmbedInput) []string {
	ids := make([]string, len(in))
	for i, e := range in {
		ids[i] = e.ID
	}
	return ids
}

// EmbedChecked embeds texts with emb, which must produce model's vectors, and checks
// the answer before anything stores it: one vector per text, each of model's length,
// finite and of unit length. An embedder that answers anything else (a provider
// returning garbage or another dimension) fails with EMBEDDING_UNAVAILABLE, so a bad
// answer never reaches the projection.
func EmbedChecked(ctx context.Context, emb Embedder, model EmbeddingModel, texts []string) ([][]float32, error) {
	if got := emb.Model(); got != model {
		return nil, EmbeddingUnavailable(fmt.Errorf("the embedder produces %s/%d, not %s/%d", got.ID, got.Dimensions, model.ID, model.Dimensions))
	}
	vectors, err := emb.Embed(ctx, texts)
	if err != nil {
		return nil, err
	}
	if len(vectors) != len(texts) {
		return nil, EmbeddingUnavailable(fmt.Errorf("the embedder answered %d vectors for %d texts", len(vectors), len(texts)))
	}
	for i, v := range vectors {
		if len(v) != model.Dimensions {
			return nil, EmbeddingUnavailable(fmt.Errorf("vector %d has %d dimensions, not %d", i, len(v), model.Dimensions))
		}
		var norm float64
		for _, x := range v {
			norm += float64(x) * float64(x)
		}
		if math.IsNaN(norm) || math.IsInf(norm, 0) || math.Abs(math.Sqrt(norm)-1) > 1e-3 {
			return nil, EmbeddingUnavailable(fmt.Errorf("vector %d is not a finite unit vector (length %g)", i, math.Sqrt(norm)))
		}
	}
	return vectors, nil
}

// sweepBatch is how many scopes one sweep transaction examines.
const sweepBatch = 500

// Sweep is the projection's periodic safety net, until deadline (it reports whether
// it finished): it enqueues a job for every scope whose queue holds entries no job is
// working on (a job that ran out of attempts, entries that waited for a rebuild), that
// holds vectors outside the graph (a fold interrupted by a crash) or text postings to
// pack (more than the bound unpacked, or postings of documents that are gone), and
// starts a rebuild in every scope that follows the configuration but whose active
// generation has another model (the configured embedder changed).
func (p *Projection) Sweep(ctx context.Context, deadline time.Time) (bool, error) {
	for _, walk := range []sweepWalk{p.backlogJobs, p.foldJobs, p.packJobs, p.staleRebuilds} {
		var after *runtime.Scope
		for {
			var last *runtime.Scope
			err := p.db.WithinTx(ctx, func(ctx context.Context, tx Stores) error {
				examined, jobs, err := walk(ctx, tx, after)
				last = examined
				if err != nil {
					return err
				}
				return tx.Jobs.Enqueue(ctx, jobs...)
			})
			if err != nil {
				return false, err
			}
			if !p.clock.Now().Before(deadline) {
				return false, nil
			}
			if last == nil {
				break
			}
			after = last
		}
	}
	return true, nil
}

// sweepWalk examines a batch of scopes after after, in one transaction, and returns
// the last one examined (nil: none was left) and the jobs to enqueue for them.
type sweepWalk func(ctx context.Context, tx Stores, after *runtime.Scope) (*runtime.Scope, []runtime.Job, error)

// backlogJobs is a projection job for every scope whose queue holds unclaimed entries.
func (p *Projection) backlogJobs(ctx context.Context, tx Stores, after *runtime.Scope) (*runtime.Scope, []runtime.Job, error) {
	due, last, err := tx.Projection.BacklogScopes(ctx, after, sweepBatch, p.clock.Now().UnixMilli())
	return last, projectionJobs(due), err
}

// foldJobs is a projection job for every scope holding vectors of a live generation
// outside the graph.
func (p *Projection) foldJobs(ctx context.Context, tx Stores, after *runtime.Scope) (*runtime.Scope, []runtime.Job, error) {
	due, last, err := tx.Projection.UnindexedScopes(ctx, after, sweepBatch)
	return last, projectionJobs(due), err
}

// packJobs is a projection job for every scope holding more text postings unpacked
// than the bound, or packed postings of documents that are gone.
func (p *Projection) packJobs(ctx context.Context, tx Stores, after *runtime.Scope) (*runtime.Scope, []runtime.Job, error) {
	due, last, err := tx.Projection.PendingTextScopes(ctx, after, sweepBatch, p.pending)
	return last, projectionJobs(due), err
}

// projectionJobs is a projection job for each scope.
func projectionJobs(scopes []runtime.Scope) []runtime.Job {
	jobs := make([]runtime.Job, len(scopes))
	for i, sc := range scopes {
		jobs[i] = ProjectionJob{TenantID: sc.TenantID, ProjectID: sc.ProjectID}
	}
	return jobs
}

// staleRebuilds starts a rebuild, with the configured embedder, in every scope that
// follows the configuration but whose active generation has another model.
func (p *Projection) staleRebuilds(ctx context.Context, tx Stores, after *runtime.Scope) (*runtime.Scope, []runtime.Job, error) {
	due, last, err := tx.Projection.StaleScopes(ctx, p.embedders.Configured().Model().ID, after, sweepBatch)
	if err != nil || len(due) == 0 {
		return last, nil, err
	}
	ops := make([]operation.NewOperation, len(due))
	jobs := make([]runtime.Job, len(due))
	for i, sc := range due {
		op, err := operation.PendingOperation(contract.OperationVectorRebuild, contract.RebuildProjectionRequest{}, p.clock.Now())
		if err != nil {
			return nil, nil, err
		}
		ops[i], jobs[i] = operation.NewOperation{Scope: sc, Operation: op}, runtime.NewOperationJob(sc, op.ID)
	}
	return last, jobs, tx.Operations.CreateOperations(ctx, ops)
}

// Rebuild starts a rebuild of the caller's projection as an operation, stored with
// its job in one transaction. It reports whether the operation was created now: while
// a rebuild of the same request is in flight, that one is returned; one of another
// request is CONFLICT.
func (p *Projection) Rebuild(ctx context.Context, scope runtime.Scope, req *contract.RebuildProjectionRequest) (*contract.OperationResponse, bool, error) {
	if req.Embedder != nil {
		if !slices.Contains(contract.Embedders, *req.Embedder) {
			return nil, false, runtime.OneOf("embedder", contract.Embedders)
		}
		if _, err := p.embedders.Named(*req.Embedder); err != nil {
			return nil, false, err
		}
	}
	norm := contract.RebuildProjectionRequest{Embedder: req.Embedder}
	op, err := operation.PendingOperation(contract.OperationVectorRebuild, norm, p.clock.Now())
	if err != nil {
		return nil, false, err
	}
	stored, created := op, true
	err = p.db.WithinTx(ctx, func(ctx context.Context, tx Stores) error {
		if err := tx.Projection.LockProjection(ctx, scope); err != nil {
			return err
		}
		existing, err := tx.Projection.InFlightRebuild(ctx, scope)
		switch {
		case err == nil && runtime.SameJSON(existing.Request, op.Request):
			stored, created = existing, false
			return nil
		case err == nil:
			return runtime.Errorf(contract.CodeConflict, "another rebuild of the projection is in flight").
				With("reason", "rebuild_in_progress").With("operationId", existing.ID)
		case runtime.ErrorCode(err) != contract.CodeNotFound:
			return err
		}
		if err := tx.Operations.CreateOperations(ctx, []operation.NewOperation{{Scope: scope, Operation: op}}); err != nil {
			return err
		}
		return tx.Jobs.Enqueue(ctx, runtime.NewOperationJob(scope, op.ID))
	})
	if err != nil {
		return nil, false, err
	}
	return &contract.OperationResponse{Operation: stored}, created, nil
}

// RebuildStep returns the step of a vector_rebuild operation, or a permanent error
// when it cannot run (its request names an embedder this process cannot run).
// Each step embeds one batch of the scope's active entries into the new generation;
// then the generation switches, and the retired ones are dropped.
func (p *Projection) RebuildStep(op contract.Operation) (func(ctx context.Context, scope runtime.Scope, nowMs int64) (bool, error), error) {
	var req contract.RebuildProjectionRequest
	if err := json.Unmarshal(op.Request, &req); err != nil {
		return nil, fmt.Errorf("decode the request of operation %s: %w", op.ID, err)
	}
	emb := p.embedders.Configured()
	if req.Embedder != nil {
		var err error
		if emb, err = p.embedders.Named(*req.Embedder); err != nil {
			return nil, err
		}
	}
	model := emb.Model()
	return func(ctx context.Context, scope runtime.Scope, nowMs int64) (bool, error) {
		cur, err := p.store.RebuildCursor(ctx, scope, op.ID)
		if err != nil {
			return false, err
		}
		switch {
		case cur == nil:
			if err := p.store.EnsureModel(ctx, model); err != nil {
				return false, err
			}
			return false, p.store.StartRebuild(ctx, scope, op.ID, model, req.Embedder != nil, nowMs)
		case cur.Phase == RebuildFill:
			return false, p.fill(ctx, scope, op.ID, *cur, nowMs)
		}
		return p.store.DropRetiredStep(ctx, scope, op.ID, p.bounds, p.embedders.Configured().Model().ID,
			contract.RebuildProjectionResult{Generation: cur.Generation, Model: cur.Model, Dimensions: cur.Dimensions,
				EmbeddedEntries: cur.Embedded}, nowMs)
	}, nil
}

// fill embeds the next batch of active entries into the building generation, or
// switches generations when none is left.
func (p *Projection) fill(ctx context.Context, scope runtime.Scope, opID string, cur RebuildCursor, nowMs int64) error {
	model := EmbeddingModel{ID: cur.Model, Dimensions: cur.Dimensions}
	emb, ok := p.embedders.ForModel(model.ID)
	if !ok {
		return EmbeddingUnavailable(fmt.Errorf("%w %s", errNoEmbedder, model.ID))
	}
	batch, err := p.entries.ActiveEntries(ctx, scope, cur.After, p.batch, nowMs)
	if err != nil {
		return err
	}
	if len(batch) == 0 {
		return p.store.SwitchGeneration(ctx, scope, opID, cur, nowMs)
	}
	vectors, err := EmbedChecked(ctx, emb, model, inputTexts(batch, model))
	if err != nil {
		return err
	}
	next := cur
	next.After, next.Embedded = batch[len(batch)-1].ID, cur.Embedded+int64(len(batch))
	return p.store.FillRebuild(ctx, scope, opID, cur, next, inputIDs(batch), vectors, nowMs)
}
