package server

import (
	"context"
	"net/http"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// knowledgeRoutes registers the external knowledge facade (docs/knowledge.md).
func (s *Server) knowledgeRoutes() {
	s.handle(contract.RouteKnowledgeCapabilities, noBody(
		func(context.Context, runtime.Principal) (int, any, error) {
			return http.StatusOK, s.knowledge.Capabilities(), nil
		}))
	s.handle(contract.RouteKnowledgeQuery, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.KnowledgeQueryRequest) (int, any, error) {
			res, err := s.knowledge.Query(ctx, p, req)
			return http.StatusOK, res, err
		}))
	s.handle(contract.RouteKnowledgeResolve, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.ResolveResourcesRequest) (int, any, error) {
			res, err := s.knowledge.Resolve(ctx, p, req)
			return http.StatusOK, res, err
		}))
}
