// Package worker is the job door of the service: River's workers of every job kind,
// their periodic schedule and the client that runs them on this replica. It calls the
// use cases through the runner interfaces below; the enqueue side, which units of work
// use inside their transactions, is postgres.JobQueue.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgmetrics"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
	"github.com/agent-context/agent-context/runtime/memory"
	"github.com/agent-context/agent-context/runtime/transfer"
)

// OperationRunner does the work of operations' jobs; operation.Maintenance implements it.
type OperationRunner interface {
	// RunOperation works on an operation until it is finished or deadline passed,
	// and reports whether it is finished. An error is transient.
	RunOperation(ctx context.Context, scope runtime.Scope, id string, deadline time.Time) (bool, error)
	// FailOperation marks an operation failed because of cause.
	FailOperation(ctx context.Context, scope runtime.Scope, id string, cause error) error
	// ScheduleDefaultRetention starts the default retention policy in every scope
	// that has not had it since since, until deadline; it reports whether it finished.
	ScheduleDefaultRetention(ctx context.Context, since, deadline time.Time) (bool, error)
}

// ProjectionRunner does the work of the vector projection's jobs; memory.Projection
// implements it.
type ProjectionRunner interface {
	// EmbedBacklog embeds a scope's queued entries until none is left or deadline
	// passed, and reports whether it finished (or enqueued the job that carries on).
	// An error is transient.
	EmbedBacklog(ctx context.Context, scope runtime.Scope, deadline time.Time) (bool, error)
	// Sweep enqueues the work the projection's jobs missed, until deadline; it
	// reports whether it finished.
	Sweep(ctx context.Context, deadline time.Time) (bool, error)
}

// A2ASweeper purges expired A2A messages, events and tasks; a2a.Sweeper implements it.
type A2ASweeper interface {
	// SweepA2A sweeps every scope not swept since since, until deadline; it reports
	// whether it finished.
	SweepA2A(ctx context.Context, since, deadline time.Time) (bool, error)
}

// PushDeliverer delivers A2A push notifications; a2a.PushDeliveries implements it.
type PushDeliverer interface {
	// DeliverPush delivers a config's pending changes until none is left (done) or
	// deadline passed; when not done, the job runs again at retryAt. An error is
	// transient.
	DeliverPush(ctx context.Context, job *a2a.PushJob, jobID int64, deadline time.Time) (done bool, retryAt time.Time, err error)
}

// ExportPurger removes expired export artifacts; transfer.Exports implements it.
type ExportPurger interface {
	// PurgeArtifacts purges until none is left or deadline passed; it reports
	// whether it finished.
	PurgeArtifacts(ctx context.Context, since, deadline time.Time) (bool, error)
}

// JobOptions tune the job queue of one replica.
type JobOptions struct {
	// Classes are the workers of each job class on this replica (DefaultClassWorkers
	// for a class left 0).
	Classes ClassWorkers
	// LegacyWorkers work River's default queue, where every job went before the
	// classes (default DefaultJobWorkers): jobs a replica of an earlier version
	// enqueued, or left there to be retried or rescued, still run.
	LegacyWorkers int
	// RescueAfter is how long a job may be running before River considers its worker
	// dead and hands it to another replica (default 15 s). A job's run is kept to a
	// quarter of it (the rest of an operation continues in a later run), so a live
	// worker is never mistaken for a dead one.
	RescueAfter time.Duration
	// RetentionInterval is how often the default retention policy is scheduled; 0
	// schedules it never. The first run comes right after this replica becomes the
	// queue's leader.
	RetentionInterval time.Duration
	// A2ASweeper, with A2ASweepInterval above 0, runs the A2A sweep that often
	// (a2a.A2ASweepJob), the first run right after this replica becomes the
	// queue's leader.
	A2ASweeper       A2ASweeper
	A2ASweepInterval time.Duration
	// ExportPurger, with ExportPurgeInterval above 0, removes expired export artifacts
	// that often (transfer.ExportPurgeJob), the first run right after this replica
	// becomes the queue's leader.
	ExportPurger        ExportPurger
	ExportPurgeInterval time.Duration
	// Push delivers A2A push notifications (nil: this replica delivers none).
	// PushTimeout is one delivery's bound (the webhook's timeout).
	Push        PushDeliverer
	PushTimeout time.Duration
	// Projection runs the vector projection's jobs (nil: this replica runs none, and
	// must then not be the only one). ProjectionSweepInterval is how often its sweep
	// runs (default 1 minute); the first run comes right after this replica becomes
	// the queue's leader.
	Projection              ProjectionRunner
	ProjectionSweepInterval time.Duration
	Logger                  *slog.Logger
	// Metrics receives the job run metrics (nil: none).
	Metrics prometheus.Registerer
}

// ClassWorkers are the workers of each job class (postgres.QueuePush, QueueProjection,
// QueueOperations) on one replica. Within a class, a tenant holds at most half of them
// while another tenant has a job of the class waiting; of the operations' workers, at
// most half at any time (see fairShare).
type ClassWorkers struct {
	Push, Projection, Operations int
}

// DefaultClassWorkers are the classes' workers when not configured: deliveries wait
// on webhooks, not on this replica, so they get the most; the projection's jobs each
// embed on every core already (memory.ProjectionConfig.Parallel).
var DefaultClassWorkers = ClassWorkers{Push: 4, Projection: 2, Operations: 2}

// Default job options.
const (
	DefaultJobWorkers = 4
	// DefaultRescueAfter keeps the resumption of a crashed operation within a minute:
	// River's rescuer looks every 30 s, so a job is rescued at most 30 s after it
	// became older than this window, plus a few seconds of scheduling.
	DefaultRescueAfter = 15 * time.Second
	// DefaultProjectionSweepInterval is how often the projection's sweep looks for
	// work its jobs missed.
	DefaultProjectionSweepInterval = time.Minute
)

// jobTiming is a queue's timing, all derived from its rescue window: a run starts
// steps until its budget is spent, each step's statements are bounded by
// stepTimeout, and River cancels a run after jobTimeout, so budget + stepTimeout
// must stay under jobTimeout (no statement outlives the run that waits for it), and
// jobTimeout under rescueAfter (a live worker is never taken for a dead one).
type jobTiming struct {
	rescueAfter, budget, stepTimeout, jobTimeout time.Duration
}

func timing(rescueAfter time.Duration) jobTiming {
	if rescueAfter <= 0 {
		rescueAfter = DefaultRescueAfter
	}
	return jobTiming{rescueAfter: rescueAfter, budget: rescueAfter / 4, stepTimeout: rescueAfter / 5, jobTimeout: rescueAfter / 2}
}

// StepTimeout is the statement bound of one job step for a queue with rescueAfter
// (0: DefaultRescueAfter); operation.MaintenanceConfig.StepTimeout takes it.
func StepTimeout(rescueAfter time.Duration) time.Duration { return timing(rescueAfter).stepTimeout }

// Jobs runs operations' jobs on River, which coordinates the replicas through the
// database: any replica picks up any job, and a job whose worker died is rescued after
// RescueAfter and resumed where its last committed step left it.
type Jobs struct {
	client *river.Client[pgx.Tx]
}

// NewJobs returns the job queue of this replica on db; Start starts working.
func NewJobs(db *postgres.DB, runner OperationRunner, opts JobOptions) (*Jobs, error) {
	if opts.LegacyWorkers <= 0 {
		opts.LegacyWorkers = DefaultJobWorkers
	}
	classes := opts.Classes.withDefaults()
	tm := timing(opts.RescueAfter)
	workers := river.NewWorkers()
	river.AddWorker(workers, &operationWorker{runner: runner, budget: tm.budget})
	river.AddWorker(workers, &sweepWorker[retentionSweepArgs]{sweep: runner.ScheduleDefaultRetention, budget: tm.budget})
	var periodic []*river.PeriodicJob
	if opts.RetentionInterval > 0 {
		periodic = append(periodic, river.NewPeriodicJob(river.PeriodicInterval(opts.RetentionInterval),
			func() (river.JobArgs, *river.InsertOpts) { return periodicJob(retentionSweepArgs{}) },
			&river.PeriodicJobOpts{ID: "retention_sweep", RunOnStart: true}))
	}
	if opts.A2ASweeper != nil {
		river.AddWorker(workers, &sweepWorker[a2a.A2ASweepJob]{sweep: opts.A2ASweeper.SweepA2A, budget: tm.budget})
		if opts.A2ASweepInterval > 0 {
			periodic = append(periodic, river.NewPeriodicJob(river.PeriodicInterval(opts.A2ASweepInterval),
				func() (river.JobArgs, *river.InsertOpts) { return periodicJob(a2a.A2ASweepJob{}) },
				&river.PeriodicJobOpts{ID: "a2a_sweep", RunOnStart: true}))
		}
	}
	if opts.ExportPurger != nil {
		river.AddWorker(workers, &sweepWorker[transfer.ExportPurgeJob]{sweep: opts.ExportPurger.PurgeArtifacts, budget: tm.budget})
		if opts.ExportPurgeInterval > 0 {
			periodic = append(periodic, river.NewPeriodicJob(river.PeriodicInterval(opts.ExportPurgeInterval),
				func() (river.JobArgs, *river.InsertOpts) { return periodicJob(transfer.ExportPurgeJob{}) },
				&river.PeriodicJobOpts{ID: "export_purge", RunOnStart: true}))
		}
	}
	if opts.Push != nil {
		river.AddWorker(workers, &pushWorker{push: opts.Push, budget: tm.budget, timeout: tm.budget + opts.PushTimeout + tm.stepTimeout})
	}
	if p := opts.Projection; p != nil {
		interval := opts.ProjectionSweepInterval
		if interval <= 0 {
			interval = DefaultProjectionSweepInterval
		}
		river.AddWorker(workers, &projectionWorker{runner: p, budget: tm.budget})
		river.AddWorker(workers, &sweepWorker[projectionSweepArgs]{budget: tm.budget,
			sweep: func(ctx context.Context, _, deadline time.Time) (bool, error) { return p.Sweep(ctx, deadline) }})
		periodic = append(periodic, river.NewPeriodicJob(river.PeriodicInterval(interval),
			func() (river.JobArgs, *river.InsertOpts) {
				return projectionSweepArgs{}, &river.InsertOpts{Queue: postgres.QueueProjection}
			},
			&river.PeriodicJobOpts{ID: "projection_sweep", RunOnStart: true}))
	}
	var middleware []rivertype.Middleware
	if opts.Metrics != nil {
		middleware = append(middleware, pgmetrics.NewJobMetrics(opts.Metrics))
	}
	// An operation's run lasts a budget (seconds): another tenant's deletion must not
	// wait for one, so the class always keeps a worker for the others.
	middleware = append(middleware, newFairShare(db, classes.queues(), postgres.QueueOperations))
	queues := map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: opts.LegacyWorkers}}
	for q, n := range classes.queues() {
		queues[q] = river.QueueConfig{MaxWorkers: n}
	}
	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{
		Middleware:           middleware,
		Queues:               queues,
		Workers:              workers,
		PeriodicJobs:         periodic,
		JobTimeout:           tm.jobTimeout,
		RescueStuckJobsAfter: tm.rescueAfter,
		// Enqueuing never notifies (postgres.DB's insert-only client), so workers poll
		// for new jobs.
		FetchPollInterval: JobFetchPollInterval,
		// A stop lets running jobs end their current run (at most a budget long),
		// then cancels them; a cancelled run hands its job back (see Work).
		SoftStopTimeout: tm.jobTimeout,
		Logger:          opts.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("create the job queue: %w", err)
	}
	return &Jobs{client: client}, nil
}

func (c ClassWorkers) withDefaults() ClassWorkers {
	if c.Push <= 0 {
		c.Push = DefaultClassWorkers.Push
	}
	if c.Projection <= 0 {
		c.Projection = DefaultClassWorkers.Projection
	}
	if c.Operations <= 0 {
		c.Operations = DefaultClassWorkers.Operations
	}
	return c
}

// queues are the classes' River queues and their workers.
func (c ClassWorkers) queues() map[string]int {
	return map[string]int{postgres.QueuePush: c.Push, postgres.QueueProjection: c.Projection, postgres.QueueOperations: c.Operations}
}

// periodicJob is a periodic job with the queue options of its kind, so that it runs in
// its class.
func periodicJob(args river.JobArgs) (river.JobArgs, *river.InsertOpts) {
	return args, postgres.InsertOpts(args)
}

// JobFetchPollInterval is how often an idle worker looks for new jobs: enqueues send
// no notification (see postgres.DB's insert-only client), so it bounds how long a new
// job waits.
const JobFetchPollInterval = 100 * time.Millisecond

// Start starts working jobs. Only Stop stops it: a canceled ctx does not, so that a
// shutdown stops the queue in its order (after draining requests, before closing the
// pool).
func (j *Jobs) Start(ctx context.Context) error {
	if err := j.client.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("start the job queue: %w", err)
	}
	return nil
}

// Stop lets running jobs finish their current run or hands them back to the queue, and
// returns when none runs any more or ctx ends.
func (j *Jobs) Stop(ctx context.Context) error {
	if err := j.client.Stop(ctx); err != nil {
		return fmt.Errorf("stop the job queue: %w", err)
	}
	return nil
}

// operationWorker runs operations' jobs.
type operationWorker struct {
	river.WorkerDefaults[runtime.OperationJob]
	runner OperationRunner
	budget time.Duration
}

// Work runs the operation for one budget. Unfinished work is snoozed (back in the
// queue at once, without using up an attempt), so a long deletion is a series of short
// runs that any replica may continue.
func (w *operationWorker) Work(ctx context.Context, job *river.Job[runtime.OperationJob]) error {
	scope := runtime.Scope{TenantID: job.Args.TenantID, ProjectID: job.Args.ProjectID}
	finished, err := w.runner.RunOperation(ctx, scope, job.Args.OperationID, time.Now().Add(w.budget))
	switch {
	case err != nil && stopping(ctx):
		// Stopping: hand the job back; the step that was cut off was rolled back.
		return river.JobSnooze(0)
	case err != nil && job.Attempt >= postgres.OperationMaxAttempts:
		if ferr := w.runner.FailOperation(context.WithoutCancel(ctx), scope, job.Args.OperationID, err); ferr != nil {
			return errors.Join(err, ferr)
		}
		return river.JobCancel(err)
	case err != nil:
		return err
	case !finished:
		return river.JobSnooze(0)
	}
	return nil
}

// stopping reports whether a job's context was cancelled because the queue is stopping,
// as opposed to the job running out of time (which counts as a failed attempt, so that
// a step that never fits its timeout ends in a failed operation, not an endless loop).
func stopping(ctx context.Context) bool {
	return errors.Is(ctx.Err(), context.Canceled)
}

// retentionSweepArgs is the periodic job that schedules the default retention policy.
type retentionSweepArgs struct{}

// Kind names the job kind in River.
func (retentionSweepArgs) Kind() string { return "agent_context_retention_sweep" }

// sweepWorker runs a periodic sweep (the default retention's scheduling, the A2A
// purge, the projection's sweep) for one budget per run. The job's creation time marks the period: a run
// continued after a snooze or a crash skips the scopes already done in it.
type sweepWorker[T river.JobArgs] struct {
	river.WorkerDefaults[T]
	sweep  func(ctx context.Context, since, deadline time.Time) (bool, error)
	budget time.Duration
}

// Work sweeps for one budget; unfinished work is snoozed back into the queue.
func (w *sweepWorker[T]) Work(ctx context.Context, job *river.Job[T]) error {
	finished, err := w.sweep(ctx, job.CreatedAt, time.Now().Add(w.budget))
	return runOutcome(ctx, finished, err)
}

// runOutcome is what a run of a resumable job tells River: stopping or unfinished
// work goes back into the queue at once (without using up an attempt), an error is
// retried with backoff.
func runOutcome(ctx context.Context, finished bool, err error) error {
	switch {
	case err != nil && stopping(ctx):
		return river.JobSnooze(0)
	case err != nil:
		return err
	case !finished:
		return river.JobSnooze(0)
	}
	return nil
}

// projectionWorker embeds the backlog of one scope.
type projectionWorker struct {
	river.WorkerDefaults[memory.ProjectionJob]
	runner ProjectionRunner
	budget time.Duration
}

// Work embeds for one budget; unfinished work is snoozed back into the queue.
func (w *projectionWorker) Work(ctx context.Context, job *river.Job[memory.ProjectionJob]) error {
	scope := runtime.Scope{TenantID: job.Args.TenantID, ProjectID: job.Args.ProjectID}
	finished, err := w.runner.EmbedBacklog(ctx, scope, time.Now().Add(w.budget))
	return runOutcome(ctx, finished, err)
}

// projectionSweepArgs is the periodic job of the projection's sweep.
type projectionSweepArgs struct{}

// Kind names the job kind in River.
func (projectionSweepArgs) Kind() string { return "agent_context_projection_sweep" }

// pushWorker delivers the pending changes of one A2A push config.
type pushWorker struct {
	river.WorkerDefaults[a2a.PushJob]
	push    PushDeliverer
	budget  time.Duration
	timeout time.Duration
}

// Timeout lets a run finish the delivery it started at the end of its budget. A run
// that outlives the rescue window is harmless: the config's lease keeps a second run
// of it waiting.
func (w *pushWorker) Timeout(*river.Job[a2a.PushJob]) time.Duration { return w.timeout }

// Work delivers for one budget; undelivered changes snooze the job until their retry
// (a snooze uses up no attempt, so a webhook is retried for as long as the changes
// are kept trying, 24 h).
func (w *pushWorker) Work(ctx context.Context, job *river.Job[a2a.PushJob]) error {
	done, retryAt, err := w.push.DeliverPush(ctx, &job.Args, job.ID, time.Now().Add(w.budget))
	switch {
	case err != nil && stopping(ctx):
		return river.JobSnooze(0)
	case err != nil:
		return err
	case !done:
		return river.JobSnooze(max(time.Until(retryAt), 0))
	}
	return nil
}
