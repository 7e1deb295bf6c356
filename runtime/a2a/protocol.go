package a2a

import (
	"context"
	"encoding/json"
	"unicode/utf8"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// ProtocolSend is a message sent through the Google A2A endpoint (POST /a2a), its
// parts already in the internal form. TaskID continues a task; without it the message
// starts one for ToAgent (else the configured default agent) in ContextID.
type ProtocolSend struct {
	TaskID    *string
	ContextID *string
	ToAgent   *string
	Parts     []contract.Part
	Metadata  json.RawMessage
}

// descriptionFallback describes a task started by a message without text.
const descriptionFallback = "A2A message"

// SendProtocolMessage starts or continues a task for POST /a2a: an ordinary task, so
// it shows on the REST routes, emits the same events and obeys the same state machine.
// A continuation is MessageTask (NOT_FOUND for a non-participant, CONFLICT for a
// terminal task); a new task is CreateTask with the first text part as its
// description. Without a recipient it is VALIDATION_FAILED naming metadata.toAgent.
func (a *Protocol) SendProtocolMessage(ctx context.Context, p runtime.Principal, req *ProtocolSend) (*contract.Task, error) {
	if req.TaskID != nil {
		return a.tasks.MessageTask(ctx, p, &contract.TaskMessageRequest{TaskID: *req.TaskID, Parts: req.Parts})
	}
	to := a.defaultAgent
	if req.ToAgent != nil {
		to = *req.ToAgent
	}
	if to == "" {
		return nil, runtime.Invalid("metadata.toAgent", "metadata.toAgent names the recipient; no default agent is configured")
	}
	description := descriptionFallback
	for _, part := range req.Parts {
		if part.Type == contract.PartText && part.Text != nil && *part.Text != "" {
			description = truncateUTF8(*part.Text, contract.MaxTaskDescriptionBytes)
			break
		}
	}
	t, _, err := a.tasks.CreateTask(ctx, p, &contract.CreateTaskRequest{ContextID: req.ContextID, ToAgent: to,
		Description: &description, Parts: req.Parts, Metadata: req.Metadata})
	return t, err
}

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
