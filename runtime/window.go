package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agent-context/agent-context/contract"
)

// WindowStore is the storage the window use cases need. Every method is confined to
// scope and treats a window or invocation of a deleted conversation as absent.
type WindowStore interface {
	// CreateWindow stores w and its items, creating w's conversation when it does not
	// exist, unless a window with w.ID exists in scope: then it writes nothing at all.
	// It returns the stored window without items and whether it was created now.
	// Errors: CONFLICT (a deleted conversation, reason conversation_deleted),
	// SERVICE_UNAVAILABLE.
	CreateWindow(ctx context.Context, scope Scope, w *contract.Window) (stored contract.Window, created bool, err error)
	// GetWindow returns a window with its items in ordinal order. Errors: NOT_FOUND,
	// SERVICE_UNAVAILABLE.
	GetWindow(ctx context.Context, scope Scope, windowID string) (contract.Window, error)
	// CreateDerivation stores d unless a derivation with d.ID exists in scope, and
	// returns the stored derivation and whether it was created now. Creates are
	// serialized per scope, so concurrent edges can never close a cycle together.
	// Errors: NOT_FOUND (details.field sourceWindowId or targetWindowId), CONFLICT (the
	// edge would close a cycle), SERVICE_UNAVAILABLE.
	CreateDerivation(ctx context.Context, scope Scope, d *contract.Derivation) (stored contract.Derivation, created bool, err error)
	// Lineage returns the window, every ancestor reachable through at most maxDepth
	// derivations, and the derivations between them. Errors: NOT_FOUND,
	// SERVICE_UNAVAILABLE.
	Lineage(ctx context.Context, scope Scope, windowID string, maxDepth int) (contract.Lineage, error)
	// SaveInvocation stores inv unless an invocation with inv.ID exists in scope (then
	// it writes nothing), and returns the stored record and whether it was created
	// now. Errors: CONFLICT (a deleted conversation; the request window belongs to
	// another conversation), NOT_FOUND (details.field requestWindowId),
	// SERVICE_UNAVAILABLE.
	SaveInvocation(ctx context.Context, scope Scope, inv *contract.ModelInvocation) (stored contract.ModelInvocation, created bool, err error)
	// GetInvocation returns a model invocation. Errors: NOT_FOUND, SERVICE_UNAVAILABLE.
	GetInvocation(ctx context.Context, scope Scope, invocationID string) (contract.ModelInvocation, error)
}

// Windows holds the use cases of context windows, derivations, lineage and model
// invocations (04-windows.md). Windows and derivations are immutable; every create is
// idempotent by ID.
type Windows struct {
	store WindowStore
	clock Clock
}

// NewWindows returns the use cases over store.
func NewWindows(store WindowStore, clock Clock) *Windows {
	if clock == nil {
		clock = SystemClock{}
	}
	return &Windows{store: store, clock: clock}
}

// CreateWindow validates and stores a window. It returns the stored window without
// items and whether it was created now (false for an identical retry). A retry with
// the same ID and different content is IDEMPOTENCY_CONFLICT.
func (s *Windows) CreateWindow(ctx context.Context, p Principal, req *contract.CreateWindowRequest) (contract.Window, bool, error) {
	w, err := ValidateWindow(req)
	if err != nil {
		return contract.Window{}, false, err
	}
	w.CreatedAtMs = s.clock.Now().UnixMilli()
	stored, created, err := s.store.CreateWindow(ctx, p.Scope, &w)
	if err != nil {
		return contract.Window{}, false, err
	}
	if !created && !sameWindow(&w, &stored) {
		return contract.Window{}, false, idempotencyConflict(w.ID)
	}
	stored.Items = nil
	return stored, created, nil
}

// GetWindow returns a window with its items in ordinal order.
func (s *Windows) GetWindow(ctx context.Context, p Principal, req *contract.GetWindowRequest) (contract.Window, error) {
	if err := ValidateID("windowId", req.WindowID); err != nil {
		return contract.Window{}, err
	}
	return s.store.GetWindow(ctx, p.Scope, req.WindowID)
}

// CreateDerivation validates and stores a derivation edge.
func (s *Windows) CreateDerivation(ctx context.Context, p Principal, req *contract.CreateDerivationRequest) (contract.Derivation, bool, error) {
	d, err := ValidateDerivation(req)
	if err != nil {
		return contract.Derivation{}, false, err
	}
	d.CreatedAtMs = s.clock.Now().UnixMilli()
	stored, created, err := s.store.CreateDerivation(ctx, p.Scope, &d)
	if err != nil {
		return contract.Derivation{}, false, err
	}
	if !created && !sameDerivation(&d, &stored) {
		return contract.Derivation{}, false, idempotencyConflict(d.ID)
	}
	return stored, created, nil
}

// Lineage returns how a window was built: itself, its ancestors within maxDepth
// derivations and the edges between them.
func (s *Windows) Lineage(ctx context.Context, p Principal, req *contract.LineageRequest) (contract.Lineage, error) {
	if err := ValidateID("windowId", req.WindowID); err != nil {
		return contract.Lineage{}, err
	}
	depth := contract.DefaultLineageDepth
	if req.MaxDepth != nil {
		depth = *req.MaxDepth
		if depth < 1 || depth > contract.MaxLineageDepth {
			return contract.Lineage{}, TooMany("maxDepth", contract.MaxLineageDepth,
				"maxDepth must be between 1 and %d", contract.MaxLineageDepth)
		}
	}
	return s.store.Lineage(ctx, p.Scope, req.WindowID, depth)
}

// SaveInvocation validates and stores a model invocation record. It reports whether
// the record was created now; both a fresh save and an identical retry answer 200.
func (s *Windows) SaveInvocation(ctx context.Context, p Principal, req *contract.CreateModelInvocationRequest) (contract.ModelInvocation, error) {
	inv, err := ValidateInvocation(req, p.Subject)
	if err != nil {
		return contract.ModelInvocation{}, err
	}
	now := s.clock.Now().UnixMilli()
	inv.CreatedAtMs = now
	if inv.StartedAtMs == 0 {
		inv.StartedAtMs = now
	}
	stored, created, err := s.store.SaveInvocation(ctx, p.Scope, &inv)
	if err != nil {
		return contract.ModelInvocation{}, err
	}
	if !created && !sameInvocation(req, &inv, &stored) {
		return contract.ModelInvocation{}, idempotencyConflict(inv.ID)
	}
	return stored, nil
}

// GetInvocation returns a model invocation record.
func (s *Windows) GetInvocation(ctx context.Context, p Principal, req *contract.GetModelInvocationRequest) (contract.ModelInvocation, error) {
	if err := ValidateID("invocationId", req.InvocationID); err != nil {
		return contract.ModelInvocation{}, err
	}
	return s.store.GetInvocation(ctx, p.Scope, req.InvocationID)
}

func idempotencyConflict(id string) error {
	return Errorf(contract.CodeIdempotencyConflict, "a record with this ID exists with different content").
		With("ids", []string{id})
}

// ValidateWindow checks a create request against the window contract and returns the
// window to store: optional members normalized (null for absent), metadata compacted,
// a generated ID when none was given, and itemCount, contentBytes and contentSha256
// computed.
func ValidateWindow(req *contract.CreateWindowRequest) (contract.Window, error) {
	var w contract.Window
	id, err := idOrNew("id", req.ID)
	if err != nil {
		return w, err
	}
	w.ID = id
	if req.Conversation == nil {
		return w, Invalid("conversation", "conversation is required")
	}
	if err := ValidateID("conversation.conversationId", req.Conversation.ConversationID); err != nil {
		return w, err
	}
	w.Conversation = contract.ConversationRef{ConversationID: req.Conversation.ConversationID}
	if !slices.Contains(contract.Stages, req.Stage) {
		return w, oneOf("stage", contract.Stages)
	}
	w.Stage = req.Stage
	if err := validateLabel("purpose", req.Purpose, contract.MaxPurposeChars); err != nil {
		return w, err
	}
	w.Purpose = req.Purpose
	if req.TokenCount == nil {
		return w, Invalid("tokenCount", "tokenCount is required")
	}
	if *req.TokenCount < 0 {
		return w, Invalid("tokenCount", "tokenCount must not be negative")
	}
	w.TokenCount = *req.TokenCount
	if w.Metadata, err = normalizeJSON("metadata", req.Metadata); err != nil {
		return w, err
	}
	if req.Items == nil {
		return w, Invalid("items", "items is required (it may be empty)")
	}
	if len(req.Items) > contract.MaxWindowItems {
		return w, TooMany("items", contract.MaxWindowItems, "a window holds at most %d items", contract.MaxWindowItems)
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
		return w, TooLarge("items", contract.MaxWindowContentBytes)
	}
	w.ItemCount = len(w.Items)
	if w.ContentBytes, w.ContentSHA256, err = WindowDigest(w.Items); err != nil {
		return w, Invalid("items", "the items have no canonical JSON form")
	}
	return w, nil
}

// validateItem checks items[i] and writes its normalized form to out; ids collects the
// item IDs seen so far.
func validateItem(i int, in *contract.WindowItemInput, ids map[string]struct{}, out *contract.WindowItem) error {
	prefix := fmt.Sprintf("items[%d]", i)
	if err := ValidateID(prefix+".id", in.ID); err != nil {
		return err
	}
	if _, dup := ids[in.ID]; dup {
		return Invalid(prefix+".id", "item IDs must be unique within a window")
	}
	ids[in.ID] = struct{}{}
	if in.Ordinal == nil {
		return Invalid(prefix+".ordinal", "%s.ordinal is required", prefix)
	}
	if *in.Ordinal != i {
		return Invalid(prefix+".ordinal", "ordinals must be 0..n-1 in array order; item %d has ordinal %d", i, *in.Ordinal)
	}
	if !slices.Contains(contract.ItemKinds, in.Kind) {
		return oneOf(prefix+".kind", contract.ItemKinds)
	}
	if in.Role != nil && !slices.Contains(contract.Roles, *in.Role) {
		return oneOf(prefix+".role", contract.Roles)
	}
	if in.Content == nil {
		return Invalid(prefix+".content", "%s.content is required (it may be empty)", prefix)
	}
	if len(*in.Content) > contract.MaxWindowItemContentBytes {
		return TooLarge(prefix+".content", contract.MaxWindowItemContentBytes)
	}
	if in.SourceRecordID != nil {
		if err := ValidateID(prefix+".sourceRecordId", *in.SourceRecordID); err != nil {
			return err
		}
	}
	evidence := in.KnowledgeEvidence
	switch {
	case in.Kind == contract.ItemKindKnowledgeEvidence && evidence == nil:
		return Invalid(prefix+".knowledgeEvidence", "knowledgeEvidence is required for kind knowledge_evidence")
	case in.Kind != contract.ItemKindKnowledgeEvidence && evidence != nil:
		return Invalid(prefix+".knowledgeEvidence", "knowledgeEvidence is allowed only for kind knowledge_evidence")
	case evidence != nil:
		if err := validateEvidence(prefix+".knowledgeEvidence", evidence); err != nil {
			return err
		}
	}
	metadata, err := normalizeJSON(prefix+".metadata", in.Metadata)
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
	if err := ValidateID(prefix+".provider", e.Provider); err != nil {
		return err
	}
	if err := validateRef(prefix+".resourceRef", e.ResourceRef); err != nil {
		return err
	}
	if e.RevisionRef != nil {
		if err := validateRef(prefix+".revisionRef", *e.RevisionRef); err != nil {
			return err
		}
	}
	if e.SegmentRef != nil {
		if err := validateRef(prefix+".segmentRef", *e.SegmentRef); err != nil {
			return err
		}
	}
	if len(e.Excerpt) > contract.MaxEvidenceExcerptBytes {
		return TooLarge(prefix+".excerpt", contract.MaxEvidenceExcerptBytes)
	}
	if e.RetrievedAtMs < 0 {
		return Invalid(prefix+".retrievedAtMs", "retrievedAtMs must not be negative")
	}
	return nil
}

// validateRef checks an opaque provider reference: any non-empty string up to
// MaxEvidenceRefChars characters. It is never interpreted.
func validateRef(field, ref string) error {
	if ref == "" {
		return Invalid(field, "%s must not be empty", field)
	}
	if utf8.RuneCountInString(ref) > contract.MaxEvidenceRefChars {
		return TooMany(field, contract.MaxEvidenceRefChars, "%s must be at most %d characters", field, contract.MaxEvidenceRefChars)
	}
	return nil
}

// ValidateDerivation checks a create request and returns the derivation to store.
func ValidateDerivation(req *contract.CreateDerivationRequest) (contract.Derivation, error) {
	var d contract.Derivation
	id, err := idOrNew("id", req.ID)
	if err != nil {
		return d, err
	}
	if err := ValidateID("sourceWindowId", req.SourceWindowID); err != nil {
		return d, err
	}
	if err := ValidateID("targetWindowId", req.TargetWindowID); err != nil {
		return d, err
	}
	if req.SourceWindowID == req.TargetWindowID {
		return d, Invalid("targetWindowId", "a window cannot be derived from itself")
	}
	if !slices.Contains(contract.DerivationKinds, req.Kind) {
		return d, oneOf("kind", contract.DerivationKinds)
	}
	if req.Strategy != nil {
		if err := validateLabel("strategy", *req.Strategy, contract.MaxIDChars); err != nil {
			return d, err
		}
	}
	if req.StrategyVersion != nil {
		if err := validateLabel("strategyVersion", *req.StrategyVersion, contract.MaxIDChars); err != nil {
			return d, err
		}
	}
	counts := []struct {
		field string
		v     *int64
	}{
		{"inputTokenCount", req.InputTokenCount}, {"outputTokenCount", req.OutputTokenCount},
		{"inputItemCount", req.InputItemCount}, {"outputItemCount", req.OutputItemCount},
	}
	for _, c := range counts {
		if c.v != nil && *c.v < 0 {
			return d, Invalid(c.field, "%s must not be negative", c.field)
		}
	}
	metadata, err := normalizeJSON("metadata", req.Metadata)
	if err != nil {
		return d, err
	}
	return contract.Derivation{
		ID: id, SourceWindowID: req.SourceWindowID, TargetWindowID: req.TargetWindowID, Kind: req.Kind,
		Strategy: req.Strategy, StrategyVersion: req.StrategyVersion,
		InputTokenCount: req.InputTokenCount, OutputTokenCount: req.OutputTokenCount,
		InputItemCount: req.InputItemCount, OutputItemCount: req.OutputItemCount,
		Metadata: metadata,
	}, nil
}

// ValidateInvocation checks a save request and returns the record to store; subject
// is the caller, the default agentId.
func ValidateInvocation(req *contract.CreateModelInvocationRequest, subject string) (contract.ModelInvocation, error) {
	var inv contract.ModelInvocation
	id, err := idOrNew("id", req.ID)
	if err != nil {
		return inv, err
	}
	if req.Conversation == nil {
		return inv, Invalid("conversation", "conversation is required")
	}
	if err := ValidateID("conversation.conversationId", req.Conversation.ConversationID); err != nil {
		return inv, err
	}
	if err := ValidateID("requestWindowId", req.RequestWindowID); err != nil {
		return inv, err
	}
	agentID := subject
	if req.AgentID != nil {
		agentID = *req.AgentID
	}
	if err := ValidateID("agentId", agentID); err != nil {
		return inv, err
	}
	if req.ToolName != nil {
		if err := ValidateID("toolName", *req.ToolName); err != nil {
			return inv, err
		}
	}
	if err := ValidateID("provider", req.Provider); err != nil {
		return inv, err
	}
	if err := ValidateID("model", req.Model); err != nil {
		return inv, err
	}
	if !slices.Contains(contract.InvocationStates, req.State) {
		return inv, oneOf("state", contract.InvocationStates)
	}
	nonNegative := []struct {
		field string
		v     int64
	}{
		{"inputTokens", req.InputTokens}, {"outputTokens", req.OutputTokens}, {"cachedTokens", req.CachedTokens},
		{"startedAtMs", req.StartedAtMs}, {"completedAtMs", req.CompletedAtMs}, {"latencyMs", req.LatencyMs},
	}
	for _, c := range nonNegative {
		if c.v < 0 {
			return inv, Invalid(c.field, "%s must not be negative", c.field)
		}
	}
	if req.CachedTokens > req.InputTokens {
		return inv, Invalid("cachedTokens", "cachedTokens must not exceed inputTokens: cached input is part of the input")
	}
	if req.FinishReason != nil {
		if err := validateLabel("finishReason", *req.FinishReason, contract.MaxFinishReasonChars); err != nil {
			return inv, err
		}
	}
	if req.ResponseContent != nil && len(*req.ResponseContent) > contract.MaxResponseContentBytes {
		return inv, TooLarge("responseContent", contract.MaxResponseContentBytes)
	}
	switch {
	case req.State == contract.InvocationFailed && req.Error == nil:
		return inv, Invalid("error", "error is required when state is failed")
	case req.State != contract.InvocationFailed && req.Error != nil:
		return inv, Invalid("error", "error is allowed only when state is failed")
	case req.Error != nil:
		if err := validateLabel("error.code", req.Error.Code, contract.MaxIDChars); err != nil {
			return inv, err
		}
		if req.Error.Message == "" {
			return inv, Invalid("error.message", "error.message must not be empty")
		}
		if len(req.Error.Message) > contract.MaxInvocationErrorMsgBytes {
			return inv, TooLarge("error.message", contract.MaxInvocationErrorMsgBytes)
		}
	}
	metadata, err := normalizeJSON("metadata", req.Metadata)
	if err != nil {
		return inv, err
	}
	return contract.ModelInvocation{
		ID: id, Conversation: contract.ConversationRef{ConversationID: req.Conversation.ConversationID},
		RequestWindowID: req.RequestWindowID, AgentID: agentID, ToolName: req.ToolName,
		Provider: req.Provider, Model: req.Model, State: req.State,
		InputTokens: req.InputTokens, OutputTokens: req.OutputTokens, CachedTokens: req.CachedTokens,
		StartedAtMs: req.StartedAtMs, CompletedAtMs: req.CompletedAtMs, LatencyMs: req.LatencyMs,
		FinishReason: req.FinishReason, ResponseContent: req.ResponseContent, Error: req.Error,
		Metadata: metadata,
	}, nil
}

// idOrNew validates a client-chosen ID or, when there is none (absent or null),
// generates one. An empty string is a client-chosen ID, and an invalid one.
func idOrNew(field string, id *string) (string, error) {
	if id == nil {
		return NewID(), nil
	}
	if *id == "" {
		return "", Invalid(field, "%s must not be empty: omit it (or send null) to have one generated", field)
	}
	if err := ValidateID(field, *id); err != nil {
		return "", err
	}
	return *id, nil
}

// validateLabel checks a free-text label such as purpose: 1 to maxChars characters and
// no control characters (which also keeps NUL out of Postgres text).
func validateLabel(field, v string, maxChars int) error {
	if v == "" {
		return Invalid(field, "%s is required", field)
	}
	if utf8.RuneCountInString(v) > maxChars {
		return TooMany(field, int64(maxChars), "%s must be at most %d characters", field, maxChars)
	}
	if strings.IndexFunc(v, unicode.IsControl) >= 0 {
		return Invalid(field, "%s must not contain control characters", field)
	}
	return nil
}

func oneOf(field string, values []string) error {
	return Invalid(field, "%s must be one of %s", field, strings.Join(values, ", "))
}

// normalizeJSON is NormalizeMetadata plus the check that the value has an RFC 8785
// canonical form, which comparisons and contentSha256 rely on.
func normalizeJSON(field string, raw json.RawMessage) (json.RawMessage, error) {
	v, err := NormalizeMetadata(field, raw)
	if err != nil || v == nil {
		return nil, err
	}
	if _, err := canonicalJSON(v); err != nil || !finiteNumbers(v) {
		return nil, Invalid(field, "%s has no RFC 8785 canonical form (numbers must fit an IEEE-754 double)", field)
	}
	return v, nil
}

// sameWindow reports whether a create request (normalized) has the content of a stored
// window: the client fields, with the items compared through their digest.
func sameWindow(req, stored *contract.Window) bool {
	return req.Conversation == stored.Conversation && req.Stage == stored.Stage &&
		req.Purpose == stored.Purpose && req.TokenCount == stored.TokenCount &&
		req.ItemCount == stored.ItemCount && req.ContentSHA256 == stored.ContentSHA256 &&
		sameJSON(req.Metadata, stored.Metadata)
}

func sameDerivation(req, stored *contract.Derivation) bool {
	return req.SourceWindowID == stored.SourceWindowID && req.TargetWindowID == stored.TargetWindowID &&
		req.Kind == stored.Kind && sameOptional(req.Strategy, stored.Strategy) &&
		sameOptional(req.StrategyVersion, stored.StrategyVersion) &&
		sameOptional(req.InputTokenCount, stored.InputTokenCount) &&
		sameOptional(req.OutputTokenCount, stored.OutputTokenCount) &&
		sameOptional(req.InputItemCount, stored.InputItemCount) &&
		sameOptional(req.OutputItemCount, stored.OutputItemCount) &&
		sameJSON(req.Metadata, stored.Metadata)
}

// sameInvocation compares a save request (normalized into req) with the stored record.
// Only what the client supplied counts: a zero startedAtMs and an absent agentId were
// filled by the server (its clock, the caller's subject) and match any stored value.
func sameInvocation(sent *contract.CreateModelInvocationRequest, req, stored *contract.ModelInvocation) bool {
	return req.Conversation == stored.Conversation && req.RequestWindowID == stored.RequestWindowID &&
		(sent.AgentID == nil || req.AgentID == stored.AgentID) && sameOptional(req.ToolName, stored.ToolName) &&
		req.Provider == stored.Provider && req.Model == stored.Model && req.State == stored.State &&
		req.InputTokens == stored.InputTokens && req.OutputTokens == stored.OutputTokens &&
		req.CachedTokens == stored.CachedTokens &&
		(sent.StartedAtMs == 0 || req.StartedAtMs == stored.StartedAtMs) &&
		req.CompletedAtMs == stored.CompletedAtMs && req.LatencyMs == stored.LatencyMs &&
		sameOptional(req.FinishReason, stored.FinishReason) &&
		sameOptional(req.ResponseContent, stored.ResponseContent) &&
		sameOptional(req.Error, stored.Error) && sameJSON(req.Metadata, stored.Metadata)
}

func sameOptional[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}
