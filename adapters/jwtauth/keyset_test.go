package jwtauth

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// rewrite replaces the JWKS file the way an operator would (write a temporary file,
// rename over) and moves its modification time, so the change shows on any file system.
func rewrite(t *testing.T, path string, doc []byte, mtime time.Time) {
	t.Helper()
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, doc, 0o644))
	require.NoError(t, os.Chtimes(tmp, mtime, mtime))
	require.NoError(t, os.Rename(tmp, path))
}

func TestJWKSFileReload(t *testing.T) {
	t.Parallel()
	oldKey := mustKey(t, jwa.EdDSA, "old")
	newKey := mustKey(t, jwa.EdDSA, "new")
	b := setup(t, Options{}, oldKey)
	ctx := context.Background()
	claims := validClaims(b.clock.Now())
	oldTok, newTok := oldKey.sign(t, claims, nil), newKey.sign(t, claims, nil)

	_, err := b.v.Verify(ctx, oldTok)
	require.NoError(t, err)
	_, err = b.v.Verify(ctx, newTok)
	requireCode(t, err, contract.CodeTokenInvalid)

	// Rotation: the new key verifies at once; the old one, though its token was cached,
	// is refused as soon as it left the file.
	rewrite(t, b.path, jwksJSON(t, newKey), time.Now().Add(time.Minute))
	_, err = b.v.Verify(ctx, newTok)
	require.NoError(t, err)
	_, err = b.v.Verify(ctx, oldTok)
	requireCode(t, err, contract.CodeTokenInvalid)

	// A broken file keeps the keys in force.
	rewrite(t, b.path, []byte(`{"keys":`), time.Now().Add(2*time.Minute))
	_, err = b.v.Verify(ctx, newTok)
	require.NoError(t, err)
	require.NoError(t, os.Remove(b.path))
	_, err = b.v.Verify(ctx, newTok)
	require.NoError(t, err)

	// A copy that kept the old modification time and size is still picked up when a
	// token names a key the set lacks (once per UnknownKeyRefreshInterval).
	third := mustKey(t, jwa.EdDSA, "thr")
	rewrite(t, b.path, jwksJSON(t, newKey), time.Now().Add(3*time.Minute))
	_, err = b.v.Verify(ctx, newTok)
	require.NoError(t, err)
	info, err := os.Stat(b.path)
	require.NoError(t, err)
	doc := jwksJSON(t, third)
	require.Len(t, doc, int(info.Size()), "same-size document keeps the stamp")
	require.NoError(t, os.WriteFile(b.path, doc, 0o644))
	require.NoError(t, os.Chtimes(b.path, info.ModTime(), info.ModTime()))
	b.clock.Advance(UnknownKeyRefreshInterval)
	_, err = b.v.Verify(ctx, third.sign(t, claims, nil))
	require.NoError(t, err)
}

type urlBundle struct {
	v      *Verifier
	clock  *fakeClock
	server *jwksServer
}

const testRefreshInterval = 5 * time.Minute

func setupURL(t *testing.T, keys ...testKey) *urlBundle {
	t.Helper()
	return setupURLWith(t, Options{}, keys...)
}

// setupURLWith starts a key server holding keys and a verifier fetching from it;
// opts may set the logger and the URL source's timings.
func setupURLWith(t *testing.T, opts Options, keys ...testKey) *urlBundle {
	t.Helper()
	srv := newJWKSServer(t, jwksJSON(t, keys...))
	clock := newFakeClock()
	opts.JWKSURL = srv.URL + "/.well-known/jwks.json"
	opts.RefreshInterval = testRefreshInterval
	opts.Clock = clock
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.UnknownKeyWait == 0 {
		// Long enough that no test depends on how fast the loopback key server is.
		opts.UnknownKeyWait = time.Minute
	}
	v, err := New(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(v.Close)
	require.EqualValues(t, 1, srv.hits.Load())
	return &urlBundle{v: v, clock: clock, server: srv}
}

// settle waits for the key set fetch in flight, if any, to be in force.
func settle(t *testing.T, v *Verifier) {
	t.Helper()
	s := v.keys.(*urlSource)
	s.mu.Lock()
	round := s.round
	s.mu.Unlock()
	if round != nil {
		<-round.done
	}
}

func TestJWKSURLRotation(t *testing.T) {
	t.Parallel()
	oldKey := mustKey(t, jwa.EdDSA, "old")
	newKey := mustKey(t, jwa.ES256, "new")
	b := setupURL(t, oldKey)
	ctx := context.Background()
	claims := validClaims(b.clock.Now())
	oldTok, newTok := oldKey.sign(t, claims, nil), newKey.sign(t, claims, nil)

	_, err := b.v.Verify(ctx, oldTok)
	require.NoError(t, err)

	// A new kid appears. Within 30 s of the last fetch it is not fetched for...
	b.server.serve(jwksJSON(t, oldKey, newKey))
	_, err = b.v.Verify(ctx, newTok)
	requireCode(t, err, contract.CodeTokenInvalid)
	require.EqualValues(t, 1, b.server.hits.Load())
	// ...after that, the unknown kid triggers one fetch, waits for it and verifies.
	b.clock.Advance(UnknownKeyRefreshInterval)
	_, err = b.v.Verify(ctx, newTok)
	require.NoError(t, err)
	require.EqualValues(t, 2, b.server.hits.Load())
	_, err = b.v.Verify(ctx, oldTok)
	require.NoError(t, err)

	// The old key is removed. The request that notices the periodic refresh is due
	// does not wait for it (its cached token still passes); once the refresh is in,
	// the token is refused.
	b.server.serve(jwksJSON(t, newKey))
	b.clock.Advance(testRefreshInterval)
	_, err = b.v.Verify(ctx, oldTok)
	require.NoError(t, err)
	settle(t, b.v)
	_, err = b.v.Verify(ctx, oldTok)
	requireCode(t, err, contract.CodeTokenInvalid)
	require.EqualValues(t, 3, b.server.hits.Load())
	_, err = b.v.Verify(ctx, newTok)
	require.NoError(t, err)

	// A failing key server keeps the keys in force and is retried no sooner than 30 s.
	b.server.status.Store(http.StatusInternalServerError)
	b.clock.Advance(testRefreshInterval)
	_, err = b.v.Verify(ctx, newTok)
	require.NoError(t, err)
	settle(t, b.v)
	require.EqualValues(t, 4, b.server.hits.Load())
	_, err = b.v.Verify(ctx, newTok)
	require.NoError(t, err)
	settle(t, b.v)
	require.EqualValues(t, 4, b.server.hits.Load())
	b.clock.Advance(UnknownKeyRefreshInterval)
	_, err = b.v.Verify(ctx, newTok)
	require.NoError(t, err)
	settle(t, b.v)
	require.EqualValues(t, 5, b.server.hits.Load())

	// A document that is no usable key set is refused the same way.
	b.server.status.Store(http.StatusOK)
	b.server.serve([]byte(`{"keys":[{"kty":"oct","kid":"new","k":"c2VjcmV0"}]}`))
	b.clock.Advance(UnknownKeyRefreshInterval)
	_, err = b.v.Verify(ctx, newTok)
	require.NoError(t, err)
	settle(t, b.v)
	require.EqualValues(t, 6, b.server.hits.Load())
	_, err = b.v.Verify(ctx, newTok)
	require.NoError(t, err)
}

// TestJWKSURLRefreshOffTheRequestPath: while the key server hangs, the refresh waits
// for it in the background and every request is answered with the keys in force; a
// token naming a key the set lacks waits at most UnknownKeyWait.
func TestJWKSURLRefreshOffTheRequestPath(t *testing.T) {
	t.Parallel()
	key := mustKey(t, jwa.EdDSA, "current")
	next := mustKey(t, jwa.EdDSA, "next")
	logs := &lockedBuffer{}
	b := setupURLWith(t, Options{Logger: slog.New(slog.NewTextHandler(logs, nil)), UnknownKeyWait: time.Millisecond}, key)
	ctx := context.Background()
	claims := validClaims(b.clock.Now())
	tok, nextTok := key.sign(t, claims, nil), next.sign(t, claims, nil)

	entered, release := b.server.hang(t)
	b.server.serve(jwksJSON(t, key, next))
	b.clock.Advance(testRefreshInterval)
	// The request that notices the refresh is due starts it and goes on...
	_, err := b.v.Verify(ctx, tok)
	require.NoError(t, err)
	<-entered
	// ...and so does every request while the fetch hangs on the key server.
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			_, err := b.v.Verify(ctx, tok)
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	require.NotContains(t, logs.String(), "JWKS refresh failed", "no request waited for the fetch to give up")
	require.EqualValues(t, 2, b.server.hits.Load(), "one fetch for all of them")
	// A token with the key the hanging fetch would bring gives up after UnknownKeyWait.
	b.clock.Advance(UnknownKeyRefreshInterval)
	_, err = b.v.Verify(ctx, nextTok)
	requireCode(t, err, contract.CodeTokenInvalid)
	require.EqualValues(t, 2, b.server.hits.Load(), "it joined the fetch in flight")

	release()
	settle(t, b.v)
	_, err = b.v.Verify(ctx, nextTok)
	require.NoError(t, err)
	require.NotContains(t, logs.String(), "JWKS refresh failed")
}

// TestJWKSURLMaxStaleness: the last good key set keeps verifying while the key server
// fails, up to MaxStaleness after it was fetched; past it every token is refused with
// 503 (the token may be good, the key set is not) until a fetch succeeds again.
func TestJWKSURLMaxStaleness(t *testing.T) {
	t.Parallel()
	key := mustKey(t, jwa.EdDSA, "k")
	b := setupURLWith(t, Options{MaxStaleness: time.Hour, MaxTTL: 3 * time.Hour}, key)
	ctx := context.Background()
	tok := key.sign(t, with(validClaims(b.clock.Now()), map[string]any{"exp": b.clock.Now().Add(2 * time.Hour).Unix()}), nil)
	_, err := b.v.Verify(ctx, tok)
	require.NoError(t, err)

	b.server.status.Store(http.StatusBadGateway)
	b.clock.Advance(time.Hour)
	_, err = b.v.Verify(ctx, tok)
	require.NoError(t, err, "at the max staleness the set is still in force")
	settle(t, b.v)
	require.EqualValues(t, 2, b.server.hits.Load())

	b.clock.Advance(time.Second)
	_, err = b.v.Verify(ctx, tok)
	requireCode(t, err, contract.CodeServiceUnavailable)
	var re *runtime.Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, "key_set_stale", re.Details["reason"])

	// The key server recovers: the next due fetch puts the set back in force.
	b.server.status.Store(http.StatusOK)
	b.clock.Advance(UnknownKeyRefreshInterval)
	_, err = b.v.Verify(ctx, tok)
	requireCode(t, err, contract.CodeServiceUnavailable)
	settle(t, b.v)
	require.EqualValues(t, 3, b.server.hits.Load())
	_, err = b.v.Verify(ctx, tok)
	require.NoError(t, err)
}

func TestJWKSURLUnknownKidRateLimit(t *testing.T) {
	t.Parallel()
	key := mustKey(t, jwa.EdDSA, "only")
	b := setupURL(t, key)
	ctx := context.Background()
	claims := validClaims(b.clock.Now())
	strangers := make([]string, 100)
	for i := range strangers {
		strangers[i] = mustKey(t, jwa.EdDSA, fmt.Sprintf("stranger-%d", i)).sign(t, claims, nil)
	}
	burst := func() {
		var wg sync.WaitGroup
		for _, tok := range strangers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := b.v.Verify(ctx, tok)
				requireCode(t, err, contract.CodeTokenInvalid)
			}()
		}
		wg.Wait()
	}

	// Right after start: the start-up fetch counts, no refresh at all.
	burst()
	require.EqualValues(t, 1, b.server.hits.Load())

	// 30 s later: 100 unknown kids cause exactly one refresh...
	b.clock.Advance(UnknownKeyRefreshInterval)
	burst()
	require.EqualValues(t, 2, b.server.hits.Load())
	// ...and none more until 30 s have passed since it.
	b.clock.Advance(UnknownKeyRefreshInterval - time.Second)
	burst()
	require.EqualValues(t, 2, b.server.hits.Load())
	b.clock.Advance(time.Second)
	burst()
	require.EqualValues(t, 3, b.server.hits.Load())

	// The known key kept verifying throughout.
	_, err := b.v.Verify(ctx, key.sign(t, claims, nil))
	require.NoError(t, err)
}
