package embedding_test

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/embedding"
	"github.com/agent-context/agent-context/adapters/embedding/hash"
	"github.com/agent-context/agent-context/runtime/memory"
)

type failing struct{ memory.Embedder }

func (failing) Embed(context.Context, []string) ([][]float32, error) {
	return nil, memory.EmbeddingUnavailable(errors.New("down"))
}

// Every Embed call is timed by model and outcome; texts are counted; without a
// registry nothing is instrumented.
func TestMetrics(t *testing.T) {
	t.Parallel()
	require.Nil(t, embedding.NewMetrics(nil))
	var none *embedding.Metrics
	require.Equal(t, hash.New(), none.Instrument(hash.New()))

	reg := prometheus.NewPedanticRegistry()
	m := embedding.NewMetrics(reg)
	e := m.Instrument(hash.New())
	require.Equal(t, hash.New().Model(), e.Model())
	_, err := e.Embed(context.Background(), []string{"a", "b", "c"})
	require.NoError(t, err)
	_, err = m.Instrument(failing{hash.New()}).Embed(context.Background(), []string{"x"})
	require.Error(t, err)
	require.Equal(t, 2, testutil.CollectAndCount(reg, "agent_context_embedding_duration_seconds"))
	families, err := reg.Gather()
	require.NoError(t, err)
	counts := map[string]uint64{}
	texts := map[string]float64{}
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			outcome := ""
			for _, l := range metric.GetLabel() {
				if l.GetName() == "outcome" {
					outcome = l.GetValue()
				}
				if l.GetName() == "model" {
					require.Equal(t, hash.ModelID, l.GetValue())
				}
			}
			switch f.GetName() {
			case "agent_context_embedding_duration_seconds":
				counts[outcome] = metric.GetHistogram().GetSampleCount()
			case "agent_context_embedding_texts_total":
				texts[outcome] = metric.GetCounter().GetValue()
			}
		}
	}
	require.Equal(t, map[string]uint64{"ok": 1, "error": 1}, counts)
	require.Equal(t, map[string]float64{"ok": 3, "error": 1}, texts)
}
