package contract

import "encoding/json"

// Routes of context windows, derivations, lineage and model invocations (docs/windows.md).
var (
	RouteWindowsCreate          = Route{MethodPost, PrefixContext + "/windows", []string{CapContextWrite}}
	RouteWindowsGet             = Route{MethodPost, PrefixContext + "/windows/get", []string{CapContextRead}}
	RouteWindowsLineage         = Route{MethodPost, PrefixContext + "/windows/lineage", []string{CapContextRead}}
	RouteDerivationsCreate      = Route{MethodPost, PrefixContext + "/derivations", []string{CapContextWrite}}
	RouteModelInvocationsCreate = Route{MethodPost, PrefixContext + "/model-invocations", []string{CapContextWrite}}
	RouteModelInvocationsGet    = Route{MethodPost, PrefixContext + "/model-invocations/get", []string{CapContextRead}}
	RouteWindowsList            = Route{MethodPost, PrefixContext + "/windows/list", []string{CapContextRead}}
	RouteModelInvocationsList   = Route{MethodPost, PrefixContext + "/model-invocations/list", []string{CapContextRead}}
)

// Limits of context windows and model invocations (docs/api.md, docs/windows.md).
const (
	MaxWindowItems             = 2000
	MaxWindowItemContentBytes  = 4 << 20
	MaxWindowContentBytes      = 16 << 20
	MaxPurposeChars            = 191
	MaxEvidenceRefChars        = 2048
	MaxEvidenceExcerptBytes    = 64 << 10
	DefaultLineageDepth        = 32
	MaxLineageDepth            = 256
	MaxResponseContentBytes    = 1 << 20
	MaxFinishReasonChars       = 64
	MaxInvocationErrorMsgBytes = 64 << 10
)

// Window stages.
const (
	StageOriginal   = "original"
	StageAssembled  = "assembled"
	StageCompressed = "compressed"
)

// Window item kinds. An item's optional role is one of Roles.
const (
	ItemKindMessage           = "message"
	ItemKindToolResult        = "tool_result"
	ItemKindContextInsight    = "context_insight"
	ItemKindKnowledgeEvidence = "knowledge_evidence"
)

// Enumerations of the window contract.
var (
	Stages           = []string{StageOriginal, StageAssembled, StageCompressed}
	ItemKinds        = []string{ItemKindMessage, ItemKindToolResult, ItemKindContextInsight, ItemKindKnowledgeEvidence}
	DerivationKinds  = []string{DerivationAssemble, DerivationCompress, DerivationTrim, DerivationReorder}
	InvocationStates = []string{InvocationSucceeded, InvocationFailed, InvocationCanceled}
)

// Derivation kinds.
const (
	DerivationAssemble = "assemble"
	DerivationCompress = "compress"
	DerivationTrim     = "trim"
	DerivationReorder  = "reorder"
)

// Model invocation states.
const (
	InvocationSucceeded = "succeeded"
	InvocationFailed    = "failed"
	InvocationCanceled  = "canceled"
)

// ConversationRef names the conversation a window or invocation belongs to.
type ConversationRef struct {
	ConversationID string `json:"conversationId"`
}

// KnowledgeEvidence is the smallest replayable record of an external knowledge hit. The
// refs are opaque: stored and returned, never interpreted.
type KnowledgeEvidence struct {
	Provider      string   `json:"provider"`
	ResourceRef   string   `json:"resourceRef"`
	RevisionRef   *string  `json:"revisionRef"`
	SegmentRef    *string  `json:"segmentRef"`
	Excerpt       string   `json:"excerpt"`
	Score         *float64 `json:"score"`
	RetrievedAtMs int64    `json:"retrievedAtMs"`
}

// WindowItemInput is one item of a CreateWindowRequest. Ordinal and Content are
// pointers because they are required: an absent one is refused rather than read as 0
// or "".
type WindowItemInput struct {
	ID                string             `json:"id"`
	Ordinal           *int               `json:"ordinal"`
	Kind              string             `json:"kind"`
	Role              *string            `json:"role,omitempty"`
	Content           *string            `json:"content"`
	SourceRecordID    *string            `json:"sourceRecordId,omitempty"`
	KnowledgeEvidence *KnowledgeEvidence `json:"knowledgeEvidence,omitempty"`
	Metadata          json.RawMessage    `json:"metadata,omitempty"`
}

// CreateWindowRequest is the body of POST /windows: a window without the server-added
// fields. A nil ID (absent or null) asks the server to generate one; an empty string
// is an invalid ID. TokenCount is a pointer and Items is refused when null because
// both are required.
type CreateWindowRequest struct {
	ID           *string           `json:"id,omitempty"`
	Conversation *ConversationRef  `json:"conversation"`
	Stage        string            `json:"stage"`
	Purpose      string            `json:"purpose"`
	TokenCount   *int64            `json:"tokenCount"`
	Items        []WindowItemInput `json:"items"`
	Metadata     json.RawMessage   `json:"metadata,omitempty"`
}

// WindowItem is one stored item of a window. Every field is present on the wire, null
// where empty; this is also the shape contentSha256 is computed over.
type WindowItem struct {
	ID                string             `json:"id"`
	Ordinal           int                `json:"ordinal"`
	Kind              string             `json:"kind"`
	Role              *string            `json:"role"`
	Content           string             `json:"content"`
	SourceRecordID    *string            `json:"sourceRecordId"`
	KnowledgeEvidence *KnowledgeEvidence `json:"knowledgeEvidence"`
	Metadata          json.RawMessage    `json:"metadata"`
}

// Window is a stored context window. POST /windows answers without Items (nil, so the
// member is omitted); POST /windows/get returns them in ordinal order (an empty window
// has "items": []).
type Window struct {
	ID            string          `json:"id"`
	Conversation  ConversationRef `json:"conversation"`
	Stage         string          `json:"stage"`
	Purpose       string          `json:"purpose"`
	TokenCount    int64           `json:"tokenCount"`
	Items         []WindowItem    `json:"items,omitzero"`
	Metadata      json.RawMessage `json:"metadata"`
	CreatedAtMs   int64           `json:"createdAtMs"`
	ItemCount     int             `json:"itemCount"`
	ContentBytes  int64           `json:"contentBytes"`
	ContentSHA256 string          `json:"contentSha256"`
}

// GetWindowRequest is the body of POST /windows/get.
type GetWindowRequest struct {
	WindowID string `json:"windowId"`
}

// CreateDerivationRequest is the body of POST /derivations. A nil ID asks the server
// to generate one. Counts are optional (null = not reported).
type CreateDerivationRequest struct {
	ID               *string         `json:"id,omitempty"`
	SourceWindowID   string          `json:"sourceWindowId"`
	TargetWindowID   string          `json:"targetWindowId"`
	Kind             string          `json:"kind"`
	Strategy         *string         `json:"strategy,omitempty"`
	StrategyVersion  *string         `json:"strategyVersion,omitempty"`
	InputTokenCount  *int64          `json:"inputTokenCount,omitempty"`
	OutputTokenCount *int64          `json:"outputTokenCount,omitempty"`
	InputItemCount   *int64          `json:"inputItemCount,omitempty"`
	OutputItemCount  *int64          `json:"outputItemCount,omitempty"`
	Metadata         json.RawMessage `json:"metadata,omitempty"`
}

// Derivation is a stored edge: TargetWindowID was built from SourceWindowID.
type Derivation struct {
	ID               string          `json:"id"`
	SourceWindowID   string          `json:"sourceWindowId"`
	TargetWindowID   string          `json:"targetWindowId"`
	Kind             string          `json:"kind"`
	Strategy         *string         `json:"strategy"`
	StrategyVersion  *string         `json:"strategyVersion"`
	InputTokenCount  *int64          `json:"inputTokenCount"`
	OutputTokenCount *int64          `json:"outputTokenCount"`
	InputItemCount   *int64          `json:"inputItemCount"`
	OutputItemCount  *int64          `json:"outputItemCount"`
	Metadata         json.RawMessage `json:"metadata"`
	CreatedAtMs      int64           `json:"createdAtMs"`
}

// LineageRequest is the body of POST /windows/lineage. MaxDepth defaults to
// DefaultLineageDepth.
type LineageRequest struct {
	WindowID string `json:"windowId"`
	MaxDepth *int   `json:"maxDepth,omitempty"`
}

// LineageWindow is a window in a lineage answer, without items.
type LineageWindow struct {
	ID          string `json:"id"`
	Stage       string `json:"stage"`
	Purpose     string `json:"purpose"`
	TokenCount  int64  `json:"tokenCount"`
	ItemCount   int    `json:"itemCount"`
	CreatedAtMs int64  `json:"createdAtMs"`
}

// Lineage is the answer of POST /windows/lineage: the window, its ancestors within the
// depth, and the derivations between them.
type Lineage struct {
	Windows     []LineageWindow `json:"windows"`
	Derivations []Derivation    `json:"derivations"`
}

// InvocationError is why a failed model invocation failed.
type InvocationError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// CreateModelInvocationRequest is the body of POST /model-invocations. A nil ID asks
// the server to generate one; a nil AgentID stands for the caller's subject; a zero
// StartedAtMs for the server's clock at the first save.
type CreateModelInvocationRequest struct {
	ID              *string          `json:"id,omitempty"`
	Conversation    *ConversationRef `json:"conversation"`
	RequestWindowID string           `json:"requestWindowId"`
	AgentID         *string          `json:"agentId,omitempty"`
	ToolName        *string          `json:"toolName,omitempty"`
	Provider        string           `json:"provider"`
	Model           string           `json:"model"`
	State           string           `json:"state"`
	InputTokens     int64            `json:"inputTokens"`
	OutputTokens    int64            `json:"outputTokens"`
	CachedTokens    int64            `json:"cachedTokens"`
	StartedAtMs     int64            `json:"startedAtMs"`
	CompletedAtMs   int64            `json:"completedAtMs"`
	LatencyMs       int64            `json:"latencyMs"`
	FinishReason    *string          `json:"finishReason,omitempty"`
	ResponseContent *string          `json:"responseContent,omitempty"`
	Error           *InvocationError `json:"error,omitempty"`
	Metadata        json.RawMessage  `json:"metadata,omitempty"`
}

// ModelInvocation is a stored model invocation audit record.
type ModelInvocation struct {
	ID              string           `json:"id"`
	Conversation    ConversationRef  `json:"conversation"`
	RequestWindowID string           `json:"requestWindowId"`
	AgentID         string           `json:"agentId"`
	ToolName        *string          `json:"toolName"`
	Provider        string           `json:"provider"`
	Model           string           `json:"model"`
	State           string           `json:"state"`
	InputTokens     int64            `json:"inputTokens"`
	OutputTokens    int64            `json:"outputTokens"`
	CachedTokens    int64            `json:"cachedTokens"`
	StartedAtMs     int64            `json:"startedAtMs"`
	CompletedAtMs   int64            `json:"completedAtMs"`
	LatencyMs       int64            `json:"latencyMs"`
	FinishReason    *string          `json:"finishReason"`
	ResponseContent *string          `json:"responseContent"`
	Error           *InvocationError `json:"error"`
	Metadata        json.RawMessage  `json:"metadata"`
	CreatedAtMs     int64            `json:"createdAtMs"`
}

// GetModelInvocationRequest is the body of POST /model-invocations/get.
type GetModelInvocationRequest struct {
	InvocationID string `json:"invocationId"`
}

// ListByConversationRequest is the body of POST /windows/list and
// POST /model-invocations/list: ConversationID null lists the whole scope; Limit
// defaults to 50; Cursor is the previous page's nextCursor, valid for the same list
// and conversation only.
type ListByConversationRequest struct {
	ConversationID *string `json:"conversationId,omitempty"`
	Cursor         *string `json:"cursor,omitempty"`
	Limit          *int    `json:"limit,omitempty"`
}

// WindowList is one page of window summaries (windows without their items), newest
// first; NextCursor is null exactly when no further window exists.
type WindowList struct {
	Windows    []Window `json:"windows"`
	NextCursor *string  `json:"nextCursor"`
}

// InvocationList is one page of model invocations, the most recently started first;
// NextCursor is null exactly when no further invocation exists.
type InvocationList struct {
	Invocations []ModelInvocation `json:"invocations"`
	NextCursor  *string           `json:"nextCursor"`
}
