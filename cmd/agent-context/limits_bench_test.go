package main

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime/ratelimit"
)

// BenchmarkRateLimitLatency measures what rate limiting adds to a request: the same
// cheap route (messages/recent of an empty conversation, one agent) on three servers
// side by side, with limiting off (the baseline), with the memory limiter, and with
// the postgres limiter, every level on (agent, tool and global, each split into 16
// shards) with budgets it never exhausts. Each b.N round runs every server for one
// second, with 1 client and with 8, and reports the latency quantiles of each.
//
//	go test -run '^$' -bench BenchmarkRateLimitLatency -benchtime 3x ./cmd/agent-context
func BenchmarkRateLimitLatency(b *testing.B) {
	unlimited := ratelimit.RateLimits{GlobalPerMin: ratelimit.MaxRatePerMin, AgentPerMin: ratelimit.MaxRatePerMin,
		ToolPerMin: ratelimit.MaxRatePerMin}
	servers := []struct {
		name string
		app  *msgBenchApp
	}{
		{"off", startMsgBenchApp(b)},
		{"memory", startMsgBenchApp(b, func(c *Config) { c.RateLimits = unlimited })},
		{"postgres", startMsgBenchApp(b, func(c *Config) {
			c.RateLimits, c.RateLimitBackend = unlimited, RateLimitPostgres
		})},
	}
	body := []byte(`{"scope":{"conversationId":"c"},"limit":50}`)
	for _, clients := range []int{1, throughputClients} {
		b.Run(fmt.Sprintf("clients-%d", clients), func(b *testing.B) {
			latencies := make([][]time.Duration, len(servers))
			reads := make([]func(*rand.Rand) error, len(servers))
			for i, s := range servers {
				transport := &http.Transport{MaxIdleConnsPerHost: clients}
				b.Cleanup(transport.CloseIdleConnections)
				client := &http.Client{Transport: transport, Timeout: time.Minute}
				reads[i] = func(*rand.Rand) error {
					resp, err := client.Post(s.app.base+contract.RouteMessagesRecent.Path, "application/json", bytes.NewReader(body))
					if err != nil {
						return err
					}
					defer resp.Body.Close()
					if _, err := io.Copy(io.Discard, resp.Body); err == nil && resp.StatusCode != http.StatusOK {
						return fmt.Errorf("%s: status %d", s.name, resp.StatusCode)
					}
					return err
				}
				// Warm: connections, plans, and the postgres limiter's bucket rows.
				for range 200 {
					require.NoError(b, reads[i](nil))
				}
			}
			for b.Loop() {
				for i := range servers {
					_, lat := runClients(b, clients, time.Second, reads[i])
					latencies[i] = append(latencies[i], lat...)
				}
			}
			for i, s := range servers {
				slices.Sort(latencies[i])
				for _, q := range []float64{0.50, 0.99} {
					at := latencies[i][int(q*float64(len(latencies[i])-1))]
					b.ReportMetric(float64(at.Microseconds())/1000, fmt.Sprintf("%s-p%d-ms", s.name, int(q*100)))
				}
			}
		})
	}
}
