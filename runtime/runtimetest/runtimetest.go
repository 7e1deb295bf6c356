// Package runtimetest holds in-memory stand-ins for the runtime's shared ports, for
// use-case tests that need no database.
package runtimetest

import (
	"context"
	"time"

	"github.com/agent-context/agent-context/runtime"
)

// DB is a unit of work over stub stores: WithinTx runs the function on the same
// stores, without a transaction.
type DB[S any] struct {
	S S
}

// Stores implements runtime.UnitOfWork.
func (d DB[S]) Stores() S { return d.S }

// WithinTx implements runtime.UnitOfWork.
func (d DB[S]) WithinTx(ctx context.Context, fn func(ctx context.Context, tx S) error) error {
	return fn(ctx, d.S)
}

// Events records the events appended to it; it has no log to poll.
type Events struct {
	runtime.EventStore
	Appended []runtime.NewEvent
}

// AppendEvents implements runtime.EventStore.
func (s *Events) AppendEvents(_ context.Context, _ runtime.Scope, events []runtime.NewEvent) (int64, error) {
	s.Appended = append(s.Appended, events...)
	return int64(len(s.Appended)), nil
}

// Jobs records the jobs enqueued.
type Jobs struct{ Jobs []runtime.Job }

// Enqueue implements runtime.JobQueue.
func (j *Jobs) Enqueue(_ context.Context, jobs ...runtime.Job) error {
	j.Jobs = append(j.Jobs, jobs...)
	return nil
}

// FixedClock is a clock that always answers the same instant.
type FixedClock time.Time

// Now implements runtime.Clock.
func (c FixedClock) Now() time.Time { return time.Time(c) }

// Ptr returns a pointer to a copy of v.
func Ptr[T any](v T) *T { return &v }
