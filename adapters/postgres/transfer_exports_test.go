package postgres_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/conversation"
	"github.com/agent-context/agent-context/runtime/transfer"
)

// The guards of an export step: chunks holding records of a conversation deleted
// since they were read are refused (the step runs again without them), and an
// artifact a deletion marked is refused whatever the chunks hold; the conversations a
// step wrote are recorded, so that their deletion marks the artifact.
func TestWriteChunksGuardsAgainstDeletion(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	db := newDB(t, pool)
	ctx := context.Background()
	scope := runtime.Scope{TenantID: "t", ProjectID: "p"}
	s := db.Transfer().Stores()
	conversations := db.Operation().Stores().Conversations
	newArtifact := func(id string) {
		require.NoError(t, s.Artifacts.CreateArtifact(ctx, scope, transfer.Artifact{Format: contract.FormatNDJSON,
			ExportArtifact: contract.ExportArtifact{ID: id, OperationID: "op-" + id, State: contract.ArtifactBuilding, ExpiresAtMs: 1 << 50}}, nil))
	}
	chunk := []transfer.ArtifactChunk{{Index: 1, Data: []byte("x"), SHA256: "sum"}}
	_, err := s.Messages.AppendMessages(ctx, scope, []contract.ConversationRecord{
		{ID: "m", Scope: contract.ConversationScope{ConversationID: "live"}, Role: contract.RoleUser, Content: "a"},
		{ID: "m", Scope: contract.ConversationScope{ConversationID: "doomed"}, Role: contract.RoleUser, Content: "b"},
	}, conversation.PlanAppend, 1)
	require.NoError(t, err)

	newArtifact("a-1")
	require.NoError(t, s.Artifacts.WriteChunks(ctx, scope, "a-1", chunk, []string{"doomed", "live"}))
	newArtifact("a-2")
	require.NoError(t, conversations.Tombstone(ctx, scope, "doomed", 2))

	err = s.Artifacts.WriteChunks(ctx, scope, "a-2", chunk, []string{"live", "doomed"})
	require.Equal(t, contract.CodeConflict, runtime.ErrorCode(err))
	var re *runtime.Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, "conversation_deleted", re.Details["reason"])
	require.Equal(t, []string{"doomed"}, re.Details["conversationIds"])
	require.NoError(t, s.Artifacts.WriteChunks(ctx, scope, "a-2", chunk, []string{"live"}), "without the deleted conversation")

	// a-1 held the deleted conversation's records: the tombstone marked it.
	_, err = s.Artifacts.Artifact(ctx, scope, "a-1")
	require.Equal(t, contract.CodeNotFound, runtime.ErrorCode(err))
	for _, write := range []func() error{
		func() error { return s.Artifacts.WriteChunks(ctx, scope, "a-1", chunk, nil) },
		func() error { return s.Artifacts.FinishArtifact(ctx, scope, "a-1", "sum") },
	} {
		require.ErrorAs(t, write(), &re)
		require.Equal(t, "artifact_deleted", re.Details["reason"])
	}
	a2, err := s.Artifacts.Artifact(ctx, scope, "a-2")
	require.NoError(t, err)
	require.Equal(t, contract.ArtifactBuilding, a2.State, "a-2 holds none of it")
	require.Equal(t, 1, a2.ChunkCount, "the refused write wrote nothing")
	require.EqualValues(t, 1, a2.TotalBytes)
}
