package a2a

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// Snapshot exports the scope's coordination state as the caller may see it (A2A
// snapshot v1): the first agents by ID, and the newest messages and tasks, each list
// capped at contract.MaxSnapshotItems and in a deterministic order (agents by ID,
// messages by (createdAtMs, id), tasks by creation). Messages are those the caller may
// see at all (sent by it, addressed to it, or broadcast; private ones only as sender or
// recipient); tasks those it takes part in, or every task with a2a:admin. Secrets in
// contents, descriptions, labels and metadata are redacted unless privacy is full,
// which needs a2a:admin.
func (a *Snapshots) Snapshot(ctx context.Context, p runtime.Principal, req *contract.SnapshotRequest) (*contract.Snapshot, error) {
	privacy, err := enumOr("privacy", req.Privacy, contract.SnapshotRedacted, contract.SnapshotModes)
	if err != nil {
		return nil, err
	}
	if privacy == contract.SnapshotFull {
		if err := requireAdmin(p); err != nil {
			return nil, err
		}
	}
	if req.Write && a.artifacts == nil {
		return nil, runtime.Invalid("write", "this server stores no export artifacts; omit write or send false")
	}
	now := a.nowMs()
	agents, _, err := a.stores.Agents.ListAgents(ctx, p.Scope, "", contract.MaxSnapshotItems)
	if err != nil {
		return nil, err
	}
	msgs, err := a.stores.AgentMessages.ReadMessages(ctx, p.Scope, AgentMessageQuery{
		Agent: p.Subject, NowMs: now, Limit: contract.MaxSnapshotItems, Snapshot: true,
	})
	if err != nil {
		return nil, err
	}
	slices.Reverse(msgs)
	tasks, _, _, err := a.stores.Tasks.ListTasks(ctx, p.Scope, TaskQuery{
		Agent: p.Subject, Role: contract.TaskListAny, Limit: contract.MaxSnapshotItems, Newest: true,
		All: p.Can(contract.CapA2AAdmin),
	})
	if err != nil {
		return nil, err
	}
	slices.Reverse(tasks)
	s := &contract.Snapshot{
		SchemaVersion: contract.SnapshotSchemaVersion, CreatedAtMs: now, AgentID: p.Subject, Privacy: privacy,
		Agents: nonNil(agents), Messages: nonNil(msgs), Tasks: nonNil(tasks),
	}
	for i := range s.Agents {
		s.Agents[i].Status = agentStatus(&s.Agents[i], now)
	}
	if privacy == contract.SnapshotRedacted {
		redactSnapshot(s)
	}
	if req.Write {
		// The artifact holds the document without its own ID (docs/export.md).
		data, err := json.Marshal(s)
		if err != nil {
			return nil, fmt.Errorf("encode the snapshot: %w", err)
		}
		id, err := a.artifacts.StoreSnapshot(ctx, p.Scope, data, contract.SnapshotRequest{Privacy: &privacy, Write: true})
		if err != nil {
			return nil, err
		}
		s.ArtifactID = &id
	}
	return s, nil
}

func nonNil[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}

// redactSnapshot redacts every free text of s: message contents, task descriptions,
// agent labels and all metadata.
func redactSnapshot(s *contract.Snapshot) {
	for i := range s.Agents {
		ag := &s.Agents[i]
		ag.AgentType = Redact(ag.AgentType)
		if ag.Role != nil {
			role := Redact(*ag.Role)
			ag.Role = &role
		}
		for j, c := range ag.Capabilities {
			ag.Capabilities[j] = Redact(c)
		}
	}
	for i := range s.Messages {
		m := &s.Messages[i]
		m.Content = Redact(m.Content)
		m.Metadata = RedactJSON(m.Metadata)
	}
	for i := range s.Tasks {
		t := &s.Tasks[i]
		t.Description = Redact(t.Description)
		t.Metadata = RedactJSON(t.Metadata)
	}
}
