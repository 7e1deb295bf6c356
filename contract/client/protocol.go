package client

import (
	"context"
	"fmt"
	"net/http"

	"github.com/agent-context/agent-context/contract"
)

// Handoff calls POST /internal/v1/a2a/handoff with an envelope; the answer is a
// receipt (a replay's is the first one, as a duplicate). The signature covers the
// members as sent, and an absent member differs from a null one: send a signed
// envelope with exactly the members it was signed with (Envelope omits an absent
// correlation_id and signature).
func (c *Client) Handoff(ctx context.Context, env *contract.Envelope) (*contract.MessageAck, error) {
	return call[contract.MessageAck](ctx, c, contract.RouteA2AHandoff, env)
}

// A2AVersions calls GET /internal/v1/a2a/versions.
func (c *Client) A2AVersions(ctx context.Context) (*contract.A2AVersions, error) {
	return call[contract.A2AVersions](ctx, c, contract.RouteA2AVersions, nil)
}

// AgentCard calls GET /internal/v1/a2a/agent-card.
func (c *Client) AgentCard(ctx context.Context) (*contract.AgentCard, error) {
	return call[contract.AgentCard](ctx, c, contract.RouteA2AAgentCard, nil)
}

// WellKnownAgentCard calls GET /.well-known/agent-card.json, the card's A2A path.
func (c *Client) WellKnownAgentCard(ctx context.Context) (*contract.AgentCard, error) {
	return call[contract.AgentCard](ctx, c, contract.RouteWellKnownAgentCard, nil)
}

// WellKnownAgentJSON calls GET /.well-known/agent.json, the seed's path of the card.
func (c *Client) WellKnownAgentJSON(ctx context.Context) (*contract.AgentCard, error) {
	return call[contract.AgentCard](ctx, c, contract.RouteWellKnownAgentJSON, nil)
}

// A2ARPC calls POST /a2a with one JSON-RPC request, sending version as A2A-Version
// unless it is empty. A JSON-RPC error is an answer, in RPCResponse.Error; the
// returned error is an *Error only for what comes before JSON-RPC (authentication,
// the rate limits, the capability).
func (c *Client) A2ARPC(ctx context.Context, version string, req *contract.RPCRequest) (*contract.RPCResponse, error) {
	var header []string
	if version != "" {
		header = []string{contract.HeaderA2AVersion, version}
	}
	out := new(contract.RPCResponse)
	if _, err := c.do(ctx, contract.RouteA2AJSONRPC, req, out, header...); err != nil {
		return nil, err
	}
	return out, nil
}

// A2ANotify sends req to POST /a2a as a JSON-RPC notification (its ID is left out),
// which the server executes without a reply: nil means it was received (202).
func (c *Client) A2ANotify(ctx context.Context, version string, req *contract.RPCRequest) error {
	var header []string
	if version != "" {
		header = []string{contract.HeaderA2AVersion, version}
	}
	notification := *req
	notification.ID = nil
	status, err := c.do(ctx, contract.RouteA2AJSONRPC, &notification, nil, header...)
	if err == nil && status != http.StatusAccepted {
		err = fmt.Errorf("agent-context: a notification to %s was answered with %d, not 202", contract.RouteA2AJSONRPC.Path, status)
	}
	return err
}
