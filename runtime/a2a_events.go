package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/agent-context/agent-context/contract"
)

// NewEvent is an event to append: its wire form (the store assigns Sequence) and the
// IDs the log keeps beside it, for the poll's taskId filter and for conversation
// deletion, which removes every event naming a deleted conversation.
type NewEvent struct {
	Event          contract.Event
	TaskID         string
	ConversationID string
}

// EventQuery selects the events one poll statement examines: at most Scan events of
// the scope after After, in sequence order, of which it returns the first Limit that
// Agent may see and the filter keeps.
type EventQuery struct {
	Agent          string
	After          int64
	Limit          int
	Scan           int
	Kinds          []string
	Actors         []string
	MinConsistency int
	TaskID         string
}

// EventBatch is what one poll statement found. Next is the sequence of the last event
// examined (the query's After when none was): past every event examined, matching or
// not, but not past a match that did not fit Limit. AtHead reports that every event
// committed when the statement ran was examined.
type EventBatch struct {
	Events []contract.Event
	Next   int64
	AtHead bool
}

// EventStore is the scope's event log.
type EventStore interface {
	// AppendEvents appends events to the scope's log, numbered consecutively after the
	// scope's last sequence under the scope's lock, which it holds until the
	// transaction ends: sequence order is commit order, so a poller reading past a
	// sequence never misses an event committed later. When the transaction commits,
	// waiting pollers of the scope on every replica are woken. It returns the sequence
	// of the last event. Errors: SERVICE_UNAVAILABLE.
	AppendEvents(ctx context.Context, scope Scope, events []NewEvent) (last int64, err error)
	// PollEvents runs q once. Errors: SERVICE_UNAVAILABLE.
	PollEvents(ctx context.Context, scope Scope, q EventQuery) (EventBatch, error)
	// PurgeEvents deletes up to limit events created before beforeMs and reports how
	// many it deleted. Errors: SERVICE_UNAVAILABLE.
	PurgeEvents(ctx context.Context, scope Scope, beforeMs int64, limit int) (int, error)
	// SweepScopes returns up to limit scopes with coordination state that the
	// sweeper has not finished since sinceMs, in key order. Errors:
	// SERVICE_UNAVAILABLE.
	SweepScopes(ctx context.Context, sinceMs int64, limit int) ([]Scope, error)
	// MarkSwept records that the sweeper finished scope at nowMs. Errors:
	// SERVICE_UNAVAILABLE.
	MarkSwept(ctx context.Context, scope Scope, nowMs int64) error
}

// EventNotifier wakes long polls when events of their scope commit, on any replica.
type EventNotifier interface {
	// Subscribe starts watching scope; the subscription sees every commit from now on.
	Subscribe(scope Scope) EventSubscription
}

// EventSubscription is one long poll's interest in its scope.
type EventSubscription interface {
	// Wait blocks until an event of the scope may have committed since the
	// subscription began or since Wait last returned true (wake-ups in between are
	// coalesced, never lost), and reports true; or it reports false when ctx ends or
	// the notifier stops. After the notifier lost its database connection and
	// regained it, every subscription wakes, since a commit in between went unseen.
	Wait(ctx context.Context) bool
	// Close ends the subscription.
	Close()
}

// pollScanRows bounds the events one poll statement examines, so a filter that
// matches rarely costs bounded work per statement (the cursor still advances past
// what it examined).
const pollScanRows = 5000

// ConsistencyRank orders the consistency levels, local < eventual < strong, as 0, 1
// and 2: the log stores and filters ranks.
func ConsistencyRank(level string) int {
	return max(slices.Index(contract.ConsistencyLevels, level), 0)
}

// ConsistencyLevel is the level of a rank of ConsistencyRank.
func ConsistencyLevel(rank int) string {
	if rank < 0 || rank >= len(contract.ConsistencyLevels) {
		return contract.ConsistencyLocal
	}
	return contract.ConsistencyLevels[rank]
}

// eventsBinding binds an events cursor to the scope only: it is a position in the
// scope's log, valid with any filter (07-a2a.md).
func eventsBinding(scope Scope) CursorBinding {
	return CursorBinding{Kind: "a2a-events", Scope: scope}
}

// PollEvents returns the caller's next events after the cursor that match the filter,
// waiting up to waitMs for one to commit when there is none yet. The next cursor
// advances past every event examined, so a filtered poller never reads a row twice.
func (a *A2A) PollEvents(ctx context.Context, p Principal, req *contract.PollEventsRequest) (*contract.EventPage, error) {
	q, err := a.eventQuery(p, req)
	if err != nil {
		return nil, err
	}
	var wait time.Duration
	if req.WaitMs != nil {
		if *req.WaitMs < 0 || *req.WaitMs > contract.MaxPollWaitMs {
			return nil, TooMany("waitMs", contract.MaxPollWaitMs, "waitMs must be between 0 and %d", contract.MaxPollWaitMs)
		}
		wait = time.Duration(*req.WaitMs) * time.Millisecond
	}
	var sub EventSubscription
	if wait > 0 && a.notifier != nil {
		// Subscribed before the first query, so a commit between that query and the
		// wait still wakes it.
		sub = a.notifier.Subscribe(p.Scope)
		defer sub.Close()
	}
	waitCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for first := true; ; first = false {
		batch, err := a.stores.Events.PollEvents(ctx, p.Scope, q)
		if err != nil {
			// A re-check after a wake-up may meet the database restarting; the
			// notifier wakes the poll again once it is back.
			if first || sub == nil || ErrorCode(err) != contract.CodeServiceUnavailable || !sub.Wait(waitCtx) {
				return nil, err
			}
			continue
		}
		q.After = batch.Next
		if len(batch.Events) > 0 || sub == nil || waitCtx.Err() != nil {
			return a.eventPage(p.Scope, batch.Events, q.After), nil
		}
		if !batch.AtHead {
			continue
		}
		if !sub.Wait(waitCtx) {
			return a.eventPage(p.Scope, nil, q.After), nil
		}
	}
}

func (a *A2A) eventPage(scope Scope, events []contract.Event, next int64) *contract.EventPage {
	if events == nil {
		events = []contract.Event{}
	}
	return &contract.EventPage{Events: events, NextCursor: a.cursors.Encode(eventsBinding(scope), next)}
}

// eventQuery validates a poll request and returns its first query.
func (a *A2A) eventQuery(p Principal, req *contract.PollEventsRequest) (EventQuery, error) {
	q := EventQuery{Agent: p.Subject, Scan: pollScanRows}
	var err error
	if q.Limit, err = optionalCount("limit", req.Limit, contract.DefaultA2ALimit, contract.MaxPollLimit); err != nil {
		return q, err
	}
	if req.Cursor != nil {
		if q.After, err = a.cursors.Decode(eventsBinding(p.Scope), *req.Cursor); err != nil {
			return q, err
		}
	}
	f := req.Filter
	if f == nil {
		return q, nil
	}
	if len(f.Kinds) > len(contract.EventKinds) {
		return q, TooMany("filter.kinds", int64(len(contract.EventKinds)), "filter.kinds holds at most %d kinds", len(contract.EventKinds))
	}
	for i, k := range f.Kinds {
		if !slices.Contains(contract.EventKinds, k) {
			return q, oneOf(fmt.Sprintf("filter.kinds[%d]", i), contract.EventKinds)
		}
	}
	if len(f.Actors) > contract.MaxPollActors {
		return q, TooMany("filter.actors", contract.MaxPollActors, "filter.actors holds at most %d agents", contract.MaxPollActors)
	}
	for i, actor := range f.Actors {
		if err := ValidateID(fmt.Sprintf("filter.actors[%d]", i), actor); err != nil {
			return q, err
		}
	}
	// An empty list filters nothing, like an absent one.
	q.Kinds, q.Actors = nonEmpty(f.Kinds), nonEmpty(f.Actors)
	if f.MinConsistency != nil {
		level, err := enumOr("filter.minConsistency", f.MinConsistency, "", contract.ConsistencyLevels)
		if err != nil {
			return q, err
		}
		q.MinConsistency = ConsistencyRank(level)
	}
	if f.TaskID != nil {
		if err := ValidateID("filter.taskId", *f.TaskID); err != nil {
			return q, err
		}
		q.TaskID = *f.TaskID
	}
	return q, nil
}

func nonEmpty(v []string) []string {
	if len(v) == 0 {
		return nil
	}
	return slices.Clone(v)
}

// newEvent returns an event of kind made now by actor. targets, when not empty, are the
// only agents that may see it.
func newEvent(kind, actor, correlationID, consistency string, targets []string, payload any, nowMs int64) NewEvent {
	raw, err := json.Marshal(payload)
	if err != nil {
		// Payloads are structs of strings and integers.
		panic(fmt.Sprintf("encode the payload of a %s event: %v", kind, err))
	}
	if targets == nil {
		targets = []string{}
	}
	return NewEvent{Event: contract.Event{
		ID: NewID(), Kind: kind, Actor: actor, CorrelationID: correlationID, TargetAgents: targets,
		ConsistencyLevel: consistency, Payload: raw, CreatedAtMs: nowMs,
	}}
}

// participants returns the distinct agents of a directed event.
func participants(agents ...string) []string {
	out := slices.Clone(agents)
	slices.Sort(out)
	return slices.Compact(out)
}

// WindowCreatedEvent is the event a window's creation appends in the transaction that
// stores it: broadcast, consistency local, correlated by the window's conversation.
func WindowCreatedEvent(actor string, w *contract.Window, nowMs int64) NewEvent {
	e := newEvent(contract.EventWindowCreated, actor, w.Conversation.ConversationID, contract.ConsistencyLocal, nil,
		struct {
			WindowID       string `json:"windowId"`
			ConversationID string `json:"conversationId"`
			Stage          string `json:"stage"`
		}{w.ID, w.Conversation.ConversationID, w.Stage}, nowMs)
	e.ConversationID = w.Conversation.ConversationID
	return e
}

// EntryWrittenEvent is the event the entries use cases append for every entry they
// create or change (action: created, merged, corrected, expired, ...): broadcast,
// consistency eventual, correlated by the entry's conversation when it has one, else
// by the entry. It must be appended through tx.Events.AppendEvents inside the same
// UnitOfWork.WithinTx as the entry's write, as the last statement before the commit
// (the append takes the scope's event lock and holds it until the commit), so the
// event exists exactly when the entry does. conversationID "" means none; with one,
// deleting the conversation removes the event.
func EntryWrittenEvent(actor, entryID, conversationID, action string, nowMs int64) NewEvent {
	correlation := conversationID
	if correlation == "" {
		correlation = entryID
	}
	var conversation *string
	if conversationID != "" {
		conversation = &conversationID
	}
	e := newEvent(contract.EventEntryWritten, actor, correlation, contract.ConsistencyEventual, nil,
		struct {
			EntryID        string  `json:"entryId"`
			ConversationID *string `json:"conversationId"`
			Action         string  `json:"action"`
		}{entryID, conversation, action}, nowMs)
	e.ConversationID = conversationID
	return e
}
