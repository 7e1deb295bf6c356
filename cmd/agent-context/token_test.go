package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/jwtauth"
	"github.com/agent-context/agent-context/contract"
)

// tokenEnv is a getenv over a map, with AGENT_CONTEXT_DATA_DIR in a temp directory.
func tokenEnv(t *testing.T, extra ...string) (map[string]string, func(string) string) {
	t.Helper()
	env := map[string]string{"AGENT_CONTEXT_DATA_DIR": t.TempDir()}
	for i := 0; i+1 < len(extra); i += 2 {
		env[extra[i]] = extra[i+1]
	}
	return env, func(k string) string { return env[k] }
}

// mustToken runs `agent-context token ...` and returns its output.
func mustToken(t *testing.T, getenv func(string) string, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), append([]string{"token"}, args...), getenv, &out))
	return out.String()
}

func TestTokenKeygenAndMint(t *testing.T) {
	t.Parallel()
	env, getenv := tokenEnv(t)
	out := mustToken(t, getenv, "keygen")
	keys := filepath.Join(env["AGENT_CONTEXT_DATA_DIR"], "keys")
	require.Contains(t, out, "AGENT_CONTEXT_JWKS_FILE="+filepath.Join(keys, "jwks.json"))

	info, err := os.Stat(filepath.Join(keys, "signing.jwk"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	set, err := os.ReadFile(filepath.Join(keys, "jwks.json"))
	require.NoError(t, err)
	require.Contains(t, string(set), `"OKP"`)
	require.NotContains(t, string(set), `"d"`, "the JWKS must hold the public key only")

	// A second keygen does not silently replace the key.
	var buf bytes.Buffer
	require.ErrorContains(t, run(context.Background(), []string{"token", "keygen"}, getenv, &buf), "--force")

	tok := strings.TrimSpace(mustToken(t, getenv, "mint", "--sub", "agent-7", "--tenant", "acme", "--project", "alpha",
		"--cap", "messages:append", "--cap", "messages:read,context:read", "--ttl", "10m", "--user-token", "user-secret", "--jti", "j-1"))
	cfg, err := LoadConfig(func(k string) string {
		if k == "AGENT_CONTEXT_JWKS_FILE" {
			return filepath.Join(keys, "jwks.json")
		}
		return getenv(k)
	})
	require.NoError(t, err)
	v, err := newTokenVerifier(context.Background(), cfg, cfg.NewLogger(), nil)
	require.NoError(t, err)
	claims, err := v.Verify(context.Background(), tok)
	require.NoError(t, err)
	require.Equal(t, "agent-7", claims.Subject)
	require.Equal(t, "acme", claims.TenantID)
	require.Equal(t, "alpha", claims.ProjectID)
	require.Equal(t, []string{"messages:append", "messages:read", "context:read"}, claims.Capabilities)
	require.Equal(t, jwtauth.UserTokenHash("user-secret"), claims.UserTokenHash)
	require.Equal(t, "j-1", claims.TokenID)

	// --force rotates: the old token no longer verifies against the new key set.
	mustToken(t, getenv, "keygen", "--force")
	_, err = v.Verify(context.Background(), tok)
	require.ErrorContains(t, err, contract.CodeTokenInvalid)
}

func TestTokenCommandErrors(t *testing.T) {
	t.Parallel()
	_, getenv := tokenEnv(t, "AGENT_CONTEXT_TOKEN_MAX_TTL", "20m")
	mustToken(t, getenv, "keygen")
	base := []string{"token", "mint", "--sub", "s", "--tenant", "t", "--project", "p"}
	for _, args := range [][]string{
		{"token"},
		{"token", "rotate"},
		{"token", "mint", "--tenant", "t", "--project", "p"},
		{"token", "mint", "--sub", "has space", "--tenant", "t", "--project", "p"},
		append(base, "--cap", "messages:apend"),
		append(base, "--ttl", "21m"),
		append(base, "--ttl", "-1m"),
		append(base, "--bogus"),
		append(base, "extra"),
	} {
		var out bytes.Buffer
		err := run(context.Background(), args, getenv, &out)
		var usage usageError
		require.ErrorAs(t, err, &usage, "%v", args)
	}
	var out bytes.Buffer
	require.ErrorContains(t, run(context.Background(), append(base, "--key", "/nonexistent.jwk"), getenv, &out), "keygen")
	require.NoError(t, run(context.Background(), []string{"token", "mint", "-h"}, getenv, &out))
	require.Contains(t, out.String(), "token mint")
}

func TestTokenConfig(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig(func(string) string { return "" })
	require.NoError(t, err)
	require.Equal(t, "agent-runtime-identity", cfg.TokenIssuer)
	require.Equal(t, time.Hour, cfg.TokenMaxTTL)
	require.Equal(t, []string{"EdDSA", "ES256", "RS256"}, cfg.TokenAlgorithms)
	v, err := newTokenVerifier(context.Background(), cfg, cfg.NewLogger(), nil)
	require.NoError(t, err)
	require.Nil(t, v, "no JWKS, no runtime-token mode")

	cfg, err = LoadConfig(func(k string) string {
		return map[string]string{
			"AGENT_CONTEXT_JWKS_URL":         "https://identity.example/jwks.json",
			"AGENT_CONTEXT_TOKEN_ISSUER":     "my-issuer",
			"AGENT_CONTEXT_TOKEN_MAX_TTL":    "5m",
			"AGENT_CONTEXT_TOKEN_ALGORITHMS": "ES256, eddsa",
		}[k]
	})
	require.NoError(t, err)
	require.Equal(t, "my-issuer", cfg.TokenIssuer)
	require.Equal(t, 5*time.Minute, cfg.TokenMaxTTL)
	require.Equal(t, []string{"ES256", "EdDSA"}, cfg.TokenAlgorithms)

	for _, bad := range []struct{ env map[string]string }{
		{map[string]string{"AGENT_CONTEXT_TOKEN_ALGORITHMS": "HS256"}},
		{map[string]string{"AGENT_CONTEXT_TOKEN_ALGORITHMS": "EdDSA,none"}},
		{map[string]string{"AGENT_CONTEXT_TOKEN_ALGORITHMS": "ES257"}},
		{map[string]string{"AGENT_CONTEXT_TOKEN_MAX_TTL": "forever"}},
		{map[string]string{"AGENT_CONTEXT_TOKEN_MAX_TTL": "-1h"}},
		{map[string]string{"AGENT_CONTEXT_JWKS_URL": "ftp://keys/jwks.json"}},
		{map[string]string{"AGENT_CONTEXT_JWKS_URL": "/jwks.json"}},
		{map[string]string{"AGENT_CONTEXT_JWKS_FILE": "a.json", "AGENT_CONTEXT_JWKS_URL": "https://b/jwks.json"}},
	} {
		_, err := LoadConfig(func(k string) string { return bad.env[k] })
		require.Error(t, err, "%v", bad.env)
		for name := range bad.env {
			require.ErrorContains(t, err, name)
		}
	}

	// A configured key set that cannot be read stops the start, naming the cause.
	cfg, err = LoadConfig(func(k string) string {
		return map[string]string{"AGENT_CONTEXT_JWKS_FILE": "/nonexistent/jwks.json", "AGENT_CONTEXT_DATABASE_URL": "postgres://unused"}[k]
	})
	require.NoError(t, err)
	require.ErrorContains(t, NewMain(cfg).Run(context.Background()), "JWKS")
}

// TestRuntimeTokenEndToEnd starts the real Main with a key from `token keygen` and the
// static token as well, and calls it over HTTP with tokens from `token mint`.
func TestRuntimeTokenEndToEnd(t *testing.T) {
	t.Parallel()
	app, minter := startSecuredApp(t, func(c *Config) {
		c.ServiceToken = "static-secret"
	})
	app.do(t, http.MethodGet, "/health", nil).requireOK(t, http.StatusOK, nil)

	// Every route's capability is the server package's test
	// (TestEveryRouteRequiresItsCapability); this one proves the wiring of Main.
	route := contract.RouteMessagesRecent
	path, body := route.Path, `{"scope":{"conversationId":"c"}}`
	mint, other := minter.bearer, contract.CapMessagesAppend
	app.do(t, route.Method, path, body).requireError(t, http.StatusUnauthorized, contract.CodeTokenMissing)
	app.do(t, route.Method, path, body, "Authorization", "Bearer not.a.token").requireError(t, http.StatusUnauthorized, contract.CodeTokenInvalid)
	e := app.do(t, route.Method, path, body, "Authorization", mint(other)).requireError(t, http.StatusForbidden, contract.CodeTokenForbidden)
	require.Equal(t, route.Capabilities[0], e.Details["requiredCapability"])
	app.do(t, route.Method, path, body, "Authorization", mint(route.Capabilities[0]), "x-infra-tenant-id", "globex").
		requireError(t, http.StatusForbidden, contract.CodeScopeForbidden)
	for _, credential := range []string{mint(route.Capabilities[0]), "Bearer static-secret"} {
		app.do(t, route.Method, path, body, "Authorization", credential).requireOK(t, http.StatusOK, nil)
	}
}

// signer signs arbitrary claims and headers with the key `token keygen` wrote, so the
// negative suite can build every malformed token a client could send.
type signer struct {
	kid  string
	priv ed25519.PrivateKey
	pub  ed25519.PublicKey
	jwks []byte
}

func newSigner(t *testing.T, getenv func(string) string) signer {
	t.Helper()
	dir := filepath.Join(getenv("AGENT_CONTEXT_DATA_DIR"), "keys")
	data, err := os.ReadFile(filepath.Join(dir, "signing.jwk"))
	require.NoError(t, err)
	key, err := jwk.ParseKey(data)
	require.NoError(t, err)
	// The raw key, not the JWK: jwx would otherwise put the JWK's kid back into every
	// header, and the suite needs tokens without one.
	var priv ed25519.PrivateKey
	require.NoError(t, key.Raw(&priv))
	set, err := os.ReadFile(filepath.Join(dir, "jwks.json"))
	require.NoError(t, err)
	return signer{kid: key.KeyID(), priv: priv, pub: priv.Public().(ed25519.PublicKey), jwks: set}
}

// claims is a claim set the service accepts for tenant acme, project alpha, holding
// messages:read.
func (s signer) claims(changes map[string]any) map[string]any {
	now := time.Now()
	c := map[string]any{
		"iss": jwtauth.DefaultIssuer, "aud": []string{jwtauth.Audience}, "sub": "agent-7",
		"tenant_id": "acme", "project_id": "alpha", "capabilities": []string{contract.CapMessagesRead},
		"iat": now.Unix(), "exp": now.Add(10 * time.Minute).Unix(), "jti": "neg-1",
	}
	for k, v := range changes {
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	return c
}

// sign signs claims with alg and key; headers override protected headers (nil removes).
func (s signer) sign(t *testing.T, claims map[string]any, alg jwa.SignatureAlgorithm, key any, headers map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	require.NoError(t, err)
	h := jws.NewHeaders()
	require.NoError(t, h.Set(jws.KeyIDKey, s.kid))
	for name, v := range headers {
		if v == nil {
			require.NoError(t, h.Remove(name))
			continue
		}
		require.NoError(t, h.Set(name, v))
	}
	out, err := jws.Sign(payload, jws.WithKey(alg, key, jws.WithProtectedHeaders(h)))
	require.NoError(t, err)
	return string(out)
}

func (s signer) valid(t *testing.T, changes map[string]any) string {
	t.Helper()
	return s.sign(t, s.claims(changes), jwa.EdDSA, s.priv, nil)
}

// TestRuntimeTokenNegativeSuite sends every kind of bad credential to the real service
// in runtime-token mode and expects exactly the documented status and code, an auth
// envelope whose message names no expected value, and a WWW-Authenticate on each 401.
func TestRuntimeTokenNegativeSuite(t *testing.T) {
	t.Parallel()
	app, minter := startSecuredApp(t)
	s := newSigner(t, minter.getenv)
	route := contract.RouteMessagesRecent
	body := `{"scope":{"conversationId":"c"}}`

	good := s.valid(t, nil)
	parts := strings.Split(good, ".")
	b64 := base64.RawURLEncoding.EncodeToString
	tampered := func() string {
		payload, err := json.Marshal(s.claims(map[string]any{"tenant_id": "victim"}))
		require.NoError(t, err)
		return parts[0] + "." + b64(payload) + "." + parts[2]
	}()
	noneToken := b64([]byte(`{"alg":"none","kid":"`+s.kid+`"}`)) + "." + parts[1] + "."
	_, strangerPriv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	bound := s.valid(t, map[string]any{"user_token_hash": jwtauth.UserTokenHash("user-secret")})
	now := time.Now()

	cases := []struct {
		name    string
		headers []string
		status  int
		code    string
	}{
		{"missing token", nil, 401, contract.CodeTokenMissing},
		{"empty bearer", []string{"Authorization", "Bearer "}, 401, contract.CodeTokenMissing},
		{"basic scheme", []string{"Authorization", "Basic YTpi"}, 401, contract.CodeTokenMissing},
		{"token without scheme", []string{"Authorization", good}, 401, contract.CodeTokenMissing},
		{"malformed", []string{"Authorization", "Bearer not-a-jwt"}, 401, contract.CodeTokenInvalid},
		{"three garbage segments", []string{"Authorization", "Bearer a.b.c"}, 401, contract.CodeTokenInvalid},
		{"alg none", []string{"Authorization", "Bearer " + noneToken}, 401, contract.CodeTokenInvalid},
		{"HS256 signed with the public key bytes", []string{"Authorization", "Bearer " +
			s.sign(t, s.claims(nil), jwa.HS256, []byte(s.pub), nil)}, 401, contract.CodeTokenInvalid},
		{"HS256 signed with the JWKS document", []string{"Authorization", "Bearer " +
			s.sign(t, s.claims(nil), jwa.HS256, s.jwks, nil)}, 401, contract.CodeTokenInvalid},
		{"wrong issuer", []string{"Authorization", "Bearer " + s.valid(t, map[string]any{"iss": "someone-else"})}, 401, contract.CodeTokenInvalid},
		{"wrong audience", []string{"Authorization", "Bearer " + s.valid(t, map[string]any{"aud": "other-service"})}, 401, contract.CodeTokenInvalid},
		{"expired", []string{"Authorization", "Bearer " + s.valid(t, map[string]any{
			"iat": now.Add(-20 * time.Minute).Unix(), "exp": now.Add(-time.Minute).Unix()})}, 401, contract.CodeTokenExpired},
		// Far enough ahead that a slow run cannot reach it before the request is sent.
		{"nbf in the future", []string{"Authorization", "Bearer " + s.valid(t, map[string]any{
			"nbf": now.Add(30 * time.Minute).Unix(), "exp": now.Add(40 * time.Minute).Unix()})}, 401, contract.CodeTokenExpired},
		{"lifetime over the max", []string{"Authorization", "Bearer " + s.valid(t, map[string]any{
			"exp": now.Add(61 * time.Minute).Unix()})}, 401, contract.CodeTokenInvalid},
		{"missing iat", []string{"Authorization", "Bearer " + s.valid(t, map[string]any{"iat": nil})}, 401, contract.CodeTokenInvalid},
		{"missing tenant_id", []string{"Authorization", "Bearer " + s.valid(t, map[string]any{"tenant_id": nil})}, 401, contract.CodeTokenInvalid},
		{"unknown kid", []string{"Authorization", "Bearer " +
			s.sign(t, s.claims(nil), jwa.EdDSA, strangerPriv, map[string]any{jws.KeyIDKey: "stranger"})}, 401, contract.CodeTokenInvalid},
		{"known kid, other key", []string{"Authorization", "Bearer " +
			s.sign(t, s.claims(nil), jwa.EdDSA, strangerPriv, nil)}, 401, contract.CodeTokenInvalid},
		{"missing kid", []string{"Authorization", "Bearer " +
			s.sign(t, s.claims(nil), jwa.EdDSA, s.priv, map[string]any{jws.KeyIDKey: nil})}, 401, contract.CodeTokenInvalid},
		{"tampered payload", []string{"Authorization", "Bearer " + tampered}, 401, contract.CodeTokenInvalid},
		{"two Authorization headers", []string{"Authorization", "Bearer " + good, "Authorization", "Bearer " + good}, 401, contract.CodeTokenInvalid},
		{"valid token without the capability", []string{"Authorization", "Bearer " + s.valid(t, map[string]any{
			"capabilities": []string{contract.CapMessagesAppend, "messages:read:all"}})}, 403, contract.CodeTokenForbidden},
		{"scope header disagreeing", []string{"Authorization", "Bearer " + good, "x-infra-tenant-id", "victim"}, 403, contract.CodeScopeForbidden},
		{"binding mismatch", []string{"Authorization", "Bearer " + bound,
			"x-infra-user-authorization", "Bearer another-user"}, 401, contract.CodeTokenBindingMismatch},
		{"bound token without the header", []string{"Authorization", "Bearer " + bound}, 401, contract.CodeTokenBindingMismatch},
		{"header without binding", []string{"Authorization", "Bearer " + good,
			"x-infra-user-authorization", "Bearer user-secret"}, 401, contract.CodeTokenBindingMismatch},
	}
	secrets := []string{jwtauth.DefaultIssuer, jwtauth.Audience, s.kid, "acme", "alpha", "agent-7",
		"user-secret", jwtauth.UserTokenHash("user-secret"), contract.CapMessagesAppend}
	// The cases run one after another, now: parallel subtests wait for a free slot of
	// the package, which in a long run outlasted the tokens' ten minutes.
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(route.Method, app.base+route.Path, strings.NewReader(body))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			for i := 0; i+1 < len(tc.headers); i += 2 {
				req.Header.Add(tc.headers[i], tc.headers[i+1])
			}
			resp, err := app.client.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			r := &testResponse{Status: resp.StatusCode, Header: resp.Header, Body: raw}
			e := r.requireError(t, tc.status, tc.code)
			require.Equal(t, contract.CategoryAuth, e.Category)
			for _, secret := range secrets {
				require.NotContains(t, e.Message, secret)
			}
			if tc.status == http.StatusUnauthorized {
				require.NotEmpty(t, r.Header.Get("WWW-Authenticate"))
			}
			if tc.code == contract.CodeTokenForbidden {
				require.Equal(t, map[string]any{"requiredCapability": contract.CapMessagesRead}, e.Details)
			}
		})
	}
	t.Run("the same token, bound and matching, passes", func(t *testing.T) {
		app.do(t, route.Method, route.Path, body, "Authorization", "Bearer "+bound,
			"x-infra-user-authorization", "Bearer user-secret").requireOK(t, http.StatusOK, nil)
		app.do(t, route.Method, route.Path, body, "Authorization", "bearer "+good,
			"x-infra-tenant-id", "acme", "x-infra-project-id", "alpha", "x-infra-subject", "agent-7").requireOK(t, http.StatusOK, nil)
	})
}

// TestRuntimeTokenJWKSURL runs Main against a key server over real HTTP: the key set is
// fetched at start and tokens signed with its key verify; a key server that fails at
// start stops the start. (Rotation and the unknown-kid rate limit are
// adapters/jwtauth's TestJWKSURLRotation and TestJWKSURLUnknownKidRateLimit.)
func TestRuntimeTokenJWKSURL(t *testing.T) {
	t.Parallel()
	env, getenv := tokenEnv(t)
	mustToken(t, getenv, "keygen")
	set, err := os.ReadFile(filepath.Join(env["AGENT_CONTEXT_DATA_DIR"], "keys", "jwks.json"))
	require.NoError(t, err)
	var hits atomic.Int64
	var failing atomic.Bool
	keyServer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		if failing.Load() {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_, _ = w.Write(set)
	}))
	t.Cleanup(keyServer.Close)

	app := startApp(t, func(c *Config) { c.JWKSURL = keyServer.URL + "/.well-known/jwks.json" })
	require.EqualValues(t, 1, hits.Load())
	m := minter{t: t, getenv: getenv}
	route := contract.RouteMessagesRecent
	body := `{"scope":{"conversationId":"c"}}`
	app.do(t, route.Method, route.Path, body, "Authorization", m.bearer(contract.CapMessagesRead)).requireOK(t, http.StatusOK, nil)
	app.do(t, route.Method, route.Path, body).requireError(t, http.StatusUnauthorized, contract.CodeTokenMissing)

	failing.Store(true)
	cfg, err := LoadConfig(func(k string) string {
		return map[string]string{"AGENT_CONTEXT_JWKS_URL": keyServer.URL, "AGENT_CONTEXT_DATABASE_URL": "postgres://unused"}[k]
	})
	require.NoError(t, err)
	require.ErrorContains(t, NewMain(cfg).Run(context.Background()), "JWKS")
}
