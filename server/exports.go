package server

import (
	"context"
	"net/http"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// exportRoutes registers export, export artifacts, import and the advanced operations
// (docs/export.md).
func (s *Server) exportRoutes() {
	s.handle(contract.RouteExports, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.ExportRequest) (int, any, error) {
			res, err := s.exports.Export(ctx, p.Scope, req)
			return http.StatusAccepted, res, err
		}))
	s.handle(contract.RouteExportArtifactsGet, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.GetArtifactRequest) (int, any, error) {
			res, err := s.exports.GetArtifact(ctx, p.Scope, req)
			return http.StatusOK, res, err
		}))
	s.handle(contract.RouteExportArtifactsChunk, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.GetChunkRequest) (int, any, error) {
			res, err := s.exports.Chunk(ctx, p.Scope, req)
			return http.StatusOK, res, err
		}))
	s.handle(contract.RouteImports, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.ImportRequest) (int, any, error) {
			res, err := s.exports.Import(ctx, p, req)
			return http.StatusOK, res, err
		}))
	s.handle(contract.RouteAdvancedOperations, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.AdvancedOperationRequest) (int, any, error) {
			res, err := s.exports.Advanced(ctx, p.Scope, req)
			return http.StatusAccepted, res, err
		}))
}
