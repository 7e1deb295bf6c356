package a2arpc

import (
	"net/http"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/gate"
)

// agentCard serves the hybrid card (docs/a2a-protocol.md) whatever the request's headers: the SDKs
// send no A2A-Version on the card request, so each generation reads its own members.
// The URLs are AGENT_CONTEXT_PUBLIC_URL, else the request's scheme and Host, so a test
// server on port 0 advertises a reachable URL.
func (d *Door) agentCard(w http.ResponseWriter, r *http.Request) {
	public := gate.BaseURL(r, d.publicURL)
	endpoint := public + contract.PathA2AJSONRPC
	modes := []string{"text/plain", "application/json"}
	if err := gate.WriteJSON(w, r, http.StatusOK, contract.AgentCard{
		ProtocolVersion: contract.AgentCardProtocolVersion,
		Name:            "agent-context",
		Description:     "Context and coordination infrastructure for agents: tasks between agents, with their messages, artifacts and history.",
		Version:         d.version,
		Provider:        contract.AgentProvider{Organization: "agent-context", URL: public},
		URL:             endpoint, PreferredTransport: "JSONRPC",
		SupportedInterfaces: []contract.AgentInterface{
			{URL: endpoint, ProtocolBinding: "JSONRPC", ProtocolVersion: "1.0"},
			{URL: endpoint, ProtocolBinding: "JSONRPC", ProtocolVersion: "0.3"},
		},
		Capabilities: contract.AgentCapabilities{Streaming: true, PushNotifications: true, StateTransitionHistory: true},
		SecuritySchemes: map[string]contract.SecurityScheme{"bearer": {Type: "http", Scheme: "bearer", BearerFormat: "JWT",
			HTTPAuthSecurityScheme: contract.HTTPAuthScheme{Scheme: "bearer", BearerFormat: "JWT"}}},
		Security:             []map[string][]string{{"bearer": {}}},
		SecurityRequirements: []contract.SecurityRequirement{{Schemes: map[string][]string{"bearer": {}}}},
		DefaultInputModes:    modes, DefaultOutputModes: modes,
		Skills: []contract.AgentSkill{{ID: "tasks", Name: "Tasks",
			Description: "Send a task to another agent, continue it with messages, read its state and cancel it.",
			Tags:        []string{"tasks"}}},
	}); err != nil {
		d.gate.WriteError(w, r, err)
	}
}
