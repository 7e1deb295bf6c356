package main

import (
	"fmt"

	"github.com/agent-context/agent-context/adapters/embedding/hash"
	"github.com/agent-context/agent-context/adapters/embedding/local"
	"github.com/agent-context/agent-context/adapters/embedding/openai"
	"github.com/agent-context/agent-context/runtime"
)

// newEmbedder builds the embedder cfg.Embedder names (set cfg.Embedder to build another
// one, as a projection rebuild for a named embedder does). The local embedder loads and
// checks its model here, so a missing model stops the start with one line naming
// `make setup` and AGENT_CONTEXT_MODEL_DIR, never a silent fallback; the openai one
// does not call its endpoint until the first Embed.
func newEmbedder(cfg Config) (runtime.Embedder, error) {
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
