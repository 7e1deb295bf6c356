package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// invocationColumns are the columns scanInvocation reads.
const invocationColumns = `m.invocation_id, m.conversation_id, m.request_window_id, m.agent_id, m.tool_name,
	m.provider, m.model, m.state, m.input_tokens, m.output_tokens, m.cached_tokens, m.started_at_ms,
	m.completed_at_ms, m.latency_ms, m.finish_reason, m.response_content, m.error::text,
	m.metadata::text, m.created_at_ms`

func scanInvocation(row pgx.Row) (contract.ModelInvocation, error) {
	var m contract.ModelInvocation
	var response []byte
	var errJSON, metadata *string
	err := row.Scan(&m.ID, &m.Conversation.ConversationID, &m.RequestWindowID, &m.AgentID, &m.ToolName,
		&m.Provider, &m.Model, &m.State, &m.InputTokens, &m.OutputTokens, &m.CachedTokens, &m.StartedAtMs,
		&m.CompletedAtMs, &m.LatencyMs, &m.FinishReason, &response, &errJSON, &metadata, &m.CreatedAtMs)
	if err != nil {
		return contract.ModelInvocation{}, err
	}
	if response != nil {
		content := string(response)
		m.ResponseContent = &content
	}
	if errJSON != nil {
		m.Error = new(contract.InvocationError)
		if err := json.Unmarshal([]byte(*errJSON), m.Error); err != nil {
			return contract.ModelInvocation{}, fmt.Errorf("invocation %q: error: %w", m.ID, err)
		}
	}
	m.Metadata = jsonValue(metadata)
	return m, nil
}

// SaveInvocation implements conversation.WindowStore. A saved invocation is added to
// the cost sums in its transaction.
func (s *WindowStore) SaveInvocation(ctx context.Context, scope runtime.Scope, inv *contract.ModelInvocation) (contract.ModelInvocation, bool, error) {
	var stored contract.ModelInvocation
	created := false
	err := inTx(ctx, s.db, func(tx pgx.Tx) error {
		conversation := inv.Conversation.ConversationID
		if err := claimConversation(ctx, tx, scope, conversation, inv.CreatedAtMs); err != nil {
			return err
		}
		var windowConversation string
		err := tx.QueryRow(ctx, `
			SELECT w.conversation_id
			FROM context_windows w`+windowConversationJoin("w")+`
			WHERE w.tenant_id = $1 AND w.project_id = $2 AND w.window_id = $3`,
			scope.TenantID, scope.ProjectID, inv.RequestWindowID).Scan(&windowConversation)
		if errors.Is(err, pgx.ErrNoRows) {
			return runtime.NotFound("requestWindowId", "request window")
		}
		if err != nil {
			return translate(err)
		}
		if windowConversation != conversation {
			return runtime.Errorf(contract.CodeConflict, "the request window belongs to another conversation").
				With("field", "requestWindowId").With("reason", "window_in_other_conversation")
		}
		var response []byte
		if inv.ResponseContent != nil {
			response = []byte(*inv.ResponseContent)
		}
		var errJSON any
		if inv.Error != nil {
			raw, err := json.Marshal(inv.Error)
			if err != nil {
				return err
			}
			errJSON = string(raw)
		}
		tag, err := tx.Exec(ctx, `
			INSERT INTO model_invocations (tenant_id, project_id, invocation_id, conversation_id,
				request_window_id, agent_id, tool_name, provider, model, state, input_tokens, output_tokens,
				cached_tokens, started_at_ms, completed_at_ms, latency_ms, finish_reason, response_content,
				error, metadata, created_at_ms)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)
			ON CONFLICT DO NOTHING`,
			scope.TenantID, scope.ProjectID, inv.ID, conversation, inv.RequestWindowID, inv.AgentID,
			inv.ToolName, inv.Provider, inv.Model, inv.State, inv.InputTokens, inv.OutputTokens,
			inv.CachedTokens, inv.StartedAtMs, inv.CompletedAtMs, inv.LatencyMs, inv.FinishReason,
			response, errJSON, jsonParam(inv.Metadata), inv.CreatedAtMs)
		if err != nil {
			return translate(err)
		}
		if tag.RowsAffected() == 0 {
			stored, err = scanInvocation(tx.QueryRow(ctx, `
				SELECT `+invocationColumns+`
				FROM model_invocations m
				WHERE m.tenant_id = $1 AND m.project_id = $2 AND m.invocation_id = $3`,
				scope.TenantID, scope.ProjectID, inv.ID))
			if err != nil {
				return translate(err)
			}
			return errRecordExists
		}
		stored, created = *inv, true
		var sums costChange
		sums.add(inv.ID, conversation, inv.AgentID, inv.ToolName, inv.Model, inv.StartedAtMs, inv.InputTokens,
			inv.OutputTokens, inv.CachedTokens)
		return sums.addTo(ctx, tx, scope)
	})
	if err != nil && !errors.Is(err, errRecordExists) {
		return contract.ModelInvocation{}, false, err
	}
	return stored, created, nil
}

// GetInvocation implements conversation.WindowStore.
func (s *WindowStore) GetInvocation(ctx context.Context, scope runtime.Scope, invocationID string) (contract.ModelInvocation, error) {
	m, err := scanInvocation(s.db.QueryRow(ctx, `
		SELECT `+invocationColumns+`
		FROM model_invocations m`+windowConversationJoin("m")+`
		WHERE m.tenant_id = $1 AND m.project_id = $2 AND m.invocation_id = $3`,
		scope.TenantID, scope.ProjectID, invocationID))
	if errors.Is(err, pgx.ErrNoRows) {
		return contract.ModelInvocation{}, runtime.NotFound("invocationId", "model invocation")
	}
	if err != nil {
		return contract.ModelInvocation{}, translate(err)
	}
	return m, nil
}

// ListInvocations implements conversation.WindowStore: a backward walk of
// model_invocations_by_time, or of model_invocations_by_conversation for one
// conversation.
func (s *WindowStore) ListInvocations(ctx context.Context, scope runtime.Scope, conversationID string, q runtime.PageQuery) ([]contract.ModelInvocation, error) {
	where, args := listWhere("m", "m.started_at_ms", "m.invocation_id", scope, conversationID, q)
	rows, err := s.db.Query(ctx, `
		SELECT `+invocationColumns+`
		FROM model_invocations m`+windowConversationJoin("m")+`
		WHERE `+where+`
		ORDER BY m.started_at_ms DESC, m.invocation_id
		LIMIT $3`, args...)
	return collectInvocations(rows, err)
}

// WindowInvocations implements conversation.WindowStore: a walk of
// model_invocations_by_window from the window's latest invocation.
func (s *WindowStore) WindowInvocations(ctx context.Context, scope runtime.Scope, windowID string, q runtime.PageQuery) ([]contract.ModelInvocation, error) {
	after, afterArgs := pageAfter(q.After, "m.started_at_ms", "m.invocation_id", 5)
	rows, err := s.db.Query(ctx, `
		SELECT `+invocationColumns+`
		FROM model_invocations m`+windowConversationJoin("m")+`
		WHERE m.tenant_id = $1 AND m.project_id = $2 AND m.request_window_id = $4 AND `+after+`
		ORDER BY m.started_at_ms DESC, m.invocation_id
		LIMIT $3`, append([]any{scope.TenantID, scope.ProjectID, q.Limit, windowID}, afterArgs...)...)
	return collectInvocations(rows, err)
}

// collectInvocations reads every row of a query of invocationColumns.
func collectInvocations(rows pgx.Rows, err error) ([]contract.ModelInvocation, error) {
	if err != nil {
		return nil, translate(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (contract.ModelInvocation, error) { return scanInvocation(row) })
	if err != nil {
		return nil, translate(err)
	}
	return out, nil
}
