package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

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

// LoggedEvent is an event as the log holds it: its wire form and the task it names
// ("" for none), which the poll's taskId filter reads.
type LoggedEvent struct {
	Event  contract.Event
	TaskID string
}

// Keeps reports whether q's agent may see e and q's filter keeps it: what the poll
// statement asks of every event it examines, for events read once and handed to many
// polls.
func (q *EventQuery) Keeps(e *LoggedEvent) bool {
	return (len(e.Event.TargetAgents) == 0 || slices.Contains(e.Event.TargetAgents, q.Agent)) &&
		(q.Kinds == nil || slices.Contains(q.Kinds, e.Event.Kind)) &&
		(q.Actors == nil || slices.Contains(q.Actors, e.Event.Actor)) &&
		ConsistencyRank(e.Event.ConsistencyLevel) >= q.MinConsistency &&
		(q.TaskID == "" || e.TaskID == q.TaskID)
}

// EventStore is the scope's event log.
type EventStore interface {
	// AppendEvents appends events to the scope's log, numbered consecutively after the
	// scope's last sequence under the scope's lock, which it holds until the
	// transaction ends: sequence order is commit order, so a poller reading past a
	// sequence never misses an event committed later. After the transaction
	// commits, a hint wakes waiting pollers of the scope on every replica; nothing on
	// the commit path notifies. It returns the sequence of the last event. Errors:
	// SERVICE_UNAVAILABLE.
	AppendEvents(ctx context.Context, scope Scope, events []NewEvent) (last int64, err error)
	// PollEvents runs q once. Errors: SERVICE_UNAVAILABLE.
	PollEvents(ctx context.Context, scope Scope, q EventQuery) (EventBatch, error)
	// TailEvents returns up to limit events of the scope after after, in sequence
	// order, whoever may see them: the one read the waiting polls of a scope share.
	// Errors: SERVICE_UNAVAILABLE.
	TailEvents(ctx context.Context, scope Scope, after int64, limit int) ([]LoggedEvent, error)
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
// Its wake-ups are hints sent after the commit: one may be lost (a replica dying
// between its commit and its hint), so a long poll never relies on them alone.
type EventNotifier interface {
	// Subscribe starts watching scope; the subscription sees every commit from now on.
	Subscribe(scope Scope) EventSubscription
}

// EventSubscription is one waiter's interest in its scope: a scope's feed, shared by
// its long polls, or one stream.
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

// EventOf returns an event of kind made now by actor. targets, when not empty, are the
// only agents that may see it.
func EventOf(kind, actor, correlationID, consistency string, targets []string, payload any, nowMs int64) NewEvent {
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

// Participants returns the distinct agents of a directed event.
func Participants(agents ...string) []string {
	out := slices.Clone(agents)
	slices.Sort(out)
	return slices.Compact(out)
}
