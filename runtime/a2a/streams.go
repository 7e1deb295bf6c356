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
// database connection while it waits: it follows its scope's feed (the one read per
// wake-up that every waiter of the scope on this replica shares, see scopeFeed) and
// picks its task's events out of it, and when it has emitted nothing for idle it calls
// emit with a StreamIdle update. Wake-ups by other tasks' events do not put the
// StreamIdle update off: a busy scope would otherwise keep a quiet task's stream silent
// until a proxy drops it. An error of emit ends the stream with it.
// A caller who is not a participant gets NOT_FOUND, as on every task route.
func (a *Events) FollowTask(ctx context.Context, p runtime.Principal, taskID string, idle time.Duration,
	emit func(*StreamUpdate) error) error {
	if err := runtime.ValidateID("taskId", taskID); err != nil {
		return err
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
	w := taskWatch{a: a.service, scope: p.Scope, taskID: taskID, cursor: cursor, seen: -1}
	defer w.close()
	for !TaskTerminal(f.state) {
		events, err := w.next(ctx, due)
		if err != nil {
			return err
		}
		if events == nil {
			if err := emit(&StreamUpdate{Kind: StreamIdle}); err != nil {
				return err
			}
			continue
		}
		for i := range events {
			if err := f.apply(ctx, &events[i]); err != nil {
				return err
			}
			if TaskTerminal(f.state) {
				return nil
			}
		}
	}
	return nil
}

// followBatch bounds the events one read of a followed task returns.
const followBatch = 100

// ErrFollowStopped ends a stream because the notifier stopped (the replica is
// shutting down).
var ErrFollowStopped = errors.New("the event notifier stopped")

// taskWatch finds a followed task's next events: in its scope's feed while the stream
// keeps up with it, by a read of its own otherwise (at the start, after more than a
// window of the scope's events went by unseen, or without a notifier).
type taskWatch struct {
	a      *service
	scope  runtime.Scope
	taskID string
	// cursor is the sequence of the last event of the task returned.
	cursor int64
	// seen is the scope's sequence through which every event of the task has been
	// returned; -1 when the watch must read the log itself.
	seen int64
	feed *scopeFeed
}

// next returns the task's events after the cursor, waiting for them until due; none
// (and no error) when due passed first, ErrFollowStopped when the notifier stopped.
func (w *taskWatch) next(ctx context.Context, due time.Time) ([]contract.Event, error) {
	for {
		if w.seen < 0 {
			head := int64(-1)
			if w.feed != nil {
				head = w.feed.position()
			}
			events, err := w.a.stores.Tasks.TaskEvents(ctx, w.scope, w.taskID, w.cursor, followBatch)
			if err != nil {
				return nil, err
			}
			if len(events) > 0 {
				w.cursor = events[len(events)-1].Sequence
			}
			if len(events) == followBatch {
				return events, nil
			}
			// The read reached the log's head, which was at or past the feed's.
			w.seen = max(head, w.cursor)
			if len(events) > 0 {
				return events, nil
			}
		}
		if w.a.notifier == nil {
			return nil, waitUntil(ctx, due)
		}
		if w.feed == nil {
			// A new feed reads from the cursor on; one that was there has been
			// subscribed since before the read, and is read again if it is past it.
			w.feed = w.a.join(w.scope, w.cursor)
			w.seen = w.cursor
		}
		wait, cancel := context.WithDeadline(ctx, due)
		window, held, ok := w.feed.after(wait, w.seen)
		waited := wait.Err()
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case !ok && waited == nil:
			return nil, ErrFollowStopped
		case !ok:
			return nil, nil
		case !held:
			w.seen = -1
			continue
		}
		var mine []contract.Event
		for i := range window {
			if window[i].TaskID == w.taskID && window[i].Event.Sequence > w.cursor {
				mine = append(mine, window[i].Event)
			}
		}
		w.seen = window[len(window)-1].Event.Sequence
		if len(mine) > 0 {
			w.cursor = mine[len(mine)-1].Sequence
			return mine, nil
		}
	}
}

func (w *taskWatch) close() {
	if w.feed != nil {
		w.feed.leave()
	}
}

// waitUntil waits until due, and returns ctx's error if it ended first.
func waitUntil(ctx context.Context, due time.Time) error {
	t := time.NewTimer(time.Until(due))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
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
