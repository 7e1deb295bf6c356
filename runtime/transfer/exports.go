package transfer

import (
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/conversation"
	"github.com/agent-context/agent-context/runtime/memory"
	"github.com/agent-context/agent-context/runtime/operation"
)

// Stores are the stores of export, import and the advanced operations.
type Stores struct {
	Artifacts   ArtifactStore
	Walks       RecordWalker
	Maintenance MaintenanceStore
	Steps       operation.StepStore
	Operations  operation.OperationStore
	Jobs        runtime.JobQueue
	Messages    conversation.MessageStore
	Windows     conversation.WindowStore
	Entries     memory.EntryStore
	Projection  ProjectionQueue
}

// ProjectionQueue is what import and the advanced operations need of the vector
// projection: an import queues the entries it created, a purge retires the entries it
// removed.
type ProjectionQueue interface {
	// Enqueue is memory.ProjectionQueue's Enqueue: it queues entries for embedding in
	// the writer's transaction. Errors: SERVICE_UNAVAILABLE.
	Enqueue(ctx context.Context, scope runtime.Scope, entries []contract.ContextEntry, model memory.EmbeddingModel) error
	// Retire is memory.ProjectionQueue's Retire: it removes entries that stopped being
	// active from the projection. Errors: SERVICE_UNAVAILABLE.
	Retire(ctx context.Context, scope runtime.Scope, ids []string) error
}

// Export, import and the advanced operations (docs/export.md). An export
// is an operation whose job streams the scope's records, step by step, into the
// agent-context-ndjson/v1 format and stores the stream as chunks of at most 1 MiB: no
// step holds more than its budget of records, so a conversation far larger than memory
// exports in bounded memory. The header (chunk 0) is written last, once the counts are
// known, and a last pass reads the chunks back in order to hash the whole artifact.

// Artifact is a stored export artifact: what export-artifacts/get shows, with State as
// stored (building, ready or deleting; expired is read from ExpiresAtMs) and its format.
type Artifact struct {
	contract.ExportArtifact
	Format string
}

// ArtifactChunk is one stored chunk of an artifact.
type ArtifactChunk struct {
	Index  int
	Data   []byte
	SHA256 string
}

// ExportKey is where a walk over one kind of record stands: after the message
// (ConversationID, Sequence), after the invocation (Time, ID), or after the record ID.
type ExportKey struct {
	ConversationID string `json:"conversationId,omitempty"`
	Sequence       int64  `json:"sequence,omitempty"`
	Time           int64  `json:"time,omitempty"`
	ID             string `json:"id,omitempty"`
}

// startKey is the key before every record: IDs are never empty, times never negative.
var startKey = ExportKey{Time: -1}

// ExportQuery selects the next records of one kind, in the stream's order, after After:
// at most Rows records holding about Bytes bytes of content (always at least one).
// Records of deleted conversations are left out; ConversationID (when set) keeps one
// conversation's; windows, derivations and invocations created at or after
// CreatedBefore are left out, so that a derivation or an invocation never names a
// window the export passed before it was written.
type ExportQuery struct {
	ConversationID string
	CreatedBefore  int64
	After          ExportKey
	Rows           int
	Bytes          int64
}

// WindowSink receives windows as a stream: each header (without items), then its
// items in ordinal order, then its end.
type WindowSink interface {
	Window(w *contract.Window) error
	Item(it *contract.WindowItem) error
	EndWindow() error
}

// ArtifactStore keeps export artifacts and their chunks. Every method is confined to
// scope (the purge walks them all).
type ArtifactStore interface {
	// CreateArtifact stores a building artifact. Errors: SERVICE_UNAVAILABLE.
	CreateArtifact(ctx context.Context, scope runtime.Scope, a Artifact, evidenceKey *string) error
	// Artifact returns an artifact; one being deleted is NOT_FOUND like a missing one.
	// Errors: NOT_FOUND, SERVICE_UNAVAILABLE.
	Artifact(ctx context.Context, scope runtime.Scope, id string) (Artifact, error)
	// OperationArtifact returns the artifact of an export operation. Errors: NOT_FOUND
	// (none, or deleted meanwhile), SERVICE_UNAVAILABLE.
	OperationArtifact(ctx context.Context, scope runtime.Scope, operationID string) (Artifact, error)
	// Chunks calls fn with up to limit chunks of an artifact from index from on, in
	// index order. Errors: SERVICE_UNAVAILABLE, fn's.
	Chunks(ctx context.Context, scope runtime.Scope, artifactID string, from, limit int, fn func(ArtifactChunk) error) error
	// WriteChunks stores chunks of a building artifact, adds them to its totals and
	// records the conversations whose records they hold. It first locks those
	// conversations against deletion, then the artifact. Errors: CONFLICT with reason
	// conversation_deleted (a conversation was deleted meanwhile) or artifact_deleted
	// (the artifact is no longer building), SERVICE_UNAVAILABLE. The locks last until
	// the transaction ends: call it inside a unit of work.
	WriteChunks(ctx context.Context, scope runtime.Scope, artifactID string, chunks []ArtifactChunk, conversations []string) error
	// FinishArtifact makes a building artifact ready with the SHA-256 of its chunks.
	// Errors: CONFLICT reason artifact_deleted, SERVICE_UNAVAILABLE.
	FinishArtifact(ctx context.Context, scope runtime.Scope, artifactID, sha string) error
	// PurgeArtifactsStep removes, within bounds, the chunks of an artifact of any
	// scope that expired at nowMs or whose export failed, and the artifact once its
	// chunks are gone; it reports done when none is left.
	PurgeArtifactsStep(ctx context.Context, nowMs int64, bounds operation.StepBounds) (done bool, err error)
}

// RecordWalker walks a scope's records for exports and the integrity check.
type RecordWalker interface {
	// ExportMessages, ExportWindows, ExportDerivations, ExportInvocations and
	// ExportEntries walk the records of q in the stream's order (messages by
	// conversation and sequence, windows, derivations and entries by ID, invocations
	// by start time and ID), each as stored, and report whether q's bounds cut the
	// walk short. A derivation comes with the conversations of its target window (its
	// own) and of its source window.
	// Errors: SERVICE_UNAVAILABLE, the callback's.
	ExportMessages(ctx context.Context, scope runtime.Scope, q ExportQuery, fn func(*contract.ConversationRecord) error) (more bool, err error)
	ExportWindows(ctx context.Context, scope runtime.Scope, q ExportQuery, sink WindowSink) (more bool, err error)
	ExportDerivations(ctx context.Context, scope runtime.Scope, q ExportQuery, fn func(d *contract.Derivation, target, source string) error) (more bool, err error)
	ExportInvocations(ctx context.Context, scope runtime.Scope, q ExportQuery, fn func(*contract.ModelInvocation) error) (more bool, err error)
	ExportEntries(ctx context.Context, scope runtime.Scope, q ExportQuery, fn func(*contract.ContextEntry) error) (more bool, err error)
}

// MaintenanceStore runs the steps of the advanced operations that change rows.
type MaintenanceStore interface {
	// PurgeExpiredEntries deletes the entries after after whose expiry passed at
	// cutoffMs (active or expired, not superseded or merged), at most limit examined
	// in (expiresAtMs, id) order, and returns their IDs, the last key examined and
	// whether more may follow. Errors: SERVICE_UNAVAILABLE.
	PurgeExpiredEntries(ctx context.Context, scope runtime.Scope, cutoffMs int64, after ExportKey, limit int) (purged []string, last ExportKey, more bool, err error)
	// ReindexMessages rebuilds the full-text documents of the messages after after,
	// within bounds, and returns the last one rebuilt, how many and whether more may
	// follow; ReindexEntries does the same for entries (keyed by ID). Errors:
	// SERVICE_UNAVAILABLE.
	ReindexMessages(ctx context.Context, scope runtime.Scope, after ExportKey, bounds operation.StepBounds) (last ExportKey, n int64, more bool, err error)
	ReindexEntries(ctx context.Context, scope runtime.Scope, after ExportKey, bounds operation.StepBounds) (last ExportKey, n int64, more bool, err error)
}

// ExportsConfig configures the export, import and advanced operation use cases.
type ExportsConfig struct {
	DB     runtime.UnitOfWork[Stores]
	Clock  runtime.Clock
	Logger *slog.Logger
	// TTL is how long an artifact lives once created (default 24 h).
	TTL time.Duration
	// StepBytes bounds the content one export step reads and the chunks it holds
	// before it writes them (default 8 MiB), and so the export's memory.
	StepBytes int64
	// Bounds bound the other steps (purges, the hash pass, verify, reindex).
	Bounds operation.StepBounds
	// Model is the configured embedder's: an import queues the active entries it
	// writes for it, as entry writes do.
	Model memory.EmbeddingModel
}

// Defaults of ExportsConfig.
const (
	DefaultExportTTL       = 24 * time.Hour
	DefaultExportStepBytes = 8 << 20
)

// Exports holds the use cases of export, import, export artifacts and the advanced
// operations, and runs the work of their jobs.
type Exports struct {
	db        runtime.UnitOfWork[Stores]
	store     ArtifactStore
	clock     runtime.Clock
	log       *slog.Logger
	ttl       time.Duration
	stepBytes int64
	bounds    operation.StepBounds
	model     memory.EmbeddingModel
}

// NewExports returns the use cases.
func NewExports(cfg ExportsConfig) *Exports {
	x := &Exports{db: cfg.DB, store: cfg.DB.Stores().Artifacts, clock: cfg.Clock, log: cfg.Logger, ttl: cfg.TTL,
		stepBytes: cfg.StepBytes, bounds: cfg.Bounds, model: cfg.Model}
	if x.clock == nil {
		x.clock = runtime.SystemClock{}
	}
	if x.log == nil {
		x.log = slog.Default()
	}
	if x.ttl <= 0 {
		x.ttl = DefaultExportTTL
	}
	if x.stepBytes <= 0 {
		x.stepBytes = DefaultExportStepBytes
	}
	x.bounds = x.bounds.WithDefaults()
	return x
}

// Export starts an export of the caller's scope: the operation, its building
// artifact and its job in one transaction.
func (x *Exports) Export(ctx context.Context, scope runtime.Scope, req *contract.ExportRequest) (*contract.OperationResponse, error) {
	norm, err := validateExport(req)
	if err != nil {
		return nil, err
	}
	op, err := operation.PendingOperation(contract.OperationExport, norm, x.clock.Now())
	if err != nil {
		return nil, err
	}
	art := Artifact{Format: contract.FormatNDJSON, ExportArtifact: contract.ExportArtifact{
		ID: runtime.NewID(), OperationID: op.ID, State: contract.ArtifactBuilding, CreatedAtMs: op.CreatedAtMs,
		ExpiresAtMs: op.CreatedAtMs + x.ttl.Milliseconds(),
	}}
	err = x.db.WithinTx(ctx, func(ctx context.Context, tx Stores) error {
		if err := tx.Operations.CreateOperations(ctx, []operation.NewOperation{{Scope: scope, Operation: op}}); err != nil {
			return err
		}
		if err := tx.Artifacts.CreateArtifact(ctx, scope, art, nil); err != nil {
			return err
		}
		return tx.Jobs.Enqueue(ctx, runtime.NewOperationJob(scope, op.ID))
	})
	if err != nil {
		return nil, err
	}
	return &contract.OperationResponse{Operation: op}, nil
}

// validateExport checks an export request and returns it normalized: include in
// stream order, every kind when absent.
func validateExport(req *contract.ExportRequest) (contract.ExportRequest, error) {
	norm := contract.ExportRequest{ConversationID: req.ConversationID, Include: contract.ExportIncludes}
	if req.ConversationID != nil {
		if err := runtime.ValidateID("conversationId", *req.ConversationID); err != nil {
			return norm, err
		}
	}
	if req.Include == nil {
		return norm, nil
	}
	if len(req.Include) == 0 {
		return norm, runtime.Invalid("include", "include must name at least one of %v (or be absent for all)", contract.ExportIncludes)
	}
	for i, kind := range req.Include {
		field := fmt.Sprintf("include[%d]", i)
		if !slices.Contains(contract.ExportIncludes, kind) {
			return norm, runtime.OneOf(field, contract.ExportIncludes)
		}
		if slices.Index(req.Include, kind) < i {
			return norm, runtime.Invalid(field, "%s repeats %q", field, kind)
		}
	}
	norm.Include = nil
	for _, kind := range contract.ExportIncludes {
		if slices.Contains(req.Include, kind) {
			norm.Include = append(norm.Include, kind)
		}
	}
	return norm, nil
}

// GetArtifact returns an artifact of the caller's scope.
func (x *Exports) GetArtifact(ctx context.Context, scope runtime.Scope, req *contract.GetArtifactRequest) (*contract.ExportArtifact, error) {
	if err := runtime.ValidateID("artifactId", req.ArtifactID); err != nil {
		return nil, err
	}
	a, err := x.store.Artifact(ctx, scope, req.ArtifactID)
	if err != nil {
		return nil, err
	}
	out := x.present(a)
	return &out.ExportArtifact, nil
}

// present returns a as a client sees it now: a ready artifact past its expiry is
// expired.
func (x *Exports) present(a Artifact) Artifact {
	if a.State == contract.ArtifactReady && a.ExpiresAtMs <= x.clock.Now().UnixMilli() {
		a.State = contract.ArtifactExpired
	}
	return a
}

// readable returns the artifact id of scope if it can be read now: CONFLICT while it
// is building (reason artifact_not_ready) and once it expired (artifact_expired).
func (x *Exports) readable(ctx context.Context, store ArtifactStore, scope runtime.Scope, field, id string) (Artifact, error) {
	a, err := store.Artifact(ctx, scope, id)
	if err != nil {
		if runtime.ErrorCode(err) == contract.CodeNotFound {
			return Artifact{}, runtime.NotFound(field, "export artifact")
		}
		return Artifact{}, err
	}
	switch a = x.present(a); a.State {
	case contract.ArtifactBuilding:
		return Artifact{}, runtime.Errorf(contract.CodeConflict, "the export artifact is still being built").
			With("reason", "artifact_not_ready").With("field", field)
	case contract.ArtifactExpired:
		return Artifact{}, runtime.Errorf(contract.CodeConflict, "the export artifact has expired").
			With("reason", "artifact_expired").With("field", field)
	}
	return a, nil
}

// Chunk returns one chunk of a ready artifact; an index out of range is NOT_FOUND.
func (x *Exports) Chunk(ctx context.Context, scope runtime.Scope, req *contract.GetChunkRequest) (*contract.ExportChunk, error) {
	if err := runtime.ValidateID("artifactId", req.ArtifactID); err != nil {
		return nil, err
	}
	if req.Index == nil {
		return nil, runtime.Invalid("index", "index is required")
	}
	if *req.Index < 0 {
		return nil, runtime.Invalid("index", "index must not be negative")
	}
	a, err := x.readable(ctx, x.store, scope, "artifactId", req.ArtifactID)
	if err != nil {
		return nil, err
	}
	if *req.Index >= a.ChunkCount {
		return nil, runtime.NotFound("index", "chunk").With("chunkCount", a.ChunkCount)
	}
	var out *contract.ExportChunk
	err = x.store.Chunks(ctx, scope, a.ID, *req.Index, 1, func(c ArtifactChunk) error {
		out = &contract.ExportChunk{Index: c.Index, Data: base64.StdEncoding.EncodeToString(c.Data), SHA256: c.SHA256,
			Last: c.Index == a.ChunkCount-1}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if out == nil {
		return nil, runtime.NotFound("index", "chunk")
	}
	return out, nil
}

// StoreSnapshot stores an A2A snapshot document as a ready artifact of format
// a2a-snapshot/v1 under the evidence key proof:a2a-snapshot-v1, with a succeeded
// export operation whose request is request, in one transaction, and returns the
// artifact's ID.
func (x *Exports) StoreSnapshot(ctx context.Context, scope runtime.Scope, data []byte, request any) (string, error) {
	op, err := operation.PendingOperation(contract.OperationExport, request, x.clock.Now())
	if err != nil {
		return "", err
	}
	art := Artifact{Format: contract.FormatA2ASnapshot, ExportArtifact: contract.ExportArtifact{
		ID: runtime.NewID(), OperationID: op.ID, State: contract.ArtifactBuilding, CreatedAtMs: op.CreatedAtMs,
		ExpiresAtMs: op.CreatedAtMs + x.ttl.Milliseconds(),
	}}
	w := newChunkWriter(0)
	if _, err := w.Write(data); err != nil {
		return "", err
	}
	chunks := w.finish()
	evidence := contract.SnapshotEvidenceKey
	err = x.db.WithinTx(ctx, func(ctx context.Context, tx Stores) error {
		if err := tx.Operations.CreateOperations(ctx, []operation.NewOperation{{Scope: scope, Operation: op}}); err != nil {
			return err
		}
		if err := tx.Artifacts.CreateArtifact(ctx, scope, art, &evidence); err != nil {
			return err
		}
		if err := tx.Artifacts.WriteChunks(ctx, scope, art.ID, chunks, nil); err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		if err := tx.Artifacts.FinishArtifact(ctx, scope, art.ID, hex.EncodeToString(sum[:])); err != nil {
			return err
		}
		return tx.Steps.SucceedStep(ctx, scope, op.ID, contract.ExportResult{ArtifactID: art.ID}, int64(len(chunks)), op.CreatedAtMs)
	})
	if err != nil {
		return "", err
	}
	return art.ID, nil
}

// ExportPurgeJob is the periodic job that removes expired export artifacts and those
// of failed exports (Exports.PurgeArtifacts).
type ExportPurgeJob struct{}

// Kind implements Job.
func (ExportPurgeJob) Kind() string { return "agent_context_export_purge" }

// PurgeArtifacts removes expired artifacts and those of failed exports, in every
// scope, step by step until none is left or deadline passed; it reports whether it
// finished. The periodic purge job runs it.
func (x *Exports) PurgeArtifacts(ctx context.Context, _, deadline time.Time) (bool, error) {
	for {
		done, err := x.store.PurgeArtifactsStep(ctx, x.clock.Now().UnixMilli(), x.bounds)
		if err != nil || done {
			return done, err
		}
		if !x.clock.Now().Before(deadline) {
			return false, nil
		}
	}
}

// Step returns the step of an export or an advanced operation, or a permanent error
// when the operation cannot run (an unreadable request).
func (x *Exports) Step(op contract.Operation) (func(ctx context.Context, scope runtime.Scope, nowMs int64) (bool, error), error) {
	switch op.Kind {
	case contract.OperationExport:
		var req contract.ExportRequest
		if err := json.Unmarshal(op.Request, &req); err != nil || len(req.Include) == 0 {
			return nil, fmt.Errorf("decode the request of operation %s: %v", op.ID, err)
		}
		return func(ctx context.Context, scope runtime.Scope, nowMs int64) (bool, error) {
			return x.exportStep(ctx, scope, op, &req, nowMs)
		}, nil
	case contract.OperationAdvanced:
		return x.advancedStep(op)
	}
	return nil, fmt.Errorf("no export step runs operations of kind %q", op.Kind)
}

// Phases of an export.
const (
	exportRecords = "records"
	exportHash    = "hash"
)

// exportCursor is where an export stands, kept with its operation.
type exportCursor struct {
	Phase string `json:"phase"`
	// Section is the kind of record being walked and Key the last one written.
	Section string    `json:"section"`
	Key     ExportKey `json:"key"`
	// NextChunk is the index the next chunk gets (chunk 0 is the header, written
	// last), Bytes the bytes of the chunks written so far.
	NextChunk int                   `json:"nextChunk"`
	Bytes     int64                 `json:"bytes"`
	Counts    contract.RecordCounts `json:"counts"`
	// Hashed counts the chunks the hash pass has read, HashState is its SHA-256
	// state.
	Hashed    int    `json:"hashed"`
	HashState []byte `json:"hashState,omitempty"`
}

// errRetryStep rolls a step back to be run again at once: a conversation whose
// records it read was deleted meanwhile, and the next attempt leaves them out.
var errRetryStep = errors.New("retry the step")

// exportStep runs one step of an export in one transaction: the next records into
// chunks, or the header, or a part of the hash pass.
func (x *Exports) exportStep(ctx context.Context, scope runtime.Scope, op contract.Operation, req *contract.ExportRequest, nowMs int64) (bool, error) {
	done := false
	err := x.db.WithinTx(ctx, func(ctx context.Context, tx Stores) error {
		var cur exportCursor
		running, err := tx.Steps.LockStep(ctx, scope, op.ID, x.bounds.Timeout, &cur)
		if err != nil || !running {
			done = err == nil
			return err
		}
		art, err := tx.Artifacts.OperationArtifact(ctx, scope, op.ID)
		if runtime.ErrorCode(err) == contract.CodeNotFound || err == nil && art.State != contract.ArtifactBuilding {
			done = true
			return x.failDeleted(ctx, tx, scope, op.ID, nowMs)
		}
		if err != nil {
			return err
		}
		if cur.Phase == "" {
			cur = exportCursor{Phase: exportRecords, Section: req.Include[0], Key: startKey, NextChunk: 1}
		}
		if cur.Phase == exportHash {
			return x.hashStep(ctx, tx, scope, op.ID, art.ID, &cur, nowMs, &done)
		}
		w := newChunkWriter(cur.NextChunk)
		records, finished, err := x.exportRecords(ctx, tx, scope, op.CreatedAtMs, req, &cur, w)
		if err != nil {
			return err
		}
		chunks := w.finish()
		if finished {
			// The header goes last, as chunk 0, once the counts are known.
			header := newChunkWriter(0)
			if err := header.line(contract.ExportHeader{Type: contract.RecordHeader, FormatVersion: contract.NDJSONFormatVersion,
				ExportedAtMs: op.CreatedAtMs, Counts: cur.Counts}); err != nil {
				return err
			}
			chunks = append(chunks, header.finish()...)
			cur.Phase = exportHash
		}
		if err := tx.Artifacts.WriteChunks(ctx, scope, art.ID, chunks, w.conversationIDs()); err != nil {
			if reason(err) == "artifact_deleted" {
				done = true
				return x.failDeleted(ctx, tx, scope, op.ID, nowMs)
			}
			if reason(err) == "conversation_deleted" {
				return errRetryStep
			}
			return err
		}
		cur.NextChunk = w.next
		for _, c := range chunks {
			cur.Bytes += int64(len(c.Data))
		}
		return tx.Steps.SaveStep(ctx, scope, op.ID, cur, records, nowMs)
	})
	if errors.Is(err, errRetryStep) {
		return false, nil
	}
	return done, err
}

// failDeleted fails an export whose artifact was removed because a conversation whose
// records it held was deleted.
func (x *Exports) failDeleted(ctx context.Context, tx Stores, scope runtime.Scope, id string, nowMs int64) error {
	x.log.WarnContext(ctx, "export failed: a conversation it held was deleted", slog.String("operation_id", id))
	return tx.Operations.FailOperation(ctx, scope, id, contract.OperationError{Code: contract.CodeConflict,
		Message: "a conversation in the export was deleted while it ran; export again"}, nowMs)
}

// reason is details.reason of a runtime error, or "".
func reason(err error) string {
	var re *runtime.Error
	if errors.As(err, &re) {
		r, _ := re.Details["reason"].(string)
		return r
	}
	return ""
}

// exportRecords writes the next records of the export into w, section by section,
// until the step's budget is spent, advancing cur; it returns how many it wrote and
// whether the last section is finished.
func (x *Exports) exportRecords(ctx context.Context, tx Stores, scope runtime.Scope, createdAt int64, req *contract.ExportRequest, cur *exportCursor, w *chunkWriter) (int64, bool, error) {
	var records int64
	conversation := ""
	if req.ConversationID != nil {
		conversation = *req.ConversationID
	}
	for {
		rows := x.bounds.Rows - int(records)
		bytes := x.stepBytes - w.size
		if rows <= 0 || bytes <= 0 {
			return records, false, nil
		}
		q := ExportQuery{ConversationID: conversation, CreatedBefore: createdAt, After: cur.Key, Rows: rows, Bytes: bytes}
		more, err := x.exportSection(ctx, tx, scope, cur, q, w, &records)
		if err != nil || more {
			return records, false, err
		}
		i := slices.Index(req.Include, cur.Section)
		if i == len(req.Include)-1 {
			return records, true, nil
		}
		cur.Section, cur.Key = req.Include[i+1], startKey
	}
}

// exportSection writes the records of cur's section that q selects.
func (x *Exports) exportSection(ctx context.Context, tx Stores, scope runtime.Scope, cur *exportCursor, q ExportQuery, w *chunkWriter, records *int64) (bool, error) {
	s := tx.Walks
	switch cur.Section {
	case contract.IncludeMessages:
		return s.ExportMessages(ctx, scope, q, func(m *contract.ConversationRecord) error {
			cur.Key = ExportKey{ConversationID: m.Scope.ConversationID, Sequence: m.Sequence}
			cur.Counts.Messages++
			*records++
			w.conversation(m.Scope.ConversationID)
			return w.record(contract.RecordMessage, m)
		})
	case contract.IncludeWindows:
		return s.ExportWindows(ctx, scope, q, &windowLines{w: w, counted: func(id string) {
			cur.Key = ExportKey{ID: id}
			cur.Counts.Windows++
			*records++
		}})
	case contract.IncludeDerivations:
		return s.ExportDerivations(ctx, scope, q, func(d *contract.Derivation, target, source string) error {
			cur.Key = ExportKey{ID: d.ID}
			cur.Counts.Derivations++
			*records++
			w.conversation(target)
			w.conversation(source)
			return w.record(contract.RecordDerivation, d)
		})
	case contract.IncludeInvocations:
		return s.ExportInvocations(ctx, scope, q, func(m *contract.ModelInvocation) error {
			cur.Key = ExportKey{Time: m.StartedAtMs, ID: m.ID}
			cur.Counts.Invocations++
			*records++
			w.conversation(m.Conversation.ConversationID)
			return w.record(contract.RecordInvocation, m)
		})
	case contract.IncludeEntries:
		return s.ExportEntries(ctx, scope, q, func(e *contract.ContextEntry) error {
			cur.Key = ExportKey{ID: e.ID}
			cur.Counts.Entries++
			*records++
			if e.ConversationID != nil {
				w.conversation(*e.ConversationID)
			}
			return w.record(contract.RecordEntry, e)
		})
	}
	return false, fmt.Errorf("unknown export section %q", cur.Section)
}

// hashStep reads the next chunks of the artifact in order into the whole-artifact
// hash; after the last one the artifact is ready and the operation succeeded.
func (x *Exports) hashStep(ctx context.Context, tx Stores, scope runtime.Scope, opID, artifactID string, cur *exportCursor, nowMs int64, done *bool) error {
	h := sha256.New()
	if cur.HashState != nil {
		if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(cur.HashState); err != nil {
			return fmt.Errorf("export %s: restore the hash: %w", opID, err)
		}
	}
	limit := max(1, int(x.bounds.Bytes/contract.MaxExportChunkBytes))
	err := tx.Artifacts.Chunks(ctx, scope, artifactID, cur.Hashed, limit, func(c ArtifactChunk) error {
		if c.Index != cur.Hashed {
			return fmt.Errorf("export %s: chunk %d is missing", opID, cur.Hashed)
		}
		if sum := sha256.Sum256(c.Data); hex.EncodeToString(sum[:]) != c.SHA256 {
			return fmt.Errorf("export %s: chunk %d does not match its SHA-256", opID, c.Index)
		}
		h.Write(c.Data)
		cur.Hashed++
		return nil
	})
	if err != nil {
		return err
	}
	if cur.Hashed < cur.NextChunk {
		state, err := h.(encoding.BinaryMarshaler).MarshalBinary()
		if err != nil {
			return err
		}
		cur.HashState = state
		return tx.Steps.SaveStep(ctx, scope, opID, cur, 0, nowMs)
	}
	if err := tx.Artifacts.FinishArtifact(ctx, scope, artifactID, hex.EncodeToString(h.Sum(nil))); err != nil {
		if reason(err) == "artifact_deleted" {
			*done = true
			return x.failDeleted(ctx, tx, scope, opID, nowMs)
		}
		return err
	}
	*done = true
	return tx.Steps.SucceedStep(ctx, scope, opID, contract.ExportResult{ArtifactID: artifactID}, 0, nowMs)
}
