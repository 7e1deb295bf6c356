package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/embedding/hash"
	"github.com/agent-context/agent-context/adapters/embedding/local"
	"github.com/agent-context/agent-context/adapters/embedding/local/localtest"
	"github.com/agent-context/agent-context/runtime/memory"
)

func TestEmbeddingConfigDefaults(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	cfg, err := LoadConfig(func(k string) string {
		return map[string]string{"AGENT_CONTEXT_DATA_DIR": dataDir}[k]
	})
	require.NoError(t, err)
	require.Equal(t, EmbedderLocal, cfg.Embedder)
	require.Equal(t, filepath.Join(dataDir, "models"), cfg.ModelDir)
	require.Equal(t, 30*time.Second, cfg.EmbeddingTimeout)

	cfg, err = LoadConfig(func(k string) string {
		return map[string]string{
			"AGENT_CONTEXT_EMBEDDER":             "openai",
			"AGENT_CONTEXT_MODEL_DIR":            "models-here",
			"AGENT_CONTEXT_EMBEDDING_URL":        "http://127.0.0.1:11434",
			"AGENT_CONTEXT_EMBEDDING_MODEL":      "nomic-embed-text",
			"AGENT_CONTEXT_EMBEDDING_DIMENSIONS": "768",
			"AGENT_CONTEXT_EMBEDDING_API_KEY":    "k",
			"AGENT_CONTEXT_EMBEDDING_TIMEOUT":    "5s",
		}[k]
	})
	require.NoError(t, err)
	require.True(t, filepath.IsAbs(cfg.ModelDir))
	require.Equal(t, "models-here", filepath.Base(cfg.ModelDir))
	require.Equal(t, "nomic-embed-text", cfg.EmbeddingModel)
	require.Equal(t, 768, cfg.EmbeddingDimensions)
	require.Equal(t, 5*time.Second, cfg.EmbeddingTimeout)
}

// TestEmbeddingConfigErrors: every bad value fails the start naming its variable, and
// the openai embedder needs its endpoint, model and dimensions.
func TestEmbeddingConfigErrors(t *testing.T) {
	t.Parallel()
	for _, bad := range []struct {
		env  map[string]string
		name string
	}{
		{map[string]string{"AGENT_CONTEXT_EMBEDDER": "bert"}, "AGENT_CONTEXT_EMBEDDER"},
		{map[string]string{"AGENT_CONTEXT_EMBEDDING_URL": "localhost:11434"}, "AGENT_CONTEXT_EMBEDDING_URL"},
		{map[string]string{"AGENT_CONTEXT_EMBEDDING_DIMENSIONS": "0"}, "AGENT_CONTEXT_EMBEDDING_DIMENSIONS"},
		{map[string]string{"AGENT_CONTEXT_EMBEDDING_DIMENSIONS": "many"}, "AGENT_CONTEXT_EMBEDDING_DIMENSIONS"},
		{map[string]string{"AGENT_CONTEXT_EMBEDDING_DIMENSIONS": "16001"}, "AGENT_CONTEXT_EMBEDDING_DIMENSIONS"},
		{map[string]string{"AGENT_CONTEXT_EMBEDDING_TIMEOUT": "soon"}, "AGENT_CONTEXT_EMBEDDING_TIMEOUT"},
		{map[string]string{"AGENT_CONTEXT_EMBEDDING_API_KEY": "key\n"}, "AGENT_CONTEXT_EMBEDDING_API_KEY"},
		{map[string]string{"AGENT_CONTEXT_EMBEDDER": "openai", "AGENT_CONTEXT_EMBEDDING_MODEL": "m",
			"AGENT_CONTEXT_EMBEDDING_DIMENSIONS": "3"}, "AGENT_CONTEXT_EMBEDDING_URL"},
		{map[string]string{"AGENT_CONTEXT_EMBEDDER": "openai", "AGENT_CONTEXT_EMBEDDING_URL": "http://h",
			"AGENT_CONTEXT_EMBEDDING_DIMENSIONS": "3"}, "AGENT_CONTEXT_EMBEDDING_MODEL"},
		{map[string]string{"AGENT_CONTEXT_EMBEDDER": "openai", "AGENT_CONTEXT_EMBEDDING_URL": "http://h",
			"AGENT_CONTEXT_EMBEDDING_MODEL": "m"}, "AGENT_CONTEXT_EMBEDDING_DIMENSIONS"},
	} {
		_, err := LoadConfig(func(k string) string { return bad.env[k] })
		require.ErrorContains(t, err, bad.name, "%v", bad.env)
	}
}

func embedderFor(t *testing.T, env map[string]string) error {
	t.Helper()
	cfg, err := LoadConfig(func(k string) string { return env[k] })
	require.NoError(t, err)
	_, err = newEmbedder(cfg)
	return err
}

func TestNewEmbedder(t *testing.T) {
	t.Parallel()
	t.Run("hash", func(t *testing.T) {
		t.Parallel()
		cfg, err := LoadConfig(func(k string) string { return map[string]string{"AGENT_CONTEXT_EMBEDDER": "hash"}[k] })
		require.NoError(t, err)
		e, err := newEmbedder(cfg)
		require.NoError(t, err)
		require.Equal(t, hash.ModelID, e.Model().ID)
		require.Equal(t, hash.Dimensions, e.Model().Dimensions)
	})
	t.Run("local", func(t *testing.T) {
		t.Parallel()
		cfg, err := LoadConfig(func(k string) string {
			return map[string]string{"AGENT_CONTEXT_MODEL_DIR": localtest.ModelDir(t)}[k]
		})
		require.NoError(t, err)
		e, err := newEmbedder(cfg)
		require.NoError(t, err, "run `make setup` to install the model")
		require.Equal(t, local.ModelID, e.Model().ID)
		require.Equal(t, 512, e.Model().Dimensions)
	})
	t.Run("local without the model", func(t *testing.T) {
		t.Parallel()
		err := embedderFor(t, map[string]string{"AGENT_CONTEXT_DATA_DIR": t.TempDir()})
		require.ErrorContains(t, err, "make setup")
		require.ErrorContains(t, err, "AGENT_CONTEXT_MODEL_DIR")
	})
	t.Run("openai", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			require.Equal(t, "/v1/embeddings", r.URL.Path)
			require.Equal(t, "Bearer k", r.Header.Get("Authorization"))
			_ = json.NewEncoder(w).Encode(map[string]any{"data": []any{map[string]any{"index": 0, "embedding": []float64{3, 0, 4}}}})
		}))
		t.Cleanup(srv.Close)
		cfg, err := LoadConfig(func(k string) string {
			return map[string]string{"AGENT_CONTEXT_EMBEDDER": "openai", "AGENT_CONTEXT_EMBEDDING_URL": srv.URL,
				"AGENT_CONTEXT_EMBEDDING_MODEL": "m", "AGENT_CONTEXT_EMBEDDING_DIMENSIONS": "3",
				"AGENT_CONTEXT_EMBEDDING_API_KEY": "k"}[k]
		})
		require.NoError(t, err)
		e, err := newEmbedder(cfg)
		require.NoError(t, err)
		require.Equal(t, "openai:m/3", e.Model().ID)
		v, err := e.Embed(context.Background(), []string{"x"})
		require.NoError(t, err)
		require.InDeltaSlice(t, []float32{0.6, 0, 0.8}, v[0], 1e-6)
	})
}

// TestEmbeddersEmbedInContext: the projections the service starts and rebuilds are of
// the embedder's model in context; the embedder's own model, of projections made
// before, is still served (for their recalls until they are rebuilt).
func TestEmbeddersEmbedInContext(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig(func(k string) string { return map[string]string{"AGENT_CONTEXT_EMBEDDER": "hash"}[k] })
	require.NoError(t, err)
	set, err := newEmbedders(cfg, nil)
	require.NoError(t, err)
	inContext := memory.EmbeddingModel{ID: hash.ModelID + memory.ContextInput, Dimensions: hash.Dimensions}
	require.Equal(t, inContext, set.Configured().Model())
	named, err := set.Named(EmbedderHash)
	require.NoError(t, err)
	require.Equal(t, inContext, named.Model())
	for _, id := range []string{hash.ModelID + memory.ContextInput, hash.ModelID} {
		e, ok := set.ForModel(id)
		require.True(t, ok, id)
		require.Equal(t, id, e.Model().ID)
	}
	_, ok := set.ForModel("unknown" + memory.ContextInput)
	require.False(t, ok)
}
