package conversation

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// MessageDigest is what an append needs to know about a stored message whose ID a
// batch repeats: enough to tell an identical retry from a different record without
// reading the content back.
type MessageDigest struct {
	ConversationID string
	ID             string
	Role           string
	Sequence       int64
	CreatedAtMs    int64
	ContentSHA256  [sha256.Size]byte
	Metadata       []byte
}

// AppendPlan is what one append writes: the new records with sequence and time filled
// in, in batch order, the IDs it skips as already present, and each touched
// conversation's new last sequence.
type AppendPlan struct {
	Insert       []contract.ConversationRecord
	SkippedIDs   []string
	LastSequence map[string]int64
}

// AppendResult reports an append.
type AppendResult struct {
	Appended   int
	SkippedIDs []string
}

// MessageQuery selects messages of one conversation in sequence order.
type MessageQuery struct {
	ConversationID string
	// Roles keeps only messages of these roles; empty keeps all.
	Roles []string
	// Descending lists newest first.
	Descending bool
	// After resumes behind this sequence (exclusive, in the listing's direction); 0
	// starts at the beginning.
	After int64
	Limit int
	// MaxBytes bounds the content and metadata bytes returned; the first message is
	// returned even when it alone is larger.
	MaxBytes int64
}

// SearchQuery is a full-text search.
type SearchQuery struct {
	Text string
	// ConversationID confines the search to one conversation; empty searches all of
	// the scope's conversations.
	ConversationID string
	Roles          []string
	Limit          int
	// MaxBytes bounds the content and metadata bytes returned, as in MessageQuery.
	MaxBytes int64
}

// AppendPlanner decides what an append writes (PlanAppend is the one the use case
// passes): given the batch, each conversation's last sequence and the stored digests of
// the batch's IDs that already exist.
type AppendPlanner func(batch []contract.ConversationRecord, last map[string]int64, existing []MessageDigest, nowMs int64) (AppendPlan, error)

// MessageStore is the storage the message use cases need. Every method is confined to
// scope, and treats a deleted conversation as one that never existed.
type MessageStore interface {
	// AppendMessages writes batch atomically: it locks the batch's conversations
	// (creating missing ones), asks plan what to write, given the stored digests of
	// the IDs the batch repeats, and writes exactly that, or nothing on error. The
	// planner runs while the locks are held, so its view cannot change underneath.
	// Errors: the planner's, CONFLICT (a deleted conversation, reason
	// conversation_deleted), SERVICE_UNAVAILABLE.
	AppendMessages(ctx context.Context, scope runtime.Scope, batch []contract.ConversationRecord, plan AppendPlanner, nowMs int64) (AppendResult, error)
	// ListMessages returns up to q.Limit messages and whether another one follows them.
	// Errors: SERVICE_UNAVAILABLE.
	ListMessages(ctx context.Context, scope runtime.Scope, q MessageQuery) (msgs []contract.ConversationRecord, more bool, err error)
	// SearchMessages returns up to q.Limit messages containing every word of q.Text,
	// best first. Errors: SERVICE_UNAVAILABLE (reason statement_timeout when the search
	// ran out of time).
	SearchMessages(ctx context.Context, scope runtime.Scope, q SearchQuery) ([]contract.SearchHit, error)
	// ListConversations returns up to q.Limit live conversations of the scope whose ID
	// starts with prefix ("": any), the most recently active first (lastAtMs
	// descending, then ID), after q.After, from their head rows alone. Errors:
	// SERVICE_UNAVAILABLE.
	ListConversations(ctx context.Context, scope runtime.Scope, prefix string, q runtime.PageQuery) ([]contract.ConversationSummary, error)
}

// Messages holds the use cases of conversation messages: append, recent, page and
// search (docs/conversations.md).
type Messages struct {
	store   MessageStore
	cursors *runtime.CursorCodec
	clock   runtime.Clock
}

// NewMessages returns the use cases over db; cursors signs page cursors.
func NewMessages(store MessageStore, cursors *runtime.CursorCodec, clock runtime.Clock) *Messages {
	if clock == nil {
		clock = runtime.SystemClock{}
	}
	return &Messages{store: store, cursors: cursors, clock: clock}
}

// Append validates and appends a batch of records.
func (c *Messages) Append(ctx context.Context, scope runtime.Scope, req *contract.AppendMessagesRequest) (*contract.AppendMessagesResponse, error) {
	if err := runtime.ListSize("messages", len(req.Messages), contract.MaxAppendMessages, "record"); err != nil {
		return nil, err
	}
	batch := make([]contract.ConversationRecord, len(req.Messages))
	for i, r := range req.Messages {
		m, err := ValidateMessage(fmt.Sprintf("messages[%d]", i), r)
		if err != nil {
			return nil, err
		}
		batch[i] = m
	}
	res, err := c.store.AppendMessages(ctx, scope, batch, PlanAppend, c.clock.Now().UnixMilli())
	if err != nil {
		return nil, err
	}
	skipped := res.SkippedIDs
	if skipped == nil {
		skipped = []string{}
	}
	return &contract.AppendMessagesResponse{Appended: res.Appended, Skipped: len(skipped), SkippedIDs: skipped}, nil
}

// Recent returns the newest messages of a conversation, oldest first.
func (c *Messages) Recent(ctx context.Context, scope runtime.Scope, req *contract.RecentMessagesRequest) (*contract.MessagesResponse, error) {
	if err := runtime.ValidateID("scope.conversationId", req.Scope.ConversationID); err != nil {
		return nil, err
	}
	limit, err := runtime.OptionalCount("limit", req.Limit, contract.DefaultMessagesLimit, contract.MaxMessagesLimit)
	if err != nil {
		return nil, err
	}
	roles, err := validateRoleFilter(req.Roles)
	if err != nil {
		return nil, err
	}
	msgs, _, err := c.store.ListMessages(ctx, scope, MessageQuery{
		ConversationID: req.Scope.ConversationID, Roles: roles, Descending: true, Limit: limit,
		MaxBytes: contract.MaxMessagesResponseBytes,
	})
	if err != nil {
		return nil, err
	}
	slices.Reverse(msgs)
	return &contract.MessagesResponse{Messages: msgs}, nil
}

// Page returns one page of a conversation in sequence order and the cursor of the next.
func (c *Messages) Page(ctx context.Context, scope runtime.Scope, req *contract.PageMessagesRequest) (*contract.MessagePage, error) {
	if err := runtime.ValidateID("scope.conversationId", req.Scope.ConversationID); err != nil {
		return nil, err
	}
	limit, err := runtime.OptionalCount("limit", req.Limit, contract.DefaultMessagesLimit, contract.MaxMessagesLimit)
	if err != nil {
		return nil, err
	}
	order := req.Order
	switch order {
	case "":
		order = contract.OrderAsc
	case contract.OrderAsc, contract.OrderDesc:
	default:
		return nil, runtime.Invalid("order", "order must be %q or %q", contract.OrderAsc, contract.OrderDesc)
	}
	roles, err := validateRoleFilter(req.Roles)
	if err != nil {
		return nil, err
	}
	binding := runtime.CursorBinding{
		Kind: "messages", Scope: scope, ConversationID: req.Scope.ConversationID, Order: order, Roles: roles,
	}
	var after int64
	if req.Cursor != nil && *req.Cursor != "" {
		if after, err = c.cursors.Decode(binding, *req.Cursor); err != nil {
			return nil, err
		}
	}
	msgs, more, err := c.store.ListMessages(ctx, scope, MessageQuery{
		ConversationID: req.Scope.ConversationID, Roles: roles, Descending: order == contract.OrderDesc,
		After: after, Limit: limit, MaxBytes: contract.MaxMessagesResponseBytes,
	})
	if err != nil {
		return nil, err
	}
	page := &contract.MessagePage{Messages: msgs}
	if more && len(msgs) > 0 {
		next := c.cursors.Encode(binding, msgs[len(msgs)-1].Sequence)
		page.NextCursor = &next
	}
	return page, nil
}

// Search finds messages containing every word of the query, best first.
func (c *Messages) Search(ctx context.Context, scope runtime.Scope, req *contract.SearchMessagesRequest) (*contract.SearchMessagesResponse, error) {
	if err := runtime.ValidateQuery("query", req.Query, contract.MaxSearchQueryBytes); err != nil {
		return nil, err
	}
	limit, err := runtime.OptionalCount("limit", req.Limit, contract.DefaultSearchLimit, contract.MaxSearchLimit)
	if err != nil {
		return nil, err
	}
	q := SearchQuery{Text: req.Query, Limit: limit, MaxBytes: contract.MaxMessagesResponseBytes}
	if req.Scope != nil {
		if err := runtime.ValidateID("scope.conversationId", req.Scope.ConversationID); err != nil {
			return nil, err
		}
		q.ConversationID = req.Scope.ConversationID
	}
	if q.Roles, err = validateRoleFilter(req.Roles); err != nil {
		return nil, err
	}
	hits, err := c.store.SearchMessages(ctx, scope, q)
	if err != nil {
		return nil, err
	}
	return &contract.SearchMessagesResponse{Hits: hits}, nil
}

// PlanAppend decides what an append writes, given the batch, each conversation's last
// sequence and the stored digests of the batch's IDs that already exist. Stores call it
// while they hold the conversations' locks, so its view cannot change underneath.
//
// A record whose ID exists (stored, or earlier in the batch) is skipped when identical
// and an IDEMPOTENCY_CONFLICT otherwise. "Identical" compares what the client supplied:
// a sequence or createdAtMs of 0 leaves the server's value, so it never differs.
// A new record gets the next sequence of its conversation when it has none; a given
// one must exceed every sequence the conversation has so far, else CONFLICT.
// Either error lists the offending IDs in details.ids; then nothing is written.
func PlanAppend(batch []contract.ConversationRecord, last map[string]int64, existing []MessageDigest, nowMs int64) (AppendPlan, error) {
	type key struct{ conversation, id string }
	stored := make(map[key]MessageDigest, len(existing))
	for _, d := range existing {
		stored[key{d.ConversationID, d.ID}] = d
	}
	next := make(map[string]int64, len(last))
	for id, seq := range last {
		next[id] = seq
	}
	planned := make(map[key]int, len(batch))
	plan := AppendPlan{Insert: make([]contract.ConversationRecord, 0, len(batch)), LastSequence: map[string]int64{}}
	var idConflicts, seqConflicts, exhausted []string
	for _, m := range batch {
		conversation := m.Scope.ConversationID
		k := key{conversation, m.ID}
		if d, ok := stored[k]; ok {
			if SameAsStored(m, d) {
				plan.SkippedIDs = append(plan.SkippedIDs, m.ID)
			} else {
				idConflicts = appendID(idConflicts, m.ID)
			}
			continue
		}
		if j, ok := planned[k]; ok {
			if SameAsPlanned(m, plan.Insert[j]) {
				plan.SkippedIDs = append(plan.SkippedIDs, m.ID)
			} else {
				idConflicts = appendID(idConflicts, m.ID)
			}
			continue
		}
		if m.CreatedAtMs == 0 {
			m.CreatedAtMs = nowMs
		}
		switch {
		case m.Sequence == 0 && next[conversation] >= runtime.MaxSequence:
			exhausted = appendID(exhausted, m.ID)
			continue
		case m.Sequence == 0:
			m.Sequence = next[conversation] + 1
		case m.Sequence <= next[conversation]:
			seqConflicts = appendID(seqConflicts, m.ID)
			continue
		}
		next[conversation] = m.Sequence
		plan.LastSequence[conversation] = m.Sequence
		planned[k] = len(plan.Insert)
		plan.Insert = append(plan.Insert, m)
	}
	if len(idConflicts) > 0 {
		return AppendPlan{}, runtime.Errorf(contract.CodeIdempotencyConflict,
			"a record with the same ID but different content already exists").With("ids", inBatchOrder(batch, idConflicts))
	}
	if len(seqConflicts) > 0 {
		return AppendPlan{}, runtime.Errorf(contract.CodeConflict,
			"a given sequence is not greater than every sequence already in its conversation").
			With("reason", "sequence_conflict").With("ids", inBatchOrder(batch, seqConflicts))
	}
	if len(exhausted) > 0 {
		return AppendPlan{}, runtime.Errorf(contract.CodeConflict,
			"the conversation has no sequence left: the next would pass %d", int64(runtime.MaxSequence)).
			With("reason", "sequence_exhausted").With("limit", int64(runtime.MaxSequence)).With("ids", inBatchOrder(batch, exhausted))
	}
	return plan, nil
}

// inBatchOrder sorts ids by where each first occurs in the batch.
func inBatchOrder(batch []contract.ConversationRecord, ids []string) []string {
	first := make(map[string]int, len(ids))
	for i := len(batch) - 1; i >= 0; i-- {
		first[batch[i].ID] = i
	}
	slices.SortStableFunc(ids, func(a, b string) int { return first[a] - first[b] })
	return ids
}

func appendID(ids []string, id string) []string {
	if slices.Contains(ids, id) {
		return ids
	}
	return append(ids, id)
}

// SameAsStored reports whether m repeats the stored record d.
func SameAsStored(m contract.ConversationRecord, d MessageDigest) bool {
	return m.Role == d.Role &&
		sha256.Sum256([]byte(m.Content)) == d.ContentSHA256 &&
		runtime.SameJSON(m.Metadata, d.Metadata) &&
		(m.Sequence == 0 || m.Sequence == d.Sequence) &&
		(m.CreatedAtMs == 0 || m.CreatedAtMs == d.CreatedAtMs)
}

// SameAsPlanned reports whether m repeats p, a record earlier in the same batch whose
// sequence and time are already filled in.
func SameAsPlanned(m, p contract.ConversationRecord) bool {
	return m.Role == p.Role && m.Content == p.Content && runtime.SameJSON(m.Metadata, p.Metadata) &&
		(m.Sequence == 0 || m.Sequence == p.Sequence) &&
		(m.CreatedAtMs == 0 || m.CreatedAtMs == p.CreatedAtMs)
}

// ValidateMessage checks one record of an append and returns it with its metadata
// compacted; prefix is its field path (messages[3]).
func ValidateMessage(prefix string, r contract.ConversationRecord) (contract.ConversationRecord, error) {
	if err := runtime.ValidateID(prefix+".id", r.ID); err != nil {
		return contract.ConversationRecord{}, err
	}
	if err := runtime.ValidateID(prefix+".scope.conversationId", r.Scope.ConversationID); err != nil {
		return contract.ConversationRecord{}, err
	}
	if !slices.Contains(contract.Roles, r.Role) {
		return contract.ConversationRecord{}, runtime.Invalid(prefix+".role", "role must be one of %s", strings.Join(contract.Roles, ", "))
	}
	if len(r.Content) > contract.MaxMessageContentBytes {
		return contract.ConversationRecord{}, runtime.TooLarge(prefix+".content", contract.MaxMessageContentBytes)
	}
	// Postgres text cannot hold NUL; refusing it here keeps it a validation error.
	if strings.IndexByte(r.Content, 0) >= 0 {
		return contract.ConversationRecord{}, runtime.Invalid(prefix+".content", "content must not contain NUL characters")
	}
	if r.Sequence < 0 || r.Sequence > runtime.MaxSequence {
		return contract.ConversationRecord{}, runtime.TooMany(prefix+".sequence", runtime.MaxSequence, "sequence must be between 0 and %d", int64(runtime.MaxSequence))
	}
	if r.CreatedAtMs < 0 || r.CreatedAtMs > runtime.MaxSequence {
		return contract.ConversationRecord{}, runtime.TooMany(prefix+".createdAtMs", runtime.MaxSequence, "createdAtMs must be between 0 and %d", int64(runtime.MaxSequence))
	}
	metadata, err := runtime.NormalizeMetadata(prefix+".metadata", r.Metadata)
	if err != nil {
		return contract.ConversationRecord{}, err
	}
	r.Metadata = metadata
	return r, nil
}

// validateRoleFilter checks a roles filter and returns it sorted without duplicates; an
// empty filter keeps every role.
func validateRoleFilter(roles []string) ([]string, error) {
	for i, r := range roles {
		if !slices.Contains(contract.Roles, r) {
			return nil, runtime.Invalid(fmt.Sprintf("roles[%d]", i), "role must be one of %s", strings.Join(contract.Roles, ", "))
		}
	}
	out := slices.Clone(roles)
	slices.Sort(out)
	return slices.Compact(out), nil
}

// ListConversations returns one page of the scope's live conversations, the most
// recently active first. The cursor is bound to the scope and the prefix.
func (c *Messages) ListConversations(ctx context.Context, scope runtime.Scope, req *contract.ListConversationsRequest) (*contract.ConversationList, error) {
	var prefix string
	if req.Prefix != nil && *req.Prefix != "" {
		if err := runtime.ValidateID("prefix", *req.Prefix); err != nil {
			return nil, err
		}
		prefix = *req.Prefix
	}
	binding := runtime.CursorBinding{Kind: "conversations", Scope: scope, Order: prefix}
	q, err := c.cursors.OpenPage(binding, req.Cursor, req.Limit, contract.DefaultMessagesLimit, contract.MaxMessagesLimit)
	if err != nil {
		return nil, err
	}
	page := q
	page.Limit++
	rows, err := c.store.ListConversations(ctx, scope, prefix, page)
	if err != nil {
		return nil, err
	}
	out := &contract.ConversationList{}
	out.Conversations, out.NextCursor = runtime.ClosePage(c.cursors, binding, q, rows,
		func(s *contract.ConversationSummary) runtime.Position {
			return runtime.Position{AtMs: s.LastAtMs, ID: s.ConversationID}
		})
	return out, nil
}
