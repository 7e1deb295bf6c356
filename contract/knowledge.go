package contract

import "encoding/json"

// Routes of the external knowledge facade (docs/knowledge.md).
var (
	RouteKnowledgeCapabilities = Route{MethodGet, PrefixKnowledge + "/capabilities", []string{CapKnowledgeRead}}
	RouteKnowledgeQuery        = Route{MethodPost, PrefixKnowledge + "/query", []string{CapKnowledgeQuery}}
	RouteKnowledgeResolve      = Route{MethodPost, PrefixKnowledge + "/resolve-resources", []string{CapKnowledgeQuery}}
)

// Limits of the knowledge facade (docs/api.md).
const (
	MaxKnowledgeQueryBytes   = 16 << 10
	DefaultKnowledgeTopK     = 10
	MaxKnowledgeTopK         = 100
	MaxResourceRefs          = 100
	MaxKnowledgeExcerptBytes = 64 << 10
)

// Requirements of a knowledge query: how a provider failure is answered.
const (
	RequirementRequired = "required"
	RequirementOptional = "optional"
	RequirementDisabled = "disabled"
)

// Requirements lists every requirement.
var Requirements = []string{RequirementRequired, RequirementOptional, RequirementDisabled}

// Degradation reasons: why a query answered without hits, in degradationReason (and
// in details.reason of a KNOWLEDGE_UNAVAILABLE or KNOWLEDGE_UPSTREAM_ERROR answer).
const (
	ReasonProviderUnavailable     = "provider_unavailable"
	ReasonProviderTimeout         = "provider_timeout"
	ReasonProviderError           = "provider_error"
	ReasonProviderInvalidResponse = "provider_invalid_response"
	ReasonProviderNotConfigured   = "provider_not_configured"
	ReasonCircuitOpen             = "circuit_open"
	ReasonDisabled                = "disabled"
)

// Provider statuses in GET /capabilities.
const (
	// ProviderUp: the last call or probe succeeded.
	ProviderUp = "up"
	// ProviderDown: the circuit is open or the last call or probe failed.
	ProviderDown = "down"
	// ProviderUnknown: not called or probed yet.
	ProviderUnknown = "unknown"
)

// KnowledgeCapabilities is the body of GET /capabilities. Default is null when no
// default provider is configured.
type KnowledgeCapabilities struct {
	Default   *string                 `json:"default"`
	Providers []KnowledgeProviderInfo `json:"providers"`
}

// KnowledgeProviderInfo describes one configured provider. QueryModes and
// ResourceResolution are what the provider's last successful probe reported ([] and
// false before one); MaxHits is the most hits a query to it returns.
type KnowledgeProviderInfo struct {
	Provider           string   `json:"provider"`
	QueryModes         []string `json:"queryModes"`
	ResourceResolution bool     `json:"resourceResolution"`
	MaxHits            int      `json:"maxHits"`
	Status             string   `json:"status"`
}

// KnowledgeQueryRequest is the body of POST /query. Requirement defaults to the
// provider's configured default (optional unless configured otherwise); Provider to
// the default provider; TopK to 10. Filters, when set, is a JSON object forwarded to
// the provider as it is.
type KnowledgeQueryRequest struct {
	Query       string          `json:"query"`
	Requirement string          `json:"requirement"`
	Provider    *string         `json:"provider"`
	ScopeRef    *string         `json:"scopeRef"`
	TopK        *int            `json:"topK"`
	Filters     json.RawMessage `json:"filters"`
}

// KnowledgeQueryResponse answers POST /query. Provider is null only when no provider
// was named and none is the default. DegradationReason is null unless Degraded, or
// "disabled" for a disabled query.
type KnowledgeQueryResponse struct {
	Provider          *string        `json:"provider"`
	Hits              []KnowledgeHit `json:"hits"`
	Degraded          bool           `json:"degraded"`
	DegradationReason *string        `json:"degradationReason"`
}

// KnowledgeHit is one hit of a provider, best first as the provider ranks them. The
// refs are opaque. Excerpt is at most 64 KiB; Truncated says it was cut (by the
// provider or by this service). Its fields fill a window item's knowledgeEvidence.
type KnowledgeHit struct {
	ResourceRef string          `json:"resourceRef"`
	RevisionRef *string         `json:"revisionRef"`
	SegmentRef  *string         `json:"segmentRef"`
	Title       *string         `json:"title"`
	Excerpt     string          `json:"excerpt"`
	Truncated   bool            `json:"truncated"`
	Score       *float64        `json:"score"`
	URI         *string         `json:"uri"`
	Metadata    json.RawMessage `json:"metadata"`
}

// ResolveResourcesRequest is the body of POST /resolve-resources: 1–100 refs; a
// repeated ref is resolved once.
type ResolveResourcesRequest struct {
	Provider     *string  `json:"provider"`
	ResourceRefs []string `json:"resourceRefs"`
}

// ResolveResourcesResponse answers POST /resolve-resources: the resources the provider
// resolved, in request order, and the requested refs it did not (also in request
// order).
type ResolveResourcesResponse struct {
	Provider  string              `json:"provider"`
	Resources []KnowledgeResource `json:"resources"`
	Missing   []string            `json:"missing"`
}

// KnowledgeResource is one resolved resource.
type KnowledgeResource struct {
	ResourceRef string          `json:"resourceRef"`
	RevisionRef *string         `json:"revisionRef"`
	Title       *string         `json:"title"`
	URI         *string         `json:"uri"`
	Metadata    json.RawMessage `json:"metadata"`
}
