package textindex

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func words(text string) (ws []string, runs []string) {
	scanText(text, func(w string) { ws = append(ws, w) }, func(r []rune) { runs = append(runs, string(r)) })
	return ws, runs
}

func TestScanText(t *testing.T) {
	t.Parallel()
	ws, runs := words("Hello, WORLD! café-Ünïcode x_y 42.5 東京タワーに行った hello世界 ภาษาไทย 학교에서 공부 a\u0301")
	require.Equal(t, []string{"hello", "world", "café", "ünïcode", "x", "y", "42", "5", "hello", "a\u0301"}, ws)
	require.Equal(t, []string{"東京タワーに行った", "世界", "ภาษาไทย", "학교에서", "공부"}, runs)

	ws, _ = words(strings.Repeat("é", 200))
	require.Len(t, ws, 1)
	require.LessOrEqual(t, len(ws[0]), maxLexemeBytes)
	require.True(t, utf8.ValidString(ws[0]))
}

func TestDocumentVector(t *testing.T) {
	t.Parallel()
	v := DocumentVector("Go go GO 東京タワー")
	got := map[string][]uint16{}
	for _, l := range v.Lexemes {
		for _, p := range l.Positions {
			got[l.Word] = append(got[l.Word], p.Position)
		}
	}
	require.Equal(t, map[string][]uint16{
		"go": {1, 2, 3}, "東京": {4}, "京タ": {5}, "タワ": {6}, "ワー": {7}, "ー": {8},
	}, got)
	require.True(t, v.Valid)
	require.Empty(t, DocumentVector("!!! ...").Lexemes)
}

func TestSearchQuery(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]struct {
		query string
		runs  []string
	}{
		"Deployment policy":      {"'deployment' & 'policy'", nil},
		"a & !b | c:* a":         {"'a' & 'b' & 'c'", nil},
		"'; DROP TABLE x; --":    {"'drop' & 'table' & 'x'", nil},
		"<->":                    {"", nil},
		"東京タワー":                  {"'東京' & '京タ' & 'タワ' & 'ワー'", []string{"東京タワー"}},
		"京":                      {"'京':*", []string{"京"}},
		"tower 東京":               {"'tower' & '東京'", []string{"東京"}},
		"it's":                   {"'it' & 's'", nil},
		"\u00ad\u200b\ufeff":     {"", nil},
		"ÀÉÎ":                    {"'àéî'", nil},
		strings.Repeat("a ", 10): {"'a'", nil},
	} {
		q, runs := SearchQuery(text)
		require.Equal(t, want.query, q, text)
		require.Equal(t, want.runs, runs, text)
	}
	require.Equal(t, `'it''s'`, quoteLexeme("it's"))
	require.Equal(t, `'a\\b'`, quoteLexeme(`a\b`))
	require.Equal(t, `%50\% \_off \\%`, LikeContains(`50% _off \`))
}

// tsqueryShape is what searchQuery may produce: quoted lexemes (optionally prefix
// matches) joined by &, nothing the tsquery parser could read as an operator.
var tsqueryShape = regexp.MustCompile(`^('([^'\\]|''|\\\\)+'(:\*)?)( & '([^'\\]|''|\\\\)+'(:\*)?)*$`)

func FuzzSearchQuery(f *testing.F) {
	for _, seed := range []string{"a & b", "'; DROP TABLE messages; --", "東京タワー", "a:* | !b <-> c", `\'`, "ภาษา"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		q, runs := SearchQuery(text)
		if q != "" {
			require.Regexp(t, tsqueryShape, q)
		}
		for _, r := range runs {
			require.Contains(t, text, r)
		}
	})
}

func FuzzDocumentVector(f *testing.F) {
	for _, seed := range []string{"hello world", "東京タワー", strings.Repeat("ab ", 300), "'\\''"} {
		f.Add(seed)
	}
	var reused DocumentBuilder
	f.Fuzz(func(t *testing.T, text string) {
		v := DocumentVector(text)
		// A builder that built other documents before builds the same one.
		reused.Build(text + " 東京 previous document")
		require.Equal(t, v, reused.Build(text))
		seen := map[string]bool{}
		for _, l := range v.Lexemes {
			require.NotEmpty(t, l.Word)
			require.LessOrEqual(t, len(l.Word), maxLexemeBytes)
			require.False(t, seen[l.Word])
			seen[l.Word] = true
			require.NotEmpty(t, l.Positions)
			require.LessOrEqual(t, len(l.Positions), maxPositionsPerLexeme)
			for i, p := range l.Positions {
				require.LessOrEqual(t, p.Position, uint16(maxPositions))
				if i > 0 {
					require.Greater(t, p.Position, l.Positions[i-1].Position)
				}
			}
		}
	})
}

func BenchmarkDocumentVector(b *testing.B) {
	text := strings.Repeat("The deployment policy says: roll back the gateway within 5 minutes of an error. ", 4) +
		"東京タワーに行きました"
	b.SetBytes(int64(len(text)))
	var builder DocumentBuilder // as an append reuses one per worker
	for b.Loop() {
		builder.Build(text)
	}
}

func TestRecallTerms(t *testing.T) {
	t.Parallel()
	lexemes := func(text string) []string {
		var out []string
		for _, term := range RecallTerms(text) {
			out = append(out, term.Query("t:"))
		}
		return out
	}
	require.Equal(t, []string{"'t:deploy'"}, lexemes("When does the deploy, the deploy!"), "stemmed, stop words left out")
	require.Equal(t, []string{"'t:deploy'", "'t:run'", "'t:stage'"}, lexemes("deployments running staging"))
	require.Equal(t, []string{"'t:4711'", "'t:op'"}, lexemes("OPS-4711"))
	require.Equal(t, []string{"'t:tower'", "'t:東京'", "'t:京タ'"}, lexemes("東京タ tower"))
	require.Equal(t, []string{"'t:京':*"}, lexemes("京"))
	require.Equal(t, []string{"'t:tabl'", "'t:drop'"}, lexemes("'; DROP TABLE --"))
	require.Empty(t, lexemes("?! <->"))
	require.Empty(t, lexemes("the and of"), "stop words alone")
	var long []string
	for i := range 40 {
		long = append(long, strings.Repeat("w", i%7+1)+fmt.Sprint(i))
	}
	terms := RecallTerms(strings.Join(long, " "))
	require.Len(t, terms, maxRecallTerms, "the longest words are kept")
	require.Equal(t, "wwwwwww13", terms[0].Lexeme)
}

// recallShape is what the recall text queries may be: quoted lexemes (optionally
// prefix matches) joined by | and &.
var recallShape = regexp.MustCompile(`^('([^'\\]|''|\\\\)+'(:\*)?)( [&|] '([^'\\]|''|\\\\)+'(:\*)?)*$`)

func FuzzRecallTerms(f *testing.F) {
	for _, seed := range []string{"a & b | c", "'; DROP TABLE entries; --", "東京タワー", "OPS-4711 status", `\'`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		terms := RecallTerms(text)
		require.LessOrEqual(t, len(terms), maxRecallTerms)
		var any, all []string
		for _, term := range terms {
			any = append(any, term.Query(""))
			all = append(all, term.Query("t:"))
		}
		if len(terms) > 0 {
			require.Regexp(t, recallShape, strings.Join(any, " | "))
			require.Regexp(t, recallShape, strings.Join(all, " & "))
		}
	})
}
