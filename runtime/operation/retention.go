package operation

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// RetentionPlan is what one retention run deletes: messages of ConversationID (empty:
// every conversation of the scope) created before CutoffMs (nil: at any time) and not
// among the newest KeepLast of their conversation (0: none is kept for being recent).
type RetentionPlan struct {
	ConversationID string
	CutoffMs       *int64
	KeepLast       int64
	DryRun         bool
}

// scheduleBatch is how many scopes one scheduling transaction examines.
const scheduleBatch = 500

// Retention validates a retention request and starts it as an operation, stored with
// its job in one transaction.
func (o *Maintenance) Retention(ctx context.Context, scope runtime.Scope, req *contract.RetentionRequest) (*contract.OperationResponse, error) {
	norm, err := validateRetention(req)
	if err != nil {
		return nil, err
	}
	op, err := o.pendingOperation(contract.OperationRetention, norm)
	if err != nil {
		return nil, err
	}
	err = o.db.WithinTx(ctx, func(ctx context.Context, tx Stores) error {
		if err := tx.Operations.CreateOperations(ctx, []NewOperation{{Scope: scope, Operation: op, DryRun: norm.DryRun}}); err != nil {
			return err
		}
		return tx.Jobs.Enqueue(ctx, runtime.NewOperationJob(scope, op.ID))
	})
	if err != nil {
		return nil, err
	}
	return &contract.OperationResponse{Operation: op}, nil
}

// validateRetention checks a retention request and returns its normalized form, the
// operation's request echo. A policy that would wipe whole conversations (an age
// under a minute, keep-last 0) is refused: deleting a conversation does that.
func validateRetention(req *contract.RetentionRequest) (contract.RetentionRequest, error) {
	p := req.Policy
	if p == nil || (p.MaxAgeMs == nil && p.KeepLastMessages == nil) {
		return contract.RetentionRequest{}, runtime.Invalid("policy", "policy needs maxAgeMs, keepLastMessages or both")
	}
	if v := p.MaxAgeMs; v != nil && (*v < contract.MinRetentionMaxAgeMs || *v > runtime.MaxSequence) {
		return contract.RetentionRequest{}, runtime.TooMany("policy.maxAgeMs", runtime.MaxSequence,
			"policy.maxAgeMs must be between %d and %d", contract.MinRetentionMaxAgeMs, int64(runtime.MaxSequence)).
			With("minimum", contract.MinRetentionMaxAgeMs)
	}
	if v := p.KeepLastMessages; v != nil && (*v < contract.MinRetentionKeepLast || *v > contract.MaxRetentionKeepLast) {
		return contract.RetentionRequest{}, runtime.TooMany("policy.keepLastMessages", contract.MaxRetentionKeepLast,
			"policy.keepLastMessages must be between %d and %d", contract.MinRetentionKeepLast, contract.MaxRetentionKeepLast).
			With("minimum", contract.MinRetentionKeepLast)
	}
	if req.ConversationID != nil {
		if err := runtime.ValidateID("conversationId", *req.ConversationID); err != nil {
			return contract.RetentionRequest{}, err
		}
	}
	policy := *p
	return contract.RetentionRequest{Policy: &policy, ConversationID: req.ConversationID, DryRun: req.DryRun}, nil
}

// retentionPlan derives what a retention operation deletes from its request. The age
// cutoff is fixed by the time the operation was created, so a run resumed later
// deletes exactly what the first attempt would have.
func retentionPlan(op contract.Operation) (RetentionPlan, error) {
	var req contract.RetentionRequest
	if err := json.Unmarshal(op.Request, &req); err != nil || req.Policy == nil {
		return RetentionPlan{}, fmt.Errorf("decode the request of operation %s: %v", op.ID, err)
	}
	plan := RetentionPlan{DryRun: req.DryRun}
	if req.ConversationID != nil {
		plan.ConversationID = *req.ConversationID
	}
	if req.Policy.MaxAgeMs != nil {
		cutoff := op.CreatedAtMs - *req.Policy.MaxAgeMs
		plan.CutoffMs = &cutoff
	}
	if req.Policy.KeepLastMessages != nil {
		plan.KeepLast = *req.Policy.KeepLastMessages
	}
	return plan, nil
}

// ScheduleDefaultRetention creates a retention operation of the default policy, with
// its job, in every scope holding messages that has not had one since since (the start
// of this periodic run, so a run resumed after an interruption never schedules a scope
// twice) and has none in flight. Each batch of scopes is one transaction. It works
// until deadline and reports whether it finished.
func (o *Maintenance) ScheduleDefaultRetention(ctx context.Context, since, deadline time.Time) (bool, error) {
	if o.defaultMaxAge <= 0 {
		return true, nil
	}
	maxAge := o.defaultMaxAge.Milliseconds()
	req := contract.RetentionRequest{Policy: &contract.RetentionPolicy{MaxAgeMs: &maxAge}}
	var after *runtime.Scope
	for {
		var last *runtime.Scope
		err := o.db.WithinTx(ctx, func(ctx context.Context, tx Stores) error {
			due, examined, err := tx.Operations.DueRetentionScopes(ctx, after, since.UnixMilli(), scheduleBatch)
			last = examined
			if err != nil || len(due) == 0 {
				return err
			}
			ops := make([]NewOperation, len(due))
			jobs := make([]runtime.Job, len(due))
			for i, sc := range due {
				op, err := o.pendingOperation(contract.OperationRetention, req)
				if err != nil {
					return err
				}
				ops[i] = NewOperation{Scope: sc, Operation: op, DefaultPolicy: true}
				jobs[i] = runtime.NewOperationJob(sc, op.ID)
			}
			if err := tx.Operations.CreateOperations(ctx, ops); err != nil {
				return err
			}
			return tx.Jobs.Enqueue(ctx, jobs...)
		})
		if err != nil {
			return false, err
		}
		if last == nil {
			return true, nil
		}
		if !o.clock.Now().Before(deadline) {
			return false, nil
		}
		after = last
	}
}
