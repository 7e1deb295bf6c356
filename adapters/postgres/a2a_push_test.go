package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime/a2a"
)

// scriptedWebhooks records deliveries; fail decides which bodies fail.
type scriptedWebhooks struct {
	mu        sync.Mutex
	fail      func(state string) bool
	delivered []string
	attempts  int
	dropped   int
}

func (w *scriptedWebhooks) Check(context.Context, string, string) error { return nil }

func (w *scriptedWebhooks) Post(_ context.Context, _ a2a.Webhook, body []byte, _ bool) error {
	var b struct{ State string }
	if err := json.Unmarshal(body, &b); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.attempts++
	if w.fail != nil && w.fail(b.State) {
		return errors.New("the webhook answered 500")
	}
	w.delivered = append(w.delivered, b.State)
	return nil
}

func (w *scriptedWebhooks) Dropped() { w.dropped++ }

// pushBundle is the A2A use cases with scripted webhooks and a task alice sent bob
// with one push config.
func pushBundle(t *testing.T, hooks *scriptedWebhooks) (*a2aBundle, *a2a.Coordination, *a2a.PushJob) {
	b := setupA2A(t)
	service := a2a.NewCoordination(a2a.Config{DB: b.db.A2A(), Clock: b.clock, Webhooks: hooks,
		PushBody: func(t *contract.Task, _ string) ([]byte, error) {
			return json.Marshal(map[string]string{"state": t.State})
		}})
	task, _, err := service.Tasks.CreateTask(context.Background(), b.agent("alice"), &contract.CreateTaskRequest{ToAgent: "bob", Description: ptr("work")})
	require.NoError(t, err)
	_, err = service.Protocol.SetPushConfig(context.Background(), b.agent("alice"), &a2a.PushConfig{TaskID: task.ID, ID: "hook",
		URL: "https://hooks.example.invalid/x", Protocol: a2a.PushProtocol03})
	require.NoError(t, err)
	return b, service, &a2a.PushJob{TenantID: b.scope.TenantID, ProjectID: b.scope.ProjectID, TaskID: task.ID, ConfigID: "hook"}
}

func (b *a2aBundle) move(t *testing.T, service *a2a.Coordination, taskID, state string) {
	t.Helper()
	_, err := service.Tasks.UpdateTask(context.Background(), b.agent("bob"), &contract.UpdateTaskRequest{TaskID: taskID, State: state})
	require.NoError(t, err)
}

func TestPushDropsAChangeFailingFor24Hours(t *testing.T) {
	t.Parallel()
	hooks := &scriptedWebhooks{fail: func(state string) bool { return state == contract.TaskWorking }}
	b, service, job := pushBundle(t, hooks)
	ctx := context.Background()
	b.move(t, service, job.TaskID, contract.TaskWorking)

	done, retryAt, err := service.Push.DeliverPush(ctx, job, 1, b.clock.Now().Add(time.Hour))
	require.NoError(t, err)
	require.False(t, done)
	require.Equal(t, b.clock.Now().Add(time.Second), retryAt, "the first retry after 1 s")

	b.clock.advance(25 * time.Hour)
	b.move(t, service, job.TaskID, contract.TaskCompleted)
	done, _, err = service.Push.DeliverPush(ctx, job, 1, b.clock.Now().Add(time.Hour))
	require.NoError(t, err)
	require.True(t, done)
	require.Equal(t, []string{contract.TaskCompleted}, hooks.delivered, "the change older than 24 h is dropped, the next delivered")
	require.Equal(t, 1, hooks.dropped)
	require.Equal(t, 3, hooks.attempts)
}

func TestPushRetryBelongsToOneJob(t *testing.T) {
	t.Parallel()
	failing := true
	hooks := &scriptedWebhooks{fail: func(string) bool { return failing }}
	b, service, job := pushBundle(t, hooks)
	ctx := context.Background()
	b.move(t, service, job.TaskID, contract.TaskWorking)
	deadline := b.clock.Now().Add(time.Hour)

	done, retryAt, err := service.Push.DeliverPush(ctx, job, 1, deadline)
	require.NoError(t, err)
	require.False(t, done)
	done, _, err = service.Push.DeliverPush(ctx, job, 2, deadline)
	require.NoError(t, err)
	require.True(t, done, "another job leaves the retry to the job that owns it")
	done, again, err := service.Push.DeliverPush(ctx, job, 1, deadline)
	require.NoError(t, err)
	require.False(t, done)
	require.Equal(t, retryAt, again, "the owner waits for its retry time")
	require.Equal(t, 1, hooks.attempts)

	b.clock.advance(time.Second)
	done, retryAt, err = service.Push.DeliverPush(ctx, job, 1, deadline)
	require.NoError(t, err)
	require.False(t, done)
	require.Equal(t, b.clock.Now().Add(2*time.Second), retryAt, "backoff doubles")
	b.clock.advance(2 * time.Second)
	failing = false
	done, _, err = service.Push.DeliverPush(ctx, job, 1, deadline)
	require.NoError(t, err)
	require.True(t, done)
	require.Equal(t, []string{contract.TaskWorking}, hooks.delivered)
}

func TestPushLeaseKeepsOneRunPerConfig(t *testing.T) {
	t.Parallel()
	hooks := &scriptedWebhooks{}
	b, service, job := pushBundle(t, hooks)
	ctx := context.Background()
	b.move(t, service, job.TaskID, contract.TaskWorking)
	store := b.db.A2A().Stores().Push
	now := b.clock.Now().UnixMilli()
	_, ok, err := store.LeasePush(ctx, b.scope, job.TaskID, job.ConfigID, now, now+60_000)
	require.NoError(t, err)
	require.True(t, ok)

	done, retryAt, err := service.Push.DeliverPush(ctx, job, 7, b.clock.Now().Add(time.Hour))
	require.NoError(t, err)
	require.False(t, done)
	require.Equal(t, b.clock.Now().Add(time.Second), retryAt, "a held config is tried again shortly")
	require.Empty(t, hooks.delivered)

	require.NoError(t, store.ReleasePush(ctx, b.scope, job.TaskID, job.ConfigID))
	done, _, err = service.Push.DeliverPush(ctx, job, 7, b.clock.Now().Add(time.Hour))
	require.NoError(t, err)
	require.True(t, done)
	require.Equal(t, []string{contract.TaskWorking}, hooks.delivered)

	require.NoError(t, service.Protocol.DeletePushConfig(ctx, b.agent("alice"), job.TaskID, job.ConfigID))
	done, _, err = service.Push.DeliverPush(ctx, job, 7, b.clock.Now().Add(time.Hour))
	require.NoError(t, err)
	require.True(t, done, "a deleted config is done")
}
