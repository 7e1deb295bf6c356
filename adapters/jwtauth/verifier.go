package jwtauth

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jws"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// Fixed rules of docs/auth.md.
const (
	// DefaultIssuer is the expected iss when AGENT_CONTEXT_TOKEN_ISSUER is unset.
	DefaultIssuer = "agent-runtime-identity"
	// Audience is the aud every runtime token must name.
	Audience = contract.Service
	// DefaultMaxTTL bounds exp - iat when AGENT_CONTEXT_TOKEN_MAX_TTL is unset.
	DefaultMaxTTL = time.Hour
	// ClockSkew is allowed on exp, nbf and iat.
	ClockSkew = 30 * time.Second
	// UnknownKeyRefreshInterval is the least time between two key set reloads caused
	// by tokens naming an unknown kid.
	UnknownKeyRefreshInterval = 30 * time.Second
	// DefaultRefreshInterval is how often a JWKS URL is fetched again.
	DefaultRefreshInterval = 5 * time.Minute
	// DefaultMaxStaleness is how long the last good key set fetched from a JWKS URL
	// keeps verifying while the key server cannot be reached: long enough to ride out
	// an outage of the identity service, short enough that a key it withdrew is not
	// trusted for long by a replica cut off from it.
	DefaultMaxStaleness = time.Hour
	// DefaultUnknownKeyWait is the longest a token naming an unknown kid waits for
	// the key set fetch it triggered (a key server answers in milliseconds; one that
	// hangs holds such a request this long, and no other request at all).
	DefaultUnknownKeyWait = time.Second
	// DefaultCacheSize bounds the verified-token cache.
	DefaultCacheSize = 10_000
	// MaxTokenBytes bounds a token; anything longer is refused before parsing.
	MaxTokenBytes = 8 << 10
)

// Claims is what a verified runtime token asserts: the runtime's TokenClaims.
// Capabilities is shared with the verified-token cache: callers must not modify it.
type Claims = runtime.TokenClaims

var _ runtime.TokenVerifier = (*Verifier)(nil)

// Options configure a Verifier. Exactly one of JWKSFile and JWKSURL is required.
type Options struct {
	// JWKSFile is a JWKS document on disk, re-read when it changes.
	JWKSFile string
	// JWKSURL is fetched at start, every RefreshInterval and on an unknown kid.
	JWKSURL string
	// Issuer is the required iss (default DefaultIssuer).
	Issuer string
	// MaxTTL bounds exp - iat (default DefaultMaxTTL).
	MaxTTL time.Duration
	// Algorithms is the allow-list (default DefaultAlgorithms); none and HS* are refused.
	Algorithms []string
	// RefreshInterval for JWKSURL (default DefaultRefreshInterval).
	RefreshInterval time.Duration
	// MaxStaleness for JWKSURL (default DefaultMaxStaleness): past it without a
	// successful fetch, tokens are refused with SERVICE_UNAVAILABLE.
	MaxStaleness time.Duration
	// UnknownKeyWait for JWKSURL (default DefaultUnknownKeyWait).
	UnknownKeyWait time.Duration
	// CacheSize bounds the verified-token cache (default DefaultCacheSize; negative
	// disables it).
	CacheSize int
	// HTTPClient fetches JWKSURL (default: a client with a 10 s timeout).
	HTTPClient *http.Client
	// Clock tells the time (default the wall clock); tests pass their own.
	Clock runtime.Clock
	// Logger receives key set reload failures (default slog.Default()).
	Logger *slog.Logger
}

// Verifier verifies runtime tokens. It is safe for concurrent use. Close stops the
// background refresh of a JWKS URL.
type Verifier struct {
	issuer string
	maxTTL time.Duration
	algs   map[jwa.SignatureAlgorithm]bool
	clock  runtime.Clock
	keys   keySource
	cache  *tokenCache
	closed sync.Once
}

// New returns a Verifier for opts. It loads the key set once and fails when it cannot:
// the service never starts with a key set it could not read.
func New(ctx context.Context, opts Options) (*Verifier, error) {
	v := &Verifier{
		issuer: opts.Issuer,
		maxTTL: opts.MaxTTL,
		algs:   map[jwa.SignatureAlgorithm]bool{},
		clock:  opts.Clock,
	}
	if v.issuer == "" {
		v.issuer = DefaultIssuer
	}
	if v.maxTTL <= 0 {
		v.maxTTL = DefaultMaxTTL
	}
	if v.clock == nil {
		v.clock = runtime.SystemClock{}
	}
	algs := opts.Algorithms
	if len(algs) == 0 {
		algs = DefaultAlgorithms
	}
	for _, name := range algs {
		alg, err := canonicalAlgorithm(name)
		if err != nil {
			return nil, err
		}
		v.algs[jwa.SignatureAlgorithm(alg)] = true
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	var err error
	switch {
	case opts.JWKSFile != "" && opts.JWKSURL != "":
		return nil, errors.New("give a JWKS file or a JWKS URL, not both")
	case opts.JWKSFile != "":
		v.keys, err = newFileSource(opts.JWKSFile, v.clock, log)
	case opts.JWKSURL != "":
		if u, perr := url.Parse(opts.JWKSURL); perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("JWKS URL %q must be an absolute http or https URL", opts.JWKSURL)
		}
		client := opts.HTTPClient
		if client == nil {
			client = &http.Client{Timeout: fetchTimeout}
		}
		if opts.RefreshInterval <= 0 {
			opts.RefreshInterval = DefaultRefreshInterval
		}
		if opts.MaxStaleness <= 0 {
			opts.MaxStaleness = DefaultMaxStaleness
		}
		if opts.UnknownKeyWait <= 0 {
			opts.UnknownKeyWait = DefaultUnknownKeyWait
		}
		v.keys, err = newURLSource(ctx, opts.JWKSURL, client, opts, v.clock, log)
	default:
		return nil, errors.New("a JWKS file or a JWKS URL is required")
	}
	if err != nil {
		return nil, err
	}
	size := opts.CacheSize
	if size == 0 {
		size = DefaultCacheSize
	}
	if size > 0 {
		v.cache = newTokenCache(size)
	}
	return v, nil
}

// Close stops the verifier's background work (the refresh of a JWKS URL). Verify
// keeps answering with the keys in force.
func (v *Verifier) Close() { v.closed.Do(v.keys.close) }

func invalid(msg string) *runtime.Error { return runtime.Errorf(contract.CodeTokenInvalid, "%s", msg) }
func expired(msg string) *runtime.Error { return runtime.Errorf(contract.CodeTokenExpired, "%s", msg) }

// Verify checks token against every rule of docs/auth.md and returns its claims. It
// returns *runtime.Error with INTERNAL_TOKEN_INVALID (malformed, disallowed algorithm,
// missing or unknown kid, bad signature, wrong issuer or audience, missing or invalid
// claim, lifetime over the maximum) or INTERNAL_TOKEN_EXPIRED (exp passed, nbf in the
// future). Messages name the rule that failed, never an expected value. When the key
// set of a JWKS URL is older than the maximum staleness, it returns
// SERVICE_UNAVAILABLE (reason key_set_stale): the token may well be good.
func (v *Verifier) Verify(ctx context.Context, token string) (Claims, error) {
	if !compactJWS(token) {
		return Claims{}, invalid("the runtime token is malformed")
	}
	now := v.clock.Now()
	set, err := v.keys.current(ctx)
	if err != nil {
		return Claims{}, err
	}
	var key [32]byte
	if v.cache != nil {
		key = cacheKey(token)
		if c, ok := v.cache.get(key, now, set.gen); ok {
			return c, nil
		}
	}
	claims, deadline, gen, err := v.verify(ctx, token, set, now)
	if err != nil {
		return Claims{}, err
	}
	if v.cache != nil {
		v.cache.put(key, cacheEntry{claims: claims, deadline: deadline, gen: gen}, now)
	}
	return claims, nil
}

// compactJWS reports whether token has the shape of a compact JWS: three non-empty
// base64url segments, nothing else, within MaxTokenBytes. Garbage (non-ASCII, the JSON
// serialisation, an unsigned token with an empty signature) stops here, unparsed.
func compactJWS(token string) bool {
	if len(token) > MaxTokenBytes {
		return false
	}
	dots, segment := 0, 0
	for i := 0; i < len(token); i++ {
		c := token[i]
		switch {
		case c == '.':
			if segment == 0 {
				return false
			}
			dots, segment = dots+1, 0
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_':
			segment++
		default:
			return false
		}
	}
	return dots == 2 && segment > 0
}

// verify is the full check. It returns the claims, the time until which they may be
// served from the cache, and the generation of the key set that verified them.
func (v *Verifier) verify(ctx context.Context, token string, set *keySet, now time.Time) (Claims, time.Time, uint64, error) {
	var keyErr *runtime.Error
	var gen uint64
	provider := jws.KeyProviderFunc(func(ctx context.Context, sink jws.KeySink, sig *jws.Signature, _ *jws.Message) error {
		h := sig.ProtectedHeaders()
		alg := h.Algorithm()
		if !v.algs[alg] {
			keyErr = invalid("the runtime token's signing algorithm is not accepted")
			return keyErr
		}
		if len(h.Critical()) > 0 {
			keyErr = invalid("the runtime token has critical header parameters this service does not support")
			return keyErr
		}
		if _, ok := h.Get("b64"); ok {
			keyErr = invalid("the runtime token uses an unsupported payload encoding")
			return keyErr
		}
		kid := h.KeyID()
		if kid == "" {
			keyErr = invalid("the runtime token has no key ID (kid)")
			return keyErr
		}
		k, ok := set.keys[kid]
		if !ok {
			set = v.keys.unknownKey(ctx, kid, set)
			if k, ok = set.keys[kid]; !ok {
				keyErr = invalid("the runtime token's signing key is not known")
				return keyErr
			}
		}
		if !k.fits(alg) {
			keyErr = invalid("the runtime token's signing algorithm does not match its key")
			return keyErr
		}
		gen = set.gen
		sink.Key(alg, k.raw)
		return nil
	})
	payload, err := jws.Verify([]byte(token), jws.WithCompact(), jws.WithKeyProvider(provider), jws.WithContext(ctx))
	switch {
	case keyErr != nil:
		return Claims{}, time.Time{}, 0, keyErr
	case err != nil && jws.IsVerificationError(err):
		return Claims{}, time.Time{}, 0, invalid("the runtime token's signature is not valid")
	case err != nil:
		return Claims{}, time.Time{}, 0, invalid("the runtime token is malformed")
	}
	claims, deadline, rerr := v.checkClaims(payload, now)
	if rerr != nil {
		return Claims{}, time.Time{}, 0, rerr
	}
	return claims, deadline, gen, nil
}

// payloadClaims is the claim set as signed. Pointers tell absent from empty. The
// decoder is case-sensitive and refuses duplicate names and invalid UTF-8; other
// claims are ignored.
type payloadClaims struct {
	Issuer        *string        `json:"iss"`
	Subject       *string        `json:"sub"`
	Audience      jsontext.Value `json:"aud"`
	ExpiresAt     *float64       `json:"exp"`
	NotBefore     *float64       `json:"nbf"`
	IssuedAt      *float64       `json:"iat"`
	TenantID      *string        `json:"tenant_id"`
	ProjectID     *string        `json:"project_id"`
	Capabilities  []string       `json:"capabilities"`
	UserTokenHash *string        `json:"user_token_hash"`
	TokenID       *string        `json:"jti"`
}

// checkClaims applies the claim rules: first everything that makes a token invalid
// whatever the time, then the time window, so EXPIRED means "valid but too old/young".
func (v *Verifier) checkClaims(payload []byte, now time.Time) (Claims, time.Time, *runtime.Error) {
	var pc payloadClaims
	if err := json.Unmarshal(payload, &pc); err != nil {
		return Claims{}, time.Time{}, invalid("the runtime token's claims are malformed")
	}
	if pc.Issuer == nil || *pc.Issuer != v.issuer {
		return Claims{}, time.Time{}, invalid("the runtime token's issuer is not accepted")
	}
	if !hasAudience(pc.Audience, Audience) {
		return Claims{}, time.Time{}, invalid("the runtime token is not meant for this service (aud)")
	}
	exp, ok := numericDate(pc.ExpiresAt)
	if !ok {
		return Claims{}, time.Time{}, invalid("the runtime token lacks a valid exp claim")
	}
	iat, ok := numericDate(pc.IssuedAt)
	if !ok {
		return Claims{}, time.Time{}, invalid("the runtime token lacks a valid iat claim")
	}
	if exp.Before(iat) || exp.Sub(iat) > v.maxTTL {
		return Claims{}, time.Time{}, invalid("the runtime token's lifetime exceeds the maximum")
	}
	if iat.After(now.Add(ClockSkew)) {
		return Claims{}, time.Time{}, invalid("the runtime token's iat claim is in the future")
	}
	var nbf time.Time
	if pc.NotBefore != nil {
		if nbf, ok = numericDate(pc.NotBefore); !ok {
			return Claims{}, time.Time{}, invalid("the runtime token's nbf claim is not valid")
		}
	}
	c := Claims{Capabilities: pc.Capabilities, ExpiresAt: exp}
	for _, id := range []struct {
		name string
		v    *string
		dst  *string
	}{{"sub", pc.Subject, &c.Subject}, {"tenant_id", pc.TenantID, &c.TenantID}, {"project_id", pc.ProjectID, &c.ProjectID}} {
		if id.v == nil || runtime.ValidateID(id.name, *id.v) != nil {
			return Claims{}, time.Time{}, invalid("the runtime token's " + id.name + " claim is missing or not a valid ID")
		}
		*id.dst = *id.v
	}
	if c.Capabilities == nil {
		return Claims{}, time.Time{}, invalid("the runtime token lacks the capabilities claim")
	}
	if pc.UserTokenHash != nil {
		if !validHash(*pc.UserTokenHash) {
			return Claims{}, time.Time{}, invalid("the runtime token's user_token_hash claim is not a base64url SHA-256")
		}
		c.UserTokenHash = *pc.UserTokenHash
	}
	if pc.TokenID != nil {
		if runtime.ValidateID("jti", *pc.TokenID) != nil {
			return Claims{}, time.Time{}, invalid("the runtime token's jti claim is not a valid ID")
		}
		c.TokenID = *pc.TokenID
	}
	deadline := exp.Add(ClockSkew)
	if !now.Before(deadline) {
		return Claims{}, time.Time{}, expired("the runtime token has expired")
	}
	if !nbf.IsZero() && nbf.After(now.Add(ClockSkew)) {
		return Claims{}, time.Time{}, expired("the runtime token is not valid yet (nbf)")
	}
	return c, deadline, nil
}

// hasAudience reports whether aud is want or an array of strings containing it.
func hasAudience(aud jsontext.Value, want string) bool {
	switch aud.Kind() {
	case '"':
		var s string
		return json.Unmarshal(aud, &s) == nil && s == want
	case '[':
		var list []string
		return json.Unmarshal(aud, &list) == nil && slices.Contains(list, want)
	}
	return false
}

// maxNumericDate is far enough (year 5138) for any real token and keeps the
// conversion to time.Time exact.
const maxNumericDate = 1e11

// numericDate converts a JWT NumericDate (seconds, possibly fractional).
func numericDate(v *float64) (time.Time, bool) {
	if v == nil || *v < 0 || *v > maxNumericDate {
		return time.Time{}, false
	}
	sec, frac := math.Modf(*v)
	return time.Unix(int64(sec), int64(frac*1e9)), true
}

// validHash reports whether s is base64url without padding of 32 bytes.
func validHash(s string) bool {
	if len(s) != base64.RawURLEncoding.EncodedLen(32) {
		return false
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	return err == nil && len(b) == 32 && !strings.ContainsAny(s, "=+/")
}
