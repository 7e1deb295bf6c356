package knowledge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	rtknowledge "github.com/agent-context/agent-context/runtime/knowledge"
)

// Bounds of provider responses. A body over its bound is an invalid response: it is
// never read past the bound.
const (
	// MaxHitBytes is a query response's allowance per hit asked for: a 64 KiB excerpt
	// plus its refs, title, URI, metadata and JSON escaping.
	MaxHitBytes = 2 * contract.MaxKnowledgeExcerptBytes
	// MaxResourceBytes is a resolve response's allowance per ref asked for.
	MaxResourceBytes = 2 * contract.MaxMetadataBytes
	// BodySlackBytes is added to every response allowance.
	BodySlackBytes = 64 << 10
	// MaxCapabilitiesBytes bounds a capabilities response.
	MaxCapabilitiesBytes = 64 << 10
	// maxQueryModes and maxQueryModeChars bound what a probe may report.
	maxQueryModes     = 32
	maxQueryModeChars = 64
	// drainBytes of an error response are read so the connection can be reused.
	drainBytes = 4 << 10
)

const userAgent = "agent-context"

// Options configure a Client beyond its providers file.
type Options struct {
	// Registerer receives the Client's metrics; nil registers none.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// Transport wraps each provider's HTTP transport (tracing:
	// telemetry.(*Tracing).Transport); nil keeps it as it is.
	Transport func(http.RoundTripper) http.RoundTripper
}

// Client calls the configured knowledge providers over HTTP, each with its own
// timeout, response bounds and circuit breaker. It implements
// rtknowledge.Providers. Start begins the background probes; Close ends them.
type Client struct {
	def           string
	probeInterval time.Duration
	providers     []*provider
	byName        map[string]*provider
	metrics       *metrics
	log           *slog.Logger

	stop context.CancelFunc
	done chan struct{}
}

var _ rtknowledge.Providers = (*Client)(nil)

// provider is one configured provider and what is known of it.
type provider struct {
	cfg     ProviderConfig
	http    *http.Client
	breaker *gobreaker.CircuitBreaker[struct{}]

	mu     sync.Mutex
	status string
	caps   ProviderCapabilities
	// capsRead: caps hold what the provider last reported, not the zero value of
	// a provider never reached.
	capsRead bool
	// fetching serialises the capabilities fetch a call that finds the provider up
	// with its capabilities unread makes, so concurrent calls make one.
	fetching sync.Mutex
}

// New returns a Client for cfg; it fails only when the metrics cannot be registered.
func New(cfg Config, opts Options) (*Client, error) {
	c := &Client{def: cfg.Default, probeInterval: cfg.ProbeInterval, byName: map[string]*provider{}, log: opts.Logger}
	if c.log == nil {
		c.log = slog.Default()
	}
	for _, pc := range cfg.Providers {
		p := &provider{cfg: pc, status: contract.ProviderUnknown, http: newHTTPClient(opts.Transport)}
		p.breaker = gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{
			Name:        pc.Name,
			MaxRequests: 1,
			Timeout:     pc.CircuitOpen,
			ReadyToTrip: func(counts gobreaker.Counts) bool {
				return counts.ConsecutiveFailures >= uint32(pc.CircuitFailures)
			},
			IsSuccessful: countsAsSuccess,
			IsExcluded:   callerWentAway,
			OnStateChange: func(name string, from, to gobreaker.State) {
				c.log.Warn("knowledge provider circuit changed",
					slog.String("provider", name), slog.String("from", from.String()), slog.String("to", to.String()))
			},
		})
		c.providers = append(c.providers, p)
		c.byName[pc.Name] = p
	}
	c.metrics = newMetrics(c.providers)
	if err := c.metrics.register(opts.Registerer); err != nil {
		return nil, fmt.Errorf("register the knowledge metrics: %w", err)
	}
	return c, nil
}

// newHTTPClient returns a provider's own HTTP client. It follows no redirect: a
// redirect could carry the caller's credentials to another host.
func newHTTPClient(wrap func(http.RoundTripper) http.RoundTripper) *http.Client {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = 64
	var transport http.RoundTripper = base
	if wrap != nil {
		transport = wrap(base)
	}
	return &http.Client{
		Transport:     transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Start probes every provider now and then every probe interval, in the background,
// until Close. A probe asks GET /capabilities without credentials and never passes an
// open circuit.
func (c *Client) Start() {
	if c.probeInterval == 0 || len(c.providers) == 0 || c.stop != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.stop, c.done = cancel, make(chan struct{})
	go func() {
		defer close(c.done)
		ticker := time.NewTicker(c.probeInterval)
		defer ticker.Stop()
		for {
			c.probeAll(ctx)
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
		}
	}()
}

// Close stops the probes and closes idle connections.
func (c *Client) Close() {
	if c.stop != nil {
		c.stop()
		<-c.done
		c.stop = nil
	}
	for _, p := range c.providers {
		p.http.CloseIdleConnections()
	}
}

// Default names the default provider.
func (c *Client) Default() string { return c.def }

// Providers describes every provider in configuration order.
func (c *Client) Providers() []rtknowledge.ProviderInfo {
	out := make([]rtknowledge.ProviderInfo, len(c.providers))
	for i, p := range c.providers {
		out[i] = p.info()
	}
	return out
}

// Provider describes one provider.
func (c *Client) Provider(name string) (rtknowledge.ProviderInfo, bool) {
	p, ok := c.byName[name]
	if !ok {
		return rtknowledge.ProviderInfo{}, false
	}
	return p.info(), true
}

func (p *provider) info() rtknowledge.ProviderInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	status := p.status
	switch {
	case p.breaker.State() == gobreaker.StateOpen:
		status = contract.ProviderDown
	case status == contract.ProviderUp && !p.capsRead:
		// Answered a call, but its capabilities are being read right now: up would
		// stand beside capabilities nobody has read.
		status = contract.ProviderUnknown
	}
	return rtknowledge.ProviderInfo{
		Name: p.cfg.Name, DefaultRequirement: p.cfg.DefaultRequirement,
		QueryModes: slices.Clone(p.caps.QueryModes), ResourceResolution: p.caps.ResourceResolution,
		MaxHits: p.maxHitsLocked(), Status: status,
	}
}

// maxHitsLocked is the configured cap, lowered to the provider's own when it reported
// one. p.mu must be held.
func (p *provider) maxHitsLocked() int {
	if p.caps.MaxHits > 0 && p.caps.MaxHits < p.cfg.MaxHits {
		return p.caps.MaxHits
	}
	return p.cfg.MaxHits
}

// Query asks the provider for hits: at most min(q.TopK, maxHits) are asked for and
// kept, excerpts over 64 KiB are cut at a character boundary and marked truncated.
func (c *Client) Query(ctx context.Context, name string, creds rtknowledge.Credentials, q rtknowledge.Query) ([]contract.KnowledgeHit, error) {
	p, err := c.lookup(name)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	topK := min(q.TopK, p.maxHitsLocked())
	p.mu.Unlock()
	filters := jsontext.Value(q.Filters)
	if filters == nil {
		filters = jsontext.Value("{}")
	}
	body := ProviderQuery{Query: q.Text, ScopeRef: q.ScopeRef, TopK: topK, Filters: filters}
	var hits []contract.KnowledgeHit
	err = c.call(ctx, p, OperationQuery, &creds, http.MethodPost, PathQuery, body,
		int64(topK)*MaxHitBytes+BodySlackBytes, func(data []byte) error {
			var res ProviderQueryResult
			if err := json.Unmarshal(data, &res); err != nil {
				return err
			}
			if res.Hits == nil {
				return errors.New("hits is missing or null")
			}
			hits = res.Hits[:min(len(res.Hits), topK)]
			for i := range hits {
				if err := checkHit(&hits[i]); err != nil {
					return fmt.Errorf("hits[%d]: %w", i, err)
				}
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	return hits, nil
}

// Resolve asks the provider for the resources of refs.
func (c *Client) Resolve(ctx context.Context, name string, creds rtknowledge.Credentials, refs []string) ([]contract.KnowledgeResource, error) {
	p, err := c.lookup(name)
	if err != nil {
		return nil, err
	}
	var resources []contract.KnowledgeResource
	err = c.call(ctx, p, OperationResolve, &creds, http.MethodPost, PathResolve, ProviderResolve{ResourceRefs: refs},
		int64(len(refs))*MaxResourceBytes+BodySlackBytes, func(data []byte) error {
			var res ProviderResolveResult
			if err := json.Unmarshal(data, &res); err != nil {
				return err
			}
			if res.Resources == nil {
				return errors.New("resources is missing or null")
			}
			resources = res.Resources
			for i := range resources {
				if err := checkResource(&resources[i]); err != nil {
					return fmt.Errorf("resources[%d]: %w", i, err)
				}
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	return resources, nil
}

func (c *Client) lookup(name string) (*provider, error) {
	p, ok := c.byName[name]
	if !ok {
		return nil, &rtknowledge.ProviderError{Provider: name, Reason: contract.ReasonProviderNotConfigured}
	}
	return p, nil
}

// probeAll probes every provider concurrently.
func (c *Client) probeAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, p := range c.providers {
		wg.Go(func() { c.probe(ctx, p) })
	}
	wg.Wait()
}

// probe refreshes a provider's capabilities and status. It leaves an open or
// half-open circuit alone: a probe does not decide whether the circuit closes.
func (c *Client) probe(ctx context.Context, p *provider) {
	if p.breaker.State() != gobreaker.StateClosed {
		return
	}
	var caps ProviderCapabilities
	start := time.Now()
	err := p.do(ctx, nil, http.MethodGet, PathCapabilities, nil, MaxCapabilitiesBytes, func(data []byte) error {
		if err := json.Unmarshal(data, &caps); err != nil {
			return err
		}
		return checkCapabilities(caps)
	})
	var f *failure
	if errors.As(err, &f) {
		// A provider that cannot describe itself is down, whatever the reason.
		f.healthy = false
	}
	if c.settle(p, OperationCapabilities, start, err) == OutcomeOK {
		p.mu.Lock()
		p.caps, p.capsRead = caps, true
		p.mu.Unlock()
	}
}

// readCapabilitiesOnce fetches the capabilities of a provider that just answered a
// call but was never probed successfully (down at start, or probes off): it is up now,
// so what it can do is read at once rather than at the next probe.
func (c *Client) readCapabilitiesOnce(ctx context.Context, p *provider) {
	read := func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.capsRead
	}
	if read() {
		return
	}
	p.fetching.Lock()
	defer p.fetching.Unlock()
	if !read() {
		c.probe(context.WithoutCancel(ctx), p)
	}
}

// call runs one provider call through the provider's circuit breaker and returns
// nil, a *rtknowledge.ProviderError, or the caller's context error.
func (c *Client) call(ctx context.Context, p *provider, operation string, creds *rtknowledge.Credentials,
	method, path string, body any, limit int64, decode func([]byte) error) error {
	start := time.Now()
	_, err := p.breaker.Execute(func() (struct{}, error) {
		return struct{}{}, p.do(ctx, creds, method, path, body, limit, decode)
	})
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		err = &failure{reason: contract.ReasonCircuitOpen, err: err}
	}
	outcome := c.settle(p, operation, start, err)
	var f *failure
	if outcome == OutcomeOK || (errors.As(err, &f) && f.healthy) {
		c.readCapabilitiesOnce(ctx, p)
	}
	if errors.As(err, &f) {
		return &rtknowledge.ProviderError{Provider: p.cfg.Name, Reason: f.reason, Err: f.err}
	}
	return err
}

// settle records a finished call in the metrics and the provider's status and
// returns its outcome.
func (c *Client) settle(p *provider, operation string, start time.Time, err error) string {
	outcome := OutcomeOK
	var f *failure
	switch {
	case err == nil:
		p.setStatus(contract.ProviderUp)
	case errors.As(err, &f):
		outcome = f.reason
		switch {
		case f.healthy:
			p.setStatus(contract.ProviderUp)
		case f.reason != contract.ReasonCircuitOpen:
			p.setStatus(contract.ProviderDown)
		}
	default:
		outcome = OutcomeCanceled
	}
	c.metrics.observe(p.cfg.Name, operation, outcome, time.Since(start))
	return outcome
}

func (p *provider) setStatus(s string) {
	p.mu.Lock()
	p.status = s
	p.mu.Unlock()
}

// failure is a provider call that went wrong, classified by its degradation reason.
type failure struct {
	reason string
	// healthy: the provider answered but refused this caller's credential or request
	// (400, 401, 403, 422). It is still an error for the caller, but it counts neither
	// against the circuit nor against the provider's status: one caller's bad
	// credential must not cut every caller off.
	healthy bool
	err     error
}

func (f *failure) Error() string { return fmt.Sprintf("%s: %v", f.reason, f.err) }
func (f *failure) Unwrap() error { return f.err }

// countsAsSuccess tells the breaker which results speak for the provider's health.
func countsAsSuccess(err error) bool {
	var f *failure
	return err == nil || (errors.As(err, &f) && f.healthy)
}

// callerWentAway tells the breaker to ignore calls the caller abandoned: they say
// nothing about the provider.
func callerWentAway(err error) bool {
	var f *failure
	return err != nil && !errors.As(err, &f)
}

// do performs one HTTP exchange bounded by the provider's timeout and limit and hands
// the body to decode. creds nil sends no credentials at all. It returns nil, a
// *failure, or the caller's context error.
func (p *provider) do(ctx context.Context, creds *rtknowledge.Credentials, method, path string,
	body any, limit int64, decode func([]byte) error) error {
	callCtx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	var reader io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode the provider request: %w", err)
		}
		reader = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(callCtx, method, p.cfg.BaseURL+path, reader)
	if err != nil {
		return &failure{reason: contract.ReasonProviderUnavailable, err: err}
	}
	// The request is built from nothing: no header of the caller is copied.
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	if reader != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if creds != nil {
		if creds.RuntimeToken != "" {
			req.Header.Set("Authorization", "Bearer "+creds.RuntimeToken)
		}
		if p.cfg.ForwardUserAuthorization && creds.UserAuthorization != "" {
			req.Header.Set(HeaderUserAuthorization, creds.UserAuthorization)
		}
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return transportFailure(ctx, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		_, _ = io.CopyN(io.Discard, resp.Body, drainBytes)
		return &failure{reason: contract.ReasonProviderError, healthy: callerSpecific(resp.StatusCode),
			err: fmt.Errorf("%s %s answered %d", method, path, resp.StatusCode)}
	}
	tooLarge := &failure{reason: contract.ReasonProviderInvalidResponse,
		err: fmt.Errorf("%s %s: the body exceeds %d bytes", method, path, limit)}
	if resp.ContentLength > limit {
		return tooLarge
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return transportFailure(ctx, err)
	}
	if int64(len(data)) > limit {
		return tooLarge
	}
	if err := decode(data); err != nil {
		return &failure{reason: contract.ReasonProviderInvalidResponse, err: fmt.Errorf("%s %s: %w", method, path, err)}
	}
	return nil
}

// transportFailure classifies an error of the exchange itself. When the caller's own
// context ended first, the caller went away and its error is returned as it is.
func transportFailure(parent context.Context, err error) error {
	if parent.Err() != nil {
		return fmt.Errorf("the caller went away: %w", context.Cause(parent))
	}
	var netErr net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()) {
		return &failure{reason: contract.ReasonProviderTimeout, err: err}
	}
	return &failure{reason: contract.ReasonProviderUnavailable, err: err}
}

// callerSpecific reports whether a status refuses this caller's credential or request
// rather than saying the provider is unwell or misconfigured (404, 405, 408, 429, 5xx).
func callerSpecific(status int) bool {
	switch status {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusUnprocessableEntity:
		return true
	}
	return false
}

// checkHit checks a provider's hit, normalizes its metadata and cuts its excerpt.
func checkHit(h *contract.KnowledgeHit) error {
	if err := errors.Join(checkRef("resourceRef", &h.ResourceRef), checkRef("revisionRef", h.RevisionRef),
		checkRef("segmentRef", h.SegmentRef)); err != nil {
		return err
	}
	metadata, err := runtime.NormalizeMetadata("metadata", h.Metadata)
	if err != nil {
		return err
	}
	var cut bool
	h.Metadata = metadata
	h.Excerpt, cut = CutExcerpt(h.Excerpt)
	h.Truncated = h.Truncated || cut
	return nil
}

// checkResource checks a provider's resource and normalizes its metadata.
func checkResource(r *contract.KnowledgeResource) error {
	if err := errors.Join(checkRef("resourceRef", &r.ResourceRef), checkRef("revisionRef", r.RevisionRef)); err != nil {
		return err
	}
	metadata, err := runtime.NormalizeMetadata("metadata", r.Metadata)
	r.Metadata = metadata
	return err
}

// checkRef applies the evidence ref rules of docs/windows.md to a ref a provider sent
// (nil: absent), so that every hit can be stored as knowledgeEvidence.
func checkRef(field string, ref *string) error {
	switch {
	case ref == nil:
		return nil
	case *ref == "":
		return fmt.Errorf("%s is missing or empty", field)
	case utf8.RuneCountInString(*ref) > contract.MaxEvidenceRefChars:
		return fmt.Errorf("%s is longer than %d characters", field, contract.MaxEvidenceRefChars)
	}
	return nil
}

// CutExcerpt cuts s to at most 64 KiB (contract.MaxKnowledgeExcerptBytes), at a
// character boundary, and reports whether it cut.
func CutExcerpt(s string) (string, bool) {
	if len(s) <= contract.MaxKnowledgeExcerptBytes {
		return s, false
	}
	cut := contract.MaxKnowledgeExcerptBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut], true
}

func checkCapabilities(caps ProviderCapabilities) error {
	if caps.MaxHits < 0 {
		return errors.New("maxHits must not be negative")
	}
	if len(caps.QueryModes) > maxQueryModes {
		return fmt.Errorf("queryModes holds more than %d modes", maxQueryModes)
	}
	for i, m := range caps.QueryModes {
		if m == "" || utf8.RuneCountInString(m) > maxQueryModeChars {
			return fmt.Errorf("queryModes[%d] must be 1–%d characters", i, maxQueryModeChars)
		}
	}
	return nil
}
