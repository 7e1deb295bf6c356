// Package embeddingtest is the contract test suite of the runtime's Embedder port: every
// adapter runs it, so each one behaves the same where the port promises something.
package embeddingtest

import (
	"context"
	"math"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/runtime/memory"
)

// texts mixes short, long, non-ASCII and whitespace-only inputs.
var texts = []string{
	"The staging cluster deploys from the release branch.",
	"Rotate the API keys before the audit next month.",
	"naïve café résumé — déjà vu",
	"a",
	"   ",
	"emoji 🚀 rockets",
	"Our incident postmortem found a missing database index.",
}

// Run checks what the port promises: one L2-normalized vector of Model().Dimensions per
// text, in order; the same text gives the same vector in any batch and any call;
// nothing is sent for an empty batch; concurrent calls are safe (run under -race).
func Run(t *testing.T, e memory.Embedder) {
	t.Helper()
	ctx := context.Background()
	model := e.Model()
	require.NotEmpty(t, model.ID)
	require.Positive(t, model.Dimensions)

	t.Run("Empty", func(t *testing.T) {
		got, err := e.Embed(ctx, nil)
		require.NoError(t, err)
		require.Empty(t, got)
	})

	batch, err := e.Embed(ctx, texts)
	require.NoError(t, err)
	require.Len(t, batch, len(texts))

	t.Run("UnitVectors", func(t *testing.T) {
		for i, v := range batch {
			require.Lenf(t, v, model.Dimensions, "text %d", i)
			var sq float64
			for _, x := range v {
				require.False(t, math.IsNaN(float64(x)) || math.IsInf(float64(x), 0), "text %d has a non-finite value", i)
				sq += float64(x) * float64(x)
			}
			require.InDeltaf(t, 1, math.Sqrt(sq), 1e-5, "text %d is not L2-normalized", i)
		}
	})

	t.Run("OrderAndDeterminism", func(t *testing.T) {
		reversed := make([]string, len(texts))
		for i, s := range texts {
			reversed[len(texts)-1-i] = s
		}
		again, err := e.Embed(ctx, reversed)
		require.NoError(t, err)
		require.Len(t, again, len(texts))
		for i := range texts {
			requireClose(t, batch[i], again[len(texts)-1-i], texts[i])
		}
		single, err := e.Embed(ctx, texts[:1])
		require.NoError(t, err)
		requireClose(t, batch[0], single[0], texts[0])
	})

	t.Run("DistinctTexts", func(t *testing.T) {
		require.Less(t, cosine(batch[0], batch[1]), 0.999, "different texts gave the same vector")
	})

	t.Run("Concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		results := make([][][]float32, 4)
		errs := make([]error, len(results))
		for w := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[w], errs[w] = e.Embed(ctx, texts)
			}()
		}
		wg.Wait()
		for w := range results {
			require.NoError(t, errs[w])
			require.Len(t, results[w], len(texts))
			for i := range texts {
				requireClose(t, batch[i], results[w][i], texts[i])
			}
		}
	})
}

// requireClose asserts two vectors of the same text agree (batching may change the
// order of float32 sums, never the result beyond rounding).
func requireClose(t *testing.T, want, got []float32, text string) {
	t.Helper()
	require.Len(t, got, len(want))
	require.GreaterOrEqualf(t, cosine(want, got), 0.999999, "text %q embeds differently", text)
}

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return dot / math.Sqrt(na*nb)
}
