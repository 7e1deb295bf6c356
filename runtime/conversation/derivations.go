package conversation

import (
	"context"
	"slices"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// CreateDerivation validates and stores a derivation edge.
func (s *Windows) CreateDerivation(ctx context.Context, p runtime.Principal, req *contract.CreateDerivationRequest) (contract.Derivation, bool, error) {
	d, err := ValidateDerivation(req)
	if err != nil {
		return contract.Derivation{}, false, err
	}
	d.CreatedAtMs = s.clock.Now().UnixMilli()
	stored, created, err := s.store.CreateDerivation(ctx, p.Scope, &d)
	if err != nil {
		return contract.Derivation{}, false, err
	}
	if !created && !SameDerivation(&d, &stored) {
		return contract.Derivation{}, false, runtime.IdempotencyConflict(d.ID)
	}
	return stored, created, nil
}

// Lineage returns how a window was built: itself, its ancestors within maxDepth
// derivations and the edges between them.
func (s *Windows) Lineage(ctx context.Context, p runtime.Principal, req *contract.LineageRequest) (contract.Lineage, error) {
	if err := runtime.ValidateID("windowId", req.WindowID); err != nil {
		return contract.Lineage{}, err
	}
	depth := contract.DefaultLineageDepth
	if req.MaxDepth != nil {
		depth = *req.MaxDepth
		if depth < 1 || depth > contract.MaxLineageDepth {
			return contract.Lineage{}, runtime.TooMany("maxDepth", contract.MaxLineageDepth,
				"maxDepth must be between 1 and %d", contract.MaxLineageDepth)
		}
	}
	return s.store.Lineage(ctx, p.Scope, req.WindowID, depth)
}

// ValidateDerivation checks a create request and returns the derivation to store.
func ValidateDerivation(req *contract.CreateDerivationRequest) (contract.Derivation, error) {
	var d contract.Derivation
	id, err := runtime.IDOrNew("id", req.ID)
	if err != nil {
		return d, err
	}
	if err := runtime.ValidateID("sourceWindowId", req.SourceWindowID); err != nil {
		return d, err
	}
	if err := runtime.ValidateID("targetWindowId", req.TargetWindowID); err != nil {
		return d, err
	}
	if req.SourceWindowID == req.TargetWindowID {
		return d, runtime.Invalid("targetWindowId", "a window cannot be derived from itself")
	}
	if !slices.Contains(contract.DerivationKinds, req.Kind) {
		return d, runtime.OneOf("kind", contract.DerivationKinds)
	}
	if req.Strategy != nil {
		if err := runtime.ValidateLabel("strategy", *req.Strategy, contract.MaxIDChars); err != nil {
			return d, err
		}
	}
	if req.StrategyVersion != nil {
		if err := runtime.ValidateLabel("strategyVersion", *req.StrategyVersion, contract.MaxIDChars); err != nil {
			return d, err
		}
	}
	counts := []struct {
		field string
		v     *int64
	}{
		{"inputTokenCount", req.InputTokenCount}, {"outputTokenCount", req.OutputTokenCount},
		{"inputItemCount", req.InputItemCount}, {"outputItemCount", req.OutputItemCount},
	}
	for _, c := range counts {
		if c.v != nil && *c.v < 0 {
			return d, runtime.Invalid(c.field, "%s must not be negative", c.field)
		}
	}
	metadata, err := runtime.NormalizeJSON("metadata", req.Metadata)
	if err != nil {
		return d, err
	}
	return contract.Derivation{
		ID: id, SourceWindowID: req.SourceWindowID, TargetWindowID: req.TargetWindowID, Kind: req.Kind,
		Strategy: req.Strategy, StrategyVersion: req.StrategyVersion,
		InputTokenCount: req.InputTokenCount, OutputTokenCount: req.OutputTokenCount,
		InputItemCount: req.InputItemCount, OutputItemCount: req.OutputItemCount,
		Metadata: metadata,
	}, nil
}

func SameDerivation(req, stored *contract.Derivation) bool {
	return req.SourceWindowID == stored.SourceWindowID && req.TargetWindowID == stored.TargetWindowID &&
		req.Kind == stored.Kind && runtime.SameOptional(req.Strategy, stored.Strategy) &&
		runtime.SameOptional(req.StrategyVersion, stored.StrategyVersion) &&
		runtime.SameOptional(req.InputTokenCount, stored.InputTokenCount) &&
		runtime.SameOptional(req.OutputTokenCount, stored.OutputTokenCount) &&
		runtime.SameOptional(req.InputItemCount, stored.InputItemCount) &&
		runtime.SameOptional(req.OutputItemCount, stored.OutputItemCount) &&
		runtime.SameJSON(req.Metadata, stored.Metadata)
}
