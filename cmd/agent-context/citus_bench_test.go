package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/contract/client"
)

// The loads of BenchmarkCitusOverhead.
const (
	// overheadTenants is how many clients call at once, each as a tenant of its own.
	overheadTenants = 16
	// overheadHistory, overheadEntries and overheadA2A are what each tenant holds
	// before the clock starts: a conversation's messages, entries for recall and
	// agent messages, all read.
	overheadHistory = 300
	overheadEntries = 300
	overheadA2A     = 100
	// overheadBatch is how many messages one append posts.
	overheadBatch = 10
	// overheadWarmUp and overheadCalls are each client's untimed and timed calls of
	// each operation.
	overheadWarmUp = 20
	overheadCalls  = 200
)

// overheadStep is one request of an operation, made by client tenant for the i-th time.
type overheadStep struct {
	name string
	call func(tenant int, i int64) error
}

// overheadOp is an operation of BenchmarkCitusOverhead: one request, or a few one
// after the other (an agent message posted, then read).
type overheadOp struct {
	name  string
	unit  string
	steps []overheadStep
}

// overheadBench is the service of BenchmarkCitusOverhead and its callers.
type overheadBench struct {
	base   string
	client *http.Client
	// run tells one round's record IDs from another's.
	run int64
}

// BenchmarkCitusOverhead measures the calls users make most, each one request, from 16
// clients at once, each a tenant of its own (x-infra-tenant-id), against whatever
// database pgtest provides: one Postgres server, or with AGENT_CONTEXT_TEST_CITUS=1 a
// Citus coordinator and two workers on the same machine, every table distributed by
// tenant. Run it both ways back to back and compare (docs/benchmarks.md, "Single node
// beside Citus"). The operations, one after the other, each warmed up and then called
// 200 times by every client:
//   - append: POST /messages/batch of 10 messages to the tenant's live conversation;
//   - recent50: POST /messages/recent, the 50 newest of a 300-message conversation;
//   - recall: POST /recall in the default (hybrid) mode over the tenant's 300 entries;
//   - a2a: POST /a2a/messages/post (a broadcast), then POST /a2a/messages/read by a
//     reader of the same tenant, which returns it and marks it read.
//
// It reports each operation's p50 and p95 in milliseconds (for a2a also of the post and
// the read alone) and its rate over all clients, and logs the machine's load averages
// and, on Citus, the worker each tenant's shard is placed on.
//
//	AGENT_CONTEXT_TEST_CITUS=1 go run ./adapters/postgres/pgtest/pgtestrun -- \
//	  go test -v -run '^$' -bench BenchmarkCitusOverhead -benchtime 1x -timeout 30m ./cmd/agent-context
func BenchmarkCitusOverhead(b *testing.B) {
	ctx := context.Background()
	dsn := pgtest.NewDSN(b)
	m := startBenchMain(b, dsn, func(c *Config) { c.MaxConns = overheadTenants })
	pool, err := postgres.NewPool(ctx, dsn, postgres.PoolOptions{MaxConns: 2, ApplicationName: "bench-admin"})
	require.NoError(b, err)
	b.Cleanup(pool.Close)
	transport := &http.Transport{MaxIdleConnsPerHost: overheadTenants}
	b.Cleanup(transport.CloseIdleConnections)
	o := &overheadBench{base: "http://" + m.Addr(), client: &http.Client{Transport: transport, Timeout: time.Minute}}

	var citus bool
	require.NoError(b, pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')`).Scan(&citus))
	b.Logf("database: citus %v", citus)
	start := time.Now()
	o.seed(b)
	_, err = pool.Exec(ctx, "ANALYZE")
	require.NoError(b, err)
	b.Logf("seeded in %v", time.Since(start).Round(time.Millisecond))
	if citus {
		logTenantSpread(b, pool)
	}

	ops := o.operations(b)
	for range b.N {
		o.run = runIDs.Add(1)
		b.Logf("before: %s", locomoLoad())
		for _, op := range ops {
			o.measure(b, op)
		}
		b.Logf("after: %s", locomoLoad())
	}
}

// overheadTenant is the name of client c's tenant.
func overheadTenant(c int) string { return fmt.Sprintf("tenant-%02d", c) }

// call POSTs body to path as tenant (and subject, when not empty) and fails unless the
// service answers 200 or 201; the answer is read whole and not decoded, so that the
// figures are the service's, not the client's JSON parser's.
func (o *overheadBench) call(path string, body []byte, tenant int, subject string) error {
	req, err := http.NewRequest(http.MethodPost, o.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(neighbourTenant, overheadTenant(tenant))
	if subject != "" {
		req.Header.Set("x-infra-subject", subject)
	}
	resp, err := o.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("%s: status %d: %s", path, resp.StatusCode, data)
	}
	return nil
}

// eachTenant runs work for every tenant at once and fails on the first error.
func eachTenant(b *testing.B, work func(tenant int) error) {
	b.Helper()
	errs := make([]error, overheadTenants)
	var wg sync.WaitGroup
	for c := range overheadTenants {
		wg.Go(func() { errs[c] = work(c) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(b, err)
	}
}

// appendBody is a batch of n messages numbered from first in conversation, content
// drawn from rng.
func appendBody(b *testing.B, rng *rand.Rand, conversation string, first, n int) []byte {
	records := make([]contract.ConversationRecord, n)
	for i := range records {
		records[i] = contract.ConversationRecord{ID: fmt.Sprintf("%s-%d", conversation, first+i),
			Scope: contract.ConversationScope{ConversationID: conversation}, Role: contract.Roles[(first+i)%2],
			Content: msgBenchContent(rng, 20+rng.IntN(40))}
	}
	return mustMarshal(b, contract.AppendMessagesRequest{Messages: records})
}

// seed gives every tenant its conversation, entries (embedded) and agent messages
// (read by its reader), through the API.
func (o *overheadBench) seed(b *testing.B) {
	b.Helper()
	eachTenant(b, func(c int) error {
		rng := rand.New(rand.NewPCG(uint64(c), 1))
		for first := 0; first < overheadHistory; first += 100 {
			if err := o.call(pathBatch, appendBody(b, rng, "history", first, 100), c, ""); err != nil {
				return err
			}
		}
		for i := range overheadEntries {
			body := mustMarshal(b, map[string]any{"id": fmt.Sprintf("entry-%d", i), "kind": contract.EntryKindFact,
				"content": msgBenchContent(rng, 10+rng.IntN(30))})
			if err := o.call(pathEntries, body, c, ""); err != nil {
				return err
			}
		}
		for i := range overheadA2A {
			body := mustMarshal(b, map[string]any{"messageId": fmt.Sprintf("seed-%d", i), "content": "status update from the planner",
				"category": "task_update"})
			if err := o.call(contract.RouteA2AMessagesPost.Path, body, c, "sender"); err != nil {
				return err
			}
		}
		return o.call(contract.RouteA2AMessagesRead.Path, []byte(`{"limit":500}`), c, "reader")
	})
	for c := range overheadTenants {
		waitEmbedded(b, client.New(client.WithBaseURL(o.base), client.WithHTTPClient(o.client),
			client.WithHeader(neighbourTenant, overheadTenant(c))))
	}
}

// operations returns the four operations in the order they are measured.
func (o *overheadBench) operations(b *testing.B) []overheadOp {
	rngs := make([]*rand.Rand, overheadTenants)
	for c := range rngs {
		rngs[c] = rand.New(rand.NewPCG(uint64(c), 2))
	}
	return []overheadOp{
		{name: "append", unit: "calls/s", steps: []overheadStep{{"append", func(c int, i int64) error {
			return o.call(pathBatch, appendBody(b, rngs[c], fmt.Sprintf("live-%d", o.run), int(i)*overheadBatch, overheadBatch), c, "")
		}}}},
		{name: "recent50", unit: "calls/s", steps: []overheadStep{{"recent50", func(c int, _ int64) error {
			return o.call(pathRecent, []byte(`{"scope":{"conversationId":"history"},"limit":50}`), c, "")
		}}}},
		{name: "recall", unit: "calls/s", steps: []overheadStep{{"recall", func(c int, _ int64) error {
			return o.call(pathRecall, mustMarshal(b, map[string]any{"query": msgBenchContent(rngs[c], 6)}), c, "")
		}}}},
		{name: "a2a", unit: "pairs/s", steps: []overheadStep{
			{"a2a-post", func(c int, i int64) error {
				body := mustMarshal(b, map[string]any{"messageId": fmt.Sprintf("m-%d-%d", o.run, i),
					"content": "status update from the planner", "category": "task_update"})
				return o.call(contract.RouteA2AMessagesPost.Path, body, c, "sender")
			}},
			{"a2a-read", func(c int, _ int64) error {
				return o.call(contract.RouteA2AMessagesRead.Path, []byte(`{}`), c, "reader")
			}},
		}},
	}
}

// measure warms op up, then has every client call it overheadCalls times at once, and
// reports its latencies and rate.
func (o *overheadBench) measure(b *testing.B, op overheadOp) {
	b.Helper()
	// Warm-up calls are numbered after the timed ones, so that their IDs differ.
	eachTenant(b, func(c int) error {
		for i := range overheadWarmUp {
			for _, s := range op.steps {
				if err := s.call(c, int64(overheadCalls+i)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	// latencies[c][s] are client c's times of step s; the last, when an operation has
	// more than one step, the whole operation's.
	latencies := make([][][]time.Duration, overheadTenants)
	start := time.Now()
	eachTenant(b, func(c int) error {
		mine := make([][]time.Duration, len(op.steps)+1)
		for i := range int64(overheadCalls) {
			opStart := time.Now()
			for s, step := range op.steps {
				stepStart := time.Now()
				if err := step.call(c, i); err != nil {
					return err
				}
				mine[s] = append(mine[s], time.Since(stepStart))
			}
			mine[len(op.steps)] = append(mine[len(op.steps)], time.Since(opStart))
		}
		latencies[c] = mine
		return nil
	})
	elapsed := time.Since(start)
	rate := float64(overheadTenants*overheadCalls) / elapsed.Seconds()
	b.ReportMetric(rate, op.name+"-"+op.unit)
	names := []string{op.name}
	if len(op.steps) > 1 {
		names = nil
		for _, s := range op.steps {
			names = append(names, s.name)
		}
		names = append(names, op.name)
	}
	line := []string{fmt.Sprintf("%-8s %8.0f %s", op.name, rate, op.unit)}
	for s, name := range names {
		var all []time.Duration
		for c := range latencies {
			all = append(all, latencies[c][s]...)
		}
		p50, p95 := percentileMs(all, 0.50), percentileMs(all, 0.95)
		b.ReportMetric(p50, name+"-p50-ms")
		b.ReportMetric(p95, name+"-p95-ms")
		line = append(line, fmt.Sprintf("%s p50 %.2f ms p95 %.2f ms", name, p50, p95))
	}
	b.Log(strings.Join(line, "  "))
}

// logTenantSpread logs the shard and the worker of every tenant on a Citus coordinator,
// and how many tenants each worker holds. Every table is colocated, so the messages'
// table places every table's rows of a tenant.
func logTenantSpread(b *testing.B, pool *pgxpool.Pool) {
	b.Helper()
	ctx := context.Background()
	perWorker := map[string]int{}
	var lines []string
	for c := range overheadTenants {
		var shard int64
		var node string
		require.NoError(b, pool.QueryRow(ctx, `SELECT s.shardid, p.nodename || ':' || p.nodeport
			FROM (SELECT get_shard_id_for_distribution_column('messages', $1::text) AS shardid) s
			JOIN pg_dist_shard_placement p ON p.shardid = s.shardid`, overheadTenant(c)).Scan(&shard, &node))
		perWorker[node]++
		lines = append(lines, fmt.Sprintf("%s shard %d on %s", overheadTenant(c), shard, node))
	}
	workers := make([]string, 0, len(perWorker))
	for node, n := range perWorker {
		workers = append(workers, fmt.Sprintf("%s: %d tenants", node, n))
	}
	slices.Sort(workers)
	b.Logf("tenants' placements:\n%s\nper worker: %s", strings.Join(lines, "\n"), strings.Join(workers, ", "))
}
