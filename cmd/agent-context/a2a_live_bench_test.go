package main

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
)

// beforeCommit is a unit of work that records when each transaction's work is done:
// just before its COMMIT is sent, the start of the latencies below (an upper bound).
type beforeCommit struct {
	runtime.UnitOfWork[a2a.Stores]
	at atomic.Int64
}

func (u *beforeCommit) WithinTx(ctx context.Context, fn func(ctx context.Context, tx a2a.Stores) error) error {
	return u.UnitOfWork.WithinTx(ctx, func(ctx context.Context, tx a2a.Stores) error {
		err := fn(ctx, tx)
		u.at.Store(time.Now().UnixNano())
		return err
	})
}

// committer changes tasks in-process on app's database, timing each commit.
func committer(b *testing.B, app *a2aBench) (*a2a.Coordination, *beforeCommit) {
	db, err := postgres.NewDB(context.Background(), app.pool, postgres.DBOptions{})
	require.NoError(b, err)
	uow := &beforeCommit{UnitOfWork: db.A2A()}
	return a2a.NewCoordination(a2a.Config{DB: uow, Cursors: runtime.NewCursorCodec(make([]byte, 32))}), uow
}

// openStream subscribes to a task on app as alice and returns when each event
// arrived; the first (the task) has been read.
func openStream(b *testing.B, ctx context.Context, app *a2aBench, taskID string) <-chan time.Time {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, app.base+contract.PathA2AJSONRPC,
		strings.NewReader(`{"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": "`+taskID+`"}}`))
	require.NoError(b, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-infra-subject", "alice")
	resp, err := app.client.Do(req)
	require.NoError(b, err)
	arrived := make(chan time.Time, 16)
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() && !bytes.HasPrefix(lines.Bytes(), []byte("data:")) {
	}
	go func() {
		defer resp.Body.Close()
		for lines.Scan() {
			if bytes.HasPrefix(lines.Bytes(), []byte("data:")) {
				arrived <- time.Now()
			}
		}
		close(arrived)
	}()
	return arrived
}

func benchTask(b *testing.B, app *a2aBench) string {
	var task contract.Task
	app.post(b, contract.RouteA2ATasksCreate.Path, []byte(`{"toAgent": "bob", "description": "bench"}`), &task, subject("alice")...)
	return task.ID
}

// BenchmarkA2AStreamLatency times a change committed in-process on one replica until
// its SSE event reaches a SubscribeToTask client of the same replica or of a second
// one; the long-poll wake-up (BenchmarkA2ALongPollWakeUp) is its baseline.
//
//	go test -run '^$' -bench 'BenchmarkA2AStreamLatency|BenchmarkA2ALongPollWakeUp' -benchtime 300x ./cmd/agent-context
func BenchmarkA2AStreamLatency(b *testing.B) {
	dsn := pgtest.NewDSN(b)
	first := startA2ABench(b, dsn)
	second := startA2ABench(b, dsn)
	service, uow := committer(b, first)
	bob := benchAgent("bob")
	for _, c := range []struct {
		name     string
		follower *a2aBench
	}{{"same-instance", first}, {"cross-instance", second}} {
		b.Run(c.name, func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			taskID := benchTask(b, first)
			arrived := openStream(b, ctx, c.follower, taskID)
			latencies := make([]time.Duration, 0, b.N)
			text := "progress"
			for b.Loop() {
				_, err := service.Tasks.MessageTask(context.Background(), bob, &contract.TaskMessageRequest{TaskID: taskID,
					Parts: []contract.Part{{Type: contract.PartText, Text: &text}}})
				require.NoError(b, err)
				latencies = append(latencies, (<-arrived).Sub(time.Unix(0, uow.at.Load())))
			}
			reportPercentiles(b, latencies)
		})
	}
}

// BenchmarkA2AStreamConnections holds 1,000 SubscribeToTask streams at once on one
// replica and counts its database connections while they wait, then wakes them all
// with one change and reports how long until the last event arrived.
//
//	go test -run '^$' -bench BenchmarkA2AStreamConnections -benchtime 1x ./cmd/agent-context
func BenchmarkA2AStreamConnections(b *testing.B) {
	const streams = 1000
	app := startA2ABench(b, pgtest.NewDSN(b))
	service, _ := committer(b, app)
	for b.Loop() {
		ctx, cancel := context.WithCancel(context.Background())
		taskID := benchTask(b, app)
		arrivals := make([]<-chan time.Time, streams)
		var wg sync.WaitGroup
		for i := range streams {
			wg.Go(func() { arrivals[i] = openStream(b, ctx, app, taskID) })
		}
		wg.Wait()
		require.Eventually(b, func() bool { return app.main.hub.Waiting() == streams }, time.Minute, time.Millisecond)
		b.ReportMetric(float64(serviceConnections(b, app.pool)), "db-conns")
		b.ReportMetric(float64(app.main.pool.Config().MaxConns), "pool-max")
		committed := time.Now()
		_, err := service.Tasks.UpdateTask(context.Background(), benchAgent("bob"), &contract.UpdateTaskRequest{TaskID: taskID, State: contract.TaskWorking})
		require.NoError(b, err)
		var last time.Time
		for _, a := range arrivals {
			if at := <-a; at.After(last) {
				last = at
			}
		}
		b.ReportMetric(float64(last.Sub(committed).Milliseconds()), "wake-all-ms")
		cancel()
	}
}

// BenchmarkA2APushLatency times a change committed in-process until its push
// notification reaches a webhook on 127.0.0.1 (allow-listed), through the River job;
// the baseline is the same POST sent straight to the webhook.
//
//	go test -run '^$' -bench BenchmarkA2APushLatency -benchtime 200x ./cmd/agent-context
func BenchmarkA2APushLatency(b *testing.B) {
	dsn := pgtest.NewDSN(b)
	m := startBenchMain(b, dsn, func(c *Config) { c.A2ALive.PushAllowHosts = []string{"127.0.0.1"} })
	pool, err := postgres.NewPool(context.Background(), dsn, postgres.PoolOptions{MaxConns: 4, ApplicationName: "bench-baseline"})
	require.NoError(b, err)
	b.Cleanup(pool.Close)
	app := &a2aBench{msgBenchApp: &msgBenchApp{base: "http://" + m.Addr(), client: &http.Client{Timeout: time.Minute}, pool: pool}, main: m, dsn: dsn}
	received := make(chan time.Time, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { received <- time.Now() }))
	defer hook.Close()
	service, uow := committer(b, app)
	bob := benchAgent("bob")
	b.Run("commit-to-webhook", func(b *testing.B) {
		taskID := benchTask(b, app)
		app.post(b, contract.PathA2AJSONRPC, []byte(`{"jsonrpc": "2.0", "id": 1, "method": "CreateTaskPushNotificationConfig",
			"params": {"taskId": "`+taskID+`", "id": "bench", "url": "`+hook.URL+`/hook"}}`), nil, subject("alice")...)
		latencies := make([]time.Duration, 0, b.N)
		text := "progress"
		for b.Loop() {
			_, err := service.Tasks.MessageTask(context.Background(), bob, &contract.TaskMessageRequest{TaskID: taskID,
				Parts: []contract.Part{{Type: contract.PartText, Text: &text}}})
			require.NoError(b, err)
			latencies = append(latencies, (<-received).Sub(time.Unix(0, uow.at.Load())))
		}
		reportPercentiles(b, latencies)
	})
	b.Run("direct-post", func(b *testing.B) {
		latencies := make([]time.Duration, 0, b.N)
		for b.Loop() {
			start := time.Now()
			resp, err := http.Post(hook.URL+"/hook", "application/json", strings.NewReader(`{}`))
			require.NoError(b, err)
			resp.Body.Close()
			latencies = append(latencies, (<-received).Sub(start))
		}
		reportPercentiles(b, latencies)
	})
}
