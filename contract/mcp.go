package contract

// Paths and routes of the Model Context Protocol door (docs/mcp.md): the streamable
// HTTP endpoint and its OAuth protected resource metadata (RFC 9728).
const (
	PathMCP                    = "/internal/v1/mcp"
	PathOAuthProtectedResource = "/.well-known/oauth-protected-resource"
)

// Routes of the MCP door. RouteMCP needs a credential but no capability of its own:
// each tool call it carries needs the capability of the route the tool wraps
// (MCPToolRoutes), so its Capabilities are empty rather than nil (see Route.PerCall).
var (
	RouteMCP                    = Route{MethodPost, PathMCP, []string{}}
	RouteOAuthProtectedResource = Route{MethodGet, PathOAuthProtectedResource, nil}
)

// MCPServerName is the serverInfo.name the MCP door reports.
const MCPServerName = "agent-context"

// Names of the MCP tools.
const (
	ToolCtxAgent           = "ctx_agent"
	ToolCtxTask            = "ctx_task"
	ToolMemoryRemember     = "memory_remember"
	ToolMemoryRecall       = "memory_recall"
	ToolMemoryGet          = "memory_get"
	ToolMemoryCorrect      = "memory_correct"
	ToolMemoryForget       = "memory_forget"
	ToolConversationAppend = "conversation_append"
	ToolConversationRecent = "conversation_recent"
	ToolConversationSearch = "conversation_search"
	ToolContextWindowGet   = "context_window_get"
	ToolKnowledgeQuery     = "knowledge_query"
)

// Actions of ctx_agent (the lean-ctx seed's names, plus register and list).
const (
	AgentActionRegister   = "register"
	AgentActionList       = "list"
	AgentActionPost       = "post"
	AgentActionRead       = "read"
	AgentActionExport     = "export"
	AgentActionPollEvents = "poll_events"
)

// Actions of ctx_task (the lean-ctx seed's names).
const (
	TaskActionCreate  = "create"
	TaskActionUpdate  = "update"
	TaskActionList    = "list"
	TaskActionGet     = "get"
	TaskActionCancel  = "cancel"
	TaskActionMessage = "message"
	TaskActionInfo    = "info"
)

// MCPToolRoute is one tool (and action, for the tools that have them) of the MCP door
// with the route whose use case it calls: the call needs that route's capability.
type MCPToolRoute struct {
	Tool   string
	Action string // empty for a tool without actions
	Route  Route
}

// MCPToolRoutes is the single table of every MCP tool and action and the route each
// wraps (docs/mcp.md). The MCP door checks a call's capability from this table, never
// from the tool's own code, and a test fails when a listed tool is missing here.
func MCPToolRoutes() []MCPToolRoute {
	return []MCPToolRoute{
		{ToolCtxAgent, AgentActionRegister, RouteA2AAgentsRegister},
		{ToolCtxAgent, AgentActionList, RouteA2AAgentsList},
		{ToolCtxAgent, AgentActionPost, RouteA2AMessagesPost},
		{ToolCtxAgent, AgentActionRead, RouteA2AMessagesRead},
		{ToolCtxAgent, AgentActionExport, RouteA2ASnapshot},
		{ToolCtxAgent, AgentActionPollEvents, RouteA2AEventsPoll},
		{ToolCtxTask, TaskActionCreate, RouteA2ATasksCreate},
		{ToolCtxTask, TaskActionUpdate, RouteA2ATasksUpdate},
		{ToolCtxTask, TaskActionList, RouteA2ATasksList},
		{ToolCtxTask, TaskActionGet, RouteA2ATasksGet},
		{ToolCtxTask, TaskActionCancel, RouteA2ATasksCancel},
		{ToolCtxTask, TaskActionMessage, RouteA2ATasksMessage},
		{ToolCtxTask, TaskActionInfo, RouteA2ATasksInfo},
		{ToolMemoryRemember, "", RouteEntriesCreate},
		{ToolMemoryRecall, "", RouteRecall},
		{ToolMemoryGet, "", RouteEntriesGet},
		{ToolMemoryCorrect, "", RouteEntriesCorrect},
		{ToolMemoryForget, "", RouteEntriesExpire},
		{ToolConversationAppend, "", RouteMessagesBatch},
		{ToolConversationRecent, "", RouteMessagesRecent},
		{ToolConversationSearch, "", RouteMessagesSearch},
		{ToolContextWindowGet, "", RouteWindowsGet},
		{ToolKnowledgeQuery, "", RouteKnowledgeQuery},
	}
}

// MCPToolRouteOf returns the route of tool and action (empty for a tool without
// actions), or false when the table has no such pair.
func MCPToolRouteOf(tool, action string) (Route, bool) {
	for _, t := range MCPToolRoutes() {
		if t.Tool == tool && t.Action == action {
			return t.Route, true
		}
	}
	return Route{}, false
}

// MCPToolActions returns the actions of tool in table order (none for a tool
// without actions).
func MCPToolActions(tool string) []string {
	var actions []string
	for _, t := range MCPToolRoutes() {
		if t.Tool == tool && t.Action != "" {
			actions = append(actions, t.Action)
		}
	}
	return actions
}

// ProtectedResourceMetadata is the body of GET /.well-known/oauth-protected-resource
// (RFC 9728): the MCP endpoint as a resource, the authorization servers that issue
// its tokens (AGENT_CONTEXT_MCP_AUTHORIZATION_SERVERS, possibly none) and how a token
// is presented.
type ProtectedResourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
}

// MCPToolError is the structuredContent of an MCP tool result with isError: the error
// object of the HTTP error envelope, with the same code and details the route answers.
type MCPToolError struct {
	Error ErrorBody `json:"error"`
}
