package runtime_test

import (
	"context"

	"github.com/agent-context/agent-context/runtime"
)

// stubDB is a unit of work over stub stores: WithinTx runs the function on the same
// stores, without a transaction, for use-case tests that need no database.
type stubDB[S any] struct {
	stores S
}

func (d stubDB[S]) Stores() S { return d.stores }

func (d stubDB[S]) WithinTx(ctx context.Context, fn func(ctx context.Context, tx S) error) error {
	return fn(ctx, d.stores)
}

// stubEvents records the events appended to it; it has no log to poll.
type stubEvents struct {
	runtime.EventStore
	appended []runtime.NewEvent
}

func (s *stubEvents) AppendEvents(_ context.Context, _ runtime.Scope, events []runtime.NewEvent) (int64, error) {
	s.appended = append(s.appended, events...)
	return int64(len(s.appended)), nil
}
