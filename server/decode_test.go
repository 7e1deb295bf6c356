package server

import (
	"bytes"
	stdjson "encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// TestDecodingErrorsAreClassifiedByType: the decoder tells a failure's kind by the
// JSON library's error types and sentinels, not by their messages, which quote the
// client's member names. A map key that reads like the library's own message must not
// turn a wrong type into an "unknown field".
func TestDecodingErrorsAreClassifiedByType(t *testing.T) {
	t.Parallel()
	type request struct {
		Counts map[string]int `json:"counts"`
		Name   string         `json:"name"`
	}
	for _, tc := range []struct {
		name, body, field, message string
	}{
		{"wrong type under a key named like the unknown-member error",
			`{"counts":{"unknown object member name":"x"}}`, "counts.unknown object member name",
			"counts.unknown object member name has the wrong type or an out-of-range value"},
		{"wrong type under a key named like the UTF-8 error",
			`{"counts":{"invalid UTF-8":"x"}}`, "counts.invalid UTF-8", "counts.invalid UTF-8 has the wrong type or an out-of-range value"},
		{"unknown member", `{"name":"a","nmae":"b"}`, "nmae", `unknown field "nmae"`},
		{"duplicate member", `{"counts":{"a":1,"a":2}}`, "counts.a", `duplicate field "counts.a"`},
		{"duplicate member named like an error", `{"counts":{"unknown object member name":1,"unknown object member name":2}}`,
			"counts.unknown object member name", `duplicate field "counts.unknown object member name"`},
		{"invalid UTF-8 in a value", "{\"name\":\"a\xffb\"}", "name", "the value is not valid UTF-8"},
		{"invalid UTF-8 in a member name", "{\"counts\":{\"\xff\":1}}", "counts", "the value is not valid UTF-8"},
		{"malformed", `{"name":"a",}`, "body", "malformed JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var v request
			err := decodeJSON([]byte(tc.body), &v)
			var re *runtime.Error
			require.ErrorAs(t, err, &re)
			require.Equal(t, contract.CodeValidationFailed, re.Code)
			require.Equal(t, tc.field, re.Details["field"])
			require.Equal(t, tc.message, re.Message)
		})
	}
}

// fuzzTargets are the request shapes the fuzzer decodes: nested arrays, raw JSON
// metadata, optional pointers, integers of both widths.
func fuzzTargets() []any {
	return []any{&contract.AppendMessagesRequest{}, &contract.CreateWindowRequest{}, &contract.PageMessagesRequest{}}
}

// FuzzDecodeBody feeds arbitrary bytes to the strict decoder. Properties: it never
// panics; every failure is VALIDATION_FAILED or PAYLOAD_TOO_LARGE naming a field;
// whatever it accepts is one valid JSON object (UTF-8, no duplicate member), is
// accepted by encoding/json with the same meaning, and survives a round trip.
func FuzzDecodeBody(f *testing.F) {
	const maxBytes = 64 << 10
	limits := bodyLimits{maxBytes: maxBytes, budget: newBodyBudget(maxBytes)}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, v := range fuzzTargets() {
			req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			hold := &bodyHold{budget: limits.budget}
			err := decodeBody(req, v, limits, hold)
			hold.release()
			if err != nil {
				var re *runtime.Error
				require.True(t, errors.As(err, &re), "not a runtime.Error: %v", err)
				require.Contains(t, []string{contract.CodeValidationFailed, contract.CodePayloadTooLarge}, re.Code)
				field, _ := re.Details["field"].(string)
				require.NotEmpty(t, field, "%v", err)
				require.NotEmpty(t, re.Message)
				continue
			}
			value := bytes.TrimLeft(bytes.TrimPrefix(body, utf8BOM), " \t\r\n")
			require.True(t, jsontext.Value(value).IsValid(), "accepted invalid JSON %q", body)
			require.Equal(t, jsontext.KindBeginObject, jsontext.Value(value).Kind())

			// encoding/json reads the accepted body the same way.
			std := zeroOf(v)
			require.NoError(t, stdjson.Unmarshal(value, std))
			want, err := stdjson.Marshal(v)
			require.NoError(t, err)
			got, err := stdjson.Marshal(std)
			require.NoError(t, err)
			require.JSONEq(t, string(want), string(got))

			// Re-encoded, it decodes strictly to the same value.
			again := zeroOf(v)
			require.NoError(t, decodeJSON(want, again))
			round, err := stdjson.Marshal(again)
			require.NoError(t, err)
			require.JSONEq(t, string(want), string(round))
		}
	})
}

// zeroOf returns a new zero value of the type v points to.
func zeroOf(v any) any { return reflect.New(reflect.TypeOf(v).Elem()).Interface() }
