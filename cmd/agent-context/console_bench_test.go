package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/contract"
	rt "github.com/agent-context/agent-context/runtime"
)

// BenchmarkConsolePages measures the server-side time of each console page over
// loopback HTTP (open mode, so no session lookup) in a scope of 1,000,000 messages
// (10,000 conversations of 100), 10,000 windows, 100,000 entries and 1,000 model
// invocations, beside GET /health on the same connection as the baseline (the floor
// of HTTP itself). Each iteration asks every page once; the fastest answer, p50 and p95
// per page are reported in ms.
//
//	go run ./adapters/postgres/pgtest/pgtestrun -- \
//	  go test -run '^$' -bench BenchmarkConsolePages -benchtime 200x -timeout 30m ./cmd/agent-context
func BenchmarkConsolePages(b *testing.B) {
	app := loadConsoleBench(b)
	pages := []struct{ name, path string }{
		{"health-baseline", "/health"},
		{"overview", "/console/"},
		{"conversations", "/console/conversations"},
		{"conversation", "/console/conversations/conv-7"},
		{"conversation-search", "/console/conversations/conv-7?q=heartbeat"},
		{"window", "/console/windows/w-3"},
		{"invocations", "/console/invocations"},
		{"invocation", "/console/invocations/inv-7"},
		{"entries", "/console/entries?status=active"},
		{"entries-by-tag", "/console/entries?tag=t7"},
		{"entry", "/console/entries/be-77"},
		{"a2a", "/console/a2a"},
		{"events", "/console/events"},
		{"costs", "/console/costs?groupBy=agent&range=all"},
		{"recall", "/console/recall?q=billing+note+77&mode=hybrid"},
	}
	for _, p := range pages {
		getPage(b, app, p.path)
	}
	took := make([][]time.Duration, len(pages))
	for b.Loop() {
		for i, p := range pages {
			took[i] = append(took[i], getPage(b, app, p.path))
		}
	}
	for i, p := range pages {
		// p0, the fastest answer, is the page's cost with the least queueing for the
		// CPU: on a loaded machine it is the figure nearest the page's own work.
		reportPageQuantiles(b, p.name, took[i], 0, 0.50, 0.95)
	}
}

// getPage asks app for path, reads the answer whole, requires 200 and returns how long
// that took.
func getPage(b *testing.B, app *msgBenchApp, path string) time.Duration {
	b.Helper()
	t0 := time.Now()
	resp, err := app.client.Get(app.base + path)
	require.NoError(b, err)
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(b, err)
	require.NoError(b, resp.Body.Close())
	require.Equal(b, http.StatusOK, resp.StatusCode, path)
	return time.Since(t0)
}

// reportPageQuantiles reports the quantiles qs of a page's times d, in ms, as
// <name>-p<q>-ms.
func reportPageQuantiles(b *testing.B, name string, d []time.Duration, qs ...float64) {
	slices.Sort(d)
	for _, q := range qs {
		b.ReportMetric(float64(d[int(q*float64(len(d)-1))].Microseconds())/1000, fmt.Sprintf("%s-p%d-ms", name, int(q*100)))
	}
}

// loadConsoleBench starts Main on a scope of 1,000,000 messages, 10,000 windows,
// 100,000 entries, and the measured window w-3 of conv-7 with its lineage and 1,000
// invocations.
func loadConsoleBench(b *testing.B) *msgBenchApp {
	app := startMsgBenchApp(b)
	ctx := context.Background()
	loadMessages(b, app.pool, 10_000, 100)
	start := time.Now()
	// 10,000 windows and 100,000 entries in SQL, with every index in place.
	_, err := app.pool.Exec(ctx, `
		INSERT INTO context_windows (tenant_id, project_id, window_id, conversation_id, stage, purpose, token_count,
			item_count, content_bytes, content_sha256, created_at_ms)
		SELECT 'local', 'local', 'bw-' || g, 'conv-' || (g % 10000), 'original', 'chat', 100, 0, 0, repeat('0', 64),
			1700000000000 + g
		FROM generate_series(1, 10000) AS g`)
	require.NoError(b, err)
	_, err = app.pool.Exec(ctx, `
		INSERT INTO context_entries (tenant_id, project_id, entry_id, kind, content, conversation_id, source_record_ids,
			tags, importance, status, version, request_sha256, created_at_ms, updated_at_ms, search, search_length)
		SELECT 'local', 'local', 'be-' || g, 'fact', 'note ' || g || ' about the billing service', 'conv-' || (g % 10000),
			'{}', ARRAY['t' || (g % 50)], 0.5, 'active', 1, repeat('0', 64), 1700000000000 + g, 1700000000000 + g,
			format('''%1$snote'':1 ''%1$s%2$s'':2 ''%1$sbill'':5 ''%1$sservic'':6', t.tag, g)::tsvector, 4
		FROM generate_series(1, 100000) AS g
		-- The document as the service writes it: stemmed terms behind the scope's tag.
		CROSS JOIN (SELECT encode(substr(sha256(convert_to('local' || chr(31) || 'local', 'UTF8')), 1, 6), 'hex') || ':' AS tag) t`)
	require.NoError(b, err)
	pgtest.RecountText(b, app.pool)
	// As autovacuum would after a bulk insert; without statistics on the postings the
	// recall page's text half is planned blind and runs into the statement timeout.
	for _, table := range []string{"context_windows", "context_entries", "entry_text_postings"} {
		_, err = app.pool.Exec(ctx, "VACUUM ANALYZE "+table)
		require.NoError(b, err)
	}
	send := func(path string, body any, status int) {
		resp, err := app.client.Post(app.base+path, "application/json", bytes.NewReader(mustMarshal(b, body)))
		require.NoError(b, err)
		data, err := io.ReadAll(resp.Body)
		require.NoError(b, err)
		require.NoError(b, resp.Body.Close())
		require.Equal(b, status, resp.StatusCode, "%s", data)
	}
	// The measured window: 50 items, derived in three steps, sent by 1,000 invocations.
	items := make([]any, 50)
	for i := range items {
		items[i] = map[string]any{"id": fmt.Sprintf("i-%d", i), "ordinal": i, "kind": "message", "role": "user",
			"content": fmt.Sprintf("item %d of the window", i)}
	}
	for i, id := range []string{"w-0", "w-1", "w-2", "w-3"} {
		send(contract.RouteWindowsCreate.Path, map[string]any{"id": id, "conversation": map[string]any{"conversationId": "conv-7"},
			"stage": "compressed", "purpose": "chat", "tokenCount": 500, "items": items}, http.StatusCreated)
		if i > 0 {
			send(contract.RouteDerivationsCreate.Path, map[string]any{"sourceWindowId": fmt.Sprintf("w-%d", i-1),
				"targetWindowId": id, "kind": contract.DerivationKinds[i%len(contract.DerivationKinds)]}, http.StatusCreated)
		}
	}
	for i := range 1000 {
		send(contract.RouteModelInvocationsCreate.Path, map[string]any{"id": fmt.Sprintf("inv-%d", i),
			"conversation": map[string]any{"conversationId": "conv-7"}, "requestWindowId": "w-3", "provider": "openai",
			"model": "gpt-4.1-mini", "state": "succeeded", "inputTokens": 1000, "outputTokens": 100,
			"startedAtMs": 1_700_000_000_000 + int64(i), "completedAtMs": 1_700_000_000_500 + int64(i)}, http.StatusOK)
	}
	b.Logf("windows, entries and invocations loaded in %s", time.Since(start).Round(time.Millisecond))

	return app
}

// BenchmarkConsoleRecallPlayground measures the recall playground on a corpus of varied
// sentences, where BenchmarkConsolePages' entries all share their words: 100,000
// entries of backlogTexts written through the store (500 to a statement, as an import
// writes them), embedded by the service's own jobs (hash embedder) and folded into the
// HNSW graph, then analyzed, as autovacuum leaves them. Each iteration asks the next
// of 200 questions in hybrid mode: six of seven in the corpus's words ("why does the
// billing service fails after midnight?"), one of seven naming an entry's number beside
// them. It reports the playground's p50 and p95 and those of GET /health, in ms, and
// logs the ten slowest questions.
//
//	go run ./adapters/postgres/pgtest/pgtestrun -- \
//	  go test -run '^$' -bench BenchmarkConsoleRecallPlayground -benchtime 400x -timeout 30m ./cmd/agent-context
func BenchmarkConsoleRecallPlayground(b *testing.B) {
	const entries = 100_000
	app := startMsgBenchApp(b)
	cfg, err := LoadConfig(func(string) string { return "" })
	require.NoError(b, err)
	cfg.Embedder = EmbedderHash
	embedder, err := newEmbedder(cfg)
	require.NoError(b, err)
	db, err := postgres.NewDB(context.Background(), app.pool, postgres.DBOptions{})
	require.NoError(b, err)
	texts := backlogTexts(entries)
	start := writeBurst(b, db, rt.Scope{TenantID: "local", ProjectID: "local"}, texts, embedder.Model(), "pe-")
	_, _, _ = waitBacklog(b, app, start)
	b.Logf("%d entries embedded and folded into the graph %s after their commit", entries,
		waitFold(b, app, embedder.Model(), start).Round(time.Second))
	_, err = app.pool.Exec(context.Background(), "ANALYZE")
	require.NoError(b, err)

	r := rand.New(rand.NewPCG(31, 5))
	questions := make([]string, 200)
	for i := range questions {
		_, sentence, _ := strings.Cut(texts[r.IntN(entries)], ": the ")
		words := strings.Fields(strings.TrimSuffix(sentence, "."))
		q := "why does the " + strings.TrimSuffix(strings.Join(words[:min(len(words), 4+r.IntN(3))], " "), ",")
		if i%7 == 0 {
			q += fmt.Sprintf(" memory %d", r.IntN(entries))
		}
		questions[i] = q + "?"
	}
	page := func(q string) string { return "/console/recall?" + url.Values{"q": {q}, "mode": {"hybrid"}}.Encode() }
	for _, q := range questions[:20] {
		getPage(b, app, page(q))
	}
	var health, playground []time.Duration
	slowest := map[string]time.Duration{}
	i := 0
	for b.Loop() {
		health = append(health, getPage(b, app, "/health"))
		q := questions[i%len(questions)]
		took := getPage(b, app, page(q))
		playground = append(playground, took)
		slowest[q] = max(slowest[q], took)
		i++
	}
	byTime := slices.SortedFunc(maps.Keys(slowest), func(x, y string) int { return cmp.Compare(slowest[y], slowest[x]) })
	for _, q := range byTime[:min(10, len(byTime))] {
		b.Logf("slowest: %s %q", slowest[q].Round(time.Millisecond), q)
	}
	reportPageQuantiles(b, "health-baseline", health, 0.50, 0.95)
	reportPageQuantiles(b, "recall", playground, 0.50, 0.95)
}
