package postgres_test

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/memory"
)

// bm25Doc is an entry as the reference BM25 below sees it.
type bm25Doc struct {
	id      string
	rare    bool
	active  bool // counts in the scope's statistics
	created int64
	ended   int64 // 0: never
	tf      map[string]int
	length  float64
}

type bm25Hit struct {
	id    string
	score float64
}

// exactBM25 is Okapi BM25 computed here from the documents: the top k of the entries
// that eligible admits, with N, df and avgdl taken from the active ones, ties by
// newest, then ID.
func exactBM25(docs []bm25Doc, text string, eligible func(bm25Doc) bool, k int) []bm25Hit {
	terms := postgres.RecallTermLexemes(text)
	n, total := 0.0, 0.0
	df := map[string]float64{}
	for _, d := range docs {
		if !d.active {
			continue
		}
		n++
		total += d.length
		for term := range d.tf {
			df[term]++
		}
	}
	avgdl := total / n
	created := map[string]int64{}
	var hits []bm25Hit
	for _, d := range docs {
		if !eligible(d) {
			continue
		}
		score, matched := 0.0, false
		for _, term := range terms {
			tf := float64(d.tf[term])
			if tf == 0 {
				continue
			}
			idf := math.Log(1 + (n-df[term]+0.5)/(df[term]+0.5))
			score += idf * tf * 2.2 / (tf + 1.2*(0.25+0.75*d.length/avgdl))
			matched = true
		}
		if matched {
			hits = append(hits, bm25Hit{d.id, score})
			created[d.id] = d.created
		}
	}
	slices.SortFunc(hits, func(a, b bm25Hit) int {
		if math.Abs(a.score-b.score) > 1e-9*max(a.score, b.score) {
			return cmp.Compare(b.score, a.score)
		}
		return cmp.Or(cmp.Compare(created[b.id], created[a.id]), cmp.Compare(a.id, b.id))
	})
	return hits[:min(k, len(hits))]
}

// bm25Documents reads the documents of entries as the reference sees them.
func bm25Documents(scope runtime.Scope, id func(i int) string, texts []string) []bm25Doc {
	docs := make([]bm25Doc, len(texts))
	for i, text := range texts {
		v, n := postgres.EntryDocument(scope, text)
		d := bm25Doc{id: id(i), active: true, tf: map[string]int{}, length: float64(n)}
		for _, l := range v.Lexemes {
			d.tf[l.Word[13:]] = len(l.Positions)
		}
		docs[i] = d
	}
	return docs
}

// requireBM25 asks the text half and checks its answer against the reference, entry
// by entry: the same entries in the same order with the same scores.
func requireBM25(t *testing.T, db *postgres.DB, scope runtime.Scope, q memory.TextRecall, want []bm25Hit, name string) {
	t.Helper()
	stores := map[string]*postgres.RecallStore{"": db.Recall()}
	if len(q.Tags) > 0 || q.ConversationID != "" {
		// The entries passing the filter are few enough to be read first, and only their
		// postings scored; the search for many, which leaves the filter to the lookups,
		// is checked on the same entries too.
		stores[" (walking)"] = postgres.RecallWalkingFilters(db)
	}
	for plan, store := range stores {
		hits, err := store.TextSearch(context.Background(), scope, q)
		require.NoError(t, err, name+plan)
		got := make([]bm25Hit, len(hits))
		for i, h := range hits {
			got[i] = bm25Hit{h.Entry.ID, h.Score}
		}
		require.Len(t, got, len(want), name+plan)
		for i := range want {
			require.Equal(t, want[i].id, got[i].id, "%s%s: rank %d", name, plan, i+1)
			require.InDelta(t, want[i].score, got[i].score, 1e-9, "%s%s: rank %d (%s)", name, plan, i+1, got[i].id)
		}
	}
}

// TestTextSearchIsExactBM25: over 2,000 entries of the benchmark's corpus (every one
// holding "note" and "service", light terms whose postings MaxScore leaves unread and
// scores from the documents it looks up), the text half returns the top k of an Okapi
// BM25 computed here from the documents: the same entries with the same scores, in
// order (ties by newest, then ID), with and without a filter, for questions with rare
// terms, a single term, and common terms only, and for a k larger than the entries
// holding the essential terms (MaxScore cannot tell; every term is read). And a term
// fewer than k entries hold beside words every entry holds (no term is light then),
// under no filter, a selective filter and asOfMs.
func TestTextSearchIsExactBM25(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	db := newDB(t, pool)
	scope := runtime.Scope{TenantID: "t", ProjectID: "p"}
	texts := corpus(2000, 5)
	entries := hashSeed(t, "e", texts, func(i int) []string {
		if i%10 == 3 {
			return []string{"rare"}
		}
		return []string{}
	})
	seedProjection(t, pool, db, scope, hashModel, entries)
	// Another scope's entries hold the same words and never count.
	seedProjection(t, pool, db, runtime.Scope{TenantID: "u", ProjectID: "p"}, hashModel, hashSeed(t, "u", corpus(300, 6), func(int) []string { return []string{} }))

	docs := bm25Documents(scope, func(i int) string { return entries[i].ID }, texts)
	for i := range docs {
		docs[i].rare = len(entries[i].Tags) > 0
	}
	for _, c := range []struct {
		text string
		rare bool
		k    int
	}{
		{"why does the billing service retries nightly after midnight", false, 10},
		{"why does the billing service retries nightly after midnight", true, 10},
		// A number one entry holds beside the corpus's words: the light words weightier
		// than the common terms' share are read rather than looked up.
		{"the ledger service caches globally on holidays note 17", false, 10},
		{"the ledger service caches globally on holidays note 17", true, 10},
		{"the ledger service caches globally on holidays note 17", false, 40},
		{"scheduler", false, 10},
		{"scheduler", true, 5},
		{"note service", false, 10},
		{"note service", true, 10},
		{"crawler leaks remotely in Lima", false, 200},
		{"scheduler note", false, 200}, // fewer than k hold the essential term: every posting
		// A term one entry holds beside words every entry holds.
		{"note 17 service", false, 10},
		{"note 17 service", false, 40},
		{"note 13 service", true, 10},
		{"service note 1234 Lima", false, 20},
	} {
		name := fmt.Sprintf("%q rare=%v k=%d", c.text, c.rare, c.k)
		filter := memory.RecallFilter{NowMs: time.Now().UnixMilli()}
		if c.rare {
			filter.Tags = []string{"rare"}
		}
		want := exactBM25(docs, c.text, func(d bm25Doc) bool { return !c.rare || d.rare }, c.k)
		requireBM25(t, db, scope, memory.TextRecall{RecallFilter: filter, Text: c.text, Limit: c.k}, want, name)
	}
}

// copyBM25Docs loads the documents' entries of scope with COPY: active, or superseded
// at their end, tagged "rare" and in conversation "c-rare" when they are rare. Every
// other one is loaded first and packed into blocks; the rest stay pending, so that
// each search reads both.
func copyBM25Docs(t *testing.T, pool *pgxpool.Pool, scope runtime.Scope, docs []bm25Doc, texts []string) {
	t.Helper()
	ctx := context.Background()
	for half := range 2 {
		var rows [][]any
		var ids []string
		for i, d := range docs {
			if i%2 != half {
				continue
			}
			ids = append(ids, d.id)
			doc, length := postgres.EntryDocument(scope, texts[i])
			tags, status, ended, by, conversation := []string{}, "active", (*int64)(nil), (*string)(nil), (*string)(nil)
			if d.rare {
				tags, conversation = []string{"rare"}, &rareConversation
			}
			if !d.active {
				next := d.id + "-v2"
				status, ended, by = "superseded", &d.ended, &next
			}
			rows = append(rows, []any{scope.TenantID, scope.ProjectID, d.id, "fact", texts[i], []string{}, tags, 0.5, status,
				int64(1), "seeded", d.created, d.created, ended, by, doc, int32(length), conversation})
		}
		_, err := pool.CopyFrom(ctx, pgx.Identifier{"context_entries"}, []string{"tenant_id", "project_id", "entry_id", "kind",
			"content", "source_record_ids", "tags", "importance", "status", "version", "request_sha256", "created_at_ms",
			"updated_at_ms", "ended_at_ms", "superseded_by", "search", "search_length", "conversation_id"}, pgx.CopyFromRows(rows))
		require.NoError(t, err)
		require.NoError(t, postgres.IndexEntries(ctx, pool, scope, ids))
		if half == 0 {
			require.NoError(t, postgres.PackText(ctx, pool, scope))
		}
	}
	_, err := pool.Exec(ctx, `VACUUM ANALYZE entry_text_postings`)
	require.NoError(t, err)
}

// TestTextSearchPlaygroundTies: the shape of the console's recall playground, where every
// entry holds the question's common words once in a document of the same length, so
// all but the one holding the rare term tie and rank newest first (then by ID): the
// text half answers exactly that, unfiltered, under a selective filter, and as of
// instants before which some entries did not exist and after which some were
// superseded.
func TestTextSearchPlaygroundTies(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	db := newDB(t, pool)
	scope := runtime.Scope{TenantID: "t", ProjectID: "ties"}
	const n = 600
	texts := make([]string, n)
	for i := range texts {
		texts[i] = fmt.Sprintf("note %d about the billing service", i)
		if i%7 == 0 {
			texts[i] = fmt.Sprintf("note %d about the billing service and the billing note", i)
		}
	}
	docs := bm25Documents(scope, func(i int) string { return fmt.Sprintf("be-%03d", i) }, texts)
	for i := range docs {
		docs[i].created = 1000 + int64(i/3) // three entries at each instant: ties by ID
		docs[i].rare = i%25 == 3
		if i%11 == 5 {
			docs[i].active, docs[i].ended = false, 1150
		}
	}
	copyBM25Docs(t, pool, scope, docs, texts)

	requireTextCases(t, db, scope, docs, []textCase{
		{"billing note 77", false, 0, 10},
		{"billing note 77", false, 0, 20},
		{"billing note 77", false, 0, 300},
		{"billing note 77 455", false, 0, 10},
		{"billing note", false, 0, 10},
		{"billing note 78", true, 0, 10},
		{"billing note 77", false, 1100, 10}, // entries 301 on did not exist yet, the superseded were active
		{"billing note 77", false, 1020, 10}, // before entry 77 was created
		{"billing note 77", false, 1200, 20}, // after the superseded ended
	})
}

// TestTextSearchTiesInOneInstant: entries created in the same millisecond (as an
// import or a bulk load leaves them) tie on creation, so a tie on score is broken by
// ID alone, which the lookups order; the service ranks documents by score and creation
// only, so a batch takes every document ranking alike with its last. Over 900 entries
// of one instant, most of them scoring alike for the
// common words, the text half still returns the reference's top k, in order, for
// questions of the recall playground's shape, under no filter, a selective filter, a
// k beyond the tied entries and asOfMs.
func TestTextSearchTiesInOneInstant(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	db := newDB(t, pool)
	scope := runtime.Scope{TenantID: "t", ProjectID: "instant"}
	const n = 900
	texts := make([]string, n)
	for i := range texts {
		texts[i] = fmt.Sprintf("note %d about the billing service", i)
		switch i % 9 {
		case 4:
			texts[i] = fmt.Sprintf("note %d about the billing service, as Ana noted", i)
		case 7:
			texts[i] = fmt.Sprintf("note %d: the billing service retries nightly", i)
		}
	}
	// IDs not in the order of the texts, so the ID order is not the load's.
	docs := bm25Documents(scope, func(i int) string { return fmt.Sprintf("bi-%03d", (i*337)%n) }, texts)
	for i := range docs {
		docs[i].created = 5000
		docs[i].rare = i%30 == 11
		if i%13 == 6 {
			docs[i].active, docs[i].ended = false, 5000
		}
	}
	copyBM25Docs(t, pool, scope, docs, texts)

	requireTextCases(t, db, scope, docs, []textCase{
		{"note 48 about the service", false, 0, 10},
		{"note 48 about the service", false, 0, 20},
		{"note 48 about the service", false, 0, 150},
		{"note 48 about the service", true, 0, 10},
		{"billing note", false, 0, 10},
		{"billing service nightly", false, 0, 10},
		{"note 48 about the service", false, 4999, 10}, // before the instant: nothing
	})
}

// textCase is a text recall of a test, answered against exactBM25: the question, the
// rare tag as filter or not, asOfMs (0: now) and k.
type textCase struct {
	text string
	rare bool
	asOf int64
	k    int
}

// rareConversation holds the rare documents copyBM25Docs loads.
var rareConversation = "c-rare"

// requireTextCases checks every case's text recall over docs against exactBM25,
// entry by entry and in order; a rare case also with the rare documents' conversation
// as the filter instead of their tag.
func requireTextCases(t *testing.T, db *postgres.DB, scope runtime.Scope, docs []bm25Doc, cases []textCase) {
	t.Helper()
	now := time.Now().UnixMilli()
	for _, c := range cases {
		name := fmt.Sprintf("%q rare=%v asOf=%d k=%d", c.text, c.rare, c.asOf, c.k)
		filter := memory.RecallFilter{NowMs: now}
		if c.asOf > 0 {
			filter.AsOfMs = &c.asOf
		}
		if c.rare {
			filter.Tags = []string{"rare"}
		}
		want := exactBM25(docs, c.text, func(d bm25Doc) bool {
			if c.rare && !d.rare {
				return false
			}
			if c.asOf == 0 {
				return d.active
			}
			return d.created <= c.asOf && (d.ended == 0 || d.ended > c.asOf)
		}, c.k)
		requireBM25(t, db, scope, memory.TextRecall{RecallFilter: filter, Text: c.text, Limit: c.k}, want, name)
		if c.rare {
			filter.Tags, filter.ConversationID = nil, rareConversation
			requireBM25(t, db, scope, memory.TextRecall{RecallFilter: filter, Text: c.text, Limit: c.k}, want, name+" by conversation")
		}
	}
}

// TestTextSearchTiesSumAlike: entries whose scores are equal add the same
// contributions, but the text half adds them in different orders (the postings' terms
// merged one by one, then the light terms from the documents). Floating-point addition is not associative, so without
// contributions that add exactly, such entries came back a unit in the last place
// apart and ranked by that, not by creation and ID.
func TestTextSearchTiesSumAlike(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	db := newDB(t, pool)
	scope := runtime.Scope{TenantID: "t", ProjectID: "sums"}
	const n = 600
	texts := make([]string, n)
	for i := range texts {
		switch i % 5 {
		case 0, 1:
			texts[i] = fmt.Sprintf("note %d: the ledger service retries billing nightly from the gateway", i)
		case 2:
			texts[i] = fmt.Sprintf("note %d: the ledger service retries billing", i)
		case 3:
			texts[i] = fmt.Sprintf("note %d: the gateway retries nightly", i)
		default:
			texts[i] = fmt.Sprintf("note %d: billing from the ledger service", i)
		}
	}
	docs := bm25Documents(scope, func(i int) string { return fmt.Sprintf("bs-%03d", (i*211)%n) }, texts)
	for i := range docs {
		docs[i].created = 7000 + int64(i%3)
		docs[i].rare = i%20 == 7
	}
	copyBM25Docs(t, pool, scope, docs, texts)

	var cases []textCase
	for _, q := range []string{
		"note 48: the ledger service retries billing nightly from the gateway",
		"why does the gateway retry the ledger service nightly, note 301",
		"billing ledger gateway nightly retries service",
	} {
		for _, k := range []int{10, 40, 150} {
			cases = append(cases, textCase{q, false, 0, k})
		}
		cases = append(cases, textCase{q, true, 0, 10})
	}
	requireTextCases(t, db, scope, docs, cases)
}

// TestTextSearchLightTermLifts: MaxScore leaves a word most entries hold (light) out of
// the partial scores it ranks by, and scores it from the documents of the entries it
// looks up. Forty entries hold "zephyr" in documents of one length; the oldest of them
// also holds "lumen", which 1,000 other entries hold. It ranks first, though its partial
// score ranks it last of the forty (ties by newest): the entries looked up must reach
// every one within the light term's bound of the k-th, or it is missed.
func TestTextSearchLightTermLifts(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	db := newDB(t, pool)
	scope := runtime.Scope{TenantID: "t", ProjectID: "light"}
	texts := make([]string, 1040)
	for i := range texts {
		switch {
		case i == 0:
			texts[i] = "zephyr lumen harbor glass"
		case i < 40:
			texts[i] = "zephyr kite harbor glass"
		default:
			texts[i] = fmt.Sprintf("lumen orchard %d", i)
		}
	}
	docs := bm25Documents(scope, func(i int) string { return fmt.Sprintf("lt-%04d", i) }, texts)
	for i := range docs {
		docs[i].created = 1000 + int64(i)
	}
	copyBM25Docs(t, pool, scope, docs, texts)
	require.Equal(t, "lt-0000", exactBM25(docs, "zephyr lumen", func(bm25Doc) bool { return true }, 1)[0].id)
	requireTextCases(t, db, scope, docs, []textCase{{"zephyr lumen", false, 0, 1}, {"zephyr lumen", false, 0, 5}})
}

// TestTextSearchOverTheSimpleProtocol: a database URL may ask pgx for the simple
// protocol (as some poolers need), in which Postgres sends the packed blocks as text;
// the text half answers the same as over the extended protocol's binary rows.
func TestTextSearchOverTheSimpleProtocol(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	scope := runtime.Scope{TenantID: "t", ProjectID: "simple"}
	texts := make([]string, 300)
	for i := range texts {
		texts[i] = fmt.Sprintf("note %d: the ledger service retries billing nightly", i)
	}
	docs := bm25Documents(scope, func(i int) string { return fmt.Sprintf("sp-%03d", i) }, texts)
	for i := range docs {
		docs[i].created = 1000 + int64(i)
	}
	copyBM25Docs(t, pool, scope, docs, texts)
	cfg := pool.Config().Copy()
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	simple, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(simple.Close)
	want := exactBM25(docs, "ledger note 17", func(d bm25Doc) bool { return d.active }, 10)
	requireBM25(t, newDB(t, simple), scope, memory.TextRecall{
		RecallFilter: memory.RecallFilter{NowMs: time.Now().UnixMilli()}, Text: "ledger note 17", Limit: 10}, want, "simple protocol")
}

// TestTextSearchStatementTimeout: a statement of the text half runs under the search
// timeout, and the session it ran on keeps its own.
func TestTextSearchStatementTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := pgtest.NewDB(t).Config().Copy()
	cfg.MaxConns = 1
	single, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer single.Close()
	var own string
	require.NoError(t, single.QueryRow(ctx, `SHOW statement_timeout`).Scan(&own))
	require.NotEqual(t, "1234ms", own)
	rows, err := postgres.BoundedQuery(ctx, single, 1234*time.Millisecond, `SELECT current_setting('statement_timeout')`)
	require.NoError(t, err)
	during, err := pgx.CollectExactlyOneRow(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, "1234ms", during)
	var after string
	require.NoError(t, single.QueryRow(ctx, `SHOW statement_timeout`).Scan(&after))
	require.Equal(t, own, after)
	// The error comes with the statement or with its rows.
	rows, err = postgres.BoundedQuery(ctx, single, 10*time.Millisecond, `SELECT pg_sleep(1)`)
	if err == nil {
		_, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "57014", pgErr.Code, "canceled by the statement timeout")
}
