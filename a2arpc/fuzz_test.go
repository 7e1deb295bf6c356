package a2arpc

import (
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
)

// FuzzJSONRPCDecoder: every body gets an answer: a failure with a JSON-RPC code of
// docs/a2a-protocol.md, or a method and an id that is a string, a number or null; never a panic.
func FuzzJSONRPCDecoder(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"parts":[{"kind":"text","text":"x"}]}}}`,
		`{"jsonrpc":"2.0","id":"a","method":"GetTask","params":{"id":"t"}}`, `{"jsonrpc":"2.0","id":{},"method":"x"}`,
		`{"jsonrpc":2,"method":"x"}`, `{"jsonrpc":"2.0","method":5}`, `[1]`, `{`, "\xef\xbb\xbf{}", `{"id":1,"id":2}`,
		`{"jsonrpc":"2.0","method":"tasks/get","params":{"id":"t"}}`,
	} {
		f.Add([]byte(s))
	}
	codes := map[int]bool{contract.RPCParseError: true, contract.RPCInvalidRequest: true}
	f.Fuzz(func(t *testing.T, body []byte) {
		id, _, params, notification, fail := parseRPCRequest(body)
		require.True(t, id.IsValid(), "id %q", id)
		require.Contains(t, []jsontext.Kind{'"', '0', 'n'}, id.Kind())
		if fail != nil {
			require.True(t, codes[fail.code], "code %d", fail.code)
			require.False(t, notification, "a request not understood is answered")
			return
		}
		if len(params) > 0 {
			require.True(t, params.IsValid())
			for i := 0; i < 3; i++ {
				_, _ = inboundPart(params, generation(i%2), i)
			}
		}
	})
}
