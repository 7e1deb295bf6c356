package memory

import (
	"context"
	"errors"
	"fmt"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// EmbeddingModel names what produced a vector. ID is stored with every vector, and
// vectors of different IDs are never compared (docs/embeddings.md): changing the embedder is
// a rebuild into a new projection generation. Dimensions is the length of every vector
// the model returns, known before the first call, so the projection can declare its
// vector(n) column up front.
type EmbeddingModel struct {
	ID         string
	Dimensions int
}

// Embedder turns texts into vectors for the vector projection and vector recall.
// Implementations are safe for concurrent use.
type Embedder interface {
	// Embed returns one vector per text, in the order of texts, each of
	// Model().Dimensions values and L2-normalized (length 1), so cosine similarity is a
	// dot product. An empty texts slice returns an empty result without calling the
	// provider. The call is all or nothing: when the provider cannot answer (down,
	// timed out, rate limited past the retries, or answering garbage) it fails with an
	// EMBEDDING_UNAVAILABLE error (see EmbeddingUnavailable) and returns no vectors.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	// Model identifies the vectors Embed returns. It never calls the provider.
	Model() EmbeddingModel
}

// ErrEmbeddingUnavailable is in the chain of every error EmbeddingUnavailable makes:
// errors.Is(err, ErrEmbeddingUnavailable) tells a provider failure (hybrid recall then
// degrades to text) from any other error.
var ErrEmbeddingUnavailable = errors.New("embedding provider unavailable")

// EmbeddingUnavailable returns the EMBEDDING_UNAVAILABLE error for a provider failure.
// The cause is logged, never sent to a client; errors.Is still finds it (and
// ErrEmbeddingUnavailable, and a context's error when the caller's deadline ran out).
func EmbeddingUnavailable(cause error) *runtime.Error {
	err := ErrEmbeddingUnavailable
	if cause != nil {
		err = fmt.Errorf("%w: %w", ErrEmbeddingUnavailable, cause)
	}
	return &runtime.Error{Code: contract.CodeEmbeddingUnavailable, Message: "the embedding provider is unavailable", Err: err}
}
