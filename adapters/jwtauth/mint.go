package jwtauth

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jwt"
)

// GenerateKey returns a new Ed25519 private key as a JWK with alg EdDSA, use sig and
// its RFC 7638 thumbprint as kid.
func GenerateKey() (jwk.Key, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	key, err := jwk.FromRaw(priv)
	if err != nil {
		return nil, err
	}
	if err := jwk.AssignKeyID(key); err != nil {
		return nil, err
	}
	if err := key.Set(jwk.AlgorithmKey, jwa.EdDSA); err != nil {
		return nil, err
	}
	if err := key.Set(jwk.KeyUsageKey, jwk.ForSignature); err != nil {
		return nil, err
	}
	return key, nil
}

// PublicSet returns a JWKS holding the public halves of keys, ready to publish.
func PublicSet(keys ...jwk.Key) (jwk.Set, error) {
	set := jwk.NewSet()
	for _, k := range keys {
		pub, err := jwk.PublicKeyOf(k)
		if err != nil {
			return nil, err
		}
		if err := set.AddKey(pub); err != nil {
			return nil, err
		}
	}
	return set, nil
}

// UserTokenHash is the user_token_hash binding of an end-user token:
// base64url (no padding) of its SHA-256.
func UserTokenHash(userToken string) string {
	sum := sha256.Sum256([]byte(userToken))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// Token is what Mint signs.
type Token struct {
	// Issuer defaults to DefaultIssuer.
	Issuer                       string
	Subject, TenantID, ProjectID string
	Capabilities                 []string
	// UserToken, when set, is bound to the token as user_token_hash.
	UserToken string
	// TokenID is the jti (optional).
	TokenID string
	// IssuedAt defaults to now.
	IssuedAt time.Time
	// TTL is exp - iat; it must be positive.
	TTL time.Duration
}

// Mint signs t with key (a private JWK whose kid goes into the header). The algorithm
// is the key's alg, or the usual one for its type.
func Mint(key jwk.Key, t Token) (string, error) {
	if t.TTL <= 0 {
		return "", errors.New("the token's TTL must be positive")
	}
	if t.Issuer == "" {
		t.Issuer = DefaultIssuer
	}
	if t.IssuedAt.IsZero() {
		t.IssuedAt = time.Now()
	}
	if t.Capabilities == nil {
		t.Capabilities = []string{}
	}
	alg, err := signingAlgorithm(key)
	if err != nil {
		return "", err
	}
	b := jwt.NewBuilder().
		Issuer(t.Issuer).
		Audience([]string{Audience}).
		Subject(t.Subject).
		IssuedAt(t.IssuedAt).
		Expiration(t.IssuedAt.Add(t.TTL)).
		Claim("tenant_id", t.TenantID).
		Claim("project_id", t.ProjectID).
		Claim("capabilities", t.Capabilities)
	if t.UserToken != "" {
		b = b.Claim("user_token_hash", UserTokenHash(t.UserToken))
	}
	if t.TokenID != "" {
		b = b.JwtID(t.TokenID)
	}
	tok, err := b.Build()
	if err != nil {
		return "", err
	}
	signed, err := jwt.Sign(tok, jwt.WithKey(alg, key))
	if err != nil {
		return "", err
	}
	return string(signed), nil
}

func signingAlgorithm(key jwk.Key) (jwa.SignatureAlgorithm, error) {
	if a := key.Algorithm(); a != nil && a.String() != "" {
		return jwa.SignatureAlgorithm(a.String()), nil
	}
	switch key.KeyType() {
	case jwa.OKP:
		return jwa.EdDSA, nil
	case jwa.EC:
		return jwa.ES256, nil
	case jwa.RSA:
		return jwa.RS256, nil
	}
	return "", fmt.Errorf("no signing algorithm for a %s key", key.KeyType())
}
