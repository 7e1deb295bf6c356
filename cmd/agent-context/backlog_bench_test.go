package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/embedding/local/localtest"
	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/contract"
	rt "github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/memory"
)

// backlogBurst is the size of the burst BenchmarkEmbeddingBacklog writes, in creates
// of burstBatch entries (as an import makes them), and backlogPatience how long it
// waits for it to drain: a backlog that has not drained by then is reported at the
// pace it had (entries embedded over the time waited).
const (
	backlogBurst    = 10_000
	burstBatch      = 500
	backlogPatience = 15 * time.Minute
)

// BenchmarkEmbeddingBacklog measures how fast new entries become recallable by meaning
// with the local embedder, against what that embedder does alone on the same texts,
// in the same run. Each round:
//
//  1. the embedder alone: a second instance of the service's embedder (same
//     configuration) embeds the burst's texts from one goroutine per core, in batches
//     of the projection's claim, and reports texts/s;
//  2. the burst: 10,000 entries are written through the store in one transaction, as
//     an import writes them (their queue rows and one projection job commit together),
//     on a service with its default job workers; the clock runs from the commit until
//     the maintenance status says pendingEntries 0;
//  3. the embedder alone again, so that a change of the machine's load during the
//     round shows (the ratio is taken against the mean of both).
//
// It reports entries/s of the backlog, the embedder's texts/s (mean of both), their
// ratio, the longest time pendingEntries stood still (it must fall steadily), and the
// time from the commit until the fold has moved every vector into the HNSW graph
// (fold-done-s); it logs the backlog second by second.
//
//	AGENT_CONTEXT_MODEL_DIR=… go run ./adapters/postgres/pgtest/pgtestrun -- \
//	  go test -run '^$' -bench BenchmarkEmbeddingBacklog -benchtime 1x -timeout 30m ./cmd/agent-context
func BenchmarkEmbeddingBacklog(b *testing.B) {
	modelDir := localtest.ModelDir(b)
	texts := backlogTexts(backlogBurst)
	var backlogRate, aloneRate, stall, folded float64
	for round := range b.N {
		app, alone := startLocalEmbedderApp(b, modelDir)
		before := embedAlone(b, alone, texts)

		db, err := postgres.NewDB(context.Background(), app.pool, postgres.DBOptions{})
		require.NoError(b, err)
		scope := rt.Scope{TenantID: "local", ProjectID: "local"}
		start := writeBurst(b, db, scope, texts, alone.Model(), fmt.Sprintf("burst-%d-", round))
		elapsed, series, longestStall := waitBacklog(b, app, start)
		foldDone := waitFold(b, app, alone.Model(), start)
		after := embedAlone(b, alone, texts)

		embedded := len(texts) - int(series[len(series)-1])
		backlogRate += float64(embedded) / elapsed.Seconds()
		aloneRate += (before + after) / 2
		stall = max(stall, longestStall.Seconds())
		folded += foldDone.Seconds()
		b.Logf("round %d: backlog %.0f entries/s (%d embedded in %.1f s), all folded into the graph after %.1f s; embedder alone %.0f texts/s before, %.0f after; pendingEntries by second: %v",
			round, float64(embedded)/elapsed.Seconds(), embedded, elapsed.Seconds(), foldDone.Seconds(), before, after, series)
	}
	b.ReportMetric(backlogRate/float64(b.N), "entries/s")
	b.ReportMetric(aloneRate/float64(b.N), "embedder-texts/s")
	b.ReportMetric(backlogRate/aloneRate, "ratio")
	b.ReportMetric(stall, "max-stall-s")
	b.ReportMetric(folded/float64(b.N), "fold-done-s")
}

// startLocalEmbedderApp starts a service with the local embedder of modelDir and its
// default job workers, and returns it with a second instance of that embedder (same
// configuration) to run alone beside it.
func startLocalEmbedderApp(b *testing.B, modelDir string) (*msgBenchApp, memory.Embedder) {
	b.Helper()
	app := startMsgBenchApp(b, func(c *Config) { c.Embedder, c.ModelDir = EmbedderLocal, modelDir })
	cfg, err := LoadConfig(func(string) string { return "" })
	require.NoError(b, err)
	cfg.Embedder, cfg.ModelDir = EmbedderLocal, modelDir
	alone, err := newEmbedder(cfg)
	require.NoError(b, err)
	return app, alone
}

// waitFold polls the model's vector table until no vector is outside the HNSW graph
// (or backlogPatience passed) and returns the time since start.
func waitFold(b *testing.B, app *msgBenchApp, model memory.EmbeddingModel, start time.Time) time.Duration {
	b.Helper()
	ctx := context.Background()
	var table string
	require.NoError(b, app.pool.QueryRow(ctx, `SELECT table_name FROM vector_models WHERE model_id = $1`, model.ID).Scan(&table))
	for {
		var outside int64
		require.NoError(b, app.pool.QueryRow(ctx, `SELECT count(*) FROM `+table+` WHERE NOT indexed`).Scan(&outside))
		if outside == 0 || time.Since(start) > backlogPatience {
			return time.Since(start)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// embedAlone embeds texts with e from one goroutine per core, each taking the next
// batch of the projection's claim size, and returns texts/s.
func embedAlone(b *testing.B, e memory.Embedder, texts []string) float64 {
	b.Helper()
	batches := make(chan []string, len(texts)/memory.DefaultProjectionBatch+1)
	for i := 0; i < len(texts); i += memory.DefaultProjectionBatch {
		batches <- texts[i:min(i+memory.DefaultProjectionBatch, len(texts))]
	}
	close(batches)
	var wg sync.WaitGroup
	errs := make(chan error, runtime.GOMAXPROCS(0))
	start := time.Now()
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for batch := range batches {
				if _, err := e.Embed(context.Background(), batch); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	require.NoError(b, <-errs)
	return float64(len(texts)) / elapsed.Seconds()
}

// writeBurst writes an active fact per text into scope through the store, in one
// transaction with their queue rows and the projection job, and returns when it
// committed.
func writeBurst(b *testing.B, db *postgres.DB, scope rt.Scope, texts []string, model memory.EmbeddingModel, prefix string) time.Time {
	b.Helper()
	ctx := context.Background()
	now := time.Now().UnixMilli()
	err := db.Memory().WithinTx(ctx, func(ctx context.Context, tx memory.Stores) error {
		written, digests := make([]contract.ContextEntry, len(texts)), make([]string, len(texts))
		for i, text := range texts {
			written[i] = contract.ContextEntry{ID: fmt.Sprintf("%s%05d", prefix, i), Kind: "fact", Content: text,
				SourceRecordIDs: []string{}, Tags: []string{}, Importance: contract.DefaultEntryImportance,
				Status: contract.EntryActive, Version: 1, CreatedAtMs: now, UpdatedAtMs: now}
			digest, err := memory.EntryDigest(&written[i])
			if err != nil {
				return err
			}
			digests[i] = digest
		}
		for from := 0; from < len(written); from += burstBatch {
			to := min(from+burstBatch, len(written))
			if _, err := tx.Entries.CreateEntries(ctx, scope, written[from:to], digests[from:to]); err != nil {
				return err
			}
		}
		if err := tx.Projection.Enqueue(ctx, scope, written, model); err != nil {
			return err
		}
		return tx.Jobs.Enqueue(ctx, memory.ProjectionJob{TenantID: scope.TenantID, ProjectID: scope.ProjectID})
	})
	require.NoError(b, err)
	return time.Now()
}

// waitBacklog polls the maintenance status until pendingEntries is 0 (or
// backlogPatience passed) and returns the time since start, pendingEntries at each
// whole second and at the end, and the longest time it stood still above 0.
func waitBacklog(b *testing.B, app *msgBenchApp, start time.Time) (time.Duration, []int64, time.Duration) {
	b.Helper()
	var series []int64
	var longest time.Duration
	last, lastChange := int64(-1), start
	for {
		resp, err := app.client.Get(app.base + contract.RouteMaintenanceStatus.Path)
		require.NoError(b, err)
		var st contract.MaintenanceStatus
		err = json.NewDecoder(resp.Body).Decode(&st)
		require.NoError(b, resp.Body.Close())
		require.NoError(b, err)
		require.Equal(b, http.StatusOK, resp.StatusCode)
		now, pending := time.Now(), st.VectorProjection.PendingEntries
		for time.Duration(len(series))*time.Second <= now.Sub(start) {
			series = append(series, pending)
		}
		if pending != last {
			last, lastChange = pending, now
		}
		longest = max(longest, now.Sub(lastChange))
		if pending == 0 || now.Sub(start) > backlogPatience {
			return now.Sub(start), append(series, pending), longest
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// backlogTexts generates n distinct memory-sized texts (10–16 words).
func backlogTexts(n int) []string {
	subjects := strings.Fields("billing search auth mail payments reporting analytics checkout inventory shipping " +
		"login signup profile notifications invoices exports imports backups metrics logging")
	verbs := strings.Fields("deploys fails restarts scales migrates stalls caches retries syncs crashes " +
		"throttles rotates rebuilds drains pauses resumes upgrades degrades")
	times := []string{"on Fridays", "after midnight", "during audits", "at peak traffic", "before releases",
		"in Frankfurt", "behind the proxy", "under load", "after upgrades", "on weekends", "in staging"}
	remarks := []string{"per the runbook", "since the outage", "as Ana noted", "according to Tom",
		"until further notice", "as a workaround", "as the dashboard shows", "to save costs"}
	r := rand.New(rand.NewPCG(25, 7))
	pick := func(words []string) string { return words[r.IntN(len(words))] }
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("Memory %d: the %s service %s %s, %s.", i, pick(subjects), pick(verbs), pick(times), pick(remarks))
	}
	return out
}

// postedOneByOne is how many entries BenchmarkEntriesPostedOneByOne posts, by
// postingClients clients over postingScopes scopes, when it is given no LoCoMo file.
const (
	postedOneByOne = 2_000
	postingClients = 4
	postingScopes  = 3
)

// postedEntry is an entry BenchmarkEntriesPostedOneByOne posts: its text and the tenant
// (scope) it is posted to.
type postedEntry struct {
	tenant, text string
}

// entriesToPost are the entries BenchmarkEntriesPostedOneByOne posts: with a LoCoMo
// file named (envLoCoMo), every turn of every conversation in it, in order, each
// conversation its own scope; without, postedOneByOne generated facts, entry i to the
// scope of the client that posts it (i mod postingClients) mod postingScopes.
func entriesToPost(b *testing.B) (entries []postedEntry, source string) {
	conversations, path := readLoCoMo(b)
	if conversations == nil {
		for i, text := range backlogTexts(postedOneByOne) {
			entries = append(entries, postedEntry{fmt.Sprintf("tenant-%d", i%postingClients%postingScopes), text})
		}
		return entries, fmt.Sprintf("%d generated facts over %d scopes", len(entries), postingScopes)
	}
	for c, conv := range conversations {
		for _, t := range conv.Turns {
			entries = append(entries, postedEntry{fmt.Sprintf("conversation-%d", c), t.Content()})
		}
	}
	return entries, fmt.Sprintf("%d LoCoMo turns of %s, a scope per conversation (%d)", len(entries), path, len(conversations))
}

// BenchmarkEntriesPostedOneByOne measures how fast entries posted one per request
// become recallable by meaning with the local embedder, against what that embedder does
// alone on the same texts, in the same run. Each round: the embedder alone (as in
// BenchmarkEmbeddingBacklog); then 4 clients post the entries, each its own request,
// client i every fourth in order, on a service with its default job workers, and the
// clock runs from the first post until no entry waits for its vector in any scope;
// then the embedder alone again. The entries are every turn of the LoCoMo file(s)
// named by AGENT_CONTEXT_LOCOMO, a scope per conversation, or else 2,000 generated
// facts over 3 scopes (entriesToPost). It reports entries/s from the first post until
// all are embedded, their ratio to the embedder's texts/s, the entries still waiting
// when the posting ended, the rate at which those drained, and the projection jobs
// enqueued for them.
//
//	AGENT_CONTEXT_MODEL_DIR=… AGENT_CONTEXT_LOCOMO=conv-26.json:conv-30.json:conv-41.json \
//	  go run ./adapters/postgres/pgtest/pgtestrun -- \
//	  go test -run '^$' -bench BenchmarkEntriesPostedOneByOne -benchtime 1x -timeout 30m ./cmd/agent-context
func BenchmarkEntriesPostedOneByOne(b *testing.B) {
	modelDir := localtest.ModelDir(b)
	entries, source := entriesToPost(b)
	texts := make([]string, len(entries))
	for i, e := range entries {
		texts[i] = e.text
	}
	b.Logf("posting %s", source)
	var rate, aloneRate, drain, waiting, jobs float64
	for round := range b.N {
		app, alone := startLocalEmbedderApp(b, modelDir)
		before := embedAlone(b, alone, texts)

		start := time.Now()
		postOneByOne(b, app, entries, fmt.Sprintf("posted-%d-", round))
		posted := time.Since(start)
		left := queuedEntries(b, app)
		for queuedEntries(b, app) > 0 {
			require.Less(b, time.Since(start), backlogPatience, "the entries are still waiting")
			time.Sleep(50 * time.Millisecond)
		}
		elapsed := time.Since(start)
		var n int64
		require.NoError(b, app.pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE kind = $1`,
			memory.ProjectionJob{}.Kind()).Scan(&n))
		after := embedAlone(b, alone, texts)

		drained := float64(left) / max(elapsed-posted, time.Millisecond).Seconds()
		rate += float64(len(texts)) / elapsed.Seconds()
		aloneRate += (before + after) / 2
		drain += drained
		waiting += float64(left)
		jobs += float64(n)
		b.Logf("round %d: posted in %.1f s (%.0f/s), %d waiting then, drained in %.1f s (%.0f entries/s), all embedded after %.1f s (%.0f entries/s), %d projection jobs; embedder alone %.0f texts/s before, %.0f after",
			round, posted.Seconds(), float64(len(texts))/posted.Seconds(), left, (elapsed - posted).Seconds(), drained, elapsed.Seconds(),
			float64(len(texts))/elapsed.Seconds(), n, before, after)
	}
	b.ReportMetric(rate/float64(b.N), "entries/s")
	b.ReportMetric(aloneRate/float64(b.N), "embedder-texts/s")
	b.ReportMetric(rate/aloneRate, "ratio")
	b.ReportMetric(drain/float64(b.N), "drain-entries/s")
	b.ReportMetric(drain/aloneRate, "drain-ratio")
	b.ReportMetric(waiting/float64(b.N), "waiting-at-end")
	b.ReportMetric(jobs/float64(b.N), "projection-jobs")
}

// postOneByOne posts each entry as a fact, each its own request, from postingClients
// clients, client i every postingClients-th in order, and returns when all were
// created.
func postOneByOne(b *testing.B, app *msgBenchApp, entries []postedEntry, prefix string) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, postingClients)
	for c := range postingClients {
		wg.Go(func() {
			for i := c; i < len(entries); i += postingClients {
				body, err := json.Marshal(map[string]any{"id": fmt.Sprintf("%s%05d", prefix, i), "kind": "fact", "content": entries[i].text})
				if err != nil {
					errs <- err
					return
				}
				req, err := http.NewRequest(http.MethodPost, app.base+contract.RouteEntriesCreate.Path, strings.NewReader(string(body)))
				if err != nil {
					errs <- err
					return
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("x-infra-tenant-id", entries[i].tenant)
				resp, err := app.client.Do(req)
				if err != nil {
					errs <- err
					return
				}
				if err := resp.Body.Close(); err != nil || resp.StatusCode != http.StatusCreated {
					errs <- fmt.Errorf("create %d: status %d, %v", i, resp.StatusCode, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	require.NoError(b, <-errs)
}

// queuedEntries is how many entries of every scope wait for their vectors.
func queuedEntries(b *testing.B, app *msgBenchApp) int64 {
	b.Helper()
	var n int64
	require.NoError(b, app.pool.QueryRow(context.Background(), `SELECT count(*) FROM entry_projection_queue`).Scan(&n))
	return n
}
