package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/conversation"
)

// throughputClients is how many clients read at once, in each reader of the benchmark.
const throughputClients = 8

// BenchmarkMessagesRecentThroughput measures what the HTTP layer costs: 8 clients read
// messages/recent (limit 50) of random conversations among 1,000,000 messages over
// HTTP on loopback — from the same process as the service (Main, quiet: no log lines),
// and from outside it (the service in a process of its own, configured as in
// production, logging every request) — and by calling the store (the same statement
// through a pgx pool of the server's size, decoded into the same Go types). It
// reports the reads/s of each, the HTTP ones' ratios to the direct calls, and every
// latency's p50 and p99. Each b.N round is one second-long run of each, so
// -benchtime 5x runs five.
//
//	go test -run '^$' -bench BenchmarkMessagesRecentThroughput -benchtime 5x -timeout 30m ./cmd/agent-context
func BenchmarkMessagesRecentThroughput(b *testing.B) {
	app := startMsgBenchApp(b)
	const conversations, perConversation = 10_000, 100
	loadMessages(b, app.pool, conversations, perConversation)
	ctx := context.Background()

	direct, err := postgres.NewPool(ctx, app.dsn, postgres.PoolOptions{MaxConns: app.maxConns, ApplicationName: "bench-direct"})
	require.NoError(b, err)
	b.Cleanup(direct.Close)
	db, err := postgres.NewDB(context.Background(), direct, postgres.DBOptions{})
	require.NoError(b, err)
	store := db.Messages()
	scope := runtime.Scope{TenantID: "local", ProjectID: "local"}

	transport := &http.Transport{MaxIdleConnsPerHost: throughputClients}
	client := &http.Client{Transport: transport, Timeout: time.Minute}
	b.Cleanup(transport.CloseIdleConnections)
	// The HTTP client is a load generator: it reads each answer whole and checks its
	// status and size, and leaves decoding to the one check below, so that the
	// figure is the service's cost, not the client's JSON parser's.
	httpReadFrom := func(base string) func(*rand.Rand) error {
		return func(rng *rand.Rand) error {
			body := fmt.Appendf(nil, `{"scope":{"conversationId":"conv-%d"},"limit":50}`, rng.IntN(conversations))
			resp, err := client.Post(base+pathRecent, "application/json", bytes.NewReader(body))
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			n, err := io.Copy(io.Discard, resp.Body)
			if err == nil && (resp.StatusCode != http.StatusOK || n < 50*100) {
				err = fmt.Errorf("status %d, %d bytes", resp.StatusCode, n)
			}
			return err
		}
	}
	httpRead := httpReadFrom(app.base)
	outside := startServiceProcess(b, app.dsn, fmt.Sprintf("AGENT_CONTEXT_DB_MAX_CONNS=%d", app.maxConns))
	outsideRead := httpReadFrom(outside.base)
	var checked contract.MessagesResponse
	app.post(b, pathRecent, []byte(`{"scope":{"conversationId":"conv-1"},"limit":50}`), &checked)
	require.Len(b, checked.Messages, 50)
	directRead := func(rng *rand.Rand) error {
		msgs, _, err := store.ListMessages(ctx, scope, conversation.MessageQuery{
			ConversationID: fmt.Sprintf("conv-%d", rng.IntN(conversations)), Descending: true, Limit: 50,
			MaxBytes: contract.MaxMessagesResponseBytes,
		})
		if err == nil && len(msgs) != 50 {
			err = fmt.Errorf("%d messages", len(msgs))
		}
		return err
	}
	readers := []struct {
		name      string
		read      func(*rand.Rand) error
		reads     int64
		latencies []time.Duration
	}{{name: "http", read: httpRead}, {name: "outside", read: outsideRead}, {name: "direct", read: directRead}} // direct last: the baseline
	// Warm each: connections, plans, the cache of the rows.
	for range 200 {
		for _, r := range readers {
			require.NoError(b, r.read(rand.New(rand.NewPCG(9, 9))))
		}
	}

	rounds := 0
	for b.Loop() {
		for i := range readers {
			n, lat := runClients(b, throughputClients, time.Second, readers[i].read)
			readers[i].reads, readers[i].latencies = readers[i].reads+n, append(readers[i].latencies, lat...)
		}
		rounds++
	}
	baseline := readers[len(readers)-1]
	for _, r := range readers {
		b.ReportMetric(float64(r.reads)/float64(rounds), r.name+"-reads/s")
		if r.name != baseline.name {
			b.ReportMetric(float64(r.reads)/float64(baseline.reads), r.name+"/direct")
		}
		reportQuantiles(b, r.name, r.latencies)
	}
}

// reportQuantiles reports the p50 and p99 of latencies in milliseconds as
// <name>-p50-ms and <name>-p99-ms.
func reportQuantiles(b *testing.B, name string, latencies []time.Duration) {
	slices.Sort(latencies)
	for _, q := range []float64{0.50, 0.99} {
		b.ReportMetric(float64(latencies[int(q*float64(len(latencies)-1))].Microseconds())/1000, fmt.Sprintf("%s-p%d-ms", name, int(q*100)))
	}
}

// runClients runs read from clients goroutines for d and returns how many reads
// completed and each one's latency.
func runClients(b *testing.B, clients int, d time.Duration, read func(*rand.Rand) error) (int64, []time.Duration) {
	var done atomic.Int64
	var mu sync.Mutex
	var all []time.Duration
	var failed atomic.Value
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), uint64(time.Now().UnixNano())))
			var mine []time.Duration
			for time.Now().Before(deadline) {
				start := time.Now()
				if err := read(rng); err != nil {
					failed.Store(err)
					return
				}
				mine = append(mine, time.Since(start))
				done.Add(1)
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		b.Fatal(err)
	}
	return done.Load(), all
}
