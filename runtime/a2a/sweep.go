package a2a

import (
	"context"
	"time"

	"github.com/agent-context/agent-context/runtime"
)

// A2ASweepJob is the periodic job that purges expired messages, events past their
// retention (and the envelopes they announce) and terminal tasks past theirs, in every scope (SweepA2A).
type A2ASweepJob struct{}

// Kind implements Job.
func (A2ASweepJob) Kind() string { return "agent_context_a2a_sweep" }

// sweepScopeBatch is how many scopes one listing of the sweeper returns.
const sweepScopeBatch = 100

// SweepA2A purges, scope by scope, what outlived its time: messages past their TTL
// (and read marks left without their message), events past the event retention and
// tasks terminal for longer than the task retention, each in statements of at most the sweep batch. It works until every scope
// not finished since since is done (true) or deadline has passed (false: a later run
// continues with the scopes left, since finished ones are marked). An error is
// transient.
func (a *Sweeper) SweepA2A(ctx context.Context, since, deadline time.Time) (bool, error) {
	for {
		scopes, err := a.stores.Events.SweepScopes(ctx, since.UnixMilli(), sweepScopeBatch)
		if err != nil || len(scopes) == 0 {
			return err == nil, err
		}
		for _, scope := range scopes {
			done, err := a.sweepScope(ctx, scope, deadline)
			if err != nil || !done {
				return false, err
			}
			// Never before since, whatever the clocks say: the next listing must skip it.
			if err := a.stores.Events.MarkSwept(ctx, scope, max(a.nowMs(), since.UnixMilli())); err != nil {
				return false, err
			}
		}
	}
}

// sweepScope purges one scope until nothing is left or deadline has passed.
func (a *service) sweepScope(ctx context.Context, scope runtime.Scope, deadline time.Time) (bool, error) {
	now := a.clock.Now()
	purges := []func() (int, error){
		func() (int, error) {
			return a.stores.AgentMessages.PurgeExpiredMessages(ctx, scope, now.UnixMilli(), a.sweepBatch)
		},
		func() (int, error) { return a.stores.AgentMessages.PurgeOrphanMarks(ctx, scope, a.sweepBatch) },
		func() (int, error) {
			return a.stores.Events.PurgeEvents(ctx, scope, now.Add(-a.eventRetention).UnixMilli(), a.sweepBatch)
		},
		func() (int, error) {
			// An envelope's record outlives its expiry (after which a replay executes
			// nothing anyway) for as long as the events announcing it.
			return a.stores.Envelopes.PurgeEnvelopes(ctx, scope, now.UnixMilli(), now.Add(-a.eventRetention).UnixMilli(), a.sweepBatch)
		},
		func() (int, error) {
			return a.stores.Tasks.PurgeTerminalTasks(ctx, scope, now.Add(-a.taskRetention).UnixMilli(), a.sweepBatch)
		},
	}
	for _, purge := range purges {
		for {
			n, err := purge()
			if err != nil {
				return false, err
			}
			if n < a.sweepBatch {
				break
			}
			if !a.clock.Now().Before(deadline) {
				return false, nil
			}
		}
	}
	return true, nil
}
