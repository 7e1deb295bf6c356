package conversation

import (
	"context"
	"slices"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// SaveInvocation validates and stores a model invocation record. It reports whether
// the record was created now; both a fresh save and an identical retry answer 200.
func (s *Windows) SaveInvocation(ctx context.Context, p runtime.Principal, req *contract.CreateModelInvocationRequest) (contract.ModelInvocation, error) {
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
	if !created && !SameInvocation(req, &inv, &stored) {
		return contract.ModelInvocation{}, runtime.IdempotencyConflict(inv.ID)
	}
	return stored, nil
}

// GetInvocation returns a model invocation record.
func (s *Windows) GetInvocation(ctx context.Context, p runtime.Principal, req *contract.GetModelInvocationRequest) (contract.ModelInvocation, error) {
	if err := runtime.ValidateID("invocationId", req.InvocationID); err != nil {
		return contract.ModelInvocation{}, err
	}
	return s.store.GetInvocation(ctx, p.Scope, req.InvocationID)
}

// ValidateInvocation checks a save request and returns the record to store; subject
// is the caller, the default agentId.
func ValidateInvocation(req *contract.CreateModelInvocationRequest, subject string) (contract.ModelInvocation, error) {
	var inv contract.ModelInvocation
	id, err := runtime.IDOrNew("id", req.ID)
	if err != nil {
		return inv, err
	}
	if req.Conversation == nil {
		return inv, runtime.Invalid("conversation", "conversation is required")
	}
	if err := runtime.ValidateID("conversation.conversationId", req.Conversation.ConversationID); err != nil {
		return inv, err
	}
	if err := runtime.ValidateID("requestWindowId", req.RequestWindowID); err != nil {
		return inv, err
	}
	agentID := subject
	if req.AgentID != nil {
		agentID = *req.AgentID
	}
	if err := runtime.ValidateID("agentId", agentID); err != nil {
		return inv, err
	}
	if req.ToolName != nil {
		if err := runtime.ValidateID("toolName", *req.ToolName); err != nil {
			return inv, err
		}
	}
	if err := runtime.ValidateID("provider", req.Provider); err != nil {
		return inv, err
	}
	if err := runtime.ValidateID("model", req.Model); err != nil {
		return inv, err
	}
	if !slices.Contains(contract.InvocationStates, req.State) {
		return inv, runtime.OneOf("state", contract.InvocationStates)
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
			return inv, runtime.Invalid(c.field, "%s must not be negative", c.field)
		}
	}
	if req.CachedTokens > req.InputTokens {
		return inv, runtime.Invalid("cachedTokens", "cachedTokens must not exceed inputTokens: cached input is part of the input")
	}
	if req.FinishReason != nil {
		if err := runtime.ValidateLabel("finishReason", *req.FinishReason, contract.MaxFinishReasonChars); err != nil {
			return inv, err
		}
	}
	if req.ResponseContent != nil && len(*req.ResponseContent) > contract.MaxResponseContentBytes {
		return inv, runtime.TooLarge("responseContent", contract.MaxResponseContentBytes)
	}
	switch {
	case req.State == contract.InvocationFailed && req.Error == nil:
		return inv, runtime.Invalid("error", "error is required when state is failed")
	case req.State != contract.InvocationFailed && req.Error != nil:
		return inv, runtime.Invalid("error", "error is allowed only when state is failed")
	case req.Error != nil:
		if err := runtime.ValidateLabel("error.code", req.Error.Code, contract.MaxIDChars); err != nil {
			return inv, err
		}
		if req.Error.Message == "" {
			return inv, runtime.Invalid("error.message", "error.message must not be empty")
		}
		if len(req.Error.Message) > contract.MaxInvocationErrorMsgBytes {
			return inv, runtime.TooLarge("error.message", contract.MaxInvocationErrorMsgBytes)
		}
	}
	metadata, err := runtime.NormalizeJSON("metadata", req.Metadata)
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

// SameInvocation compares a save request (normalized into req) with the stored record.
// Only what the client supplied counts: a zero startedAtMs and an absent agentId were
// filled by the server (its clock, the caller's subject) and match any stored value.
func SameInvocation(sent *contract.CreateModelInvocationRequest, req, stored *contract.ModelInvocation) bool {
	return req.Conversation == stored.Conversation && req.RequestWindowID == stored.RequestWindowID &&
		(sent.AgentID == nil || req.AgentID == stored.AgentID) && runtime.SameOptional(req.ToolName, stored.ToolName) &&
		req.Provider == stored.Provider && req.Model == stored.Model && req.State == stored.State &&
		req.InputTokens == stored.InputTokens && req.OutputTokens == stored.OutputTokens &&
		req.CachedTokens == stored.CachedTokens &&
		(sent.StartedAtMs == 0 || req.StartedAtMs == stored.StartedAtMs) &&
		req.CompletedAtMs == stored.CompletedAtMs && req.LatencyMs == stored.LatencyMs &&
		runtime.SameOptional(req.FinishReason, stored.FinishReason) &&
		runtime.SameOptional(req.ResponseContent, stored.ResponseContent) &&
		runtime.SameOptional(req.Error, stored.Error) && runtime.SameJSON(req.Metadata, stored.Metadata)
}
