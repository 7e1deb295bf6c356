package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/server"
)

// testWait bounds how long a test waits for a condition it polls for; reaching it
// is a failure, never a measurement.
const testWait, testPoll = 30 * time.Second, 5 * time.Millisecond

// lockConversation holds the head row of conversation c of the open-mode scope in a
// transaction of its own, so that an append to c waits on the database until the
// returned function ends the transaction.
func lockConversation(t *testing.T, pool *pgxpool.Pool, c string) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	var locked int
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM conversations
		WHERE tenant_id = 'local' AND project_id = 'local' AND conversation_id = $1 FOR UPDATE) l`, c).Scan(&locked))
	require.Equal(t, 1, locked)
	var once sync.Once
	release = func() { once.Do(func() { require.NoError(t, tx.Rollback(ctx)) }) }
	t.Cleanup(release)
	return release
}

// storedMessages counts the stored messages of conversation c.
func storedMessages(t *testing.T, pool *pgxpool.Pool, c string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) FROM messages WHERE conversation_id = $1`, c).Scan(&n))
	return n
}

// awaitLockWait returns once a statement of the service waits for a row lock.
func awaitLockWait(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	// On a Citus cluster the append waits on a worker, where the coordinator's own
	// view does not look.
	var citus bool
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')`).Scan(&citus))
	activity := "pg_stat_activity"
	if citus {
		activity = "citus_stat_activity"
	}
	require.Eventually(t, func() bool {
		var n int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM `+activity+`
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
		return err == nil && n > 0
	}, testWait, testPoll)
}

// postAsync sends a JSON POST from another goroutine (headers are name, value
// pairs); the channel yields its response, or the error.
func (a *testApp) postAsync(ctx context.Context, path string, body any, headers ...string) <-chan asyncResponse {
	out := make(chan asyncResponse, 1)
	go func() {
		resp, err := a.send(ctx, http.MethodPost, path, body, headers...)
		out <- asyncResponse{resp: resp, err: err}
	}()
	return out
}

type asyncResponse struct {
	resp *testResponse
	err  error
}

// TestShutdownDrains runs the shutdown a load balancer can follow against the real
// Main: for the drain delay /ready answers 503 draining while other requests are
// still served (each closing its connection); then the listener closes, and a request
// that was in flight (an append waiting on the database) completes and is stored.
func TestShutdownDrains(t *testing.T) {
	t.Parallel()
	app := startApp(t, func(c *Config) { c.DrainDelay = time.Hour })
	pool := openPool(t, app.dsn)
	app.appendOK(t, batchOf(rec("c", "m1", "user", "first")))
	release := lockConversation(t, pool, "c")

	inFlight := app.postAsync(context.Background(), pathBatch, batchOf(rec("c", "m2", "user", "in flight")))
	awaitLockWait(t, pool)

	hurry, cutDelay := context.WithCancel(context.Background())
	t.Cleanup(cutDelay)
	shutdown := make(chan error, 1)
	go func() { shutdown <- app.main.Shutdown(hurry) }()
	require.Eventually(t, func() bool {
		resp, err := app.client.Get(app.base + contract.PathReady)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	}, testWait, testPoll)
	e := app.do(t, http.MethodGet, contract.PathReady, nil).requireError(t, http.StatusServiceUnavailable, contract.CodeServiceUnavailable)
	require.Equal(t, "draining", e.Details["reason"])
	require.True(t, e.Retryable)
	// Still serving, but every answer closes its connection.
	app.post(t, pathRecent, map[string]any{"scope": map[string]any{"conversationId": "other"}}).requireOK(t, http.StatusOK, nil)
	status, rest := rawRequest(t, app.main.Addr(), "GET /health HTTP/1.1\r\nHost: test\r\n\r\n")
	require.Equal(t, "HTTP/1.1 200 OK", status)
	require.Contains(t, rest, "Connection: close\r\n")

	// The delay ends (here cut short, as a second signal does): no new connection.
	cutDelay()
	require.Eventually(t, func() bool {
		conn, err := net.Dial("tcp", app.main.Addr())
		if err == nil {
			_ = conn.Close()
		}
		return err != nil
	}, testWait, testPoll)

	// The request in flight finishes within the drain timeout, and what it
	// acknowledged is stored.
	release()
	done := <-inFlight
	require.NoError(t, done.err)
	var res contract.AppendMessagesResponse
	done.resp.requireOK(t, http.StatusOK, &res)
	require.Equal(t, 1, res.Appended)
	require.NoError(t, <-shutdown)
	require.Equal(t, 2, storedMessages(t, pool, "c"))
}

// TestDrainKeepsIdleConnections: a connection kept alive and idle when the drain
// starts is not closed under its client, which may be sending its next request on it
// right then (a reset); that request is answered, with Connection: close, and only
// then is the connection closed.
func TestDrainKeepsIdleConnections(t *testing.T) {
	t.Parallel()
	app := startApp(t, func(c *Config) { c.DrainDelay = time.Hour })
	conn, err := net.Dial("tcp", app.main.Addr())
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(testWait)))
	responses := bufio.NewReader(conn)
	get := func() (*http.Response, error) {
		if _, err := io.WriteString(conn, "GET /health HTTP/1.1\r\nHost: test\r\n\r\n"); err != nil {
			return nil, err
		}
		resp, err := http.ReadResponse(responses, nil)
		if err != nil {
			return nil, err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		return resp, errors.Join(err, resp.Body.Close())
	}
	first, err := get()
	require.NoError(t, err)
	require.False(t, first.Close, "kept alive before the drain")

	hurry, cutDelay := context.WithCancel(context.Background())
	t.Cleanup(cutDelay)
	shutdown := make(chan error, 1)
	go func() { shutdown <- app.main.Shutdown(hurry) }()
	require.Eventually(t, func() bool {
		resp, err := app.client.Get(app.base + contract.PathReady)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	}, testWait, testPoll)

	second, err := get()
	require.NoError(t, err, "the idle connection still serves")
	require.Equal(t, http.StatusOK, second.StatusCode)
	require.True(t, second.Close, "Connection: close")
	_, err = responses.ReadByte()
	require.ErrorIs(t, err, io.EOF, "closed after the answer")
	cutDelay()
	require.NoError(t, <-shutdown)
}

// TestSIGTERMUnderLoad stops a service process with SIGTERM while 8 clients append
// over kept-alive connections, the way a load balancer and its health check see it:
// /ready turns 503 first (then the clients, as a balancer would, send no more), and
// no request is reset or answered with a 5xx; every acknowledged append is stored, and
// the process exits cleanly.
func TestSIGTERMUnderLoad(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t)
	svc := startServiceProcess(t, dsn, "AGENT_CONTEXT_DRAIN_DELAY=2s", "AGENT_CONTEXT_DRAIN_TIMEOUT=20s")
	const clients = 8
	var (
		routed   atomic.Bool // the balancer still routes here
		answered atomic.Int64
	)
	routed.Store(true)
	type tally struct {
		acked, serverErrors int
		failures            []error
	}
	tallies := make(chan tally, clients)
	for i := range clients {
		go func() {
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}, Timeout: time.Minute}
			var tl tally
			for n := 0; routed.Load(); n++ {
				body, err := json.Marshal(batchOf(rec(fmt.Sprintf("c%d", i), fmt.Sprintf("m%d", n), "user", "under load")))
				if err != nil {
					tl.failures = append(tl.failures, err)
					break
				}
				resp, err := client.Post(svc.base+pathBatch, "application/json", bytes.NewReader(body))
				if err != nil {
					tl.failures = append(tl.failures, err)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				switch {
				case resp.StatusCode >= 500:
					tl.serverErrors++
				case resp.StatusCode == http.StatusOK:
					tl.acked++
				}
				answered.Add(1)
			}
			tallies <- tl
		}()
	}
	require.Eventually(t, func() bool { return answered.Load() >= 200 }, testWait, testPoll, "the load runs")
	require.NoError(t, svc.cmd.Process.Signal(syscall.SIGTERM))

	// The balancer's health check: /ready must say 503 before anything refuses.
	probe := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: testWait}
	deadline := time.Now().Add(testWait)
	for {
		resp, err := probe.Get(svc.base + contract.PathReady)
		require.NoError(t, err, "/ready answers until it says 503")
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			break
		}
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.True(t, time.Now().Before(deadline), "/ready never turned 503")
		time.Sleep(testPoll)
	}
	routed.Store(false)
	var acked int
	for range clients {
		tl := <-tallies
		require.Empty(t, tl.failures, "no request is reset or refused")
		require.Zero(t, tl.serverErrors)
		acked += tl.acked
	}
	require.NoError(t, svc.cmd.Wait(), "the process exits cleanly")
	pool := openPool(t, dsn)
	stored := 0
	for i := range clients {
		stored += storedMessages(t, pool, fmt.Sprintf("c%d", i))
	}
	require.Equal(t, acked, stored)
}

// TestShutdownDrainTimeout: a request still running when the drain timeout ends is cut
// off (its connection closed), and Shutdown says the drain did not finish.
func TestShutdownDrainTimeout(t *testing.T) {
	t.Parallel()
	app := startApp(t, func(c *Config) { c.DrainTimeout = 50 * time.Millisecond })
	pool := openPool(t, app.dsn)
	app.appendOK(t, batchOf(rec("c", "m1", "user", "first")))
	lockConversation(t, pool, "c")
	inFlight := app.postAsync(context.Background(), pathBatch, batchOf(rec("c", "m2", "user", "stuck")))
	awaitLockWait(t, pool)
	require.ErrorContains(t, app.main.Shutdown(context.Background()), "drain")
	require.Error(t, (<-inFlight).err, "the connection was closed without an answer")
}

// logLines returns a log output for the service and the lines written to it, as
// they are written.
func logLines(t *testing.T) (io.Writer, <-chan string) {
	t.Helper()
	r, w := io.Pipe()
	lines := make(chan string, 1024)
	go func() {
		scanner := bufio.NewScanner(r)
		for scanner.Scan() {
			lines <- scanner.Text()
		}
	}()
	t.Cleanup(func() { _ = w.Close() })
	return w, lines
}

// linesOf returns the log lines mentioning requestID, up to the request line.
func linesOf(t *testing.T, lines <-chan string, requestID string) []string {
	t.Helper()
	var out []string
	for {
		select {
		case line := <-lines:
			if !strings.Contains(line, requestID) {
				continue
			}
			out = append(out, line)
			if strings.Contains(line, `"msg":"request"`) {
				return out
			}
		case <-time.After(testWait):
			t.Fatalf("no request line for %s (seen %v)", requestID, out)
		}
	}
}

// TestClientLeavingIsNotAServerError: a client that gives up while its append waits
// on the database makes pgx return context.Canceled. That is logged once, at INFO,
// as status 499, with no error line; nothing of the append is written.
func TestClientLeavingIsNotAServerError(t *testing.T) {
	t.Parallel()
	logs, lines := logLines(t)
	app := startApp(t, func(c *Config) { c.LogOutput, c.LogLevel = logs, slog.LevelInfo })
	pool := openPool(t, app.dsn)
	app.appendOK(t, batchOf(rec("c", "m1", "user", "first")))
	lockConversation(t, pool, "c")

	ctx, leave := context.WithCancel(context.Background())
	sent := app.postAsync(ctx, pathBatch, batchOf(rec("c", "m2", "user", "abandoned")), "X-Request-Id", "client-leaves-1")
	awaitLockWait(t, pool)
	leave()
	require.ErrorIs(t, (<-sent).err, context.Canceled)

	logged := linesOf(t, lines, "client-leaves-1")
	require.Len(t, logged, 1, "one request line, no error line: %v", logged)
	var line map[string]any
	require.NoError(t, json.Unmarshal([]byte(logged[0]), &line))
	require.Equal(t, "request", line["msg"])
	require.Equal(t, "INFO", line["level"])
	require.EqualValues(t, server.StatusClientClosedRequest, line["status"])
	require.Equal(t, pathBatch, line["route"])
	require.Equal(t, 1, storedMessages(t, pool, "c"), "nothing of the abandoned append is written")
}

// TestShutdownAndLoadConfig: the drain, body-memory and key-set settings have their
// documented defaults, and bad values fail the start naming the variable.
func TestShutdownAndLoadConfig(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig(func(string) string { return "" })
	require.NoError(t, err)
	require.Equal(t, 5*time.Second, cfg.DrainDelay)
	require.Equal(t, 20*time.Second, cfg.DrainTimeout)
	require.EqualValues(t, 256<<20, cfg.MaxInFlightBodyBytes)
	require.Equal(t, time.Hour, cfg.JWKSMaxStaleness)

	cfg, err = LoadConfig(func(k string) string {
		return map[string]string{"AGENT_CONTEXT_DRAIN_DELAY": "0s", "AGENT_CONTEXT_MAX_INFLIGHT_BODY_BYTES": "33554432",
			"AGENT_CONTEXT_JWKS_MAX_STALENESS": "24h"}[k]
	})
	require.NoError(t, err)
	require.Zero(t, cfg.DrainDelay)
	require.EqualValues(t, contract.MaxRequestBodyBytes, cfg.MaxInFlightBodyBytes)
	require.Equal(t, 24*time.Hour, cfg.JWKSMaxStaleness)

	for name, value := range map[string]string{
		"AGENT_CONTEXT_DRAIN_DELAY":             "-1s",
		"AGENT_CONTEXT_MAX_INFLIGHT_BODY_BYTES": "33554431",
		"AGENT_CONTEXT_JWKS_MAX_STALENESS":      "0s",
	} {
		for _, v := range []string{value, "lots"} {
			_, err := LoadConfig(func(k string) string { return map[string]string{name: v}[k] })
			require.ErrorContains(t, err, name, v)
		}
	}
}
