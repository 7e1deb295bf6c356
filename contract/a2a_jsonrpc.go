package contract

import "encoding/json"

// Paths and routes of Google A2A protocol compatibility (docs/a2a-protocol.md): the agent card,
// public, and the JSON-RPC endpoint at the root.
const (
	PathWellKnownAgentCard = "/.well-known/agent-card.json"
	PathWellKnownAgentJSON = "/.well-known/agent.json"
	PathA2AJSONRPC         = "/a2a"
)

// Routes of the agent card and of POST /a2a.
var (
	RouteA2AAgentCard       = Route{MethodGet, PrefixA2A + "/agent-card", nil}
	RouteWellKnownAgentCard = Route{MethodGet, PathWellKnownAgentCard, nil}
	RouteWellKnownAgentJSON = Route{MethodGet, PathWellKnownAgentJSON, nil}
	RouteA2AJSONRPC         = Route{MethodPost, PathA2AJSONRPC, []string{CapA2ATasks}}
)

// HeaderA2AVersion is the protocol version header of POST /a2a.
const HeaderA2AVersion = "A2A-Version"

// JSON-RPC methods of A2A 0.3 (slash-separated) and 1.0 (PascalCase): disjoint sets,
// so the method chooses the generation of the answer.
const (
	MethodV03MessageSend     = "message/send"
	MethodV03TasksSend       = "tasks/send" // the seed's name for message/send
	MethodV03TasksGet        = "tasks/get"
	MethodV03TasksCancel     = "tasks/cancel"
	MethodV03MessageStream   = "message/stream"
	MethodV03Resubscribe     = "tasks/resubscribe"
	MethodV03PushSet         = "tasks/pushNotificationConfig/set"
	MethodV03PushGet         = "tasks/pushNotificationConfig/get"
	MethodV03PushList        = "tasks/pushNotificationConfig/list"
	MethodV03PushDelete      = "tasks/pushNotificationConfig/delete"
	MethodV03ExtendedCard    = "agent/getAuthenticatedExtendedCard"
	MethodV03TasksList       = "tasks/list"
	MethodV1SendMessage      = "SendMessage"
	MethodV1GetTask          = "GetTask"
	MethodV1CancelTask       = "CancelTask"
	MethodV1SendStreaming    = "SendStreamingMessage"
	MethodV1SubscribeToTask  = "SubscribeToTask"
	MethodV1CreatePushConfig = "CreateTaskPushNotificationConfig"
	MethodV1GetPushConfig    = "GetTaskPushNotificationConfig"
	MethodV1DeletePushConfig = "DeleteTaskPushNotificationConfig"
	MethodV1ListPushConfigs  = "ListTaskPushNotificationConfigs"
	MethodV1ExtendedCard     = "GetExtendedAgentCard"
	MethodV1ListTasks        = "ListTasks"
)

// JSON-RPC error codes of docs/a2a-protocol.md, with the ErrorInfo reasons of 1.0 answers.
const (
	RPCParseError            = -32700
	RPCInvalidRequest        = -32600
	RPCMethodNotFound        = -32601
	RPCInvalidParams         = -32602
	RPCInternalError         = -32603
	RPCTaskNotFound          = -32001
	RPCTaskNotCancelable     = -32002
	RPCPushNotSupported      = -32003
	RPCUnsupportedOperation  = -32004
	RPCVersionNotSupported   = -32009
	RPCErrorInfoType         = "type.googleapis.com/google.rpc.ErrorInfo"
	RPCErrorInfoDomain       = "a2a-protocol.org"
	AgentCardProtocolVersion = "0.3.0"
)

// RPCReasons are the ErrorInfo reasons of the JSON-RPC codes.
var RPCReasons = map[int]string{
	RPCParseError: "PARSE_ERROR", RPCInvalidRequest: "INVALID_REQUEST", RPCMethodNotFound: "METHOD_NOT_FOUND",
	RPCInvalidParams: "INVALID_PARAMS", RPCInternalError: "INTERNAL_ERROR", RPCTaskNotFound: "TASK_NOT_FOUND",
	RPCTaskNotCancelable: "TASK_NOT_CANCELABLE", RPCPushNotSupported: "PUSH_NOTIFICATION_NOT_SUPPORTED",
	RPCUnsupportedOperation: "UNSUPPORTED_OPERATION", RPCVersionNotSupported: "VERSION_NOT_SUPPORTED",
}

// AgentCard is the one hybrid card of both protocol generations: 0.3 clients read
// url, preferredTransport and security; 1.0 clients supportedInterfaces and
// securityRequirements; each ignores the other's members.
type AgentCard struct {
	ProtocolVersion      string                    `json:"protocolVersion"`
	Name                 string                    `json:"name"`
	Description          string                    `json:"description"`
	Version              string                    `json:"version"`
	Provider             AgentProvider             `json:"provider"`
	URL                  string                    `json:"url"`
	PreferredTransport   string                    `json:"preferredTransport"`
	SupportedInterfaces  []AgentInterface          `json:"supportedInterfaces"`
	Capabilities         AgentCapabilities         `json:"capabilities"`
	SecuritySchemes      map[string]SecurityScheme `json:"securitySchemes"`
	Security             []map[string][]string     `json:"security"`
	SecurityRequirements []SecurityRequirement     `json:"securityRequirements"`
	DefaultInputModes    []string                  `json:"defaultInputModes"`
	DefaultOutputModes   []string                  `json:"defaultOutputModes"`
	Skills               []AgentSkill              `json:"skills"`
}

// AgentProvider names who runs the agent.
type AgentProvider struct {
	Organization string `json:"organization"`
	URL          string `json:"url"`
}

// AgentInterface is one endpoint of a 1.0 card.
type AgentInterface struct {
	URL             string `json:"url"`
	ProtocolBinding string `json:"protocolBinding"`
	ProtocolVersion string `json:"protocolVersion"`
}

// AgentCapabilities are the optional features; all but the transition history off.
type AgentCapabilities struct {
	Streaming              bool `json:"streaming"`
	PushNotifications      bool `json:"pushNotifications"`
	StateTransitionHistory bool `json:"stateTransitionHistory"`
	ExtendedAgentCard      bool `json:"extendedAgentCard"`
}

// SecurityScheme is the bearer scheme, flat for 0.3 and nested for 1.0.
type SecurityScheme struct {
	Type                   string         `json:"type"`
	Scheme                 string         `json:"scheme"`
	BearerFormat           string         `json:"bearerFormat"`
	HTTPAuthSecurityScheme HTTPAuthScheme `json:"httpAuthSecurityScheme"`
}

// HTTPAuthScheme is the 1.0 form of an HTTP authentication scheme.
type HTTPAuthScheme struct {
	Scheme       string `json:"scheme"`
	BearerFormat string `json:"bearerFormat"`
}

// SecurityRequirement is a 1.0 security requirement: scheme names to scopes.
type SecurityRequirement struct {
	Schemes map[string][]string `json:"schemes"`
}

// AgentSkill is one skill of the card.
type AgentSkill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags"`
}

// RPCRequest is a JSON-RPC request to POST /a2a as a client sends it. The server reads
// requests leniently and checks each member on its own, so a malformed one still gets
// a JSON-RPC answer. ID is a JSON string or number (absent: null in the answer).
type RPCRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

// RPCResponse is a JSON-RPC answer: Result (an RPCTask, or RPCSendResult for 1.0
// sends) or Error. ID echoes the request's verbatim.
type RPCResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

// RPCError is a JSON-RPC error. Data is absent in 0.3 answers and a one-element
// ErrorInfo array in 1.0 ones.
type RPCError struct {
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Data    []RPCErrorInfo `json:"data,omitempty"`
}

// RPCErrorInfo is a google.rpc.ErrorInfo.
type RPCErrorInfo struct {
	Type   string `json:"@type"`
	Reason string `json:"reason"`
	Domain string `json:"domain"`
}

// RPCTask is a task on the A2A wire: Kind is "task" in 0.3 and absent in 1.0.
type RPCTask struct {
	Kind      string          `json:"kind,omitempty"`
	ID        string          `json:"id"`
	ContextID string          `json:"contextId"`
	Status    RPCTaskStatus   `json:"status"`
	History   []RPCMessage    `json:"history"`
	Artifacts []RPCArtifact   `json:"artifacts"`
	Metadata  json.RawMessage `json:"metadata"`
}

// RPCTaskStatus is a task's state and the time it last changed (RFC 3339, ms, UTC).
type RPCTaskStatus struct {
	State     string `json:"state"`
	Timestamp string `json:"timestamp"`
	// Message is the message a streamed status update carries (a message added to
	// the task).
	Message *RPCMessage `json:"message,omitempty"`
}

// RPCMessage is a task message on the A2A wire; Kind is "message" in 0.3.
type RPCMessage struct {
	Kind      string           `json:"kind,omitempty"`
	MessageID string           `json:"messageId"`
	ContextID string           `json:"contextId"`
	TaskID    string           `json:"taskId"`
	Role      string           `json:"role"`
	Parts     []map[string]any `json:"parts"`
}

// RPCArtifact is a task artifact on the A2A wire.
type RPCArtifact struct {
	ArtifactID string           `json:"artifactId"`
	Name       *string          `json:"name,omitempty"`
	Parts      []map[string]any `json:"parts"`
}

// RPCSendResult is the 1.0 answer of SendMessage.
type RPCSendResult struct {
	Task RPCTask `json:"task"`
}

// RPCStatusUpdate is a streamed change of a task's status: in 0.3 Kind is
// "status-update" and Final is set (true on the terminal state); 1.0 has neither.
type RPCStatusUpdate struct {
	Kind      string        `json:"kind,omitempty"`
	TaskID    string        `json:"taskId"`
	ContextID string        `json:"contextId"`
	Status    RPCTaskStatus `json:"status"`
	Final     *bool         `json:"final,omitempty"`
}

// RPCArtifactUpdate is a streamed artifact, whole: in 0.3 Kind is "artifact-update"
// and Append false, LastChunk true.
type RPCArtifactUpdate struct {
	Kind      string      `json:"kind,omitempty"`
	TaskID    string      `json:"taskId"`
	ContextID string      `json:"contextId"`
	Artifact  RPCArtifact `json:"artifact"`
	Append    *bool       `json:"append,omitempty"`
	LastChunk *bool       `json:"lastChunk,omitempty"`
}

// RPCStreamResponse is a 1.0 stream event (and push notification body): exactly one
// member is set.
type RPCStreamResponse struct {
	Task           *RPCTask           `json:"task,omitempty"`
	StatusUpdate   *RPCStatusUpdate   `json:"statusUpdate,omitempty"`
	ArtifactUpdate *RPCArtifactUpdate `json:"artifactUpdate,omitempty"`
}
