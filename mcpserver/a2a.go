package mcpserver

import (
	"context"
	"encoding/json"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// agentArgs are the arguments of ctx_agent: the A2A routes of agents, messages,
// events and the snapshot, for the caller as the agent.
type agentArgs struct {
	Action string `json:"action" jsonschema:"What to do: register (announce yourself), list (the agents of your scope), post (send a message), read (your unread messages), export (a snapshot of agents, messages and tasks) or poll_events (what happened since a cursor)."`
	// register
	AgentType    *string  `json:"agent_type,omitempty" jsonschema:"register: what kind of agent you are (for example coder, reviewer, planner)."`
	Role         *string  `json:"role,omitempty" jsonschema:"register: your role in the team."`
	Capabilities []string `json:"capabilities,omitempty" jsonschema:"register: what you can do, as short labels other agents can look for."`
	// post
	Message       *string `json:"message,omitempty" jsonschema:"post: the text of the message (at most 64 KiB)."`
	ToAgent       *string `json:"to_agent,omitempty" jsonschema:"post: the agent ID to send to; a broadcast to every agent of the scope when absent. Required for a private message."`
	Category      *string `json:"category,omitempty" jsonschema:"post: task_delegation, task_update, task_result, context_share, question, answer, notification (default) or handoff."`
	Priority      *string `json:"priority,omitempty" jsonschema:"post: low, normal (default), high or critical."`
	Privacy       *string `json:"privacy,omitempty" jsonschema:"post: public, team (default) or private (only you and to_agent see it). export: redacted (default) or full (needs a2a:admin)."`
	TTLHours      *int64  `json:"ttl_hours,omitempty" jsonschema:"post: hours until the message expires, 1 to 720 (default 12)."`
	TaskID        *string `json:"task_id,omitempty" jsonschema:"post: the task the message is about."`
	MessageID     *string `json:"message_id,omitempty" jsonschema:"post: an ID of your choosing; posting the same ID and content again is a no-op. Generated when absent."`
	CorrelationID *string `json:"correlation_id,omitempty" jsonschema:"post: ties a reply to the message it answers; the message's own ID when absent."`
	// read, list and poll_events
	Limit       *int  `json:"limit,omitempty" jsonschema:"read and list: at most this many, 1 to 500 (default 50). poll_events: 1 to 1000."`
	IncludeRead *bool `json:"include_read,omitempty" jsonschema:"read: also return messages you have read before (default false)."`
	MarkRead    *bool `json:"mark_read,omitempty" jsonschema:"read: mark the returned messages as read (default true)."`
	// export
	Write *bool `json:"write,omitempty" jsonschema:"export: also store the snapshot as an export artifact and return its ID (default false)."`
	// list and poll_events
	Cursor *string  `json:"cursor,omitempty" jsonschema:"list and poll_events: the nextCursor of the previous answer; from the start when absent."`
	Kinds  []string `json:"kinds,omitempty" jsonschema:"poll_events: only events of these kinds (message_posted, task_created, task_updated, task_message, agent_registered, envelope_received, entry_written, window_created)."`
	WaitMs *int64   `json:"wait_ms,omitempty" jsonschema:"poll_events: wait up to this many milliseconds (at most 30000) for an event when there is none yet."`
}

// agentActions are the arguments each action of ctx_agent takes.
var agentActions = map[string][]string{
	contract.AgentActionRegister: {"agent_type", "role", "capabilities"},
	contract.AgentActionList:     {"cursor", "limit"},
	contract.AgentActionPost: {"message", "to_agent", "category", "priority", "privacy", "ttl_hours", "task_id",
		"message_id", "correlation_id"},
	contract.AgentActionRead:       {"limit", "include_read", "mark_read"},
	contract.AgentActionExport:     {"privacy", "write"},
	contract.AgentActionPollEvents: {"cursor", "kinds", "wait_ms", "limit"},
}

// taskArgs are the arguments of ctx_task: the A2A task routes.
type taskArgs struct {
	Action          string     `json:"action" jsonschema:"What to do: create (give another agent a task), update (change a task's state), list (your tasks), get (one task with its messages and history), cancel, message (add a message to a task) or info (counts of your tasks)."`
	TaskID          *string    `json:"task_id,omitempty" jsonschema:"update, get, cancel, message: the task. create: an ID of your choosing (generated when absent; creating the same ID again returns the task)."`
	ToAgent         *string    `json:"to_agent,omitempty" jsonschema:"create: the agent ID that is to do the task."`
	Description     *string    `json:"description,omitempty" jsonschema:"create: what is to be done (at most 16 KiB)."`
	ContextID       *string    `json:"context_id,omitempty" jsonschema:"create: groups related tasks; the task's own ID when absent."`
	State           *string    `json:"state,omitempty" jsonschema:"update: the new state: working, input-required, completed, failed or canceled (the task state machine must allow it)."`
	Message         *string    `json:"message,omitempty" jsonschema:"update and cancel: why, recorded in the task's history. message: the text to add to the task."`
	ExpectedVersion *int64     `json:"expected_version,omitempty" jsonschema:"update: refuse the change unless the task is still at this version (from a previous read)."`
	Role            *string    `json:"role,omitempty" jsonschema:"list: from (tasks you created), to (tasks given to you) or any (default)."`
	States          []string   `json:"states,omitempty" jsonschema:"list: only tasks in these states."`
	Cursor          *string    `json:"cursor,omitempty" jsonschema:"list: the nextCursor of the previous answer."`
	Limit           *int       `json:"limit,omitempty" jsonschema:"list: at most this many tasks, 1 to 500 (default 50)."`
	Parts           []partArgs `json:"parts,omitempty" jsonschema:"create and message: the parts of the task's message (text, data or file), after the text of message when both are given."`
}

// partArgs is one part of a task message.
type partArgs struct {
	Type     string          `json:"type" jsonschema:"text, data or file."`
	Text     *string         `json:"text,omitempty" jsonschema:"text: the text."`
	MimeType *string         `json:"mime_type,omitempty" jsonschema:"data and file: the media type (application/json for data when absent)."`
	Data     json.RawMessage `json:"data,omitempty" jsonschema:"data: any JSON value."`
	Name     *string         `json:"name,omitempty" jsonschema:"file: the file's name."`
	Bytes    *string         `json:"bytes,omitempty" jsonschema:"file: the content in standard base64 (or uri instead)."`
	URI      *string         `json:"uri,omitempty" jsonschema:"file: where the content is (or bytes instead)."`
}

// taskActions are the arguments each action of ctx_task takes.
var taskActions = map[string][]string{
	contract.TaskActionCreate:  {"task_id", "to_agent", "description", "context_id", "message", "parts"},
	contract.TaskActionUpdate:  {"task_id", "state", "message", "expected_version"},
	contract.TaskActionList:    {"role", "states", "cursor", "limit"},
	contract.TaskActionGet:     {"task_id"},
	contract.TaskActionCancel:  {"task_id", "message"},
	contract.TaskActionMessage: {"task_id", "message", "parts"},
	contract.TaskActionInfo:    {},
}

// agentTools registers ctx_agent and ctx_task, the lean-ctx seed's tools (docs/a2a.md).
func (d *Door) agentTools(svc A2A) {
	addTool(d, toolSpec{name: contract.ToolCtxAgent, actions: agentActions,
		description: "Coordinate with the other agents of your scope: register yourself, list agents, post a message " +
			"(to one agent or all), read the messages sent to you, export a snapshot of the coordination state, or poll " +
			"the event log for what happened since your last cursor. The action argument chooses; each action takes only its own arguments."},
		func(ctx context.Context, p runtime.Principal, in *agentArgs) (any, error) {
			switch in.Action {
			case contract.AgentActionRegister:
				req := &contract.RegisterAgentRequest{Role: in.Role, Capabilities: in.Capabilities}
				if in.AgentType != nil {
					req.AgentType = *in.AgentType
				}
				return svc.Agents.RegisterAgent(ctx, p, req)
			case contract.AgentActionList:
				return svc.Agents.ListAgents(ctx, p, &contract.ListAgentsRequest{Cursor: in.Cursor, Limit: in.Limit})
			case contract.AgentActionPost:
				return svc.Messages.PostMessage(ctx, p, &contract.PostMessageRequest{MessageID: in.MessageID, CorrelationID: in.CorrelationID,
					ToAgent: in.ToAgent, TaskID: in.TaskID, Category: in.Category, Priority: in.Priority, Privacy: in.Privacy,
					Content: in.Message, TTLHours: in.TTLHours})
			case contract.AgentActionRead:
				req := &contract.ReadMessagesRequest{Limit: in.Limit, MarkRead: in.MarkRead}
				if in.IncludeRead != nil {
					req.IncludeRead = *in.IncludeRead
				}
				return svc.Messages.ReadMessages(ctx, p, req)
			case contract.AgentActionExport:
				req := &contract.SnapshotRequest{Privacy: in.Privacy}
				if in.Write != nil {
					req.Write = *in.Write
				}
				return svc.Snapshots.Snapshot(ctx, p, req)
			default: // poll_events: admit lets through only the actions of agentActions
				req := &contract.PollEventsRequest{Cursor: in.Cursor, Limit: in.Limit, WaitMs: in.WaitMs}
				if in.Kinds != nil {
					req.Filter = &contract.EventFilter{Kinds: in.Kinds}
				}
				return svc.Events.PollEvents(ctx, p, req)
			}
		})
	addTool(d, toolSpec{name: contract.ToolCtxTask, actions: taskActions,
		description: "Work on tasks between agents: create a task for another agent, move it through its states " +
			"(working, input-required, completed, failed, canceled), list, get or cancel tasks, add a message to a task, " +
			"or count your tasks. The action argument chooses; each action takes only its own arguments."},
		func(ctx context.Context, p runtime.Principal, in *taskArgs) (any, error) {
			switch in.Action {
			case contract.TaskActionCreate:
				req := &contract.CreateTaskRequest{ID: in.TaskID, ContextID: in.ContextID, Description: in.Description,
					Parts: taskParts(in.Message, in.Parts)}
				if in.ToAgent != nil {
					req.ToAgent = *in.ToAgent
				}
				task, _, err := svc.Tasks.CreateTask(ctx, p, req)
				return task, err
			case contract.TaskActionUpdate:
				return svc.Tasks.UpdateTask(ctx, p, &contract.UpdateTaskRequest{TaskID: deref(in.TaskID), State: deref(in.State),
					Message: in.Message, ExpectedVersion: in.ExpectedVersion})
			case contract.TaskActionList:
				return svc.Tasks.ListTasks(ctx, p, &contract.ListTasksRequest{Role: in.Role, States: in.States, Cursor: in.Cursor, Limit: in.Limit})
			case contract.TaskActionGet:
				return svc.Tasks.GetTask(ctx, p, &contract.TaskRequest{TaskID: deref(in.TaskID)})
			case contract.TaskActionCancel:
				return svc.Tasks.CancelTask(ctx, p, &contract.CancelTaskRequest{TaskID: deref(in.TaskID), Reason: in.Message})
			case contract.TaskActionMessage:
				return svc.Tasks.MessageTask(ctx, p, &contract.TaskMessageRequest{TaskID: deref(in.TaskID), Parts: taskParts(in.Message, in.Parts)})
			default: // info: admit lets through only the actions of taskActions
				return svc.Tasks.TaskInfo(ctx, p, &contract.TaskInfoRequest{})
			}
		})
}

// taskParts is the parts of a task message: the text of message first, then parts.
func taskParts(message *string, parts []partArgs) []contract.Part {
	var out []contract.Part
	if message != nil {
		out = append(out, contract.Part{Type: contract.PartText, Text: message})
	}
	for _, p := range parts {
		out = append(out, contract.Part{Type: p.Type, Text: p.Text, MimeType: p.MimeType, Data: p.Data, Name: p.Name,
			Bytes: p.Bytes, URI: p.URI})
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
