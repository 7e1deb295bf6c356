package contract

import "encoding/json"

// Routes of conversation messages (docs/conversations.md).
var (
	RouteMessagesBatch     = Route{MethodPost, PrefixContext + "/messages/batch", []string{CapMessagesAppend}}
	RouteMessagesRecent    = Route{MethodPost, PrefixContext + "/messages/recent", []string{CapMessagesRead}}
	RouteMessages          = Route{MethodPost, PrefixContext + "/messages", []string{CapMessagesRead}}
	RouteMessagesSearch    = Route{MethodPost, PrefixContext + "/messages/search", []string{CapMessagesSearch}}
	RouteConversationsList = Route{MethodPost, PrefixContext + "/conversations/list", []string{CapMessagesRead}}
)

// Message roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Roles lists every message role.
var Roles = []string{RoleSystem, RoleUser, RoleAssistant, RoleTool}

// Page orders.
const (
	OrderAsc  = "asc"
	OrderDesc = "desc"
)

// Limits of conversation messages (docs/api.md).
const (
	MaxAppendMessages      = 500
	MaxMessageContentBytes = 1 << 20
	DefaultMessagesLimit   = 50
	MaxMessagesLimit       = 500
	DefaultSearchLimit     = 20
	MaxSearchLimit         = 100
	MaxSearchQueryBytes    = 4 << 10
	// MaxMessagesResponseBytes bounds the content and metadata bytes of one read
	// response (recent, page, search), so a read of 500 large messages cannot exhaust
	// memory: a response stops before the message that would cross it, though it
	// always holds at least one. A page cut short carries a nextCursor; recent keeps
	// the newest messages that fit; search keeps the best hits that fit.
	MaxMessagesResponseBytes = 32 << 20
)

// ConversationScope names the conversation a record belongs to. The tenant and project
// come from the caller's credential, never from a body.
type ConversationScope struct {
	ConversationID string `json:"conversationId"`
}

// ConversationRecord is one message of a conversation. On append, Sequence and
// CreatedAtMs may be 0 (the server assigns them); records read back have every field
// filled in.
type ConversationRecord struct {
	ID          string            `json:"id"`
	Scope       ConversationScope `json:"scope"`
	Role        string            `json:"role"`
	Content     string            `json:"content"`
	Sequence    int64             `json:"sequence"`
	CreatedAtMs int64             `json:"createdAtMs"`
	// Metadata is any JSON value; absent and null are the same.
	Metadata json.RawMessage `json:"metadata"`
}

// AppendMessagesRequest is the body of POST /messages/batch.
type AppendMessagesRequest struct {
	Messages []ConversationRecord `json:"messages"`
}

// AppendMessagesResponse reports an append: Appended counts the records written now,
// Skipped (and SkippedIDs) those that already existed with identical content.
type AppendMessagesResponse struct {
	Appended   int      `json:"appended"`
	Skipped    int      `json:"skipped"`
	SkippedIDs []string `json:"skippedIds"`
}

// RecentMessagesRequest is the body of POST /messages/recent. Limit defaults to 50;
// Roles, when set, keeps only messages of those roles.
type RecentMessagesRequest struct {
	Scope ConversationScope `json:"scope"`
	Limit *int              `json:"limit"`
	Roles []string          `json:"roles"`
}

// MessagesResponse is the body answering POST /messages/recent: the newest messages,
// oldest first.
type MessagesResponse struct {
	Messages []ConversationRecord `json:"messages"`
}

// PageMessagesRequest is the body of POST /messages. Cursor is the previous page's
// nextCursor (absent for the first page) and only valid with the same scope, order and
// roles; Order is asc (default) or desc.
type PageMessagesRequest struct {
	Scope  ConversationScope `json:"scope"`
	Limit  *int              `json:"limit"`
	Cursor *string           `json:"cursor"`
	Order  string            `json:"order"`
	Roles  []string          `json:"roles"`
}

// MessagePage is one page of a conversation; NextCursor is null exactly when no
// further message exists.
type MessagePage struct {
	Messages   []ConversationRecord `json:"messages"`
	NextCursor *string              `json:"nextCursor"`
}

// SearchMessagesRequest is the body of POST /messages/search. Without Scope it searches
// every conversation of the caller's tenant and project. Limit defaults to 20.
type SearchMessagesRequest struct {
	Query string             `json:"query"`
	Scope *ConversationScope `json:"scope"`
	Limit *int               `json:"limit"`
	Roles []string           `json:"roles"`
}

// SearchMessagesResponse holds the hits, best first.
type SearchMessagesResponse struct {
	Hits []SearchHit `json:"hits"`
}

// SearchHit is one message matching every word of a query; a higher Score is better.
type SearchHit struct {
	Message ConversationRecord `json:"message"`
	Score   float64            `json:"score"`
}

// ListConversationsRequest is the body of POST /conversations/list: Prefix keeps the
// conversations whose ID starts with it; Limit defaults to 50; Cursor is the previous
// page's nextCursor, valid with the same prefix only.
type ListConversationsRequest struct {
	Cursor *string `json:"cursor,omitempty"`
	Limit  *int    `json:"limit,omitempty"`
	Prefix *string `json:"prefix,omitempty"`
}

// ConversationSummary is a live conversation as its head row knows it: how many
// messages it holds, when it was first named and when it was last appended to, and
// its last sequence.
type ConversationSummary struct {
	ConversationID string `json:"conversationId"`
	MessageCount   int64  `json:"messageCount"`
	FirstAtMs      int64  `json:"firstAtMs"`
	LastAtMs       int64  `json:"lastAtMs"`
	LastSequence   int64  `json:"lastSequence"`
}

// ConversationList is one page of conversations, the most recently active first;
// NextCursor is null exactly when no further conversation exists.
type ConversationList struct {
	Conversations []ConversationSummary `json:"conversations"`
	NextCursor    *string               `json:"nextCursor"`
}
