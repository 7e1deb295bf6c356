package server

import (
	"context"
	"net/http"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// conversationRoutes registers the conversation message routes (03-conversations.md).
func (s *Server) conversationRoutes() {
	s.handle(contract.RouteMessagesBatch, jsonBody(s.maxBody,
		func(ctx context.Context, p runtime.Principal, req *contract.AppendMessagesRequest) (int, any, error) {
			res, err := s.conversations.Append(ctx, p.Scope, req)
			return http.StatusOK, res, err
		}))
	s.handle(contract.RouteMessagesRecent, jsonBody(s.maxBody,
		func(ctx context.Context, p runtime.Principal, req *contract.RecentMessagesRequest) (int, any, error) {
			res, err := s.conversations.Recent(ctx, p.Scope, req)
			return http.StatusOK, res, err
		}))
	s.handle(contract.RouteMessages, jsonBody(s.maxBody,
		func(ctx context.Context, p runtime.Principal, req *contract.PageMessagesRequest) (int, any, error) {
			res, err := s.conversations.Page(ctx, p.Scope, req)
			return http.StatusOK, res, err
		}))
	s.handle(contract.RouteMessagesSearch, jsonBody(s.maxBody,
		func(ctx context.Context, p runtime.Principal, req *contract.SearchMessagesRequest) (int, any, error) {
			res, err := s.conversations.Search(ctx, p.Scope, req)
			return http.StatusOK, res, err
		}))
}
