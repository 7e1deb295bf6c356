package gate

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strings"
	"time"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// Trusted scope headers. In static-token and open mode they set the scope; in
// runtime-token mode they must agree with the token. The gateway strips every
// client-sent x-infra-* header, so only mesh callers can set them.
const (
	HeaderTenant            = "x-infra-tenant-id"
	HeaderProject           = "x-infra-project-id"
	HeaderSubject           = "x-infra-subject"
	HeaderUserAuthorization = "x-infra-user-authorization"
)

// The scope of static-token and open mode when a header (or the console's form)
// leaves it out.
const (
	DefaultTenant  = "local"
	DefaultProject = "local"
	DefaultSubject = "service"
)

// Auth selects the authentication mode (docs/auth.md): runtime-token when Verifier is
// set, static-token when StaticToken is set (both may be), open otherwise.
type Auth struct {
	StaticToken string
	Verifier    runtime.TokenVerifier
}

// Mode names the configured mode for the start-up log line.
func (a Auth) Mode() string {
	switch {
	case a.Verifier != nil && a.StaticToken != "":
		return "runtime-token+static-token"
	case a.Verifier != nil:
		return "runtime-token"
	case a.StaticToken != "":
		return "static-token"
	default:
		return "open"
	}
}

// Open reports whether anyone may call without a credential.
func (a Auth) Open() bool { return a.Verifier == nil && a.StaticToken == "" }

var allCapabilities = func() map[string]bool {
	m := make(map[string]bool, len(contract.AllCapabilities))
	for _, c := range contract.AllCapabilities {
		m[c] = true
	}
	return m
}()

// TrustedPrincipal is the caller of static-token and open mode in scope: every
// capability, the scope set by the trusted headers (or the console's form).
func TrustedPrincipal(scope runtime.Scope, subject string) runtime.Principal {
	return runtime.Principal{Scope: scope, Subject: subject, Capabilities: allCapabilities, TrustedHeaders: true}
}

// Authenticate resolves the caller of r. It never decides on a body.
func (a Auth) Authenticate(r *http.Request) (runtime.Principal, error) {
	if a.Open() {
		return headerPrincipal(r)
	}
	if len(r.Header.Values("Authorization")) > 1 {
		// Two credentials are ambiguous: a proxy may have checked the other one.
		return runtime.Principal{}, runtime.Errorf(contract.CodeTokenInvalid, "only one Authorization header is allowed")
	}
	token, ok := bearerToken(r.Header.Get("Authorization"))
	if !ok {
		return runtime.Principal{}, runtime.Errorf(contract.CodeTokenMissing, "a bearer token is required")
	}
	if a.isStatic(token) {
		return headerPrincipal(r)
	}
	if a.Verifier == nil {
		return runtime.Principal{}, runtime.Errorf(contract.CodeTokenInvalid, "the bearer token is not valid")
	}
	return a.runtimePrincipal(r, token)
}

func (a Auth) isStatic(token string) bool {
	return a.StaticToken != "" && subtle.ConstantTimeCompare([]byte(token), []byte(a.StaticToken)) == 1
}

// headerPrincipal is the caller of static-token and open mode: every capability,
// scope from the trusted headers.
func headerPrincipal(r *http.Request) (runtime.Principal, error) {
	var scope runtime.Scope
	var subject string
	var err error
	if scope.TenantID, err = scopeHeader(r, HeaderTenant, DefaultTenant); err != nil {
		return runtime.Principal{}, err
	}
	if scope.ProjectID, err = scopeHeader(r, HeaderProject, DefaultProject); err != nil {
		return runtime.Principal{}, err
	}
	if subject, err = scopeHeader(r, HeaderSubject, DefaultSubject); err != nil {
		return runtime.Principal{}, err
	}
	p := TrustedPrincipal(scope, subject)
	p.UserAuthorization = r.Header.Get(HeaderUserAuthorization)
	return p, nil
}

func scopeHeader(r *http.Request, name, fallback string) (string, error) {
	values := r.Header.Values(name)
	switch len(values) {
	case 0:
		return fallback, nil
	case 1:
		if err := runtime.ValidateID(name, values[0]); err != nil {
			return "", err
		}
		return values[0], nil
	default:
		return "", runtime.Invalid(name, "%s must be given once", name)
	}
}

// bearerToken extracts the token of an "Authorization: Bearer <token>" header.
func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// runtimePrincipal verifies a runtime token and builds the caller from its claims.
// Scope headers may only repeat what the token says.
func (a Auth) runtimePrincipal(r *http.Request, token string) (runtime.Principal, error) {
	claims, err := a.Verifier.Verify(r.Context(), token)
	if err != nil {
		return runtime.Principal{}, err
	}
	for _, h := range []struct{ name, want string }{
		{HeaderTenant, claims.TenantID},
		{HeaderProject, claims.ProjectID},
		{HeaderSubject, claims.Subject},
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
	values := r.Header.Values(HeaderUserAuthorization)
	if wantHash == "" {
		if len(values) > 0 {
			return "", runtime.Errorf(contract.CodeTokenBindingMismatch,
				"the runtime token is not bound to a user token, so %s must be absent", HeaderUserAuthorization)
		}
		return "", nil
	}
	mismatch := runtime.Errorf(contract.CodeTokenBindingMismatch,
		"%s does not match the user token bound to the runtime token", HeaderUserAuthorization)
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

// Login verifies a token exactly as Authenticate verifies an "Authorization: Bearer"
// credential, for a door that takes the token in a form (the operator console's
// sign-in). The static token carries no scope: tenant and project set it (empty:
// local), as the trusted headers do. A runtime token's scope is its claims', and a
// tenant or project that disagrees with them is refused as a disagreeing header is.
// It returns the caller (a static token's is a trusted principal, as the headers'
// callers are) and when the credential expires (zero for the static token). Open mode
// has no credential to verify: INTERNAL_TOKEN_INVALID.
func (a Auth) Login(ctx context.Context, token, tenant, project string) (p runtime.Principal, expires time.Time, err error) {
	if token == "" {
		return runtime.Principal{}, time.Time{}, runtime.Errorf(contract.CodeTokenMissing, "a token is required")
	}
	if a.isStatic(token) {
		var scope runtime.Scope
		if scope.TenantID, err = loginScope(HeaderTenant, tenant, DefaultTenant); err != nil {
			return runtime.Principal{}, time.Time{}, err
		}
		if scope.ProjectID, err = loginScope(HeaderProject, project, DefaultProject); err != nil {
			return runtime.Principal{}, time.Time{}, err
		}
		return TrustedPrincipal(scope, DefaultSubject), time.Time{}, nil
	}
	if a.Verifier == nil {
		return runtime.Principal{}, time.Time{}, runtime.Errorf(contract.CodeTokenInvalid, "the token is not valid")
	}
	claims, err := a.Verifier.Verify(ctx, token)
	if err != nil {
		return runtime.Principal{}, time.Time{}, err
	}
	for _, f := range []struct{ name, got, want string }{
		{HeaderTenant, tenant, claims.TenantID},
		{HeaderProject, project, claims.ProjectID},
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
