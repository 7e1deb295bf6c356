package server

import (
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// FuzzEnvelopeDecoder: the handoff decoder refuses with VALIDATION_FAILED or decodes an
// envelope that survives a round trip unchanged; it never panics.
func FuzzEnvelopeDecoder(f *testing.F) {
	for _, s := range []string{
		`{"message_id":"m-1","correlation_id":"c-1","from":"a","to":"b","ts":"2026-11-30T12:00:00.000Z","ttl_ms":30000,"version":"1.0","content_type":"a2a_message","payload":{"content":"hi"},"signature":"ed25519:k1:AAAA"}`,
		`{"message_id":"m","message_id":"n"}`, `{"Message_Id":"m"}`, `{"ttl_ms":1e400}`, `{"payload":}`, `[]`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var env contract.Envelope
		err := runtime.DecodeJSON(body, &env)
		if err != nil {
			require.Equal(t, contract.CodeValidationFailed, runtime.ErrorCode(err), "%v", err)
			return
		}
		again, err := json.Marshal(&env)
		require.NoError(t, err)
		var back contract.Envelope
		require.NoError(t, runtime.DecodeJSON(again, &back))
		require.Equal(t, env.MessageID, back.MessageID)
		require.Equal(t, env.TTLMs, back.TTLMs)
		require.Equal(t, signature(env), signature(back))
		if len(env.Payload) > 0 {
			require.Equal(t, jsontext.Value(env.Payload).IsValid(), true)
		}
	})
}

// signature is an envelope's signature, "" when absent: an empty one is omitted when
// encoded, so it comes back absent.
func signature(env contract.Envelope) string {
	if env.Signature == nil {
		return ""
	}
	return *env.Signature
}
