package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	v, err := newTokenVerifier(context.Background(), cfg, cfg.NewLogger())
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
	v, err := newTokenVerifier(context.Background(), cfg, cfg.NewLogger())
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
