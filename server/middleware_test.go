package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/gate"
	"github.com/agent-context/agent-context/runtime"
)

// recordHandler hands every log record to the test.
type recordHandler struct{ records chan slog.Record }

func (h recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.records <- r.Clone()
	return nil
}
func (h recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordHandler) WithGroup(string) slog.Handler      { return h }

func nextRecord(t *testing.T, records chan slog.Record) slog.Record {
	t.Helper()
	select {
	case r := <-records:
		return r
	case <-time.After(testWait):
		t.Fatal("no log record")
		return slog.Record{}
	}
}

func recordAttrs(r slog.Record) map[string]any {
	attrs := map[string]any{}
	r.Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.Any()
		return true
	})
	return attrs
}

// TestClientGoneIsLogged499: a client that goes away mid-request (its body breaks
// off, or it leaves while the handler waits, as on a database query) is logged once,
// at INFO, as 499; nothing is written back (not even a default 200 to a client that
// only half-closed) and nothing is logged as a server error.
func TestClientGoneIsLogged499(t *testing.T) {
	t.Parallel()
	records := make(chan slog.Record, 16)
	reg := prometheus.NewRegistry()
	b := setup(t, Config{Logger: slog.New(recordHandler{records}), Instruments: Instruments{Registerer: reg, Gatherer: reg}})
	waiting := make(chan struct{}, 1)
	const blockingPath = "/internal/v1/test/blocking"
	b.server.echo.Add(http.MethodPost, blockingPath, jsonBody(b.server.gate,
		func(ctx context.Context, _ runtime.Principal, _ *echoRequest) (int, any, error) {
			waiting <- struct{}{}
			<-ctx.Done()
			// What pgx returns when the context of a query is canceled.
			return 0, nil, fmt.Errorf("query: %w", ctx.Err())
		}))
	srv := httptest.NewServer(b.server.Handler())
	t.Cleanup(srv.Close)

	for i, tc := range []struct {
		name, path, body string
		declared         int
		beforeLeaving    func()
	}{
		{"body breaks off", testRoutePath, `{"name":`, 12, func() {}},
		{"leaves while the handler waits", blockingPath, `{"name":"x"}`, 12, func() { <-waiting }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", srv.Listener.Addr().String())
			require.NoError(t, err)
			defer conn.Close()
			_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"+
				"Content-Length: %d\r\nX-Request-Id: gone-%d\r\n\r\n%s", tc.path, tc.declared, i, tc.body)
			require.NoError(t, err)
			tc.beforeLeaving()
			require.NoError(t, conn.(*net.TCPConn).CloseWrite())

			r := nextRecord(t, records)
			attrs := recordAttrs(r)
			require.Equal(t, "request", r.Message, "%v", attrs)
			require.Equal(t, slog.LevelInfo, r.Level)
			require.EqualValues(t, StatusClientClosedRequest, attrs["status"])
			require.Equal(t, fmt.Sprintf("gone-%d", i), attrs["request_id"])
			require.NotContains(t, attrs, "code")
			reply, err := io.ReadAll(conn)
			require.NoError(t, err)
			require.Empty(t, reply, "nothing is written to a client that left")
			require.Empty(t, records, "one line, and no error line")
		})
	}
	// Counted as the client's doing: 499, no error by code. (The count is taken after
	// the log line is written, so it is waited for.)
	counted := func() map[string]float64 {
		out := map[string]float64{}
		families, err := reg.Gather()
		if err != nil {
			out["gather failed"] = 1
		}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				if f.GetName() == gate.MetricsNamespace+"_http_errors_total" {
					out["errors"] += m.GetCounter().GetValue()
				}
				for _, l := range m.GetLabel() {
					if f.GetName() == gate.MetricsNamespace+"_http_requests_total" && l.GetName() == "status" {
						out[l.GetValue()] += m.GetCounter().GetValue()
					}
				}
			}
		}
		return out
	}
	require.Eventually(t, func() bool { return counted()["499"] == 2 }, testWait, testPoll)
	require.Equal(t, map[string]float64{"499": 2}, counted())
}
