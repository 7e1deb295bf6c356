package runtime

import (
	"unicode"
	"unicode/utf8"

	"github.com/agent-context/agent-context/contract"
)

// ValidateID checks the contract's ID rules: 1–191 characters, valid UTF-8, no control
// characters and no whitespace. field names the value in the error.
func ValidateID(field, id string) error {
	if id == "" {
		return Invalid(field, "%s is required", field)
	}
	if !utf8.ValidString(id) {
		return Invalid(field, "%s must be valid UTF-8", field)
	}
	if n := utf8.RuneCountInString(id); n > contract.MaxIDChars {
		return TooMany(field, contract.MaxIDChars, "%s must be at most %d characters", field, contract.MaxIDChars)
	}
	for _, r := range id {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return Invalid(field, "%s must not contain whitespace or control characters", field)
		}
	}
	return nil
}
