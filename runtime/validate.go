package runtime

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agent-context/agent-context/contract"
	"github.com/go-json-experiment/json/jsontext"
)

// IDOrNew validates a client-chosen ID or, when there is none (absent or null),
// generates one. An empty string is a client-chosen ID, and an invalid one.
func IDOrNew(field string, id *string) (string, error) {
	if id == nil {
		return NewID(), nil
	}
	if *id == "" {
		return "", Invalid(field, "%s must not be empty: omit it (or send null) to have one generated", field)
	}
	if err := ValidateID(field, *id); err != nil {
		return "", err
	}
	return *id, nil
}

// ValidateLabel checks a free-text label such as purpose: 1 to maxChars characters and
// no control characters (which also keeps NUL out of Postgres text).
func ValidateLabel(field, v string, maxChars int) error {
	if v == "" {
		return Invalid(field, "%s is required", field)
	}
	if utf8.RuneCountInString(v) > maxChars {
		return TooMany(field, int64(maxChars), "%s must be at most %d characters", field, maxChars)
	}
	if strings.IndexFunc(v, unicode.IsControl) >= 0 {
		return Invalid(field, "%s must not contain control characters", field)
	}
	return nil
}

// ValidateQuery checks a free-text query: at most maxBytes (413) and not blank (400).
func ValidateQuery(field, q string, maxBytes int64) error {
	if int64(len(q)) > maxBytes {
		return TooLarge(field, maxBytes)
	}
	if strings.TrimSpace(q) == "" {
		return Invalid(field, "%s must not be empty", field)
	}
	return nil
}

// OptionalCount applies the default of an optional count such as limit or topK, and
// its range 1–maxCount; out of range is 400 with the bound.
func OptionalCount(field string, n *int, def, maxCount int) (int, error) {
	if n == nil {
		return def, nil
	}
	if *n < 1 || *n > maxCount {
		return 0, TooMany(field, int64(maxCount), "%s must be between 1 and %d", field, maxCount)
	}
	return *n, nil
}

// ListSize checks that a list holds 1 to maxItems entries; noun names one entry.
func ListSize(field string, n, maxItems int, noun string) error {
	if n == 0 {
		return Invalid(field, "%s must hold at least one %s", field, noun)
	}
	if n > maxItems {
		return TooMany(field, int64(maxItems), "%s holds %d %ss; at most %d are allowed", field, n, noun, maxItems)
	}
	return nil
}

func OneOf(field string, values []string) error {
	return Invalid(field, "%s must be one of %s", field, strings.Join(values, ", "))
}

// NormalizeJSON is NormalizeMetadata plus the check that the value has an RFC 8785
// canonical form, which comparisons and contentSha256 rely on.
func NormalizeJSON(field string, raw json.RawMessage) (json.RawMessage, error) {
	v, err := NormalizeMetadata(field, raw)
	if err != nil || v == nil {
		return nil, err
	}
	if _, err := CanonicalJSON(v); err != nil || !FiniteNumbers(v) {
		return nil, Invalid(field, "%s has no RFC 8785 canonical form (numbers must fit an IEEE-754 double)", field)
	}
	return v, nil
}

func SameOptional[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// MaxSequence bounds client-given sequences and createdAtMs values: the largest integer
// every JSON client (JavaScript included) represents exactly, and far from overflow when
// the server assigns the next sequence.
const MaxSequence = 1<<53 - 1

// SameJSON compares two JSON values (nil meaning none) after RFC 8785 canonicalization,
// so member order, whitespace, escapes and number spelling (1.0 and 1) do not matter.
func SameJSON(a, b []byte) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	ca, cb := jsontext.Value(slices.Clone(a)), jsontext.Value(slices.Clone(b))
	if ca.Canonicalize() != nil || cb.Canonicalize() != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca, cb)
}

// NormalizeMetadata checks a metadata value and returns it compacted, or nil for absent
// and null; compacted, it must be at most 64 KiB (413). The stored text is exactly the
// compacted value, so a client reads back the JSON it sent.
func NormalizeMetadata(field string, raw []byte) ([]byte, error) {
	v := jsontext.Value(bytes.TrimSpace(raw))
	if len(v) == 0 || string(v) == "null" {
		return nil, nil
	}
	v = v.Clone()
	if err := v.Compact(); err != nil {
		return nil, Invalid(field, "%s is not valid JSON", field)
	}
	if len(v) > contract.MaxMetadataBytes {
		return nil, TooLarge(field, contract.MaxMetadataBytes)
	}
	return []byte(v), nil
}

func IdempotencyConflict(id string) error {
	return Errorf(contract.CodeIdempotencyConflict, "a record with this ID exists with different content").
		With("ids", []string{id})
}

// ValidateRef checks an opaque provider reference: any non-empty string up to
// MaxEvidenceRefChars characters. It is never interpreted.
func ValidateRef(field, ref string) error {
	if ref == "" {
		return Invalid(field, "%s must not be empty", field)
	}
	if utf8.RuneCountInString(ref) > contract.MaxEvidenceRefChars {
		return TooMany(field, contract.MaxEvidenceRefChars, "%s must be at most %d characters", field, contract.MaxEvidenceRefChars)
	}
	return nil
}
