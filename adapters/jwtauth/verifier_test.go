package jwtauth

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jws"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// TestVerifyRefuses is the negative suite of docs/auth.md: every token here is refused
// with exactly the code given, and no message reveals an expected value.
func TestVerifyRefuses(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	now := b.clock.Now()
	valid := validClaims(now)
	good := b.key.sign(t, valid, nil)
	parts := strings.Split(good, ".")
	stranger := mustKey(t, jwa.EdDSA, "stranger")
	ecKey := mustKey(t, jwa.ES256, b.key.kid)

	hsWithPublicKey := func() string {
		h := jws.NewHeaders()
		require.NoError(t, h.Set(jws.KeyIDKey, b.key.kid))
		payload, err := json.Marshal(valid)
		require.NoError(t, err)
		signed, err := jws.Sign(payload, jws.WithKey(jwa.HS256, []byte(b.key.pub.(ed25519.PublicKey)), jws.WithProtectedHeaders(h)))
		require.NoError(t, err)
		return string(signed)
	}
	hsWithJWKS := func() string {
		h := jws.NewHeaders()
		require.NoError(t, h.Set(jws.KeyIDKey, b.key.kid))
		payload, err := json.Marshal(valid)
		require.NoError(t, err)
		signed, err := jws.Sign(payload, jws.WithKey(jwa.HS256, jwksJSON(t, b.key), jws.WithProtectedHeaders(h)))
		require.NoError(t, err)
		return string(signed)
	}
	tamper := func() string {
		c := with(valid, map[string]any{"tenant_id": "victim"})
		payload, err := json.Marshal(c)
		require.NoError(t, err)
		return parts[0] + "." + b64(string(payload)) + "." + parts[2]
	}
	noneHeader := b64(`{"alg":"none","kid":"` + b.key.kid + `"}`)
	payload, err := json.Marshal(valid)
	require.NoError(t, err)

	cases := []struct {
		name  string
		token string
		code  string
	}{
		{"empty", "", contract.CodeTokenInvalid},
		{"malformed", "not-a-jwt", contract.CodeTokenInvalid},
		{"four segments", good + ".AAAA", contract.CodeTokenInvalid},
		{"garbage segments", "a.b.c", contract.CodeTokenInvalid},
		{"header not JSON", b64("nope") + "." + parts[1] + "." + parts[2], contract.CodeTokenInvalid},
		{"JSON serialization", `{"payload":"` + parts[1] + `","signatures":[]}`, contract.CodeTokenInvalid},
		{"non-ASCII", parts[0] + ".é." + parts[2], contract.CodeTokenInvalid},
		{"padded base64", parts[0] + "=." + parts[1] + "." + parts[2], contract.CodeTokenInvalid},
		{"huge", parts[0] + "." + strings.Repeat("A", MaxTokenBytes) + "." + parts[2], contract.CodeTokenInvalid},
		{"alg none, empty signature", noneHeader + "." + b64(string(payload)) + ".", contract.CodeTokenInvalid},
		{"alg none, fake signature", noneHeader + "." + b64(string(payload)) + ".AAAA", contract.CodeTokenInvalid},
		{"HS256 signed with the public key bytes", hsWithPublicKey(), contract.CodeTokenInvalid},
		{"HS256 signed with the JWKS document", hsWithJWKS(), contract.CodeTokenInvalid},
		{"algorithm not matching the key", ecKey.sign(t, valid, nil), contract.CodeTokenInvalid},
		{"critical header", b.key.sign(t, valid, map[string]any{"crit": []string{"exp"}}), contract.CodeTokenInvalid},
		{"wrong issuer", b.key.sign(t, with(valid, map[string]any{"iss": "someone-else"}), nil), contract.CodeTokenInvalid},
		{"missing issuer", b.key.sign(t, with(valid, map[string]any{"iss": nil}), nil), contract.CodeTokenInvalid},
		{"wrong audience string", b.key.sign(t, with(valid, map[string]any{"aud": "other-service"}), nil), contract.CodeTokenInvalid},
		{"wrong audience array", b.key.sign(t, with(valid, map[string]any{"aud": []string{"a", "b"}}), nil), contract.CodeTokenInvalid},
		{"audience not a string", b.key.sign(t, with(valid, map[string]any{"aud": 7}), nil), contract.CodeTokenInvalid},
		{"missing audience", b.key.sign(t, with(valid, map[string]any{"aud": nil}), nil), contract.CodeTokenInvalid},
		{"expired", b.key.sign(t, with(valid, map[string]any{"iat": now.Add(-10 * time.Minute).Unix(), "exp": now.Add(-31 * time.Second).Unix()}), nil), contract.CodeTokenExpired},
		{"nbf in the future", b.key.sign(t, with(valid, map[string]any{"nbf": now.Add(31 * time.Second).Unix()}), nil), contract.CodeTokenExpired},
		{"lifetime over the max", b.key.sign(t, with(valid, map[string]any{"exp": now.Add(time.Hour + time.Second).Unix()}), nil), contract.CodeTokenInvalid},
		{"exp before iat", b.key.sign(t, with(valid, map[string]any{"iat": now.Unix(), "exp": now.Add(-time.Second).Unix()}), nil), contract.CodeTokenInvalid},
		{"iat in the future", b.key.sign(t, with(valid, map[string]any{"iat": now.Add(time.Hour).Unix(), "exp": now.Add(90 * time.Minute).Unix()}), nil), contract.CodeTokenInvalid},
		{"missing iat", b.key.sign(t, with(valid, map[string]any{"iat": nil}), nil), contract.CodeTokenInvalid},
		{"missing exp", b.key.sign(t, with(valid, map[string]any{"exp": nil}), nil), contract.CodeTokenInvalid},
		{"exp not a number", b.key.sign(t, with(valid, map[string]any{"exp": "soon"}), nil), contract.CodeTokenInvalid},
		{"unknown kid", stranger.sign(t, valid, nil), contract.CodeTokenInvalid},
		{"missing kid", b.key.sign(t, valid, map[string]any{jws.KeyIDKey: nil}), contract.CodeTokenInvalid},
		{"tampered payload", tamper(), contract.CodeTokenInvalid},
		{"tampered signature", parts[0] + "." + parts[1] + "." + b64("not the signature"), contract.CodeTokenInvalid},
		{"bad tenant_id", b.key.sign(t, with(valid, map[string]any{"tenant_id": "has space"}), nil), contract.CodeTokenInvalid},
		{"missing tenant_id", b.key.sign(t, with(valid, map[string]any{"tenant_id": nil}), nil), contract.CodeTokenInvalid},
		{"empty project_id", b.key.sign(t, with(valid, map[string]any{"project_id": ""}), nil), contract.CodeTokenInvalid},
		{"sub too long", b.key.sign(t, with(valid, map[string]any{"sub": strings.Repeat("s", contract.MaxIDChars+1)}), nil), contract.CodeTokenInvalid},
		{"sub not a string", b.key.sign(t, with(valid, map[string]any{"sub": 42}), nil), contract.CodeTokenInvalid},
		{"missing capabilities", b.key.sign(t, with(valid, map[string]any{"capabilities": nil}), nil), contract.CodeTokenInvalid},
		{"capabilities not strings", b.key.sign(t, with(valid, map[string]any{"capabilities": []any{"messages:read", 3}}), nil), contract.CodeTokenInvalid},
		{"capabilities a string", b.key.sign(t, with(valid, map[string]any{"capabilities": "messages:read"}), nil), contract.CodeTokenInvalid},
		{"user_token_hash not a SHA-256", b.key.sign(t, with(valid, map[string]any{"user_token_hash": "abc"}), nil), contract.CodeTokenInvalid},
		{"jti with whitespace", b.key.sign(t, with(valid, map[string]any{"jti": "a b"}), nil), contract.CodeTokenInvalid},
		{"duplicate claim", b.key.signRaw(t, []byte(`{"iss":"`+DefaultIssuer+`","iss":"x"}`), nil), contract.CodeTokenInvalid},
		{"wrong-case claim name", b.key.sign(t, with(valid, map[string]any{"tenant_id": nil, "Tenant_ID": "acme"}), nil), contract.CodeTokenInvalid},
		{"claims not an object", b.key.signRaw(t, []byte(`[1]`), nil), contract.CodeTokenInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := b.v.Verify(context.Background(), tc.token)
			requireCode(t, err, tc.code)
			var re *runtime.Error
			require.ErrorAs(t, err, &re)
			for _, secret := range []string{DefaultIssuer, Audience, b.key.kid, "acme"} {
				require.NotContains(t, re.Message, secret)
			}
		})
	}
}

func TestVerifyAccepts(t *testing.T) {
	t.Parallel()
	ed := mustKey(t, jwa.EdDSA, "ed")
	ec := mustKey(t, jwa.ES256, "ec")
	rs := mustKey(t, jwa.RS256, "rs")
	b := setup(t, Options{}, ed, ec, rs)
	now := b.clock.Now()
	valid := validClaims(now)
	want := Claims{
		Subject:      "agent-7",
		TenantID:     "acme",
		ProjectID:    "alpha",
		Capabilities: []string{contract.CapMessagesAppend, contract.CapMessagesRead, "future:thing"},
		TokenID:      "tok-1",
	}
	hash := UserTokenHash("user-token")
	cases := []struct {
		name   string
		key    testKey
		claims map[string]any
		want   Claims
	}{
		{"EdDSA", ed, valid, want},
		{"ES256", ec, valid, want},
		{"RS256", rs, valid, want},
		{"aud as a string", ed, with(valid, map[string]any{"aud": Audience}), want},
		{"aud as an array with others", ed, with(valid, map[string]any{"aud": []string{"x", Audience}}), want},
		{"expired within the skew", ed, with(valid, map[string]any{"iat": now.Add(-10 * time.Minute).Unix(), "exp": now.Add(-29 * time.Second).Unix()}), want},
		{"nbf within the skew", ed, with(valid, map[string]any{"nbf": now.Add(29 * time.Second).Unix()}), want},
		{"lifetime exactly the max", ed, with(valid, map[string]any{"exp": now.Add(time.Hour).Unix()}), want},
		{"fractional dates", ed, with(valid, map[string]any{"iat": float64(now.Unix()) + 0.5, "exp": float64(now.Unix()) + 60.25}), want},
		{"no jti", ed, with(valid, map[string]any{"jti": nil}), func() Claims { c := want; c.TokenID = ""; return c }()},
		{"empty capabilities", ed, with(valid, map[string]any{"capabilities": []string{}}), func() Claims { c := want; c.Capabilities = []string{}; return c }()},
		{"user token binding", ed, with(valid, map[string]any{"user_token_hash": hash}), func() Claims { c := want; c.UserTokenHash = hash; return c }()},
		{"other claims ignored", ed, with(valid, map[string]any{"scope": "x", "typ": 3}), want},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := b.v.Verify(context.Background(), tc.key.sign(t, tc.claims, nil))
			require.NoError(t, err)
			switch exp := tc.claims["exp"].(type) {
			case int64:
				require.Equal(t, exp, got.ExpiresAt.Unix())
			case float64:
				require.Equal(t, int64(exp), got.ExpiresAt.Unix())
			default:
				t.Fatalf("exp of type %T", exp)
			}
			got.ExpiresAt = time.Time{}
			require.Equal(t, tc.want, got)
		})
	}
}

func TestAlgorithmAllowList(t *testing.T) {
	t.Parallel()
	ed := mustKey(t, jwa.EdDSA, "ed")
	ec := mustKey(t, jwa.ES256, "ec")
	b := setup(t, Options{Algorithms: []string{"ES256"}}, ed, ec)
	claims := validClaims(b.clock.Now())
	_, err := b.v.Verify(context.Background(), ed.sign(t, claims, nil))
	requireCode(t, err, contract.CodeTokenInvalid)
	_, err = b.v.Verify(context.Background(), ec.sign(t, claims, nil))
	require.NoError(t, err)

	for _, algs := range [][]string{{"HS256"}, {"none"}, {"EdDSA", "hs512"}, {"XYZ"}} {
		_, err := New(context.Background(), Options{JWKSFile: b.path, Algorithms: algs})
		require.Error(t, err, "%v", algs)
	}
}

func TestParseAlgorithms(t *testing.T) {
	t.Parallel()
	got, err := ParseAlgorithms(" eddsa, ES256,RS256 ,EdDSA")
	require.NoError(t, err)
	require.Equal(t, []string{"EdDSA", "ES256", "RS256"}, got)
	for _, bad := range []string{"", " , ", "none", "HS256", "EdDSA,HS384", "ES256K", "RSA"} {
		_, err := ParseAlgorithms(bad)
		require.Error(t, err, bad)
	}
}

func TestNewNeedsAKeySet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, err := New(ctx, Options{})
	require.Error(t, err)
	_, err = New(ctx, Options{JWKSFile: "/nonexistent/jwks.json"})
	require.Error(t, err)
	_, err = New(ctx, Options{JWKSFile: "a", JWKSURL: "http://b"})
	require.Error(t, err)
	_, err = New(ctx, Options{JWKSURL: "ftp://keys"})
	require.Error(t, err)

	// A key set with only symmetric, encryption or kid-less keys is no key set.
	b := setup(t, Options{})
	for _, doc := range []string{
		`{"keys":[]}`,
		`{"keys":[{"kty":"oct","kid":"s","k":"c2VjcmV0"}]}`,
		`not json`,
	} {
		_, err := parseKeySet([]byte(doc))
		require.Error(t, err, doc)
	}
	_, err = New(ctx, Options{JWKSURL: "http://127.0.0.1:1/jwks"})
	require.Error(t, err)
	require.NotNil(t, b)
}

func TestMintRoundTrip(t *testing.T) {
	t.Parallel()
	key, err := GenerateKey()
	require.NoError(t, err)
	require.NotEmpty(t, key.KeyID())
	set, err := PublicSet(key)
	require.NoError(t, err)
	data, err := json.Marshal(set)
	require.NoError(t, err)
	require.NotContains(t, string(data), `"d"`, "the public set must not carry the private key")

	ks, err := parseKeySet(data)
	require.NoError(t, err)
	v := &Verifier{issuer: DefaultIssuer, maxTTL: DefaultMaxTTL, algs: map[jwa.SignatureAlgorithm]bool{jwa.EdDSA: true},
		clock: runtime.SystemClock{}, keys: staticSource{ks}}
	tok, err := Mint(key, Token{Subject: "s", TenantID: "t", ProjectID: "p", Capabilities: []string{"a2a:send"},
		UserToken: "u", TokenID: "j", TTL: 15 * time.Minute})
	require.NoError(t, err)
	minted := time.Now()
	got, err := v.Verify(context.Background(), tok)
	require.NoError(t, err)
	require.WithinDuration(t, minted.Add(15*time.Minute), got.ExpiresAt, 2*time.Second, "exp is the mint time plus the TTL")
	got.ExpiresAt = time.Time{}
	require.Equal(t, Claims{Subject: "s", TenantID: "t", ProjectID: "p", Capabilities: []string{"a2a:send"},
		UserTokenHash: UserTokenHash("u"), TokenID: "j"}, got)

	_, err = Mint(key, Token{Subject: "s"})
	require.Error(t, err, "a TTL is required")
}

// staticSource is a key set that never changes.
type staticSource struct{ set *keySet }

func (s staticSource) current(context.Context) (*keySet, error)            { return s.set, nil }
func (s staticSource) unknownKey(context.Context, string, *keySet) *keySet { return s.set }
func (s staticSource) close()                                              {}

func TestVerifiedTokenCache(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{CacheSize: 8})
	ctx := context.Background()
	now := b.clock.Now()
	tok := b.key.sign(t, with(validClaims(now), map[string]any{"exp": now.Add(time.Minute).Unix()}), nil)
	first, err := b.v.Verify(ctx, tok)
	require.NoError(t, err)
	second, err := b.v.Verify(ctx, tok)
	require.NoError(t, err)
	require.Equal(t, first, second)
	require.Equal(t, 1, b.v.cache.len())

	// The cache never serves a token past its expiry.
	b.clock.Advance(time.Minute + ClockSkew)
	_, err = b.v.Verify(ctx, tok)
	requireCode(t, err, contract.CodeTokenExpired)

	// It stays bounded.
	now = b.clock.Now()
	for i := 0; i < 100; i++ {
		_, err := b.v.Verify(ctx, b.key.sign(t, with(validClaims(now), map[string]any{"jti": "j" + string(rune('a'+i%26)) + strings.Repeat("x", i)}), nil))
		require.NoError(t, err)
		require.LessOrEqual(t, b.v.cache.len(), 8)
	}
}
