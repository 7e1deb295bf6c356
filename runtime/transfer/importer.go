package transfer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/conversation"
	"github.com/agent-context/agent-context/runtime/memory"
)

// Bounds of an import's batches.
const (
	// importBatchBytes bounds the message content of one append batch of an import.
	importBatchBytes = 8 << 20
	// importQueueBatch is how many imported entries are queued for embedding at once.
	importQueueBatch = 500
	// importEntryBatch is how many entries one statement of an import creates.
	importEntryBatch = 500
	// MaxImportConflictIDs bounds details.ids of a conflicting import;
	// details.conflicts counts them all.
	MaxImportConflictIDs = 10_000
)

// importer writes the records of one import through the stores of its transaction.
type importer struct {
	tx    Stores
	p     runtime.Principal
	model memory.EmbeddingModel
	nowMs int64

	res  contract.ImportResponse
	seen contract.RecordCounts
	// The messages of the next append, their content bytes and the conflicts the
	// last plan found among them.
	batch          []contract.ConversationRecord
	batchBytes     int
	batchConflicts []string
	// The entries of the next create and their digests.
	entries []contract.ContextEntry
	digests []string
	// Active entries written and not yet queued for embedding.
	queue  []contract.ContextEntry
	queued bool

	conflicts     []string
	conflictCount int
}

// run imports the stream of r.
func (im *importer) run(ctx context.Context, r *ndjsonReader) (*contract.ImportResponse, error) {
	h, err := r.header()
	if err != nil {
		return nil, err
	}
	for {
		rec, ok, err := r.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		// A batch is written before a record of another type, so records are written
		// (and their conflicts listed) in the stream's order. Batch errors name the
		// batch's records, not this line.
		if rec.message == nil {
			if err := im.flushMessages(ctx); err != nil {
				return nil, err
			}
		}
		if rec.entry == nil {
			if err := im.flushEntries(ctx); err != nil {
				return nil, err
			}
		}
		if err := im.add(ctx, rec); err != nil {
			return nil, r.fail(err)
		}
	}
	if err := im.flushMessages(ctx); err != nil {
		return nil, err
	}
	if err := im.flushEntries(ctx); err != nil {
		return nil, err
	}
	if err := im.flushQueue(ctx, true); err != nil {
		return nil, err
	}
	if im.seen != h.Counts {
		return nil, runtime.Invalid(r.field, "the header's counts do not match the records that follow it").
			With("reason", "counts_mismatch").With("counts", h.Counts).With("records", im.seen)
	}
	if im.conflictCount > 0 {
		return nil, runtime.Errorf(contract.CodeIdempotencyConflict,
			"%d records exist with the same ID but different content; nothing was imported", im.conflictCount).
			With("ids", im.conflicts).With("conflicts", im.conflictCount).With("truncated", im.conflictCount > len(im.conflicts))
	}
	return &im.res, nil
}

func (im *importer) conflict(id string) {
	im.conflictCount++
	if len(im.conflicts) < MaxImportConflictIDs {
		im.conflicts = append(im.conflicts, id)
	}
}

// add checks one record as its original write checks it and writes it (a message
// joins the next append batch).
func (im *importer) add(ctx context.Context, rec importRecord) error {
	switch {
	case rec.message != nil:
		im.seen.Messages++
		m, err := conversation.ValidateMessage("record", *rec.message)
		if err != nil {
			return err
		}
		im.batch = append(im.batch, m)
		im.batchBytes += len(m.Content)
		if len(im.batch) >= contract.MaxAppendMessages || im.batchBytes >= importBatchBytes {
			return im.flushMessages(ctx)
		}
		return nil
	case rec.window != nil:
		im.seen.Windows++
		return im.addWindow(ctx, rec.window)
	case rec.derivation != nil:
		im.seen.Derivations++
		return im.addDerivation(ctx, rec.derivation)
	case rec.invocation != nil:
		im.seen.Invocations++
		return im.addInvocation(ctx, rec.invocation)
	default:
		im.seen.Entries++
		return im.addEntry(ctx, rec.entry)
	}
}

// flushMessages appends the batch with the append's own planner, less the records
// that conflict with stored ones (or earlier ones of the batch), which are collected.
func (im *importer) flushMessages(ctx context.Context) error {
	if len(im.batch) == 0 {
		return nil
	}
	res, err := im.tx.Messages.AppendMessages(ctx, im.p.Scope, im.batch, im.planMessages, im.nowMs)
	if err != nil {
		return im.messageIDs(err)
	}
	im.res.Imported.Messages += int64(res.Appended)
	im.res.Skipped.Messages += int64(len(res.SkippedIDs))
	for _, id := range im.batchConflicts {
		im.conflict(id)
	}
	im.batch, im.batchBytes = im.batch[:0], 0
	return nil
}

// planMessages is PlanAppend for an import: a record whose ID exists with other
// content is left out and noted as a conflict instead of failing the batch, so that
// the import can name every conflict before it writes nothing.
func (im *importer) planMessages(batch []contract.ConversationRecord, last map[string]int64, existing []conversation.MessageDigest, nowMs int64) (conversation.AppendPlan, error) {
	type key struct{ conversation, id string }
	stored := make(map[key]conversation.MessageDigest, len(existing))
	for _, d := range existing {
		stored[key{d.ConversationID, d.ID}] = d
	}
	first := make(map[key]contract.ConversationRecord, len(batch))
	keep := make([]contract.ConversationRecord, 0, len(batch))
	im.batchConflicts = im.batchConflicts[:0]
	for _, m := range batch {
		k := key{m.Scope.ConversationID, m.ID}
		d, isStored := stored[k]
		f, isRepeat := first[k]
		if isStored && !conversation.SameAsStored(m, d) || isRepeat && !conversation.SameAsPlanned(m, f) {
			im.batchConflicts = append(im.batchConflicts, messageRef(m))
			continue
		}
		if !isRepeat {
			first[k] = m
		}
		keep = append(keep, m)
	}
	return conversation.PlanAppend(keep, last, existing, nowMs)
}

func messageRef(m contract.ConversationRecord) string {
	return contract.RecordMessage + ":" + m.Scope.ConversationID + "/" + m.ID
}

// messageIDs names the messages of a sequence refusal as an import names records.
func (im *importer) messageIDs(err error) error {
	var re *runtime.Error
	ids, ok := []string(nil), false
	if errors.As(err, &re) {
		ids, ok = re.Details["ids"].([]string)
	}
	if !ok || re.Code == contract.CodeIdempotencyConflict {
		return err
	}
	var refs []string
	for _, m := range im.batch {
		if slices.Contains(ids, m.ID) && !slices.Contains(refs, messageRef(m)) {
			refs = append(refs, messageRef(m))
		}
	}
	re.Details["ids"] = refs
	return re
}

// outcome counts a record's write: written now, skipped as the same record, or a
// conflict named ref.
func (im *importer) outcome(err error, created, same bool, imported, skipped *int64, ref string) error {
	switch {
	case err != nil:
		return prefixField("record", err)
	case created:
		*imported++
	case same:
		*skipped++
	default:
		im.conflict(ref)
	}
	return nil
}

func (im *importer) addWindow(ctx context.Context, rec *contract.Window) error {
	var items []contract.WindowItemInput
	if rec.Items != nil {
		items = make([]contract.WindowItemInput, len(rec.Items))
	}
	for i := range rec.Items {
		it := &rec.Items[i]
		items[i] = contract.WindowItemInput{ID: it.ID, Ordinal: &it.Ordinal, Kind: it.Kind, Role: it.Role, Content: &it.Content,
			SourceRecordID: it.SourceRecordID, KnowledgeEvidence: it.KnowledgeEvidence, Metadata: it.Metadata}
	}
	ref := rec.Conversation
	w, err := conversation.ValidateWindow(&contract.CreateWindowRequest{ID: &rec.ID, Conversation: &ref, Stage: rec.Stage,
		Purpose: rec.Purpose, TokenCount: &rec.TokenCount, Items: items, Metadata: rec.Metadata})
	if err != nil {
		return prefixField("record", err)
	}
	if err := validateTime("record.createdAtMs", rec.CreatedAtMs); err != nil {
		return err
	}
	if w.ItemCount != rec.ItemCount || w.ContentBytes != rec.ContentBytes || w.ContentSHA256 != rec.ContentSHA256 {
		return runtime.Invalid("record.contentSha256", "itemCount, contentBytes and contentSha256 must be those of the window's items").
			With("contentSha256", w.ContentSHA256)
	}
	w.CreatedAtMs = rec.CreatedAtMs
	stored, created, err := im.tx.Windows.CreateWindow(ctx, im.p.Scope, &w)
	return im.outcome(err, created, conversation.SameWindow(&w, &stored), &im.res.Imported.Windows, &im.res.Skipped.Windows,
		contract.RecordWindow+":"+w.ID)
}

func (im *importer) addDerivation(ctx context.Context, rec *contract.Derivation) error {
	d, err := conversation.ValidateDerivation(&contract.CreateDerivationRequest{ID: &rec.ID, SourceWindowID: rec.SourceWindowID,
		TargetWindowID: rec.TargetWindowID, Kind: rec.Kind, Strategy: rec.Strategy, StrategyVersion: rec.StrategyVersion,
		InputTokenCount: rec.InputTokenCount, OutputTokenCount: rec.OutputTokenCount, InputItemCount: rec.InputItemCount,
		OutputItemCount: rec.OutputItemCount, Metadata: rec.Metadata})
	if err != nil {
		return prefixField("record", err)
	}
	if err := validateTime("record.createdAtMs", rec.CreatedAtMs); err != nil {
		return err
	}
	d.CreatedAtMs = rec.CreatedAtMs
	stored, created, err := im.tx.Windows.CreateDerivation(ctx, im.p.Scope, &d)
	return im.outcome(err, created, conversation.SameDerivation(&d, &stored), &im.res.Imported.Derivations, &im.res.Skipped.Derivations,
		contract.RecordDerivation+":"+d.ID)
}

func (im *importer) addInvocation(ctx context.Context, rec *contract.ModelInvocation) error {
	ref := rec.Conversation
	req := &contract.CreateModelInvocationRequest{ID: &rec.ID, Conversation: &ref, RequestWindowID: rec.RequestWindowID,
		AgentID: &rec.AgentID, ToolName: rec.ToolName, Provider: rec.Provider, Model: rec.Model, State: rec.State,
		InputTokens: rec.InputTokens, OutputTokens: rec.OutputTokens, CachedTokens: rec.CachedTokens,
		StartedAtMs: rec.StartedAtMs, CompletedAtMs: rec.CompletedAtMs, LatencyMs: rec.LatencyMs,
		FinishReason: rec.FinishReason, ResponseContent: rec.ResponseContent, Error: rec.Error, Metadata: rec.Metadata}
	inv, err := conversation.ValidateInvocation(req, im.p.Subject)
	if err != nil {
		return prefixField("record", err)
	}
	for _, t := range []struct {
		field string
		v     int64
	}{{"record.createdAtMs", rec.CreatedAtMs}, {"record.startedAtMs", rec.StartedAtMs}, {"record.completedAtMs", rec.CompletedAtMs}} {
		if err := validateTime(t.field, t.v); err != nil {
			return err
		}
	}
	inv.CreatedAtMs = rec.CreatedAtMs
	stored, created, err := im.tx.Windows.SaveInvocation(ctx, im.p.Scope, &inv)
	return im.outcome(err, created, conversation.SameInvocation(req, &inv, &stored), &im.res.Imported.Invocations, &im.res.Skipped.Invocations,
		contract.RecordInvocation+":"+inv.ID)
}

// addEntry checks an entry record and adds it to the next create.
func (im *importer) addEntry(ctx context.Context, rec *contract.ContextEntry) error {
	e, err := validateImportedEntry(rec)
	if err != nil {
		return err
	}
	digest, err := memory.EntryDigest(&e)
	if err != nil {
		return err
	}
	im.entries, im.digests = append(im.entries, e), append(im.digests, digest)
	if len(im.entries) >= importEntryBatch {
		return im.flushEntries(ctx)
	}
	return nil
}

// flushEntries creates the batch's entries in one statement and counts each: an
// identical one stored is skipped, another one under its ID is a conflict.
func (im *importer) flushEntries(ctx context.Context) error {
	if len(im.entries) == 0 {
		return nil
	}
	writes, err := im.tx.Entries.CreateEntries(ctx, im.p.Scope, im.entries, im.digests)
	if err != nil {
		return err
	}
	for i, w := range writes {
		e := &im.entries[i]
		switch {
		case !w.Created && (w.StoredDigest == im.digests[i] || sameRecord(&w.Stored, e)):
			// The same create, or the very entry exported (an expired entry's expiry
			// no longer is the one its create named).
			im.res.Skipped.Entries++
		case !w.Created:
			im.conflict(contract.RecordEntry + ":" + e.ID)
		default:
			im.res.Imported.Entries++
			if e.Status == contract.EntryActive {
				im.queue = append(im.queue, *e)
			}
		}
	}
	im.entries, im.digests = im.entries[:0], im.digests[:0]
	return im.flushQueue(ctx, false)
}

// flushQueue queues the active entries written for embedding, once importQueueBatch
// of them wait (or at the end, with the projection job).
func (im *importer) flushQueue(ctx context.Context, last bool) error {
	if len(im.queue) > 0 && (last || len(im.queue) >= importQueueBatch) {
		if err := im.tx.Projection.Enqueue(ctx, im.p.Scope, im.queue, im.model); err != nil {
			return err
		}
		im.queue, im.queued = im.queue[:0], true
	}
	if last && im.queued {
		return im.tx.Jobs.Enqueue(ctx, memory.ProjectionJob{TenantID: im.p.Scope.TenantID, ProjectID: im.p.Scope.ProjectID})
	}
	return nil
}

// sameRecord reports whether two records have the same JSON form (RFC 8785).
func sameRecord(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && runtime.SameJSON(ja, jb)
}

// validateTime checks a stored time: 0 to 2^53 − 1.
func validateTime(field string, v int64) error {
	if v < 0 || v > runtime.MaxSequence {
		return runtime.TooMany(field, runtime.MaxSequence, "%s must be between 0 and %d", field, int64(runtime.MaxSequence))
	}
	return nil
}

// validateImportedEntry checks an exported entry: its client fields as a create
// checks them (but for an expiry in the past, which a restored entry may have), and
// its server fields for consistency, so the entry reads back as it was exported.
func validateImportedEntry(rec *contract.ContextEntry) (contract.ContextEntry, error) {
	e := *rec
	if err := runtime.ValidateID("record.id", e.ID); err != nil {
		return e, err
	}
	if !slices.Contains(contract.EntryKinds, e.Kind) {
		return e, runtime.OneOf("record.kind", contract.EntryKinds)
	}
	if err := memory.ValidateEntryContent("record.content", e.Content); err != nil {
		return e, err
	}
	if e.ConversationID != nil {
		if err := runtime.ValidateID("record.conversationId", *e.ConversationID); err != nil {
			return e, err
		}
	}
	if len(e.SourceRecordIDs) > contract.MaxEntrySourceRecordIDs {
		return e, runtime.TooMany("record.sourceRecordIds", contract.MaxEntrySourceRecordIDs,
			"record.sourceRecordIds holds at most %d IDs", contract.MaxEntrySourceRecordIDs)
	}
	for i, id := range e.SourceRecordIDs {
		if err := runtime.ValidateID(fmt.Sprintf("record.sourceRecordIds[%d]", i), id); err != nil {
			return e, err
		}
	}
	e.SourceRecordIDs = append([]string{}, e.SourceRecordIDs...)
	var err error
	if e.Tags, err = memory.ValidateTags("record.tags", e.Tags); err != nil {
		return e, err
	}
	if err := memory.ValidateImportance("record.importance", &e.Importance); err != nil {
		return e, err
	}
	if e.ExpiresAtMs != nil {
		if err := validateTime("record.expiresAtMs", *e.ExpiresAtMs); err != nil {
			return e, err
		}
	}
	if e.Metadata, err = runtime.NormalizeJSON("record.metadata", e.Metadata); err != nil {
		return e, err
	}
	if !slices.Contains(contract.EntryStatuses, e.Status) {
		return e, runtime.OneOf("record.status", contract.EntryStatuses)
	}
	if e.Version < 1 || e.Version > runtime.MaxSequence {
		return e, runtime.TooMany("record.version", runtime.MaxSequence, "record.version must be between 1 and %d", int64(runtime.MaxSequence))
	}
	for _, ref := range []struct {
		field string
		id    *string
		want  bool
	}{
		{"record.supersedes", e.Supersedes, e.Supersedes != nil},
		{"record.supersededBy", e.SupersededBy, e.Status == contract.EntrySuperseded},
		{"record.mergedInto", e.MergedInto, e.Status == contract.EntryMerged},
	} {
		switch {
		case ref.want && ref.id == nil:
			return e, runtime.Invalid(ref.field, "%s is required for an entry of status %s", ref.field, e.Status)
		case !ref.want && ref.id != nil:
			return e, runtime.Invalid(ref.field, "%s is set only for an entry of status %s", ref.field, e.Status)
		case ref.id != nil:
			if err := runtime.ValidateID(ref.field, *ref.id); err != nil {
				return e, err
			}
		}
	}
	if err := validateTime("record.createdAtMs", e.CreatedAtMs); err != nil {
		return e, err
	}
	return e, validateTime("record.updatedAtMs", e.UpdatedAtMs)
}
