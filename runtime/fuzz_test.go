package runtime_test

// Fuzz targets for every request validator, called through the use cases' public
// entry points with bodies decoded as the server decodes them. Each asserts what the
// contract promises of any input: a refusal is a *runtime.Error with a 4xx code of
// the contract's table naming the offending field, nothing reaches the store then,
// and whatever is runtimetest.Accepted reaches the store within every limit. Seed corpora are in
// testdata/fuzz/<target>/.

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/runtimetest"
)

// FuzzCursorDecode: a cursor from the wire is INVALID_CURSOR (field cursor) or it is
// exactly the cursor Encode makes for the position it decodes to: no other spelling
// of a cursor is runtimetest.Accepted, and no position outside 0..2^62.
func FuzzCursorDecode(f *testing.F) {
	codec := runtime.NewCursorCodec([]byte(strings.Repeat("k", 32)))
	binding := runtime.CursorBinding{Kind: "messages", Scope: runtime.Scope{TenantID: "t", ProjectID: "p"},
		ConversationID: "c", Order: contract.OrderAsc}
	f.Fuzz(func(t *testing.T, cursor string) {
		pos, err := codec.Decode(binding, cursor)
		if err != nil {
			runtimetest.RequireRefusal(t, err)
			require.Equal(t, contract.CodeInvalidCursor, runtime.ErrorCode(err))
			return
		}
		require.GreaterOrEqual(t, pos, int64(0))
		require.LessOrEqual(t, pos, int64(1)<<62)
		require.Equal(t, codec.Encode(binding, pos), cursor)
	})
}

// FuzzCursorRoundTrip: any position round-trips under its binding, and the cursor is
// refused under any other binding.
func FuzzCursorRoundTrip(f *testing.F) {
	codec := runtime.NewCursorCodec([]byte(strings.Repeat("k", 32)))
	f.Fuzz(func(t *testing.T, position int64, tenant, conversation, order, role string) {
		if position < 0 || position > 1<<62 {
			return
		}
		b := runtime.CursorBinding{Kind: "messages", Scope: runtime.Scope{TenantID: tenant, ProjectID: "p"},
			ConversationID: conversation, Order: order, Roles: []string{role}}
		cursor := codec.Encode(b, position)
		require.Less(t, len(cursor), 128)
		got, err := codec.Decode(b, cursor)
		require.NoError(t, err)
		require.Equal(t, position, got)
		for _, other := range []runtime.CursorBinding{
			{Kind: b.Kind, Scope: runtime.Scope{TenantID: tenant + "x", ProjectID: "p"}, ConversationID: conversation, Order: order, Roles: b.Roles},
			{Kind: b.Kind, Scope: b.Scope, ConversationID: conversation + "x", Order: order, Roles: b.Roles},
			{Kind: b.Kind, Scope: b.Scope, ConversationID: conversation, Order: order + "x", Roles: b.Roles},
			{Kind: b.Kind, Scope: b.Scope, ConversationID: conversation, Order: order, Roles: []string{role + "x"}},
		} {
			_, err := codec.Decode(other, cursor)
			require.Equal(t, contract.CodeInvalidCursor, runtime.ErrorCode(err))
		}
	})
}
