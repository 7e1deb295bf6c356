package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/embedding/embeddingtest"
	"github.com/agent-context/agent-context/adapters/embedding/hash"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/memory"
)

// server is an OpenAI-compatible embeddings endpoint backed by the hash embedder. It
// answers each batch with its data in reverse order (clients must order by index).
// Each request goes to the next entry of script, if any, before the normal answer.
type server struct {
	*httptest.Server
	mu       sync.Mutex
	requests []request
	headers  []http.Header
	script   []http.HandlerFunc
}

func newServer(t *testing.T, script ...http.HandlerFunc) *server {
	t.Helper()
	s := &server{script: script}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/embeddings" {
		http.Error(w, "no such route", http.StatusNotFound)
		return
	}
	var req request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.headers = append(s.headers, r.Header.Clone())
	var step http.HandlerFunc
	if len(s.script) > 0 {
		step, s.script = s.script[0], s.script[1:]
	}
	s.mu.Unlock()
	if step != nil {
		step(w, r)
		return
	}
	vectors, _ := hash.New().Embed(r.Context(), req.Input)
	type item struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	data := make([]item, 0, len(vectors))
	for i := len(vectors) - 1; i >= 0; i-- {
		data = append(data, item{Object: "embedding", Index: i, Embedding: vectors[i]})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "model": req.Model, "data": data,
		"usage": map[string]int{"prompt_tokens": 1, "total_tokens": 1}})
}

func (s *server) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

func status(code int, retryAfter string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		http.Error(w, `{"error":{"message":"busy"}}`, code)
	}
}

func body(s string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(s))
	}
}

// waits records the embedder's backoff waits instead of sleeping them.
type waits struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *waits) sleep(_ context.Context, d time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.d = append(w.d, d)
	return nil
}

func newEmbedder(t *testing.T, s *server, mutate ...func(*Config)) (*Embedder, *waits) {
	t.Helper()
	cfg := Config{URL: s.URL, Model: "test-model", Dimensions: hash.Dimensions, APIKey: "secret-key",
		Timeout: 5 * time.Second, BatchSize: 3, MaxRetries: 2}
	for _, m := range mutate {
		m(&cfg)
	}
	e, err := New(cfg)
	require.NoError(t, err)
	w := &waits{}
	e.sleep = w.sleep
	return e, w
}

func requireUnavailable(t *testing.T, vectors [][]float32, err error) {
	t.Helper()
	require.Nil(t, vectors)
	require.ErrorIs(t, err, memory.ErrEmbeddingUnavailable)
	require.Equal(t, contract.CodeEmbeddingUnavailable, runtime.ErrorCode(err))
}

var texts = []string{"one", "two", "three", "four", "five", "six", "seven"}

func TestContract(t *testing.T) {
	t.Parallel()
	e, _ := newEmbedder(t, newServer(t))
	embeddingtest.Run(t, e)
}

// TestBatching: seven texts in batches of three make three requests, each carrying the
// model and the key, and the vectors come back in the texts' order.
func TestBatching(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	e, _ := newEmbedder(t, s)
	got, err := e.Embed(context.Background(), texts)
	require.NoError(t, err)
	want, _ := hash.New().Embed(context.Background(), texts)
	require.Len(t, got, len(texts))
	for i := range want {
		require.InDeltaSlice(t, want[i], got[i], 1e-6, texts[i])
	}
	require.Equal(t, [][]string{{"one", "two", "three"}, {"four", "five", "six"}, {"seven"}},
		[][]string{s.requests[0].Input, s.requests[1].Input, s.requests[2].Input})
	for i, h := range s.headers {
		require.Equal(t, "test-model", s.requests[i].Model)
		require.Equal(t, "Bearer secret-key", h.Get("Authorization"))
		require.Equal(t, "application/json", h.Get("Content-Type"))
	}
	require.Equal(t, "openai:test-model/384", e.Model().ID)
}

// TestBaseURLWithV1: a base URL that already ends in /v1 reaches the same route.
func TestBaseURLWithV1(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	e, _ := newEmbedder(t, s, func(c *Config) { c.URL = s.URL + "/v1/" })
	_, err := e.Embed(context.Background(), texts[:1])
	require.NoError(t, err)
	require.Equal(t, 1, s.count())
}

// TestRetryAfter: a 429 is retried after the wait its Retry-After asks for, then
// succeeds.
func TestRetryAfter(t *testing.T) {
	t.Parallel()
	s := newServer(t, status(http.StatusTooManyRequests, "7"))
	e, w := newEmbedder(t, s)
	got, err := e.Embed(context.Background(), texts[:2])
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, 2, s.count())
	require.Len(t, w.d, 1)
	require.GreaterOrEqual(t, w.d[0], 7*time.Second)
}

// TestRetryAfterDate: the HTTP-date form of Retry-After counts as well.
func TestRetryAfterDate(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	require.Equal(t, 20*time.Second, retryAfter(now.Add(20*time.Second).Format(http.TimeFormat), now))
	require.Equal(t, time.Duration(0), retryAfter(now.Add(-time.Minute).Format(http.TimeFormat), now))
	require.Equal(t, time.Duration(0), retryAfter("soon", now))
}

// TestRetryAfterTooLong: a server asking for a wait past MaxWait fails the call at
// once rather than holding it.
func TestRetryAfterTooLong(t *testing.T) {
	t.Parallel()
	s := newServer(t, status(http.StatusServiceUnavailable, "3600"))
	e, w := newEmbedder(t, s)
	got, err := e.Embed(context.Background(), texts[:1])
	requireUnavailable(t, got, err)
	require.Equal(t, 1, s.count())
	require.Empty(t, w.d)
}

// TestServerErrorsExhaustRetries: 5xx answers are retried with growing waits, then the
// call fails with EMBEDDING_UNAVAILABLE.
func TestServerErrorsExhaustRetries(t *testing.T) {
	t.Parallel()
	s := newServer(t, status(500, ""), status(502, ""), status(503, ""), status(504, ""))
	e, w := newEmbedder(t, s)
	got, err := e.Embed(context.Background(), texts[:1])
	requireUnavailable(t, got, err)
	require.Contains(t, err.Error(), "after 3 attempts")
	require.Equal(t, 3, s.count())
	require.Len(t, w.d, 2)
	require.Greater(t, w.d[1], w.d[0])
}

// TestTimeout: an attempt that outlives the timeout is abandoned and retried; when
// every attempt times out the call fails.
func TestTimeout(t *testing.T) {
	t.Parallel()
	hang := func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
	s := newServer(t, hang, hang, hang)
	e, w := newEmbedder(t, s, func(c *Config) { c.Timeout = 50 * time.Millisecond })
	got, err := e.Embed(context.Background(), texts[:1])
	requireUnavailable(t, got, err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, 3, s.count())
	require.Len(t, w.d, 2)
}

// TestTimeoutThenSuccess: one slow attempt does not fail the call.
func TestTimeoutThenSuccess(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	e, _ := newEmbedder(t, s, func(c *Config) { c.Timeout = 50 * time.Millisecond })
	got, err := e.Embed(context.Background(), texts[:2])
	require.NoError(t, err)
	require.Len(t, got, 2)
}

// TestBadAnswers: an answer that is not exactly one valid vector per text is an error
// (not retried: the server answered, wrongly), never a vector.
func TestBadAnswers(t *testing.T) {
	t.Parallel()
	vec := func(n int) string {
		b, _ := json.Marshal(make([]float32, n))
		return string(b)
	}
	unit := func(n int) string {
		v := make([]float32, n)
		v[0] = 1
		b, _ := json.Marshal(v)
		return string(b)
	}
	for name, tc := range map[string]struct {
		answer string
		want   string
	}{
		"wrong dimension": {fmt.Sprintf(`{"data":[{"index":0,"embedding":%s}]}`, unit(383)), "383 dimensions, want 384"},
		"garbage JSON":    {`{"data":[{"index":0,"embedding":[0.1,`, "not an embeddings response"},
		"not JSON":        {`<html>gateway says hi</html>`, "not an embeddings response"},
		"wrong count":     {fmt.Sprintf(`{"data":[{"index":0,"embedding":%s}]}`, unit(384)), "1 embeddings for 2 texts"},
		"missing index":   {fmt.Sprintf(`{"data":[{"embedding":%s},{"index":1,"embedding":%s}]}`, unit(384), unit(384)), "without a valid index"},
		"index past end":  {fmt.Sprintf(`{"data":[{"index":0,"embedding":%s},{"index":2,"embedding":%s}]}`, unit(384), unit(384)), "without a valid index"},
		"repeated index":  {fmt.Sprintf(`{"data":[{"index":1,"embedding":%s},{"index":1,"embedding":%s}]}`, unit(384), unit(384)), "repeats index 1"},
		"zero vector":     {fmt.Sprintf(`{"data":[{"index":0,"embedding":%s},{"index":1,"embedding":%s}]}`, vec(384), unit(384)), "cannot be normalized"},
		"strings":         {`{"data":[{"index":0,"embedding":"AAAA"},{"index":1,"embedding":"AAAA"}]}`, "not an embeddings response"},
		"no data":         {`{"object":"list"}`, "0 embeddings for 2 texts"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, body(tc.answer))
			e, w := newEmbedder(t, s)
			input := texts[:2]
			if name == "wrong dimension" {
				input = texts[:1]
			}
			got, err := e.Embed(context.Background(), input)
			requireUnavailable(t, got, err)
			require.Contains(t, err.Error(), tc.want)
			require.Equal(t, 1, s.count())
			require.Empty(t, w.d)
		})
	}
}

// TestClientErrorNotRetried: a 4xx other than 408/429 (bad key, unknown model) fails
// at once.
func TestClientErrorNotRetried(t *testing.T) {
	t.Parallel()
	s := newServer(t, status(http.StatusUnauthorized, ""))
	e, w := newEmbedder(t, s)
	got, err := e.Embed(context.Background(), texts[:1])
	requireUnavailable(t, got, err)
	require.Contains(t, err.Error(), "answered 401")
	require.Equal(t, 1, s.count())
	require.Empty(t, w.d)
}

// TestUnreachable: a closed port is retried, then EMBEDDING_UNAVAILABLE.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	e, w := newEmbedder(t, s)
	s.Close()
	got, err := e.Embed(context.Background(), texts[:1])
	requireUnavailable(t, got, err)
	require.Len(t, w.d, 2)
}

// TestCanceledDuringBackoff: the caller's context ending stops the retries.
func TestCanceledDuringBackoff(t *testing.T) {
	t.Parallel()
	s := newServer(t, status(503, ""), status(503, ""))
	e, _ := newEmbedder(t, s, func(c *Config) { c.Backoff = time.Hour; c.MaxWait = 2 * time.Hour })
	e.sleep = sleep
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for s.count() == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	got, err := e.Embed(ctx, texts[:1])
	requireUnavailable(t, got, err)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 1, s.count())
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{
		{URL: "", Model: "m", Dimensions: 3},
		{URL: "localhost:11434", Model: "m", Dimensions: 3},
		{URL: "ftp://h", Model: "m", Dimensions: 3},
		{URL: "http://h", Dimensions: 3},
		{URL: "http://h", Model: "m"},
		{URL: "http://h", Model: "m", Dimensions: MaxDimensions + 1},
	} {
		_, err := New(cfg)
		require.Error(t, err, "%+v", cfg)
	}
}
