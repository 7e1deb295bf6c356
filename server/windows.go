package server

import (
	"context"
	"net/http"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// windowRoutes registers the routes of context windows, derivations, lineage and model
// invocations (docs/windows.md).
func (s *Server) windowRoutes() {
	s.handle(contract.RouteWindowsCreate, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.CreateWindowRequest) (int, any, error) {
			w, created, err := s.windows.CreateWindow(ctx, p, req)
			return createdOrOK(created), w, err
		}))
	s.handle(contract.RouteWindowsGet, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.GetWindowRequest) (int, any, error) {
			w, err := s.windows.GetWindow(ctx, p, req)
			return http.StatusOK, w, err
		}))
	s.handle(contract.RouteWindowsLineage, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.LineageRequest) (int, any, error) {
			l, err := s.windows.Lineage(ctx, p, req)
			return http.StatusOK, l, err
		}))
	s.handle(contract.RouteDerivationsCreate, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.CreateDerivationRequest) (int, any, error) {
			d, created, err := s.windows.CreateDerivation(ctx, p, req)
			return createdOrOK(created), d, err
		}))
	// A model invocation answers 200 for a fresh save and an identical retry alike,
	// as the seed's endpoint matrix says.
	s.handle(contract.RouteModelInvocationsCreate, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.CreateModelInvocationRequest) (int, any, error) {
			m, err := s.windows.SaveInvocation(ctx, p, req)
			return http.StatusOK, m, err
		}))
	s.handle(contract.RouteModelInvocationsGet, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.GetModelInvocationRequest) (int, any, error) {
			m, err := s.windows.GetInvocation(ctx, p, req)
			return http.StatusOK, m, err
		}))
	s.handle(contract.RouteWindowsList, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.ListByConversationRequest) (int, any, error) {
			res, err := s.windows.ListWindows(ctx, p, req)
			return http.StatusOK, res, err
		}))
	s.handle(contract.RouteModelInvocationsList, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.ListByConversationRequest) (int, any, error) {
			res, err := s.windows.ListInvocations(ctx, p, req)
			return http.StatusOK, res, err
		}))
}

// createdOrOK is the status of an idempotent create: 201 when the record was written
// now, 200 for an identical retry.
func createdOrOK(created bool) int {
	if created {
		return http.StatusCreated
	}
	return http.StatusOK
}
