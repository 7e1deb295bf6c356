package operation

import (
	"context"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// DeleteConversation tombstones a conversation and starts its physical deletion, in
// one transaction with the operation and its job. It returns the operation and
// whether its work was started now: deleting an already deleted conversation returns
// the existing operation, unless that operation failed, in which case the same
// operation goes back to pending and its job is enqueued again (docs/operations.md).
func (o *Maintenance) DeleteConversation(ctx context.Context, scope runtime.Scope, req *contract.DeleteConversationRequest) (*contract.OperationResponse, bool, error) {
	if err := runtime.ValidateID("conversationId", req.ConversationID); err != nil {
		return nil, false, err
	}
	op, err := o.pendingOperation(contract.OperationConversationDelete, contract.DeleteConversationRequest{ConversationID: req.ConversationID})
	if err != nil {
		return nil, false, err
	}
	var stored contract.Operation
	started := false
	err = o.db.WithinTx(ctx, func(ctx context.Context, tx Stores) error {
		// The tombstone locks the head first, so concurrent deletions of one
		// conversation take their turns and see each other's operation.
		if err := tx.Conversations.Tombstone(ctx, scope, req.ConversationID, op.CreatedAtMs); err != nil {
			return err
		}
		existing, err := tx.Operations.ConversationDeletion(ctx, scope, req.ConversationID)
		switch {
		case err == nil && existing.State == contract.OperationFailed:
			if stored, err = tx.Operations.RestartOperation(ctx, scope, existing.ID, op.CreatedAtMs); err != nil {
				return err
			}
			started = true
			return tx.Jobs.Enqueue(ctx, runtime.NewOperationJob(scope, existing.ID))
		case err == nil:
			stored = existing
			return nil
		case runtime.ErrorCode(err) != contract.CodeNotFound:
			return err
		}
		if err := tx.Operations.CreateOperations(ctx, []NewOperation{{Scope: scope, Operation: op, ConversationID: req.ConversationID}}); err != nil {
			return err
		}
		stored, started = op, true
		return tx.Jobs.Enqueue(ctx, runtime.NewOperationJob(scope, op.ID))
	})
	if err != nil {
		return nil, false, err
	}
	return &contract.OperationResponse{Operation: stored}, started, nil
}

// ConversationStore keeps conversation heads: the row that exists once a conversation
// was named, allocates its sequences and carries its tombstone.
type ConversationStore interface {
	// Tombstone marks the conversation deleted (creating its head when it never
	// existed; an earlier tombstone keeps its time) and holds its head locked until
	// the transaction ends, so that no append, window or invocation of it commits
	// after the tombstone. Errors: SERVICE_UNAVAILABLE.
	Tombstone(ctx context.Context, scope runtime.Scope, conversationID string, nowMs int64) error
}
