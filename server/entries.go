package server

import (
	"context"
	"net/http"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// entryRoutes registers the routes of context entries, recall and the vector
// projection (docs/entries.md).
func (s *Server) entryRoutes() {
	s.handle(contract.RouteEntriesCreate, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.CreateEntryRequest) (int, any, error) {
			e, created, err := s.entries.Create(ctx, p, req)
			return createdOrOK(created), e, err
		}))
	s.handle(contract.RouteEntriesGet, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.GetEntryRequest) (int, any, error) {
			e, err := s.entries.Get(ctx, p, req)
			return http.StatusOK, e, err
		}))
	s.handle(contract.RouteEntriesCorrect, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.CorrectEntryRequest) (int, any, error) {
			res, err := s.entries.Correct(ctx, p, req)
			return http.StatusCreated, res, err
		}))
	s.handle(contract.RouteEntriesMerge, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.MergeEntriesRequest) (int, any, error) {
			res, created, err := s.entries.Merge(ctx, p, req)
			return createdOrOK(created), res, err
		}))
	s.handle(contract.RouteEntriesExpire, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.ExpireEntryRequest) (int, any, error) {
			e, err := s.entries.Expire(ctx, p, req)
			return http.StatusOK, e, err
		}))
	s.handle(contract.RouteEntriesList, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.ListEntriesRequest) (int, any, error) {
			res, err := s.entries.List(ctx, p, req)
			return http.StatusOK, res, err
		}))
	s.handle(contract.RouteEntriesHistory, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.EntryHistoryRequest) (int, any, error) {
			res, err := s.entries.History(ctx, p, req)
			return http.StatusOK, res, err
		}))
	s.handle(contract.RouteRecall, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.RecallRequest) (int, any, error) {
			res, err := s.recall.Recall(ctx, p, req)
			return http.StatusOK, res, err
		}))
	// A rebuild answers 202 when it starts, and 200 with the rebuild already in flight
	// for the same request.
	s.handle(contract.RouteVectorRebuild, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.RebuildProjectionRequest) (int, any, error) {
			res, created, err := s.projection.Rebuild(ctx, p.Scope, req)
			if !created {
				return http.StatusOK, res, err
			}
			return http.StatusAccepted, res, err
		}))
}
