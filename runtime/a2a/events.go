package a2a

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// pollScanRows bounds the events one poll statement examines, so a filter that
// matches rarely costs bounded work per statement (the cursor still advances past
// what it examined).
const pollScanRows = 5000

// pollRecheck is how long a long poll waits for a wake-up before it looks at the log
// again on its own: wake-ups are hints sent after commits, and a lost one (a replica
// that died between its commit and its hint, a listener reconnecting) may delay an
// answer by this much, never lose it.
const pollRecheck = time.Second

// eventsBinding binds an events cursor to the scope only: it is a position in the
// scope's log, valid with any filter (docs/a2a.md).
func eventsBinding(scope runtime.Scope) runtime.CursorBinding {
	return runtime.CursorBinding{Kind: "a2a-events", Scope: scope}
}

// PollEvents returns the caller's next events after the cursor that match the filter,
// waiting up to waitMs for one to commit when there is none yet. The next cursor
// advances past every event examined, so a filtered poller never reads a row twice.
func (a *Events) PollEvents(ctx context.Context, p runtime.Principal, req *contract.PollEventsRequest) (*contract.EventPage, error) {
	q, err := a.eventQuery(p, req)
	if err != nil {
		return nil, err
	}
	var wait time.Duration
	if req.WaitMs != nil {
		if *req.WaitMs < 0 || *req.WaitMs > contract.MaxPollWaitMs {
			return nil, runtime.TooMany("waitMs", contract.MaxPollWaitMs, "waitMs must be between 0 and %d", contract.MaxPollWaitMs)
		}
		wait = time.Duration(*req.WaitMs) * time.Millisecond
	}
	if wait > 0 {
		release, err := a.AdmitWaiter(p)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	waitCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var feed *scopeFeed
	for first := true; ; first = false {
		batch, err := a.stores.Events.PollEvents(ctx, p.Scope, q)
		if err != nil {
			// A read after the first may meet the database restarting; the poll reads
			// again once its feed read something.
			if first || feed == nil || runtime.ErrorCode(err) != contract.CodeServiceUnavailable || !feed.next(waitCtx) {
				return nil, err
			}
			continue
		}
		q.After = batch.Next
		if len(batch.Events) > 0 || wait == 0 || a.notifier == nil || waitCtx.Err() != nil {
			return a.eventPage(p.Scope, batch.Events, q.After), nil
		}
		if !batch.AtHead {
			continue
		}
		if feed == nil {
			// Joined after the first statement: a new feed reads from where it
			// stopped, an existing one has been subscribed since before it.
			feed = a.join(p.Scope, q.After)
			defer feed.leave()
		}
		matches, own := await(waitCtx, feed, &q)
		if !own {
			return a.eventPage(p.Scope, matches, q.After), nil
		}
	}
}

// AdmitWaiter counts one more waiter of the caller's tenant on this replica and
// returns its release, or RATE_LIMITED (level "waiters") past the tenant's bound.
// A long poll admits itself; a stream's door admits it before it does anything else
// of the request (a message/stream sends its message first) and releases it when the
// stream ends.
func (a *Events) AdmitWaiter(p runtime.Principal) (release func(), err error) {
	return a.waiters.Admit(p.Scope.TenantID)
}

// Waiters is the number of streams and long polls waiting on this replica now.
func (a *Events) Waiters() int { return a.waiters.Count() }

func (a *service) eventPage(scope runtime.Scope, events []contract.Event, next int64) *contract.EventPage {
	if events == nil {
		events = []contract.Event{}
	}
	return &contract.EventPage{Events: events, NextCursor: a.cursors.Encode(eventsBinding(scope), next)}
}

// eventQuery validates a poll request and returns its first query.
func (a *service) eventQuery(p runtime.Principal, req *contract.PollEventsRequest) (runtime.EventQuery, error) {
	q := runtime.EventQuery{Agent: p.Subject, Scan: pollScanRows}
	var err error
	if q.Limit, err = runtime.OptionalCount("limit", req.Limit, contract.DefaultA2ALimit, contract.MaxPollLimit); err != nil {
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
		return q, runtime.TooMany("filter.kinds", int64(len(contract.EventKinds)), "filter.kinds holds at most %d kinds", len(contract.EventKinds))
	}
	for i, k := range f.Kinds {
		if !slices.Contains(contract.EventKinds, k) {
			return q, runtime.OneOf(fmt.Sprintf("filter.kinds[%d]", i), contract.EventKinds)
		}
	}
	if len(f.Actors) > contract.MaxPollActors {
		return q, runtime.TooMany("filter.actors", contract.MaxPollActors, "filter.actors holds at most %d agents", contract.MaxPollActors)
	}
	for i, actor := range f.Actors {
		if err := runtime.ValidateID(fmt.Sprintf("filter.actors[%d]", i), actor); err != nil {
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
		q.MinConsistency = runtime.ConsistencyRank(level)
	}
	if f.TaskID != nil {
		if err := runtime.ValidateID("filter.taskId", *f.TaskID); err != nil {
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
