package client

import (
	"context"

	"github.com/agent-context/agent-context/contract"
)

// KnowledgeCapabilities calls GET /internal/v1/knowledge/capabilities.
func (c *Client) KnowledgeCapabilities(ctx context.Context) (*contract.KnowledgeCapabilities, error) {
	return call[contract.KnowledgeCapabilities](ctx, c, contract.RouteKnowledgeCapabilities, nil)
}

// QueryKnowledge calls POST /internal/v1/knowledge/query.
func (c *Client) QueryKnowledge(ctx context.Context, req *contract.KnowledgeQueryRequest) (*contract.KnowledgeQueryResponse, error) {
	return call[contract.KnowledgeQueryResponse](ctx, c, contract.RouteKnowledgeQuery, req)
}

// ResolveResources calls POST /internal/v1/knowledge/resolve-resources.
func (c *Client) ResolveResources(ctx context.Context, req *contract.ResolveResourcesRequest) (*contract.ResolveResourcesResponse, error) {
	return call[contract.ResolveResourcesResponse](ctx, c, contract.RouteKnowledgeResolve, req)
}
