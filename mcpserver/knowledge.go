package mcpserver

import (
	"context"
	"encoding/json"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/knowledge"
)

// knowledgeArgs are the arguments of knowledge_query (POST /knowledge/query).
type knowledgeArgs struct {
	Query       string          `json:"query" jsonschema:"What to look up in the external knowledge sources (1 byte to 16 KiB)."`
	Provider    *string         `json:"provider,omitempty" jsonschema:"The knowledge provider to ask; the configured default when absent."`
	ScopeRef    *string         `json:"scope_ref,omitempty" jsonschema:"A provider's reference narrowing the search (a space, a repository, a folder)."`
	TopK        *int            `json:"top_k,omitempty" jsonschema:"How many hits to return, 1 to 100 (default 10)."`
	Requirement *string         `json:"requirement,omitempty" jsonschema:"How a provider failure is answered: required (an error), optional (an empty, degraded answer) or disabled (no query at all); the provider's default when absent."`
	Filters     json.RawMessage `json:"filters,omitempty" jsonschema:"A JSON object of provider-specific filters, forwarded as it is."`
}

// knowledgeTools registers the external knowledge facade (docs/knowledge.md).
func (d *Door) knowledgeTools(k *knowledge.Service) {
	addTool(d, toolSpec{name: contract.ToolKnowledgeQuery, readOnly: true, idempotent: true,
		description: "Search the organisation's external knowledge (documents, wikis, tickets) through the configured " +
			"providers. Returns hits with excerpts and references; degraded is true when a provider could not answer."},
		func(ctx context.Context, p runtime.Principal, in *knowledgeArgs) (any, error) {
			req := &contract.KnowledgeQueryRequest{Query: in.Query, Provider: in.Provider, ScopeRef: in.ScopeRef,
				TopK: in.TopK, Filters: in.Filters}
			if in.Requirement != nil {
				req.Requirement = *in.Requirement
			}
			return k.Query(ctx, p, req)
		})
}
