package local_test

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/embedding/embeddingtest"
	"github.com/agent-context/agent-context/adapters/embedding/local"
	"github.com/agent-context/agent-context/adapters/embedding/local/localtest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/memory"
)

// MustEmbedder is the model every test shares.
func MustEmbedder(tb testing.TB) *local.Embedder { return localtest.MustEmbedder(tb) }

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

func TestContract(t *testing.T) {
	t.Parallel()
	embeddingtest.Run(t, MustEmbedder(t))
}

// TestMissingModel: without the files, construction fails with one line that says
// how to get them.
func TestMissingModel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := local.New(dir)
	require.ErrorIs(t, err, local.ErrModelMissing)
	msg := err.Error()
	require.NotContains(t, msg, "\n")
	require.Contains(t, msg, "make setup")
	require.Contains(t, msg, "AGENT_CONTEXT_MODEL_DIR")
	require.Contains(t, msg, "does not exist")

	require.NoError(t, os.Mkdir(filepath.Join(dir, local.Subdir), 0o755))
	_, err = local.New(dir)
	require.ErrorIs(t, err, local.ErrModelMissing)
	require.Contains(t, err.Error(), "has no model.json")
}

// TestTamperedModel: a file that is not the pinned one (a truncated download, another
// model) is refused rather than yielding vectors under the pinned model's id.
func TestTamperedModel(t *testing.T) {
	t.Parallel()
	src := filepath.Join(localtest.ModelDir(t), local.Subdir)
	MustEmbedder(t)
	root := t.TempDir()
	dst := filepath.Join(root, local.Subdir)
	require.NoError(t, os.Mkdir(dst, 0o755))
	entries, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, ent := range entries {
		require.NoError(t, os.Symlink(filepath.Join(src, ent.Name()), filepath.Join(dst, ent.Name())))
	}
	shard, err := os.ReadFile(filepath.Join(src, "group1-shard7of7"))
	require.NoError(t, err)
	require.NoError(t, os.Remove(filepath.Join(dst, "group1-shard7of7")))
	require.NoError(t, os.WriteFile(filepath.Join(dst, "group1-shard7of7"), shard[:len(shard)-4], 0o644))

	_, err = local.New(root)
	require.Error(t, err)
	require.NotErrorIs(t, err, local.ErrModelMissing)
	require.Contains(t, err.Error(), "group1-shard7of7 is not the pinned file")
}

// TestClipsAt128Tokens: the graph reads the first 128 pieces only, so what follows them
// changes nothing, while a change inside them does.
func TestClipsAt128Tokens(t *testing.T) {
	t.Parallel()
	e := MustEmbedder(t)
	long := ""
	for i := 0; i < 200; i++ {
		long += "memory "
	}
	got, err := e.Embed(context.Background(), []string{long, long + "with a different ending", "changed " + long})
	require.NoError(t, err)
	require.Equal(t, got[0], got[1])
	require.NotEqual(t, got[0], got[2])
}

// TestCanceled: a call whose context has ended returns EMBEDDING_UNAVAILABLE with the
// context's error in the chain, and no vectors.
func TestCanceled(t *testing.T) {
	t.Parallel()
	e := MustEmbedder(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, err := e.Embed(ctx, []string{"hello"})
	require.Nil(t, got)
	require.ErrorIs(t, err, memory.ErrEmbeddingUnavailable)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, contract.CodeEmbeddingUnavailable, runtime.ErrorCode(err))
}

// TestSemantic: the model ranks a paraphrase above an unrelated text — the reason it
// is the default over the lexical hash embedder.
func TestSemantic(t *testing.T) {
	t.Parallel()
	e := MustEmbedder(t)
	v, err := e.Embed(context.Background(), []string{
		"How do we ship the staging environment?",
		"The staging cluster deploys from the release branch.",
		"She ordered a large coffee with oat milk.",
	})
	require.NoError(t, err)
	require.Greater(t, dot(v[0], v[1]), dot(v[0], v[2])+0.1)
}

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}
