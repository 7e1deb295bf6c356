package a2a

import (
	"context"
	"sort"
	"sync"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// scopeFeeds are the shared reads of the scopes whose long polls and task streams
// wait on this replica: one feed per scope while it has waiters.
type scopeFeeds struct {
	mu    sync.Mutex
	feeds map[runtime.Scope]*scopeFeed
}

// scopeFeed reads a scope's new events once per wake-up of the scope, and once per
// pollRecheck for a lost hint, on behalf of every long poll and task stream of the
// scope waiting on this replica; each poll keeps what its own filter keeps
// (EventQuery.Keeps), each stream its task's events (taskWatch). Without
// it each wake-up of N waiting polls would cost N statements. The feed subscribes
// before its first read, and that read starts where the poll that made the feed
// stopped, so no commit after that poll's statement goes unseen. Sequence order is
// commit order, so each read after the last sequence the feed holds misses nothing.
type scopeFeed struct {
	owners *scopeFeeds
	scope  runtime.Scope
	// polls is how many polls follow the feed (under owners.mu); the last to leave
	// stops it.
	polls int
	stop  context.CancelFunc

	mu sync.Mutex
	// window holds the events of the last read that found any, the sequences in
	// (from, head].
	from, head int64
	window     []runtime.LoggedEvent
	// moved is closed when a read moved the window on, or when the feed stopped for
	// good (stopped), and then replaced.
	moved   chan struct{}
	stopped bool
}

// join returns the feed of scope, made (and reading from after) when the scope had
// none; leave undoes it.
func (a *service) join(scope runtime.Scope, after int64) *scopeFeed {
	a.feeds.mu.Lock()
	defer a.feeds.mu.Unlock()
	if f := a.feeds.feeds[scope]; f != nil {
		f.polls++
		return f
	}
	ctx, stop := context.WithCancel(context.Background())
	f := &scopeFeed{owners: &a.feeds, scope: scope, polls: 1, stop: stop, from: after, head: after, moved: make(chan struct{})}
	if a.feeds.feeds == nil {
		a.feeds.feeds = map[runtime.Scope]*scopeFeed{}
	}
	a.feeds.feeds[scope] = f
	go f.run(ctx, a.stores.Events, a.notifier.Subscribe(scope))
	return f
}

func (f *scopeFeed) leave() {
	f.owners.mu.Lock()
	defer f.owners.mu.Unlock()
	if f.polls--; f.polls == 0 {
		delete(f.owners.feeds, f.scope)
		f.stop()
	}
}

// run reads after every wake-up and every pollRecheck until the last poll left or
// the notifier stopped. A read that fails is tried again at the next of either: the
// polls wait on.
func (f *scopeFeed) run(ctx context.Context, events runtime.EventStore, sub runtime.EventSubscription) {
	defer sub.Close()
	for {
		f.read(ctx, events)
		recheck, cancel := context.WithTimeout(ctx, pollRecheck)
		woken := sub.Wait(recheck)
		// Wait also reports false when the notifier stopped: then recheck has not
		// ended.
		stopped := !woken && recheck.Err() == nil
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case stopped:
			f.mu.Lock()
			f.stopped = true
			close(f.moved)
			f.mu.Unlock()
			return
		}
	}
}

// read reads after the window up to the log's head, a window at a time.
func (f *scopeFeed) read(ctx context.Context, events runtime.EventStore) {
	for {
		f.mu.Lock()
		after := f.head
		f.mu.Unlock()
		read, err := events.TailEvents(ctx, f.scope, after, pollScanRows)
		if err != nil || len(read) == 0 {
			return
		}
		f.mu.Lock()
		f.from, f.head, f.window = after, read[len(read)-1].Event.Sequence, read
		close(f.moved)
		f.moved = make(chan struct{})
		f.mu.Unlock()
		if len(read) < pollScanRows {
			return
		}
	}
}

// after returns the events of the window after c, waiting for a read that reaches past
// c. held is false when the poll must read the log itself (c is before the window:
// events between are no longer held); ok is false when ctx ended or the notifier
// stopped.
func (f *scopeFeed) after(ctx context.Context, c int64) (events []runtime.LoggedEvent, held, ok bool) {
	for {
		f.mu.Lock()
		moved, stopped := f.moved, f.stopped
		switch {
		case stopped:
			f.mu.Unlock()
			return nil, true, false
		case c < f.from:
			f.mu.Unlock()
			return nil, false, true
		case c < f.head:
			i := sort.Search(len(f.window), func(i int) bool { return f.window[i].Event.Sequence > c })
			events = f.window[i:]
			f.mu.Unlock()
			return events, true, true
		}
		f.mu.Unlock()
		select {
		case <-moved:
		case <-ctx.Done():
			return nil, true, false
		}
	}
}

// position is the sequence through which f has read the scope's log.
func (f *scopeFeed) position() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.head
}

// next waits until f reads something and reports true, or false when ctx ended or
// the notifier stopped.
func (f *scopeFeed) next(ctx context.Context) bool {
	f.mu.Lock()
	moved := f.moved
	f.mu.Unlock()
	select {
	case <-moved:
		f.mu.Lock()
		defer f.mu.Unlock()
		return !f.stopped
	case <-ctx.Done():
		return false
	}
}

// await waits on f for events after q.After that q keeps and returns them (at most
// q.Limit), moving q.After past every event it examined. It returns none with own
// true when the poll must read the log itself, none with own false when waitCtx
// ended or the notifier stopped.
func await(waitCtx context.Context, f *scopeFeed, q *runtime.EventQuery) (matches []contract.Event, own bool) {
	for {
		events, held, ok := f.after(waitCtx, q.After)
		if !ok || !held {
			return nil, !held
		}
		for i := range events {
			if !q.Keeps(&events[i]) {
				continue
			}
			matches = append(matches, events[i].Event)
			if len(matches) == q.Limit {
				q.After = events[i].Event.Sequence
				return matches, false
			}
		}
		q.After = events[len(events)-1].Event.Sequence
		if len(matches) > 0 {
			return matches, false
		}
	}
}
