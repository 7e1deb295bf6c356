package memory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/operation"
)

// Stores are the stores of entries and their vector projection.
type Stores struct {
	Entries    EntryStore
	Projection ProjectionStore
	Operations OperationCreator
	Jobs       runtime.JobQueue
	Events     runtime.EventStore
}

// OperationCreator is what the projection's use cases need of operation.OperationStore:
// they create the vector_rebuild operations.
type OperationCreator interface {
	// CreateOperations stores ops as pending operations. Their jobs are the caller's
	// to enqueue in the same transaction. Errors: SERVICE_UNAVAILABLE.
	CreateOperations(ctx context.Context, ops []operation.NewOperation) error
}

// EntryStore is the storage of context entries. Every method is confined to scope and
// treats an entry of a deleted conversation as one that does not exist.
type EntryStore interface {
	// CreateEntries stores entries, whose request digests are digests, creating the
	// conversations they name when those do not exist yet, except the entries whose
	// ID exists in scope (or comes earlier in entries): for each of those it returns
	// the stored entry and its digest, and when no entry is created it writes nothing
	// at all. The answer is in the order of entries. Errors: CONFLICT (a deleted
	// conversation, reason conversation_deleted), SERVICE_UNAVAILABLE.
	CreateEntries(ctx context.Context, scope runtime.Scope, entries []contract.ContextEntry, digests []string) ([]EntryWrite, error)
	// GetEntry returns an entry as stored. Errors: NOT_FOUND, SERVICE_UNAVAILABLE.
	GetEntry(ctx context.Context, scope runtime.Scope, id string) (contract.ContextEntry, error)
	// LockEntries returns the stored entries among ids, locked against any other
	// change until the transaction ends; ids that do not exist are left out. Errors:
	// SERVICE_UNAVAILABLE.
	LockEntries(ctx context.Context, scope runtime.Scope, ids []string) ([]contract.ContextEntry, error)
	// UpdateStatus writes the status, supersededBy, mergedInto, expiresAtMs and
	// updatedAtMs of entries, and reason (nil: none) as the reason of the change.
	// Errors: SERVICE_UNAVAILABLE.
	UpdateStatus(ctx context.Context, scope runtime.Scope, entries []contract.ContextEntry, reason *string) error
	// ListEntries returns up to q.Limit entries of the scope that pass q's filters,
	// newest first (createdAtMs descending, then ID), after q.After. Errors:
	// SERVICE_UNAVAILABLE.
	ListEntries(ctx context.Context, scope runtime.Scope, q EntryQuery) ([]contract.ContextEntry, error)
	// EntryHistory returns the versions of the chain of corrections that holds id,
	// oldest first, at most maxVersions of them around id. Errors: NOT_FOUND,
	// SERVICE_UNAVAILABLE.
	EntryHistory(ctx context.Context, scope runtime.Scope, id string, maxVersions int) ([]contract.ContextEntry, error)
	// ActiveEntries returns the texts of up to limit entries that are active and not
	// expired at nowMs, with IDs after after, in ID order. Errors: SERVICE_UNAVAILABLE.
	ActiveEntries(ctx context.Context, scope runtime.Scope, after string, limit int, nowMs int64) ([]EmbedInput, error)
}

// EntryQuery selects a page of a scope's entries. Status is one of the statuses as a
// client reads them at NowMs (an active entry whose expiry has passed is expired), ""
// any; Kinds keeps entries of any of them (empty: all); Tags keeps entries carrying
// every one; ConversationID "" any.
type EntryQuery struct {
	runtime.PageQuery
	Status         string
	Kinds          []string
	Tags           []string
	ConversationID string
	NowMs          int64
}

// MaxHistoryVersions bounds what POST /entries/history returns: a chain of more
// corrections is cut to the versions nearest the one asked for (docs/entries.md).
const MaxHistoryVersions = 1000

// EmbedInput is the text of an entry to embed.
type EmbedInput struct {
	ID      string
	Content string
	// Previous is the content of the entry written just before it in its conversation
	// (in any status), "" for the first one and for an entry of no conversation.
	Previous string
}

// ContextInput ends the model ID of a projection whose vectors embed an entry in its
// context (EmbedInput.Text): the embedder's own model ID stands for vectors of the
// content alone, which projections made before keep until they are rebuilt.
const ContextInput = "+previous"

// Text is what the projection embeds for the entry in a generation of model: for a
// model whose ID ends in ContextInput, the previous entry of its conversation, a
// space and its content (a short reply says what it answers); else its content.
func (in EmbedInput) Text(model EmbeddingModel) string {
	if in.Previous == "" || !strings.HasSuffix(model.ID, ContextInput) {
		return in.Content
	}
	return in.Previous + " " + in.Content
}

// Entries holds the use cases of context entries: create, get, correct, merge and
// expire (docs/entries.md). Every write goes through one unit of work that also queues
// the new entries for the vector projection and removes the vectors of entries that
// stopped being active.
type Entries struct {
	db      runtime.UnitOfWork[Stores]
	store   EntryStore
	cursors *runtime.CursorCodec
	clock   runtime.Clock
	model   EmbeddingModel
}

// NewEntries returns the entry use cases over db. model is the configured embedder's:
// a scope's first entry starts its projection with it; cursors signs list cursors.
func NewEntries(db runtime.UnitOfWork[Stores], cursors *runtime.CursorCodec, clock runtime.Clock, model EmbeddingModel) *Entries {
	if clock == nil {
		clock = runtime.SystemClock{}
	}
	return &Entries{db: db, store: db.Stores().Entries, cursors: cursors, clock: clock, model: model}
}

// List returns one page of the scope's entries, newest first, that pass the request's
// filters. The cursor is bound to the scope and to every filter.
func (s *Entries) List(ctx context.Context, p runtime.Principal, req *contract.ListEntriesRequest) (*contract.EntryList, error) {
	q := EntryQuery{NowMs: s.clock.Now().UnixMilli()}
	if req.Status != nil {
		if !slices.Contains(contract.EntryStatuses, *req.Status) {
			return nil, runtime.OneOf("status", contract.EntryStatuses)
		}
		q.Status = *req.Status
	}
	for i, k := range req.Kinds {
		if !slices.Contains(contract.EntryKinds, k) {
			return nil, runtime.OneOf(fmt.Sprintf("kinds[%d]", i), contract.EntryKinds)
		}
	}
	q.Kinds = slices.Compact(slices.Sorted(slices.Values(req.Kinds)))
	if len(req.Tags) > contract.MaxEntryTags {
		return nil, runtime.TooMany("tags", contract.MaxEntryTags, "tags holds at most %d tags", contract.MaxEntryTags)
	}
	for i, t := range req.Tags {
		if err := runtime.ValidateID(fmt.Sprintf("tags[%d]", i), t); err != nil {
			return nil, err
		}
	}
	q.Tags = slices.Compact(slices.Sorted(slices.Values(req.Tags)))
	if req.ConversationID != nil {
		if err := runtime.ValidateID("conversationId", *req.ConversationID); err != nil {
			return nil, err
		}
		q.ConversationID = *req.ConversationID
	}
	// The unit separator occurs in no ID, tag, kind or status, so distinct filters
	// never bind the same cursor.
	binding := runtime.CursorBinding{Kind: "entries", Scope: p.Scope, ConversationID: q.ConversationID,
		Order: strings.Join([]string{q.Status, strings.Join(q.Kinds, ","), strings.Join(q.Tags, "\x1f")}, "\x1e")}
	var err error
	if q.PageQuery, err = s.cursors.OpenPage(binding, req.Cursor, req.Limit, contract.DefaultListLimit, contract.MaxListLimit); err != nil {
		return nil, err
	}
	page := q
	page.Limit++
	entries, err := s.store.ListEntries(ctx, p.Scope, page)
	if err != nil {
		return nil, err
	}
	for i := range entries {
		entries[i] = presentEntry(entries[i], q.NowMs)
	}
	out := &contract.EntryList{}
	out.Entries, out.NextCursor = runtime.ClosePage(s.cursors, binding, q.PageQuery, entries,
		func(e *contract.ContextEntry) runtime.Position {
			return runtime.Position{AtMs: e.CreatedAtMs, ID: e.ID}
		})
	return out, nil
}

// History returns the chain of versions an entry belongs to, oldest first.
func (s *Entries) History(ctx context.Context, p runtime.Principal, req *contract.EntryHistoryRequest) (*contract.EntryHistory, error) {
	if err := runtime.ValidateID("entryId", req.EntryID); err != nil {
		return nil, err
	}
	versions, err := s.store.EntryHistory(ctx, p.Scope, req.EntryID, MaxHistoryVersions)
	if err != nil {
		return nil, err
	}
	now := s.clock.Now().UnixMilli()
	for i := range versions {
		versions[i] = presentEntry(versions[i], now)
	}
	return &contract.EntryHistory{Versions: versions}, nil
}

// Create validates and stores an entry. It reports whether the entry was created now
// (false for an identical retry, which returns the stored entry); the same ID with
// other content is IDEMPOTENCY_CONFLICT.
func (s *Entries) Create(ctx context.Context, p runtime.Principal, req *contract.CreateEntryRequest) (contract.ContextEntry, bool, error) {
	now := s.clock.Now().UnixMilli()
	entry, err := validateEntry("", req, now)
	if err != nil {
		return contract.ContextEntry{}, false, err
	}
	var stored contract.ContextEntry
	created := false
	err = s.db.WithinTx(ctx, func(ctx context.Context, tx Stores) error {
		var err error
		if stored, created, err = createEntry(ctx, tx, p.Scope, &entry); err != nil || !created {
			return err
		}
		return s.commitEntries(ctx, tx, p, []entryChange{{entry, entryCreated}})
	})
	if err != nil {
		return contract.ContextEntry{}, false, err
	}
	return presentEntry(stored, now), created, nil
}

// Get returns an entry, whatever its status.
func (s *Entries) Get(ctx context.Context, p runtime.Principal, req *contract.GetEntryRequest) (contract.ContextEntry, error) {
	if err := runtime.ValidateID("entryId", req.EntryID); err != nil {
		return contract.ContextEntry{}, err
	}
	e, err := s.store.GetEntry(ctx, p.Scope, req.EntryID)
	if err != nil {
		return contract.ContextEntry{}, err
	}
	return presentEntry(e, s.clock.Now().UnixMilli()), nil
}

// Correct replaces an active entry by a new version: the new entry is active with
// version + 1 and supersedes the old one, which becomes superseded. Anything that
// fails changes nothing.
func (s *Entries) Correct(ctx context.Context, p runtime.Principal, req *contract.CorrectEntryRequest) (*contract.CorrectEntryResponse, error) {
	now := s.clock.Now().UnixMilli()
	if err := runtime.ValidateID("entryId", req.EntryID); err != nil {
		return nil, err
	}
	if err := ValidateEntryContent("content", req.Content); err != nil {
		return nil, err
	}
	reason, err := validateEntryReason(req.Reason)
	if err != nil {
		return nil, err
	}
	var tags []string
	if req.Tags != nil {
		if tags, err = ValidateTags("tags", req.Tags); err != nil {
			return nil, err
		}
	}
	if err := ValidateImportance("importance", req.Importance); err != nil {
		return nil, err
	}
	if err := validateExpiry("expiresAtMs", req.ExpiresAtMs, now); err != nil {
		return nil, err
	}
	var res contract.CorrectEntryResponse
	err = s.db.WithinTx(ctx, func(ctx context.Context, tx Stores) error {
		old, err := lockOne(ctx, tx, p.Scope, req.EntryID, now)
		if err != nil {
			return err
		}
		if old.Status != contract.EntryActive {
			return notActive("corrected", []contract.ContextEntry{old})
		}
		entry := newEntry(contract.ContextEntry{
			ID: runtime.NewID(), Kind: old.Kind, Content: req.Content, ConversationID: old.ConversationID,
			SourceRecordIDs: old.SourceRecordIDs, Tags: old.Tags, Importance: old.Importance,
			ExpiresAtMs: old.ExpiresAtMs, Metadata: old.Metadata,
		}, now)
		entry.Version, entry.Supersedes = old.Version+1, &old.ID
		if tags != nil {
			entry.Tags = tags
		}
		if req.Importance != nil {
			entry.Importance = *req.Importance
		}
		if req.ExpiresAtMs != nil {
			entry.ExpiresAtMs = req.ExpiresAtMs
		}
		if _, _, err := createEntry(ctx, tx, p.Scope, &entry); err != nil {
			return err
		}
		old.Status, old.SupersededBy, old.UpdatedAtMs = contract.EntrySuperseded, &entry.ID, now
		if err := tx.Entries.UpdateStatus(ctx, p.Scope, []contract.ContextEntry{old}, reason); err != nil {
			return err
		}
		res = contract.CorrectEntryResponse{Entry: entry, Superseded: old}
		return s.commitEntries(ctx, tx, p, []entryChange{{entry, entryCorrected}, {old, entrySuperseded}})
	})
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// Merge replaces 2–100 distinct active entries by one new entry, atomically: an
// unknown entry is NOT_FOUND, one that is not active CONFLICT, and then nothing
// changes. It reports whether the merge happened now: a retry of a merge that named
// its merged entry's ID returns what the first one did.
func (s *Entries) Merge(ctx context.Context, p runtime.Principal, req *contract.MergeEntriesRequest) (*contract.MergeEntriesResponse, bool, error) {
	now := s.clock.Now().UnixMilli()
	ids, err := validateMergeIDs(req.EntryIDs)
	if err != nil {
		return nil, false, err
	}
	if req.Merged == nil {
		return nil, false, runtime.Invalid("merged", "merged is required")
	}
	m := req.Merged
	entry, err := validateEntry("merged.", &contract.CreateEntryRequest{
		ID: m.ID, Kind: m.Kind, Content: m.Content, ConversationID: m.ConversationID, Tags: m.Tags,
		Importance: m.Importance, ExpiresAtMs: m.ExpiresAtMs, Metadata: m.Metadata,
	}, now)
	if err != nil {
		return nil, false, err
	}
	var res contract.MergeEntriesResponse
	created := false
	err = s.db.WithinTx(ctx, func(ctx context.Context, tx Stores) error {
		sources, err := lockAll(ctx, tx, p.Scope, ids, now)
		if err != nil {
			return err
		}
		if entry.SourceRecordIDs, err = unionSources(sources); err != nil {
			return err
		}
		inheritFromSources(&entry, m, sources)
		if m.ID != nil && mergedInto(sources, entry.ID) {
			// A retry of this very merge: the sources (unchanged but for their
			// status) give the same entry, whose stored digest must match.
			stored, fresh, err := createEntry(ctx, tx, p.Scope, &entry)
			if err != nil {
				return err
			}
			if fresh {
				return fmt.Errorf("entry %q: its sources were merged into it, yet it did not exist", entry.ID)
			}
			res = contract.MergeEntriesResponse{Entry: presentEntry(stored, now), Sources: sources}
			return nil
		}
		var inactive []contract.ContextEntry
		for _, src := range sources {
			if src.Status != contract.EntryActive {
				inactive = append(inactive, src)
			}
		}
		if len(inactive) > 0 {
			return notActive("merged", inactive)
		}
		if _, fresh, err := createEntry(ctx, tx, p.Scope, &entry); err != nil || !fresh {
			if err == nil {
				err = runtime.IdempotencyConflict(entry.ID)
			}
			return err
		}
		for i := range sources {
			sources[i].Status, sources[i].MergedInto, sources[i].UpdatedAtMs = contract.EntryMerged, &entry.ID, now
		}
		if err := tx.Entries.UpdateStatus(ctx, p.Scope, sources, nil); err != nil {
			return err
		}
		res, created = contract.MergeEntriesResponse{Entry: entry, Sources: sources}, true
		changes := []entryChange{{entry, entryMergedFrom}}
		for _, src := range sources {
			changes = append(changes, entryChange{src, entryMergedInto})
		}
		return s.commitEntries(ctx, tx, p, changes)
	})
	if err != nil {
		return nil, false, err
	}
	return &res, created, nil
}

// Expire ends an active entry now: its status becomes expired and expiresAtMs the
// current time. An entry already expired is returned unchanged; a superseded or
// merged one is CONFLICT.
func (s *Entries) Expire(ctx context.Context, p runtime.Principal, req *contract.ExpireEntryRequest) (contract.ContextEntry, error) {
	now := s.clock.Now().UnixMilli()
	if err := runtime.ValidateID("entryId", req.EntryID); err != nil {
		return contract.ContextEntry{}, err
	}
	reason, err := validateEntryReason(req.Reason)
	if err != nil {
		return contract.ContextEntry{}, err
	}
	var res contract.ContextEntry
	err = s.db.WithinTx(ctx, func(ctx context.Context, tx Stores) error {
		e, err := lockOne(ctx, tx, p.Scope, req.EntryID, now)
		if err != nil {
			return err
		}
		switch e.Status {
		case contract.EntryExpired:
			res = e
			return nil
		case contract.EntryActive:
		default:
			return notActive("expired", []contract.ContextEntry{e})
		}
		e.Status, e.ExpiresAtMs, e.UpdatedAtMs = contract.EntryExpired, &now, now
		if err := tx.Entries.UpdateStatus(ctx, p.Scope, []contract.ContextEntry{e}, reason); err != nil {
			return err
		}
		res = e
		return s.commitEntries(ctx, tx, p, []entryChange{{e, entryExpired}})
	})
	return res, err
}

// The actions of entry_written events (docs/a2a.md): what a write did to each entry.
const (
	entryCreated    = "created"    // POST /entries
	entryCorrected  = "corrected"  // the new version a correction created
	entrySuperseded = "superseded" // the version it replaced
	entryMergedFrom = "merged"     // the entry a merge created
	entryMergedInto = "merged_into"
	entryExpired    = "expired"
)

// entryChange is an entry a write created or changed, and what it did to it.
type entryChange struct {
	entry  contract.ContextEntry
	action string
}

// commitEntries is the part every entry write shares, in the write's transaction:
// entries written now are queued for the vector projection (with the job that embeds
// them), entries that stopped being active lose their vectors, and every change gets
// its entry_written event, appended last, as the event log asks.
func (s *Entries) commitEntries(ctx context.Context, tx Stores, p runtime.Principal, changes []entryChange) error {
	var written []contract.ContextEntry
	var retired []string
	events := make([]runtime.NewEvent, len(changes))
	for i, c := range changes {
		if c.entry.Status == contract.EntryActive {
			written = append(written, c.entry)
		} else {
			retired = append(retired, c.entry.ID)
		}
		var conversation string
		if c.entry.ConversationID != nil {
			conversation = *c.entry.ConversationID
		}
		events[i] = EntryWrittenEvent(p.Subject, c.entry.ID, conversation, c.action, c.entry.UpdatedAtMs)
	}
	if len(retired) > 0 {
		if err := tx.Projection.Retire(ctx, p.Scope, retired); err != nil {
			return err
		}
	}
	if len(written) > 0 {
		if err := tx.Projection.Enqueue(ctx, p.Scope, written, s.model); err != nil {
			return err
		}
		if err := tx.Jobs.Enqueue(ctx, ProjectionJob{TenantID: p.Scope.TenantID, ProjectID: p.Scope.ProjectID}); err != nil {
			return err
		}
	}
	_, err := tx.Events.AppendEvents(ctx, p.Scope, events)
	return err
}

// presentEntry returns e as a client reads it at nowMs: an active entry whose
// expiresAtMs has passed reads as expired (and is treated so by every transition).
func presentEntry(e contract.ContextEntry, nowMs int64) contract.ContextEntry {
	if e.Status == contract.EntryActive && e.ExpiresAtMs != nil && *e.ExpiresAtMs <= nowMs {
		e.Status = contract.EntryExpired
	}
	return e
}

// lockOne locks one entry and returns it as a client reads it. Errors: NOT_FOUND.
func lockOne(ctx context.Context, tx Stores, scope runtime.Scope, id string, nowMs int64) (contract.ContextEntry, error) {
	found, err := tx.Entries.LockEntries(ctx, scope, []string{id})
	if err != nil {
		return contract.ContextEntry{}, err
	}
	if len(found) == 0 {
		return contract.ContextEntry{}, runtime.NotFound("entryId", "entry")
	}
	return presentEntry(found[0], nowMs), nil
}

// lockAll locks the entries of ids and returns them in the order of ids. The first
// unknown ID is NOT_FOUND naming its position.
func lockAll(ctx context.Context, tx Stores, scope runtime.Scope, ids []string, nowMs int64) ([]contract.ContextEntry, error) {
	found, err := tx.Entries.LockEntries(ctx, scope, ids)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]contract.ContextEntry, len(found))
	for _, e := range found {
		byID[e.ID] = presentEntry(e, nowMs)
	}
	out := make([]contract.ContextEntry, len(ids))
	for i, id := range ids {
		e, ok := byID[id]
		if !ok {
			return nil, runtime.NotFound(fmt.Sprintf("entryIds[%d]", i), "entry")
		}
		out[i] = e
	}
	return out, nil
}

// notActive is the CONFLICT of a transition that needs active entries.
func notActive(verb string, entries []contract.ContextEntry) error {
	ids := make([]string, len(entries))
	for i, e := range entries {
		ids[i] = e.ID
	}
	first := entries[0]
	return runtime.Errorf(contract.CodeConflict, "entry %q is %s; only active entries can be %s", first.ID, first.Status, verb).
		With("reason", "entry_not_active").With("status", first.Status).With("ids", ids)
}

// EntryWrite is what CreateEntries did with one entry: created it, or found Stored,
// whose request digest is StoredDigest, under its ID.
type EntryWrite struct {
	Created      bool
	Stored       contract.ContextEntry
	StoredDigest string
}

// createEntry stores an entry the use case built, with the digest of its client
// fields. An entry that exists with the same ID and content is returned with created
// false; with other content it is IDEMPOTENCY_CONFLICT.
func createEntry(ctx context.Context, tx Stores, scope runtime.Scope, e *contract.ContextEntry) (contract.ContextEntry, bool, error) {
	digest, err := EntryDigest(e)
	if err != nil {
		return contract.ContextEntry{}, false, err
	}
	w, err := tx.Entries.CreateEntries(ctx, scope, []contract.ContextEntry{*e}, []string{digest})
	switch {
	case err != nil:
		return contract.ContextEntry{}, false, err
	case w[0].Created:
		return *e, true, nil
	case w[0].StoredDigest != digest:
		return contract.ContextEntry{}, false, runtime.IdempotencyConflict(e.ID)
	}
	return w[0].Stored, false, nil
}

// mergedInto reports whether every source was merged into id.
func mergedInto(sources []contract.ContextEntry, id string) bool {
	for _, src := range sources {
		if src.MergedInto == nil || *src.MergedInto != id {
			return false
		}
	}
	return true
}

// unionSources is the merged entry's sourceRecordIds: every source's, in the order of
// the sources, each once. Errors: VALIDATION_FAILED when it would exceed the bound.
func unionSources(sources []contract.ContextEntry) ([]string, error) {
	seen := map[string]bool{}
	union := []string{}
	for _, src := range sources {
		for _, id := range src.SourceRecordIDs {
			if !seen[id] {
				seen[id] = true
				union = append(union, id)
			}
		}
	}
	if len(union) > contract.MaxEntrySourceRecordIDs {
		return nil, runtime.TooMany("entryIds", contract.MaxEntrySourceRecordIDs,
			"the sources' sourceRecordIds number %d together; a merged entry holds at most %d", len(union), contract.MaxEntrySourceRecordIDs)
	}
	return union, nil
}

// inheritFromSources fills what the merge request left out: the conversation shared
// by every source (none when they differ), the highest importance, and the latest
// expiry (none when any source never expires).
func inheritFromSources(e *contract.ContextEntry, m *contract.MergedEntry, sources []contract.ContextEntry) {
	if m.ConversationID == nil {
		shared := sources[0].ConversationID
		for _, src := range sources[1:] {
			if !runtime.SameOptional(shared, src.ConversationID) {
				shared = nil
				break
			}
		}
		e.ConversationID = shared
	}
	if m.Importance == nil {
		e.Importance = 0
		for _, src := range sources {
			e.Importance = max(e.Importance, src.Importance)
		}
	}
	if m.ExpiresAtMs == nil {
		var latest *int64
		for _, src := range sources {
			if src.ExpiresAtMs == nil {
				latest = nil
				break
			}
			if latest == nil || *src.ExpiresAtMs > *latest {
				latest = src.ExpiresAtMs
			}
		}
		e.ExpiresAtMs = latest
	}
}

// EntryDigest is the lowercase hex SHA-256 of the RFC 8785 canonical JSON of e's
// client fields, normalized (defaults filled in); the server's fields are zeroed.
func EntryDigest(e *contract.ContextEntry) (string, error) {
	fields := *e
	fields.Status, fields.Version, fields.Supersedes, fields.SupersededBy, fields.MergedInto = "", 0, nil, nil, nil
	fields.CreatedAtMs, fields.UpdatedAtMs = 0, 0
	raw, err := json.Marshal(fields)
	if err != nil {
		return "", fmt.Errorf("encode the entry's fields: %w", err)
	}
	c, err := runtime.CanonicalJSON(raw)
	if err != nil {
		return "", fmt.Errorf("canonicalize the entry's fields: %w", err)
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}

// newEntry is e as a new active entry of version 1, created at nowMs.
func newEntry(e contract.ContextEntry, nowMs int64) contract.ContextEntry {
	e.Status, e.Version, e.CreatedAtMs, e.UpdatedAtMs = contract.EntryActive, 1, nowMs, nowMs
	return e
}

// validateEntry checks the client fields of a new entry (a create, or a merge's
// merged entry, whose fields are prefixed "merged.") and returns it as a new active
// entry: absent lists empty, an absent importance the default, a generated ID when it
// names none.
func validateEntry(prefix string, in *contract.CreateEntryRequest, nowMs int64) (contract.ContextEntry, error) {
	var e contract.ContextEntry
	id, err := runtime.IDOrNew(prefix+"id", in.ID)
	if err != nil {
		return e, err
	}
	e.ID = id
	if !slices.Contains(contract.EntryKinds, in.Kind) {
		return e, runtime.OneOf(prefix+"kind", contract.EntryKinds)
	}
	e.Kind = in.Kind
	if err := ValidateEntryContent(prefix+"content", in.Content); err != nil {
		return e, err
	}
	e.Content = in.Content
	if in.ConversationID != nil {
		if err := runtime.ValidateID(prefix+"conversationId", *in.ConversationID); err != nil {
			return e, err
		}
		e.ConversationID = in.ConversationID
	}
	if len(in.SourceRecordIDs) > contract.MaxEntrySourceRecordIDs {
		return e, runtime.TooMany(prefix+"sourceRecordIds", contract.MaxEntrySourceRecordIDs,
			"%ssourceRecordIds holds at most %d IDs", prefix, contract.MaxEntrySourceRecordIDs)
	}
	e.SourceRecordIDs = []string{}
	for i, id := range in.SourceRecordIDs {
		if err := runtime.ValidateID(fmt.Sprintf("%ssourceRecordIds[%d]", prefix, i), id); err != nil {
			return e, err
		}
		e.SourceRecordIDs = append(e.SourceRecordIDs, id)
	}
	if e.Tags, err = ValidateTags(prefix+"tags", in.Tags); err != nil {
		return e, err
	}
	if err := ValidateImportance(prefix+"importance", in.Importance); err != nil {
		return e, err
	}
	e.Importance = contract.DefaultEntryImportance
	if in.Importance != nil {
		e.Importance = *in.Importance
	}
	if err := validateExpiry(prefix+"expiresAtMs", in.ExpiresAtMs, nowMs); err != nil {
		return e, err
	}
	e.ExpiresAtMs = in.ExpiresAtMs
	if e.Metadata, err = runtime.NormalizeJSON(prefix+"metadata", in.Metadata); err != nil {
		return e, err
	}
	return newEntry(e, nowMs), nil
}

// ValidateEntryContent checks an entry's content: 1 byte to 64 KiB (413 above) of
// text that is not only whitespace and holds no NUL (which Postgres text cannot).
func ValidateEntryContent(field, content string) error {
	if len(content) > contract.MaxEntryContentBytes {
		return runtime.TooLarge(field, contract.MaxEntryContentBytes)
	}
	if strings.TrimSpace(content) == "" {
		return runtime.Invalid(field, "%s must not be empty", field)
	}
	if !utf8.ValidString(content) || strings.IndexByte(content, 0) >= 0 {
		return runtime.Invalid(field, "%s must be valid UTF-8 without NUL characters", field)
	}
	return nil
}

// ValidateTags checks a tag list (at most 32 distinct ID-like strings) and returns it,
// empty rather than nil.
func ValidateTags(field string, tags []string) ([]string, error) {
	if len(tags) > contract.MaxEntryTags {
		return nil, runtime.TooMany(field, contract.MaxEntryTags, "%s holds at most %d tags", field, contract.MaxEntryTags)
	}
	seen := make(map[string]bool, len(tags))
	for i, t := range tags {
		f := fmt.Sprintf("%s[%d]", field, i)
		if err := runtime.ValidateID(f, t); err != nil {
			return nil, err
		}
		if seen[t] {
			return nil, runtime.Invalid(f, "%s repeats the tag %q", f, t)
		}
		seen[t] = true
	}
	return append([]string{}, tags...), nil
}

func ValidateImportance(field string, v *float64) error {
	if v != nil && !(*v >= 0 && *v <= 1) {
		return runtime.TooMany(field, 1, "%s must be between 0 and 1", field).With("minimum", 0)
	}
	return nil
}

// validateExpiry checks an expiresAtMs: after nowMs and at most 2^53 − 1.
func validateExpiry(field string, v *int64, nowMs int64) error {
	switch {
	case v == nil:
		return nil
	case *v > runtime.MaxSequence:
		return runtime.TooMany(field, runtime.MaxSequence, "%s must be at most %d", field, int64(runtime.MaxSequence))
	case *v <= nowMs:
		return runtime.Invalid(field, "%s must be in the future", field)
	}
	return nil
}

// validateEntryReason checks the optional reason of a correction or an expiry; an
// empty one is none.
func validateEntryReason(reason *string) (*string, error) {
	if reason == nil || *reason == "" {
		return nil, nil
	}
	if utf8.RuneCountInString(*reason) > contract.MaxEntryReasonChars {
		return nil, runtime.TooMany("reason", contract.MaxEntryReasonChars, "reason must be at most %d characters", contract.MaxEntryReasonChars)
	}
	if !utf8.ValidString(*reason) || strings.IndexByte(*reason, 0) >= 0 {
		return nil, runtime.Invalid("reason", "reason must be valid UTF-8 without NUL characters")
	}
	return reason, nil
}

// validateMergeIDs checks a merge's entryIds: 2–100 distinct IDs.
func validateMergeIDs(ids []string) ([]string, error) {
	if len(ids) < contract.MinMergeEntries {
		return nil, runtime.Invalid("entryIds", "entryIds must name at least %d entries", contract.MinMergeEntries).
			With("minimum", contract.MinMergeEntries)
	}
	if len(ids) > contract.MaxMergeEntries {
		return nil, runtime.TooMany("entryIds", contract.MaxMergeEntries, "entryIds names at most %d entries", contract.MaxMergeEntries)
	}
	seen := make(map[string]bool, len(ids))
	for i, id := range ids {
		f := fmt.Sprintf("entryIds[%d]", i)
		if err := runtime.ValidateID(f, id); err != nil {
			return nil, err
		}
		if seen[id] {
			return nil, runtime.Invalid(f, "%s repeats the entry %q", f, id)
		}
		seen[id] = true
	}
	return ids, nil
}

// EntryWrittenEvent is the event the entries use cases append for every entry they
// create or change (action: created, merged, corrected, expired, ...): broadcast,
// consistency eventual, correlated by the entry's conversation when it has one, else
// by the entry. It must be appended through tx.Events.AppendEvents inside the same
// UnitOfWork.WithinTx as the entry's write, as the last statement before the commit
// (the append takes the scope's event lock and holds it until the commit), so the
// event exists exactly when the entry does. conversationID "" means none; with one,
// deleting the conversation removes the event.
func EntryWrittenEvent(actor, entryID, conversationID, action string, nowMs int64) runtime.NewEvent {
	correlation := conversationID
	if correlation == "" {
		correlation = entryID
	}
	var conversation *string
	if conversationID != "" {
		conversation = &conversationID
	}
	e := runtime.EventOf(contract.EventEntryWritten, actor, correlation, contract.ConsistencyEventual, nil,
		struct {
			EntryID        string  `json:"entryId"`
			ConversationID *string `json:"conversationId"`
			Action         string  `json:"action"`
		}{entryID, conversation, action}, nowMs)
	e.ConversationID = conversationID
	return e
}
