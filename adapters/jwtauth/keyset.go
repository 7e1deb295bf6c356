package jwtauth

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// maxJWKSBytes bounds a key set document: a broken or hostile key server cannot make
// the service buffer an unbounded body.
const maxJWKSBytes = 1 << 20

// minRSABits refuses RSA keys too short to be trusted.
const minRSABits = 2048

// generation numbers key sets; the verified-token cache only answers for tokens
// verified against the set currently in force, so a rotation invalidates it.
var generation atomic.Uint64

// verificationKey is one usable public key of a set.
type verificationKey struct {
	// alg is the key's "alg" member; empty when the JWK does not restrict it.
	alg jwa.SignatureAlgorithm
	// raw is the public crypto key (ed25519.PublicKey, *ecdsa.PublicKey, *rsa.PublicKey).
	raw any
}

// fits reports whether the key may verify a signature made with alg.
func (k verificationKey) fits(alg jwa.SignatureAlgorithm) bool {
	if k.alg != "" && k.alg != alg {
		return false
	}
	switch key := k.raw.(type) {
	case ed25519.PublicKey:
		return alg == jwa.EdDSA
	case *ecdsa.PublicKey:
		switch alg {
		case jwa.ES256:
			return key.Curve == elliptic.P256()
		case jwa.ES384:
			return key.Curve == elliptic.P384()
		case jwa.ES512:
			return key.Curve == elliptic.P521()
		}
	case *rsa.PublicKey:
		switch alg {
		case jwa.RS256, jwa.RS384, jwa.RS512, jwa.PS256, jwa.PS384, jwa.PS512:
			return true
		}
	}
	return false
}

// keySet is an immutable snapshot of a JWKS, indexed by kid.
type keySet struct {
	gen  uint64
	keys map[string]verificationKey
}

// parseKeySet reads a JWKS document and keeps the keys usable for verification:
// public asymmetric signing keys with a kid. Symmetric keys, encryption keys, short RSA
// keys and repeated kids are dropped; a set with no usable key is an error.
func parseKeySet(data []byte) (*keySet, error) {
	set, err := jwk.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("parse JWKS: %w", err)
	}
	keys := make(map[string]verificationKey, set.Len())
	for i := 0; i < set.Len(); i++ {
		key, _ := set.Key(i)
		kid := key.KeyID()
		if kid == "" || key.KeyType() == jwa.OctetSeq {
			continue
		}
		if use := key.KeyUsage(); use != "" && use != "sig" {
			continue
		}
		if _, dup := keys[kid]; dup {
			continue
		}
		pub, err := jwk.PublicKeyOf(key)
		if err != nil {
			continue
		}
		var raw any
		if err := pub.Raw(&raw); err != nil {
			continue
		}
		switch r := raw.(type) {
		case ed25519.PublicKey, *ecdsa.PublicKey:
		case *rsa.PublicKey:
			if r.N.BitLen() < minRSABits {
				continue
			}
		default:
			continue
		}
		var alg jwa.SignatureAlgorithm
		if a := key.Algorithm(); a != nil && a.String() != "" {
			alg = jwa.SignatureAlgorithm(a.String())
		}
		keys[kid] = verificationKey{alg: alg, raw: raw}
	}
	if len(keys) == 0 {
		return nil, errors.New("the JWKS holds no usable signing key (a public EdDSA, ECDSA or RSA key with a kid)")
	}
	return &keySet{gen: generation.Add(1), keys: keys}, nil
}

// keySource supplies the key set in force.
type keySource interface {
	// current returns the key set to verify with; it may reload a changed source. It
	// returns SERVICE_UNAVAILABLE (reason key_set_stale) when the only set it has is
	// too old to trust.
	current(ctx context.Context) (*keySet, error)
	// unknownKey is called when a token names a kid absent from seen. It may reload the
	// source, at most once per UnknownKeyRefreshInterval, and returns the set then in force.
	unknownKey(ctx context.Context, kid string, seen *keySet) *keySet
	// close stops any background work.
	close()
}

// fileSource reads a JWKS file and re-reads it when it changes: its identity (inode),
// size or modification time differ from the version loaded. The check is one stat per
// request; a replaced file (rename, Kubernetes ConfigMap symlink swap) is noticed too.
type fileSource struct {
	path  string
	clock runtime.Clock
	log   *slog.Logger

	set   atomic.Pointer[keySet]
	stamp atomic.Pointer[fileStamp]

	mu         sync.Mutex // serialises reloads and guards the fields below
	data       []byte     // the document in force
	lastForced time.Time  // the last re-read caused by an unknown kid
}

type fileStamp struct{ info os.FileInfo }

func (s *fileStamp) same(info os.FileInfo) bool {
	return s != nil && os.SameFile(s.info, info) && s.info.Size() == info.Size() && s.info.ModTime().Equal(info.ModTime())
}

func newFileSource(path string, clock runtime.Clock, log *slog.Logger) (*fileSource, error) {
	s := &fileSource{path: path, clock: clock, log: log}
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("JWKS file: %w", err)
	}
	if err := s.load(info); err != nil {
		return nil, fmt.Errorf("JWKS file %s: %w", path, err)
	}
	return s, nil
}

func (s *fileSource) current(context.Context) (*keySet, error) {
	info, err := os.Stat(s.path)
	if err != nil || s.stamp.Load().same(info) {
		// A file missing for a moment (being replaced) keeps the keys in force.
		return s.set.Load(), nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stamp.Load().same(info) {
		if err := s.load(info); err != nil {
			s.log.Warn("JWKS file changed but cannot be used; keeping the previous keys",
				slog.String("path", s.path), slog.Any("error", err))
		}
	}
	return s.set.Load(), nil
}

func (s *fileSource) close() {}

// unknownKey re-reads the file even if its stamp did not change (a copy that kept the
// modification time), at most once per UnknownKeyRefreshInterval.
func (s *fileSource) unknownKey(_ context.Context, kid string, seen *keySet) *keySet {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.set.Load(); cur != seen {
		return cur
	}
	now := s.clock.Now()
	if !s.lastForced.IsZero() && now.Sub(s.lastForced) < UnknownKeyRefreshInterval {
		return s.set.Load()
	}
	s.lastForced = now
	if info, err := os.Stat(s.path); err == nil {
		if err := s.load(info); err != nil {
			s.log.Warn("JWKS file cannot be used; keeping the previous keys",
				slog.String("path", s.path), slog.Any("error", err))
		}
	}
	return s.set.Load()
}

// load reads the file; the caller holds mu (or is the constructor). The stamp is
// recorded even on failure, so a broken file is reported once, not on every request.
func (s *fileSource) load(info os.FileInfo) error {
	s.stamp.Store(&fileStamp{info: info})
	f, err := os.Open(s.path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, maxJWKSBytes+1))
	if err != nil {
		return err
	}
	if len(data) > maxJWKSBytes {
		return fmt.Errorf("larger than %d bytes", maxJWKSBytes)
	}
	if s.set.Load() != nil && bytes.Equal(data, s.data) {
		return nil
	}
	set, err := parseKeySet(data)
	if err != nil {
		return err
	}
	s.data = data
	s.set.Store(set)
	return nil
}

// urlSource fetches a JWKS over HTTP, always in the background: no request ever
// waits on the key server, except a token naming a kid the set lacks, which waits
// at most unknownKeyWait for the fetch it triggers. A fetch is due every interval
// (noticed by the first request after it, or by the source's own timer when there is
// no traffic); a token with an unknown kid triggers one early, but unknown kids
// never cause more than one fetch per UnknownKeyRefreshInterval, and a failed fetch
// is retried no sooner than that either. The last good set keeps verifying while
// the key server fails, for at most maxStaleness after it was fetched; then tokens
// are refused with 503 until a fetch succeeds again.
type urlSource struct {
	url            string
	client         *http.Client
	clock          runtime.Clock
	log            *slog.Logger
	interval       time.Duration
	maxStaleness   time.Duration
	unknownKeyWait time.Duration

	set         atomic.Pointer[keySet]
	fetchedAt   atomic.Int64 // unix nanoseconds of the last successful fetch
	nextRefresh atomic.Int64 // unix nanoseconds

	rounds chan *fetchRound // to the refresher; holds the one round in flight
	stop   context.CancelFunc
	done   chan struct{} // closed when the refresher has returned

	mu          sync.Mutex // guards the fields below
	data        []byte     // the document in force
	lastAttempt time.Time
	round       *fetchRound // the fetch in flight, nil when none
}

// fetchRound is one fetch; done is closed when its outcome is in force.
type fetchRound struct{ done chan struct{} }

// fetchTimeout bounds one JWKS fetch.
const fetchTimeout = 10 * time.Second

func newURLSource(ctx context.Context, url string, client *http.Client, opts Options,
	clock runtime.Clock, log *slog.Logger) (*urlSource, error) {
	s := &urlSource{url: url, client: client, clock: clock, log: log, interval: opts.RefreshInterval,
		maxStaleness: opts.MaxStaleness, unknownKeyWait: opts.UnknownKeyWait,
		rounds: make(chan *fetchRound, 1), done: make(chan struct{})}
	now := clock.Now()
	s.lastAttempt = now
	if err := s.fetch(ctx, now); err != nil {
		return nil, fmt.Errorf("JWKS URL: %w", err)
	}
	background, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stop = stop
	go s.refresher(background)
	return s, nil
}

func (s *urlSource) current(context.Context) (*keySet, error) {
	now := s.clock.Now()
	if now.UnixNano() >= s.nextRefresh.Load() {
		s.begin(now, false)
	}
	if now.Sub(time.Unix(0, s.fetchedAt.Load())) > s.maxStaleness {
		return nil, runtime.Errorf(contract.CodeServiceUnavailable,
			"runtime tokens cannot be verified: the key set is out of date and the key server does not answer").
			With("reason", "key_set_stale")
	}
	return s.set.Load(), nil
}

func (s *urlSource) unknownKey(ctx context.Context, _ string, seen *keySet) *keySet {
	if cur := s.set.Load(); cur != seen {
		// A fetch installed a new set since this request took its own.
		return cur
	}
	round := s.begin(s.clock.Now(), true)
	if round == nil {
		return s.set.Load()
	}
	wait := time.NewTimer(s.unknownKeyWait)
	defer wait.Stop()
	select {
	case <-round.done:
	case <-wait.C:
	case <-ctx.Done():
	}
	return s.set.Load()
}

// begin hands a fetch to the refresher, unless one is in flight (which it returns),
// or it is not due: for a periodic refresh (unknownKid false) nextRefresh must have
// passed, for an unknown kid the last attempt must be UnknownKeyRefreshInterval ago.
// It returns nil when no fetch is in flight or started.
func (s *urlSource) begin(now time.Time, unknownKid bool) *fetchRound {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.round != nil {
		return s.round
	}
	if unknownKid && now.Sub(s.lastAttempt) < UnknownKeyRefreshInterval ||
		!unknownKid && now.UnixNano() < s.nextRefresh.Load() {
		return nil
	}
	s.lastAttempt = now
	s.round = &fetchRound{done: make(chan struct{})}
	// Never blocks: the channel holds one round, and a round is handed over only
	// when none is in flight.
	s.rounds <- s.round
	return s.round
}

// refresher runs the rounds handed to it, and starts the periodic one itself when
// no request noticed it was due.
func (s *urlSource) refresher(ctx context.Context) {
	defer close(s.done)
	timer := time.NewTimer(s.untilDue())
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case round := <-s.rounds:
			s.run(ctx, round)
		case <-timer.C:
			s.begin(s.clock.Now(), false)
		}
		timer.Reset(s.untilDue())
	}
}

func (s *urlSource) untilDue() time.Duration {
	return max(time.Unix(0, s.nextRefresh.Load()).Sub(s.clock.Now()), 0)
}

// run fetches for round and then closes it.
func (s *urlSource) run(ctx context.Context, round *fetchRound) {
	if err := s.fetch(ctx, s.clock.Now()); err != nil {
		s.log.Warn("JWKS refresh failed; keeping the previous keys",
			slog.String("url", s.url), slog.Any("error", err))
	}
	s.mu.Lock()
	s.round = nil
	s.mu.Unlock()
	close(round.done)
}

// fetch fetches and installs the set, and schedules the next periodic fetch: one
// interval after a success, UnknownKeyRefreshInterval after a failure.
func (s *urlSource) fetch(ctx context.Context, now time.Time) error {
	data, err := s.get(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && !bytes.Equal(data, s.data) {
		var set *keySet
		if set, err = parseKeySet(data); err == nil {
			s.data = data
			s.set.Store(set)
		}
	}
	next := now.Add(s.interval)
	if err != nil {
		next = now.Add(min(s.interval, UnknownKeyRefreshInterval))
	} else {
		s.fetchedAt.Store(now.UnixNano())
	}
	s.nextRefresh.Store(next.UnixNano())
	return err
}

// close stops the refresher and abandons a fetch in flight.
func (s *urlSource) close() {
	s.stop()
	<-s.done
}

func (s *urlSource) get(ctx context.Context) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxJWKSBytes))
		return nil, fmt.Errorf("GET %s answered %s", s.url, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxJWKSBytes {
		return nil, fmt.Errorf("GET %s: the key set is larger than %d bytes", s.url, maxJWKSBytes)
	}
	return data, nil
}
