package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
)

// searchBenchQueries are the queries of BenchmarkSearchCommonWord, from the most common
// to the rarest, with the share of the messages each matches.
var searchBenchQueries = []struct{ name, query string }{
	{"common-30pct", "heartbeat"},
	{"two-words-6pct", "heartbeat policy"},
	{"uncommon-1pct", "lantern"},
	{"rare-0.01pct", "zeppelin"},
}

// searchBenchContent is a message of 20 words of the benchmark vocabulary (each of
// which is in about a fifth of the messages), with "heartbeat" in 30 % of them,
// "lantern" in 1 % and "zeppelin" in 0.01 %.
func searchBenchContent(rng *rand.Rand, i int) string {
	text := msgBenchContent(rng, 20)
	if rng.Float64() < 0.30 {
		text += " heartbeat"
	}
	if i%100 == 7 {
		text += " lantern"
	}
	if i%10_000 == 3 {
		text += " zeppelin"
	}
	return text
}

// BenchmarkSearchCommonWord measures messages/search over HTTP on 1,000,000 messages
// of one tenant (10,000 conversations of 100) for words of very different frequency:
// a word in 30 % of the messages, two words together in ~6 %, a word in 1 % and one
// in 0.01 %. Each iteration runs every query once (limit 20, the whole tenant); the
// p50/p95 of each are reported.
//
//	go test -run '^$' -bench BenchmarkSearchCommonWord -benchtime 200x -timeout 30m ./cmd/agent-context
func BenchmarkSearchCommonWord(b *testing.B) {
	app := startMsgBenchApp(b)
	const conversations, perConversation = 10_000, 100
	loadMessagesWith(b, app.pool, conversations, perConversation, searchBenchContent)

	bodies := make([][]byte, len(searchBenchQueries))
	for i, q := range searchBenchQueries {
		body, err := json.Marshal(map[string]any{"query": q.query, "limit": 20})
		require.NoError(b, err)
		bodies[i] = body
	}
	// One untimed round opens the connections and warms the caches.
	for _, body := range bodies {
		app.post(b, pathSearch, body, nil)
	}
	took := make([][]time.Duration, len(searchBenchQueries))
	for b.Loop() {
		for i, body := range bodies {
			var res contract.SearchMessagesResponse
			start := time.Now()
			app.post(b, pathSearch, body, &res)
			took[i] = append(took[i], time.Since(start))
			require.NotEmpty(b, res.Hits, searchBenchQueries[i].query)
		}
	}
	for i, q := range searchBenchQueries {
		d := took[i]
		slices.Sort(d)
		for _, p := range []float64{0.50, 0.95} {
			b.ReportMetric(float64(d[int(p*float64(len(d)-1))].Microseconds())/1000, fmt.Sprintf("%s-p%d-ms", q.name, int(p*100)))
		}
	}
}
