package server

import (
	"context"
	"net/http"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// a2aRoutes registers the agent-to-agent routes (docs/a2a.md): agents, messages, tasks,
// events and the snapshot.
func (s *Server) a2aRoutes() {
	ok := func(v any, err error) (int, any, error) { return http.StatusOK, v, err }
	s.handle(contract.RouteA2AAgentsRegister, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.RegisterAgentRequest) (int, any, error) {
			return ok(s.a2a.Agents.RegisterAgent(ctx, p, req))
		}))
	s.handle(contract.RouteA2AAgentsList, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.ListAgentsRequest) (int, any, error) {
			return ok(s.a2a.Agents.ListAgents(ctx, p, req))
		}))
	s.handle(contract.RouteA2AMessagesPost, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.PostMessageRequest) (int, any, error) {
			return ok(s.a2a.Messages.PostMessage(ctx, p, req))
		}))
	s.handle(contract.RouteA2AMessagesRead, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.ReadMessagesRequest) (int, any, error) {
			return ok(s.a2a.Messages.ReadMessages(ctx, p, req))
		}))
	s.handle(contract.RouteA2ATasksCreate, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.CreateTaskRequest) (int, any, error) {
			t, created, err := s.a2a.Tasks.CreateTask(ctx, p, req)
			return createdOrOK(created), t, err
		}))
	s.handle(contract.RouteA2ATasksGet, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.TaskRequest) (int, any, error) {
			return ok(s.a2a.Tasks.GetTask(ctx, p, req))
		}))
	s.handle(contract.RouteA2ATasksList, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.ListTasksRequest) (int, any, error) {
			return ok(s.a2a.Tasks.ListTasks(ctx, p, req))
		}))
	s.handle(contract.RouteA2ATasksUpdate, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.UpdateTaskRequest) (int, any, error) {
			return ok(s.a2a.Tasks.UpdateTask(ctx, p, req))
		}))
	s.handle(contract.RouteA2ATasksCancel, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.CancelTaskRequest) (int, any, error) {
			return ok(s.a2a.Tasks.CancelTask(ctx, p, req))
		}))
	s.handle(contract.RouteA2ATasksMessage, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.TaskMessageRequest) (int, any, error) {
			return ok(s.a2a.Tasks.MessageTask(ctx, p, req))
		}))
	s.handle(contract.RouteA2ATasksInfo, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.TaskInfoRequest) (int, any, error) {
			return ok(s.a2a.Tasks.TaskInfo(ctx, p, req))
		}))
	s.handle(contract.RouteA2AEventsPoll, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.PollEventsRequest) (int, any, error) {
			return ok(s.a2a.Events.PollEvents(ctx, p, req))
		}))
	s.handle(contract.RouteA2ASnapshot, jsonBody(s.gate,
		func(ctx context.Context, p runtime.Principal, req *contract.SnapshotRequest) (int, any, error) {
			return ok(s.a2a.Snapshots.Snapshot(ctx, p, req))
		}))
}
