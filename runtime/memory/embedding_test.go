package memory_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/memory"
)

// TestEmbeddingUnavailable: the error maps to EMBEDDING_UNAVAILABLE, shows the client
// no cause, and keeps both the sentinel and the cause findable with errors.Is.
func TestEmbeddingUnavailable(t *testing.T) {
	t.Parallel()
	cause := errors.New("dial tcp 127.0.0.1:1: connection refused")
	err := error(memory.EmbeddingUnavailable(cause))
	require.Equal(t, contract.CodeEmbeddingUnavailable, runtime.ErrorCode(err))
	require.ErrorIs(t, err, memory.ErrEmbeddingUnavailable)
	require.ErrorIs(t, err, cause)
	var re *runtime.Error
	require.ErrorAs(t, err, &re)
	require.NotContains(t, re.Message, "refused")
	info := contract.Codes[re.Code]
	require.Equal(t, 503, info.Status)
	require.True(t, info.Retryable)

	wrapped := memory.EmbeddingUnavailable(context.DeadlineExceeded)
	require.ErrorIs(t, wrapped, context.DeadlineExceeded)
	require.ErrorIs(t, memory.EmbeddingUnavailable(nil), memory.ErrEmbeddingUnavailable)
	require.NotErrorIs(t, runtime.Errorf(contract.CodeServiceUnavailable, "db down"), memory.ErrEmbeddingUnavailable)
}

// An entry is embedded in its context only for a model that says so.
func TestEmbedInputText(t *testing.T) {
	t.Parallel()
	in := memory.EmbedInput{ID: "e", Content: "Bob: Paris, in May.", Previous: "Ann: Where did you go?"}
	inContext := memory.EmbeddingModel{ID: "m" + memory.ContextInput, Dimensions: 3}
	require.Equal(t, "Ann: Where did you go? Bob: Paris, in May.", in.Text(inContext))
	require.Equal(t, "Bob: Paris, in May.", in.Text(memory.EmbeddingModel{ID: "m", Dimensions: 3}))
	in.Previous = ""
	require.Equal(t, "Bob: Paris, in May.", in.Text(inContext))
}
