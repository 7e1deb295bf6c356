package contract

// Route is one route of the API with the capabilities that admit a caller: holding
// any one of them suffices, and a refusal names the first. A route with nil
// Capabilities is public (no credential at all); one with an empty, non-nil list needs
// a credential and checks a capability per call it carries (PerCall).
type Route struct {
	Method       string
	Path         string
	Capabilities []string
}

// HTTP methods, spelled out so that the contract does not import net/http.
const (
	MethodGet  = "GET"
	MethodPost = "POST"
)

// Public reports whether the route needs no credential.
func (r Route) Public() bool { return r.Capabilities == nil }

// PerCall reports whether the route needs a credential but no capability of its own:
// each call in its body (an MCP tool call) is checked against the capability of the
// route it wraps.
func (r Route) PerCall() bool { return r.Capabilities != nil && len(r.Capabilities) == 0 }

// Public routes (docs/api.md lists every route that may be public).
var (
	RouteHealth      = Route{MethodGet, PathHealth, nil}
	RouteReady       = Route{MethodGet, PathReady, nil}
	RouteMetrics     = Route{MethodGet, PathMetrics, nil}
	RouteOpenAPIJSON = Route{MethodGet, PathOpenAPIJSON, nil}
	RouteOpenAPIYAML = Route{MethodGet, PathOpenAPIYAML, nil}
)

// Routes is the single table of every route the service serves and the capability each
// requires (docs/api.md). The server registers exactly these, and a test fails when a
// registered route is missing here or a route here has no handler.
func Routes() []Route {
	return []Route{
		RouteHealth, RouteReady, RouteMetrics, RouteOpenAPIJSON, RouteOpenAPIYAML,
		RouteMessagesBatch, RouteMessagesRecent, RouteMessages, RouteMessagesSearch, RouteConversationsList,
		RouteWindowsCreate, RouteWindowsGet, RouteWindowsLineage, RouteDerivationsCreate,
		RouteModelInvocationsCreate, RouteModelInvocationsGet, RouteWindowsList, RouteModelInvocationsList,
		RouteEntriesCreate, RouteEntriesGet, RouteEntriesCorrect, RouteEntriesMerge, RouteEntriesExpire,
		RouteEntriesList, RouteEntriesHistory,
		RouteRecall, RouteVectorRebuild,
		RouteConversationsDelete, RouteConversationsRetention, RouteOperations, RouteMaintenanceStatus,
		RouteKnowledgeCapabilities, RouteKnowledgeQuery, RouteKnowledgeResolve,
		RouteA2AAgentsRegister, RouteA2AAgentsList, RouteA2AMessagesPost, RouteA2AMessagesRead,
		RouteA2ATasksCreate, RouteA2ATasksGet, RouteA2ATasksList, RouteA2ATasksUpdate, RouteA2ATasksCancel,
		RouteA2ATasksMessage, RouteA2ATasksInfo, RouteA2AEventsPoll, RouteA2ASnapshot,
		RouteCosts,
		RouteA2AHandoff, RouteA2AVersions,
		RouteA2AAgentCard, RouteWellKnownAgentCard, RouteWellKnownAgentJSON, RouteA2AJSONRPC,
		RouteExports, RouteExportArtifactsGet, RouteExportArtifactsChunk, RouteImports, RouteAdvancedOperations,
		RouteMCP, RouteOAuthProtectedResource,
	}
}
