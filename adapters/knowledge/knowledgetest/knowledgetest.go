// Package knowledgetest starts fake knowledge providers for tests: real HTTP servers on
// loopback that answer the provider protocol as a test tells them and record what they
// were sent.
package knowledgetest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agent-context/agent-context/adapters/knowledge"
)

// Capabilities is what a Provider answers GET /capabilities with by default.
const Capabilities = `{"queryModes":["semantic","keyword"],"resourceResolution":true,"maxHits":50}`

// Provider is a fake provider. Probes (GET /capabilities) are answered by its probe
// handler; every other request is a call, answered by the current answer handler.
type Provider struct {
	// URL is the provider's baseUrl.
	URL string

	calls  atomic.Int64
	mu     sync.Mutex
	seen   []Request
	probes []Request
	answer atomic.Pointer[http.HandlerFunc]
}

// Request is what a provider received.
type Request struct {
	Path   string
	Header http.Header
	// Body is the decoded JSON body, nil when there was none.
	Body map[string]any
}

// NewProvider starts a provider answering calls with answer and probes with
// Capabilities; it stops when the test ends.
func NewProvider(tb testing.TB, answer http.HandlerFunc) *Provider {
	tb.Helper()
	return NewProbedProvider(tb, answer, JSON(http.StatusOK, Capabilities))
}

// NewProbedProvider is NewProvider answering probes with probe.
func NewProbedProvider(tb testing.TB, answer, probe http.HandlerFunc) *Provider {
	tb.Helper()
	p := &Provider{}
	p.Set(answer)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		req := Request{Path: r.URL.Path, Header: r.Header.Clone()}
		_ = json.Unmarshal(data, &req.Body)
		if r.URL.Path == knowledge.PathCapabilities {
			p.mu.Lock()
			p.probes = append(p.probes, req)
			p.mu.Unlock()
			probe(w, r)
			return
		}
		p.calls.Add(1)
		p.mu.Lock()
		p.seen = append(p.seen, req)
		p.mu.Unlock()
		(*p.answer.Load())(w, r)
	}))
	tb.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// Set replaces the answer to calls.
func (p *Provider) Set(answer http.HandlerFunc) { p.answer.Store(&answer) }

// Calls counts the calls (probes excluded).
func (p *Provider) Calls() int64 { return p.calls.Load() }

// Requests lists the calls in arrival order.
func (p *Provider) Requests() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Request(nil), p.seen...)
}

// Probes lists the probes in arrival order.
func (p *Provider) Probes() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Request(nil), p.probes...)
}

// Last is the latest call; it fails the test when there was none.
func (p *Provider) Last(tb testing.TB) Request {
	tb.Helper()
	reqs := p.Requests()
	if len(reqs) == 0 {
		tb.Fatal("the provider was not called")
	}
	return reqs[len(reqs)-1]
}

// JSON answers status with body as JSON.
func JSON(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// Hits answers n hits, doc-0 … doc-(n-1), each with excerpt and a falling score.
func Hits(n int, excerpt string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		hits := make([]map[string]any, n)
		for i := range hits {
			hits[i] = map[string]any{"resourceRef": fmt.Sprintf("doc-%d", i), "excerpt": excerpt, "score": 1 - float64(i)/1000}
		}
		body, _ := json.Marshal(map[string]any{"hits": hits})
		JSON(http.StatusOK, string(body))(w, nil)
	}
}

// ByPath answers /query with query and /resolve with resolve.
func ByPath(query, resolve http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == knowledge.PathResolve {
			resolve(w, r)
			return
		}
		query(w, r)
	}
}

// Hang never answers; it returns when the caller gives up.
func Hang(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }

// RefusedURL is an address nothing listens on: connecting to it is refused.
func RefusedURL(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		tb.Fatal(err)
	}
	return "http://" + addr
}
