package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// StreamUpdateKind says what a StreamUpdate carries.
type StreamUpdateKind int

const (
	// StreamTask is the task as it stands: the first update of every stream.
	StreamTask StreamUpdateKind = iota
	// StreamStatus is a change of state (Final when the state is terminal).
	StreamStatus
	// StreamMessage is a message added to the task, in the state it is in.
	StreamMessage
	// StreamArtifact is an artifact an update added or replaced.
	StreamArtifact
	// StreamIdle says that nothing happened for the idle interval: a stream writes a
	// keep-alive.
	StreamIdle
)

// StreamUpdate is one step of a followed task.
type StreamUpdate struct {
	Kind StreamUpdateKind
	// Task is the task as first read (StreamTask, StreamStatus, StreamMessage: for
	// its IDs), or as read after the change (StreamArtifact).
	Task *contract.Task
	// State and AtMs are the task's state after the change and the change's time.
	State string
	AtMs  int64
	Final bool
	// Message and MessageIndex are the message and its position (StreamMessage).
	Message      *contract.TaskMessage
	MessageIndex int
	// Artifact is the artifact (StreamArtifact).
	Artifact *contract.TaskArtifact
}

// FollowTask streams a task to one of its participants: first the task as it stands,
// then every change of it in commit order (from the event log, so changes made on any
// replica), until the task is terminal (FollowTask then returns nil), ctx ends or the
// notifier stops (it returns the context's error, or ErrFollowStopped). It holds no
// database connection while it waits: it waits on the notifier, and when it has
// emitted nothing for idle it calls emit with a StreamIdle update and looks at the log
// again, so a lost wake-up delays an update by at most idle. Wake-ups by other tasks'
// events do not put the StreamIdle update off: a busy scope would otherwise keep a
// quiet task's stream silent until a proxy drops it. An error of emit ends the stream
// with it.
// A caller who is not a participant gets NOT_FOUND, as on every task route.
func (a *Events) FollowTask(ctx context.Context, p runtime.Principal, taskID string, idle time.Duration,
	emit func(*StreamUpdate) error) error {
	if err := runtime.ValidateID("taskId", taskID); err != nil {
		return err
	}
	var sub runtime.EventSubscription
	if a.notifier != nil {
		// Before the first read, so a commit between it and the wait wakes the wait.
		sub = a.notifier.Subscribe(p.Scope)
		defer sub.Close()
	}
	// The task's newest event before the task is read: every change after it is in
	// an event after it, and those the read already shows have a version it covers.
	cursor, err := a.stores.Tasks.LastTaskEvent(ctx, p.Scope, taskID)
	if err != nil {
		return err
	}
	t, err := a.stores.Tasks.GetTask(ctx, p.Scope, taskID)
	if err != nil {
		return err
	}
	if !participant(&t, p.Subject) {
		return taskNotFound()
	}
	// The StreamIdle update is due idle after the last update emitted, however often
	// the scope wakes the stream in between.
	var due time.Time
	write := emit
	emit = func(u *StreamUpdate) error {
		due = time.Now().Add(idle)
		return write(u)
	}
	if err := emit(&StreamUpdate{Kind: StreamTask, Task: &t, State: t.State, AtMs: t.UpdatedAtMs, Final: TaskTerminal(t.State)}); err != nil {
		return err
	}
	f := follower{a: a.service, p: p, first: &t, version: t.Version, state: t.State, emit: emit}
	for !TaskTerminal(f.state) {
		events, err := a.stores.Tasks.TaskEvents(ctx, p.Scope, taskID, cursor, followBatch)
		if err != nil {
			return err
		}
		for i := range events {
			if err := f.apply(ctx, &events[i]); err != nil {
				return err
			}
			cursor = events[i].Sequence
			if TaskTerminal(f.state) {
				return nil
			}
		}
		if len(events) == followBatch {
			continue
		}
		if err := a.waitForEvents(ctx, sub, due, emit); err != nil {
			return err
		}
	}
	return nil
}

// followBatch bounds the events one read of a followed task returns.
const followBatch = 100

// ErrFollowStopped ends a stream because the notifier stopped (the replica is
// shutting down).
var ErrFollowStopped = errors.New("the event notifier stopped")

// waitForEvents waits until an event of the scope may have committed, or until due,
// and then emits an idle update.
func (a *service) waitForEvents(ctx context.Context, sub runtime.EventSubscription, due time.Time, emit func(*StreamUpdate) error) error {
	wait, cancel := context.WithDeadline(ctx, due)
	defer cancel()
	if sub != nil && sub.Wait(wait) {
		return nil
	}
	if sub == nil {
		<-wait.Done()
	}
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case wait.Err() == nil:
		return ErrFollowStopped
	}
	return emit(&StreamUpdate{Kind: StreamIdle})
}

// follower turns a followed task's events into updates.
type follower struct {
	a *service
	p runtime.Principal
	// first is the task as the stream first read it.
	first   *contract.Task
	version int64
	state   string
	emit    func(*StreamUpdate) error
}

// taskEventPayload is what the task events' payloads say (docs/a2a.md, Events).
type taskEventPayload struct {
	To           string   `json:"to"`
	Version      int64    `json:"version"`
	ArtifactIDs  []string `json:"artifactIds"`
	MessageIndex int      `json:"messageIndex"`
}

// apply emits the updates of one event; events of a version the stream has already
// shown are skipped.
func (f *follower) apply(ctx context.Context, e *contract.Event) error {
	var payload taskEventPayload
	if err := json.Unmarshal(e.Payload, &payload); err != nil {
		return err
	}
	if payload.Version <= f.version {
		return nil
	}
	f.version = payload.Version
	switch e.Kind {
	case contract.EventTaskUpdated:
		if len(payload.ArtifactIDs) > 0 {
			t, err := f.a.stores.Tasks.GetTask(ctx, f.p.Scope, f.first.ID)
			if err != nil {
				return err
			}
			for _, id := range payload.ArtifactIDs {
				for i := range t.Artifacts {
					if t.Artifacts[i].ArtifactID != id {
						continue
					}
					if err := f.emit(&StreamUpdate{Kind: StreamArtifact, Task: &t, State: payload.To, AtMs: e.CreatedAtMs,
						Artifact: &t.Artifacts[i]}); err != nil {
						return err
					}
				}
			}
		}
		f.state = payload.To
		return f.emit(&StreamUpdate{Kind: StreamStatus, Task: f.first, State: f.state, AtMs: e.CreatedAtMs, Final: TaskTerminal(f.state)})
	case contract.EventTaskMessage:
		m, err := f.a.stores.Tasks.TaskMessage(ctx, f.p.Scope, f.first.ID, payload.MessageIndex)
		if err != nil {
			return err
		}
		return f.emit(&StreamUpdate{Kind: StreamMessage, Task: f.first, State: f.state, AtMs: e.CreatedAtMs,
			MessageIndex: payload.MessageIndex, Message: &m})
	}
	return nil
}
