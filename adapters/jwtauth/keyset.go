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
	// current returns the key set to verify with; it may reload a changed source.
	current(ctx context.Context) *keySet
	// unknownKey is called when a token names a kid absent from seen. It may reload the
	// source, at most once per UnknownKeyRefreshInterval, and returns the set then in force.
	unknownKey(ctx context.Context, kid string, seen *keySet) *keySet
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

func (s *fileSource) current(context.Context) *keySet {
	info, err := os.Stat(s.path)
	if err != nil || s.stamp.Load().same(info) {
		// A file missing for a moment (being replaced) keeps the keys in force.
		return s.set.Load()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stamp.Load().same(info) {
		if err := s.load(info); err != nil {
			s.log.Warn("JWKS file changed but cannot be used; keeping the previous keys",
				slog.String("path", s.path), slog.Any("error", err))
		}
	}
	return s.set.Load()
}

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
	defer f.Close()
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

// urlSource fetches a JWKS over HTTP. It refreshes the set every RefreshInterval (the
// request that notices does it; concurrent ones keep using the set in force) and on an
// unknown kid, but never fetches more than once per UnknownKeyRefreshInterval for
// unknown kids, and retries a failed fetch no sooner than that either.
type urlSource struct {
	url      string
	client   *http.Client
	clock    runtime.Clock
	log      *slog.Logger
	interval time.Duration

	set         atomic.Pointer[keySet]
	nextRefresh atomic.Int64 // unix nanoseconds

	mu          sync.Mutex // serialises fetches and guards the fields below
	data        []byte
	lastAttempt time.Time
}

// fetchTimeout bounds one JWKS fetch.
const fetchTimeout = 10 * time.Second

func newURLSource(ctx context.Context, url string, client *http.Client, interval time.Duration,
	clock runtime.Clock, log *slog.Logger) (*urlSource, error) {
	s := &urlSource{url: url, client: client, clock: clock, log: log, interval: interval}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fetchLocked(ctx, clock.Now()); err != nil {
		return nil, fmt.Errorf("JWKS URL: %w", err)
	}
	return s, nil
}

func (s *urlSource) current(ctx context.Context) *keySet {
	now := s.clock.Now()
	if now.UnixNano() >= s.nextRefresh.Load() && s.mu.TryLock() {
		if now.UnixNano() >= s.nextRefresh.Load() {
			if err := s.fetchLocked(ctx, now); err != nil {
				s.log.Warn("JWKS refresh failed; keeping the previous keys",
					slog.String("url", s.url), slog.Any("error", err))
			}
		}
		s.mu.Unlock()
	}
	return s.set.Load()
}

func (s *urlSource) unknownKey(ctx context.Context, kid string, seen *keySet) *keySet {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.set.Load(); cur != seen {
		// Another request refreshed while this one waited.
		return cur
	}
	now := s.clock.Now()
	if now.Sub(s.lastAttempt) < UnknownKeyRefreshInterval {
		return s.set.Load()
	}
	if err := s.fetchLocked(ctx, now); err != nil {
		s.log.Warn("JWKS refresh for an unknown key ID failed; keeping the previous keys",
			slog.String("url", s.url), slog.Any("error", err))
	}
	return s.set.Load()
}

// fetchLocked fetches and installs the set; the caller holds mu. The fetch is detached
// from the request's cancellation: its result serves every request after it.
func (s *urlSource) fetchLocked(ctx context.Context, now time.Time) error {
	s.lastAttempt = now
	data, err := s.get(ctx)
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
	}
	s.nextRefresh.Store(next.UnixNano())
	return err
}

func (s *urlSource) get(ctx context.Context) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout)
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
	defer resp.Body.Close()
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
