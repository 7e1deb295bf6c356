package local

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// separator is SentencePiece's word-boundary mark: it starts the text and replaces
// every space.
const separator = "\u2581"

// reservedPieces are the vocabulary's first entries (unknown, <s>, </s> and three
// extra ids): the tokenizer never produces them from text, except id 0 for a
// character no piece covers.
const reservedPieces = 6

// unknownID is the id of a character no piece covers.
const unknownID = 0

// maxTokens is where the graph clips its input (ClipToMaxLength: positions < 128).
const maxTokens = 128

// piece is a vocabulary entry the Viterbi search may use.
type piece struct {
	id    int32
	score float64
}

// tokenizer is the SentencePiece-unigram tokenizer of the reference implementation
// (@energetic-ai/embeddings 0.2.0, lib/tokenizer.ts), reproduced quirk for quirk so
// the same text gives the same ids. It is read-only after construction.
type tokenizer struct {
	pieces map[string]piece
	// steps[id] is how far the reference's backtrack moves for id: the JavaScript
	// length (UTF-16 code units) of the piece's text, which it uses even though the
	// forward pass counts code points.
	steps    []int32
	maxRunes int
}

// newTokenizer reads vocab.json: an array of [piece, score] pairs, score a number or
// null (null counts as 0, as JavaScript's null + number does).
func newTokenizer(vocabJSON []byte) (*tokenizer, error) {
	var raw [][]any
	if err := json.Unmarshal(vocabJSON, &raw); err != nil {
		return nil, fmt.Errorf("vocab.json: %w", err)
	}
	if len(raw) <= reservedPieces {
		return nil, fmt.Errorf("vocab.json: %d pieces, want more than %d", len(raw), reservedPieces)
	}
	t := &tokenizer{pieces: make(map[string]piece, len(raw)), steps: make([]int32, len(raw))}
	for i, entry := range raw {
		if len(entry) != 2 {
			return nil, fmt.Errorf("vocab.json: entry %d is not a [piece, score] pair", i)
		}
		text, ok := entry[0].(string)
		if !ok {
			return nil, fmt.Errorf("vocab.json: entry %d has a piece that is not a string", i)
		}
		score, ok := entry[1].(float64)
		if !ok && entry[1] != nil {
			return nil, fmt.Errorf("vocab.json: entry %d has a score that is neither a number nor null", i)
		}
		t.steps[i] = int32(utf16Len(text))
		if i < reservedPieces || text == "" {
			continue
		}
		p := piece{id: int32(i), score: score}
		// A piece listed twice keeps its last entry, as the reference's trie does.
		t.pieces[text] = p
		t.maxRunes = max(t.maxRunes, utf8.RuneCountInString(text))
	}
	return t, nil
}

// utf16Len is the length JavaScript reports for s.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n++
		if r > 0xFFFF {
			n++
		}
	}
	return n
}

// normalize is the reference's processInput: NFKC, then a leading separator and every
// ASCII space replaced by the separator (tabs and newlines stay as they are). Invalid
// UTF-8 becomes U+FFFD first, as a JavaScript string decoded from it would hold.
func normalize(text string) string {
	s := norm.NFKC.String(strings.ToValidUTF8(text, "\uFFFD"))
	if s == "" {
		return ""
	}
	return separator + strings.ReplaceAll(s, " ", separator)
}

// lattice is the scratch space of one encode call.
type lattice struct {
	offsets []int     // byte offset of each code point, plus the end
	ends    [][]edge  // ends[e]: the pieces ending at code point e, by ascending start
	best    []float64 // best[e]: best score of a segmentation of the first e code points
	words   []int32   // words[e]: id of the last piece of that segmentation
}

// edge is a piece spanning code points [start, end).
type edge struct {
	start int
	piece piece
}

// encode returns the ids of text, clipped to the first maxTokens.
func (t *tokenizer) encode(text string, lat *lattice) []int32 {
	s := normalize(text)
	lat.offsets = lat.offsets[:0]
	for i := range s {
		lat.offsets = append(lat.offsets, i)
	}
	n := len(lat.offsets)
	lat.offsets = append(lat.offsets, len(s))
	if n == 0 {
		return nil
	}
	lat.reset(n)
	for i := 0; i < n; i++ {
		found := false
		for l := 1; l <= t.maxRunes && i+l <= n; l++ {
			if p, ok := t.pieces[s[lat.offsets[i]:lat.offsets[i+l]]]; ok {
				lat.ends[i+l] = append(lat.ends[i+l], edge{start: i, piece: p})
				found = true
			}
		}
		if !found {
			// commonPrefixSearch's fallback: the single character as unknown, score 0.
			lat.ends[i+1] = append(lat.ends[i+1], edge{start: i, piece: piece{id: unknownID}})
		}
	}
	for e := 1; e <= n; e++ {
		for _, ed := range lat.ends[e] {
			score := ed.piece.score + lat.best[ed.start]
			// The reference treats a best score of exactly 0 as "none yet", and lets a
			// later candidate with an equal score win.
			if lat.best[e] == 0 || score >= lat.best[e] {
				lat.best[e] = score
				lat.words[e] = ed.piece.id
			}
		}
	}
	var ids []int32
	for e := n; e > 0; e -= int(t.steps[lat.words[e]]) {
		id := lat.words[e]
		if id == unknownID && len(ids) > 0 && ids[len(ids)-1] == unknownID {
			continue // a run of unknown characters is one unknown token
		}
		ids = append(ids, id)
	}
	for i, j := 0, len(ids)-1; i < j; i, j = i+1, j-1 {
		ids[i], ids[j] = ids[j], ids[i]
	}
	if len(ids) > maxTokens {
		ids = ids[:maxTokens]
	}
	return ids
}

// reset sizes the lattice for n code points and clears it.
func (l *lattice) reset(n int) {
	if cap(l.ends) < n+1 {
		l.ends = make([][]edge, n+1)
		l.best = make([]float64, n+1)
		l.words = make([]int32, n+1)
	}
	l.ends, l.best, l.words = l.ends[:n+1], l.best[:n+1], l.words[:n+1]
	for i := range l.ends {
		l.ends[i] = l.ends[i][:0]
		l.best[i] = 0
		l.words[i] = 0
	}
}
