package transfer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/operation"
)

// Advanced starts an advanced operation (purge_expired_entries, reindex_text_search or
// verify_integrity) in the caller's scope: the operation and its job in one
// transaction.
func (x *Exports) Advanced(ctx context.Context, scope runtime.Scope, req *contract.AdvancedOperationRequest) (*contract.OperationResponse, error) {
	if !slices.Contains(contract.AdvancedKinds, req.Kind) {
		return nil, runtime.OneOf("kind", contract.AdvancedKinds)
	}
	if err := validateNoParams(req.Params); err != nil {
		return nil, err
	}
	op, err := operation.PendingOperation(contract.OperationAdvanced, contract.AdvancedOperationRequest{Kind: req.Kind, Params: json.RawMessage(`{}`)}, x.clock.Now())
	if err != nil {
		return nil, err
	}
	err = x.db.WithinTx(ctx, func(ctx context.Context, tx Stores) error {
		if err := tx.Operations.CreateOperations(ctx, []operation.NewOperation{{Scope: scope, Operation: op}}); err != nil {
			return err
		}
		return tx.Jobs.Enqueue(ctx, runtime.NewOperationJob(scope, op.ID))
	})
	if err != nil {
		return nil, err
	}
	return &contract.OperationResponse{Operation: op}, nil
}

// validateNoParams accepts params absent, null or an empty object: no kind takes any
// yet, so a member is an unknown field.
func validateNoParams(raw json.RawMessage) error {
	v := bytes.TrimSpace(raw)
	if len(v) == 0 || string(v) == "null" {
		return nil
	}
	var params map[string]json.RawMessage
	if err := json.Unmarshal(v, &params); err != nil || params == nil {
		return runtime.Invalid("params", "params must be an object")
	}
	if len(params) > 0 {
		name := "params." + slices.Sorted(maps.Keys(params))[0]
		return runtime.Invalid(name, "unknown field %q", name)
	}
	return nil
}

// advancedStep returns the step of an advanced operation.
func (x *Exports) advancedStep(op contract.Operation) (func(ctx context.Context, scope runtime.Scope, nowMs int64) (bool, error), error) {
	var req contract.AdvancedOperationRequest
	if err := json.Unmarshal(op.Request, &req); err != nil {
		return nil, fmt.Errorf("decode the request of operation %s: %w", op.ID, err)
	}
	var step func(ctx context.Context, tx Stores, scope runtime.Scope, cur *advancedCursor) (result any, done int64, err error)
	switch req.Kind {
	case contract.AdvancedPurgeExpiredEntries:
		step = func(ctx context.Context, tx Stores, scope runtime.Scope, cur *advancedCursor) (any, int64, error) {
			return x.purgeEntriesStep(ctx, tx, scope, op.CreatedAtMs, cur)
		}
	case contract.AdvancedReindexTextSearch:
		step = x.reindexStep
	case contract.AdvancedVerifyIntegrity:
		step = func(ctx context.Context, tx Stores, scope runtime.Scope, cur *advancedCursor) (any, int64, error) {
			return x.verifyStep(ctx, tx, scope, op.CreatedAtMs, cur)
		}
	default:
		return nil, fmt.Errorf("operation %s: unknown advanced kind %q", op.ID, req.Kind)
	}
	return func(ctx context.Context, scope runtime.Scope, nowMs int64) (bool, error) {
		finished := false
		err := x.db.WithinTx(ctx, func(ctx context.Context, tx Stores) error {
			cur := advancedCursor{Key: startKey}
			running, err := tx.Steps.LockStep(ctx, scope, op.ID, x.bounds.Timeout, &cur)
			if err != nil || !running {
				finished = err == nil
				return err
			}
			result, done, err := step(ctx, tx, scope, &cur)
			if err != nil {
				return err
			}
			if result != nil {
				finished = true
				return tx.Steps.SucceedStep(ctx, scope, op.ID, result, done, nowMs)
			}
			return tx.Steps.SaveStep(ctx, scope, op.ID, cur, done, nowMs)
		})
		return finished, err
	}, nil
}

// advancedCursor is where an advanced operation stands, kept with its operation.
type advancedCursor struct {
	// Phase is the reindex's table (messages, then entries).
	Phase string    `json:"phase,omitempty"`
	Key   ExportKey `json:"key"`
	// The counts of the result so far.
	Purged         int64                        `json:"purged,omitempty"`
	Messages       int64                        `json:"messages,omitempty"`
	Entries        int64                        `json:"entries,omitempty"`
	WindowsChecked int64                        `json:"windowsChecked,omitempty"`
	MismatchCount  int64                        `json:"mismatchCount,omitempty"`
	Mismatches     []contract.IntegrityMismatch `json:"mismatches,omitempty"`
}

// purgeEntriesStep deletes the next entries whose expiry passed before the operation
// was created, with their vectors and queue rows.
func (x *Exports) purgeEntriesStep(ctx context.Context, tx Stores, scope runtime.Scope, cutoffMs int64, cur *advancedCursor) (any, int64, error) {
	purged, last, more, err := tx.Maintenance.PurgeExpiredEntries(ctx, scope, cutoffMs, cur.Key, x.bounds.Rows)
	if err != nil {
		return nil, 0, err
	}
	if len(purged) > 0 {
		if err := tx.Projection.Retire(ctx, scope, purged); err != nil {
			return nil, 0, err
		}
	}
	cur.Key, cur.Purged = last, cur.Purged+int64(len(purged))
	if more {
		return nil, int64(len(purged)), nil
	}
	return contract.PurgeExpiredEntriesResult{PurgedEntries: cur.Purged}, int64(len(purged)), nil
}

// Phases of a reindex.
const (
	reindexMessages = "messages"
	reindexEntries  = "entries"
)

// reindexStep rebuilds the full-text documents of the next messages, then entries.
func (x *Exports) reindexStep(ctx context.Context, tx Stores, scope runtime.Scope, cur *advancedCursor) (any, int64, error) {
	if cur.Phase == "" {
		cur.Phase = reindexMessages
	}
	reindex := tx.Maintenance.ReindexMessages
	if cur.Phase == reindexEntries {
		reindex = tx.Maintenance.ReindexEntries
	}
	last, n, more, err := reindex(ctx, scope, cur.Key, x.bounds)
	if err != nil {
		return nil, 0, err
	}
	cur.Key = last
	if cur.Phase == reindexMessages {
		cur.Messages += n
	} else {
		cur.Entries += n
	}
	switch {
	case more:
	case cur.Phase == reindexMessages:
		cur.Phase, cur.Key = reindexEntries, startKey
	default:
		return contract.ReindexResult{Messages: cur.Messages, Entries: cur.Entries}, n, nil
	}
	return nil, n, nil
}

// verifyStep recomputes the digests of the next windows from their stored items and
// notes each window whose stored contentSha256, itemCount or contentBytes differs.
func (x *Exports) verifyStep(ctx context.Context, tx Stores, scope runtime.Scope, createdBefore int64, cur *advancedCursor) (any, int64, error) {
	v := &windowVerifier{cur: cur}
	more, err := tx.Walks.ExportWindows(ctx, scope, ExportQuery{CreatedBefore: createdBefore, After: cur.Key,
		Rows: x.bounds.Rows, Bytes: x.bounds.Bytes}, v)
	if err != nil {
		return nil, 0, err
	}
	if more {
		return nil, v.checked, nil
	}
	mismatches := cur.Mismatches
	if mismatches == nil {
		mismatches = []contract.IntegrityMismatch{}
	}
	return contract.IntegrityResult{WindowsChecked: cur.WindowsChecked, MismatchCount: cur.MismatchCount,
		Mismatches: mismatches}, v.checked, nil
}

// windowVerifier is a WindowSink that digests each window's items as they stream in.
type windowVerifier struct {
	cur     *advancedCursor
	win     *contract.Window
	digest  *runtime.WindowDigester
	checked int64
	bad     bool
}

func (v *windowVerifier) Window(w *contract.Window) error {
	v.win, v.digest, v.bad = w, runtime.NewWindowDigester(), false
	return nil
}

func (v *windowVerifier) Item(it *contract.WindowItem) error {
	if err := v.digest.Add(it); err != nil {
		// A stored item without a canonical form cannot give the stored digest.
		v.bad = true
	}
	return nil
}

func (v *windowVerifier) EndWindow() error {
	items, contentBytes, sum := v.digest.Sum()
	w := v.win
	v.cur.Key = ExportKey{ID: w.ID}
	v.cur.WindowsChecked++
	v.checked++
	if !v.bad && sum == w.ContentSHA256 && items == w.ItemCount && contentBytes == w.ContentBytes {
		return nil
	}
	v.cur.MismatchCount++
	if len(v.cur.Mismatches) < contract.MaxIntegrityMismatches {
		v.cur.Mismatches = append(v.cur.Mismatches, contract.IntegrityMismatch{
			WindowID: w.ID, ConversationID: w.Conversation.ConversationID,
			StoredSHA256: w.ContentSHA256, ComputedSHA256: sum,
			StoredItemCount: w.ItemCount, ComputedItemCount: items,
			StoredContentBytes: w.ContentBytes, ComputedContentBytes: contentBytes,
		})
	}
	return nil
}
