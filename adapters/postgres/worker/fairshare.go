package worker

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/agent-context/agent-context/adapters/postgres"
)

// fairWait is how long the jobs of a tenant over its share wait before a worker
// looks at them again: long enough that the other tenants' jobs are fetched first,
// short enough that the tenant's work resumes soon after theirs is taken.
const fairWait = time.Second

// tenantDeferrer moves a tenant's waiting jobs behind the other tenants' ones;
// postgres.DB implements it.
type tenantDeferrer interface {
	DeferTenant(ctx context.Context, queue, tenant string, wait time.Duration) (bool, error)
}

// fairShare is the middleware that shares a class's workers between tenants. River
// knows no tenants: its workers take a queue's jobs in order, so one tenant's burst
// would take every worker of the class. A job that would make its tenant hold more
// than half of the class's workers on this replica (at least one) is snoozed while
// another tenant has a job of the class waiting, and the tenant's other waiting jobs
// are moved behind that tenant's (postgres.DB.DeferTenant); with nobody else waiting
// it runs, so a lone tenant still has every worker — except in a reserved class,
// where the share holds even then. That is for runs too long to wait for: a job
// arriving for another tenant always finds a worker free, instead of waiting for a
// run (up to a budget of several seconds) that started while nobody else waited.
type fairShare struct {
	db tenantDeferrer
	// share is, per class (queue), the most jobs one tenant runs while another waits
	// (in a reserved class, at all).
	share    map[string]int
	reserved map[string]bool
	mu       sync.Mutex
	// running counts the jobs running on this replica by queue and tenant.
	running map[string]map[string]int
}

var _ rivertype.WorkerMiddleware = (*fairShare)(nil)

func newFairShare(db tenantDeferrer, workers map[string]int, reserved ...string) *fairShare {
	f := &fairShare{db: db, share: map[string]int{}, reserved: map[string]bool{}, running: map[string]map[string]int{}}
	for _, q := range reserved {
		f.reserved[q] = true
	}
	for q, n := range workers {
		f.share[q] = max(1, n/2)
		f.running[q] = map[string]int{}
	}
	return f
}

// IsMiddleware implements rivertype.Middleware.
func (*fairShare) IsMiddleware() bool { return true }

// Work runs the job unless its tenant already holds its share of the class while
// another tenant waits (in a reserved class, whether or not another waits); then the
// job is snoozed without running (doInner is not called: the job has not started, and
// a snooze uses up no attempt).
func (f *fairShare) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	share, ok := f.share[job.Queue]
	if !ok {
		return doInner(ctx)
	}
	var args struct {
		TenantID string `json:"tenantId"`
	}
	// Args without a tenant (the periodic sweeps) share as tenant "".
	_ = json.Unmarshal(job.EncodedArgs, &args)
	if !f.enter(job.Queue, args.TenantID, share) {
		// A failed look runs the job: sharing is best effort, and the job meets the
		// database's trouble itself and fails or snoozes as its worker decides.
		if deferred, err := f.db.DeferTenant(ctx, job.Queue, args.TenantID, fairWait); (err == nil && deferred) || f.reserved[job.Queue] {
			return river.JobSnooze(fairWait)
		}
		f.enter(job.Queue, args.TenantID, 0)
	}
	defer f.leave(job.Queue, args.TenantID)
	return doInner(ctx)
}

// enter counts a job of tenant as running in queue if the tenant runs fewer than
// share there (any number when share is 0), and reports whether it did.
func (f *fairShare) enter(queue, tenant string, share int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if share > 0 && f.running[queue][tenant] >= share {
		return false
	}
	f.running[queue][tenant]++
	return true
}

func (f *fairShare) leave(queue, tenant string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running[queue][tenant]--; f.running[queue][tenant] == 0 {
		delete(f.running[queue], tenant)
	}
}

var _ tenantDeferrer = (*postgres.DB)(nil)
