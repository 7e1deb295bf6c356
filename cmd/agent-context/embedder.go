package main

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/agent-context/agent-context/adapters/embedding"
	"github.com/agent-context/agent-context/adapters/embedding/hash"
	"github.com/agent-context/agent-context/adapters/embedding/local"
	"github.com/agent-context/agent-context/adapters/embedding/openai"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/memory"
)

// newEmbedder builds the embedder cfg.Embedder names (set cfg.Embedder to build another
// one, as a projection rebuild for a named embedder does). The local embedder loads and
// checks its model here, so a missing model stops the start with one line naming
// `make setup` and AGENT_CONTEXT_MODEL_DIR, never a silent fallback; the openai one
// does not call its endpoint until the first Embed.
func newEmbedder(cfg Config) (memory.Embedder, error) {
	switch cfg.Embedder {
	case EmbedderHash:
		return hash.New(), nil
	case EmbedderOpenAI:
		return openai.New(openai.Config{
			URL:        cfg.EmbeddingURL,
			Model:      cfg.EmbeddingModel,
			Dimensions: cfg.EmbeddingDimensions,
			APIKey:     cfg.EmbeddingAPIKey,
			Timeout:    cfg.EmbeddingTimeout,
		})
	case EmbedderLocal, "":
		return local.New(cfg.ModelDir)
	default:
		return nil, fmt.Errorf("unknown embedder %q (want local, hash or openai)", cfg.Embedder)
	}
}

// embedderSet implements memory.Embedders over the configuration: the configured
// embedder is built at start, any other one (a rebuild naming it, a scope still on an
// older model) when first asked for, once per process. Every one is timed by metrics.
// The projections it starts and rebuilds embed entries in their context: their
// model is the embedder's with memory.ContextInput; ForModel still answers for the
// embedder's own model, that of projections made before, which embed contents alone.
type embedderSet struct {
	cfg        Config
	metrics    *embedding.Metrics
	configured memory.Embedder

	mu    sync.Mutex
	built map[string]builtEmbedder
}

type builtEmbedder struct {
	e   memory.Embedder
	err error
}

var _ memory.Embedders = (*embedderSet)(nil)

// newEmbedders builds the configured embedder; its failure (the local model missing)
// fails the start.
func newEmbedders(cfg Config, metrics *embedding.Metrics) (*embedderSet, error) {
	s := &embedderSet{cfg: cfg, metrics: metrics, built: map[string]builtEmbedder{}}
	name := cfg.Embedder
	if name == "" {
		name = EmbedderLocal
	}
	e, err := s.build(name)
	if err != nil {
		return nil, err
	}
	s.configured = inContext{e}
	return s, nil
}

// inContext is an embedder whose model is its own with memory.ContextInput: the
// projection gives it the texts of entries in their context (memory.EmbedInput.Text).
type inContext struct{ memory.Embedder }

// Model implements memory.Embedder.
func (e inContext) Model() memory.EmbeddingModel {
	m := e.Embedder.Model()
	m.ID += memory.ContextInput
	return m
}

// build returns the embedder of name, building it on first use; a failure is kept
// too, so a model that is missing is not looked for on every call.
func (s *embedderSet) build(name string) (memory.Embedder, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.built[name]; ok {
		return b.e, b.err
	}
	cfg := s.cfg
	cfg.Embedder = name
	var b builtEmbedder
	if name == EmbedderOpenAI && (cfg.EmbeddingURL == "" || cfg.EmbeddingModel == "" || cfg.EmbeddingDimensions == 0) {
		b.err = errors.New("the openai embedder is not configured: set AGENT_CONTEXT_EMBEDDING_URL, _MODEL and _DIMENSIONS")
	} else if b.e, b.err = newEmbedder(cfg); b.err == nil {
		b.e = s.metrics.Instrument(b.e)
	}
	s.built[name] = b
	return b.e, b.err
}

// Configured implements memory.Embedders.
func (s *embedderSet) Configured() memory.Embedder { return s.configured }

// Named implements memory.Embedders.
func (s *embedderSet) Named(name string) (memory.Embedder, error) {
	e, err := s.build(name)
	if err != nil {
		return nil, runtime.Invalid("embedder", "the %s embedder cannot run on this service: %v", name, err)
	}
	return inContext{e}, nil
}

// ForModel implements memory.Embedders. The model ID tells which embedder made it,
// and whether in context (memory.ContextInput); the local model is loaded only for
// its own ID.
func (s *embedderSet) ForModel(id string) (memory.Embedder, bool) {
	if s.configured.Model().ID == id {
		return s.configured, true
	}
	own, context := strings.CutSuffix(id, memory.ContextInput)
	var name string
	switch {
	case own == hash.ModelID:
		name = EmbedderHash
	case own == local.ModelID:
		name = EmbedderLocal
	case strings.HasPrefix(own, "openai:"):
		name = EmbedderOpenAI
	default:
		return nil, false
	}
	e, err := s.build(name)
	if err != nil {
		return nil, false
	}
	if context {
		e = inContext{e}
	}
	if e.Model().ID != id {
		return nil, false
	}
	return e, true
}
