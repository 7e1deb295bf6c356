package client

import (
	"context"

	"github.com/agent-context/agent-context/contract"
)

// CreateWindow calls POST /windows; created is false when an identical window was
// already stored.
func (c *Client) CreateWindow(ctx context.Context, req *contract.CreateWindowRequest) (w *contract.Window, created bool, err error) {
	return callCreated[contract.Window](ctx, c, contract.RouteWindowsCreate, req)
}

// GetWindow calls POST /windows/get.
func (c *Client) GetWindow(ctx context.Context, req *contract.GetWindowRequest) (*contract.Window, error) {
	return call[contract.Window](ctx, c, contract.RouteWindowsGet, req)
}

// WindowLineage calls POST /windows/lineage.
func (c *Client) WindowLineage(ctx context.Context, req *contract.LineageRequest) (*contract.Lineage, error) {
	return call[contract.Lineage](ctx, c, contract.RouteWindowsLineage, req)
}

// CreateDerivation calls POST /derivations; created is false for an identical retry.
func (c *Client) CreateDerivation(ctx context.Context, req *contract.CreateDerivationRequest) (d *contract.Derivation, created bool, err error) {
	return callCreated[contract.Derivation](ctx, c, contract.RouteDerivationsCreate, req)
}

// SaveModelInvocation calls POST /model-invocations.
func (c *Client) SaveModelInvocation(ctx context.Context, req *contract.CreateModelInvocationRequest) (*contract.ModelInvocation, error) {
	return call[contract.ModelInvocation](ctx, c, contract.RouteModelInvocationsCreate, req)
}

// GetModelInvocation calls POST /model-invocations/get.
func (c *Client) GetModelInvocation(ctx context.Context, req *contract.GetModelInvocationRequest) (*contract.ModelInvocation, error) {
	return call[contract.ModelInvocation](ctx, c, contract.RouteModelInvocationsGet, req)
}

// ListWindows calls POST /windows/list.
func (c *Client) ListWindows(ctx context.Context, req *contract.ListByConversationRequest) (*contract.WindowList, error) {
	return call[contract.WindowList](ctx, c, contract.RouteWindowsList, req)
}

// ListModelInvocations calls POST /model-invocations/list.
func (c *Client) ListModelInvocations(ctx context.Context, req *contract.ListByConversationRequest) (*contract.InvocationList, error) {
	return call[contract.InvocationList](ctx, c, contract.RouteModelInvocationsList, req)
}
