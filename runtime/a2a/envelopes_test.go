package a2a_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/runtime/a2a"
)

// reordered writes v with every object's members in reverse order and whitespace
// between all tokens: the same JSON value, spelled differently.
func reordered(v any) []byte {
	var b bytes.Buffer
	var write func(v any)
	write = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Sort(sort.Reverse(sort.StringSlice(keys)))
			b.WriteString("{ \n")
			for i, k := range keys {
				if i > 0 {
					b.WriteString(" ,\t")
				}
				kb, _ := json.Marshal(k)
				b.Write(kb)
				b.WriteString(" : ")
				write(x[k])
			}
			b.WriteString(" }")
		case []any:
			b.WriteString("[ ")
			for i, e := range x {
				if i > 0 {
					b.WriteString(" , ")
				}
				write(e)
			}
			b.WriteString(" ]")
		default:
			eb, _ := json.Marshal(x)
			b.Write(eb)
		}
	}
	write(v)
	return b.Bytes()
}

// FuzzEnvelopeCanonical: the signing input of an envelope is canonical (a fixed point),
// ignores the signature member, and does not change when the envelope's members are
// reordered or spaced out.
func FuzzEnvelopeCanonical(f *testing.F) {
	for _, s := range []string{
		`{"message_id":"m-1","from":"a","to":"b","ts":"2026-11-30T12:00:00.000Z","ttl_ms":30000,"version":"1.0","content_type":"a2a_message","payload":{"content":"hi"}}`,
		`{"payload":{"z":[1,2.5,-0,1e21,"é\u2028"],"a":{"y":null,"b":true}},"signature":"ed25519:k1:AAAA"}`,
		`{"\u00e9":"\ud83d\ude00","e\u0301":"\t","":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		input, err := a2a.EnvelopeSigningInput(raw)
		if err != nil {
			return
		}
		again, err := a2a.EnvelopeSigningInput(input)
		require.NoError(t, err)
		require.Equal(t, input, again, "the canonical form is a fixed point")
		var v map[string]any
		if json.Unmarshal(raw, &v) != nil {
			return
		}
		v["signature"] = "hmac-sha256:k:x"
		spelled, err := a2a.EnvelopeSigningInput(reordered(v))
		require.NoError(t, err)
		require.Equal(t, input, spelled, "reordering, whitespace and the signature do not change it")
	})
}

// TestSignEnvelopeVerifiesAfterReordering: a signature made by SignEnvelope verifies
// over the signing input of the same envelope spelled another way.
func TestSignEnvelopeVerifiesAfterReordering(t *testing.T) {
	t.Parallel()
	seed := sha256.Sum256([]byte("seed"))
	priv := ed25519.NewKeyFromSeed(seed[:])
	raw := []byte(`{"to":"b","from":"a","payload":{"x":[1,{"b":2,"a":1}]},"message_id":"m"}`)
	signed, err := a2a.SignEnvelope(raw, "ed25519", "k1", func(m []byte) []byte { return ed25519.Sign(priv, m) })
	require.NoError(t, err)
	var v map[string]any
	require.NoError(t, json.Unmarshal(signed, &v))
	alg, keyID, value, ok := a2a.ParseSignature(v["signature"].(string))
	require.True(t, ok)
	require.Equal(t, "ed25519", alg)
	require.Equal(t, "k1", keyID)
	input, err := a2a.EnvelopeSigningInput(reordered(v))
	require.NoError(t, err)
	sig, err := decodeB64URL(value)
	require.NoError(t, err)
	require.True(t, ed25519.Verify(priv.Public().(ed25519.PublicKey), input, sig))
}

func decodeB64URL(s string) ([]byte, error) { return base64.RawURLEncoding.Strict().DecodeString(s) }
