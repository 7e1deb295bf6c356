package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
)

// AgentStore keeps registered agents in a2a_agents.
type AgentStore struct {
	db DBTX
}

var _ a2a.AgentStore = (*AgentStore)(nil)

const agentColumns = `agent_id, agent_type, role, capabilities, supported_versions, registered_at_ms, last_seen_at_ms`

func scanAgent(row pgx.Row) (contract.Agent, error) {
	var a contract.Agent
	err := row.Scan(&a.AgentID, &a.AgentType, &a.Role, &a.Capabilities, &a.SupportedVersions, &a.RegisteredAtMs, &a.LastSeenAtMs)
	return a, err
}

// RegisterAgent implements a2a.AgentStore: an insert for a new agent; for a known
// one, the stored registration is locked and read, then overwritten, in one round
// trip, so concurrent registrations of one agent each see the one they replace.
func (s *AgentStore) RegisterAgent(ctx context.Context, scope runtime.Scope, a *contract.Agent) (contract.Agent, *contract.Agent, error) {
	var stored contract.Agent
	var previous *contract.Agent
	err := inTx(ctx, s.db, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `
			INSERT INTO a2a_agents (tenant_id, project_id, `+agentColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
			ON CONFLICT DO NOTHING`,
			scope.TenantID, scope.ProjectID, a.AgentID, a.AgentType, a.Role, a.Capabilities, a.SupportedVersions,
			a.RegisteredAtMs, a.LastSeenAtMs)
		if err != nil {
			return translate(err)
		}
		if tag.RowsAffected() == 1 {
			stored = *a
			return nil
		}
		b := &pgx.Batch{}
		b.Queue(`SELECT `+agentColumns+` FROM a2a_agents WHERE tenant_id = $1 AND project_id = $2 AND agent_id = $3 FOR UPDATE`,
			scope.TenantID, scope.ProjectID, a.AgentID)
		b.Queue(`
			UPDATE a2a_agents SET agent_type = $4, role = $5, capabilities = $6, supported_versions = $7,
			    last_seen_at_ms = greatest(last_seen_at_ms, $8)
			WHERE tenant_id = $1 AND project_id = $2 AND agent_id = $3
			RETURNING `+agentColumns,
			scope.TenantID, scope.ProjectID, a.AgentID, a.AgentType, a.Role, a.Capabilities, a.SupportedVersions,
			a.LastSeenAtMs)
		res := tx.SendBatch(ctx, b)
		prev, err := scanAgent(res.QueryRow())
		if err == nil {
			stored, err = scanAgent(res.QueryRow())
		}
		if cerr := res.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return translate(err)
		}
		previous = &prev
		return nil
	})
	return stored, previous, err
}

// ListAgents implements a2a.AgentStore along the primary key.
func (s *AgentStore) ListAgents(ctx context.Context, scope runtime.Scope, afterID string, limit int) ([]contract.Agent, bool, error) {
	rows, err := s.db.Query(ctx, `
		SELECT `+agentColumns+` FROM a2a_agents
		WHERE tenant_id = $1 AND project_id = $2 AND agent_id > $3
		ORDER BY agent_id
		LIMIT $4`, scope.TenantID, scope.ProjectID, afterID, limit+1)
	if err != nil {
		return nil, false, translate(err)
	}
	agents, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (contract.Agent, error) { return scanAgent(row) })
	if err != nil {
		return nil, false, translate(err)
	}
	if len(agents) > limit {
		return agents[:limit], true, nil
	}
	return agents, false, nil
}
