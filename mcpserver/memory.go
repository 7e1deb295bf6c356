package mcpserver

import (
	"context"
	"encoding/json"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/memory"
)

// rememberArgs are the arguments of memory_remember (POST /entries).
type rememberArgs struct {
	Content         string          `json:"content" jsonschema:"The fact, preference, instruction, summary or observation to keep, in plain words (1 byte to 64 KiB)."`
	Kind            *string         `json:"kind,omitempty" jsonschema:"What the content is: fact (default), preference, instruction, summary or observation."`
	ID              *string         `json:"id,omitempty" jsonschema:"An ID of your choosing; sending the same ID and content again is a no-op, so retries are safe. Generated when absent."`
	Tags            []string        `json:"tags,omitempty" jsonschema:"Up to 32 labels to filter recalls by."`
	Importance      *float64        `json:"importance,omitempty" jsonschema:"How much it matters, 0 to 1 (default 0.5)."`
	ConversationID  *string         `json:"conversation_id,omitempty" jsonschema:"The conversation it came from, if any."`
	SourceRecordIDs []string        `json:"source_record_ids,omitempty" jsonschema:"IDs of the conversation messages it was drawn from."`
	ExpiresAtMs     *int64          `json:"expires_at_ms,omitempty" jsonschema:"When it stops being recalled, in milliseconds since the Unix epoch; never when absent."`
	Metadata        json.RawMessage `json:"metadata,omitempty" jsonschema:"Any JSON value to keep with it (at most 64 KiB)."`
}

// recallArgs are the arguments of memory_recall (POST /recall).
type recallArgs struct {
	Query          string   `json:"query" jsonschema:"What you want to remember, as a question or keywords (1 byte to 16 KiB)."`
	TopK           *int     `json:"top_k,omitempty" jsonschema:"How many entries to return, 1 to 100 (default 10)."`
	Mode           *string  `json:"mode,omitempty" jsonschema:"hybrid (default: meaning and words), vector (meaning only) or text (words only)."`
	Kinds          []string `json:"kinds,omitempty" jsonschema:"Only entries of these kinds (fact, preference, instruction, summary, observation)."`
	Tags           []string `json:"tags,omitempty" jsonschema:"Only entries carrying every one of these tags."`
	ConversationID *string  `json:"conversation_id,omitempty" jsonschema:"Only entries drawn from this conversation."`
	MinScore       *float64 `json:"min_score,omitempty" jsonschema:"Drop results scoring below this."`
}

// entryArgs name one entry (memory_get).
type entryArgs struct {
	EntryID string `json:"entry_id" jsonschema:"The ID of the entry, as memory_remember or memory_recall returned it."`
}

// correctArgs are the arguments of memory_correct (POST /entries/correct).
type correctArgs struct {
	EntryID     string   `json:"entry_id" jsonschema:"The ID of the active entry that is wrong."`
	Content     string   `json:"content" jsonschema:"The corrected content, replacing the old one (which is kept as history)."`
	Reason      *string  `json:"reason,omitempty" jsonschema:"Why it was wrong, kept with the history."`
	Tags        []string `json:"tags,omitempty" jsonschema:"New tags; the old entry's tags are kept when absent, an empty list clears them."`
	Importance  *float64 `json:"importance,omitempty" jsonschema:"New importance, 0 to 1; the old one is kept when absent."`
	ExpiresAtMs *int64   `json:"expires_at_ms,omitempty" jsonschema:"New expiry in milliseconds since the Unix epoch; the old one is kept when absent."`
}

// forgetArgs are the arguments of memory_forget (POST /entries/expire).
type forgetArgs struct {
	EntryID string  `json:"entry_id" jsonschema:"The ID of the entry to stop recalling."`
	Reason  *string `json:"reason,omitempty" jsonschema:"Why it no longer holds, kept with the entry."`
}

// memoryTools registers the tools of context entries and recall (docs/entries.md).
func (d *Door) memoryTools(entries *memory.Entries, recall *memory.Recall) {
	addTool(d, toolSpec{name: contract.ToolMemoryRemember, idempotent: true,
		description: "Store a durable memory (a fact, preference, instruction, summary or observation) so that it can be " +
			"recalled in later sessions. Returns the stored entry with its id."},
		func(ctx context.Context, p runtime.Principal, in *rememberArgs) (any, error) {
			kind := contract.EntryKindFact
			if in.Kind != nil {
				kind = *in.Kind
			}
			e, _, err := entries.Create(ctx, p, &contract.CreateEntryRequest{ID: in.ID, Kind: kind, Content: in.Content,
				ConversationID: in.ConversationID, SourceRecordIDs: in.SourceRecordIDs, Tags: in.Tags,
				Importance: in.Importance, ExpiresAtMs: in.ExpiresAtMs, Metadata: in.Metadata})
			return e, err
		})
	addTool(d, toolSpec{name: contract.ToolMemoryRecall, readOnly: true, idempotent: true,
		description: "Search the stored memories for the ones relevant to a query, best first. Use it before answering " +
			"anything the user or another agent may have told you earlier. Returns results with their entries and scores."},
		func(ctx context.Context, p runtime.Principal, in *recallArgs) (any, error) {
			req := &contract.RecallRequest{Query: in.Query, TopK: in.TopK, MinScore: in.MinScore}
			if in.Mode != nil {
				req.Mode = *in.Mode
			}
			if in.Kinds != nil || in.Tags != nil || in.ConversationID != nil {
				req.Filter = &contract.RecallFilter{Kinds: in.Kinds, Tags: in.Tags, ConversationID: in.ConversationID}
			}
			return recall.Recall(ctx, p, req)
		})
	addTool(d, toolSpec{name: contract.ToolMemoryGet, readOnly: true, idempotent: true,
		description: "Read one stored memory by its id, whatever its status (active, superseded, merged or expired)."},
		func(ctx context.Context, p runtime.Principal, in *entryArgs) (any, error) {
			return entries.Get(ctx, p, &contract.GetEntryRequest{EntryID: in.EntryID})
		})
	addTool(d, toolSpec{name: contract.ToolMemoryCorrect,
		description: "Replace a memory that turned out wrong with corrected content. The old entry is kept as superseded " +
			"history and is no longer recalled. Returns the new entry and the superseded one."},
		func(ctx context.Context, p runtime.Principal, in *correctArgs) (any, error) {
			return entries.Correct(ctx, p, &contract.CorrectEntryRequest{EntryID: in.EntryID, Content: in.Content,
				Reason: in.Reason, Tags: in.Tags, Importance: in.Importance, ExpiresAtMs: in.ExpiresAtMs})
		})
	addTool(d, toolSpec{name: contract.ToolMemoryForget, idempotent: true,
		description: "Stop recalling a memory that no longer holds: it is marked expired (still readable with memory_get). " +
			"Returns the expired entry."},
		func(ctx context.Context, p runtime.Principal, in *forgetArgs) (any, error) {
			return entries.Expire(ctx, p, &contract.ExpireEntryRequest{EntryID: in.EntryID, Reason: in.Reason})
		})
}
