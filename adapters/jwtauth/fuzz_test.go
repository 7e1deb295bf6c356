package jwtauth

import (
	"context"
	"crypto/ed25519"
	"strings"
	"testing"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// fuzzKey is a fixed Ed25519 key, so that the seed corpus (testdata/fuzz/FuzzVerify)
// holds tokens that verify: the fuzzer starts from accepted tokens and mutates them.
func fuzzKey() testKey {
	priv := ed25519.NewKeyFromSeed([]byte(strings.Repeat("f", ed25519.SeedSize)))
	return testKey{alg: jwa.EdDSA, kid: "fuzz", priv: priv, pub: priv.Public()}
}

// FuzzVerify feeds arbitrary strings to the token parser and verifier. Properties: it
// never panics; a refusal is INTERNAL_TOKEN_INVALID or INTERNAL_TOKEN_EXPIRED and its
// message reveals no expected value; an accepted token has the shape of a compact
// JWS, claims that follow the ID rules, and the same claims from the cache as from a
// verifier without one.
func FuzzVerify(f *testing.F) {
	key := fuzzKey()
	cached := setup(f, Options{}, key)
	uncached := setup(f, Options{CacheSize: -1}, key)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, token string) {
		claims, err := cached.v.Verify(ctx, token)
		if err != nil {
			var re *runtime.Error
			require.ErrorAs(t, err, &re)
			require.Contains(t, []string{contract.CodeTokenInvalid, contract.CodeTokenExpired}, re.Code)
			for _, secret := range []string{DefaultIssuer, Audience, key.kid} {
				require.NotContains(t, re.Message, secret)
			}
			_, err := uncached.v.Verify(ctx, token)
			require.Equal(t, re.Code, runtime.ErrorCode(err), "the cache changes no answer")
			return
		}
		require.True(t, compactJWS(token))
		for name, id := range map[string]string{"sub": claims.Subject, "tenant_id": claims.TenantID, "project_id": claims.ProjectID} {
			require.NoError(t, runtime.ValidateID(name, id))
		}
		require.NotNil(t, claims.Capabilities)
		if claims.UserTokenHash != "" {
			require.True(t, validHash(claims.UserTokenHash))
		}
		if claims.TokenID != "" {
			require.NoError(t, runtime.ValidateID("jti", claims.TokenID))
		}
		again, err := cached.v.Verify(ctx, token)
		require.NoError(t, err)
		require.Equal(t, claims, again)
		fresh, err := uncached.v.Verify(ctx, token)
		require.NoError(t, err)
		require.Equal(t, claims, fresh)
	})
}
