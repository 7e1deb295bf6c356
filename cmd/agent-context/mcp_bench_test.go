package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
)

// BenchmarkMCPThroughput measures what the MCP door costs over the route it wraps: 8
// clients call memory_recall (hybrid, top 10 of 2,000 entries) and conversation_recent
// (limit 50 of 100,000 messages in 1,000 conversations) as MCP tool calls — stateless,
// one JSON-RPC tools/call per POST, as the SDK's streamable client sends them — and the
// same reads on POST /recall and POST /messages/recent, over loopback against the same
// Main. The load generator reads each answer whole and checks its status; it decodes
// nothing, so the figures are the service's. It reports each reader's calls/s, the MCP
// ones' ratios to their route, every latency's p50 and p99, and the CPU time this
// process (service and load generator, not Postgres) spent per call — a figure that a
// busy machine disturbs less than rates and latencies. Each b.N round is one
// second-long run of each reader.
//
//	go test -run '^$' -bench BenchmarkMCPThroughput -benchtime 5x -timeout 30m ./cmd/agent-context
func BenchmarkMCPThroughput(b *testing.B) {
	app := startMsgBenchApp(b)
	const conversations, perConversation, entries = 1_000, 100, 2_000
	loadMessages(b, app.pool, conversations, perConversation)
	words := []string{"deploy", "staging", "release", "database", "migration", "cluster", "review", "latency",
		"budget", "incident", "rollback", "schema", "token", "gateway", "replica", "backup"}
	transport := &http.Transport{MaxIdleConnsPerHost: throughputClients}
	client := &http.Client{Transport: transport, Timeout: time.Minute}
	b.Cleanup(transport.CloseIdleConnections)
	send := func(path string, body []byte, mcp bool, want int) error {
		req, err := http.NewRequest(http.MethodPost, app.base+path, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		if mcp {
			req.Header.Set("Accept", "application/json, text/event-stream")
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		answer, err := io.ReadAll(resp.Body)
		if err == nil && (resp.StatusCode != want || mcp && bytes.Contains(answer, []byte(`"isError":true`))) {
			err = fmt.Errorf("%s: status %d: %.300s", path, resp.StatusCode, answer)
		}
		return err
	}
	call := func(path string, body []byte, mcp bool) error { return send(path, body, mcp, http.StatusOK) }
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for w := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := w; i < entries && errs[w] == nil; i += 8 {
				content := fmt.Sprintf("entry %d about %s, %s and %s", i, words[rng.IntN(len(words))],
					words[rng.IntN(len(words))], words[rng.IntN(len(words))])
				errs[w] = send(contract.RouteEntriesCreate.Path,
					fmt.Appendf(nil, `{"id":"e-%d","kind":"fact","content":%q}`, i, content), false, http.StatusCreated)
			}
		})
	}
	wg.Wait()
	require.NoError(b, errors.Join(errs...))
	require.Eventually(b, func() bool {
		var st contract.MaintenanceStatus
		resp, err := app.client.Get(app.base + contract.RouteMaintenanceStatus.Path)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(&st) == nil && st.VectorProjection.PendingEntries == 0
	}, 5*time.Minute, 50*time.Millisecond, "every entry embedded")
	// Statistics as autovacuum leaves them within a minute of the load: without them the
	// recall's plans are those of empty tables, and both doors wait on the database.
	_, err := app.pool.Exec(b.Context(), "ANALYZE")
	require.NoError(b, err)

	toolCall := func(tool string, args string) []byte {
		return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, tool, args)
	}
	query := func(rng *rand.Rand) string {
		return words[rng.IntN(len(words))] + " " + words[rng.IntN(len(words))]
	}
	readers := []struct {
		name      string
		read      func(*rand.Rand) error
		calls     int64
		cpu       time.Duration // this process's CPU (service and load generator; not Postgres)
		latencies []time.Duration
	}{
		{name: "route-recall", read: func(rng *rand.Rand) error {
			return call(contract.RouteRecall.Path, fmt.Appendf(nil, `{"query":%q}`, query(rng)), false)
		}},
		{name: "mcp-recall", read: func(rng *rand.Rand) error {
			return call(contract.PathMCP, toolCall(contract.ToolMemoryRecall, fmt.Sprintf(`{"query":%q}`, query(rng))), true)
		}},
		{name: "route-recent", read: func(rng *rand.Rand) error {
			return call(pathRecent, fmt.Appendf(nil, `{"scope":{"conversationId":"conv-%d"},"limit":50}`, rng.IntN(conversations)), false)
		}},
		{name: "mcp-recent", read: func(rng *rand.Rand) error {
			return call(contract.PathMCP, toolCall(contract.ToolConversationRecent,
				fmt.Sprintf(`{"conversation_id":"conv-%d","limit":50}`, rng.IntN(conversations))), true)
		}},
	}
	for range 200 {
		for _, r := range readers {
			require.NoError(b, r.read(rand.New(rand.NewPCG(9, 9))))
		}
	}
	rounds := 0
	for b.Loop() {
		for i := range readers {
			before := processCPU(b)
			n, lat := runClients(b, throughputClients, time.Second, readers[i].read)
			readers[i].cpu += processCPU(b) - before
			readers[i].calls, readers[i].latencies = readers[i].calls+n, append(readers[i].latencies, lat...)
		}
		rounds++
	}
	for i, r := range readers {
		b.ReportMetric(float64(r.calls)/float64(rounds), r.name+"-calls/s")
		b.ReportMetric(float64(r.cpu.Microseconds())/float64(r.calls), r.name+"-cpu-us/call")
		reportQuantiles(b, r.name, r.latencies)
		if i%2 == 1 {
			b.ReportMetric(float64(r.calls)/float64(readers[i-1].calls), r.name+"/route")
		}
	}
}

// processCPU is the user and system CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkMCPCallCost is one client reading the newest 50 of a conversation's 100
// messages, call after call, by the route and through conversation_recent: the
// per-call cost of the door without concurrency, to profile one of them alone
// (docs/benchmarks.md):
//
//	go test -run '^$' -bench 'BenchmarkMCPCallCost/mcp' -benchtime 3000x -cpuprofile mcp.cpu ./cmd/agent-context
func BenchmarkMCPCallCost(b *testing.B) {
	app := startMsgBenchApp(b)
	const conversations = 20
	loadMessages(b, app.pool, conversations, 100)
	transport := &http.Transport{}
	client := &http.Client{Transport: transport, Timeout: time.Minute}
	b.Cleanup(transport.CloseIdleConnections)
	read := func(b *testing.B, path string, body func(conversation int) []byte, mcp bool) {
		i := 0
		for b.Loop() {
			i++
			req, err := http.NewRequest(http.MethodPost, app.base+path, bytes.NewReader(body(i%conversations)))
			require.NoError(b, err)
			req.Header.Set("Content-Type", "application/json")
			if mcp {
				req.Header.Set("Accept", "application/json, text/event-stream")
			}
			resp, err := client.Do(req)
			require.NoError(b, err)
			answer, err := io.ReadAll(resp.Body)
			require.NoError(b, errors.Join(err, resp.Body.Close()))
			require.Equal(b, http.StatusOK, resp.StatusCode, "%s", answer)
			require.False(b, mcp && bytes.Contains(answer, []byte(`"isError":true`)), "%s", answer)
		}
	}
	b.Run("route", func(b *testing.B) {
		read(b, pathRecent, func(c int) []byte {
			return fmt.Appendf(nil, `{"scope":{"conversationId":"conv-%d"},"limit":50}`, c)
		}, false)
	})
	b.Run("mcp", func(b *testing.B) {
		read(b, contract.PathMCP, func(c int) []byte {
			return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":{"conversation_id":"conv-%d","limit":50}}}`,
				contract.ToolConversationRecent, c)
		}, true)
	})
}
