package jwtauth

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// fakeClock is a settable clock: tests move time instead of sleeping.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_750_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// lockedBuffer is a log sink that the code under test writes while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testKey is a private signing key and its kid.
type testKey struct {
	alg  jwa.SignatureAlgorithm
	kid  string
	priv any // raw private key
	pub  any // raw public key
}

var rsaKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
})

func mustKey(tb testing.TB, alg jwa.SignatureAlgorithm, kid string) testKey {
	tb.Helper()
	k := testKey{alg: alg, kid: kid}
	switch alg {
	case jwa.EdDSA:
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		require.NoError(tb, err)
		k.priv, k.pub = priv, pub
	case jwa.ES256:
		priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(tb, err)
		k.priv, k.pub = priv, &priv.PublicKey
	case jwa.RS256:
		priv := rsaKey()
		k.priv, k.pub = priv, &priv.PublicKey
	default:
		tb.Fatalf("no test key for %s", alg)
	}
	return k
}

// publicJWK is the key as a JWKS publishes it.
func (k testKey) publicJWK(tb testing.TB) jwk.Key {
	tb.Helper()
	j, err := jwk.FromRaw(k.pub)
	require.NoError(tb, err)
	require.NoError(tb, j.Set(jwk.KeyIDKey, k.kid))
	require.NoError(tb, j.Set(jwk.AlgorithmKey, k.alg))
	require.NoError(tb, j.Set(jwk.KeyUsageKey, jwk.ForSignature))
	return j
}

// sign signs claims with the key; headers override or add protected headers (a nil
// value removes one, e.g. "kid").
func (k testKey) sign(tb testing.TB, claims map[string]any, headers map[string]any) string {
	tb.Helper()
	payload, err := json.Marshal(claims)
	require.NoError(tb, err)
	return k.signRaw(tb, payload, headers)
}

func (k testKey) signRaw(tb testing.TB, payload []byte, headers map[string]any) string {
	tb.Helper()
	h := jws.NewHeaders()
	require.NoError(tb, h.Set(jws.KeyIDKey, k.kid))
	for name, v := range headers {
		if v == nil {
			require.NoError(tb, h.Remove(name))
			continue
		}
		require.NoError(tb, h.Set(name, v))
	}
	signed, err := jws.Sign(payload, jws.WithKey(k.alg, k.priv, jws.WithProtectedHeaders(h)))
	require.NoError(tb, err)
	return string(signed)
}

func jwksJSON(tb testing.TB, keys ...testKey) []byte {
	tb.Helper()
	set := jwk.NewSet()
	for _, k := range keys {
		require.NoError(tb, set.AddKey(k.publicJWK(tb)))
	}
	data, err := json.Marshal(set)
	require.NoError(tb, err)
	return data
}

// validClaims is a claim set that passes every rule at now.
func validClaims(now time.Time) map[string]any {
	return map[string]any{
		"iss":          DefaultIssuer,
		"aud":          []string{Audience},
		"sub":          "agent-7",
		"tenant_id":    "acme",
		"project_id":   "alpha",
		"capabilities": []string{contract.CapMessagesAppend, contract.CapMessagesRead, "future:thing"},
		"iat":          now.Unix(),
		"exp":          now.Add(15 * time.Minute).Unix(),
		"jti":          "tok-1",
	}
}

func with(claims map[string]any, changes map[string]any) map[string]any {
	out := make(map[string]any, len(claims))
	for k, v := range claims {
		out[k] = v
	}
	for k, v := range changes {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = v
	}
	return out
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// testBundle is a verifier over a JWKS file holding one EdDSA key.
type testBundle struct {
	v     *Verifier
	clock *fakeClock
	key   testKey
	path  string
}

func setup(tb testing.TB, opts Options, keys ...testKey) *testBundle {
	tb.Helper()
	if len(keys) == 0 {
		keys = []testKey{mustKey(tb, jwa.EdDSA, "key-1")}
	}
	path := filepath.Join(tb.TempDir(), "jwks.json")
	require.NoError(tb, os.WriteFile(path, jwksJSON(tb, keys...), 0o644))
	clock := newFakeClock()
	opts.JWKSFile = path
	opts.Clock = clock
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	v, err := New(context.Background(), opts)
	require.NoError(tb, err)
	return &testBundle{v: v, clock: clock, key: keys[0], path: path}
}

func requireCode(tb testing.TB, err error, code string) {
	tb.Helper()
	var re *runtime.Error
	require.ErrorAs(tb, err, &re)
	require.Equal(tb, code, re.Code, "error: %v", err)
}

// jwksServer is a key server whose document tests change and whose hits they count.
// After hang, each request blocks (entered receives one value per request) until
// release is closed.
type jwksServer struct {
	*httptest.Server
	doc    atomic.Pointer[[]byte]
	status atomic.Int32
	hits   atomic.Int64

	mu      sync.Mutex
	entered chan struct{}
	release chan struct{}
}

func newJWKSServer(tb testing.TB, doc []byte) *jwksServer {
	tb.Helper()
	s := &jwksServer{}
	s.serve(doc)
	s.status.Store(http.StatusOK)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		s.mu.Lock()
		entered, release := s.entered, s.release
		s.mu.Unlock()
		if release != nil {
			entered <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/jwk-set+json")
		w.WriteHeader(int(s.status.Load()))
		_, _ = w.Write(*s.doc.Load())
	}))
	tb.Cleanup(s.Close)
	return s
}

func (s *jwksServer) serve(doc []byte) { s.doc.Store(&doc) }

// hang makes the server block every request until the returned function is called
// (the test's cleanup calls it too); entered receives a value as each request arrives.
func (s *jwksServer) hang(tb testing.TB) (entered <-chan struct{}, release func()) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entered, s.release = make(chan struct{}, 16), make(chan struct{})
	ch := s.release
	var once sync.Once
	release = func() {
		once.Do(func() {
			s.mu.Lock()
			s.entered, s.release = nil, nil
			s.mu.Unlock()
			close(ch)
		})
	}
	tb.Cleanup(release)
	return s.entered, release
}
