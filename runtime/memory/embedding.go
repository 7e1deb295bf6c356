package memory

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"

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

// QueryBudget bounds what the query embedding of one recall may cost (docs/embeddings.md):
// a request waits for it at most Timeout, the embedder's retries included, and after
// CircuitFailures consecutive failures of an embedder its circuit opens for
// CircuitOpen, during which recalls do not call it at all (hybrid degrades to text at
// once, vector is 503). The background backlog is not bound by it: it keeps the
// embedder's own timeouts and retries, since nobody waits on it.
type QueryBudget struct {
	// Timeout is AGENT_CONTEXT_EMBEDDING_QUERY_TIMEOUT (default 2 s).
	Timeout time.Duration
	// CircuitFailures is AGENT_CONTEXT_EMBEDDING_CIRCUIT_FAILURES (default 5).
	CircuitFailures int
	// CircuitOpen is AGENT_CONTEXT_EMBEDDING_CIRCUIT_OPEN (default 30 s); then one
	// trial query is let through.
	CircuitOpen time.Duration
}

// Defaults of QueryBudget.
const (
	DefaultQueryEmbeddingTimeout = 2 * time.Second
	DefaultQueryCircuitFailures  = 5
	DefaultQueryCircuitOpen      = 30 * time.Second
)

func (b QueryBudget) withDefaults() QueryBudget {
	if b.Timeout <= 0 {
		b.Timeout = DefaultQueryEmbeddingTimeout
	}
	if b.CircuitFailures <= 0 {
		b.CircuitFailures = DefaultQueryCircuitFailures
	}
	if b.CircuitOpen <= 0 {
		b.CircuitOpen = DefaultQueryCircuitOpen
	}
	return b
}

// queryEmbedder embeds recall queries under a QueryBudget, with a circuit breaker per
// embedding model (one model is one embedder of the process).
type queryEmbedder struct {
	budget   QueryBudget
	mu       sync.Mutex
	breakers map[string]*gobreaker.CircuitBreaker[[]float32]
}

func newQueryEmbedder(b QueryBudget) *queryEmbedder {
	return &queryEmbedder{budget: b.withDefaults(), breakers: map[string]*gobreaker.CircuitBreaker[[]float32]{}}
}

func (q *queryEmbedder) breaker(model string) *gobreaker.CircuitBreaker[[]float32] {
	q.mu.Lock()
	defer q.mu.Unlock()
	cb, ok := q.breakers[model]
	if !ok {
		failures := uint32(q.budget.CircuitFailures)
		cb = gobreaker.NewCircuitBreaker[[]float32](gobreaker.Settings{
			Name:        model,
			MaxRequests: 1,
			Timeout:     q.budget.CircuitOpen,
			ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= failures },
			// Only the provider failing counts; a bad request of ours does not.
			IsSuccessful: func(err error) bool { return err == nil || !errors.Is(err, ErrEmbeddingUnavailable) },
			IsExcluded:   func(err error) bool { return errors.Is(err, errCallerGone) },
		})
		q.breakers[model] = cb
	}
	return cb
}

// errCallerGone marks a query embedding abandoned because the request ended: it says
// nothing about the provider, so the breaker does not count it.
var errCallerGone = errors.New("the request ended before its query was embedded")

// embed returns the vector of text, or EMBEDDING_UNAVAILABLE when the provider fails,
// the budget runs out, or the circuit is open.
func (q *queryEmbedder) embed(ctx context.Context, emb Embedder, model EmbeddingModel, text string) ([]float32, error) {
	cb := q.breaker(model.ID)
	v, err := cb.Execute(func() ([]float32, error) {
		bounded, cancel := context.WithTimeout(ctx, q.budget.Timeout)
		defer cancel()
		v, err := EmbedChecked(bounded, emb, model, []string{text})
		switch {
		case err == nil:
			return v[0], nil
		case ctx.Err() != nil:
			return nil, fmt.Errorf("%w: %w", errCallerGone, err)
		}
		return nil, err
	})
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return nil, EmbeddingUnavailable(fmt.Errorf("the circuit of %s is open: %w", model.ID, err))
	}
	return v, err
}
