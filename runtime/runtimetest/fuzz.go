package runtimetest

import (
	"bytes"
	"slices"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// DecodeRequest decodes body as the server does (strict: unknown and duplicate
// members refused); bodies the server would refuse are not the validators' concern.
func DecodeRequest(body []byte, v any) bool {
	return json.Unmarshal(body, v, json.RejectUnknownMembers(true)) == nil
}

// RequireRefusal asserts err is what a validator may answer: VALIDATION_FAILED,
// PAYLOAD_TOO_LARGE or INVALID_CURSOR, a 4xx of the contract's table, with a message
// and details.field; byte-size bounds carry details.limit.
func RequireRefusal(t *testing.T, err error) {
	t.Helper()
	var re *runtime.Error
	require.ErrorAs(t, err, &re)
	require.Contains(t, []string{contract.CodeValidationFailed, contract.CodePayloadTooLarge, contract.CodeInvalidCursor}, re.Code, "%v", err)
	require.Equal(t, 4, contract.Codes[re.Code].Status/100)
	require.NotEmpty(t, re.Message)
	field, _ := re.Details["field"].(string)
	require.NotEmpty(t, field, "%v", err)
	if re.Code == contract.CodePayloadTooLarge {
		require.IsType(t, int64(0), re.Details["limit"], "%v", err)
	}
	if limit, ok := re.Details["limit"]; ok {
		require.Positive(t, limit.(int64))
	}
}

// FuzzBody fuzzes check with every body that decodes as a Req.
func FuzzBody[Req any](f *testing.F, check func(t *testing.T, req *Req)) {
	f.Fuzz(func(t *testing.T, body []byte) {
		var req Req
		if DecodeRequest(body, &req) {
			check(t, &req)
		}
	})
}

// Accepted reports whether a validator Accepted the request; a refusal is checked
// with RequireRefusal, and reached (the store calls made) must be 0 then: a refused
// request reaches no store.
func Accepted(t *testing.T, err error, reached int) bool {
	t.Helper()
	if err == nil {
		return true
	}
	RequireRefusal(t, err)
	require.Zero(t, reached, "a refused request reaches no store")
	return false
}

// RequireID asserts an Accepted ID follows the contract's ID rules (ValidateID is
// tested on its own in id_test.go).
func RequireID(t *testing.T, field, id string) {
	t.Helper()
	require.NoError(t, runtime.ValidateID(field, id))
}

// RequireStoredJSON asserts an Accepted JSON member is absent or one compact JSON
// value of at most maxBytes.
func RequireStoredJSON(t *testing.T, raw []byte, maxBytes int) {
	t.Helper()
	if raw == nil {
		return
	}
	require.True(t, jsontext.Value(raw).IsValid(), "%q", raw)
	compact := jsontext.Value(bytes.Clone(raw))
	require.NoError(t, compact.Compact())
	require.Equal(t, string(compact), string(raw), "stored JSON is compact")
	require.LessOrEqual(t, len(raw), maxBytes)
	require.NotEqual(t, "null", string(raw), "null is stored as absent")
}

// RequireRoleFilter asserts an Accepted roles filter is sorted, without repeats, and
// made of roles only.
func RequireRoleFilter(t *testing.T, roles []string) {
	t.Helper()
	require.True(t, slices.IsSorted(roles), "%v", roles)
	require.Len(t, slices.Compact(slices.Clone(roles)), len(roles))
	for _, r := range roles {
		require.Contains(t, contract.Roles, r)
	}
}

func RequireLimit(t *testing.T, got int, sent *int, def, maxLimit int) {
	t.Helper()
	require.GreaterOrEqual(t, got, 1)
	require.LessOrEqual(t, got, maxLimit)
	if sent == nil {
		require.Equal(t, def, got)
	} else {
		require.Equal(t, *sent, got)
	}
}

// RequireError asserts err's code and details.
func RequireError(t *testing.T, err error, code string, details map[string]any) {
	t.Helper()
	var re *runtime.Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, code, re.Code, "%v", err)
	for k, v := range details {
		require.Equal(t, v, re.Details[k], "details.%s of %v", k, err)
	}
}
