package client

import (
	"context"

	"github.com/agent-context/agent-context/contract"
)

// Export calls POST /exports; the operation's result names the artifact once it
// succeeded.
func (c *Client) Export(ctx context.Context, req *contract.ExportRequest) (*contract.OperationResponse, error) {
	return call[contract.OperationResponse](ctx, c, contract.RouteExports, req)
}

// GetArtifact calls POST /export-artifacts/get.
func (c *Client) GetArtifact(ctx context.Context, req *contract.GetArtifactRequest) (*contract.ExportArtifact, error) {
	return call[contract.ExportArtifact](ctx, c, contract.RouteExportArtifactsGet, req)
}

// GetChunk calls POST /export-artifacts/chunk.
func (c *Client) GetChunk(ctx context.Context, req *contract.GetChunkRequest) (*contract.ExportChunk, error) {
	return call[contract.ExportChunk](ctx, c, contract.RouteExportArtifactsChunk, req)
}

// Import calls POST /imports.
func (c *Client) Import(ctx context.Context, req *contract.ImportRequest) (*contract.ImportResponse, error) {
	return call[contract.ImportResponse](ctx, c, contract.RouteImports, req)
}

// StartAdvancedOperation calls POST /advanced-operations.
func (c *Client) StartAdvancedOperation(ctx context.Context, req *contract.AdvancedOperationRequest) (*contract.OperationResponse, error) {
	return call[contract.OperationResponse](ctx, c, contract.RouteAdvancedOperations, req)
}
