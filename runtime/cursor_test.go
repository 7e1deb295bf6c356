package runtime_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/runtimetest"
)

func TestCursorRoundTrip(t *testing.T) {
	t.Parallel()
	codec := runtime.NewCursorCodec([]byte(strings.Repeat("s", 32)))
	b := runtime.CursorBinding{Kind: "messages", Scope: runtime.Scope{TenantID: "t", ProjectID: "p"},
		ConversationID: "c", Order: "asc", Roles: []string{"user", "tool"}}
	for _, pos := range []int64{0, 1, 127, 128, 1 << 40, runtime.MaxSequence} {
		cursor := codec.Encode(b, pos)
		require.NotContains(t, cursor, "=")
		require.NotContains(t, cursor, "+")
		require.NotContains(t, cursor, "/")
		got, err := codec.Decode(b, cursor)
		require.NoError(t, err)
		require.Equal(t, pos, got)
	}
	// The roles filter is a set: order and repeats do not change it.
	same := b
	same.Roles = []string{"tool", "user", "tool"}
	_, err := codec.Decode(same, codec.Encode(b, 5))
	require.NoError(t, err)
}

func TestCursorRefusesTamperingAndOtherBindings(t *testing.T) {
	t.Parallel()
	codec := runtime.NewCursorCodec([]byte(strings.Repeat("s", 32)))
	b := runtime.CursorBinding{Kind: "messages", Scope: runtime.Scope{TenantID: "t", ProjectID: "p"},
		ConversationID: "c", Order: "asc"}
	cursor := codec.Encode(b, 42)
	invalid := func(b runtime.CursorBinding, cursor string) {
		t.Helper()
		_, err := codec.Decode(b, cursor)
		runtimetest.RequireError(t, err, contract.CodeInvalidCursor, map[string]any{"field": "cursor"})
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for i := range cursor {
		for _, c := range []byte{alphabet[(strings.IndexByte(alphabet, cursor[i])+1)%64], alphabet[(strings.IndexByte(alphabet, cursor[i])+33)%64]} {
			invalid(b, cursor[:i]+string(c)+cursor[i+1:])
		}
	}
	for _, bad := range []string{
		cursor + "=", cursor + "A", cursor[:len(cursor)-1], cursor[:10] + "\n" + cursor[10:], "", "%%%", "null",
		strings.Repeat("A", 4096), runtime.NewCursorCodec([]byte(strings.Repeat("z", 32))).Encode(b, 42),
	} {
		invalid(b, bad)
	}
	for _, other := range []runtime.CursorBinding{
		{Kind: "other", Scope: b.Scope, ConversationID: "c", Order: "asc"},
		{Kind: "messages", Scope: runtime.Scope{TenantID: "t2", ProjectID: "p"}, ConversationID: "c", Order: "asc"},
		{Kind: "messages", Scope: runtime.Scope{TenantID: "t", ProjectID: "p2"}, ConversationID: "c", Order: "asc"},
		{Kind: "messages", Scope: runtime.Scope{TenantID: "tp", ProjectID: ""}, ConversationID: "c", Order: "asc"},
		{Kind: "messages", Scope: b.Scope, ConversationID: "c2", Order: "asc"},
		{Kind: "messages", Scope: b.Scope, ConversationID: "c", Order: "desc"},
		{Kind: "messages", Scope: b.Scope, ConversationID: "c", Order: "asc", Roles: []string{"user"}},
	} {
		invalid(other, cursor)
	}
}

func TestKeyCursors(t *testing.T) {
	t.Parallel()
	codec := runtime.NewCursorCodec([]byte(strings.Repeat("s", 32)))
	b := runtime.CursorBinding{Kind: "a2a-agents", Scope: runtime.Scope{TenantID: "t", ProjectID: "p"}}
	for _, key := range []string{"a", "agent-1", strings.Repeat("é", contract.MaxIDChars)} {
		got, err := codec.DecodeKey(b, codec.EncodeKey(b, key))
		require.NoError(t, err)
		require.Equal(t, key, got)
	}
	invalid := func(err error) {
		t.Helper()
		runtimetest.RequireError(t, err, contract.CodeInvalidCursor, map[string]any{"field": "cursor"})
	}
	// A key cursor is never read as a position cursor, nor the other way round.
	_, err := codec.Decode(b, codec.EncodeKey(b, "agent-1"))
	invalid(err)
	_, err = codec.DecodeKey(b, codec.Encode(b, 7))
	invalid(err)
	_, err = codec.DecodeKey(runtime.CursorBinding{Kind: "a2a-agents", Scope: runtime.Scope{TenantID: "t2", ProjectID: "p"}}, codec.EncodeKey(b, "a"))
	invalid(err)
	// A cursor bound to a subject is refused for another.
	mine := runtime.CursorBinding{Kind: "a2a-tasks", Scope: b.Scope, Order: "any", Subject: "alice"}
	theirs := mine
	theirs.Subject = "bob"
	_, err = codec.Decode(theirs, codec.Encode(mine, 3))
	invalid(err)
}
