package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/telemetry"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/contract/client"
)

// BenchmarkRecent50Instrumentation measures the read of the 50 newest messages
// (POST /messages/recent, default limit, of a 200-message conversation) over HTTP on
// two Mains in the same run: one with request metrics and tracing on (every request
// sampled, spans exported over OTLP/HTTP to a receiver on loopback), one with both
// off. Four clients read at once, in rounds that alternate between the two Mains, so
// both meet the same machine load; the figure to compare is on/off
// (docs/benchmarks.md).
// Reads in flight at once, and reads per round of one Main.
const benchWorkers, benchRound = 4, 50

func BenchmarkRecent50Instrumentation(b *testing.B) {
	// The receiver reads and drops what it gets: a collector runs elsewhere, so its
	// decoding is not the service's cost.
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	b.Cleanup(collector.Close)
	tracing, err := telemetry.ConfigFromEnv(func(k string) string {
		return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL}[k]
	})
	require.NoError(b, err)
	on := startMain(b, nil, func(c *Config) { c.Tracing = tracing })
	off := startMain(b, func(m *Main) { m.uninstrumented = true })
	require.NotNil(b, on.main.tracing)
	require.Nil(b, off.main.tracing)

	ctx := context.Background()
	conv := contract.ConversationScope{ConversationID: "bench"}
	clients := map[string]*client.Client{}
	for name, app := range map[string]*testApp{"on": on, "off": off} {
		// As many kept-alive connections as workers: no dial per request.
		hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: benchWorkers}}
		b.Cleanup(hc.CloseIdleConnections)
		c := client.New(client.WithBaseURL(app.base), client.WithHTTPClient(hc))
		batch := make([]contract.ConversationRecord, 200)
		for i := range batch {
			batch[i] = contract.ConversationRecord{ID: fmt.Sprintf("m-%03d", i), Scope: conv, Role: contract.RoleUser,
				Content: fmt.Sprintf("message %d of the benchmark conversation, about forty bytes", i)}
		}
		_, err := c.AppendMessages(ctx, &contract.AppendMessagesRequest{Messages: batch})
		require.NoError(b, err)
		clients[name] = c
	}
	read := func(c *client.Client) {
		res, err := c.RecentMessages(ctx, &contract.RecentMessagesRequest{Scope: conv})
		if err != nil || len(res.Messages) != contract.DefaultMessagesLimit {
			b.Errorf("recent: %v", err)
		}
	}
	// phase sends n reads with benchWorkers concurrent clients and returns how long
	// they took: throughput with the server kept busy, as a replica under load is.
	phase := func(c *client.Client, n int) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		var next atomic.Int64
		for range benchWorkers {
			wg.Go(func() {
				for next.Add(1) <= int64(n) {
					read(c)
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	phase(clients["on"], 200) // warm both: connections, plans, caches
	phase(clients["off"], 200)
	var onTime, offTime time.Duration
	b.ResetTimer()
	// Alternating rounds: both meet the same machine load over the run.
	for done := 0; done < b.N; done += benchRound {
		n := min(benchRound, b.N-done)
		if done/benchRound%2 == 0 {
			offTime += phase(clients["off"], n)
			onTime += phase(clients["on"], n)
		} else {
			onTime += phase(clients["on"], n)
			offTime += phase(clients["off"], n)
		}
	}
	b.StopTimer()
	onRate := float64(b.N) / onTime.Seconds()
	offRate := float64(b.N) / offTime.Seconds()
	b.ReportMetric(offRate, "off_req/s")
	b.ReportMetric(onRate, "on_req/s")
	b.ReportMetric(onRate/offRate, "on/off")
}
