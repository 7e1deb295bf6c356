package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// runtimePrincipal verifies a runtime token and builds the caller from its claims.
// Scope headers may only repeat what the token says.
func (a AuthConfig) runtimePrincipal(r *http.Request, token string) (runtime.Principal, error) {
	claims, err := a.Verifier.Verify(r.Context(), token)
	if err != nil {
		return runtime.Principal{}, err
	}
	for _, h := range []struct{ name, want string }{
		{headerTenant, claims.TenantID},
		{headerProject, claims.ProjectID},
		{headerSubject, claims.Subject},
	} {
		for _, v := range r.Header.Values(h.name) {
			if v != h.want {
				return runtime.Principal{}, runtime.Errorf(contract.CodeScopeForbidden,
					"the %s header does not match the runtime token", h.name).With("field", h.name)
			}
		}
	}
	userAuthorization, err := boundUserAuthorization(r, claims.UserTokenHash)
	if err != nil {
		return runtime.Principal{}, err
	}
	p := claimsPrincipal(claims)
	p.UserAuthorization, p.RuntimeToken = userAuthorization, token
	return p, nil
}

// claimsPrincipal is the caller a verified runtime token names, with the capabilities
// it holds that this service knows.
func claimsPrincipal(claims runtime.TokenClaims) runtime.Principal {
	caps := make(map[string]bool, len(claims.Capabilities))
	for _, c := range claims.Capabilities {
		if allCapabilities[c] {
			caps[c] = true
		}
	}
	return runtime.Principal{
		Scope:        runtime.Scope{TenantID: claims.TenantID, ProjectID: claims.ProjectID},
		Subject:      claims.Subject,
		Capabilities: caps,
		TokenID:      claims.TokenID,
	}
}

// boundUserAuthorization applies the token binding of docs/auth.md to the end user's
// credential in x-infra-user-authorization. A token with user_token_hash admits the
// request only with that header, once, holding "Bearer <t>" where base64url(sha256(t))
// is the hash; a token without the claim admits no such header at all, so an unbound
// user credential is never forwarded. It returns the header to forward ("" when absent).
func boundUserAuthorization(r *http.Request, wantHash string) (string, error) {
	values := r.Header.Values(headerUserAuthorization)
	if wantHash == "" {
		if len(values) > 0 {
			return "", runtime.Errorf(contract.CodeTokenBindingMismatch,
				"the runtime token is not bound to a user token, so %s must be absent", headerUserAuthorization)
		}
		return "", nil
	}
	mismatch := runtime.Errorf(contract.CodeTokenBindingMismatch,
		"%s does not match the user token bound to the runtime token", headerUserAuthorization)
	if len(values) != 1 {
		return "", mismatch
	}
	userToken, ok := bearerToken(values[0])
	if !ok {
		return "", mismatch
	}
	sum := sha256.Sum256([]byte(userToken))
	got := base64.RawURLEncoding.EncodeToString(sum[:])
	if subtle.ConstantTimeCompare([]byte(got), []byte(wantHash)) != 1 {
		return "", mismatch
	}
	return values[0], nil
}
