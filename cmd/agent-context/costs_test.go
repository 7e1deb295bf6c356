package main

import (
	"cmp"
	"context"
	"fmt"
	"math/big"
	"math/bits"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/contract"
)

// costPricing is the pricing file of the cost tests: an exact model with a cached
// price, one without (cached input at the input price), an alias, and a fallback with
// prices of every length up to 12 decimals.
const costPricing = `{
	"models": {
		"gpt-4.1-mini": {"inputPerMTok": 0.4, "outputPerMTok": 1.6, "cachedInputPerMTok": 0.1},
		"gpt-4.1": {"inputPerMTok": 2, "outputPerMTok": 8}
	},
	"aliases": {"gpt-4.1-mini-2025-04-14": "gpt-4.1-mini"},
	"fallback": {"inputPerMTok": 1.234567890123, "outputPerMTok": 9.87654321, "cachedInputPerMTok": 0.000000000001}
}`

// costPrices are costPricing's prices per token in units of 10^-18 USD (a price per
// million tokens × 10^12), the test's own reading of the file.
var costPrices = map[string]struct {
	match                 string
	input, output, cached uint64
}{
	"gpt-4.1-mini":            {contract.PricingExact, 400_000_000_000, 1_600_000_000_000, 100_000_000_000},
	"gpt-4.1":                 {contract.PricingExact, 2_000_000_000_000, 8_000_000_000_000, 2_000_000_000_000},
	"gpt-4.1-mini-2025-04-14": {contract.PricingAlias, 400_000_000_000, 1_600_000_000_000, 100_000_000_000},
	"":                        {contract.PricingFallback, 1_234_567_890_123, 9_876_543_210_000, 1},
}

var costModels = []string{"gpt-4.1-mini", "gpt-4.1", "gpt-4.1-mini-2025-04-14", "claude-x", "llama-y"}

// invRow is a generated model invocation.
type invRow struct {
	id, conversation, agent, model string
	tool                           *string
	input, output, cached, started int64
}

// costTools are the generated tool names; one invocation in eleven names none.
var costTools = func() []*string {
	tools := make([]*string, 11)
	for i := range 10 {
		name := fmt.Sprint("tool-", i)
		tools[i] = &name
	}
	return tools
}()

// costStartMs is the earliest generated startedAtMs; they spread over 10^9 ms after it.
const costStartMs = 1_800_000_000_000

// names returns prefix-0 … prefix-(n-1), made once rather than per generated row.
func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strconv.Itoa(i)
	}
	return out
}

var costConversations, costAgents = names("conv-", 100_000), names("agent-", 50)

func genInvocation(rng *rand.Rand, i int, models []string) invRow {
	input := rng.Int64N(200_000)
	return invRow{
		id: "inv-" + strconv.Itoa(i), conversation: costConversations[rng.IntN(len(costConversations))],
		agent: costAgents[rng.IntN(len(costAgents))], model: models[rng.IntN(len(models))],
		tool: costTools[rng.IntN(len(costTools))], input: input, cached: rng.Int64N(input + 1),
		output: rng.Int64N(20_000), started: costStartMs + rng.Int64N(1_000_000_000),
	}
}

// copyInvocations loads n generated invocations of scope local/local, each of one of
// models, with COPY, calling visit with each, and builds the table's secondary indexes
// after the load (loadWithoutIndexes).
func copyInvocations(tb testing.TB, pool *pgxpool.Pool, n int, models []string, visit func(invRow)) {
	tb.Helper()
	rng := rand.New(rand.NewPCG(7, 11))
	i := 0
	src := pgx.CopyFromFunc(func() ([]any, error) {
		if i == n {
			return nil, nil
		}
		row := genInvocation(rng, i, models)
		i++
		if visit != nil {
			visit(row)
		}
		return []any{"local", "local", row.id, row.conversation, "w-1", row.agent, row.tool, "openai", row.model,
			"succeeded", row.input, row.output, row.cached, row.started, row.started + 500, int64(500), row.started}, nil
	})
	loadTime, indexTime := loadWithoutIndexes(tb, pool, "model_invocations", func() {
		copied, err := pool.CopyFrom(context.Background(), pgx.Identifier{"model_invocations"}, []string{"tenant_id",
			"project_id", "invocation_id", "conversation_id", "request_window_id", "agent_id", "tool_name", "provider",
			"model", "state", "input_tokens", "output_tokens", "cached_tokens", "started_at_ms", "completed_at_ms",
			"latency_ms", "created_at_ms"}, src)
		require.NoError(tb, err)
		require.Equal(tb, int64(n), copied)
	})
	pgtest.RecountCosts(tb, pool)
	tb.Logf("loaded %d invocations: copy %s, indexes %s", n, loadTime.Round(time.Millisecond), indexTime.Round(time.Millisecond))
}

// u128 is an unsigned 128-bit sum: costs in 10^-18 USD overflow 64 bits.
type u128 struct{ hi, lo uint64 }

func (u *u128) addMul(a, b uint64) {
	hi, lo := bits.Mul64(a, b)
	var carry uint64
	u.lo, carry = bits.Add64(u.lo, lo, 0)
	u.hi, _ = bits.Add64(u.hi, hi, carry)
}

func (u u128) compare(v u128) int {
	if c := cmp.Compare(u.hi, v.hi); c != 0 {
		return c
	}
	return cmp.Compare(u.lo, v.lo)
}

// usd is u as a number of USD.
func (u u128) usd() *big.Rat {
	n := new(big.Int).Lsh(new(big.Int).SetUint64(u.hi), 64)
	n.Or(n, new(big.Int).SetUint64(u.lo))
	return new(big.Rat).SetFrac(n, new(big.Int).Exp(big.NewInt(10), big.NewInt(18), nil))
}

// costSum is the test's own account of a set of invocations.
type costSum struct {
	calls, input, output, cached int64
	cost                         u128
	weakest                      int // 3 exact, 2 alias, 1 fallback
}

var matchRank = map[string]int{contract.PricingExact: 3, contract.PricingAlias: 2, contract.PricingFallback: 1}

func (s *costSum) add(r invRow) {
	price, ok := costPrices[r.model]
	if !ok {
		price = costPrices[""]
	}
	s.calls++
	s.input += r.input
	s.output += r.output
	s.cached += r.cached
	s.cost.addMul(uint64(r.input-r.cached), price.input)
	s.cost.addMul(uint64(r.cached), price.cached)
	s.cost.addMul(uint64(r.output), price.output)
	if s.weakest == 0 || matchRank[price.match] < s.weakest {
		s.weakest = matchRank[price.match]
	}
}

// costAccount sums invocations in [from, to) overall and by every grouping, leaving
// out the deleted conversations.
type costAccount struct {
	from, to int64
	deleted  map[string]bool
	total    costSum
	groups   map[string]map[string]*costSum // grouping → key ("" = no tool) → sum
}

func newCostAccount(from, to int64, deleted map[string]bool) *costAccount {
	a := &costAccount{from: from, to: to, deleted: deleted, groups: map[string]map[string]*costSum{}}
	for _, g := range contract.CostGroupings {
		a.groups[g] = map[string]*costSum{}
	}
	return a
}

func (a *costAccount) add(r invRow) {
	if r.started < a.from || r.started >= a.to || a.deleted[r.conversation] {
		return
	}
	a.total.add(r)
	tool := ""
	if r.tool != nil {
		tool = *r.tool
	}
	for g, key := range map[string]string{contract.CostsByAgent: r.agent, contract.CostsByTool: tool,
		contract.CostsByModel: r.model, contract.CostsByConversation: r.conversation} {
		s := a.groups[g][key]
		if s == nil {
			s = &costSum{}
			a.groups[g][key] = s
		}
		s.add(r)
	}
}

// requireDecimal asserts that got, a decimal of the wire, is exactly want.
func requireDecimal(t *testing.T, want *big.Rat, got contract.Decimal, msgAndArgs ...any) {
	t.Helper()
	r, ok := new(big.Rat).SetString(string(got))
	require.True(t, ok, "%q is not a decimal", got)
	require.Zero(t, want.Cmp(r), append([]any{"want %s, got %s", want.FloatString(18), got}, msgAndArgs...)...)
}

// requireReport compares a report with the account: the totals exactly, and the topN
// groups by cost (ties by key, byte order; no tool last) with their averages rounded
// half away from zero to two decimals.
func requireReport(t *testing.T, a *costAccount, grouping string, topN int, got contract.CostsResponse) {
	t.Helper()
	require.Equal(t, []int64{a.total.calls, a.total.input, a.total.output, a.total.cached},
		[]int64{got.Totals.Calls, got.Totals.InputTokens, got.Totals.OutputTokens, got.Totals.CachedTokens})
	requireDecimal(t, a.total.cost.usd(), got.Totals.CostUSD, "total cost")
	keys := make([]string, 0, len(a.groups[grouping]))
	for k := range a.groups[grouping] {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y string) int {
		if c := a.groups[grouping][y].cost.compare(a.groups[grouping][x].cost); c != 0 {
			return c
		}
		if (x == "") != (y == "") {
			return cmp.Compare(y, x) // the group without a tool sorts last
		}
		return strings.Compare(x, y)
	})
	keys = keys[:min(topN, len(keys))]
	require.Len(t, got.Groups, len(keys))
	avg := func(sum, calls int64) *big.Rat {
		// round(sum/calls, 2), half away from zero, for non-negative values.
		hundredths := new(big.Int).Div(big.NewInt(sum*100*2+calls), big.NewInt(calls*2))
		return new(big.Rat).SetFrac(hundredths, big.NewInt(100))
	}
	names := map[int]string{3: contract.PricingExact, 2: contract.PricingAlias, 1: contract.PricingFallback}
	for i, k := range keys {
		want, g := a.groups[grouping][k], got.Groups[i]
		if k == "" && grouping == contract.CostsByTool {
			require.Nil(t, g.Key, "group %d", i)
		} else {
			require.NotNil(t, g.Key, "group %d", i)
			require.Equal(t, k, *g.Key, "group %d", i)
		}
		require.Equal(t, []int64{want.calls, want.input, want.output, want.cached},
			[]int64{g.Calls, g.InputTokens, g.OutputTokens, g.CachedTokens}, k)
		requireDecimal(t, want.cost.usd(), g.CostUSD, k)
		requireDecimal(t, avg(want.input, want.calls), g.AvgInputTokens, k)
		requireDecimal(t, avg(want.output, want.calls), g.AvgOutputTokens, k)
		require.Equal(t, names[want.weakest], g.PricingMatch, k)
	}
}

// writePricing writes a pricing file and returns the option that configures it.
func writePricing(t *testing.T, content string) func(*Config) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pricing.json")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return func(c *Config) { c.PricingFile = path }
}

// TestCostsOfAMillionInvocations: over 1,000,000 invocations loaded with COPY, the
// report matches the test's own exact account (integers of 10^-18 USD), for the whole
// time (from the running sums, and from the invocations of a range that holds them
// all), a part of it and none of it, by every grouping, and leaves out a deleted
// conversation.
func TestCostsOfAMillionInvocations(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("loads a million rows")
	}
	app := startApp(t, writePricing(t, costPricing))
	pool := openPool(t, app.dsn)
	_, err := pool.Exec(context.Background(), `INSERT INTO conversations (tenant_id, project_id, conversation_id,
		created_at_ms, deleted_at_ms) VALUES ('local', 'local', 'conv-7', 1, 2)`)
	require.NoError(t, err)
	deleted := map[string]bool{"conv-7": true}
	const mid = costStartMs + 400_000_000
	whole := newCostAccount(0, 1<<62, deleted)
	// A part of the time is read from its invocations, by conversation in time order
	// (a small part: within one hour, on whole hours, 12%) or in conversation order
	// (half to 80%, before, after or both); one that holds nearly all of them from the
	// running sums less those outside. mid is 400,000 ms past the start of its hour.
	const hour = 3_600_000
	parts := []*costAccount{newCostAccount(mid, mid+123_456_789, deleted),
		newCostAccount(mid+1_000, mid+2_000_000, deleted),
		newCostAccount(mid-400_000+hour, mid-400_000+51*hour, deleted),
		newCostAccount(costStartMs, costStartMs+500_000_000, deleted),
		newCostAccount(costStartMs+250_000_000, 1<<53-1, deleted),
		newCostAccount(0, costStartMs+800_000_000, deleted),
		newCostAccount(costStartMs+100_000_000, costStartMs+900_000_000, deleted),
		newCostAccount(costStartMs+5_000_000, 1<<53-1, deleted)}
	copyInvocations(t, pool, 1_000_000, costModels, func(r invRow) {
		whole.add(r)
		for _, a := range parts {
			a.add(r)
		}
	})
	for _, a := range parts {
		require.Positive(t, a.total.calls)
		require.Less(t, a.total.calls, whole.total.calls)
	}
	require.InDelta(t, whole.total.calls/2, parts[3].total.calls, float64(whole.total.calls)/100)
	require.Less(t, whole.total.calls/2, parts[4].total.calls)
	require.Less(t, whole.total.calls*99/100, parts[7].total.calls)

	for _, grouping := range contract.CostGroupings {
		t.Run(grouping, func(t *testing.T) {
			report := decodeCosts(t, app.post(t, contract.RouteCosts.Path, map[string]any{"groupBy": grouping, "topN": 100}))
			requireReport(t, whole, grouping, 100, report)
			// The same rows through the invocations of a range rather than the running sums.
			report = decodeCosts(t, app.post(t, contract.RouteCosts.Path, map[string]any{
				"groupBy": grouping, "topN": 100, "fromMs": 0, "toMs": int64(1<<53 - 1)}))
			requireReport(t, whole, grouping, 100, report)
			for _, part := range parts {
				report = decodeCosts(t, app.post(t, contract.RouteCosts.Path, map[string]any{
					"groupBy": grouping, "fromMs": part.from, "toMs": part.to}))
				requireReport(t, part, grouping, contract.DefaultCostsTopN, report)
			}
		})
	}
	empty := decodeCosts(t, app.post(t, contract.RouteCosts.Path, map[string]any{"groupBy": "agent", "fromMs": mid, "toMs": mid}))
	require.Equal(t, contract.CostsResponse{Totals: contract.CostTotals{CostUSD: "0"}, Groups: []contract.CostGroup{}}, empty)
}

// TestCostsRangeOfManyModels: a range by conversation of a scope of more models than
// a CASE over their names serves (costCaseModels in adapters/postgres) finds their
// prices by number instead, as exactly, in time order and in conversation order; one
// of a scope of no model yet is empty.
func TestCostsRangeOfManyModels(t *testing.T) {
	t.Parallel()
	app := startApp(t, writePricing(t, costPricing))
	body := map[string]any{"groupBy": contract.CostsByConversation, "fromMs": costStartMs, "toMs": costStartMs + 1}
	require.Equal(t, contract.CostsResponse{Totals: contract.CostTotals{CostUSD: "0"}, Groups: []contract.CostGroup{}},
		decodeCosts(t, app.post(t, contract.RouteCosts.Path, body)), "a scope of no model yet")
	models := append(names("model-", 17), costModels...)
	parts := []*costAccount{newCostAccount(costStartMs, costStartMs+100_000_000, nil),
		newCostAccount(costStartMs+200_000_000, costStartMs+800_000_000, nil)}
	copyInvocations(t, openPool(t, app.dsn), 20_000, models, func(r invRow) {
		for _, a := range parts {
			a.add(r)
		}
	})
	for _, part := range parts {
		report := decodeCosts(t, app.post(t, contract.RouteCosts.Path, map[string]any{
			"groupBy": contract.CostsByConversation, "topN": 100, "fromMs": part.from, "toMs": part.to}))
		requireReport(t, part, contract.CostsByConversation, 100, report)
	}
}

// TestCostsPricing: through the API, each invocation finds its price exactly, by
// alias, by the fallback or not at all (cost 0, pricingMatch none); cached input is
// priced at the cached price, or the input price where none is given; a group's match
// is its weakest.
func TestCostsPricing(t *testing.T) {
	t.Parallel()
	app := startApp(t, writePricing(t, `{
		"models": {"m-exact": {"inputPerMTok": 3, "outputPerMTok": 15, "cachedInputPerMTok": 0.3},
		           "m-plain": {"inputPerMTok": 1.5, "outputPerMTok": 2.25}},
		"aliases": {"m-alias": "m-exact"}}`))
	app.post(t, contract.RouteWindowsCreate.Path, map[string]any{"id": "w", "conversation": map[string]any{"conversationId": "c"},
		"stage": "original", "purpose": "p", "tokenCount": 1, "items": []any{}}).requireOK(t, http.StatusCreated, nil)
	save := func(id, agent, model string, tool any, input, output, cached int64) {
		app.post(t, contract.RouteModelInvocationsCreate.Path, map[string]any{"id": id, "conversation": map[string]any{"conversationId": "c"},
			"requestWindowId": "w", "agentId": agent, "toolName": tool, "provider": "p", "model": model, "state": "succeeded",
			"inputTokens": input, "outputTokens": output, "cachedTokens": cached}).requireOK(t, http.StatusOK, nil)
	}
	save("i1", "a1", "m-exact", "search", 1_000_000, 100_000, 400_000)   // 0.6×3 + 0.4×0.3 + 0.1×15 = 3.42
	save("i2", "a1", "m-alias", nil, 2_000_000, 0, 0)                    // 2×3 = 6
	save("i3", "a2", "m-plain", "search", 1_000_000, 1_000_000, 500_000) // 1×1.5 + 1×2.25 = 3.75
	save("i4", "a2", "m-unknown", nil, 5_000_000, 5_000_000, 0)          // no price: 0
	save("i5", "a3", "m-exact", "fetch", 1, 0, 0)                        // 0.000003

	byModel := decodeCosts(t, app.post(t, contract.RouteCosts.Path, map[string]any{"groupBy": "model"}))
	require.Equal(t, contract.CostTotals{Calls: 5, InputTokens: 9_000_001, OutputTokens: 6_100_000, CachedTokens: 900_000,
		CostUSD: "13.170003"}, byModel.Totals)
	type row struct {
		key   string
		cost  contract.Decimal
		match string
	}
	var got []row
	for _, g := range byModel.Groups {
		got = append(got, row{*g.Key, g.CostUSD, g.PricingMatch})
	}
	require.Equal(t, []row{{"m-alias", "6", "alias"}, {"m-plain", "3.75", "exact"}, {"m-exact", "3.420003", "exact"},
		{"m-unknown", "0", "none"}}, got)

	byTool := decodeCosts(t, app.post(t, contract.RouteCosts.Path, map[string]any{"groupBy": "tool", "topN": 2}))
	require.Len(t, byTool.Groups, 2, "topN")
	require.Equal(t, "search", *byTool.Groups[0].Key)
	require.Equal(t, contract.Decimal("7.17"), byTool.Groups[0].CostUSD)
	require.Nil(t, byTool.Groups[1].Key, "the invocations without a tool")
	require.Equal(t, contract.Decimal("6"), byTool.Groups[1].CostUSD)
	require.Equal(t, contract.PricingNone, byTool.Groups[1].PricingMatch, "its weakest match")
	require.Equal(t, contract.Decimal("3500000"), byTool.Groups[1].AvgInputTokens)
	require.Equal(t, contract.Decimal("2500000"), byTool.Groups[1].AvgOutputTokens)
	require.Equal(t, byModel.Totals, byTool.Totals, "totals cover every group, not only the top ones")

	byAgent := decodeCosts(t, app.post(t, contract.RouteCosts.Path, map[string]any{"groupBy": "agent"}))
	require.Equal(t, "a3", *byAgent.Groups[2].Key)
	require.Equal(t, contract.Decimal("0.000003"), byAgent.Groups[2].CostUSD)
	require.Equal(t, contract.Decimal("1"), byAgent.Groups[2].AvgInputTokens)
	// The numbers are written as JSON numbers, digit for digit.
	r := app.post(t, contract.RouteCosts.Path, map[string]any{"groupBy": "conversation"})
	require.Contains(t, string(r.Body), `"costUsd":13.170003`)
	require.Contains(t, string(r.Body), `"avgInputTokens":1800000.2`)

	// A deleted conversation's invocations leave the report at once, and stay out once
	// the deletion job has removed them (and their sums).
	var deletion contract.OperationResponse
	app.post(t, contract.RouteConversationsDelete.Path, map[string]any{"conversationId": "c"}).requireOK(t, http.StatusAccepted, &deletion)
	nothing := contract.CostsResponse{Totals: contract.CostTotals{CostUSD: "0"}, Groups: []contract.CostGroup{}}
	requireNoCosts := func() {
		t.Helper()
		for _, grouping := range contract.CostGroupings {
			for _, body := range []map[string]any{{"groupBy": grouping}, {"groupBy": grouping, "fromMs": 0, "toMs": 1000}} {
				require.Equal(t, nothing, decodeCosts(t, app.post(t, contract.RouteCosts.Path, body)), "%v", body)
			}
		}
	}
	requireNoCosts()
	require.Equal(t, contract.OperationSucceeded, app.waitOperation(t, deletion.Operation.ID).State)
	requireNoCosts()
}

// TestCostsTies: groups of equal cost come in byte order of their keys, the group
// without a tool last, from the running sums and from a range alike, also when more
// of them tie at the cut than the ranking looks at first; so do groups that cost
// nothing.
func TestCostsTies(t *testing.T) {
	t.Parallel()
	app := startApp(t, writePricing(t, `{"models": {"m": {"inputPerMTok": 1.5, "outputPerMTok": 3}}}`))
	app.post(t, contract.RouteWindowsCreate.Path, map[string]any{"id": "w", "conversation": map[string]any{"conversationId": "c"},
		"stage": "original", "purpose": "p", "tokenCount": 1, "items": []any{}}).requireOK(t, http.StatusCreated, nil)
	tied := []any{"Z", "a", "b"}
	for i := range 80 {
		tied = append(tied, fmt.Sprintf("tie-%02d", i))
	}
	tied = append(tied, nil)
	for i, tool := range append([]any{"free-b", "free-a"}, tied...) {
		model := "m"
		if s, ok := tool.(string); ok && strings.HasPrefix(s, "free") {
			model = "unpriced"
		}
		app.post(t, contract.RouteModelInvocationsCreate.Path, map[string]any{"id": fmt.Sprint("i", i),
			"conversation": map[string]any{"conversationId": "c"}, "requestWindowId": "w", "toolName": tool,
			"provider": "p", "model": model, "state": "succeeded", "inputTokens": 1000, "outputTokens": 0,
			"cachedTokens": 0, "startedAtMs": 100}).requireOK(t, http.StatusOK, nil)
	}
	all := append(slices.Clone(tied), "free-a", "free-b")
	for _, topN := range []int{6, 100} {
		for _, body := range []map[string]any{{"groupBy": "tool", "topN": topN},
			{"groupBy": "tool", "topN": topN, "fromMs": 100, "toMs": 101}} {
			report := decodeCosts(t, app.post(t, contract.RouteCosts.Path, body))
			var keys []any
			for _, g := range report.Groups {
				if g.Key == nil {
					keys = append(keys, nil)
				} else {
					keys = append(keys, *g.Key)
				}
				want := contract.Decimal("0.0015")
				if g.Key != nil && strings.HasPrefix(*g.Key, "free") {
					want = "0"
				}
				require.Equal(t, want, g.CostUSD, "%v", body)
			}
			require.Equal(t, all[:min(topN, len(all))], keys, "%v", body)
			require.Equal(t, contract.Decimal("0.126"), report.Totals.CostUSD)
		}
	}
}

// TestCostsRankingLooksPastNearTies: 71 tools cost exactly the same, 3,000 tokens at
// 1.234567905838 a million; 70 spend them in one invocation, tool "a" in two (1,000
// of m and 2,000 of its alias). In float8 "a" comes out a hair cheaper (1000p + 2000p
// rounds below 3000p), so it is not among the first 65 groups the ranking looks at;
// the ranking must see that those did not settle the cut, look further, and price "a"
// exactly: a tie, which its key wins.
func TestCostsRankingLooksPastNearTies(t *testing.T) {
	t.Parallel()
	app := startApp(t, writePricing(t, `{"models": {"m": {"inputPerMTok": 1.234567905838, "outputPerMTok": 1}},
		"aliases": {"m-alias": "m"}}`))
	app.post(t, contract.RouteWindowsCreate.Path, map[string]any{"id": "w", "conversation": map[string]any{"conversationId": "c"},
		"stage": "original", "purpose": "p", "tokenCount": 1, "items": []any{}}).requireOK(t, http.StatusCreated, nil)
	save := func(id, tool, model string, input int) {
		app.post(t, contract.RouteModelInvocationsCreate.Path, map[string]any{"id": id,
			"conversation": map[string]any{"conversationId": "c"}, "requestWindowId": "w", "toolName": tool,
			"provider": "p", "model": model, "state": "succeeded", "inputTokens": input, "outputTokens": 0,
			"cachedTokens": 0, "startedAtMs": 100}).requireOK(t, http.StatusOK, nil)
	}
	for i := range 70 {
		save(fmt.Sprint("b", i), fmt.Sprintf("b%02d", i), "m", 3000)
	}
	save("a1", "a", "m", 1000)
	save("a2", "a", "m-alias", 2000)
	for _, body := range []map[string]any{{"groupBy": "tool", "topN": 1},
		{"groupBy": "tool", "topN": 1, "fromMs": 100, "toMs": 101}} {
		report := decodeCosts(t, app.post(t, contract.RouteCosts.Path, body))
		require.Len(t, report.Groups, 1)
		require.Equal(t, "a", *report.Groups[0].Key, "%v", body)
		require.Equal(t, contract.Decimal("0.003703703717514"), report.Groups[0].CostUSD)
		require.Equal(t, contract.PricingAlias, report.Groups[0].PricingMatch)
	}
}

// TestCostsWithoutPricing: with no pricing file every model costs 0, match none.
func TestCostsWithoutPricing(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	pool := openPool(t, app.dsn)
	copyInvocations(t, pool, 100, costModels, nil)
	report := decodeCosts(t, app.post(t, contract.RouteCosts.Path, map[string]any{"groupBy": "model"}))
	require.EqualValues(t, 100, report.Totals.Calls)
	require.Equal(t, contract.Decimal("0"), report.Totals.CostUSD)
	require.Len(t, report.Groups, len(costModels))
	for i, g := range report.Groups {
		require.Equal(t, contract.PricingNone, g.PricingMatch)
		require.Equal(t, contract.Decimal("0"), g.CostUSD)
		if i > 0 {
			require.Less(t, *report.Groups[i-1].Key, *g.Key, "groups of equal cost in key order")
		}
	}
}

func TestCostsBadInput(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	for name, tc := range map[string]struct {
		body  any
		field string
		limit any
	}{
		"no grouping":         {map[string]any{}, "groupBy", nil},
		"unknown grouping":    {map[string]any{"groupBy": "user"}, "groupBy", nil},
		"grouping of a case":  {map[string]any{"groupBy": "Agent"}, "groupBy", nil},
		"start after the end": {map[string]any{"groupBy": "agent", "fromMs": 2, "toMs": 1}, "fromMs", nil},
		"negative start":      {map[string]any{"groupBy": "agent", "fromMs": -1}, "fromMs", float64(1<<53 - 1)},
		"end past 2^53-1":     {map[string]any{"groupBy": "agent", "toMs": int64(1 << 53)}, "toMs", float64(1<<53 - 1)},
		"topN 0":              {map[string]any{"groupBy": "agent", "topN": 0}, "topN", float64(100)},
		"topN negative":       {map[string]any{"groupBy": "agent", "topN": -1}, "topN", float64(100)},
		"topN 101":            {map[string]any{"groupBy": "agent", "topN": 101}, "topN", float64(100)},
		"topN not an integer": {map[string]any{"groupBy": "agent", "topN": 1.5}, "topN", nil},
		"unknown field":       {map[string]any{"groupBy": "agent", "tenantId": "other"}, "tenantId", nil},
	} {
		e := app.post(t, contract.RouteCosts.Path, tc.body).requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
		require.Equal(t, tc.field, e.Details["field"], name)
		require.Equal(t, tc.limit, e.Details["limit"], name)
	}
}

// BenchmarkCostsReport measures the cost report over 1,000,000 invocations of one
// scope (loaded with COPY, indexes built after, vacuumed and analyzed), over HTTP on
// loopback, for each grouping, priced by costPricing (prices of up to 12 decimals, the
// slow end of numeric arithmetic): over the whole time (report-by-, from the running
// sums), over a range that holds every invocation (range-by-, the running sums less
// the none outside it) and over the first half of the time (range-50pct-by-, about half
// of the invocations), and by conversation over more shares of the time, each read the
// way its share picks (docs/costs.md, "Ranges by conversation"). The baseline is the
// bare aggregation: count and token sums of the invocations by the grouping's column
// through a pgx pool, with the same work_mem, no pricing, no HTTP.
//
//	go test -run '^$' -bench BenchmarkCostsReport -benchtime 5x -timeout 30m ./cmd/agent-context
func BenchmarkCostsReport(b *testing.B) {
	path := filepath.Join(b.TempDir(), "pricing.json")
	require.NoError(b, os.WriteFile(path, []byte(costPricing), 0o600))
	app := startMsgBenchApp(b, func(c *Config) { c.PricingFile = path })
	copyInvocations(b, app.pool, 1_000_000, costModels, nil)
	ctx := context.Background()
	// The running sums recounted after the load, vacuumed as the invocations are (so
	// their index answers without visiting the table, as after autovacuum).
	_, err := app.pool.Exec(ctx, "VACUUM ANALYZE cost_usage, cost_usage_conversations, cost_models")
	require.NoError(b, err)
	columns := map[string]string{contract.CostsByAgent: "agent_id", contract.CostsByTool: "tool_name",
		contract.CostsByModel: "model", contract.CostsByConversation: "conversation_id"}
	for _, grouping := range contract.CostGroupings {
		body := []byte(fmt.Sprintf(`{"groupBy":%q}`, grouping))
		ranged := []byte(fmt.Sprintf(`{"groupBy":%q,"fromMs":0,"toMs":%d}`, grouping, int64(1<<53-1)))
		type run struct {
			name       string
			body       []byte
			calls, tol int64
		}
		// share is a run over the first percent of the time, about as many percent of
		// the invocations.
		share := func(percent int64) run {
			return run{fmt.Sprintf("range-%dpct-by-", percent), []byte(fmt.Sprintf(`{"groupBy":%q,"fromMs":%d,"toMs":%d}`,
				grouping, costStartMs, costStartMs+percent*10_000_000)), percent * 10_000, 5_000}
		}
		runs := []run{{"report-by-", body, 1_000_000, 0}, {"range-by-", ranged, 1_000_000, 0}, share(50)}
		if grouping == contract.CostsByConversation {
			runs = append(runs, share(10), share(30), share(75), share(90), share(97), share(99))
		}
		for _, run := range runs {
			b.Run(run.name+grouping, func(b *testing.B) {
				var report contract.CostsResponse
				for b.Loop() {
					app.post(b, contract.RouteCosts.Path, run.body, &report)
				}
				require.InDelta(b, run.calls, report.Totals.Calls, float64(run.tol))
			})
		}
		b.Run("baseline-sums-by-"+grouping, func(b *testing.B) {
			for b.Loop() {
				tx, err := app.pool.Begin(ctx)
				require.NoError(b, err)
				_, err = tx.Exec(ctx, "SELECT set_config('work_mem', '32MB', true)")
				require.NoError(b, err)
				_, err = tx.Exec(ctx, `SELECT `+columns[grouping]+`, count(*), sum(input_tokens), sum(output_tokens),
					sum(cached_tokens) FROM model_invocations WHERE tenant_id = 'local' AND project_id = 'local' GROUP BY 1`)
				require.NoError(b, err)
				require.NoError(b, tx.Rollback(ctx))
			}
		})
	}
}

// TestCostsRangeReadFromTheSums: a range by conversation that holds most of the
// invocations is the running sums less the invocations outside it. A conversation
// whose every invocation is outside is no group (even where every group costs 0), one
// that is partly outside counts only the rest; with a token count past 2^53 outside
// the range, where the float8 sums lose the rest (2^60 + 100 is 2^60 in float8), the
// report reads the range's invocations instead and is still exact.
func TestCostsRangeReadFromTheSums(t *testing.T) {
	t.Parallel()
	for _, outside := range []int64{1_000, 1 << 60} {
		t.Run(fmt.Sprint(outside), func(t *testing.T) {
			t.Parallel()
			app := startApp(t, writePricing(t, `{"models": {"m": {"inputPerMTok": 1, "outputPerMTok": 1}}}`))
			pool := openPool(t, app.dsn)
			// In the range [50, 200): "a" 100 tokens (and outside), "b" 50, twenty free
			// conversations; outside it only: "a" and "c"; "d", deleted, on both sides.
			ctx := context.Background()
			_, err := pool.Exec(ctx, `INSERT INTO conversations (tenant_id, project_id, conversation_id, created_at_ms,
				deleted_at_ms) VALUES ('local', 'local', 'd', 1, 2)`)
			require.NoError(t, err)
			_, err = pool.Exec(ctx, `
				INSERT INTO model_invocations (tenant_id, project_id, invocation_id, conversation_id, request_window_id,
					agent_id, provider, model, state, input_tokens, output_tokens, cached_tokens, started_at_ms,
					completed_at_ms, latency_ms, created_at_ms)
				SELECT 'local', 'local', v.id, v.conversation, 'w', 'agent', 'p', v.model, 'succeeded', v.input, 0, 0,
					v.started, v.started, 0, 0
				FROM (VALUES ('a-out', 'a', 'm', $1::bigint, 10::bigint), ('a-in', 'a', 'm', 100, 100), ('b', 'b', 'm', 50, 100),
					('c', 'c', 'm', 7, 300), ('d-in', 'd', 'm', 500, 100), ('d-out', 'd', 'm', 500, 300)
					UNION ALL SELECT 'f' || i, 'f' || i, 'free', 10, 100 FROM generate_series(10, 29) i)
					v(id, conversation, model, input, started)`, outside)
			require.NoError(t, err)
			pgtest.RecountCosts(t, pool)
			_, err = pool.Exec(ctx, "ANALYZE model_invocations")
			require.NoError(t, err)
			report := decodeCosts(t, app.post(t, contract.RouteCosts.Path, map[string]any{
				"groupBy": "conversation", "topN": 100, "fromMs": 50, "toMs": 200}))
			require.Equal(t, contract.CostTotals{Calls: 22, InputTokens: 350, CostUSD: "0.00015"}, report.Totals)
			var keys []string
			for _, g := range report.Groups {
				keys = append(keys, *g.Key)
			}
			free := names("f", 30)[10:]
			require.Equal(t, append([]string{"a", "b"}, free...), keys)
			// The top one only: a ranking that lost "a"'s 100 tokens would price "b" alone.
			report = decodeCosts(t, app.post(t, contract.RouteCosts.Path, map[string]any{
				"groupBy": "conversation", "topN": 1, "fromMs": 50, "toMs": 200}))
			a := "a"
			require.Equal(t, []contract.CostGroup{{Key: &a, Calls: 1, InputTokens: 100, AvgInputTokens: "100",
				AvgOutputTokens: "0", CostUSD: "0.0001", PricingMatch: contract.PricingExact}}, report.Groups)
		})
	}
}
