// Package textindex is the pure half of the full-text indexes of messages and
// entries: the tokenizer that builds their documents and queries, the packed postings'
// block format, BM25 scoring and the MaxScore evaluation of a query over postings.
// It reads and writes no database: the adapter's stores read the postings and look the
// candidates up, and call it for the rest.
package textindex

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/kljensen/snowball/english"
)

// The full-text index of messages is built here rather than by a Postgres text search
// configuration, so that documents and queries split the same way in every script:
//
//   - A word is a maximal run of letters, marks and digits, lowercased; everything
//     else separates words. This is language-neutral (no stemming, no stop words),
//     like the 'simple' configuration.
//   - Scripts written without spaces (Han, Hiragana, Katakana, Hangul, Thai, Lao,
//     Khmer, Myanmar) form runs that are indexed as overlapping bigrams plus the run's
//     last character, so any substring of two or more characters is found by the
//     AND of its bigrams and a single character by a prefix match. Matching content is
//     then checked for the query's run verbatim, so bigrams that occur apart do not
//     make a false hit.
//
// The query is built from the same words as a tsquery of quoted lexemes joined by &,
// never parsed from the caller's text, so no input can be a syntax error.
const (
	// maxLexemeBytes truncates longer words (on both sides, so they still match);
	// Postgres refuses lexemes over 2 KiB.
	maxLexemeBytes = 255
	// maxVectorBytes bounds the lexeme and position bytes of one document below
	// Postgres's 1 MiB tsvector limit; words beyond it are not indexed.
	maxVectorBytes = 1_000_000
	// maxPositions is Postgres's largest tsvector position; later words share it.
	maxPositions = 16383
	// maxPositionsPerLexeme is what Postgres keeps per lexeme.
	maxPositionsPerLexeme = 256
)

// unsegmented reports whether r belongs to a script written without spaces between
// words. The prolonged sound mark and iteration marks are Common-script characters
// that only occur inside such words.
func unsegmented(r rune) bool {
	switch {
	case r < 0x0E00:
		return false
	case unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul,
		unicode.Thai, unicode.Lao, unicode.Khmer, unicode.Myanmar):
		return true
	}
	return r == 'ー' || r == '々' || r == '〆' || r == '〻'
}

func wordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r)
}

// scanText splits text into words and unsegmented runs, in order. A word that is
// already lowercase is passed as a substring of text, without copying.
func scanText(text string, word func(string), run func([]rune)) {
	wordStart := -1 // byte offset of the current word, -1 outside one
	var r []rune
	endWord := func(end int) {
		if wordStart >= 0 {
			// Cut before lowering (with room, since lowering may change the length),
			// and again after.
			w := truncateAt(text[wordStart:end], 2*maxLexemeBytes)
			word(truncateAt(strings.ToLower(w), maxLexemeBytes))
			wordStart = -1
		}
	}
	endRun := func() {
		if len(r) > 0 {
			run(r)
			r = r[:0]
		}
	}
	for i, c := range text {
		switch {
		case c < utf8.RuneSelf:
			if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
				endRun()
				if wordStart < 0 {
					wordStart = i
				}
			} else {
				endWord(i)
				endRun()
			}
		case unsegmented(c), len(r) > 0 && unicode.IsMark(c):
			endWord(i)
			r = append(r, c)
		case wordRune(c):
			endRun()
			if wordStart < 0 {
				wordStart = i
			}
		default:
			endWord(i)
			endRun()
		}
	}
	endWord(len(text))
	endRun()
}

// truncateAt cuts w to at most n bytes on a character boundary.
func truncateAt(w string, n int) string {
	if len(w) <= n {
		return w
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(w[cut]) {
		cut--
	}
	return w[:cut]
}

// DocumentVector returns the tsvector of a message's content.
func DocumentVector(text string) pgtype.TSVector {
	var b DocumentBuilder
	return b.Build(text)
}

// DocumentBuilder builds tsvectors, keeping its scratch space (the lexeme index, counts
// and occurrences) from one document to the next, so a batch of documents built by one
// builder costs two allocations per document: its lexemes and their positions.
// A builder is not safe for concurrent use.
type DocumentBuilder struct {
	// English stems words and leaves stop words out (their positions stay, as
	// Postgres's english configuration keeps them): entry documents.
	English     bool
	terms       int              // the terms of the document so far: its BM25 length
	index       map[string]int32 // lexeme → its number in words
	words       []string
	counts      []int32  // positions kept per lexeme
	last        []uint16 // the last position kept per lexeme
	occurrences []occurrence
	size        int // what Postgres counts of the document so far
	position    int
}

type occurrence struct {
	lexeme   int32
	position uint16
}

// Build returns the tsvector of text. The first pass numbers the distinct lexemes and
// keeps each word's position; the second hands every lexeme its positions from one
// shared array.
func (b *DocumentBuilder) Build(text string) pgtype.TSVector {
	if b.index == nil {
		b.index = make(map[string]int32, 64)
	}
	clear(b.index)
	b.words, b.counts, b.last, b.occurrences = b.words[:0], b.counts[:0], b.last[:0], b.occurrences[:0]
	b.size, b.position, b.terms = 0, 0, 0
	word := b.add
	if b.English {
		word = func(w string) {
			if stem, ok := EnglishTerm(w); ok {
				b.add(stem)
			} else {
				b.position++
			}
		}
	}
	scanText(text, word, func(run []rune) {
		// One string per run; its bigrams and last character are substrings of it.
		s, at := string(run), 0
		for i := 0; i+1 < len(run); i++ {
			first := utf8.RuneLen(run[i])
			b.add(s[at : at+first+utf8.RuneLen(run[i+1])])
			at += first
		}
		b.add(s[at:])
	})
	lexemes := make([]pgtype.TSVectorLexeme, len(b.words))
	positions := make([]pgtype.TSVectorPosition, len(b.occurrences))
	next := 0
	for i, w := range b.words {
		lexemes[i] = pgtype.TSVectorLexeme{Word: w, Positions: positions[next : next : next+int(b.counts[i])]}
		next += int(b.counts[i])
	}
	for _, o := range b.occurrences {
		l := &lexemes[o.lexeme]
		l.Positions = append(l.Positions, pgtype.TSVectorPosition{Position: o.position})
	}
	return pgtype.TSVector{Lexemes: lexemes, Valid: true}
}

// Terms is the length in terms of the document Build built last, BM25's |e|.
func (b *DocumentBuilder) Terms() int { return b.terms }

// add records the next word of the document.
func (b *DocumentBuilder) add(lexeme string) {
	b.position++
	b.terms++
	p := uint16(min(b.position, maxPositions))
	i, ok := b.index[lexeme]
	if !ok {
		// What Postgres counts: the lexeme, alignment, a position count and the first
		// position.
		if b.size+len(lexeme)+5 > maxVectorBytes {
			return
		}
		b.size += len(lexeme) + 5
		i = int32(len(b.words))
		b.index[lexeme] = i
		b.words = append(b.words, lexeme)
		b.counts = append(b.counts, 1)
		b.last = append(b.last, p)
		b.occurrences = append(b.occurrences, occurrence{i, p})
		return
	}
	if b.counts[i] < maxPositionsPerLexeme && b.last[i] < p && b.size+2 <= maxVectorBytes {
		b.size += 2
		b.counts[i]++
		b.last[i] = p
		b.occurrences = append(b.occurrences, occurrence{i, p})
	}
}

// SearchQuery returns the tsquery (as text) that requires every word of text, and the
// unsegmented runs a matching content must contain verbatim. An empty query means the
// text holds no word at all (only punctuation or symbols): nothing can match.
func SearchQuery(text string) (query string, runs []string) {
	var terms []string
	seen := map[string]bool{}
	term := func(t string) {
		if !seen[t] {
			seen[t] = true
			terms = append(terms, t)
		}
	}
	scanText(text, func(w string) { term(quoteLexeme(w)) }, func(run []rune) {
		runs = append(runs, string(run))
		if len(run) == 1 {
			term(quoteLexeme(string(run)) + ":*")
			return
		}
		for i := 0; i+1 < len(run); i++ {
			term(quoteLexeme(string(run[i : i+2])))
		}
	})
	return strings.Join(terms, " & "), runs
}

// quoteLexeme quotes w as a tsquery lexeme: inside quotes only ' and \ are special.
func quoteLexeme(w string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(w) + "'"
}

// LikeContains returns a LIKE pattern matching any text that contains s.
func LikeContains(s string) string {
	return "%" + strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s) + "%"
}

// maxRecallTerms bounds the terms of a recall's text query, so that a 16 KiB query
// costs what a short one does: the longest words are kept, being the rarest as a rule.
const maxRecallTerms = 32

// EnglishTerm is the term a word of an entry or a recall query stands for: its stem
// under Snowball's english stemmer, false for a stop word. Both are those of Postgres's
// english configuration (its english_stem dictionary: the same Snowball algorithm and
// the same stop word list), so documents migrated in SQL and documents built here
// agree; TestEnglishTermsMatchPostgres checks it against the database.
func EnglishTerm(w string) (string, bool) {
	if english.IsStopWord(w) {
		return "", false
	}
	return english.Stem(w, false), true
}

// RecallTerm is one term of a recall's text query: a lexeme of entry documents without
// the scope's tag, or, for a lone character of an unsegmented script, the prefix of
// the lexemes it begins (a run's last character is indexed alone).
type RecallTerm struct {
	Lexeme string
	Prefix bool
}

// Query is the term as a tsquery operand, its lexeme carrying tag.
func (t RecallTerm) Query(tag string) string {
	q := quoteLexeme(tag + t.Lexeme)
	if t.Prefix {
		q += ":*"
	}
	return q
}

// RecallTerms returns the terms of recall's text half: the words of text, stemmed with
// stop words left out as in entry documents, and the bigrams of its unsegmented runs,
// each once, longest first (of equally long ones, the earlier first), at most
// maxRecallTerms.
func RecallTerms(text string) []RecallTerm {
	type term struct {
		RecallTerm
		length int
	}
	var terms []term
	seen := map[RecallTerm]bool{}
	add := func(t RecallTerm, length int) {
		if !seen[t] {
			seen[t] = true
			terms = append(terms, term{t, length})
		}
	}
	scanText(text, func(w string) {
		if stem, ok := EnglishTerm(w); ok {
			add(RecallTerm{Lexeme: stem}, utf8.RuneCountInString(w))
		}
	}, func(run []rune) {
		if len(run) == 1 {
			add(RecallTerm{Lexeme: string(run), Prefix: true}, 1)
			return
		}
		for i := 0; i+1 < len(run); i++ {
			add(RecallTerm{Lexeme: string(run[i : i+2])}, 2)
		}
	})
	slices.SortStableFunc(terms, func(a, b term) int { return b.length - a.length })
	out := make([]RecallTerm, 0, min(len(terms), maxRecallTerms))
	for _, t := range terms[:min(len(terms), maxRecallTerms)] {
		out = append(out, t.RecallTerm)
	}
	return out
}
