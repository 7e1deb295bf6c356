package contract

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// encodingJSON is what writeJSON wrote before the message reads encoded themselves.
func encodingJSON(t testing.TB, v any) []byte {
	var buf bytes.Buffer
	require.NoError(t, json.NewEncoder(&buf).Encode(v))
	return buf.Bytes()
}

type wireWriter interface{ WriteJSON(*bytes.Buffer) error }

func requireSameBytes(t testing.TB, v wireWriter) {
	var buf bytes.Buffer
	require.NoError(t, v.WriteJSON(&buf))
	require.Equal(t, string(encodingJSON(t, v)), buf.String())
}

func TestWireJSONMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	cursor := "c<1>&\u2028"
	strs := []string{"", "plain", "quote \" backslash \\ slash /", "\b\f\n\r\t\x00\x01\x1f\x7f",
		"<script>&amp;</script>", "line\u2028sep\u2029", "bad \xff utf-8 \xe2\x82", "東京タワー 🎉", "\ufffd"}
	var records []ConversationRecord
	for i, s := range strs {
		records = append(records, ConversationRecord{ID: s, Scope: ConversationScope{ConversationID: s}, Role: s, Content: s,
			Sequence: int64(i) * 1_000_000_007, CreatedAtMs: -int64(i)})
	}
	records[0].Metadata = json.RawMessage(`{"a": [1, 2.5e10, "x<y & \u2028"],  "b" : null, "c": {"d": true}}`)
	records[1].Metadata = json.RawMessage(`null`)
	records[2].Metadata = json.RawMessage(` "s" `)
	for _, v := range []wireWriter{
		&MessagesResponse{Messages: records},
		&MessagesResponse{Messages: []ConversationRecord{}},
		&MessagesResponse{},
		&MessagePage{Messages: records, NextCursor: &cursor},
		&MessagePage{Messages: []ConversationRecord{}},
	} {
		requireSameBytes(t, v)
	}
	var buf bytes.Buffer
	require.Error(t, (&MessagesResponse{Messages: []ConversationRecord{{Metadata: json.RawMessage(`{"a":`)}}}).WriteJSON(&buf))
}

func FuzzWireJSON(f *testing.F) {
	f.Add("id", "content <&> \u2028", `{"k": "v"}`, int64(1), int64(2))
	f.Add("\xff", "\x00\x1f\"\\", `[1, 2]`, int64(-1), int64(1<<53))
	f.Fuzz(func(t *testing.T, id, content, metadata string, sequence, createdAtMs int64) {
		m := ConversationRecord{ID: id, Scope: ConversationScope{ConversationID: content}, Role: id, Content: content,
			Sequence: sequence, CreatedAtMs: createdAtMs}
		if json.Valid([]byte(metadata)) {
			m.Metadata = json.RawMessage(metadata)
		}
		requireSameBytes(t, &MessagePage{Messages: []ConversationRecord{m, m}, NextCursor: &content})
	})
}

// BenchmarkWireJSON encodes a recent-50 answer (120-byte contents, a fifth with
// metadata) with WriteJSON and, as the baseline, with encoding/json's Encoder.
//
//	go test -run '^$' -bench BenchmarkWireJSON -benchmem -count 3 ./contract
func BenchmarkWireJSON(b *testing.B) {
	var r MessagesResponse
	for i := range 50 {
		m := ConversationRecord{ID: "message-" + strconv.Itoa(i), Scope: ConversationScope{ConversationID: "conv-1234"}, Role: RoleUser,
			Content:  strings.Repeat("the quick brown fox jumps ", 5)[:120],
			Sequence: int64(i + 1), CreatedAtMs: 1_700_000_000_000 + int64(i)}
		if i%5 == 0 {
			m.Metadata = json.RawMessage(`{"model": "bench-1", "tokens": 123}`)
		}
		r.Messages = append(r.Messages, m)
	}
	var buf bytes.Buffer
	b.Run("WriteJSON", func(b *testing.B) {
		for b.Loop() {
			buf.Reset()
			require.NoError(b, r.WriteJSON(&buf))
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			buf.Reset()
			require.NoError(b, json.NewEncoder(&buf).Encode(&r))
		}
	})
}
