package a2a

import (
	"context"
	"regexp"
	"slices"
	"strconv"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// AgentStore keeps the registered agents of a scope.
type AgentStore interface {
	// RegisterAgent stores a, or refreshes the stored registration of a.AgentID (its
	// registeredAtMs is kept), and returns the stored agent and the registration it
	// replaced (nil for a new agent). Errors: SERVICE_UNAVAILABLE.
	RegisterAgent(ctx context.Context, scope runtime.Scope, a *contract.Agent) (stored contract.Agent, previous *contract.Agent, err error)
	// ListAgents returns up to limit agents whose IDs sort after afterID ("" from the
	// first), in ID order, and whether more follow. Errors: SERVICE_UNAVAILABLE.
	ListAgents(ctx context.Context, scope runtime.Scope, afterID string, limit int) (agents []contract.Agent, more bool, err error)
}

// versionPattern is the form of a supported version: major.minor.
var versionPattern = regexp.MustCompile(`^[0-9]{1,9}\.[0-9]{1,9}$`)

// RegisterAgent registers or refreshes an agent: the caller's own entry, or with
// a2a:admin any agent's. A registration that changes nothing but the time it was last
// seen appends no event: agents heartbeat by re-registering.
func (a *Agents) RegisterAgent(ctx context.Context, p runtime.Principal, req *contract.RegisterAgentRequest) (*contract.Agent, error) {
	agent := contract.Agent{AgentID: p.Subject}
	if req.AgentID != nil {
		if err := runtime.ValidateID("agentId", *req.AgentID); err != nil {
			return nil, err
		}
		if *req.AgentID != p.Subject {
			if err := requireAdmin(p); err != nil {
				return nil, err
			}
		}
		agent.AgentID = *req.AgentID
	}
	if err := runtime.ValidateLabel("agentType", req.AgentType, contract.MaxIDChars); err != nil {
		return nil, err
	}
	agent.AgentType = req.AgentType
	if req.Role != nil {
		if err := runtime.ValidateLabel("role", *req.Role, contract.MaxIDChars); err != nil {
			return nil, err
		}
		agent.Role = req.Role
	}
	var err error
	if agent.Capabilities, err = validateLabels("capabilities", req.Capabilities); err != nil {
		return nil, err
	}
	versions := req.SupportedVersions
	if versions == nil {
		versions = contract.SupportedA2AVersions
	}
	if agent.SupportedVersions, err = validateLabels("supportedVersions", versions); err != nil {
		return nil, err
	}
	for i, v := range agent.SupportedVersions {
		if !versionPattern.MatchString(v) {
			return nil, runtime.Invalid("supportedVersions["+strconv.Itoa(i)+"]", "a supported version is major.minor, such as 1.0")
		}
	}
	now := a.nowMs()
	agent.RegisteredAtMs, agent.LastSeenAtMs = now, now
	var stored contract.Agent
	err = a.db.WithinTx(ctx, func(ctx context.Context, tx Stores) error {
		var previous *contract.Agent
		var err error
		if stored, previous, err = tx.Agents.RegisterAgent(ctx, p.Scope, &agent); err != nil {
			return err
		}
		if previous != nil && sameRegistration(previous, &agent) {
			return nil
		}
		_, err = tx.Events.AppendEvents(ctx, p.Scope, []runtime.NewEvent{runtime.EventOf(contract.EventAgentRegistered, p.Subject,
			agent.AgentID, contract.ConsistencyEventual, nil, struct {
				AgentID   string `json:"agentId"`
				AgentType string `json:"agentType"`
			}{agent.AgentID, agent.AgentType}, now)})
		return err
	})
	if err != nil {
		return nil, err
	}
	stored.Status = agentStatus(&stored, now)
	return &stored, nil
}

// sameRegistration reports whether a registration repeats the stored one.
func sameRegistration(stored, a *contract.Agent) bool {
	return stored.AgentType == a.AgentType && runtime.SameOptional(stored.Role, a.Role) &&
		slices.Equal(stored.Capabilities, a.Capabilities) && slices.Equal(stored.SupportedVersions, a.SupportedVersions)
}

// agentStatus is active when the agent was seen within the active window.
func agentStatus(a *contract.Agent, nowMs int64) string {
	if nowMs-a.LastSeenAtMs <= contract.AgentActiveWindowMs {
		return contract.AgentActive
	}
	return contract.AgentIdle
}

func agentsBinding(scope runtime.Scope) runtime.CursorBinding {
	return runtime.CursorBinding{Kind: "a2a-agents", Scope: scope}
}

// ListAgents returns one page of the scope's agents in ID order.
func (a *Agents) ListAgents(ctx context.Context, p runtime.Principal, req *contract.ListAgentsRequest) (*contract.AgentList, error) {
	limit, err := runtime.OptionalCount("limit", req.Limit, contract.DefaultA2ALimit, contract.MaxA2ALimit)
	if err != nil {
		return nil, err
	}
	var after string
	if req.Cursor != nil {
		if after, err = a.cursors.DecodeKey(agentsBinding(p.Scope), *req.Cursor); err != nil {
			return nil, err
		}
	}
	agents, more, err := a.stores.Agents.ListAgents(ctx, p.Scope, after, limit)
	if err != nil {
		return nil, err
	}
	now := a.nowMs()
	for i := range agents {
		agents[i].Status = agentStatus(&agents[i], now)
	}
	out := &contract.AgentList{Agents: agents}
	if out.Agents == nil {
		out.Agents = []contract.Agent{}
	}
	if more && len(agents) > 0 {
		next := a.cursors.EncodeKey(agentsBinding(p.Scope), agents[len(agents)-1].AgentID)
		out.NextCursor = &next
	}
	return out, nil
}
