package conversation

import (
	"context"
	"fmt"
	"slices"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// Stores are the stores of windows, derivations and invocations.
type Stores struct {
	Messages MessageStore
	Windows  WindowStore
	Events   runtime.EventStore
}

// WindowStore is the storage the window use cases need. Every method is confined to
// scope and treats a window or invocation of a deleted conversation as absent.
type WindowStore interface {
	// CreateWindow stores w and its items, creating w's conversation when it does not
	// exist, unless a window with w.ID exists in scope: then it writes nothing at all.
	// It returns the stored window without items and whether it was created now.
	// Errors: CONFLICT (a deleted conversation, reason conversation_deleted),
	// SERVICE_UNAVAILABLE.
	CreateWindow(ctx context.Context, scope runtime.Scope, w *contract.Window) (stored contract.Window, created bool, err error)
	// GetWindow returns a window with its items in ordinal order. Errors: NOT_FOUND,
	// SERVICE_UNAVAILABLE.
	GetWindow(ctx context.Context, scope runtime.Scope, windowID string) (contract.Window, error)
	// CreateDerivation stores d unless a derivation with d.ID exists in scope, and
	// returns the stored derivation and whether it was created now. Creates are
	// serialized per scope, so concurrent edges can never close a cycle together.
	// Errors: NOT_FOUND (details.field sourceWindowId or targetWindowId), CONFLICT (the
	// edge would close a cycle), SERVICE_UNAVAILABLE.
	CreateDerivation(ctx context.Context, scope runtime.Scope, d *contract.Derivation) (stored contract.Derivation, created bool, err error)
	// Lineage returns the window, every ancestor reachable through at most maxDepth
	// derivations, and the derivations between them. Errors: NOT_FOUND,
	// SERVICE_UNAVAILABLE.
	Lineage(ctx context.Context, scope runtime.Scope, windowID string, maxDepth int) (contract.Lineage, error)
	// SaveInvocation stores inv unless an invocation with inv.ID exists in scope (then
	// it writes nothing), and returns the stored record and whether it was created
	// now. Errors: CONFLICT (a deleted conversation; the request window belongs to
	// another conversation), NOT_FOUND (details.field requestWindowId),
	// SERVICE_UNAVAILABLE.
	SaveInvocation(ctx context.Context, scope runtime.Scope, inv *contract.ModelInvocation) (stored contract.ModelInvocation, created bool, err error)
	// GetInvocation returns a model invocation. Errors: NOT_FOUND, SERVICE_UNAVAILABLE.
	GetInvocation(ctx context.Context, scope runtime.Scope, invocationID string) (contract.ModelInvocation, error)
	// ListWindows returns up to q.Limit windows of the scope (of conversationID, ""
	// any) without their items, newest first (createdAtMs descending, then ID), after
	// q.After. Errors: SERVICE_UNAVAILABLE.
	ListWindows(ctx context.Context, scope runtime.Scope, conversationID string, q runtime.PageQuery) ([]contract.Window, error)
	// ListInvocations returns up to q.Limit model invocations of the scope (of
	// conversationID, "" any), the latest started first (startedAtMs descending, then
	// ID), after q.After. Errors: SERVICE_UNAVAILABLE.
	ListInvocations(ctx context.Context, scope runtime.Scope, conversationID string, q runtime.PageQuery) ([]contract.ModelInvocation, error)
	// WindowInvocations returns up to q.Limit model invocations of the scope whose
	// request window is windowID, the latest started first (startedAtMs descending,
	// then ID), after q.After. Errors: SERVICE_UNAVAILABLE.
	WindowInvocations(ctx context.Context, scope runtime.Scope, windowID string, q runtime.PageQuery) ([]contract.ModelInvocation, error)
}

// Windows holds the use cases of context windows, derivations, lineage and model
// invocations (docs/windows.md). Windows and derivations are immutable; every create is
// idempotent by ID. A window's creation commits together with its window_created
// event (docs/a2a.md).
type Windows struct {
	db      runtime.UnitOfWork[Stores]
	store   WindowStore
	cursors *runtime.CursorCodec
	clock   runtime.Clock
}

// NewWindows returns the use cases over db; cursors signs list cursors.
func NewWindows(db runtime.UnitOfWork[Stores], cursors *runtime.CursorCodec, clock runtime.Clock) *Windows {
	if clock == nil {
		clock = runtime.SystemClock{}
	}
	return &Windows{db: db, store: db.Stores().Windows, cursors: cursors, clock: clock}
}

// ListWindows returns one page of the scope's window summaries, newest first. The
// cursor is bound to the scope and the conversation.
func (s *Windows) ListWindows(ctx context.Context, p runtime.Principal, req *contract.ListByConversationRequest) (*contract.WindowList, error) {
	conversation, binding, q, err := s.openList("windows", p, req)
	if err != nil {
		return nil, err
	}
	page := q
	page.Limit++
	rows, err := s.store.ListWindows(ctx, p.Scope, conversation, page)
	if err != nil {
		return nil, err
	}
	out := &contract.WindowList{}
	out.Windows, out.NextCursor = runtime.ClosePage(s.cursors, binding, q, rows,
		func(w *contract.Window) runtime.Position { return runtime.Position{AtMs: w.CreatedAtMs, ID: w.ID} })
	return out, nil
}

// ListInvocations returns one page of the scope's model invocations, the latest
// started first. The cursor is bound to the scope and the conversation.
func (s *Windows) ListInvocations(ctx context.Context, p runtime.Principal, req *contract.ListByConversationRequest) (*contract.InvocationList, error) {
	conversation, binding, q, err := s.openList("model-invocations", p, req)
	if err != nil {
		return nil, err
	}
	page := q
	page.Limit++
	rows, err := s.store.ListInvocations(ctx, p.Scope, conversation, page)
	if err != nil {
		return nil, err
	}
	return s.invocationPage(binding, q, rows), nil
}

// WindowInvocations returns one page of the model invocations that sent the window
// windowID, the latest started first. The cursor is bound to the scope and the window.
func (s *Windows) WindowInvocations(ctx context.Context, p runtime.Principal, windowID string, cursor *string, limit *int) (*contract.InvocationList, error) {
	if err := runtime.ValidateID("windowId", windowID); err != nil {
		return nil, err
	}
	binding := runtime.CursorBinding{Kind: "window-invocations/" + windowID, Scope: p.Scope}
	q, err := s.cursors.OpenPage(binding, cursor, limit, contract.DefaultListLimit, contract.MaxListLimit)
	if err != nil {
		return nil, err
	}
	page := q
	page.Limit++
	rows, err := s.store.WindowInvocations(ctx, p.Scope, windowID, page)
	if err != nil {
		return nil, err
	}
	return s.invocationPage(binding, q, rows), nil
}

// invocationPage closes a page of invocations read one past q's limit.
func (s *Windows) invocationPage(binding runtime.CursorBinding, q runtime.PageQuery, rows []contract.ModelInvocation) *contract.InvocationList {
	out := &contract.InvocationList{}
	out.Invocations, out.NextCursor = runtime.ClosePage(s.cursors, binding, q, rows,
		func(m *contract.ModelInvocation) runtime.Position {
			return runtime.Position{AtMs: m.StartedAtMs, ID: m.ID}
		})
	return out
}

// openList validates a listing by conversation and returns its conversation ("" for
// the whole scope), cursor binding and page.
func (s *Windows) openList(kind string, p runtime.Principal, req *contract.ListByConversationRequest) (string, runtime.CursorBinding, runtime.PageQuery, error) {
	var conversation string
	if req.ConversationID != nil {
		if err := runtime.ValidateID("conversationId", *req.ConversationID); err != nil {
			return "", runtime.CursorBinding{}, runtime.PageQuery{}, err
		}
		conversation = *req.ConversationID
	}
	binding := runtime.CursorBinding{Kind: kind, Scope: p.Scope, ConversationID: conversation}
	q, err := s.cursors.OpenPage(binding, req.Cursor, req.Limit, contract.DefaultListLimit, contract.MaxListLimit)
	return conversation, binding, q, err
}

// CreateWindow validates and stores a window. It returns the stored window without
// items and whether it was created now (false for an identical retry). A retry with
// the same ID and different content is IDEMPOTENCY_CONFLICT.
func (s *Windows) CreateWindow(ctx context.Context, p runtime.Principal, req *contract.CreateWindowRequest) (contract.Window, bool, error) {
	w, err := ValidateWindow(req)
	if err != nil {
		return contract.Window{}, false, err
	}
	w.CreatedAtMs = s.clock.Now().UnixMilli()
	var stored contract.Window
	var created bool
	err = s.db.WithinTx(ctx, func(ctx context.Context, tx Stores) error {
		var err error
		if stored, created, err = tx.Windows.CreateWindow(ctx, p.Scope, &w); err != nil || !created {
			return err
		}
		_, err = tx.Events.AppendEvents(ctx, p.Scope, []runtime.NewEvent{WindowCreatedEvent(p.Subject, &w, w.CreatedAtMs)})
		return err
	})
	if err != nil {
		return contract.Window{}, false, err
	}
	if !created && !SameWindow(&w, &stored) {
		return contract.Window{}, false, runtime.IdempotencyConflict(w.ID)
	}
	stored.Items = nil
	return stored, created, nil
}

// GetWindow returns a window with its items in ordinal order.
func (s *Windows) GetWindow(ctx context.Context, p runtime.Principal, req *contract.GetWindowRequest) (contract.Window, error) {
	if err := runtime.ValidateID("windowId", req.WindowID); err != nil {
		return contract.Window{}, err
	}
	return s.store.GetWindow(ctx, p.Scope, req.WindowID)
}

// ValidateWindow checks a create request against the window contract and returns the
// window to store: optional members normalized (null for absent), metadata compacted,
// a generated ID when none was given, and itemCount, contentBytes and contentSha256
// computed.
func ValidateWindow(req *contract.CreateWindowRequest) (contract.Window, error) {
	var w contract.Window
	id, err := runtime.IDOrNew("id", req.ID)
	if err != nil {
		return w, err
	}
	w.ID = id
	if req.Conversation == nil {
		return w, runtime.Invalid("conversation", "conversation is required")
	}
	if err := runtime.ValidateID("conversation.conversationId", req.Conversation.ConversationID); err != nil {
		return w, err
	}
	w.Conversation = contract.ConversationRef{ConversationID: req.Conversation.ConversationID}
	if !slices.Contains(contract.Stages, req.Stage) {
		return w, runtime.OneOf("stage", contract.Stages)
	}
	w.Stage = req.Stage
	if err := runtime.ValidateLabel("purpose", req.Purpose, contract.MaxPurposeChars); err != nil {
		return w, err
	}
	w.Purpose = req.Purpose
	if req.TokenCount == nil {
		return w, runtime.Invalid("tokenCount", "tokenCount is required")
	}
	if *req.TokenCount < 0 {
		return w, runtime.Invalid("tokenCount", "tokenCount must not be negative")
	}
	w.TokenCount = *req.TokenCount
	if w.Metadata, err = runtime.NormalizeJSON("metadata", req.Metadata); err != nil {
		return w, err
	}
	if req.Items == nil {
		return w, runtime.Invalid("items", "items is required (it may be empty)")
	}
	if len(req.Items) > contract.MaxWindowItems {
		return w, runtime.TooMany("items", contract.MaxWindowItems, "a window holds at most %d items", contract.MaxWindowItems)
	}
	w.Items = make([]contract.WindowItem, len(req.Items))
	ids := make(map[string]struct{}, len(req.Items))
	var total int64
	for i := range req.Items {
		if err := validateItem(i, &req.Items[i], ids, &w.Items[i]); err != nil {
			return w, err
		}
		total += int64(len(w.Items[i].Content))
	}
	if total > contract.MaxWindowContentBytes {
		return w, runtime.TooLarge("items", contract.MaxWindowContentBytes)
	}
	w.ItemCount = len(w.Items)
	if w.ContentBytes, w.ContentSHA256, err = runtime.WindowDigest(w.Items); err != nil {
		return w, runtime.Invalid("items", "the items have no canonical JSON form")
	}
	return w, nil
}

// validateItem checks items[i] and writes its normalized form to out; ids collects the
// item IDs seen so far.
func validateItem(i int, in *contract.WindowItemInput, ids map[string]struct{}, out *contract.WindowItem) error {
	prefix := fmt.Sprintf("items[%d]", i)
	if err := runtime.ValidateID(prefix+".id", in.ID); err != nil {
		return err
	}
	if _, dup := ids[in.ID]; dup {
		return runtime.Invalid(prefix+".id", "item IDs must be unique within a window")
	}
	ids[in.ID] = struct{}{}
	if in.Ordinal == nil {
		return runtime.Invalid(prefix+".ordinal", "%s.ordinal is required", prefix)
	}
	if *in.Ordinal != i {
		return runtime.Invalid(prefix+".ordinal", "ordinals must be 0..n-1 in array order; item %d has ordinal %d", i, *in.Ordinal)
	}
	if !slices.Contains(contract.ItemKinds, in.Kind) {
		return runtime.OneOf(prefix+".kind", contract.ItemKinds)
	}
	if in.Role != nil && !slices.Contains(contract.Roles, *in.Role) {
		return runtime.OneOf(prefix+".role", contract.Roles)
	}
	if in.Content == nil {
		return runtime.Invalid(prefix+".content", "%s.content is required (it may be empty)", prefix)
	}
	if len(*in.Content) > contract.MaxWindowItemContentBytes {
		return runtime.TooLarge(prefix+".content", contract.MaxWindowItemContentBytes)
	}
	if in.SourceRecordID != nil {
		if err := runtime.ValidateID(prefix+".sourceRecordId", *in.SourceRecordID); err != nil {
			return err
		}
	}
	evidence := in.KnowledgeEvidence
	switch {
	case in.Kind == contract.ItemKindKnowledgeEvidence && evidence == nil:
		return runtime.Invalid(prefix+".knowledgeEvidence", "knowledgeEvidence is required for kind knowledge_evidence")
	case in.Kind != contract.ItemKindKnowledgeEvidence && evidence != nil:
		return runtime.Invalid(prefix+".knowledgeEvidence", "knowledgeEvidence is allowed only for kind knowledge_evidence")
	case evidence != nil:
		if err := validateEvidence(prefix+".knowledgeEvidence", evidence); err != nil {
			return err
		}
	}
	metadata, err := runtime.NormalizeJSON(prefix+".metadata", in.Metadata)
	if err != nil {
		return err
	}
	*out = contract.WindowItem{
		ID: in.ID, Ordinal: i, Kind: in.Kind, Role: in.Role, Content: *in.Content,
		SourceRecordID: in.SourceRecordID, KnowledgeEvidence: evidence, Metadata: metadata,
	}
	return nil
}

func validateEvidence(prefix string, e *contract.KnowledgeEvidence) error {
	if err := runtime.ValidateID(prefix+".provider", e.Provider); err != nil {
		return err
	}
	if err := runtime.ValidateRef(prefix+".resourceRef", e.ResourceRef); err != nil {
		return err
	}
	if e.RevisionRef != nil {
		if err := runtime.ValidateRef(prefix+".revisionRef", *e.RevisionRef); err != nil {
			return err
		}
	}
	if e.SegmentRef != nil {
		if err := runtime.ValidateRef(prefix+".segmentRef", *e.SegmentRef); err != nil {
			return err
		}
	}
	if len(e.Excerpt) > contract.MaxEvidenceExcerptBytes {
		return runtime.TooLarge(prefix+".excerpt", contract.MaxEvidenceExcerptBytes)
	}
	if e.RetrievedAtMs < 0 {
		return runtime.Invalid(prefix+".retrievedAtMs", "retrievedAtMs must not be negative")
	}
	return nil
}

// SameWindow reports whether a create request (normalized) has the content of a stored
// window: the client fields, with the items compared through their digest.
func SameWindow(req, stored *contract.Window) bool {
	return req.Conversation == stored.Conversation && req.Stage == stored.Stage &&
		req.Purpose == stored.Purpose && req.TokenCount == stored.TokenCount &&
		req.ItemCount == stored.ItemCount && req.ContentSHA256 == stored.ContentSHA256 &&
		runtime.SameJSON(req.Metadata, stored.Metadata)
}

// WindowCreatedEvent is the event a window's creation appends in the transaction that
// stores it: broadcast, consistency local, correlated by the window's conversation.
func WindowCreatedEvent(actor string, w *contract.Window, nowMs int64) runtime.NewEvent {
	e := runtime.EventOf(contract.EventWindowCreated, actor, w.Conversation.ConversationID, contract.ConsistencyLocal, nil,
		struct {
			WindowID       string `json:"windowId"`
			ConversationID string `json:"conversationId"`
			Stage          string `json:"stage"`
		}{w.ID, w.Conversation.ConversationID, w.Stage}, nowMs)
	e.ConversationID = w.Conversation.ConversationID
	return e
}
