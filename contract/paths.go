package contract

// Paths of the public, credential-free routes.
const (
	PathHealth      = "/health"
	PathReady       = "/ready"
	PathMetrics     = "/metrics"
	PathOpenAPIJSON = "/openapi.json"
	PathOpenAPIYAML = "/openapi.yaml"
)

// Prefixes of the internal API. The gateway rewrites /v1/context/* to
// /internal/v1/context/* (and likewise for knowledge and a2a).
const (
	PrefixContext   = "/internal/v1/context"
	PrefixKnowledge = "/internal/v1/knowledge"
	PrefixA2A       = "/internal/v1/a2a"
)

// Service is the name /health reports.
const Service = "agent-context-infra"

// Health is the body of GET /health.
type Health struct {
	Status  string `json:"status"`
	Service string `json:"service"`
}

// Ready is the body of GET /ready.
type Ready struct {
	Status        string `json:"status"`
	SchemaVersion int64  `json:"schemaVersion"`
	LatestVersion int64  `json:"latestVersion"`
}
