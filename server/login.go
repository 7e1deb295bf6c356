package server

import (
	"context"
	"crypto/subtle"
	"time"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// Login verifies a token exactly as it verifies an "Authorization: Bearer" credential,
// for a door that takes the token in a form (the operator console's sign-in). The
// static token carries no scope: tenant and project set it (empty: local), as the
// trusted headers do. A runtime token's scope is its claims', and a tenant or project
// that disagrees with them is refused as a disagreeing header is. It returns the
// caller and when the credential expires (zero for the static token). Open mode has
// no credential to verify: INTERNAL_TOKEN_INVALID.
func (a AuthConfig) Login(ctx context.Context, token, tenant, project string) (runtime.Principal, time.Time, error) {
	if token == "" {
		return runtime.Principal{}, time.Time{}, runtime.Errorf(contract.CodeTokenMissing, "a token is required")
	}
	if a.StaticToken != "" && subtle.ConstantTimeCompare([]byte(token), []byte(a.StaticToken)) == 1 {
		p := runtime.Principal{Capabilities: allCapabilities, TrustedHeaders: true, Subject: defaultSubject}
		var err error
		if p.TenantID, err = loginScope(headerTenant, tenant, defaultTenant); err != nil {
			return runtime.Principal{}, time.Time{}, err
		}
		if p.ProjectID, err = loginScope(headerProject, project, defaultProject); err != nil {
			return runtime.Principal{}, time.Time{}, err
		}
		return p, time.Time{}, nil
	}
	if a.Verifier == nil {
		return runtime.Principal{}, time.Time{}, runtime.Errorf(contract.CodeTokenInvalid, "the token is not valid")
	}
	claims, err := a.Verifier.Verify(ctx, token)
	if err != nil {
		return runtime.Principal{}, time.Time{}, err
	}
	for _, f := range []struct{ name, got, want string }{
		{headerTenant, tenant, claims.TenantID},
		{headerProject, project, claims.ProjectID},
	} {
		if f.got != "" && f.got != f.want {
			return runtime.Principal{}, time.Time{}, runtime.Errorf(contract.CodeScopeForbidden,
				"the %s does not match the runtime token", f.name).With("field", f.name)
		}
	}
	return claimsPrincipal(claims), claims.ExpiresAt, nil
}

func loginScope(name, value, fallback string) (string, error) {
	if value == "" {
		return fallback, nil
	}
	if err := runtime.ValidateID(name, value); err != nil {
		return "", err
	}
	return value, nil
}
