package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/gate"
)

// testWait bounds how long a test waits for a condition it polls for; reaching it
// is a failure, never a measurement.
const testWait, testPoll = 30 * time.Second, time.Millisecond

// pendingBody is a request body that the test sends when it chooses.
type pendingBody struct {
	w    *io.PipeWriter
	done chan response
}

// startBody serves a request with a body of size bytes that arrives only when
// finish is called; declared sets its Content-Length, else it is sent chunked
// (length unknown).
func (b *testBundle) startBody(size int, declared bool) *pendingBody {
	r, w := io.Pipe()
	req := httptest.NewRequest(http.MethodPost, testRoutePath, r)
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength = -1
	if declared {
		req.ContentLength = int64(size)
	}
	p := &pendingBody{w: w, done: make(chan response, 1)}
	go func() {
		rec := httptest.NewRecorder()
		b.server.Handler().ServeHTTP(rec, req)
		// A refused body is never read: unblock its sender.
		_ = r.CloseWithError(io.ErrClosedPipe)
		p.done <- response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
	}()
	return p
}

// jsonOfSize is a valid request body of exactly size bytes.
func jsonOfSize(size int) string {
	const frame = `{"name":""}`
	return `{"name":"` + strings.Repeat("x", size-len(frame)) + `"}`
}

// finish sends the body (of size bytes) and returns the response.
func (p *pendingBody) finish(t *testing.T, size int) response {
	t.Helper()
	go func() {
		_, _ = io.WriteString(p.w, jsonOfSize(size))
		_ = p.w.Close()
	}()
	return <-p.done
}

// TestInFlightBodyBudget: with room for three 1 KiB bodies, three requests whose
// bodies are still arriving hold it all; the next ones are refused 503 at once
// (declared length: before a byte is read; chunked: at the first chunk); the
// reservations never pass the bound; when the three finish, the room is back.
func TestInFlightBodyBudget(t *testing.T) {
	t.Parallel()
	const size = 1 << 10
	b := setup(t, Config{Gate: gate.New(gate.Config{MaxBodyBytes: size, MaxInFlightBodyBytes: 3 * size})})
	budget := b.server.gate

	pending := make([]*pendingBody, 3)
	for i := range pending {
		pending[i] = b.startBody(size, true)
	}
	require.Eventually(t, func() bool { used, _ := budget.InFlightBodyBytes(); return used == 3*size }, testWait, testPoll)

	// Refused on the declared length, unread.
	var read atomic.Bool
	req := httptest.NewRequest(http.MethodPost, testRoutePath, failingReader{t: t, read: &read})
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength = 10
	rec := httptest.NewRecorder()
	b.server.Handler().ServeHTTP(rec, req)
	e := requireEnvelope(t, response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()},
		http.StatusServiceUnavailable, contract.CodeServiceUnavailable)
	require.Equal(t, "overloaded", e.Details["reason"])
	require.False(t, read.Load())
	// A chunked body is refused at its first chunk, whatever it would have held.
	chunked := b.startBody(size, false)
	e = requireEnvelope(t, <-chunked.done, http.StatusServiceUnavailable, contract.CodeServiceUnavailable)
	require.Equal(t, "overloaded", e.Details["reason"])

	responses := make([]response, len(pending))
	var wg sync.WaitGroup
	for i, p := range pending {
		wg.Go(func() { responses[i] = p.finish(t, size) })
	}
	wg.Wait()
	for _, r := range responses {
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	}
	used, peak := budget.InFlightBodyBytes()
	require.Zero(t, used, "every reservation is given back")
	require.Equal(t, int64(3*size), peak, "never more than the bound")

	// The room is back: a chunked body as large as the limit allows is served.
	r := b.startBody(size, false).finish(t, size)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	used, peak = budget.InFlightBodyBytes()
	require.Zero(t, used)
	require.LessOrEqual(t, peak, int64(3*size))
}

// TestInFlightBodyBudgetUnderLoad: many concurrent bodies of every shape; those that
// fit are served, the others are refused 503 (never 500, never over the bound).
func TestInFlightBodyBudgetUnderLoad(t *testing.T) {
	t.Parallel()
	const size = 4 << 10
	b := setup(t, Config{Gate: gate.New(gate.Config{MaxBodyBytes: size, MaxInFlightBodyBytes: 5 * size})})
	responses := make([]response, 64)
	var wg sync.WaitGroup
	for i := range responses {
		wg.Go(func() {
			n := size - i*37
			responses[i] = b.startBody(n, i%2 == 0).finish(t, n)
		})
	}
	wg.Wait()
	served := 0
	for _, r := range responses {
		if r.status == http.StatusOK {
			served++
			continue
		}
		e := requireEnvelope(t, r, http.StatusServiceUnavailable, contract.CodeServiceUnavailable)
		require.Equal(t, "overloaded", e.Details["reason"])
	}
	require.Positive(t, served)
	used, peak := b.server.gate.InFlightBodyBytes()
	require.Zero(t, used)
	require.LessOrEqual(t, peak, int64(5*size))
}
