package server

import (
	"context"
	"net/http"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// operationRoutes registers conversation deletion, retention, operation lookup and the
// maintenance status (docs/operations.md).
func (s *Server) operationRoutes() {
	s.handle(contract.RouteConversationsDelete, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.DeleteConversationRequest) (int, any, error) {
			res, created, err := s.operations.DeleteConversation(ctx, p.Scope, req)
			if !created {
				return http.StatusOK, res, err
			}
			return http.StatusAccepted, res, err
		}))
	s.handle(contract.RouteConversationsRetention, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.RetentionRequest) (int, any, error) {
			res, err := s.operations.Retention(ctx, p.Scope, req)
			return http.StatusAccepted, res, err
		}))
	s.handle(contract.RouteOperations, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.GetOperationRequest) (int, any, error) {
			res, err := s.operations.Get(ctx, p, req)
			return http.StatusOK, res, err
		}))
	s.handle(contract.RouteMaintenanceStatus, noBody(
		func(ctx context.Context, p runtime.Principal) (int, any, error) {
			res, err := s.operations.Status(ctx, p.Scope)
			return http.StatusOK, res, err
		}))
}
