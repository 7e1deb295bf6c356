package knowledge

import (
	"github.com/go-json-experiment/json/jsontext"

	"github.com/agent-context/agent-context/contract"
)

// The provider wire protocol (docs/knowledge-provider-protocol.md). Providers are
// called at these paths below their baseUrl. A provider answers with the contract's
// hits and resources (docs/knowledge.md), so that they pass through unchanged.
const (
	PathCapabilities = "/capabilities"
	PathQuery        = "/query"
	PathResolve      = "/resolve"
)

// HeaderUserAuthorization carries the end user's credential to a provider.
const HeaderUserAuthorization = "x-infra-user-authorization"

// ProviderCapabilities is the body a provider answers GET /capabilities with.
type ProviderCapabilities struct {
	QueryModes         []string `json:"queryModes"`
	ResourceResolution bool     `json:"resourceResolution"`
	// MaxHits is the most hits the provider returns for one query; 0 for no limit
	// of its own.
	MaxHits int `json:"maxHits"`
}

// ProviderQuery is the body of POST /query. Filters is always an object ({} when the
// caller gave none); ScopeRef is null when the caller gave none.
type ProviderQuery struct {
	Query    string         `json:"query"`
	ScopeRef *string        `json:"scopeRef"`
	TopK     int            `json:"topK"`
	Filters  jsontext.Value `json:"filters"`
}

// ProviderQueryResult is the body a provider answers POST /query with: hits best
// first, at most topK of them. A hit is the contract's: ResourceRef is required; the
// other refs, Title, Score, URI and Metadata may be null or absent; Truncated says the
// provider cut the excerpt.
type ProviderQueryResult struct {
	Hits []contract.KnowledgeHit `json:"hits"`
}

// ProviderResolve is the body of POST /resolve.
type ProviderResolve struct {
	ResourceRefs []string `json:"resourceRefs"`
}

// ProviderResolveResult is the body a provider answers POST /resolve with; a
// resource's ResourceRef is required.
type ProviderResolveResult struct {
	Resources []contract.KnowledgeResource `json:"resources"`
	Missing   []string                     `json:"missing"`
}
