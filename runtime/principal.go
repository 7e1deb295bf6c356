package runtime

import (
	"context"
	"time"
)

// Scope is the tenant+project every stored record belongs to. It comes from the
// caller's credential (or, in static-token and open mode, trusted headers), never from
// a request body.
type Scope struct {
	TenantID  string
	ProjectID string
}

// Principal is an authenticated caller.
type Principal struct {
	Scope
	// Subject is the runtime identity or agent ID.
	Subject string
	// Capabilities the credential grants.
	Capabilities map[string]bool
	// UserAuthorization is the end user's credential from x-infra-user-authorization,
	// forwarded to knowledge providers only, never used for authorization here.
	UserAuthorization string
	// RuntimeToken is the caller's verified runtime token, forwarded to knowledge
	// providers only. It is empty for the static token and in open mode: the service
	// token is never forwarded.
	RuntimeToken string
	// TokenID is the runtime token's jti, when it has one; it is logged with the request.
	TokenID string
	// TrustedHeaders is set when the static token or open mode admitted the caller,
	// whose trusted x-infra-* headers set the scope and subject. Such a caller may name
	// the sender of an A2A message or task in the body (local development); a runtime
	// token's caller may not (docs/a2a.md).
	TrustedHeaders bool
}

// Can reports whether the principal holds capability.
func (p Principal) Can(capability string) bool { return p.Capabilities[capability] }

// TokenVerifier verifies a runtime token (a JWT) and returns what it asserts. It
// returns *Error with INTERNAL_TOKEN_INVALID or INTERNAL_TOKEN_EXPIRED (the message
// never reveals an expected value), or SERVICE_UNAVAILABLE when it cannot tell (its
// key set is too old to trust).
type TokenVerifier interface {
	Verify(ctx context.Context, token string) (TokenClaims, error)
}

// TokenClaims is what a verified runtime token asserts.
type TokenClaims struct {
	Subject      string
	TenantID     string
	ProjectID    string
	Capabilities []string
	// UserTokenHash is base64url(sha256(end-user token)) when the token is bound to an
	// end user's credential.
	UserTokenHash string
	TokenID       string
	// ExpiresAt is the token's exp: the console ends a session made from it then.
	ExpiresAt time.Time
}
