package hash_test

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/embedding/embeddingtest"
	"github.com/agent-context/agent-context/adapters/embedding/hash"
)

func TestContract(t *testing.T) {
	t.Parallel()
	embeddingtest.Run(t, hash.New())
}

func embed(t *testing.T, texts ...string) [][]float32 {
	t.Helper()
	v, err := hash.New().Embed(context.Background(), texts)
	require.NoError(t, err)
	return v
}

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// TestLexical: shared words and spellings score high, unrelated words low; case,
// width and punctuation do not matter.
func TestLexical(t *testing.T) {
	t.Parallel()
	v := embed(t,
		"The staging cluster deploys from the release branch.",
		"staging cluster deployed from release branch",
		"She ordered a large coffee with oat milk.",
		"THE STAGING CLUSTER DEPLOYS FROM THE RELEASE BRANCH!",
		"ｔｈｅ ｓｔａｇｉｎｇ cluster deploys from the release branch",
	)
	require.Greater(t, dot(v[0], v[1]), 0.6)
	require.Less(t, dot(v[0], v[2]), 0.3)
	require.InDelta(t, 1, dot(v[0], v[3]), 1e-6)
	require.InDelta(t, 1, dot(v[0], v[4]), 1e-6)
}

// TestStable pins a few values: the features are part of ModelID, so any change to
// them must come with a new ID (and this test tells when one is due).
func TestStable(t *testing.T) {
	t.Parallel()
	v := embed(t, "Hello world.")[0]
	// Two words, one pair and ten trigrams, no two in the same bucket.
	want := map[int]float32{
		13: -0.2682209, 28: 0.18775462, 39: 0.18775462, 74: -0.18775462, 89: 0.18775462,
		91: 0.18775462, 146: 0.18775462, 147: -0.18775462, 244: -0.5364418, 336: 0.18775462,
		352: 0.5364418, 374: 0.18775462, 376: 0.18775462,
	}
	for i, x := range v {
		require.InDeltaf(t, want[i], x, 1e-6, "bucket %d", i)
	}
	require.Equal(t, "hash-ngram-384@1", hash.New().Model().ID)
}

// TestNoWords: texts without letters or digits still get distinct unit vectors; only
// the empty and whitespace-only texts share the fixed one.
func TestNoWords(t *testing.T) {
	t.Parallel()
	v := embed(t, "🚀", "✨", "", " \t\n")
	require.Less(t, dot(v[0], v[1]), 0.9)
	require.InDelta(t, 1, dot(v[2], v[3]), 1e-6)
	require.InDelta(t, 1, math.Sqrt(dot(v[2], v[2])), 1e-6)
}
