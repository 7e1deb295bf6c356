package memory

import (
	"container/list"
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
	// CacheEntries is AGENT_CONTEXT_EMBEDDING_QUERY_CACHE (default 1,000; negative: no
	// cache): how many query vectors, the most recently used, are kept by model and
	// text, so that a query asked again is not embedded again.
	CacheEntries int
}

// Defaults of QueryBudget.
const (
	DefaultQueryEmbeddingTimeout = 2 * time.Second
	DefaultQueryCircuitFailures  = 5
	DefaultQueryCircuitOpen      = 30 * time.Second
	DefaultQueryCacheEntries     = 1000
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
	if b.CacheEntries == 0 {
		b.CacheEntries = DefaultQueryCacheEntries
	}
	return b
}

// queryEmbedder embeds recall queries under a QueryBudget, with a circuit breaker per
// embedding model (one model is one embedder of the process).
type queryEmbedder struct {
	budget   QueryBudget
	mu       sync.Mutex
	breakers map[string]*gobreaker.CircuitBreaker[[]float32]
	cache    *queryCache
}

func newQueryEmbedder(b QueryBudget) *queryEmbedder {
	b = b.withDefaults()
	return &queryEmbedder{budget: b, breakers: map[string]*gobreaker.CircuitBreaker[[]float32]{}, cache: newQueryCache(b.CacheEntries)}
}

// queryKey names a query vector: its model and its text.
type queryKey struct{ model, text string }

// queryCache keeps the vectors of the most recently used queries, up to its size
// (none when it is not positive). Its vectors are shared: nobody writes to them.
type queryCache struct {
	size  int
	mu    sync.Mutex
	order *list.List // of queryKey, the most recently used first
	byKey map[queryKey]queryCached
}

type queryCached struct {
	vec []float32
	at  *list.Element
}

func newQueryCache(size int) *queryCache {
	return &queryCache{size: size, order: list.New(), byKey: map[queryKey]queryCached{}}
}

func (c *queryCache) get(k queryKey) ([]float32, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[k]
	if ok {
		c.order.MoveToFront(e.at)
	}
	return e.vec, ok
}

func (c *queryCache) put(k queryKey, vec []float32) {
	if c.size <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[k]; ok {
		c.order.MoveToFront(e.at)
		return
	}
	c.byKey[k] = queryCached{vec: vec, at: c.order.PushFront(k)}
	if c.order.Len() > c.size {
		delete(c.byKey, c.order.Remove(c.order.Back()).(queryKey))
	}
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

// embed returns the vector of text, from the cache or else from the embedder, or
// EMBEDDING_UNAVAILABLE when the provider fails, the budget runs out, or the circuit
// is open.
func (q *queryEmbedder) embed(ctx context.Context, emb Embedder, model EmbeddingModel, text string) ([]float32, error) {
	key := queryKey{model.ID, text}
	if v, ok := q.cache.get(key); ok {
		return v, nil
	}
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
	if err == nil {
		q.cache.put(key, v)
	}
	return v, err
}
