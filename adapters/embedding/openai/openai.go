// Package openai is the embedder for any OpenAI-compatible embeddings endpoint
// (POST {url}/v1/embeddings: OpenAI, Ollama, vLLM, text-embeddings-inference). It
// batches the texts of a call, bounds every attempt with a timeout, retries 429, 5xx
// and timeouts with exponential backoff (honouring Retry-After), and checks every
// answer: a wrong count, a wrong dimension, a duplicate index or a body that is not
// the protocol's is an error, never a vector.
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agent-context/agent-context/runtime/memory"
)

// Defaults of the tunables a Config leaves zero.
const (
	DefaultTimeout    = 30 * time.Second
	DefaultBatchSize  = 64
	DefaultMaxRetries = 4
	DefaultBackoff    = 250 * time.Millisecond
	DefaultMaxWait    = 30 * time.Second
	// MaxDimensions is pgvector's limit for a vector column.
	MaxDimensions = 16000
	// maxResponseBytes bounds what one answer may hold (64 texts of 4,000 dimensions
	// are about 6 MiB of JSON).
	maxResponseBytes = 64 << 20
)

// Config configures the embedder.
type Config struct {
	// URL is the endpoint's base URL (AGENT_CONTEXT_EMBEDDING_URL); requests go to
	// URL/v1/embeddings. A URL that already ends in /v1 is accepted as well.
	URL string
	// Model is sent as the request's model (AGENT_CONTEXT_EMBEDDING_MODEL).
	Model string
	// Dimensions is the length of the model's vectors
	// (AGENT_CONTEXT_EMBEDDING_DIMENSIONS); an answer of any other length is an error.
	Dimensions int
	// APIKey, when set, is sent as a bearer token (AGENT_CONTEXT_EMBEDDING_API_KEY).
	APIKey string
	// Timeout bounds each attempt (AGENT_CONTEXT_EMBEDDING_TIMEOUT, default 30s).
	Timeout time.Duration
	// BatchSize is the most texts one request carries (default 64).
	BatchSize int
	// MaxRetries is how often a failed attempt is retried (default 4); negative means
	// none.
	MaxRetries int
	// Backoff is the wait before the first retry, doubled for each further one
	// (default 250ms), with up to 25% jitter.
	Backoff time.Duration
	// MaxWait caps one wait, a Retry-After included (default 30s): a server asking
	// for longer fails the call instead of holding it.
	MaxWait time.Duration
	// Client is the HTTP client (default: a new one with the default transport).
	Client *http.Client
}

// Embedder calls an OpenAI-compatible embeddings endpoint. It is safe for concurrent
// use.
type Embedder struct {
	cfg      Config
	endpoint string
	model    memory.EmbeddingModel
	// sleep waits d or until ctx ends; tests replace it to observe the waits.
	sleep func(ctx context.Context, d time.Duration) error
}

var _ memory.Embedder = (*Embedder)(nil)

// New checks cfg and returns the embedder. It does not call the endpoint.
func New(cfg Config) (*Embedder, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("openai embedder: the URL must be an absolute http or https URL, got %q", cfg.URL)
	}
	if cfg.Model == "" {
		return nil, errors.New("openai embedder: a model is required")
	}
	if cfg.Dimensions < 1 || cfg.Dimensions > MaxDimensions {
		return nil, fmt.Errorf("openai embedder: dimensions must be 1–%d, got %d", MaxDimensions, cfg.Dimensions)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = DefaultMaxRetries
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	base := strings.TrimSuffix(strings.TrimRight(cfg.URL, "/"), "/v1")
	return &Embedder{
		cfg:      cfg,
		endpoint: base + "/v1/embeddings",
		model:    memory.EmbeddingModel{ID: fmt.Sprintf("openai:%s/%d", cfg.Model, cfg.Dimensions), Dimensions: cfg.Dimensions},
		sleep:    sleep,
	}, nil
}

// Model returns "openai:<model>/<dimensions>" and the configured dimensions.
func (e *Embedder) Model() memory.EmbeddingModel { return e.model }

// Embed sends the texts in batches of BatchSize, one batch after the other, and
// returns their vectors L2-normalized (not every server normalizes). Any batch failing
// after its retries fails the call with EMBEDDING_UNAVAILABLE.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += e.cfg.BatchSize {
		batch := texts[start:min(start+e.cfg.BatchSize, len(texts))]
		vectors, err := e.embedBatch(ctx, batch)
		if err != nil {
			return nil, memory.EmbeddingUnavailable(err)
		}
		out = append(out, vectors...)
	}
	return out, nil
}

// request is the body of POST /v1/embeddings.
type request struct {
	Model string   `json:"model"`
	Input []string `json:"input"`
}

// response is the part of the answer the embedder reads.
type response struct {
	Data []struct {
		Index     *int      `json:"index"`
		Embedding []float64 `json:"embedding"`
	} `json:"data"`
}

// attemptError is a failed attempt; retry says whether another may succeed.
type attemptError struct {
	err        error
	retry      bool
	retryAfter time.Duration
}

func (a *attemptError) Error() string { return a.err.Error() }
func (a *attemptError) Unwrap() error { return a.err }

func (e *Embedder) embedBatch(ctx context.Context, texts []string) ([][]float32, error) {
	body, err := json.Marshal(request{Model: e.cfg.Model, Input: texts})
	if err != nil {
		return nil, err
	}
	backoff := e.cfg.Backoff
	for attempt := 0; ; attempt++ {
		vectors, aerr := e.attempt(ctx, body, len(texts))
		if aerr == nil {
			return vectors, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w (last attempt: %w)", ctx.Err(), aerr)
		}
		if !aerr.retry || attempt >= e.cfg.MaxRetries {
			return nil, fmt.Errorf("after %d attempts: %w", attempt+1, aerr)
		}
		wait := backoff + time.Duration(rand.Int64N(int64(backoff)/4+1))
		wait = max(wait, aerr.retryAfter)
		if wait > e.cfg.MaxWait {
			return nil, fmt.Errorf("the endpoint asks to wait %s, more than %s: %w", wait, e.cfg.MaxWait, aerr)
		}
		if err := e.sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("%w (last attempt: %w)", err, aerr)
		}
		backoff = min(2*backoff, e.cfg.MaxWait)
	}
}

// attempt makes one request under the per-attempt timeout and checks its answer.
func (e *Embedder) attempt(ctx context.Context, body []byte, n int) ([][]float32, *attemptError) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, &attemptError{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if e.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+e.cfg.APIKey)
	}
	resp, err := e.cfg.Client.Do(req)
	if err != nil {
		// Refused, reset or timed out: the endpoint may be back on the next try.
		return nil, &attemptError{err: err, retry: true}
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return nil, &attemptError{err: fmt.Errorf("reading the answer: %w", err), retry: true}
	}
	if resp.StatusCode != http.StatusOK {
		aerr := &attemptError{err: fmt.Errorf("the endpoint answered %d: %s", resp.StatusCode, snippet(raw))}
		switch {
		case resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode == http.StatusRequestTimeout,
			resp.StatusCode >= 500:
			aerr.retry = true
			aerr.retryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
		}
		return nil, aerr
	}
	if len(raw) > maxResponseBytes {
		return nil, &attemptError{err: fmt.Errorf("the answer is larger than %d bytes", maxResponseBytes)}
	}
	vectors, err := e.decode(raw, n)
	if err != nil {
		return nil, &attemptError{err: err}
	}
	return vectors, nil
}

// decode checks an answer for n texts and returns its vectors ordered by index.
func (e *Embedder) decode(raw []byte, n int) ([][]float32, error) {
	var r response
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("the answer is not an embeddings response: %w", err)
	}
	if len(r.Data) != n {
		return nil, fmt.Errorf("the answer holds %d embeddings for %d texts", len(r.Data), n)
	}
	out := make([][]float32, n)
	for _, d := range r.Data {
		if d.Index == nil || *d.Index < 0 || *d.Index >= n {
			return nil, fmt.Errorf("the answer has an embedding without a valid index")
		}
		if out[*d.Index] != nil {
			return nil, fmt.Errorf("the answer repeats index %d", *d.Index)
		}
		if len(d.Embedding) != e.cfg.Dimensions {
			return nil, fmt.Errorf("the answer's embedding %d has %d dimensions, want %d", *d.Index, len(d.Embedding), e.cfg.Dimensions)
		}
		var sq float64
		for _, v := range d.Embedding {
			sq += v * v
		}
		if sq == 0 || math.IsInf(sq, 0) {
			return nil, fmt.Errorf("the answer's embedding %d cannot be normalized", *d.Index)
		}
		inv := 1 / math.Sqrt(sq)
		v := make([]float32, len(d.Embedding))
		for i, x := range d.Embedding {
			v[i] = float32(x * inv)
		}
		out[*d.Index] = v
	}
	return out, nil
}

// retryAfter reads a Retry-After header: delay seconds or an HTTP date; 0 when absent
// or unreadable.
func retryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	if s, err := strconv.Atoi(strings.TrimSpace(h)); err == nil {
		return time.Duration(max(s, 0)) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

// snippet is the start of an error body, for the log.
func snippet(b []byte) string {
	const limit = 200
	s := strings.ToValidUTF8(string(b[:min(len(b), limit)]), "?")
	if len(b) > limit {
		s += "…"
	}
	return s
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
