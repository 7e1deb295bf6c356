// Package hash is the lexical embedder: hashed word, word-pair and character-trigram
// features, signed into 384 buckets and L2-normalized. It needs no model and no
// network, and it is deterministic across machines and releases (the feature set is
// part of ModelID), so tests, benchmarks of the database path and machines without the
// model use it. It finds shared words and spellings, not meaning: "ship" and "deploy"
// are unrelated to it.
package hash

import (
	"context"
	"math"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"

	"github.com/agent-context/agent-context/runtime/memory"
)

const (
	// ModelID names this feature set; change it whenever the features change, so old
	// vectors are never compared with new ones.
	ModelID = "hash-ngram-384@1"
	// Dimensions is the number of hash buckets.
	Dimensions = 384
)

// Feature weights: whole words count most, word pairs keep a little order, character
// trigrams match inflections and typos ("deploys" ~ "deployed").
const (
	wordWeight    = 1.0
	pairWeight    = 0.5
	trigramWeight = 0.35
)

// Embedder is the hash embedder. The zero value is ready; it is safe for concurrent use.
type Embedder struct{}

var _ memory.Embedder = Embedder{}

// New returns the hash embedder.
func New() Embedder { return Embedder{} }

// Model returns ModelID and Dimensions.
func (Embedder) Model() memory.EmbeddingModel {
	return memory.EmbeddingModel{ID: ModelID, Dimensions: Dimensions}
}

// Embed never fails: it computes every vector locally.
func (Embedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = embed(t)
	}
	return out, nil
}

// embed hashes the features of one text. Text is NFKC-normalized and lower-cased;
// words are runs of letters, digits and combining marks. A text without any word uses
// its other non-space characters as words; one without any character at all (or whose
// features cancel out) gets the same fixed unit vector as every such text.
func embed(text string) []float32 {
	text = strings.ToLower(norm.NFKC.String(strings.ToValidUTF8(text, "\uFFFD")))
	words := strings.FieldsFunc(text, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && !unicode.Is(unicode.M, r)
	})
	if len(words) == 0 {
		words = strings.FieldsFunc(text, func(r rune) bool { return unicode.IsSpace(r) })
	}
	acc := make([]float64, Dimensions)
	for i, w := range words {
		add(acc, wordWeight, "w", w, "")
		if i > 0 {
			add(acc, pairWeight, "p", words[i-1], w)
		}
		padded := []rune("<" + w + ">")
		for j := 0; j+3 <= len(padded); j++ {
			add(acc, trigramWeight, "t", string(padded[j:j+3]), "")
		}
	}
	var sq float64
	for _, v := range acc {
		sq += v * v
	}
	out := make([]float32, Dimensions)
	if sq == 0 {
		for i := range out {
			out[i] = float32(1 / math.Sqrt(Dimensions))
		}
		return out
	}
	inv := 1 / math.Sqrt(sq)
	for i, v := range acc {
		out[i] = float32(v * inv)
	}
	return out
}

// add hashes the feature kind:a[ b] (FNV-1a, 64 bits) into a bucket, with the hash's
// top bit as the sign so that collisions cancel out on average instead of piling up.
func add(acc []float64, weight float64, kind, a, b string) {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	mix := func(s string) {
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= prime
		}
	}
	mix(kind)
	mix(":")
	mix(a)
	if b != "" {
		mix(" ")
		mix(b)
	}
	if h>>63 == 1 {
		weight = -weight
	}
	acc[h%Dimensions] += weight
}
