package runtime_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// TestValidateID covers the ID rules of docs/api.md: 1–191 characters (runes,
// not bytes), valid UTF-8, no whitespace and no control characters.
func TestValidateID(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{
		"a", "conv-1", "01J9Z7Q2X3", strings.Repeat("x", contract.MaxIDChars),
		strings.Repeat("é", contract.MaxIDChars), strings.Repeat("漢", contract.MaxIDChars),
		"user@example.com", "a/b:c#d", "emoji-🙂", `"quoted"`,
	} {
		require.NoError(t, runtime.ValidateID("id", ok), "%q", ok)
	}
	cases := []struct {
		name  string
		id    string
		limit bool
	}{
		{"empty", "", false},
		{"192 characters", strings.Repeat("x", contract.MaxIDChars+1), true},
		{"192 multi-byte characters", strings.Repeat("é", contract.MaxIDChars+1), true},
		{"space", "a b", false},
		{"leading space", " a", false},
		{"tab", "a\tb", false},
		{"newline", "a\nb", false},
		{"no-break space", "a\u00a0b", false},
		{"ideographic space", "a\u3000b", false},
		{"line separator", "a\u2028b", false},
		{"NUL", "a\x00b", false},
		{"DEL", "a\x7fb", false},
		{"C1 control", "a\u0085b", false},
		{"invalid UTF-8", "a\xffb", false},
		{"truncated UTF-8", "a\xc3", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := runtime.ValidateID("scope.conversationId", tc.id)
			var re *runtime.Error
			require.True(t, errors.As(err, &re), "%q must be refused", tc.id)
			require.Equal(t, contract.CodeValidationFailed, re.Code)
			require.Equal(t, "scope.conversationId", re.Details["field"])
			if tc.limit {
				require.EqualValues(t, contract.MaxIDChars, re.Details["limit"])
			} else {
				require.NotContains(t, re.Details, "limit")
			}
		})
	}
}

// TestNewID: generated IDs satisfy the ID rules and do not repeat.
func TestNewID(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 1000 {
		id := runtime.NewID()
		require.NoError(t, runtime.ValidateID("id", id))
		require.False(t, seen[id], "duplicate %s", id)
		seen[id] = true
	}
}
