package runtime

import (
	"context"
	"slices"

	"github.com/agent-context/agent-context/contract"
)

// SaveInvocation validates and stores a model invocation record. It reports whether
// the record was created now; both a fresh save and an identical retry answer 200.
func (s *Windows) SaveInvocation(ctx context.Context, p Principal, req *contract.CreateModelInvocationRequest) (contract.ModelInvocation, error) {
	inv, err := ValidateInvocation(req, p.Subject)
	if err != nil {
		return contract.ModelInvocation{}, err
	}
	now := s.clock.Now().UnixMilli()
	inv.CreatedAtMs = now
	if inv.StartedAtMs == 0 {
		inv.StartedAtMs = now
	}
	stored, created, err := s.store.SaveInvocation(ctx, p.Scope, &inv)
	if err != nil {
		return contract.ModelInvocation{}, err
	}
	if !created && !sameInvocation(req, &inv, &stored) {
		return contract.ModelInvocation{}, idempotencyConflict(inv.ID)
	}
	return stored, nil
}

// GetInvocation returns a model invocation record.
func (s *Windows) GetInvocation(ctx context.Context, p Principal, req *contract.GetModelInvocationRequest) (contract.ModelInvocation, error) {
	if err := ValidateID("invocationId", req.InvocationID); err != nil {
		return contract.ModelInvocation{}, err
	}
	return s.store.GetInvocation(ctx, p.Scope, req.InvocationID)
}

// ValidateInvocation checks a save request and returns the record to store; subject
// is the caller, the default agentId.
func ValidateInvocation(req *contract.CreateModelInvocationRequest, subject string) (contract.ModelInvocation, error) {
	var inv contract.ModelInvocation
	id, err := idOrNew("id", req.ID)
	if err != nil {
		return inv, err
	}
	if req.Conversation == nil {
		return inv, Invalid("conversation", "conversation is required")
	}
	if err := ValidateID("conversation.conversationId", req.Conversation.ConversationID); err != nil {
		return inv, err
	}
	if err := ValidateID("requestWindowId", req.RequestWindowID); err != nil {
		return inv, err
	}
	agentID := subject
	if req.AgentID != nil {
		agentID = *req.AgentID
	}
	if err := ValidateID("agentId", agentID); err != nil {
		return inv, err
	}
	if req.ToolName != nil {
		if err := ValidateID("toolName", *req.ToolName); err != nil {
			return inv, err
		}
	}
	if err := ValidateID("provider", req.Provider); err != nil {
		return inv, err
	}
	if err := ValidateID("model", req.Model); err != nil {
		return inv, err
	}
	if !slices.Contains(contract.InvocationStates, req.State) {
		return inv, oneOf("state", contract.InvocationStates)
	}
	nonNegative := []struct {
		field string
		v     int64
	}{
		{"inputTokens", req.InputTokens}, {"outputTokens", req.OutputTokens}, {"cachedTokens", req.CachedTokens},
		{"startedAtMs", req.StartedAtMs}, {"completedAtMs", req.CompletedAtMs}, {"latencyMs", req.LatencyMs},
	}
	for _, c := range nonNegative {
		if c.v < 0 {
			return inv, Invalid(c.field, "%s must not be negative", c.field)
		}
	}
	if req.CachedTokens > req.InputTokens {
		return inv, Invalid("cachedTokens", "cachedTokens must not exceed inputTokens: cached input is part of the input")
	}
	if req.FinishReason != nil {
		if err := validateLabel("finishReason", *req.FinishReason, contract.MaxFinishReasonChars); err != nil {
			return inv, err
		}
	}
	if req.ResponseContent != nil && len(*req.ResponseContent) > contract.MaxResponseContentBytes {
		return inv, TooLarge("responseContent", contract.MaxResponseContentBytes)
	}
	switch {
	case req.State == contract.InvocationFailed && req.Error == nil:
		return inv, Invalid("error", "error is required when state is failed")
	case req.State != contract.InvocationFailed && req.Error != nil:
		return inv, Invalid("error", "error is allowed only when state is failed")
	case req.Error != nil:
		if err := validateLabel("error.code", req.Error.Code, contract.MaxIDChars); err != nil {
			return inv, err
		}
		if req.Error.Message == "" {
			return inv, Invalid("error.message", "error.message must not be empty")
		}
		if len(req.Error.Message) > contract.MaxInvocationErrorMsgBytes {
			return inv, TooLarge("error.message", contract.MaxInvocationErrorMsgBytes)
		}
	}
	metadata, err := normalizeJSON("metadata", req.Metadata)
	if err != nil {
		return inv, err
	}
	return contract.ModelInvocation{
		ID: id, Conversation: contract.ConversationRef{ConversationID: req.Conversation.ConversationID},
		RequestWindowID: req.RequestWindowID, AgentID: agentID, ToolName: req.ToolName,
		Provider: req.Provider, Model: req.Model, State: req.State,
		InputTokens: req.InputTokens, OutputTokens: req.OutputTokens, CachedTokens: req.CachedTokens,
		StartedAtMs: req.StartedAtMs, CompletedAtMs: req.CompletedAtMs, LatencyMs: req.LatencyMs,
		FinishReason: req.FinishReason, ResponseContent: req.ResponseContent, Error: req.Error,
		Metadata: metadata,
	}, nil
}

// sameInvocation compares a save request (normalized into req) with the stored record.
// Only what the client supplied counts: a zero startedAtMs and an absent agentId were
// filled by the server (its clock, the caller's subject) and match any stored value.
func sameInvocation(sent *contract.CreateModelInvocationRequest, req, stored *contract.ModelInvocation) bool {
	return req.Conversation == stored.Conversation && req.RequestWindowID == stored.RequestWindowID &&
		(sent.AgentID == nil || req.AgentID == stored.AgentID) && sameOptional(req.ToolName, stored.ToolName) &&
		req.Provider == stored.Provider && req.Model == stored.Model && req.State == stored.State &&
		req.InputTokens == stored.InputTokens && req.OutputTokens == stored.OutputTokens &&
		req.CachedTokens == stored.CachedTokens &&
		(sent.StartedAtMs == 0 || req.StartedAtMs == stored.StartedAtMs) &&
		req.CompletedAtMs == stored.CompletedAtMs && req.LatencyMs == stored.LatencyMs &&
		sameOptional(req.FinishReason, stored.FinishReason) &&
		sameOptional(req.ResponseContent, stored.ResponseContent) &&
		sameOptional(req.Error, stored.Error) && sameJSON(req.Metadata, stored.Metadata)
}
