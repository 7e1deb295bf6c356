package local

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/agent-context/agent-context/runtime/memory"
)

// batchTokens bounds the tokens one forward pass computes at once, and with it the
// scratch memory of a call (about 10 MiB); longer calls run in several passes.
const batchTokens = 512

// Embedder runs Universal Sentence Encoder Lite in-process. It is safe for concurrent
// use: the weights are read-only and every call works in its own scratch buffers, on
// its caller's goroutine (run calls in parallel to use more cores).
type Embedder struct {
	tok      *tokenizer
	enc      *encoder
	scratch  sync.Pool
	lattices sync.Pool
}

var _ memory.Embedder = (*Embedder)(nil)

// New loads the model from modelDir/Subdir, where `make setup` (deploy/local/fetch-model.sh)
// puts it. Missing files fail with one line naming `make setup` and
// AGENT_CONTEXT_MODEL_DIR (errors.Is(err, ErrModelMissing)); the model is never
// fetched at run time.
func New(modelDir string) (*Embedder, error) {
	dir := filepath.Join(modelDir, Subdir)
	tok, weights, err := readModel(dir)
	if errors.Is(err, ErrModelMissing) {
		return nil, fmt.Errorf("local embedder: %w; run `make setup` to fetch the model, or set AGENT_CONTEXT_MODEL_DIR to the directory holding %s/", err, Subdir)
	}
	if err != nil {
		return nil, fmt.Errorf("local embedder: %w", err)
	}
	enc, err := newEncoder(weights)
	if err != nil {
		return nil, fmt.Errorf("local embedder: %w", err)
	}
	return &Embedder{
		tok:      tok,
		enc:      enc,
		scratch:  sync.Pool{New: func() any { return new(scratch) }},
		lattices: sync.Pool{New: func() any { return new(lattice) }},
	}, nil
}

// Model returns ModelID and Dimensions.
func (e *Embedder) Model() memory.EmbeddingModel {
	return memory.EmbeddingModel{ID: ModelID, Dimensions: Dimensions}
}

// Embed tokenizes every text (English; after NFKC, clipped at 128 pieces) and runs the
// graph on batches of them. It fails only when ctx ends, with EMBEDDING_UNAVAILABLE
// (and ctx's error in the chain).
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	lat := e.lattices.Get().(*lattice)
	defer e.lattices.Put(lat)
	s := e.scratch.Get().(*scratch)
	defer e.scratch.Put(s)
	seqs := make([][]int32, 0, len(texts))
	first, tokens := 0, 0
	for i, text := range texts {
		seq := e.tok.encode(text, lat)
		if tokens+len(seq) > batchTokens {
			if err := ctx.Err(); err != nil {
				return nil, memory.EmbeddingUnavailable(err)
			}
			e.enc.forward(seqs, out[first:i], s)
			seqs, first, tokens = seqs[:0], i, 0
		}
		seqs = append(seqs, seq)
		tokens += len(seq)
	}
	if err := ctx.Err(); err != nil {
		return nil, memory.EmbeddingUnavailable(err)
	}
	if len(seqs) > 0 {
		e.enc.forward(seqs, out[first:], s)
	}
	return out, nil
}
