package server

import (
	"context"
	"errors"
	"net/http"
	"regexp"

	"github.com/labstack/echo/v4"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// messageRoutes registers the conversation message routes (docs/conversations.md).
func (s *Server) messageRoutes() {
	s.handle(contract.RouteMessagesBatch, numberBounds(jsonBody(s.maxBody,
		func(ctx context.Context, p runtime.Principal, req *contract.AppendMessagesRequest) (int, any, error) {
			res, err := s.messages.Append(ctx, p.Scope, req)
			return http.StatusOK, res, err
		}), appendBound))
	s.handle(contract.RouteMessagesRecent, numberBounds(jsonBody(s.maxBody,
		func(ctx context.Context, p runtime.Principal, req *contract.RecentMessagesRequest) (int, any, error) {
			res, err := s.messages.Recent(ctx, p.Scope, req)
			return http.StatusOK, res, err
		}), limitBound(contract.MaxMessagesLimit)))
	s.handle(contract.RouteMessages, numberBounds(jsonBody(s.maxBody,
		func(ctx context.Context, p runtime.Principal, req *contract.PageMessagesRequest) (int, any, error) {
			res, err := s.messages.Page(ctx, p.Scope, req)
			return http.StatusOK, res, err
		}), limitBound(contract.MaxMessagesLimit)))
	s.handle(contract.RouteMessagesSearch, numberBounds(jsonBody(s.maxBody,
		func(ctx context.Context, p runtime.Principal, req *contract.SearchMessagesRequest) (int, any, error) {
			res, err := s.messages.Search(ctx, p.Scope, req)
			return http.StatusOK, res, err
		}), limitBound(contract.MaxSearchLimit)))
	s.handle(contract.RouteConversationsList, numberBounds(jsonBody(s.maxBody,
		func(ctx context.Context, p runtime.Principal, req *contract.ListConversationsRequest) (int, any, error) {
			res, err := s.messages.ListConversations(ctx, p.Scope, req)
			return http.StatusOK, res, err
		}), limitBound(contract.MaxMessagesLimit)))
}

// numberBounds completes the decoder's refusal of a number it cannot hold (1e100,
// 2^63, 2.5) with details.limit, the field's upper bound, so that such a value is
// answered like any other out-of-range number (docs/api.md). bound names the
// bound of a field path, or 0 for a field without one. A field's own bound is
// tighter than the decoder's general 2^53 − 1 and replaces it.
func numberBounds(h echo.HandlerFunc, bound func(field string) int64) echo.HandlerFunc {
	return func(c echo.Context) error {
		err := h(c)
		var e *runtime.Error
		if !errors.As(err, &e) || e.Code != contract.CodeValidationFailed {
			return err
		}
		field, _ := e.Details["field"].(string)
		b := bound(field)
		if b <= 0 {
			return err
		}
		if limit, ok := e.Details["limit"].(int64); !ok || b < limit {
			e.With("limit", b)
		}
		return err
	}
}

// limitBound bounds the limit field of a read.
func limitBound(maxLimit int64) func(string) int64 { return fieldBound("limit", maxLimit) }

// fieldBound bounds the one numeric field name of a request.
func fieldBound(name string, bound int64) func(string) int64 {
	return func(field string) int64 {
		if field == name {
			return bound
		}
		return 0
	}
}

// appendBound bounds the sequence and createdAtMs of each record of an append.
func appendBound(field string) int64 {
	if recordNumberField.MatchString(field) {
		return runtime.MaxSequence
	}
	return 0
}

var recordNumberField = regexp.MustCompile(`^messages\[[0-9]+\]\.(sequence|createdAtMs)$`)
