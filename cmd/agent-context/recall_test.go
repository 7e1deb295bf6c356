package main

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/embedding/hash"
	"github.com/agent-context/agent-context/adapters/embedding/local"
	"github.com/agent-context/agent-context/adapters/embedding/local/localtest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/contract/client"
	"github.com/agent-context/agent-context/runtime/memory"
)

// seedRecallEntries writes a small corpus with kinds, tags and conversations.
func seedRecallEntries(t *testing.T, app *testApp, headers ...string) {
	t.Helper()
	for _, e := range []map[string]any{
		{"id": "deploy", "kind": "fact", "content": "The staging cluster deploys from the release branch.", "tags": []string{"deploy", "staging"}},
		{"id": "deploy-prod", "kind": "instruction", "content": "Production deploys need two approvals.", "tags": []string{"deploy"}, "conversationId": "ops"},
		{"id": "coffee", "kind": "preference", "content": "Ana drinks her coffee black.", "tags": []string{"people"}},
		{"id": "db", "kind": "fact", "content": "The orders database is Postgres 15 with pgvector.", "tags": []string{"storage"}, "conversationId": "ops"},
		{"id": "standup", "kind": "observation", "content": "The daily standup starts at 9:30.", "tags": []string{"meetings"}},
	} {
		app.createEntry(t, e, headers...)
	}
}

// TestRecallModesAndFilters: the three modes, their scores and breakdowns, the
// filters, topK, minScore and the watermark.
func TestRecallModesAndFilters(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	seedRecallEntries(t, app)
	st := app.waitProjected(t)
	require.Equal(t, contract.VectorProjectionStatus{Generation: 1, Model: hash.ModelID + memory.ContextInput, Dimensions: hash.Dimensions,
		IndexedThroughMs: app.getEntry(t, "standup").CreatedAtMs}, st)

	res := app.recall(t, map[string]any{"query": "how does staging deploy from the release branch"})
	require.False(t, res.Degraded)
	require.Nil(t, res.DegradationReason)
	require.Equal(t, contract.RecallWatermark{Generation: 1, IndexedThroughMs: st.IndexedThroughMs}, res.Watermark)
	require.Equal(t, "deploy", res.Results[0].Entry.ID)
	top := res.Results[0]
	require.Equal(t, 1, *top.Breakdown.VectorRank)
	require.Equal(t, 1, *top.Breakdown.TextRank)
	last := *top.Breakdown.VectorScore
	for _, r := range res.Results {
		last = min(last, *r.Breakdown.VectorScore)
	}
	require.InDelta(t, 0.4+min(0.4, *top.Breakdown.VectorScore-last), top.Score, 1e-12,
		"score fusion: the text half's best (0.4, unscaled beside a short vector half) and the vector half's margin over its last")
	require.Positive(t, *top.Breakdown.VectorScore)
	require.Positive(t, *top.Breakdown.TextScore)
	for i := 1; i < len(res.Results); i++ {
		require.GreaterOrEqual(t, res.Results[i-1].Score, res.Results[i].Score)
	}
	require.Equal(t, top.Entry, app.getEntry(t, "deploy"), "results carry the whole entry")

	// Vector mode: cosine similarity, no text half; text mode: the full-text rank.
	vec := app.recall(t, map[string]any{"query": "staging deploys from the release branch", "mode": "vector", "topK": 3})
	require.Len(t, vec.Results, 3)
	require.Equal(t, "deploy", vec.Results[0].Entry.ID)
	for i, r := range vec.Results {
		require.Equal(t, i+1, *r.Breakdown.VectorRank)
		require.Equal(t, r.Score, *r.Breakdown.VectorScore)
		require.Nil(t, r.Breakdown.TextRank)
		require.Nil(t, r.Breakdown.TextScore)
		require.LessOrEqual(t, r.Score, 1.0+1e-9)
	}
	var wire map[string]json.RawMessage
	app.post(t, pathRecall, map[string]any{"query": "coffee", "mode": "text"}).requireOK(t, http.StatusOK, &wire)
	require.JSONEq(t, `null`, string(wire["degradationReason"]))
	txt := app.recall(t, map[string]any{"query": "coffee", "mode": "text"})
	require.Equal(t, []string{"coffee"}, resultIDs(txt.Results), "text mode finds only entries sharing a word")
	require.Equal(t, *txt.Results[0].Breakdown.TextScore, txt.Results[0].Score)
	require.Nil(t, txt.Results[0].Breakdown.VectorRank)

	// Filters apply in every mode.
	for _, mode := range contract.RecallModes {
		q := func(filter map[string]any) []string {
			return app.recallIDs(t, map[string]any{"query": "deploy database staging coffee standup", "mode": mode, "filter": filter})
		}
		if mode == contract.RecallVector {
			// topK exceeds what passes each filter: the vector half returns all of it.
			require.ElementsMatch(t, []string{"deploy-prod", "db"}, q(map[string]any{"conversationId": "ops"}))
			require.ElementsMatch(t, []string{"deploy", "db"}, q(map[string]any{"kinds": []string{"fact"}}))
			require.ElementsMatch(t, []string{"deploy", "deploy-prod"}, q(map[string]any{"tags": []string{"deploy"}}))
		}
		require.Subset(t, []string{"deploy-prod", "db"}, q(map[string]any{"conversationId": "ops"}), mode)
		require.Subset(t, []string{"deploy", "db"}, q(map[string]any{"kinds": []string{"fact"}}), mode)
		require.Subset(t, []string{"deploy", "deploy-prod"}, q(map[string]any{"tags": []string{"deploy"}}), mode)
		require.Subset(t, []string{"deploy"}, q(map[string]any{"tags": []string{"staging", "deploy"}}), mode)
		require.Empty(t, q(map[string]any{"tags": []string{"deploy", "people"}}), mode)
		require.Empty(t, q(map[string]any{"conversationId": "nowhere"}), mode)
		require.Subset(t, []string{"coffee", "standup"}, q(map[string]any{"kinds": []string{"preference", "observation"}}), mode)
	}
	// topK and minScore.
	require.Len(t, app.recallIDs(t, map[string]any{"query": "deploy database staging coffee standup", "mode": "vector", "topK": 2}), 2)
	all := app.recall(t, map[string]any{"query": "staging deploys from the release branch", "mode": "vector"})
	require.Len(t, all.Results, 5)
	cut := all.Results[1].Score
	kept := app.recall(t, map[string]any{"query": "staging deploys from the release branch", "mode": "vector", "minScore": cut})
	require.Equal(t, resultIDs(all.Results[:2]), resultIDs(kept.Results))
	require.Empty(t, app.recallIDs(t, map[string]any{"query": "deploy", "minScore": 1}))

	// A query without a word finds nothing by text, and a scope without entries
	// nothing at all.
	require.Empty(t, app.recallIDs(t, map[string]any{"query": "?!", "mode": "text"}))
	empty := app.recall(t, map[string]any{"query": "deploy"}, "x-infra-project-id", "empty")
	require.Empty(t, empty.Results)
	require.Equal(t, contract.RecallWatermark{Generation: 1}, empty.Watermark)
}

// TestRecallBeforeTheProjection: with no job worker, entries are never embedded, and
// recall still finds them through the text half; the watermark says they wait.
func TestRecallBeforeTheProjection(t *testing.T) {
	t.Parallel()
	app := startApp(t, func(c *Config) { c.JobWorkers = 0 })
	first := app.createEntry(t, entryBody("early", "The quokka deploy runs at midnight."))
	app.createEntry(t, entryBody("later", "Ana reviews the quokka release notes."))
	res := app.recall(t, map[string]any{"query": "when does the quokka deploy run?"})
	require.Equal(t, []string{"early", "later"}, resultIDs(res.Results))
	require.False(t, res.Degraded)
	for _, r := range res.Results {
		require.Nil(t, r.Breakdown.VectorRank, "nothing is embedded yet")
		require.NotNil(t, r.Breakdown.TextRank)
	}
	require.Equal(t, contract.RecallWatermark{Generation: 1, PendingEntries: 2, IndexedThroughMs: first.CreatedAtMs - 1}, res.Watermark)
	require.Empty(t, app.recallIDs(t, map[string]any{"query": "quokka deploy", "mode": "vector"}))
	require.EqualValues(t, 2, app.status(t).VectorProjection.PendingEntries)
	require.EqualValues(t, 0, app.status(t, "x-infra-tenant-id", "other").VectorProjection.PendingEntries,
		"the watermark counts the caller's scope only")
}

// embeddingServer is an OpenAI-compatible endpoint for tests: it answers with
// deterministic hashed vectors of dims dimensions, or, per mode, fails (500), answers
// one dimension short, answers NaN, or accepts the request and never answers (until
// the caller gives up or the test ends). Each answer comes after delay.
type embeddingServer struct {
	*httptest.Server
	dims  int
	mode  atomic.Value // "ok", "down", "short", "nan", "hang"
	delay atomic.Int64 // a time.Duration
	calls atomic.Int64
	// single counts the requests that carried one text, by text: the query
	// embeddings of recalls.
	mu     sync.Mutex
	single map[string]int
}

func newEmbeddingServer(t *testing.T, dims int) *embeddingServer {
	t.Helper()
	s := &embeddingServer{dims: dims, single: map[string]int{}}
	s.mode.Store("ok")
	release := make(chan struct{})
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.calls.Add(1)
		var req struct {
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if len(req.Input) == 1 {
			s.mu.Lock()
			s.single[req.Input[0]]++
			s.mu.Unlock()
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(time.Duration(s.delay.Load())):
		}
		mode := s.mode.Load().(string)
		switch mode {
		case "down":
			http.Error(w, "upstream is down", http.StatusInternalServerError)
			return
		case "hang":
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		data := make([]map[string]any, len(req.Input))
		for i, text := range req.Input {
			n := s.dims
			if mode == "short" {
				n--
			}
			v := make([]any, n)
			for j := range v {
				h := fnv.New64a()
				fmt.Fprintf(h, "%d/%s", j, strings.ToLower(text))
				v[j] = float64(h.Sum64()%1000)/1000 - 0.5
			}
			if mode == "nan" {
				v[0] = "NaN"
			}
			data[i] = map[string]any{"index": i, "embedding": v}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"data": data})
	}))
	t.Cleanup(s.Close)
	t.Cleanup(func() { close(release) }) // before Close, which waits for hung requests
	return s
}

// requests returns how many requests carried text alone.
func (s *embeddingServer) requests(text string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.single[text]
}

func (s *embeddingServer) configure(c *Config) {
	c.Embedder, c.EmbeddingURL, c.EmbeddingModel, c.EmbeddingDimensions = EmbedderOpenAI, s.URL, "test-model", s.dims
	c.EmbeddingTimeout = 2 * time.Second
	c.ProjectionSweepInterval = 200 * time.Millisecond
}

// vectorRows counts the rows of every vector table.
func vectorRows(t *testing.T, app *testApp) int64 {
	t.Helper()
	pool := openPool(t, app.dsn)
	rows, err := pool.Query(context.Background(), `SELECT table_name FROM vector_models`)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	var total int64
	for _, name := range tables {
		var n int64
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM `+pgx.Identifier{name}.Sanitize()).Scan(&n))
		total += n
	}
	return total
}

// TestRecallEmbedderOutage: with the provider down, hybrid recall answers from text
// and says so, vector recall is 503; an endpoint answering the wrong dimension or NaN
// never puts a vector into the projection; once it answers properly the backlog drains.
func TestRecallEmbedderOutage(t *testing.T) {
	t.Parallel()
	srv := newEmbeddingServer(t, 16)
	app := startApp(t, srv.configure)
	app.createEntry(t, entryBody("e1", "The heron service restarts nightly."))
	st := app.waitProjected(t)
	require.Equal(t, "openai:test-model/16"+memory.ContextInput, st.Model)
	require.Equal(t, []string{"e1"}, app.recallIDs(t, map[string]any{"query": "heron restarts", "mode": "vector"}))
	require.EqualValues(t, 1, vectorRows(t, app))

	srv.mode.Store("down")
	res := app.recall(t, map[string]any{"query": "heron service"})
	require.True(t, res.Degraded)
	require.Equal(t, contract.DegradationEmbeddingUnavailable, *res.DegradationReason)
	require.Equal(t, []string{"e1"}, resultIDs(res.Results))
	require.Nil(t, res.Results[0].Breakdown.VectorRank)
	require.InDelta(t, 0.4, res.Results[0].Score, 1e-12, "the text half's share for its best hit")
	e := app.post(t, pathRecall, map[string]any{"query": "heron service", "mode": "vector"}).
		requireError(t, http.StatusServiceUnavailable, contract.CodeEmbeddingUnavailable)
	require.Empty(t, e.Details)
	require.False(t, app.recall(t, map[string]any{"query": "heron", "mode": "text"}).Degraded)

	// Garbage answers: the entries wait, the projection holds nothing of them.
	for _, mode := range []string{"short", "nan"} {
		srv.mode.Store(mode)
		app.createEntry(t, entryBody("bad-"+mode, "The egret service answers "+mode+"."))
		calls := srv.calls.Load()
		require.Eventually(t, func() bool { return srv.calls.Load() > calls+1 }, operationDeadline, 10*time.Millisecond,
			"the projection tried to embed it")
		require.EqualValues(t, 1, vectorRows(t, app), mode)
		require.NotZero(t, app.status(t).VectorProjection.PendingEntries)
	}
	srv.mode.Store("ok")
	app.waitProjected(t)
	require.EqualValues(t, 3, vectorRows(t, app))
	require.ElementsMatch(t, []string{"e1", "bad-short", "bad-nan"},
		app.recallIDs(t, map[string]any{"query": "egret service answers", "mode": "vector"}))
}

// TestRecallHungProvider: an endpoint that accepts and never answers costs a recall
// its query budget (1 s here), not the embedder's own 30 s per attempt and retries:
// hybrid recall degrades and vector recall is 503 well within 3 s; after
// AGENT_CONTEXT_EMBEDDING_CIRCUIT_FAILURES such failures recalls no longer call it.
func TestRecallHungProvider(t *testing.T) {
	t.Parallel()
	srv := newEmbeddingServer(t, 16)
	app := startApp(t, srv.configure, func(c *Config) {
		c.EmbeddingTimeout = 30 * time.Second
		c.EmbeddingQuery = memory.QueryBudget{Timeout: time.Second, CircuitFailures: 3}
	})
	app.createEntry(t, entryBody("e1", "The heron service restarts nightly."))
	app.waitProjected(t)
	srv.mode.Store("hang")

	const query = "heron service"
	within := func(body map[string]any) *testResponse {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		r, err := app.send(ctx, http.MethodPost, pathRecall, body)
		require.NoError(t, err, "the recall must be answered within 3 s")
		return r
	}
	var res contract.RecallResponse
	within(map[string]any{"query": query}).requireOK(t, http.StatusOK, &res)
	require.True(t, res.Degraded)
	require.Equal(t, contract.DegradationEmbeddingUnavailable, *res.DegradationReason)
	require.Equal(t, []string{"e1"}, resultIDs(res.Results))
	within(map[string]any{"query": query, "mode": "vector"}).
		requireError(t, http.StatusServiceUnavailable, contract.CodeEmbeddingUnavailable)
	within(map[string]any{"query": query}).requireOK(t, http.StatusOK, &res)
	require.True(t, res.Degraded)
	require.Equal(t, 3, srv.requests(query))

	// The circuit is open: recalls answer without calling the provider.
	for range 5 {
		within(map[string]any{"query": query}).requireOK(t, http.StatusOK, &res)
		require.True(t, res.Degraded)
		within(map[string]any{"query": query, "mode": "vector"}).
			requireError(t, http.StatusServiceUnavailable, contract.CodeEmbeddingUnavailable)
	}
	require.Equal(t, 3, srv.requests(query))
}

// TestRebuildAfterTruncate: the projection is derived: truncated, vector recall finds
// nothing; rebuilt, it finds the same entries as before, in a new generation.
func TestRebuildAfterTruncate(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	var bodies []map[string]any
	for i := range 60 {
		bodies = append(bodies, map[string]any{"id": fmt.Sprintf("e%02d", i), "kind": contract.EntryKinds[i%5],
			"content": fmt.Sprintf("Fact %d: the %s team owns the %s service in %s.", i,
				[]string{"red", "blue", "green"}[i%3], []string{"billing", "search", "auth", "mail"}[i%4], []string{"Berlin", "Lima"}[i%2]),
			"tags": []string{fmt.Sprintf("t%d", i%4)}})
	}
	for _, b := range bodies {
		app.createEntry(t, b)
	}
	app.waitProjected(t)
	queries := []map[string]any{
		{"query": "who owns billing in Berlin", "mode": "vector"},
		{"query": "the green team", "mode": "vector", "topK": 20},
		{"query": "search service Lima", "mode": "vector", "filter": map[string]any{"tags": []string{"t1"}}},
		{"query": "auth service", "mode": "vector", "filter": map[string]any{"kinds": []string{"fact", "summary"}}},
		{"query": "mail", "topK": 30},
	}
	before := make([][]string, len(queries))
	for i, q := range queries {
		before[i] = app.recallIDs(t, q)
		require.NotEmpty(t, before[i])
	}
	pool := openPool(t, app.dsn)
	var table string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT table_name FROM vector_models`).Scan(&table))
	_, err := pool.Exec(context.Background(), `TRUNCATE `+pgx.Identifier{table}.Sanitize())
	require.NoError(t, err)
	require.Empty(t, app.recallIDs(t, queries[0]))

	var started contract.OperationResponse
	app.post(t, pathRebuild, map[string]any{"embedder": nil}).requireOK(t, http.StatusAccepted, &started)
	require.Equal(t, contract.OperationVectorRebuild, started.Operation.Kind)
	require.JSONEq(t, `{"embedder":null}`, string(started.Operation.Request))
	done := app.waitOperation(t, started.Operation.ID)
	require.Equal(t, contract.OperationSucceeded, done.State, "%+v", done)
	require.JSONEq(t, fmt.Sprintf(`{"generation":2,"model":%q,"dimensions":384,"embeddedEntries":60}`, hash.ModelID+memory.ContextInput), string(done.Result))
	require.Equal(t, contract.OperationProgress{Done: 60, Total: ptrTo[int64](60)}, done.Progress)
	for i, q := range queries {
		res := app.recall(t, q)
		require.Equal(t, before[i], resultIDs(res.Results), "query %v", q)
		require.EqualValues(t, 2, res.Watermark.Generation)
	}
	require.EqualValues(t, 60, vectorRows(t, app), "the old generation was dropped")
}

// TestRebuildRequests: a second request joins the rebuild in flight, a different one
// is refused, another scope rebuilds on its own; meanwhile the active generation
// serves, and the rebuild, once a worker runs it, covers what was written meanwhile.
func TestRebuildRequests(t *testing.T) {
	t.Parallel()
	api := startApp(t, func(c *Config) { c.JobWorkers = 0 })
	worker := startApp(t, func(c *Config) { c.DatabaseURL = api.dsn })
	for i := range 10 {
		api.createEntry(t, entryBody(fmt.Sprintf("e%d", i), fmt.Sprintf("The ibis pipeline step %d runs hourly.", i)))
	}
	api.waitProjected(t)
	require.NoError(t, worker.main.Close())

	var op contract.OperationResponse
	api.post(t, pathRebuild, map[string]any{}).requireOK(t, http.StatusAccepted, &op)
	require.Equal(t, contract.OperationPending, op.Operation.State)
	var same contract.OperationResponse
	api.post(t, pathRebuild, map[string]any{"embedder": nil}).requireOK(t, http.StatusOK, &same)
	require.Equal(t, op.Operation, same.Operation)
	e := api.post(t, pathRebuild, map[string]any{"embedder": "hash"}).requireError(t, http.StatusConflict, contract.CodeConflict)
	require.Equal(t, op.Operation.ID, e.Details["operationId"])
	require.Equal(t, "rebuild_in_progress", e.Details["reason"])
	other := []string{"x-infra-tenant-id", "other"}
	var theirs contract.OperationResponse
	api.post(t, pathRebuild, map[string]any{"embedder": "hash"}, other...).requireOK(t, http.StatusAccepted, &theirs)
	require.NotEqual(t, op.Operation.ID, theirs.Operation.ID)

	api.createEntry(t, entryBody("new", "The ibis pipeline gained a new step."))
	res := api.recall(t, map[string]any{"query": "ibis pipeline step", "mode": "vector", "topK": 20})
	require.Len(t, res.Results, 10, "the active generation serves; the new entry waits")
	require.EqualValues(t, 1, res.Watermark.PendingEntries)

	startApp(t, func(c *Config) { c.DatabaseURL = api.dsn })
	done := api.waitOperation(t, op.Operation.ID)
	require.Equal(t, contract.OperationSucceeded, done.State, "%+v", done)
	require.Equal(t, contract.OperationSucceeded, api.waitOperation(t, theirs.Operation.ID, other...).State)
	api.waitProjected(t)
	res = api.recall(t, map[string]any{"query": "ibis pipeline new step", "mode": "vector", "topK": 20})
	require.Len(t, res.Results, 11)
	require.EqualValues(t, 2, res.Watermark.Generation)
	require.EqualValues(t, 1, api.recall(t, map[string]any{"query": "x"}, other...).Watermark.Generation,
		"a scope rebuilt before its first entry starts at the rebuild's generation")
	var gens int
	require.NoError(t, openPool(t, api.dsn).QueryRow(context.Background(),
		`SELECT count(*) FROM entry_generations WHERE tenant_id = 'local'`).Scan(&gens))
	require.Equal(t, 1, gens, "the old generation is gone")
}

// TestEmbedderChangeIsARebuild: restarted with another embedder, every scope that
// follows the configuration is rebuilt into a generation of the new model, and the old
// model's table is dropped once no scope uses it.
func TestEmbedderChangeIsARebuild(t *testing.T) {
	t.Parallel()
	modelDir := localtest.ModelDir(t)
	first := startApp(t)
	for _, h := range [][]string{nil, {"x-infra-tenant-id", "second"}} {
		first.createEntry(t, entryBody("cat", "My cat sleeps on the sofa all afternoon."), h...)
		first.createEntry(t, entryBody("car", "The car needs new tyres before winter."), h...)
		first.waitProjected(t, h...)
	}
	require.NoError(t, first.main.Close())

	second := startApp(t, func(c *Config) {
		c.DatabaseURL, c.Embedder, c.ModelDir = first.dsn, EmbedderLocal, modelDir
		c.ProjectionSweepInterval = 200 * time.Millisecond
	})
	for _, h := range [][]string{nil, {"x-infra-tenant-id", "second"}} {
		// On a timeout the last status seen is reported, operations included.
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			st := second.status(t, h...)
			assert.Equal(c, local.ModelID+memory.ContextInput, st.VectorProjection.Model, "status %+v", st)
			assert.Zero(c, st.Operations.Pending+st.Operations.Running, "status %+v", st)
		}, operationDeadline, 50*time.Millisecond)
		st := second.waitProjected(t, h...)
		require.Equal(t, contract.VectorProjectionStatus{Generation: 2, Model: local.ModelID + memory.ContextInput, Dimensions: 512,
			IndexedThroughMs: st.IndexedThroughMs}, st)
		// Semantic now: no word in common with the entry.
		require.Equal(t, "cat", second.recallIDs(t, map[string]any{"query": "where does my kitten nap?", "mode": "vector"}, h...)[0])
	}
	var models []string
	rows, err := openPool(t, first.dsn).Query(context.Background(), `SELECT model_id FROM vector_models`)
	require.NoError(t, err)
	models, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{local.ModelID + memory.ContextInput}, models, "the hash model's table is dropped")
}

// TestServeRefusesMissingModel: with the local embedder and no model, serve stops at
// start with one line naming make setup and AGENT_CONTEXT_MODEL_DIR.
func TestServeRefusesMissingModel(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig(func(k string) string {
		return map[string]string{"AGENT_CONTEXT_MODEL_DIR": t.TempDir(), "AGENT_CONTEXT_DATABASE_URL": "postgres://unused"}[k]
	})
	require.NoError(t, err)
	cfg.Bind = "127.0.0.1:0"
	m := NewMain(cfg)
	m.Log = cfg.NewLogger()
	err = m.Run(context.Background())
	require.Error(t, err)
	require.NoError(t, m.Close())
	require.Contains(t, err.Error(), "make setup")
	require.Contains(t, err.Error(), "AGENT_CONTEXT_MODEL_DIR")
	require.NotContains(t, err.Error(), "\n", "one line")
}

// TestEntriesCapabilities: every entry route refuses a credential without its
// capability (naming it) and accepts one with it.
func TestEntriesCapabilities(t *testing.T) {
	t.Parallel()
	app, minter := startSecuredApp(t)
	steps := []struct {
		route  contract.Route
		body   any
		status int
	}{
		{contract.RouteEntriesCreate, entryBody("a", "alpha"), http.StatusCreated},
		{contract.RouteEntriesCreate, entryBody("b", "beta"), http.StatusCreated},
		{contract.RouteEntriesCreate, entryBody("c", "gamma"), http.StatusCreated},
		{contract.RouteEntriesGet, map[string]any{"entryId": "a"}, http.StatusOK},
		{contract.RouteEntriesCorrect, map[string]any{"entryId": "a", "content": "alpha two"}, http.StatusCreated},
		{contract.RouteEntriesMerge, map[string]any{"entryIds": []string{"b", "c"}, "merged": map[string]any{"kind": "fact", "content": "bc"}}, http.StatusCreated},
		{contract.RouteEntriesCreate, entryBody("d", "delta"), http.StatusCreated},
		{contract.RouteEntriesExpire, map[string]any{"entryId": "d"}, http.StatusOK},
		{contract.RouteRecall, map[string]any{"query": "alpha"}, http.StatusOK},
		{contract.RouteVectorRebuild, map[string]any{"embedder": nil}, http.StatusAccepted},
	}
	for _, s := range steps {
		required := s.route.Capabilities[0]
		others := []string{}
		for _, c := range contract.AllCapabilities {
			if c != required {
				others = append(others, c)
			}
		}
		e := app.post(t, s.route.Path, s.body, "Authorization", minter.bearer(others...)).
			requireError(t, http.StatusForbidden, contract.CodeTokenForbidden)
		require.Equal(t, required, e.Details["requiredCapability"], s.route.Path)
		app.post(t, s.route.Path, s.body, "Authorization", minter.bearer(required)).requireOK(t, s.status, nil)
	}
}

// TestEntryMetrics: /metrics shows the projection's backlog and every Embed call by
// model and outcome.
func TestEntryMetrics(t *testing.T) {
	t.Parallel()
	app := startApp(t, func(c *Config) { c.JobWorkers = 0 })
	c := client.New(client.WithBaseURL(app.base))
	app.createEntry(t, entryBody("e1", "The otter service restarts nightly."))
	app.createEntry(t, entryBody("e2", "The heron service scales at noon."))
	app.recall(t, map[string]any{"query": "otter restarts"})
	families := scrape(t, c)
	require.Equal(t, 2.0, sample(families, "agent_context_vector_projection_backlog", nil).GetGauge().GetValue())
	require.NotNil(t, sample(families, "agent_context_vector_projection_oldest_pending_age_seconds", nil))
	calls := sample(families, "agent_context_embedding_duration_seconds", map[string]string{"model": hash.ModelID, "outcome": "ok"})
	require.NotNil(t, calls)
	require.EqualValues(t, 1, calls.GetHistogram().GetSampleCount(), "the query's embedding")
	require.Equal(t, 1.0, counterValue(t, families, "agent_context_embedding_texts_total", map[string]string{"model": hash.ModelID, "outcome": "ok"}))
}

// nextMs waits until the clock has passed ms, so the next write happens after it.
func nextMs(ms int64) {
	for time.Now().UnixMilli() <= ms {
		time.Sleep(time.Millisecond)
	}
}

// TestRecallAsOf: asOfMs recalls as the scope stood at that instant: before a
// correction the old version (as it was, active, with its old content) and not the new
// one; before a creation nothing; before a merge the sources and after it the merged
// entry; before an expiry the entry and after it not. Bad instants are 400 naming
// asOfMs.
func TestRecallAsOf(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	old := app.createEntry(t, entryBody("deploy", "The staging cluster deploys from the main branch."))
	src1 := app.createEntry(t, entryBody("m1", "Billing invoices go out on Mondays."))
	src2 := app.createEntry(t, entryBody("m2", "Billing reminders go out on Fridays."))
	doomed := app.createEntry(t, entryBody("doomed", "The quokka mascot greets visitors."))
	created := max(old.CreatedAtMs, src1.CreatedAtMs, src2.CreatedAtMs, doomed.CreatedAtMs)
	nextMs(created)

	var fix contract.CorrectEntryResponse
	app.post(t, pathEntriesFix, map[string]any{"entryId": "deploy", "content": "The staging cluster deploys from the release branch."}).
		requireOK(t, http.StatusCreated, &fix)
	app.post(t, pathEntriesMerge, map[string]any{"entryIds": []string{"m1", "m2"},
		"merged": map[string]any{"id": "m12", "kind": "fact", "content": "Billing invoices go out on Mondays, reminders on Fridays."}}).
		requireOK(t, http.StatusCreated, nil)
	app.post(t, pathEntriesExpire, map[string]any{"entryId": "doomed"}).requireOK(t, http.StatusOK, nil)
	app.waitProjected(t)
	after := time.Now().UnixMilli()

	for _, mode := range contract.RecallModes {
		if mode == contract.RecallVector {
			continue // the vectors of retired entries are gone: docs/entries.md
		}
		recall := func(query string, asOf int64) []contract.RecallResult {
			return app.recall(t, map[string]any{"query": query, "mode": mode, "asOfMs": asOf}).Results
		}
		byID := func(results []contract.RecallResult) map[string]contract.ContextEntry {
			out := map[string]contract.ContextEntry{}
			for _, r := range results {
				out[r.Entry.ID] = r.Entry
			}
			return out
		}
		then := byID(recall("staging deploys branch", created))
		require.Contains(t, then, "deploy", mode)
		require.NotContains(t, then, fix.Entry.ID, mode)
		require.Equal(t, old, then["deploy"], "the old version as it was then, active (%s)", mode)
		require.Equal(t, "The staging cluster deploys from the main branch.", then["deploy"].Content)
		now := byID(recall("staging deploys branch", after))
		require.Contains(t, now, fix.Entry.ID, mode)
		require.NotContains(t, now, "deploy", mode)
		require.Empty(t, recall("staging deploys branch", old.CreatedAtMs-1), "before its creation (%s)", mode)

		then = byID(recall("billing invoices reminders", created))
		require.Contains(t, then, "m1", mode)
		require.Contains(t, then, "m2", mode)
		require.NotContains(t, then, "m12", mode)
		require.Equal(t, src1, then["m1"])
		now = byID(recall("billing invoices reminders", after))
		require.Contains(t, now, "m12", mode)
		require.NotContains(t, now, "m1", mode)
		require.NotContains(t, now, "m2", mode)

		then = byID(recall("quokka mascot", created))
		require.Equal(t, doomed.Content, then["doomed"].Content, mode)
		require.Equal(t, contract.EntryActive, then["doomed"].Status)
		require.NotContains(t, byID(recall("quokka mascot", after)), "doomed", "expired since (%s)", mode)
	}

	future := time.Now().Add(time.Hour).UnixMilli()
	for _, bad := range []any{future, -1, 1.5, "1"} {
		fieldErr(t, app.post(t, pathRecall, map[string]any{"query": "staging", "asOfMs": bad}),
			http.StatusBadRequest, contract.CodeValidationFailed, "asOfMs", nil)
	}
}
