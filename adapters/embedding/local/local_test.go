package local_test

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/embedding/local"
)

// modelDir is where the tests find the model: AGENT_CONTEXT_MODEL_DIR (the Makefile
// exports it), else the repository's .agent-context/models, where `make setup` puts it.
func modelDir(tb testing.TB) string {
	if dir := os.Getenv("AGENT_CONTEXT_MODEL_DIR"); dir != "" {
		return dir
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", ".agent-context", "models"))
	require.NoError(tb, err)
	return dir
}

var (
	loadOnce sync.Once
	loaded   *local.Embedder
	loadErr  error
)

// MustEmbedder loads the model once per test binary. A missing model fails the test:
// the golden comparison is the adapter's proof of correctness and must not be skipped.
func MustEmbedder(tb testing.TB) *local.Embedder {
	tb.Helper()
	loadOnce.Do(func() { loaded, loadErr = local.New(modelDir(tb)) })
	require.NoError(tb, loadErr, "the local embedder's model is missing: run `make setup` (or deploy/local/fetch-model.sh DIR and set AGENT_CONTEXT_MODEL_DIR=DIR)")
	return loaded
}

type golden struct {
	Dimensions int `json:"dimensions"`
	Vectors    []struct {
		Text      string    `json:"text"`
		Embedding []float64 `json:"embedding"`
	} `json:"vectors"`
}

func readGolden(tb testing.TB) golden {
	b, err := os.ReadFile(filepath.Join("testdata", "use-lite-golden.json"))
	require.NoError(tb, err)
	var g golden
	require.NoError(tb, json.Unmarshal(b, &g))
	require.NotEmpty(tb, g.Vectors)
	return g
}

func cosine(a []float32, b []float64) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * b[i]
		na += float64(a[i]) * float64(a[i])
		nb += b[i] * b[i]
	}
	return dot / math.Sqrt(na*nb)
}

// TestGolden compares with the vectors the package's own TF.js runtime computes, the
// texts embedded in one call (one batch) and each on its own.
func TestGolden(t *testing.T) {
	t.Parallel()
	e := MustEmbedder(t)
	g := readGolden(t)
	require.Equal(t, local.Dimensions, g.Dimensions)
	texts := make([]string, len(g.Vectors))
	for i, v := range g.Vectors {
		texts[i] = v.Text
	}
	batch, err := e.Embed(context.Background(), texts)
	require.NoError(t, err)
	require.Len(t, batch, len(texts))
	for i, v := range g.Vectors {
		single, err := e.Embed(context.Background(), []string{v.Text})
		require.NoError(t, err)
		for _, got := range [][]float32{batch[i], single[0]} {
			require.Len(t, got, local.Dimensions)
			c := cosine(got, v.Embedding)
			require.GreaterOrEqualf(t, c, 0.99999, "text %q: cosine %.7f", v.Text, c)
		}
	}
}
