package server

import (
	"context"
	"net/http"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// costRoutes registers the cost attribution report (docs/costs.md).
func (s *Server) costRoutes() {
	s.handle(contract.RouteCosts, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.CostsRequest) (int, any, error) {
			res, err := s.costs.Report(ctx, p.Scope, req)
			return http.StatusOK, res, err
		}))
}
