package knowledge

import "github.com/go-json-experiment/json/jsontext"

// The provider wire protocol (docs/knowledge-provider-protocol.md). Providers are
// called at these paths below their baseUrl.
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
// first, at most topK of them.
type ProviderQueryResult struct {
	Hits []ProviderHit `json:"hits"`
}

// ProviderHit is one hit. ResourceRef is required; the other refs, Title, Score and
// URI may be null or absent. Truncated says the provider cut the excerpt.
type ProviderHit struct {
	ResourceRef string         `json:"resourceRef"`
	RevisionRef *string        `json:"revisionRef"`
	SegmentRef  *string        `json:"segmentRef"`
	Title       *string        `json:"title"`
	Excerpt     string         `json:"excerpt"`
	Truncated   bool           `json:"truncated"`
	Score       *float64       `json:"score"`
	URI         *string        `json:"uri"`
	Metadata    jsontext.Value `json:"metadata,omitzero"`
}

// ProviderResolve is the body of POST /resolve.
type ProviderResolve struct {
	ResourceRefs []string `json:"resourceRefs"`
}

// ProviderResolveResult is the body a provider answers POST /resolve with.
type ProviderResolveResult struct {
	Resources []ProviderResource `json:"resources"`
	Missing   []string           `json:"missing"`
}

// ProviderResource is one resolved resource; ResourceRef is required.
type ProviderResource struct {
	ResourceRef string         `json:"resourceRef"`
	RevisionRef *string        `json:"revisionRef"`
	Title       *string        `json:"title"`
	URI         *string        `json:"uri"`
	Metadata    jsontext.Value `json:"metadata,omitzero"`
}
