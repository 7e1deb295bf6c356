package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"github.com/kljensen/snowball/english"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/embedding/local/localtest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/contract/client"
)

// envLoCoMo names the LoCoMo-format file(s) BenchmarkLoCoMo and
// BenchmarkEntriesPostedOneByOne read (docs/recall-quality.md): paths separated as in PATH.
const envLoCoMo = "AGENT_CONTEXT_LOCOMO"

// locomoKs are the cut-offs the benchmark reports; the last is the topK it asks for.
var locomoKs = []int{5, 10}

// locomoConversation is one conversation of a LoCoMo-format file: its turns in order
// and its questions.
type locomoConversation struct {
	Turns     []locomoTurn
	Questions []locomoQuestion
	// Unmatched counts the evidence names that matched no turn (and were dropped).
	Unmatched int
}

// locomoTurn is one dialogue turn; DiaID ("D3:7": session 3, turn 7) is what evidence
// names.
type locomoTurn struct {
	Speaker     string `json:"speaker"`
	DiaID       string `json:"dia_id"`
	Text        string `json:"text"`
	BlipCaption string `json:"blip_caption"`
	// Session is the key of the turn's session ("session_3"), the conversation the
	// benchmark stores it in.
	Session string `json:"-"`
}

// Content is the entry the benchmark stores for the turn: "<speaker>: <text>", and for
// a turn that shared a photo, " [photo: <caption>]" after it.
func (t locomoTurn) Content() string {
	s := t.Speaker + ": " + t.Text
	if c := strings.TrimSpace(t.BlipCaption); c != "" {
		s += " [photo: " + c + "]"
	}
	return s
}

// locomoQuestion is a question with the dia_ids of the turns that hold its answer.
type locomoQuestion struct {
	Question string
	Category int
	Evidence []string
}

// sessionKey matches the keys of a conversation's sessions ("session_12").
var sessionKey = regexp.MustCompile(`^session_([0-9]+)$`)

// parseLoCoMo reads a LoCoMo-format file: one conversation object, or an array of them
// (as the benchmark's locomo10.json). A conversation's sessions are either its own
// members or those of its "conversation" member, and its questions are "qa". Only
// questions with evidence that names turns of the conversation are kept; an evidence
// string may name several turns ("D2:5; D3:1"), and names of no turn are dropped.
func parseLoCoMo(raw []byte) ([]locomoConversation, error) {
	var many []json.RawMessage
	if err := json.Unmarshal(raw, &many); err != nil {
		many = []json.RawMessage{raw}
	}
	out := make([]locomoConversation, 0, len(many))
	for i, one := range many {
		c, err := parseLoCoMoConversation(one)
		if err != nil {
			return nil, fmt.Errorf("conversation %d: %w", i, err)
		}
		out = append(out, c)
	}
	return out, nil
}

func parseLoCoMoConversation(raw []byte) (locomoConversation, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return locomoConversation{}, err
	}
	members := top
	if inner, ok := top["conversation"]; ok {
		if err := json.Unmarshal(inner, &members); err != nil {
			return locomoConversation{}, fmt.Errorf("conversation: %w", err)
		}
	}
	type session struct {
		n     int
		turns []locomoTurn
	}
	var sessions []session
	for key, v := range members {
		m := sessionKey.FindStringSubmatch(key)
		if m == nil {
			continue
		}
		n, err := strconv.Atoi(m[1])
		if err != nil {
			return locomoConversation{}, fmt.Errorf("%s: %w", key, err)
		}
		var turns []locomoTurn
		if err := json.Unmarshal(v, &turns); err != nil {
			return locomoConversation{}, fmt.Errorf("%s: %w", key, err)
		}
		sessions = append(sessions, session{n, turns})
	}
	slices.SortFunc(sessions, func(a, b session) int { return cmp.Compare(a.n, b.n) })
	var c locomoConversation
	known := map[string]bool{}
	for _, s := range sessions {
		for _, t := range s.turns {
			if t.DiaID == "" || known[t.DiaID] {
				return locomoConversation{}, fmt.Errorf("session_%d: a turn without a dia_id, or a repeated one (%q)", s.n, t.DiaID)
			}
			known[t.DiaID] = true
			t.Session = fmt.Sprintf("session_%d", s.n)
			c.Turns = append(c.Turns, t)
		}
	}
	var qa []struct {
		Question string   `json:"question"`
		Category int      `json:"category"`
		Evidence []string `json:"evidence"`
	}
	if v, ok := top["qa"]; ok {
		if err := json.Unmarshal(v, &qa); err != nil {
			return locomoConversation{}, fmt.Errorf("qa: %w", err)
		}
	}
	for _, q := range qa {
		var evidence []string
		for _, e := range q.Evidence {
			for _, id := range strings.FieldsFunc(e, func(r rune) bool { return r == ';' || r == ',' || unicode.IsSpace(r) }) {
				switch {
				case !known[id]:
					c.Unmatched++
				case !slices.Contains(evidence, id):
					evidence = append(evidence, id)
				}
			}
		}
		if len(evidence) > 0 && strings.TrimSpace(q.Question) != "" {
			c.Questions = append(c.Questions, locomoQuestion{Question: q.Question, Category: q.Category, Evidence: evidence})
		}
	}
	return c, nil
}

// bm25Terms is the analysis of the benchmark's own BM25, that of the service's text
// half for English: a word is a maximal run of letters, digits and marks, lowercased;
// English stop words are dropped, and the others stemmed by Snowball's english
// stemmer (the algorithm and stop word list of Postgres's english_stem dictionary).
func bm25Terms(text string) []string {
	var terms []string
	for _, w := range strings.FieldsFunc(text, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsNumber(r) && !unicode.IsMark(r)
	}) {
		w = strings.ToLower(w)
		if english.IsStopWord(w) {
			continue
		}
		terms = append(terms, english.Stem(w, false))
	}
	return terms
}

// plainBM25 is Okapi BM25 (k1 1.2, b 0.75) over a fixed set of documents:
//
//	score(d, q) = Σ over the distinct terms t of q of idf(t) · tf·(k1+1) / (tf + k1·(1 − b + b·|d|/avgdl))
//	idf(t)      = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))
//
// with tf the occurrences of t in d, |d| its terms, avgdl their mean over the N
// documents and df(t) the documents holding t.
type plainBM25 struct {
	ids   []string
	tf    []map[string]int
	len   []float64
	df    map[string]int
	avgdl float64
}

const (
	plainBM25K1 = 1.2
	plainBM25B  = 0.75
)

// newPlainBM25 indexes docs (by ID, in the order they were written).
func newPlainBM25(ids, docs []string) *plainBM25 {
	x := &plainBM25{ids: ids, df: map[string]int{}}
	total := 0.0
	for _, d := range docs {
		tf := map[string]int{}
		terms := bm25Terms(d)
		for _, t := range terms {
			if tf[t] == 0 {
				x.df[t]++
			}
			tf[t]++
		}
		x.tf = append(x.tf, tf)
		x.len = append(x.len, float64(len(terms)))
		total += float64(len(terms))
	}
	if len(docs) > 0 && total > 0 {
		x.avgdl = total / float64(len(docs))
	}
	return x
}

func (x *plainBM25) idf(t string) float64 {
	n, df := float64(len(x.ids)), float64(x.df[t])
	return math.Log(1 + (n-df+0.5)/(df+0.5))
}

// queryTerms are the distinct terms of query, in order.
func (x *plainBM25) queryTerms(query string) []string {
	var terms []string
	for _, t := range bm25Terms(query) {
		if !slices.Contains(terms, t) {
			terms = append(terms, t)
		}
	}
	return terms
}

// score is document d's score for the distinct query terms, and whether it holds any
// of them.
func (x *plainBM25) score(terms []string, d int) (float64, bool) {
	score, found := 0.0, false
	for _, t := range terms {
		f := float64(x.tf[d][t])
		if f == 0 {
			continue
		}
		found = true
		score += x.idf(t) * f * (plainBM25K1 + 1) / (f + plainBM25K1*(1-plainBM25B+plainBM25B*x.len[d]/x.avgdl))
	}
	return score, found
}

// search returns the IDs of the k best documents for query, best first, among those
// holding one of its terms; ties go to the later written document, as the service
// breaks them by newest.
func (x *plainBM25) search(query string, k int) []string {
	terms := x.queryTerms(query)
	type scored struct {
		doc   int
		score float64
	}
	var hits []scored
	for d := range x.tf {
		if score, ok := x.score(terms, d); ok {
			hits = append(hits, scored{d, score})
		}
	}
	slices.SortFunc(hits, func(a, b scored) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return cmp.Compare(b.doc, a.doc)
	})
	out := []string{}
	for _, h := range hits[:min(k, len(hits))] {
		out = append(out, x.ids[h.doc])
	}
	return out
}

// retrievalScores accumulates hit@k and recall@k over questions: for a question with
// evidence turns E and a ranking R, hit@k is 1 when any turn of E is in the first k of
// R (else 0), and recall@k is |E ∩ first k of R| / |E|; both are averaged over the
// questions, each question weighing the same.
type retrievalScores struct {
	n      int
	hits   map[int]float64
	recall map[int]float64
}

func newRetrievalScores() *retrievalScores {
	return &retrievalScores{hits: map[int]float64{}, recall: map[int]float64{}}
}

// add scores one question's ranking, best first, for each k of ks.
func (s *retrievalScores) add(ranking, evidence []string, ks []int) {
	s.n++
	for _, k := range ks {
		found := 0
		for _, e := range evidence {
			if slices.Contains(ranking[:min(k, len(ranking))], e) {
				found++
			}
		}
		if found > 0 {
			s.hits[k]++
		}
		s.recall[k] += float64(found) / float64(len(evidence))
	}
}

// HitAt is the share of questions with an evidence turn in the first k.
func (s *retrievalScores) HitAt(k int) float64 { return s.hits[k] / float64(max(s.n, 1)) }

// RecallAt is the mean share of a question's evidence turns in the first k.
func (s *retrievalScores) RecallAt(k int) float64 { return s.recall[k] / float64(max(s.n, 1)) }

// locomoRetrievers are the rows of the benchmark's table: the service's modes, and the
// benchmark's own BM25 (not a mode of the service).
var locomoRetrievers = []string{contract.RecallText, contract.RecallVector, contract.RecallHybrid, "bm25"}

// readLoCoMo reads the conversations of the LoCoMo-format files named by envLoCoMo
// (paths separated as in PATH), in order, and returns them with the variable's value;
// none when the variable is unset.
func readLoCoMo(tb testing.TB) ([]locomoConversation, string) {
	tb.Helper()
	paths := os.Getenv(envLoCoMo)
	if paths == "" {
		return nil, ""
	}
	var all []locomoConversation
	for _, path := range filepath.SplitList(paths) {
		raw, err := os.ReadFile(path)
		require.NoError(tb, err)
		conversations, err := parseLoCoMo(raw)
		require.NoError(tb, err, path)
		all = append(all, conversations...)
	}
	return all, paths
}

// BenchmarkLoCoMo measures recall on a LoCoMo-format file (docs/recall-quality.md):
// the real service with the local embedder stores every turn as an entry of its
// session's conversation through POST /entries, waits until the projection has embedded them all, then asks every
// question with evidence through POST /recall (topK 10) in each mode; beside them, the
// benchmark's own BM25 ranks the same turns. It reports hit@k and recall@k for k = 5
// and 10 (and logs the table); an iteration is one pass of every question in the
// three modes, so -benchtime 1x is enough.
//
// Then it measures latency: locomoClients clients ask the questions at once, one mode
// at a time (text, vector, hybrid, locomoRounds times over, the modes in turn), each
// client keeping its connections open, and it reports each mode's p50 and p95 in
// milliseconds, from the request sent to the response read. The quality pass before it
// is their warm-up. The service runs without its cache of query vectors, so that every
// vector and hybrid recall embeds its question.
//
//	AGENT_CONTEXT_LOCOMO=/path/conv-26.json go run ./adapters/postgres/pgtest/pgtestrun -- \
//	    go test -run '^$' -bench BenchmarkLoCoMo -benchtime 1x ./cmd/agent-context
func BenchmarkLoCoMo(b *testing.B) {
	conversations, path := readLoCoMo(b)
	if conversations == nil {
		b.Skipf("set %s to the path of a LoCoMo-format file (a conversation, or an array of them) to run this benchmark", envLoCoMo)
	}
	modelDir := localtest.ModelDir(b)
	ctx := context.Background()

	type loaded struct {
		conv  locomoConversation
		app   *testApp
		api   *client.Client
		plain *plainBM25
	}
	var all []loaded
	turns, questions, unmatched := 0, 0, 0
	for _, conv := range conversations {
		app := startApp(b, func(c *Config) {
			c.Embedder, c.ModelDir = EmbedderLocal, modelDir
			// Every recall embeds its question, though the latency pass asks again what
			// the quality pass asked.
			c.EmbeddingQuery.CacheEntries = -1
		})
		api := app.typed()
		ids, docs := make([]string, len(conv.Turns)), make([]string, len(conv.Turns))
		for i, t := range conv.Turns {
			ids[i], docs[i] = t.DiaID, t.Content()
			_, _, err := api.CreateEntry(ctx, &contract.CreateEntryRequest{
				ID: &ids[i], Kind: "observation", Content: docs[i], ConversationID: &conv.Turns[i].Session,
			})
			require.NoError(b, err)
		}
		waitEmbedded(b, api)
		all = append(all, loaded{conv, app, api, newPlainBM25(ids, docs)})
		turns += len(conv.Turns)
		questions += len(conv.Questions)
		unmatched += conv.Unmatched
	}
	require.Positive(b, questions, "no question with evidence in %s", path)

	topK := slices.Max(locomoKs)
	// scores[r] is retriever r's over every question, each[i][r] over conversation i's.
	var (
		scores map[string]*retrievalScores
		each   []map[string]*retrievalScores
	)
	b.ResetTimer()
	for range b.N {
		scores, each = map[string]*retrievalScores{}, make([]map[string]*retrievalScores, len(all))
		for _, r := range locomoRetrievers {
			scores[r] = newRetrievalScores()
		}
		for i, l := range all {
			each[i] = map[string]*retrievalScores{}
			for _, r := range locomoRetrievers {
				each[i][r] = newRetrievalScores()
			}
			add := func(r string, ranking, evidence []string) {
				scores[r].add(ranking, evidence, locomoKs)
				each[i][r].add(ranking, evidence, locomoKs)
			}
			for _, q := range l.conv.Questions {
				for _, mode := range locomoRetrievers[:3] {
					res, err := l.api.Recall(ctx, &contract.RecallRequest{Query: q.Question, TopK: &topK, Mode: mode})
					require.NoError(b, err)
					require.False(b, res.Degraded, "the local embedder answers")
					add(mode, resultIDs(res.Results), q.Evidence)
				}
				add("bm25", l.plain.search(q.Question, topK), q.Evidence)
			}
		}
	}
	b.StopTimer()

	var asks []locomoAsk
	for _, l := range all {
		for _, q := range l.conv.Questions {
			asks = append(asks, locomoAsk{l.app, q.Question})
		}
	}
	latencies := locomoLatencies(b, asks, topK)

	var table strings.Builder
	fmt.Fprintf(&table, "%d conversation(s), %d turns, %d questions with evidence (%d evidence names matched no turn)\n\n",
		len(all), turns, questions, unmatched)
	fmt.Fprintf(&table, "| retriever | hit@5 | hit@10 | recall@5 | recall@10 |\n| --- | ---: | ---: | ---: | ---: |\n")
	for _, r := range locomoRetrievers {
		s := scores[r]
		name := r
		if r == "bm25" {
			name = "plain BM25 (benchmark's own)"
		}
		fmt.Fprintf(&table, "| %s | %.3f | %.3f | %.3f | %.3f |\n", name, s.HitAt(5), s.HitAt(10), s.RecallAt(5), s.RecallAt(10))
		for _, k := range locomoKs {
			b.ReportMetric(s.HitAt(k), fmt.Sprintf("%s-hit@%d", r, k))
			b.ReportMetric(s.RecallAt(k), fmt.Sprintf("%s-recall@%d", r, k))
		}
	}
	if len(all) > 1 {
		fmt.Fprintf(&table, "\nEach conversation, in the order of the files:\n\n")
		fmt.Fprintf(&table, "| conversation | turns | questions | retriever | hit@5 | hit@10 | recall@5 | recall@10 |\n| ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |\n")
		for i, l := range all {
			for _, r := range locomoRetrievers[:3] {
				s := each[i][r]
				fmt.Fprintf(&table, "| %d | %d | %d | %s | %.3f | %.3f | %.3f | %.3f |\n", i+1, len(l.conv.Turns), len(l.conv.Questions), r,
					s.HitAt(5), s.HitAt(10), s.RecallAt(5), s.RecallAt(10))
			}
		}
	}
	fmt.Fprintf(&table, "\n%d clients, each question %d times per mode (%s):\n\n", locomoClients, locomoRounds, locomoLoad())
	fmt.Fprintf(&table, "| mode | requests | p50 ms | p95 ms |\n| --- | ---: | ---: | ---: |\n")
	for _, mode := range locomoRetrievers[:3] {
		d := latencies[mode]
		p50, p95 := percentileMs(d, 0.50), percentileMs(d, 0.95)
		fmt.Fprintf(&table, "| %s | %d | %.1f | %.1f |\n", mode, len(d), p50, p95)
		b.ReportMetric(p50, mode+"-p50-ms")
		b.ReportMetric(p95, mode+"-p95-ms")
	}
	b.Log("\n" + table.String())
}

// The latency pass of BenchmarkLoCoMo: how many clients ask at once, and how many
// times each question is asked in each mode.
const (
	locomoClients = 4
	locomoRounds  = 3
)

// locomoAsk is a question of the latency pass and the app that holds its conversation.
type locomoAsk struct {
	app      *testApp
	question string
}

// locomoLatencies asks every question of asks through POST /recall (topK) from
// locomoClients clients at once, one mode at a time, locomoRounds times over with the
// modes in turn, and returns each mode's latencies. Every client has its own
// connections, kept open between its requests.
func locomoLatencies(b *testing.B, asks []locomoAsk, topK int) map[string][]time.Duration {
	ctx := context.Background()
	type caller struct{ apis map[*testApp]*client.Client }
	callers := make([]caller, locomoClients)
	for i := range callers {
		transport := http.DefaultTransport.(*http.Transport).Clone()
		hc := &http.Client{Timeout: time.Minute, Transport: transport}
		b.Cleanup(transport.CloseIdleConnections)
		callers[i].apis = map[*testApp]*client.Client{}
		for _, a := range asks {
			if callers[i].apis[a.app] == nil {
				callers[i].apis[a.app] = client.New(client.WithBaseURL(a.app.base), client.WithHTTPClient(hc))
			}
		}
	}
	out := map[string][]time.Duration{}
	modes := locomoRetrievers[:3]
	for round := range locomoRounds {
		for m := range modes {
			mode := modes[(round+m)%len(modes)]
			var (
				next atomic.Int64
				mu   sync.Mutex
				wg   sync.WaitGroup
				errs []error
			)
			for _, c := range callers {
				wg.Go(func() {
					var mine []time.Duration
					for i := int(next.Add(1)) - 1; i < len(asks); i = int(next.Add(1)) - 1 {
						start := time.Now()
						_, err := c.apis[asks[i].app].Recall(ctx, &contract.RecallRequest{Query: asks[i].question, TopK: &topK, Mode: mode})
						elapsed := time.Since(start)
						if err != nil {
							mu.Lock()
							errs = append(errs, err)
							mu.Unlock()
							return
						}
						mine = append(mine, elapsed)
					}
					mu.Lock()
					out[mode] = append(out[mode], mine...)
					mu.Unlock()
				})
			}
			wg.Wait()
			require.Empty(b, errs)
		}
	}
	return out
}

// percentileMs is the p-quantile of d (nearest rank) in milliseconds.
func percentileMs(d []time.Duration, p float64) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := max(int(math.Ceil(p*float64(len(s))))-1, 0)
	return float64(s[i]) / float64(time.Millisecond)
}

// locomoLoad is the machine's load averages (/proc/loadavg) when the latency pass
// ends, since other work on it shows in the latencies.
func locomoLoad() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "load averages unknown"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "load averages unknown"
	}
	return "load averages " + strings.Join(f[:3], " ")
}

// waitEmbedded waits until the projection has embedded every entry of the scope.
func waitEmbedded(tb testing.TB, api *client.Client) {
	tb.Helper()
	deadline := time.Now().Add(operationDeadline)
	for {
		st, err := api.MaintenanceStatus(context.Background())
		require.NoError(tb, err)
		if st.VectorProjection.PendingEntries == 0 {
			return
		}
		require.True(tb, time.Now().Before(deadline), "%d entries still pending", st.VectorProjection.PendingEntries)
		time.Sleep(50 * time.Millisecond)
	}
}
