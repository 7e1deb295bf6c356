package operation_test

// Fuzz targets for every request validator, called through the use cases' public
// entry points with bodies decoded as the server decodes them. Each asserts what the
// contract promises of any input: a refusal is a *runtime.Error with a 4xx code of
// the contract's table naming the offending field, nothing reaches the store then,
// and whatever is runtimetest.Accepted reaches the store within every limit. Seed corpora are in
// testdata/fuzz/<target>/.

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/runtimetest"
)

// FuzzDeleteConversation: an runtimetest.Accepted deletion creates one pending operation whose
// request echo is exactly the conversation it deletes.
func FuzzDeleteConversation(f *testing.F) {
	runtimetest.FuzzBody(f, func(t *testing.T, req *contract.DeleteConversationRequest) {
		store := newStubOperations()
		res, _, err := newOps(store, 0).DeleteConversation(context.Background(), opScope, req)
		if !runtimetest.Accepted(t, err, len(store.created)) {
			return
		}
		runtimetest.RequireID(t, "conversationId", req.ConversationID)
		require.Len(t, store.created, 1)
		require.Equal(t, contract.OperationConversationDelete, res.Operation.Kind)
		require.Equal(t, contract.OperationPending, res.Operation.State)
		var echo contract.DeleteConversationRequest
		require.True(t, runtimetest.DecodeRequest(res.Operation.Request, &echo), "%s", res.Operation.Request)
		require.Equal(t, *req, echo)
	})
}

// FuzzRetention: an runtimetest.Accepted retention request has a policy with at least one bound,
// both within 0..2^53-1, a valid conversation when it names one, and its operation
// echoes it normalized.
func FuzzRetention(f *testing.F) {
	runtimetest.FuzzBody(f, func(t *testing.T, req *contract.RetentionRequest) {
		store := newStubOperations()
		res, err := newOps(store, 0).Retention(context.Background(), opScope, req)
		if !runtimetest.Accepted(t, err, len(store.created)) {
			return
		}
		require.NotNil(t, req.Policy)
		require.True(t, req.Policy.MaxAgeMs != nil || req.Policy.KeepLastMessages != nil)
		for _, v := range []*int64{req.Policy.MaxAgeMs, req.Policy.KeepLastMessages} {
			if v != nil {
				require.GreaterOrEqual(t, *v, int64(0))
				require.LessOrEqual(t, *v, int64(runtime.MaxSequence))
			}
		}
		if req.ConversationID != nil {
			runtimetest.RequireID(t, "conversationId", *req.ConversationID)
		}
		require.Len(t, store.created, 1)
		var echo contract.RetentionRequest
		require.True(t, runtimetest.DecodeRequest(res.Operation.Request, &echo), "%s", res.Operation.Request)
		require.Equal(t, *req, echo)
	})
}
