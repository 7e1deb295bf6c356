package client

import (
	"context"

	"github.com/agent-context/agent-context/contract"
)

// DeleteConversation calls POST /conversations/delete; created is false when the
// conversation was already deleted (the existing operation is returned).
func (c *Client) DeleteConversation(ctx context.Context, req *contract.DeleteConversationRequest) (op *contract.OperationResponse, created bool, err error) {
	return callCreated[contract.OperationResponse](ctx, c, contract.RouteConversationsDelete, req)
}

// ApplyRetention calls POST /conversations/retention.
func (c *Client) ApplyRetention(ctx context.Context, req *contract.RetentionRequest) (*contract.OperationResponse, error) {
	return call[contract.OperationResponse](ctx, c, contract.RouteConversationsRetention, req)
}

// GetOperation calls POST /operations.
func (c *Client) GetOperation(ctx context.Context, req *contract.GetOperationRequest) (*contract.OperationResponse, error) {
	return call[contract.OperationResponse](ctx, c, contract.RouteOperations, req)
}

// MaintenanceStatus calls GET /maintenance/status.
func (c *Client) MaintenanceStatus(ctx context.Context) (*contract.MaintenanceStatus, error) {
	return call[contract.MaintenanceStatus](ctx, c, contract.RouteMaintenanceStatus, nil)
}
