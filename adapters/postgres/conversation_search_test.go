package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/conversation"
)

// rankTracer keeps the last statement a pool ran that ranks with ts_rank, and its
// arguments, so that a test can explain exactly what a search ran.
type rankTracer struct {
	mu   sync.Mutex
	sql  string
	args []any
}

func (r *rankTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.Contains(data.SQL, "ts_rank(") {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.sql, r.args = data.SQL, nil
		for _, a := range data.Args {
			if _, mode := a.(pgx.QueryExecMode); !mode {
				r.args = append(r.args, a)
			}
		}
	}
	return ctx
}

func (r *rankTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// rankedRows explains (and runs) the last ranking statement and returns the number of
// rows each plan node that computes ts_rank produced, over all its loops.
func (r *rankTracer) rankedRows(t *testing.T, pool *pgxpool.Pool) []float64 {
	t.Helper()
	r.mu.Lock()
	sql, args := r.sql, r.args
	r.mu.Unlock()
	require.NotEmpty(t, sql, "no ranking statement ran")
	var raw []byte
	require.NoError(t, pool.QueryRow(context.Background(), "EXPLAIN (ANALYZE, VERBOSE, FORMAT JSON) "+sql,
		append([]any{pgx.QueryExecModeExec}, args...)...).Scan(&raw))
	var plans []struct{ Plan map[string]any }
	require.NoError(t, json.Unmarshal(raw, &plans))
	var ranked []float64
	var walk func(node map[string]any)
	walk = func(node map[string]any) {
		outputs, _ := node["Output"].([]any)
		for _, o := range outputs {
			if s, _ := o.(string); strings.Contains(s, "ts_rank(") {
				ranked = append(ranked, node["Actual Rows"].(float64)*node["Actual Loops"].(float64))
				break
			}
		}
		children, _ := node["Plans"].([]any)
		for _, c := range children {
			walk(c.(map[string]any))
		}
		// On a Citus coordinator, the statement's plan is each task's, on its worker.
		if dist, ok := node["Distributed Query"].(map[string]any); ok {
			job, _ := dist["Job"].(map[string]any)
			tasks, _ := job["Tasks"].([]any)
			for _, task := range tasks {
				remote, _ := task.(map[string]any)["Remote Plan"].([]any)
				for _, explained := range remote {
					for _, p := range explained.([]any) {
						walk(p.(map[string]any)["Plan"].(map[string]any))
					}
				}
			}
		}
	}
	walk(plans[0].Plan)
	require.NotEmpty(t, ranked, "no plan node computes ts_rank: %s", raw)
	return ranked
}

// A search ranks a bounded set of candidates, the newest matches, not every match:
// with 50 candidates, a word in 200 messages whose best-scoring matches are the oldest
// 150 answers from the newest 50 only, best first, and no plan node ranks more than 50
// rows. Scope-wide the newest are by createdAtMs, within one conversation by sequence
// (the same order here).
func TestSearchRanksTheNewestCandidates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(pgtest.NewDSN(t))
	require.NoError(t, err)
	tracer := &rankTracer{}
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	b := &messageBundle{pool: pool, store: newDB(t, pool, postgres.DBOptions{SearchCandidates: 50}).Messages(),
		scope: runtime.Scope{TenantID: "tenant-a", ProjectID: "project-a"}}

	// Message i (1…300) is created at i ms. The 150 oldest matches score best (two
	// words); of the newest 50 (151…200), those with fewer words of filler
	// ((200 − i) % 10 + 1) score better.
	var batch []contract.ConversationRecord
	for i := 1; i <= 300; i++ {
		content := "needle needle"
		switch {
		case i > 200:
			content = "haystack only"
		case i > 150:
			content = "needle" + strings.Repeat(" hay", (200-i)%10+1)
		}
		m := newMessage("c", fmt.Sprintf("m%03d", i), "user", content)
		m.CreatedAtMs = int64(i)
		batch = append(batch, m)
	}
	_, err = b.store.AppendMessages(ctx, b.scope, batch, conversation.PlanAppend, 1)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "ANALYZE messages")
	require.NoError(t, err)

	// The best 20 of the newest 50: filler 1…4, five messages each, newest first.
	var want []string
	for filler := 1; filler <= 4; filler++ {
		for j := range 5 {
			want = append(want, fmt.Sprintf("m%03d", 200-(filler-1)-10*j))
		}
	}
	for _, conversationID := range []string{"", "c"} {
		require.Equal(t, want, b.search(t, conversation.SearchQuery{Text: "needle", ConversationID: conversationID}), "conversation %q", conversationID)
		for _, n := range tracer.rankedRows(t, pool) {
			require.LessOrEqual(t, n, float64(50), "a plan node ranks more rows than the candidates")
		}
	}
	// The bound is on candidates, not hits: a larger limit still answers from them.
	require.Len(t, b.search(t, conversation.SearchQuery{Text: "needle", Limit: 100}), 50)
}
