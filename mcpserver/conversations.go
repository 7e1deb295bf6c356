package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/conversation"
)

// appendArgs are the arguments of conversation_append (POST /messages/batch).
type appendArgs struct {
	ConversationID string          `json:"conversation_id" jsonschema:"The conversation to append to; it exists as soon as it has a message."`
	Messages       []appendMessage `json:"messages" jsonschema:"The messages to append, oldest first (at most 500)."`
}

// appendMessage is one message of conversation_append.
type appendMessage struct {
	Role     string          `json:"role" jsonschema:"Who said it: system, user, assistant or tool."`
	Content  string          `json:"content" jsonschema:"What was said (at most 1 MiB)."`
	ID       *string         `json:"id,omitempty" jsonschema:"An ID of your choosing, unique in the conversation: resending a message with the same ID and content is skipped, so retries are safe. Generated when absent (a retry then appends it again)."`
	Metadata json.RawMessage `json:"metadata,omitempty" jsonschema:"Any JSON value to keep with the message (at most 64 KiB)."`
}

// recentArgs are the arguments of conversation_recent (POST /messages/recent).
type recentArgs struct {
	ConversationID string `json:"conversation_id" jsonschema:"The conversation to read."`
	Limit          *int   `json:"limit,omitempty" jsonschema:"How many of the newest messages to return, 1 to 500 (default 50)."`
}

// searchArgs are the arguments of conversation_search (POST /messages/search).
type searchArgs struct {
	Query          string  `json:"query" jsonschema:"Words every hit must contain (1 byte to 4 KiB)."`
	ConversationID *string `json:"conversation_id,omitempty" jsonschema:"Search this conversation only; every conversation of your scope when absent."`
	Limit          *int    `json:"limit,omitempty" jsonschema:"How many hits to return, 1 to 100 (default 20)."`
}

// windowArgs are the arguments of context_window_get (POST /windows/get).
type windowArgs struct {
	WindowID string `json:"window_id" jsonschema:"The ID of the context window (the snapshot of what a model was shown)."`
}

// conversationTools registers the tools of conversation messages and context windows
// (docs/conversations.md, docs/windows.md).
func (d *Door) conversationTools(messages *conversation.Messages, windows *conversation.Windows) {
	addTool(d, toolSpec{name: contract.ToolConversationAppend, idempotent: true,
		description: "Record messages of a conversation (what the user, the assistant, the system or a tool said) in order. " +
			"Returns how many were appended and which were skipped as already stored."},
		func(ctx context.Context, p runtime.Principal, in *appendArgs) (any, error) {
			req := &contract.AppendMessagesRequest{Messages: make([]contract.ConversationRecord, len(in.Messages))}
			for i, m := range in.Messages {
				id, err := runtime.IDOrNew(fmt.Sprintf("messages[%d].id", i), m.ID)
				if err != nil {
					return nil, err
				}
				req.Messages[i] = contract.ConversationRecord{ID: id, Scope: contract.ConversationScope{ConversationID: in.ConversationID},
					Role: m.Role, Content: m.Content, Metadata: m.Metadata}
			}
			return messages.Append(ctx, p.Scope, req)
		})
	addTool(d, toolSpec{name: contract.ToolConversationRecent, readOnly: true, idempotent: true,
		description: "Read the newest messages of a conversation, oldest first: use it to catch up on what was said."},
		func(ctx context.Context, p runtime.Principal, in *recentArgs) (any, error) {
			return messages.Recent(ctx, p.Scope, &contract.RecentMessagesRequest{
				Scope: contract.ConversationScope{ConversationID: in.ConversationID}, Limit: in.Limit})
		})
	addTool(d, toolSpec{name: contract.ToolConversationSearch, readOnly: true, idempotent: true,
		description: "Find past messages containing every word of a query, in one conversation or all of them, best first."},
		func(ctx context.Context, p runtime.Principal, in *searchArgs) (any, error) {
			req := &contract.SearchMessagesRequest{Query: in.Query, Limit: in.Limit}
			if in.ConversationID != nil {
				req.Scope = &contract.ConversationScope{ConversationID: *in.ConversationID}
			}
			return messages.Search(ctx, p.Scope, req)
		})
	addTool(d, toolSpec{name: contract.ToolContextWindowGet, readOnly: true, idempotent: true,
		description: "Read a context window by its id: exactly what a model was shown at one step, item by item."},
		func(ctx context.Context, p runtime.Principal, in *windowArgs) (any, error) {
			return windows.GetWindow(ctx, p, &contract.GetWindowRequest{WindowID: in.WindowID})
		})
}
