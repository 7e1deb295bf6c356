package gate

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
		{"unknown member", `{"name":"a","nmae":"b"}`, "nmae", `unknown field "nmae"`}, //nolint:misspell // the typo is the test's input
		{"duplicate member", `{"counts":{"a":1,"a":2}}`, "counts.a", `duplicate field "counts.a"`},
		{"duplicate member named like an error", `{"counts":{"unknown object member name":1,"unknown object member name":2}}`,
			"counts.unknown object member name", `duplicate field "counts.unknown object member name"`},
		{"invalid UTF-8 in a value", "{\"name\":\"a\xffb\"}", "name", "the value is not valid UTF-8"},
		{"invalid UTF-8 in a member name", "{\"counts\":{\"\xff\":1}}", "counts", "the value is not valid UTF-8"},
		{"malformed", `{"name":"a",}`, "body", "malformed JSON"},
		{"unknown member with an empty name", `{"":1}`, "body", `unknown field ""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var v request
			err := runtime.DecodeJSON([]byte(tc.body), &v)
			var re *runtime.Error
			require.ErrorAs(t, err, &re)
			require.Equal(t, contract.CodeValidationFailed, re.Code)
			require.Equal(t, tc.field, re.Details["field"])
			require.Equal(t, tc.message, re.Message)
		})
	}
	// A duplicate member named "" at the top level has an empty path.
	var top map[string]int
	err := runtime.DecodeJSON([]byte(`{"":1,"":2}`), &top)
	var re *runtime.Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, "body", re.Details["field"])
	require.Equal(t, `duplicate field ""`, re.Message)
}

// TestIntegersAreBoundedToTheSafeRange: every integer of a request, whatever its Go
// type and wherever it sits, is at most 2^53 − 1 in magnitude (docs/api.md);
// one past it is refused with details.limit, while metadata keeps any JSON number.
func TestIntegersAreBoundedToTheSafeRange(t *testing.T) {
	t.Parallel()
	type item struct {
		N int `json:"n"`
	}
	type request struct {
		A        int64          `json:"a"`
		P        *int64         `json:"p"`
		Items    []item         `json:"items"`
		Metadata jsontext.Value `json:"metadata"`
	}
	for _, tc := range []struct {
		name, body, field, message string
		limit                      bool
	}{
		{"one past the bound", `{"a":9007199254740992}`, "a", "a is out of range", true},
		{"one past the negative bound", `{"a":-9007199254740992}`, "a", "a is out of range", true},
		{"past int64", `{"a":92233720368547758070}`, "a", "a is out of range", true},
		{"exponent past the bound", `{"p":1e100}`, "p", "p is out of range", true},
		{"past float64", `{"p":1e400}`, "p", "p is out of range", true},
		{"nested", `{"items":[{"n":1},{"n":9007199254740993}]}`, "items[1].n", "items[1].n is out of range", true},
		{"a fraction", `{"a":2.5}`, "a", "a must be an integer", false},
		{"an exponent", `{"a":1e3}`, "a", "a must be an integer", false},
		{"a string", `{"a":"5"}`, "a", "a has the wrong type or an out-of-range value", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var v request
			err := runtime.DecodeJSON([]byte(tc.body), &v)
			var re *runtime.Error
			require.ErrorAs(t, err, &re)
			require.Equal(t, contract.CodeValidationFailed, re.Code)
			require.Equal(t, tc.field, re.Details["field"])
			require.Equal(t, tc.message, re.Message)
			if tc.limit {
				require.Equal(t, int64(runtime.MaxSequence), re.Details["limit"])
			} else {
				require.NotContains(t, re.Details, "limit")
			}
		})
	}
	var v request
	require.NoError(t, runtime.DecodeJSON([]byte(`{"a":-9007199254740991,"p":9007199254740991,"items":[{"n":0}],"metadata":{"big":1e400}}`), &v))
	require.Equal(t, int64(-runtime.MaxSequence), v.A)
	require.Equal(t, int64(runtime.MaxSequence), *v.P)
	require.Equal(t, []item{{N: 0}}, v.Items)
	require.NoError(t, runtime.DecodeJSON([]byte(`{"p":null}`), &v))
	require.Nil(t, v.P)
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
	g := New(Config{MaxBodyBytes: maxBytes, MaxInFlightBodyBytes: maxBytes})
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, v := range fuzzTargets() {
			req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			release, err := g.Decode(req, v)
			release()
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
			require.NoError(t, runtime.DecodeJSON(want, again))
			round, err := stdjson.Marshal(again)
			require.NoError(t, err)
			require.JSONEq(t, string(want), string(round))
		}
	})
}

// zeroOf returns a new zero value of the type v points to.
func zeroOf(v any) any { return reflect.New(reflect.TypeOf(v).Elem()).Interface() }
