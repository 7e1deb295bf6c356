package jwtauth

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lestrrat-go/jwx/v2/jwa"
)

// DefaultAlgorithms is the allow-list used when AGENT_CONTEXT_TOKEN_ALGORITHMS is unset.
var DefaultAlgorithms = []string{"EdDSA", "ES256", "RS256"}

// supportedAlgorithms are the asymmetric signature algorithms a key set may use. none
// and every HS* are absent on purpose: a verifier holding only public keys must never
// accept a MAC, or the public key itself becomes the secret (the classic confusion).
var supportedAlgorithms = []jwa.SignatureAlgorithm{
	jwa.EdDSA,
	jwa.ES256, jwa.ES384, jwa.ES512,
	jwa.RS256, jwa.RS384, jwa.RS512,
	jwa.PS256, jwa.PS384, jwa.PS512,
}

// ParseAlgorithms parses a comma-separated allow-list such as "EdDSA,ES256" into
// canonical names. It refuses none, every HS* and names it does not know, so that a
// configuration cannot weaken verification.
func ParseAlgorithms(list string) ([]string, error) {
	var out []string
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		alg, err := canonicalAlgorithm(name)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, alg) {
			out = append(out, alg)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no algorithm given")
	}
	return out, nil
}

func canonicalAlgorithm(name string) (string, error) {
	upper := strings.ToUpper(name)
	if upper == "NONE" || strings.HasPrefix(upper, "HS") {
		return "", fmt.Errorf("%s is never accepted: runtime tokens must be signed with an asymmetric key", name)
	}
	for _, alg := range supportedAlgorithms {
		if strings.EqualFold(alg.String(), name) {
			return alg.String(), nil
		}
	}
	names := make([]string, len(supportedAlgorithms))
	for i, alg := range supportedAlgorithms {
		names[i] = alg.String()
	}
	return "", fmt.Errorf("%s is not a supported algorithm (supported: %s)", name, strings.Join(names, ", "))
}
