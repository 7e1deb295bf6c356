package a2a_test

// Fuzz targets for the A2A request validators, in the harness of fuzz_test.go: a
// refusal names its field and reaches no store; what is runtimetest.Accepted reaches the store
// within every limit of docs/a2a.md.

import (
	"context"
	"encoding/base64"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
	"github.com/agent-context/agent-context/runtime/runtimetest"
)

// stubA2A records what the A2A use cases hand their stores; reads find nothing.
type stubA2A struct {
	a2a.AgentStore
	a2a.AgentMessageStore
	a2a.TaskStore
	calls   int
	posted  contract.AgentMessage
	read    a2a.AgentMessageQuery
	created a2a.NewTask
	listed  a2a.TaskQuery
	agent   contract.Agent
	events  *runtimetest.Events
	polled  runtime.EventQuery
}

func (s *stubA2A) PostMessage(_ context.Context, _ runtime.Scope, m *contract.AgentMessage, _ int, _ int64, announce runtime.NewEvent) (contract.AgentMessage, bool, error) {
	s.calls++
	s.posted = *m
	// The store appends the announcement with the message.
	s.events.Appended = append(s.events.Appended, announce)
	return *m, true, nil
}

func (s *stubA2A) ReadMessages(_ context.Context, _ runtime.Scope, q a2a.AgentMessageQuery) ([]contract.AgentMessage, error) {
	s.calls++
	s.read = q
	return nil, nil
}

func (s *stubA2A) CreateTask(_ context.Context, _ runtime.Scope, t *a2a.NewTask) (contract.Task, string, bool, error) {
	s.calls++
	s.created = *t
	return t.Task, t.CreateDigest, true, nil
}

func (s *stubA2A) ListTasks(_ context.Context, _ runtime.Scope, q a2a.TaskQuery) ([]contract.Task, int64, bool, error) {
	s.calls++
	s.listed = q
	return nil, 0, false, nil
}

func (s *stubA2A) CountTasks(context.Context, runtime.Scope, string) (a2a.TaskCounts, error) {
	return a2a.TaskCounts{}, nil
}

func (s *stubA2A) RegisterAgent(_ context.Context, _ runtime.Scope, a *contract.Agent) (contract.Agent, *contract.Agent, error) {
	s.calls++
	s.agent = *a
	return *a, nil, nil
}

func (s *stubA2A) ListAgents(context.Context, runtime.Scope, string, int) ([]contract.Agent, bool, error) {
	s.calls++
	return nil, false, nil
}

// stubPoll is an event log that returns nothing and is always at its head.
type stubPoll struct {
	runtimetest.Events
	owner *stubA2A
}

func (s *stubPoll) PollEvents(_ context.Context, _ runtime.Scope, q runtime.EventQuery) (runtime.EventBatch, error) {
	s.owner.calls++
	s.owner.polled = q
	return runtime.EventBatch{Next: q.After, AtHead: true}, nil
}

// a2aFuzzCaller is a trusted-header caller (it may name any sender), so a refusal is
// always about the body.
var a2aFuzzCaller = runtime.Principal{Scope: runtime.Scope{TenantID: "t", ProjectID: "p"}, Subject: "agent-1",
	TrustedHeaders: true, Capabilities: map[string]bool{contract.CapA2AAdmin: true}}

func setupA2AFuzz() (*a2a.Coordination, *stubA2A) {
	s := &stubA2A{}
	poll := &stubPoll{owner: s}
	s.events = &poll.Events
	db := runtimetest.DB[a2a.Stores]{S: a2a.Stores{Agents: s, AgentMessages: s, Tasks: s, Events: poll}}
	return a2a.NewCoordination(a2a.Config{DB: db, Cursors: runtime.NewCursorCodec([]byte(strings.Repeat("k", 32)))}), s
}

// requireText asserts an runtimetest.Accepted free text: valid UTF-8 without NUL, within maxBytes.
func requireText(t *testing.T, s string, maxBytes int) {
	t.Helper()
	require.True(t, utf8.ValidString(s))
	require.NotContains(t, s, "\x00")
	require.LessOrEqual(t, len(s), maxBytes)
}

func requireOptionalID(t *testing.T, field string, id *string) {
	t.Helper()
	if id != nil {
		runtimetest.RequireID(t, field, *id)
	}
}

func FuzzA2APostMessage(f *testing.F) {
	runtimetest.FuzzBody(f, func(t *testing.T, req *contract.PostMessageRequest) {
		a, s := setupA2AFuzz()
		if _, err := a.Messages.PostMessage(context.Background(), a2aFuzzCaller, req); !runtimetest.Accepted(t, err, s.calls) {
			return
		}
		m := s.posted
		runtimetest.RequireID(t, "messageId", m.ID)
		runtimetest.RequireID(t, "correlationId", m.CorrelationID)
		runtimetest.RequireID(t, "fromAgent", m.FromAgent)
		requireOptionalID(t, "toAgent", m.ToAgent)
		requireOptionalID(t, "taskId", m.TaskID)
		require.Contains(t, contract.MessageCategories, m.Category)
		require.Contains(t, contract.MessagePriorities, m.Priority)
		require.Contains(t, contract.PrivacyLevels, m.Privacy)
		if m.Privacy == contract.PrivacyPrivate {
			require.NotNil(t, m.ToAgent, "no private broadcasts")
		}
		if m.ToAgent != nil {
			require.NotEqual(t, m.FromAgent, *m.ToAgent)
		}
		require.NotEmpty(t, m.Content)
		requireText(t, m.Content, contract.MaxAgentMessageContentBytes)
		ttl := m.ExpiresAtMs - m.CreatedAtMs
		require.Zero(t, ttl%(3600*1000))
		require.GreaterOrEqual(t, ttl/(3600*1000), int64(1))
		require.LessOrEqual(t, ttl/(3600*1000), int64(contract.MaxTTLHours))
		runtimetest.RequireStoredJSON(t, m.Metadata, contract.MaxMetadataBytes)
		require.Len(t, s.events.Appended, 1, "an runtimetest.Accepted message is announced")
	})
}

func FuzzA2AReadMessages(f *testing.F) {
	runtimetest.FuzzBody(f, func(t *testing.T, req *contract.ReadMessagesRequest) {
		a, s := setupA2AFuzz()
		if _, err := a.Messages.ReadMessages(context.Background(), a2aFuzzCaller, req); !runtimetest.Accepted(t, err, s.calls) {
			return
		}
		q := s.read
		require.Equal(t, a2aFuzzCaller.Subject, q.Agent)
		runtimetest.RequireLimit(t, q.Limit, req.Limit, contract.DefaultA2ALimit, contract.MaxA2ALimit)
		if q.Category != "" {
			require.Contains(t, contract.MessageCategories, q.Category)
		}
		if q.TaskID != "" {
			runtimetest.RequireID(t, "taskId", q.TaskID)
		}
		require.False(t, q.Snapshot)
	})
}

// requireParts asserts runtimetest.Accepted parts: at most MaxTaskParts, each of one type with its
// members only, base64 that decodes, data that is one compact JSON value.
func requireParts(t *testing.T, parts []contract.Part) {
	t.Helper()
	require.LessOrEqual(t, len(parts), contract.MaxTaskParts)
	for _, p := range parts {
		require.Contains(t, contract.PartTypes, p.Type)
		switch p.Type {
		case contract.PartText:
			require.NotNil(t, p.Text)
			require.Nil(t, p.Data)
			require.Nil(t, p.Bytes)
			require.Nil(t, p.URI)
		case contract.PartData:
			require.Nil(t, p.Text)
			runtimetest.RequireStoredJSON(t, p.Data, contract.MaxTaskPartBytes)
		case contract.PartFile:
			require.Nil(t, p.Text)
			require.Nil(t, p.Data)
			require.True(t, (p.Bytes == nil) != (p.URI == nil))
			if p.Bytes != nil {
				_, err := base64.StdEncoding.DecodeString(*p.Bytes)
				require.NoError(t, err)
			}
		}
	}
}

func FuzzA2ACreateTask(f *testing.F) {
	runtimetest.FuzzBody(f, func(t *testing.T, req *contract.CreateTaskRequest) {
		a, s := setupA2AFuzz()
		if _, _, err := a.Tasks.CreateTask(context.Background(), a2aFuzzCaller, req); !runtimetest.Accepted(t, err, s.calls) {
			return
		}
		task := s.created.Task
		runtimetest.RequireID(t, "id", task.ID)
		runtimetest.RequireID(t, "contextId", task.ContextID)
		runtimetest.RequireID(t, "toAgent", task.ToAgent)
		require.NotEqual(t, task.FromAgent, task.ToAgent)
		require.Equal(t, contract.TaskCreated, task.State)
		require.EqualValues(t, 1, task.Version)
		require.NotEmpty(t, task.Description)
		requireText(t, task.Description, contract.MaxTaskDescriptionBytes)
		require.Len(t, task.History, 1)
		require.LessOrEqual(t, len(task.Messages), 1)
		for _, m := range task.Messages {
			require.Equal(t, contract.TaskRoleUser, m.Role)
			requireParts(t, m.Parts)
		}
		require.LessOrEqual(t, s.created.PartsBytes, int64(contract.MaxTaskPartsBytes))
		require.Len(t, s.created.CreateDigest, 64)
		runtimetest.RequireStoredJSON(t, task.Metadata, contract.MaxMetadataBytes)
		require.Equal(t, s.created.ListSeq, int64(len(s.events.Appended)), "the task lists at its event's sequence")
	})
}

func FuzzA2AListTasks(f *testing.F) {
	runtimetest.FuzzBody(f, func(t *testing.T, req *contract.ListTasksRequest) {
		a, s := setupA2AFuzz()
		if _, err := a.Tasks.ListTasks(context.Background(), a2aFuzzCaller, req); !runtimetest.Accepted(t, err, s.calls) {
			return
		}
		q := s.listed
		require.Contains(t, contract.TaskListRoles, q.Role)
		require.True(t, slices.IsSorted(q.States))
		require.Len(t, slices.Compact(slices.Clone(q.States)), len(q.States))
		for _, st := range q.States {
			require.Contains(t, contract.TaskStates, st)
		}
		runtimetest.RequireLimit(t, q.Limit, req.Limit, contract.DefaultA2ALimit, contract.MaxA2ALimit)
		require.False(t, q.All)
	})
}

func FuzzA2ARegisterAgent(f *testing.F) {
	runtimetest.FuzzBody(f, func(t *testing.T, req *contract.RegisterAgentRequest) {
		a, s := setupA2AFuzz()
		if _, err := a.Agents.RegisterAgent(context.Background(), a2aFuzzCaller, req); !runtimetest.Accepted(t, err, s.calls) {
			return
		}
		ag := s.agent
		runtimetest.RequireID(t, "agentId", ag.AgentID)
		require.NotEmpty(t, ag.AgentType)
		require.LessOrEqual(t, len(ag.Capabilities), contract.MaxAgentLabels)
		require.LessOrEqual(t, len(ag.SupportedVersions), contract.MaxAgentLabels)
		require.NotNil(t, ag.Capabilities)
		for _, v := range ag.SupportedVersions {
			require.Regexp(t, `^[0-9]+\.[0-9]+$`, v)
		}
	})
}

// FuzzA2APollEvents: an runtimetest.Accepted poll examines a bounded window, returns at most
// 1,000 events, filters by known kinds and levels only, and answers a cursor that
// resumes at the position it examined up to.
func FuzzA2APollEvents(f *testing.F) {
	runtimetest.FuzzBody(f, func(t *testing.T, req *contract.PollEventsRequest) {
		if req.WaitMs != nil && *req.WaitMs > 0 {
			return // waiting is the hub's, not the validator's; without a notifier it is no wait
		}
		a, s := setupA2AFuzz()
		page, err := a.Events.PollEvents(context.Background(), a2aFuzzCaller, req)
		if !runtimetest.Accepted(t, err, s.calls) {
			return
		}
		q := s.polled
		require.Equal(t, a2aFuzzCaller.Subject, q.Agent)
		runtimetest.RequireLimit(t, q.Limit, req.Limit, contract.DefaultA2ALimit, contract.MaxPollLimit)
		require.GreaterOrEqual(t, q.Scan, q.Limit)
		for _, k := range q.Kinds {
			require.Contains(t, contract.EventKinds, k)
		}
		for _, actor := range q.Actors {
			runtimetest.RequireID(t, "actor", actor)
		}
		require.GreaterOrEqual(t, q.MinConsistency, 0)
		require.Less(t, q.MinConsistency, len(contract.ConsistencyLevels))
		again, err := a.Events.PollEvents(context.Background(), a2aFuzzCaller, &contract.PollEventsRequest{Cursor: &page.NextCursor})
		require.NoError(t, err)
		require.Equal(t, page.NextCursor, again.NextCursor)
		require.Equal(t, q.After, s.polled.After)
	})
}

// FuzzRedactJSON: redacting a JSON value gives a JSON value.
func FuzzRedactJSON(f *testing.F) {
	f.Add([]byte(`{"password":"x","note":"Bearer abc","n":[1,2.50,{"apiKey":{"k":1}}]}`))
	f.Add([]byte(`"AKIAIOSFODNN7EXAMPLE"`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !jsontext.Value(raw).IsValid() {
			return
		}
		out := a2a.RedactJSON(raw)
		require.True(t, jsontext.Value(out).IsValid(), "%q → %q", raw, out)
	})
}
