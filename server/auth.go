package server

import (
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// Trusted scope headers. In static-token and open mode they set the scope; in
// runtime-token mode they must agree with the token. The gateway strips every
// client-sent x-infra-* header, so only mesh callers can set them.
const (
	headerTenant            = "x-infra-tenant-id"
	headerProject           = "x-infra-project-id"
	headerSubject           = "x-infra-subject"
	headerUserAuthorization = "x-infra-user-authorization"
)

// Defaults for absent scope headers in static-token and open mode.
const (
	defaultTenant  = "local"
	defaultProject = "local"
	defaultSubject = "service"
)

// AuthConfig selects the authentication mode (docs/auth.md): runtime-token when
// Verifier is set, static-token when StaticToken is set (both may be), open otherwise.
type AuthConfig struct {
	StaticToken string
	Verifier    runtime.TokenVerifier
}

// Mode names the configured mode for the start-up log line.
func (a AuthConfig) Mode() string {
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
func (a AuthConfig) Open() bool { return a.Verifier == nil && a.StaticToken == "" }

var allCapabilities = func() map[string]bool {
	m := make(map[string]bool, len(contract.AllCapabilities))
	for _, c := range contract.AllCapabilities {
		m[c] = true
	}
	return m
}()

// authenticate resolves the caller of r. It never decides on a body.
func (a AuthConfig) authenticate(r *http.Request) (runtime.Principal, error) {
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
	if a.StaticToken != "" && subtle.ConstantTimeCompare([]byte(token), []byte(a.StaticToken)) == 1 {
		return headerPrincipal(r)
	}
	if a.Verifier == nil {
		return runtime.Principal{}, runtime.Errorf(contract.CodeTokenInvalid, "the bearer token is not valid")
	}
	return a.runtimePrincipal(r, token)
}

// headerPrincipal is the caller of static-token and open mode: every capability,
// scope from the trusted headers.
func headerPrincipal(r *http.Request) (runtime.Principal, error) {
	p := runtime.Principal{Capabilities: allCapabilities, TrustedHeaders: true}
	var err error
	if p.TenantID, err = scopeHeader(r, headerTenant, defaultTenant); err != nil {
		return runtime.Principal{}, err
	}
	if p.ProjectID, err = scopeHeader(r, headerProject, defaultProject); err != nil {
		return runtime.Principal{}, err
	}
	if p.Subject, err = scopeHeader(r, headerSubject, defaultSubject); err != nil {
		return runtime.Principal{}, err
	}
	p.UserAuthorization = r.Header.Get(headerUserAuthorization)
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
