package server

import (
	"context"
	"net/http"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// messageRoutes registers the conversation message routes (docs/conversations.md).
func (s *Server) messageRoutes() {
	s.handle(contract.RouteMessagesBatch, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.AppendMessagesRequest) (int, any, error) {
			res, err := s.messages.Append(ctx, p.Scope, req)
			return http.StatusOK, res, err
		}))
	s.handle(contract.RouteMessagesRecent, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.RecentMessagesRequest) (int, any, error) {
			res, err := s.messages.Recent(ctx, p.Scope, req)
			return http.StatusOK, res, err
		}))
	s.handle(contract.RouteMessages, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.PageMessagesRequest) (int, any, error) {
			res, err := s.messages.Page(ctx, p.Scope, req)
			return http.StatusOK, res, err
		}))
	s.handle(contract.RouteMessagesSearch, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.SearchMessagesRequest) (int, any, error) {
			res, err := s.messages.Search(ctx, p.Scope, req)
			return http.StatusOK, res, err
		}))
	s.handle(contract.RouteConversationsList, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.ListConversationsRequest) (int, any, error) {
			res, err := s.messages.ListConversations(ctx, p.Scope, req)
			return http.StatusOK, res, err
		}))
}
