package contract

import "encoding/json"

// Routes of conversation deletion, retention, operations and maintenance status
// (docs/operations.md).
var (
	RouteConversationsDelete    = Route{MethodPost, PrefixContext + "/conversations/delete", []string{CapMessagesDelete}}
	RouteConversationsRetention = Route{MethodPost, PrefixContext + "/conversations/retention", []string{CapMessagesDelete}}
	// RouteOperations admits messages:delete or context:admin; an operation of a kind
	// other than conversation_delete or retention then also needs context:admin.
	RouteOperations        = Route{MethodPost, PrefixContext + "/operations", []string{CapMessagesDelete, CapContextAdmin}}
	RouteMaintenanceStatus = Route{MethodGet, PrefixContext + "/maintenance/status", []string{CapMessagesRead}}
)

// Operation kinds.
const (
	OperationConversationDelete = "conversation_delete"
	OperationRetention          = "retention"
	OperationExport             = "export"
	OperationImport             = "import"
	OperationVectorRebuild      = "vector_rebuild"
	OperationAdvanced           = "advanced"
)

// OperationKinds lists every operation kind.
var OperationKinds = []string{
	OperationConversationDelete, OperationRetention, OperationExport,
	OperationImport, OperationVectorRebuild, OperationAdvanced,
}

// Operation states: pending → running → succeeded | failed.
const (
	OperationPending   = "pending"
	OperationRunning   = "running"
	OperationSucceeded = "succeeded"
	OperationFailed    = "failed"
)

// Operation is a background job's record. It holds IDs and counts, never content.
// StartedAtMs and CompletedAtMs are null until the operation starts and finishes;
// Result is null until it succeeds and Error is set only when it failed.
type Operation struct {
	ID            string            `json:"id"`
	Kind          string            `json:"kind"`
	State         string            `json:"state"`
	CreatedAtMs   int64             `json:"createdAtMs"`
	UpdatedAtMs   int64             `json:"updatedAtMs"`
	StartedAtMs   *int64            `json:"startedAtMs"`
	CompletedAtMs *int64            `json:"completedAtMs"`
	Progress      OperationProgress `json:"progress"`
	// Request echoes the normalized request that created the operation.
	Request json.RawMessage `json:"request"`
	Result  json.RawMessage `json:"result"`
	Error   *OperationError `json:"error"`
}

// OperationProgress counts the work done; Total is null while unknown.
type OperationProgress struct {
	Done  int64  `json:"done"`
	Total *int64 `json:"total"`
}

// OperationError is why a failed operation failed: a code of the contract's table and
// a message safe to show.
type OperationError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// OperationResponse wraps an operation: the answer of conversations/delete,
// conversations/retention and operations.
type OperationResponse struct {
	Operation Operation `json:"operation"`
}

// DeleteConversationRequest is the body of POST /conversations/delete, and the request
// echo of its operation.
type DeleteConversationRequest struct {
	ConversationID string `json:"conversationId"`
}

// DeleteConversationResult is the result of a succeeded conversation_delete operation:
// how many stored records of the conversation were removed.
type DeleteConversationResult struct {
	DeletedRecords int64 `json:"deletedRecords"`
}

// Bounds of a retention policy (docs/operations.md): a shorter age or a keep-last of
// 0 would wipe every conversation in scope; deleting a conversation does that.
const (
	MinRetentionMaxAgeMs = 60_000
	MaxRetentionKeepLast = 1_000_000
	MinRetentionKeepLast = 1
)

// RetentionPolicy says which messages retention deletes. At least one field is set.
// With both, a message is deleted only when it is older than MaxAgeMs and not among the
// newest KeepLastMessages of its conversation.
type RetentionPolicy struct {
	MaxAgeMs         *int64 `json:"maxAgeMs"`
	KeepLastMessages *int64 `json:"keepLastMessages"`
}

// RetentionRequest is the body of POST /conversations/retention, and the request echo
// of its operation. Without ConversationID it applies to every conversation of the
// caller's scope; DryRun counts without deleting.
type RetentionRequest struct {
	Policy         *RetentionPolicy `json:"policy"`
	ConversationID *string          `json:"conversationId"`
	DryRun         bool             `json:"dryRun"`
}

// RetentionResult is the result of a succeeded retention operation (a dry run counts
// what it would have deleted).
type RetentionResult struct {
	DeletedMessages       int64 `json:"deletedMessages"`
	AffectedConversations int64 `json:"affectedConversations"`
}

// GetOperationRequest is the body of POST /operations.
type GetOperationRequest struct {
	OperationID string `json:"operationId"`
}

// MaintenanceStatus is the answer of GET /maintenance/status. Every count covers the
// caller's tenant and project only.
type MaintenanceStatus struct {
	Operations       OperationCounts        `json:"operations"`
	Retention        RetentionStatus        `json:"retention"`
	VectorProjection VectorProjectionStatus `json:"vectorProjection"`
	Database         DatabaseStatus         `json:"database"`
}

// OperationCounts counts the scope's operations by state; FailedLast24h counts those
// that failed within the last 24 hours.
type OperationCounts struct {
	Pending       int64 `json:"pending"`
	Running       int64 `json:"running"`
	FailedLast24h int64 `json:"failedLast24h"`
}

// RetentionStatus reports when retention last ran in the scope and the configured
// default policy's maximum age (null when none is configured).
type RetentionStatus struct {
	LastRunAtMs     *int64 `json:"lastRunAtMs"`
	DefaultMaxAgeMs *int64 `json:"defaultMaxAgeMs"`
}

// VectorProjectionStatus reports the entry vector projection.
type VectorProjectionStatus struct {
	Generation       int64  `json:"generation"`
	Model            string `json:"model"`
	Dimensions       int    `json:"dimensions"`
	PendingEntries   int64  `json:"pendingEntries"`
	IndexedThroughMs int64  `json:"indexedThroughMs"`
}

// DatabaseStatus reports whether the database answers with a current schema, and the
// applied schema version.
type DatabaseStatus struct {
	OK            bool  `json:"ok"`
	SchemaVersion int64 `json:"schemaVersion"`
}
