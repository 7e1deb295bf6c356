package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// Push notifications of the Google A2A endpoint: a task's participants store configs
// (a webhook URL with an optional token) and every change of the task is POSTed to
// each, from a background job, at least once and in commit order per config.

// Bounds of push configs.
const (
	MaxPushConfigs    = 10
	MaxPushURLBytes   = 2048
	MaxPushTokenBytes = 1024
	// MaxPushAuthBytes bounds a config's authentication object (compact JSON).
	MaxPushAuthBytes = 4096
	// PushGiveUp is how long a change is retried before it is dropped.
	PushGiveUp = 24 * time.Hour
	// pushLease is how long a delivery run holds its config: longer than a run's
	// budget plus one delivery's timeout.
	pushLease = time.Minute
	// pushBusyWait is how long a job waits for a config another run holds.
	pushBusyWait = time.Second
	// pushBackoffMax bounds the wait between retries of a failing webhook.
	pushBackoffMax = 10 * time.Minute
	// pushBatch bounds the events one read of a delivery returns.
	pushBatch = 20
)

// Protocol generations of push configs: they shape the bodies POSTed.
const (
	PushProtocol03 = "0.3"
	PushProtocol10 = "1.0"
)

// PushConfig is one webhook of a task.
type PushConfig struct {
	TaskID   string
	ID       string
	Protocol string
	URL      string
	Token    *string
	// Authentication is the config's authentication object as the client sent it
	// (compact JSON), or nil.
	Authentication json.RawMessage
	// Owner is the participant who set the config first: only they may replace or
	// delete it, and only they are shown its token and authentication.
	Owner       string
	CreatedAtMs int64
}

// PushDelivery is a config with its delivery position, as a delivery run leased it.
type PushDelivery struct {
	Config PushConfig
	// DeliveredSeq is the task's last event delivered (or dropped); DeliveredState
	// the task's state after it.
	DeliveredSeq   int64
	DeliveredState string
	// Failures counts the failed attempts at the next event; RetryAtMs is when the
	// next may start, and RetryOwner the job that owns the retry.
	Failures   int
	RetryAtMs  int64
	RetryOwner int64
}

// PushStore keeps push configs and their delivery positions.
type PushStore interface {
	// PutPushConfig stores c (replacing the task's config of the same ID, keeping
	// its position and owner), unless the task holds MaxPushConfigs others: then
	// full is true. A new config starts at deliveredSeq in deliveredState. Errors:
	// SERVICE_UNAVAILABLE.
	PutPushConfig(ctx context.Context, scope runtime.Scope, c *PushConfig, deliveredSeq int64, deliveredState string) (full bool, err error)
	// GetPushConfig returns one config. Errors: NOT_FOUND, SERVICE_UNAVAILABLE.
	GetPushConfig(ctx context.Context, scope runtime.Scope, taskID, configID string) (PushConfig, error)
	// ListPushConfigs returns the task's configs by creation. Errors:
	// SERVICE_UNAVAILABLE.
	ListPushConfigs(ctx context.Context, scope runtime.Scope, taskID string) ([]PushConfig, error)
	// DeletePushConfig deletes one config of owner; another's or none is NOT_FOUND.
	// Errors: NOT_FOUND, SERVICE_UNAVAILABLE.
	DeletePushConfig(ctx context.Context, scope runtime.Scope, taskID, configID, owner string) error
	// PushConfigIDs returns the IDs of the task's configs. Errors:
	// SERVICE_UNAVAILABLE.
	PushConfigIDs(ctx context.Context, scope runtime.Scope, taskID string) ([]string, error)
	// LeasePush takes the config's lease until untilMs unless another run holds it
	// past nowMs (ok false). A config that is gone is NOT_FOUND. Errors: NOT_FOUND,
	// SERVICE_UNAVAILABLE.
	LeasePush(ctx context.Context, scope runtime.Scope, taskID, configID string, nowMs, untilMs int64) (d PushDelivery, ok bool, err error)
	// AdvancePush records the delivery (or drop) of the event seq, after which the
	// task is in state, and clears the failures. Errors: SERVICE_UNAVAILABLE.
	AdvancePush(ctx context.Context, scope runtime.Scope, taskID, configID string, seq int64, state string) error
	// FailPush records a failed attempt: failures, the time of the next and the job
	// that owns it. Errors: SERVICE_UNAVAILABLE.
	FailPush(ctx context.Context, scope runtime.Scope, taskID, configID string, failures int, retryAtMs, owner int64) error
	// ReleasePush ends the config's lease. Errors: SERVICE_UNAVAILABLE.
	ReleasePush(ctx context.Context, scope runtime.Scope, taskID, configID string) error
}

// Webhook is where one delivery goes.
type Webhook struct {
	URL            string
	Token          *string
	Authentication json.RawMessage
}

// Webhooks reach push configs' URLs under the outbound rules.
type Webhooks interface {
	// Check refuses a URL the service may not call (VALIDATION_FAILED naming
	// field): not https (unless its host is allowed), or resolving to a loopback,
	// private, link-local, multicast or other special-purpose address (unless
	// allowed).
	Check(ctx context.Context, field, rawURL string) error
	// Post delivers body to w; an error is a failed delivery. retry says whether it
	// is a retry of a failed one.
	Post(ctx context.Context, w Webhook, body []byte, retry bool) error
	// Dropped counts a change given up after PushGiveUp of failures.
	Dropped()
}

// PushBody shapes the body of a push notification: the task as it stood after one
// change, for the config's protocol generation.
type PushBody func(t *contract.Task, protocol string) ([]byte, error)

// PushJob delivers the pending changes of one push config.
type PushJob struct {
	TenantID  string `json:"tenantId"`
	ProjectID string `json:"projectId"`
	TaskID    string `json:"taskId"`
	ConfigID  string `json:"configId"`
}

// Kind names the job kind in the queue.
func (PushJob) Kind() string { return "agent_context_a2a_push" }

// SetPushConfig stores a push config of a task the caller participates in (NOT_FOUND
// otherwise); a URL the service may not call is VALIDATION_FAILED, an eleventh config
// LIMIT_EXCEEDED, the ID of the other participant's config VALIDATION_FAILED. The
// config's deliveries start with the task's next change.
func (a *Protocol) SetPushConfig(ctx context.Context, p runtime.Principal, c *PushConfig) (*PushConfig, error) {
	if err := runtime.ValidateID("taskId", c.TaskID); err != nil {
		return nil, err
	}
	if a.webhooks == nil {
		return nil, runtime.Errorf(contract.CodeServiceUnavailable, "push notifications are not configured")
	}
	if c.ID == "" {
		c.ID = runtime.NewID()
	} else if err := runtime.ValidateID("id", c.ID); err != nil {
		return nil, err
	}
	if len(c.URL) > MaxPushURLBytes {
		return nil, runtime.TooLarge("url", MaxPushURLBytes)
	}
	if c.Token != nil {
		if err := validateText("token", *c.Token, MaxPushTokenBytes, false); err != nil {
			return nil, err
		}
	}
	if len(c.Authentication) > MaxPushAuthBytes {
		return nil, runtime.TooLarge("authentication", MaxPushAuthBytes)
	}
	// The task first, so that a caller who may not see it learns nothing of the URL
	// check; the check (a DNS lookup) runs outside the transaction.
	if _, err := a.participantTask(ctx, p, c.TaskID); err != nil {
		return nil, err
	}
	if err := a.webhooks.Check(ctx, "url", c.URL); err != nil {
		return nil, err
	}
	c.Owner, c.CreatedAtMs = p.Subject, a.nowMs()
	err := a.db.WithinTx(ctx, func(ctx context.Context, tx Stores) error {
		// The task's lock orders the config against the task's changes: those
		// committed before are behind its start, those after enqueue its delivery.
		lt, err := tx.Tasks.LockTask(ctx, p.Scope, c.TaskID)
		if err != nil {
			return err
		}
		if !participant(&lt.Task, p.Subject) {
			return taskNotFound()
		}
		// Every set holds the task's lock, so the owner read here is the one the put
		// would replace.
		switch stored, err := tx.Push.GetPushConfig(ctx, p.Scope, c.TaskID, c.ID); {
		case err == nil && stored.Owner != p.Subject:
			return pushConfigOwned("id")
		case err != nil && runtime.ErrorCode(err) != contract.CodeNotFound:
			return err
		}
		last, err := tx.Tasks.LastTaskEvent(ctx, p.Scope, c.TaskID)
		if err != nil {
			return err
		}
		full, err := tx.Push.PutPushConfig(ctx, p.Scope, c, last, lt.Task.State)
		if err != nil {
			return err
		}
		if full {
			return runtime.TooMany("id", MaxPushConfigs, "a task holds at most %d push notification configs", MaxPushConfigs)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// participantTask returns a task the caller participates in; anyone else, a2a:admin
// included, gets NOT_FOUND.
func (a *service) participantTask(ctx context.Context, p runtime.Principal, taskID string) (*contract.Task, error) {
	if err := runtime.ValidateID("taskId", taskID); err != nil {
		return nil, err
	}
	t, err := a.stores.Tasks.GetTask(ctx, p.Scope, taskID)
	if err != nil {
		return nil, err
	}
	if !participant(&t, p.Subject) {
		return nil, taskNotFound()
	}
	return &t, nil
}

// PushConfigs returns one config of a task the caller participates in (configID set)
// or all of them; an unknown config is NOT_FOUND naming configId. The token and
// authentication of a config the other participant set are left out.
func (a *Protocol) PushConfigs(ctx context.Context, p runtime.Principal, taskID string, configID *string) ([]PushConfig, error) {
	if _, err := a.participantTask(ctx, p, taskID); err != nil {
		return nil, err
	}
	var configs []PushConfig
	if configID == nil {
		var err error
		if configs, err = a.stores.Push.ListPushConfigs(ctx, p.Scope, taskID); err != nil {
			return nil, err
		}
	} else {
		if err := runtime.ValidateID("configId", *configID); err != nil {
			return nil, err
		}
		c, err := a.stores.Push.GetPushConfig(ctx, p.Scope, taskID, *configID)
		if err != nil {
			return nil, err
		}
		configs = []PushConfig{c}
	}
	for i := range configs {
		if configs[i].Owner != p.Subject {
			configs[i].Token, configs[i].Authentication = nil, nil
		}
	}
	return configs, nil
}

// DeletePushConfig deletes one config the caller set of a task the caller
// participates in; an unknown config is NOT_FOUND naming configId, the other
// participant's VALIDATION_FAILED.
func (a *Protocol) DeletePushConfig(ctx context.Context, p runtime.Principal, taskID, configID string) error {
	if _, err := a.participantTask(ctx, p, taskID); err != nil {
		return err
	}
	if err := runtime.ValidateID("configId", configID); err != nil {
		return err
	}
	c, err := a.stores.Push.GetPushConfig(ctx, p.Scope, taskID, configID)
	if err != nil {
		return err
	}
	if c.Owner != p.Subject {
		return pushConfigOwned("configId")
	}
	// The owner in the delete too: a config deleted and set again by the other
	// participant since the read is theirs.
	return a.stores.Push.DeletePushConfig(ctx, p.Scope, taskID, configID, p.Subject)
}

// pushConfigOwned refuses a change of the config the other participant set, naming
// field: its ID is theirs.
func pushConfigOwned(field string) error {
	return runtime.Invalid(field, "the push notification config %s belongs to the other participant", field)
}

// enqueuePush enqueues, in the transaction of a task's change, one delivery job per
// push config of the task.
func enqueuePush(ctx context.Context, tx Stores, scope runtime.Scope, taskID string) error {
	if tx.Push == nil {
		return nil
	}
	ids, err := tx.Push.PushConfigIDs(ctx, scope, taskID)
	if err != nil || len(ids) == 0 {
		return err
	}
	jobs := make([]runtime.Job, len(ids))
	for i, id := range ids {
		jobs[i] = PushJob{TenantID: scope.TenantID, ProjectID: scope.ProjectID, TaskID: taskID, ConfigID: id}
	}
	return tx.Jobs.Enqueue(ctx, jobs...)
}

// DeliverPush delivers the pending changes of one config in commit order until none
// is left (done) or deadline passed; job identifies the run's job, which owns the
// retry after a failed delivery. A failed delivery is retried with backoff at
// retryAt (done false); a change still failing PushGiveUp after it was made is
// dropped. A config another run holds is tried again shortly; a config that is gone
// is done. An error is the database's.
func (a *PushDeliveries) DeliverPush(ctx context.Context, job *PushJob, jobID int64, deadline time.Time) (done bool, retryAt time.Time, err error) {
	scope := runtime.Scope{TenantID: job.TenantID, ProjectID: job.ProjectID}
	now := a.nowMs()
	d, ok, err := a.stores.Push.LeasePush(ctx, scope, job.TaskID, job.ConfigID, now, now+pushLease.Milliseconds())
	switch {
	case runtime.ErrorCode(err) == contract.CodeNotFound:
		return true, time.Time{}, nil
	case err != nil:
		return false, time.Time{}, err
	case !ok:
		return false, a.clock.Now().Add(pushBusyWait), nil
	case d.RetryAtMs > now && d.RetryOwner != jobID:
		// Another job owns the retry.
		return true, time.Time{}, a.stores.Push.ReleasePush(ctx, scope, job.TaskID, job.ConfigID)
	case d.RetryAtMs > now:
		return false, time.UnixMilli(d.RetryAtMs), a.stores.Push.ReleasePush(ctx, scope, job.TaskID, job.ConfigID)
	}
	release := func() error {
		return a.stores.Push.ReleasePush(context.WithoutCancel(ctx), scope, job.TaskID, job.ConfigID)
	}
	for a.clock.Now().Before(deadline) {
		events, err := a.stores.Tasks.TaskEvents(ctx, scope, job.TaskID, d.DeliveredSeq, pushBatch)
		if err != nil {
			return false, time.Time{}, errors.Join(err, release())
		}
		if len(events) == 0 {
			return true, time.Time{}, release()
		}
		t, err := a.stores.Tasks.GetTask(ctx, scope, job.TaskID)
		if err != nil {
			return false, time.Time{}, errors.Join(err, release())
		}
		for i := range events {
			if !a.clock.Now().Before(deadline) {
				break
			}
			e := &events[i]
			state := stateAfter(e, d.DeliveredState)
			body, err := a.pushBody(taskAsOf(&t, e, state), d.Config.Protocol)
			if err != nil {
				return false, time.Time{}, errors.Join(err, release())
			}
			hook := Webhook{URL: d.Config.URL, Token: d.Config.Token, Authentication: d.Config.Authentication}
			if perr := a.webhooks.Post(ctx, hook, body, d.Failures > 0); perr != nil {
				if ctx.Err() != nil {
					return false, time.Time{}, errors.Join(ctx.Err(), release())
				}
				if a.clock.Now().Sub(time.UnixMilli(e.CreatedAtMs)) <= PushGiveUp {
					d.Failures++
					retry := a.clock.Now().Add(pushBackoff(d.Failures))
					if err := a.stores.Push.FailPush(ctx, scope, job.TaskID, job.ConfigID, d.Failures, retry.UnixMilli(), jobID); err != nil {
						return false, time.Time{}, errors.Join(err, release())
					}
					return false, retry, release()
				}
				a.webhooks.Dropped()
			}
			if err := a.stores.Push.AdvancePush(ctx, scope, job.TaskID, job.ConfigID, e.Sequence, state); err != nil {
				return false, time.Time{}, errors.Join(err, release())
			}
			d.DeliveredSeq, d.DeliveredState, d.Failures = e.Sequence, state, 0
		}
	}
	return false, a.clock.Now(), release()
}

// pushBackoff is the wait after the n-th failed attempt: 1 s, doubling, at most
// pushBackoffMax.
func pushBackoff(n int) time.Duration {
	if n > 20 {
		return pushBackoffMax
	}
	return min(time.Second<<(n-1), pushBackoffMax)
}

// stateAfter is the task's state after event e, given the state before it.
func stateAfter(e *contract.Event, before string) string {
	if e.Kind != contract.EventTaskUpdated && e.Kind != contract.EventTaskCreated {
		return before
	}
	var payload struct {
		To    string `json:"to"`
		State string `json:"state"`
	}
	if json.Unmarshal(e.Payload, &payload) != nil {
		return before
	}
	if payload.To != "" {
		return payload.To
	}
	if payload.State != "" {
		return payload.State
	}
	return before
}

// taskAsOf is t as it stood right after event e: in state, changed at the event's
// time, with the messages sent until then.
func taskAsOf(t *contract.Task, e *contract.Event, state string) *contract.Task {
	out := *t
	out.State, out.UpdatedAtMs = state, e.CreatedAtMs
	out.Messages = nil
	for _, m := range t.Messages {
		if m.CreatedAtMs <= e.CreatedAtMs {
			out.Messages = append(out.Messages, m)
		}
	}
	return &out
}
