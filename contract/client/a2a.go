package client

import (
	"context"

	"github.com/agent-context/agent-context/contract"
)

// RegisterAgent calls POST /internal/v1/a2a/agents/register.
func (c *Client) RegisterAgent(ctx context.Context, req *contract.RegisterAgentRequest) (*contract.Agent, error) {
	return call[contract.Agent](ctx, c, contract.RouteA2AAgentsRegister, req)
}

// ListAgents calls POST /internal/v1/a2a/agents/list.
func (c *Client) ListAgents(ctx context.Context, req *contract.ListAgentsRequest) (*contract.AgentList, error) {
	return call[contract.AgentList](ctx, c, contract.RouteA2AAgentsList, req)
}

// PostAgentMessage calls POST /internal/v1/a2a/messages/post; the answer is a receipt.
func (c *Client) PostAgentMessage(ctx context.Context, req *contract.PostMessageRequest) (*contract.MessageAck, error) {
	return call[contract.MessageAck](ctx, c, contract.RouteA2AMessagesPost, req)
}

// ReadAgentMessages calls POST /internal/v1/a2a/messages/read.
func (c *Client) ReadAgentMessages(ctx context.Context, req *contract.ReadMessagesRequest) (*contract.AgentMessages, error) {
	return call[contract.AgentMessages](ctx, c, contract.RouteA2AMessagesRead, req)
}

// CreateTask calls POST /internal/v1/a2a/tasks; created is false for an identical
// retry.
func (c *Client) CreateTask(ctx context.Context, req *contract.CreateTaskRequest) (t *contract.Task, created bool, err error) {
	return callCreated[contract.Task](ctx, c, contract.RouteA2ATasksCreate, req)
}

// GetTask calls POST /internal/v1/a2a/tasks/get.
func (c *Client) GetTask(ctx context.Context, req *contract.TaskRequest) (*contract.Task, error) {
	return call[contract.Task](ctx, c, contract.RouteA2ATasksGet, req)
}

// ListTasks calls POST /internal/v1/a2a/tasks/list.
func (c *Client) ListTasks(ctx context.Context, req *contract.ListTasksRequest) (*contract.TaskList, error) {
	return call[contract.TaskList](ctx, c, contract.RouteA2ATasksList, req)
}

// UpdateTask calls POST /internal/v1/a2a/tasks/update.
func (c *Client) UpdateTask(ctx context.Context, req *contract.UpdateTaskRequest) (*contract.Task, error) {
	return call[contract.Task](ctx, c, contract.RouteA2ATasksUpdate, req)
}

// CancelTask calls POST /internal/v1/a2a/tasks/cancel.
func (c *Client) CancelTask(ctx context.Context, req *contract.CancelTaskRequest) (*contract.Task, error) {
	return call[contract.Task](ctx, c, contract.RouteA2ATasksCancel, req)
}

// MessageTask calls POST /internal/v1/a2a/tasks/message.
func (c *Client) MessageTask(ctx context.Context, req *contract.TaskMessageRequest) (*contract.Task, error) {
	return call[contract.Task](ctx, c, contract.RouteA2ATasksMessage, req)
}

// TaskInfo calls POST /internal/v1/a2a/tasks/info.
func (c *Client) TaskInfo(ctx context.Context) (*contract.TaskInfo, error) {
	return call[contract.TaskInfo](ctx, c, contract.RouteA2ATasksInfo, &contract.TaskInfoRequest{})
}

// PollEvents calls POST /internal/v1/a2a/events/poll. With waitMs the call may last
// that long: the client's HTTP timeout must exceed it.
func (c *Client) PollEvents(ctx context.Context, req *contract.PollEventsRequest) (*contract.EventPage, error) {
	return call[contract.EventPage](ctx, c, contract.RouteA2AEventsPoll, req)
}

// Snapshot calls POST /internal/v1/a2a/snapshot.
func (c *Client) Snapshot(ctx context.Context, req *contract.SnapshotRequest) (*contract.Snapshot, error) {
	return call[contract.Snapshot](ctx, c, contract.RouteA2ASnapshot, req)
}

// Costs calls POST /costs, the cost attribution report.
func (c *Client) Costs(ctx context.Context, req *contract.CostsRequest) (*contract.CostsResponse, error) {
	return call[contract.CostsResponse](ctx, c, contract.RouteCosts, req)
}
