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
