package worker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
)

// scriptedRunner is an OperationRunner whose RunOperation answers as scripted and
// which records the operations it was asked to fail.
type scriptedRunner struct {
	finished bool
	err      error
	failed   []string
}

func (r *scriptedRunner) RunOperation(context.Context, runtime.Scope, string, time.Time) (bool, error) {
	return r.finished, r.err
}

func (r *scriptedRunner) FailOperation(_ context.Context, _ runtime.Scope, id string, _ error) error {
	r.failed = append(r.failed, id)
	return nil
}

func (r *scriptedRunner) ScheduleDefaultRetention(context.Context, time.Time, time.Time) (bool, error) {
	return true, nil
}

// An operation's job finishes, snoozes unfinished work back into the queue, retries a
// failed run, fails its operation once the operation's attempts are used up, and hands
// its job back without failing anything when the queue stops.
func TestOperationWorkerOutcomes(t *testing.T) {
	t.Parallel()
	transient := errors.New("connection reset")
	stopped, stop := context.WithCancel(context.Background())
	stop()
	cases := []struct {
		name     string
		ctx      context.Context
		finished bool
		err      error
		attempt  int
		want     func(t *testing.T, err error)
		failed   bool
	}{
		{name: "finished", ctx: context.Background(), finished: true, attempt: 1,
			want: func(t *testing.T, err error) { require.NoError(t, err) }},
		{name: "unfinished snoozes", ctx: context.Background(), attempt: 1,
			want: func(t *testing.T, err error) {
				var snooze *rivertype.JobSnoozeError
				require.ErrorAs(t, err, &snooze)
			}},
		{name: "failed run retries", ctx: context.Background(), err: transient, attempt: postgres.OperationMaxAttempts - 1,
			want: func(t *testing.T, err error) {
				require.ErrorIs(t, err, transient)
				var cancel *rivertype.JobCancelError
				require.False(t, errors.As(err, &cancel))
			}},
		{name: "last attempt fails the operation", ctx: context.Background(), err: transient, attempt: postgres.OperationMaxAttempts,
			failed: true, want: func(t *testing.T, err error) {
				var cancel *rivertype.JobCancelError
				require.ErrorAs(t, err, &cancel)
				require.ErrorIs(t, err, transient)
			}},
		{name: "a rescued run past the last attempt fails it too", ctx: context.Background(), err: transient,
			attempt: postgres.OperationMaxAttempts + 3, failed: true, want: func(t *testing.T, err error) {
				var cancel *rivertype.JobCancelError
				require.ErrorAs(t, err, &cancel)
			}},
		{name: "stopping hands the job back", ctx: stopped, err: context.Canceled, attempt: postgres.OperationMaxAttempts,
			want: func(t *testing.T, err error) {
				var snooze *rivertype.JobSnoozeError
				require.ErrorAs(t, err, &snooze)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runner := &scriptedRunner{finished: tc.finished, err: tc.err}
			w := &operationWorker{runner: runner, budget: time.Second}
			job := &river.Job[runtime.OperationJob]{
				JobRow: &rivertype.JobRow{Attempt: tc.attempt, MaxAttempts: postgres.InsertOpts(runtime.OperationJob{}).MaxAttempts},
				Args:   runtime.OperationJob{TenantID: "t", ProjectID: "p", OperationID: "op-1"},
			}
			tc.want(t, w.Work(tc.ctx, job))
			if tc.failed {
				require.Equal(t, []string{"op-1"}, runner.failed)
			} else {
				require.Empty(t, runner.failed)
			}
		})
	}
}

// Every rescue window gives a timing in which a run's last step, bounded by the step
// timeout, ends before River's job timeout, which comes before the rescue.
func TestJobTimingKeepsStatementsInsideTheJob(t *testing.T) {
	t.Parallel()
	for _, rescue := range []time.Duration{0, 100 * time.Millisecond, time.Second, DefaultRescueAfter, time.Hour} {
		tm := timing(rescue)
		require.Positive(t, tm.stepTimeout, "rescue window %s", rescue)
		require.Less(t, tm.budget+tm.stepTimeout, tm.jobTimeout, "rescue window %s", rescue)
		require.Less(t, tm.jobTimeout, tm.rescueAfter, "rescue window %s", rescue)
		require.Equal(t, tm.stepTimeout, StepTimeout(rescue))
	}
}

// retryingPush is a PushDeliverer whose delivery failed: it asks to be run again at
// retryAt.
type retryingPush struct{ retryAt time.Time }

func (p retryingPush) DeliverPush(context.Context, *a2a.PushJob, int64, time.Time) (bool, time.Time, error) {
	return false, p.retryAt, nil
}

// A failed delivery's backoff is waited out in the queue, not on a worker: the run
// returns at once, snoozing its job until the retry.
func TestPushBackoffHoldsNoWorker(t *testing.T) {
	t.Parallel()
	retryAt := time.Now().Add(time.Hour)
	w := &pushWorker{push: retryingPush{retryAt: retryAt}, budget: time.Second}
	err := w.Work(context.Background(), &river.Job[a2a.PushJob]{JobRow: &rivertype.JobRow{ID: 1}})
	var snooze *rivertype.JobSnoozeError
	require.ErrorAs(t, err, &snooze)
	require.InDelta(t, time.Hour, snooze.Duration, float64(time.Minute))
}
