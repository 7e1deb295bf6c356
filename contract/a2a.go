package contract

import "encoding/json"

// Routes of agent-to-agent coordination (docs/a2a.md): agents, messages, tasks, events
// and the snapshot export.
var (
	RouteA2AAgentsRegister = Route{MethodPost, PrefixA2A + "/agents/register", []string{CapA2ASend}}
	RouteA2AAgentsList     = Route{MethodPost, PrefixA2A + "/agents/list", []string{CapA2ARead}}
	RouteA2AMessagesPost   = Route{MethodPost, PrefixA2A + "/messages/post", []string{CapA2ASend}}
	RouteA2AMessagesRead   = Route{MethodPost, PrefixA2A + "/messages/read", []string{CapA2ARead}}
	RouteA2ATasksCreate    = Route{MethodPost, PrefixA2A + "/tasks", []string{CapA2ATasks}}
	RouteA2ATasksGet       = Route{MethodPost, PrefixA2A + "/tasks/get", []string{CapA2ATasks}}
	RouteA2ATasksList      = Route{MethodPost, PrefixA2A + "/tasks/list", []string{CapA2ATasks}}
	RouteA2ATasksUpdate    = Route{MethodPost, PrefixA2A + "/tasks/update", []string{CapA2ATasks}}
	RouteA2ATasksCancel    = Route{MethodPost, PrefixA2A + "/tasks/cancel", []string{CapA2ATasks}}
	RouteA2ATasksMessage   = Route{MethodPost, PrefixA2A + "/tasks/message", []string{CapA2ATasks}}
	RouteA2ATasksInfo      = Route{MethodPost, PrefixA2A + "/tasks/info", []string{CapA2ATasks}}
	RouteA2AEventsPoll     = Route{MethodPost, PrefixA2A + "/events/poll", []string{CapA2ARead}}
	RouteA2ASnapshot       = Route{MethodPost, PrefixA2A + "/snapshot", []string{CapA2ARead}}
)

// Limits of agent-to-agent coordination, with the bounds the service adds where the contract is silent (docs/a2a.md).
const (
	MaxAgentMessageContentBytes = 64 << 10
	MaxTaskDescriptionBytes     = 16 << 10
	// MaxTaskReasonBytes bounds the text reason of an update or a cancel.
	MaxTaskReasonBytes = 16 << 10
	MaxTaskParts       = 100
	MaxTaskPartBytes   = 1 << 20
	// MaxTaskArtifacts bounds the artifacts of one update and of one task.
	MaxTaskArtifacts = 100
	// MaxTaskMessages and MaxTaskTransitions bound a task's messages and history; a
	// change beyond them is 409 CONFLICT with reason task_limit.
	MaxTaskMessages    = 1000
	MaxTaskTransitions = 1000
	// MaxTaskPartsBytes bounds the parts a task holds in all its messages and
	// artifacts together (409 CONFLICT, reason task_limit), so a task read stays
	// bounded.
	MaxTaskPartsBytes = 16 << 20
	// MaxAgentLabels bounds an agent's capabilities and supported versions.
	MaxAgentLabels   = 64
	DefaultA2ALimit  = 50
	MaxA2ALimit      = 500
	MaxPollLimit     = 1000
	MaxPollWaitMs    = 30_000
	DefaultTTLHours  = 12
	MaxTTLHours      = 720
	MaxPollActors    = 100
	MaxSnapshotItems = 200
	// AgentActiveWindowMs is how recently an agent must have been seen to be active.
	AgentActiveWindowMs = 15 * 60 * 1000
	// DefaultA2AMaxMessages is the default bound of live messages per scope.
	DefaultA2AMaxMessages = 10_000
	// DefaultA2AMaxEnvelopes and DefaultA2AMaxEnvelopeBytes bound the stored
	// handoff_bundle and context_package payloads per scope; the oldest go first.
	DefaultA2AMaxEnvelopes     = 10_000
	DefaultA2AMaxEnvelopeBytes = 1 << 30
	// SnapshotSchemaVersion is the schemaVersion of A2A snapshot v1.
	SnapshotSchemaVersion = 1
)

// Message categories.
const (
	CategoryTaskDelegation = "task_delegation"
	CategoryTaskUpdate     = "task_update"
	CategoryTaskResult     = "task_result"
	CategoryContextShare   = "context_share"
	CategoryQuestion       = "question"
	CategoryAnswer         = "answer"
	CategoryNotification   = "notification"
	CategoryHandoff        = "handoff"
)

// Message priorities.
const (
	PriorityLow      = "low"
	PriorityNormal   = "normal"
	PriorityHigh     = "high"
	PriorityCritical = "critical"
)

// Message privacy levels. public and team messages are visible to every agent of the
// scope they are addressed to (or all, for a broadcast); private ones only to their
// sender and recipient.
const (
	PrivacyPublic  = "public"
	PrivacyTeam    = "team"
	PrivacyPrivate = "private"
)

// Message ack statuses.
const (
	AckAccepted  = "accepted"
	AckDuplicate = "duplicate"
)

// Task states.
const (
	TaskCreated       = "created"
	TaskWorking       = "working"
	TaskInputRequired = "input-required"
	TaskCompleted     = "completed"
	TaskFailed        = "failed"
	TaskCanceled      = "canceled"
)

// Task message roles: user when the task's creator sent it, agent when its recipient did.
const (
	TaskRoleUser  = "user"
	TaskRoleAgent = "agent"
)

// Task part types.
const (
	PartText = "text"
	PartData = "data"
	PartFile = "file"
)

// Task list roles: tasks the caller created, received, or either.
const (
	TaskListFrom = "from"
	TaskListTo   = "to"
	TaskListAny  = "any"
)

// Agent statuses.
const (
	AgentActive = "active"
	AgentIdle   = "idle"
)

// Event kinds.
const (
	EventMessagePosted    = "message_posted"
	EventTaskCreated      = "task_created"
	EventTaskUpdated      = "task_updated"
	EventTaskMessage      = "task_message"
	EventAgentRegistered  = "agent_registered"
	EventEnvelopeReceived = "envelope_received"
	EventEntryWritten     = "entry_written"
	EventWindowCreated    = "window_created"
)

// Consistency levels, weakest first.
const (
	ConsistencyLocal    = "local"
	ConsistencyEventual = "eventual"
	ConsistencyStrong   = "strong"
)

// Snapshot privacy modes.
const (
	SnapshotRedacted = "redacted"
	SnapshotFull     = "full"
)

// Enumerations of the A2A contract.
var (
	MessageCategories = []string{CategoryTaskDelegation, CategoryTaskUpdate, CategoryTaskResult, CategoryContextShare,
		CategoryQuestion, CategoryAnswer, CategoryNotification, CategoryHandoff}
	MessagePriorities = []string{PriorityLow, PriorityNormal, PriorityHigh, PriorityCritical}
	PrivacyLevels     = []string{PrivacyPublic, PrivacyTeam, PrivacyPrivate}
	TaskStates        = []string{TaskCreated, TaskWorking, TaskInputRequired, TaskCompleted, TaskFailed, TaskCanceled}
	PartTypes         = []string{PartText, PartData, PartFile}
	TaskListRoles     = []string{TaskListFrom, TaskListTo, TaskListAny}
	EventKinds        = []string{EventMessagePosted, EventTaskCreated, EventTaskUpdated, EventTaskMessage,
		EventAgentRegistered, EventEnvelopeReceived, EventEntryWritten, EventWindowCreated}
	ConsistencyLevels = []string{ConsistencyLocal, ConsistencyEventual, ConsistencyStrong}
	SnapshotModes     = []string{SnapshotRedacted, SnapshotFull}
	// SupportedA2AVersions are the envelope versions this service speaks.
	SupportedA2AVersions = []string{"1.0"}
)

// RegisterAgentRequest is the body of POST /agents/register. A nil AgentID stands for
// the caller's subject; nil lists are empty, and nil SupportedVersions is ["1.0"].
type RegisterAgentRequest struct {
	AgentID           *string  `json:"agentId,omitempty"`
	AgentType         string   `json:"agentType"`
	Role              *string  `json:"role,omitempty"`
	Capabilities      []string `json:"capabilities,omitempty"`
	SupportedVersions []string `json:"supportedVersions,omitempty"`
}

// Agent is a registered agent. Status is computed when it is read: active when the
// agent was seen within AgentActiveWindowMs.
type Agent struct {
	AgentID           string   `json:"agentId"`
	AgentType         string   `json:"agentType"`
	Role              *string  `json:"role"`
	Capabilities      []string `json:"capabilities"`
	SupportedVersions []string `json:"supportedVersions"`
	RegisteredAtMs    int64    `json:"registeredAtMs"`
	LastSeenAtMs      int64    `json:"lastSeenAtMs"`
	Status            string   `json:"status"`
}

// ListAgentsRequest is the body of POST /agents/list.
type ListAgentsRequest struct {
	Cursor *string `json:"cursor,omitempty"`
	Limit  *int    `json:"limit,omitempty"`
}

// AgentList is the answer of POST /agents/list, sorted by agent ID.
type AgentList struct {
	Agents     []Agent `json:"agents"`
	NextCursor *string `json:"nextCursor"`
}

// PostMessageRequest is the body of POST /messages/post. Nil members take their
// defaults: a generated messageId, correlationId = messageId, the caller as sender, a
// broadcast, category notification, priority normal, privacy team, ttlHours 12.
type PostMessageRequest struct {
	MessageID     *string         `json:"messageId,omitempty"`
	CorrelationID *string         `json:"correlationId,omitempty"`
	FromAgent     *string         `json:"fromAgent,omitempty"`
	ToAgent       *string         `json:"toAgent,omitempty"`
	TaskID        *string         `json:"taskId,omitempty"`
	Category      *string         `json:"category,omitempty"`
	Priority      *string         `json:"priority,omitempty"`
	Privacy       *string         `json:"privacy,omitempty"`
	Content       *string         `json:"content"`
	TTLHours      *int64          `json:"ttlHours,omitempty"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
}

// MessageAck is the receipt-only answer of POST /messages/post: it never echoes the
// message. Ts is the time the message was first accepted (ms since the epoch).
type MessageAck struct {
	MessageID string `json:"messageId"`
	Status    string `json:"status"`
	Ts        int64  `json:"ts"`
}

// AgentMessage is a stored message as POST /messages/read and the snapshot return it.
type AgentMessage struct {
	ID            string          `json:"id"`
	CorrelationID string          `json:"correlationId"`
	FromAgent     string          `json:"fromAgent"`
	ToAgent       *string         `json:"toAgent"`
	TaskID        *string         `json:"taskId"`
	Category      string          `json:"category"`
	Priority      string          `json:"priority"`
	Privacy       string          `json:"privacy"`
	Content       string          `json:"content"`
	Metadata      json.RawMessage `json:"metadata"`
	CreatedAtMs   int64           `json:"createdAtMs"`
	ExpiresAtMs   int64           `json:"expiresAtMs"`
}

// ReadMessagesRequest is the body of POST /messages/read. MarkRead defaults to true.
type ReadMessagesRequest struct {
	Limit       *int    `json:"limit,omitempty"`
	IncludeRead bool    `json:"includeRead,omitempty"`
	MarkRead    *bool   `json:"markRead,omitempty"`
	Category    *string `json:"category,omitempty"`
	TaskID      *string `json:"taskId,omitempty"`
}

// AgentMessages is the answer of POST /messages/read, ordered by (createdAtMs, id).
type AgentMessages struct {
	Messages []AgentMessage `json:"messages"`
}

// Part is one part of a task message or artifact: a text part has Text; a data part
// Data (any JSON value) and an optional MimeType (application/json when absent); a
// file part an optional Name and MimeType and exactly one of Bytes (standard base64)
// and URI. Members of another type are refused.
type Part struct {
	Type     string          `json:"type"`
	Text     *string         `json:"text,omitempty"`
	MimeType *string         `json:"mimeType,omitempty"`
	Data     json.RawMessage `json:"data,omitempty"`
	Name     *string         `json:"name,omitempty"`
	Bytes    *string         `json:"bytes,omitempty"`
	URI      *string         `json:"uri,omitempty"`
}

// TaskMessage is one message of a task.
type TaskMessage struct {
	Role        string `json:"role"`
	FromAgent   string `json:"fromAgent"`
	Parts       []Part `json:"parts"`
	CreatedAtMs int64  `json:"createdAtMs"`
}

// TaskArtifact is an output of a task. An update naming an existing artifactId
// replaces that artifact in place.
type TaskArtifact struct {
	ArtifactID string  `json:"artifactId"`
	Name       *string `json:"name"`
	Parts      []Part  `json:"parts"`
}

// TaskArtifactInput is an artifact of an update. A nil ArtifactID asks the server to
// generate one.
type TaskArtifactInput struct {
	ArtifactID *string `json:"artifactId,omitempty"`
	Name       *string `json:"name,omitempty"`
	Parts      []Part  `json:"parts"`
}

// TaskTransition is one entry of a task's history: the creation (From nil) or a state
// change, who made it and why.
type TaskTransition struct {
	From   *string `json:"from"`
	To     string  `json:"to"`
	AtMs   int64   `json:"atMs"`
	Reason *string `json:"reason"`
	Actor  string  `json:"actor"`
}

// Task is a task. Reads of one task (create, get, update, cancel, message) carry
// Messages, Artifacts and History; lists and the snapshot omit them (nil).
type Task struct {
	ID          string           `json:"id"`
	ContextID   string           `json:"contextId"`
	FromAgent   string           `json:"fromAgent"`
	ToAgent     string           `json:"toAgent"`
	State       string           `json:"state"`
	Description string           `json:"description"`
	Messages    []TaskMessage    `json:"messages,omitzero"`
	Artifacts   []TaskArtifact   `json:"artifacts,omitzero"`
	History     []TaskTransition `json:"history,omitzero"`
	Metadata    json.RawMessage  `json:"metadata"`
	Version     int64            `json:"version"`
	CreatedAtMs int64            `json:"createdAtMs"`
	UpdatedAtMs int64            `json:"updatedAtMs"`
}

// CreateTaskRequest is the body of POST /tasks. Parts, when given, become the task's
// first message.
type CreateTaskRequest struct {
	ID          *string         `json:"id,omitempty"`
	ContextID   *string         `json:"contextId,omitempty"`
	FromAgent   *string         `json:"fromAgent,omitempty"`
	ToAgent     string          `json:"toAgent"`
	Description *string         `json:"description"`
	Parts       []Part          `json:"parts,omitempty"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
}

// TaskRequest names a task: the body of POST /tasks/get.
type TaskRequest struct {
	TaskID string `json:"taskId"`
}

// ListTasksRequest is the body of POST /tasks/list. Role defaults to any.
type ListTasksRequest struct {
	Role   *string  `json:"role,omitempty"`
	States []string `json:"states,omitempty"`
	Cursor *string  `json:"cursor,omitempty"`
	Limit  *int     `json:"limit,omitempty"`
}

// TaskList is the answer of POST /tasks/list, in creation (commit) order.
// PendingCount counts the non-terminal tasks addressed to the caller.
type TaskList struct {
	Tasks        []Task  `json:"tasks"`
	NextCursor   *string `json:"nextCursor"`
	PendingCount int64   `json:"pendingCount"`
}

// UpdateTaskRequest is the body of POST /tasks/update. Message is a text reason
// recorded in the history.
type UpdateTaskRequest struct {
	TaskID          string              `json:"taskId"`
	State           string              `json:"state"`
	Message         *string             `json:"message,omitempty"`
	Artifacts       []TaskArtifactInput `json:"artifacts,omitempty"`
	ExpectedVersion *int64              `json:"expectedVersion,omitempty"`
}

// CancelTaskRequest is the body of POST /tasks/cancel.
type CancelTaskRequest struct {
	TaskID string  `json:"taskId"`
	Reason *string `json:"reason,omitempty"`
}

// TaskMessageRequest is the body of POST /tasks/message.
type TaskMessageRequest struct {
	TaskID string `json:"taskId"`
	Parts  []Part `json:"parts"`
}

// TaskInfoRequest is the body of POST /tasks/info (an empty object).
type TaskInfoRequest struct{}

// TaskInfo counts the tasks the caller created or receives; active ones are not
// terminal.
type TaskInfo struct {
	Total     int64 `json:"total"`
	Active    int64 `json:"active"`
	Completed int64 `json:"completed"`
	Failed    int64 `json:"failed"`
	Canceled  int64 `json:"canceled"`
}

// Event is one entry of a scope's event log. Sequence is its position in the log:
// commit order within the scope.
type Event struct {
	ID               string          `json:"id"`
	Sequence         int64           `json:"sequence"`
	Kind             string          `json:"kind"`
	Actor            string          `json:"actor"`
	CorrelationID    string          `json:"correlationId"`
	TargetAgents     []string        `json:"targetAgents"`
	ConsistencyLevel string          `json:"consistencyLevel"`
	Payload          json.RawMessage `json:"payload"`
	CreatedAtMs      int64           `json:"createdAtMs"`
}

// EventFilter selects the events a poll returns; nil members select everything.
type EventFilter struct {
	Kinds          []string `json:"kinds,omitempty"`
	Actors         []string `json:"actors,omitempty"`
	MinConsistency *string  `json:"minConsistency,omitempty"`
	TaskID         *string  `json:"taskId,omitempty"`
}

// PollEventsRequest is the body of POST /events/poll.
type PollEventsRequest struct {
	Cursor *string      `json:"cursor,omitempty"`
	Limit  *int         `json:"limit,omitempty"`
	WaitMs *int64       `json:"waitMs,omitempty"`
	Filter *EventFilter `json:"filter,omitempty"`
}

// EventPage is the answer of POST /events/poll. NextCursor is always set: it is the
// position after every event examined, matching or not.
type EventPage struct {
	Events     []Event `json:"events"`
	NextCursor string  `json:"nextCursor"`
}

// SnapshotRequest is the body of POST /snapshot. Privacy defaults to redacted.
type SnapshotRequest struct {
	Privacy *string `json:"privacy,omitempty"`
	Write   bool    `json:"write,omitempty"`
}

// Snapshot is A2A snapshot v1: the scope's coordination state as the caller may see
// it, each list capped at MaxSnapshotItems (the newest), in a deterministic order.
type Snapshot struct {
	SchemaVersion int            `json:"schemaVersion"`
	CreatedAtMs   int64          `json:"createdAtMs"`
	AgentID       string         `json:"agentId"`
	Privacy       string         `json:"privacy"`
	Agents        []Agent        `json:"agents"`
	Messages      []AgentMessage `json:"messages"`
	Tasks         []Task         `json:"tasks"`
	// ArtifactID names the export artifact a write: true request stored the snapshot
	// in; absent otherwise.
	ArtifactID *string `json:"artifactId,omitempty"`
}
