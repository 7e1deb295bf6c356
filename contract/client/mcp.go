package client

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agent-context/agent-context/contract"
)

// MCP calls POST /internal/v1/mcp with one JSON-RPC message and returns the JSON-RPC
// answer (nil for a notification, which is answered 202 without a body). Agents use
// the tools through an MCP client (the official SDKs); this call is for probes and
// tests. A tool's refusal is a result with isError and a JSON-RPC error is an answer,
// both in the RPCResponse; the returned error is an *Error only for what comes before
// JSON-RPC (authentication, scope headers, body bounds, the rate limit).
func (c *Client) MCP(ctx context.Context, msg *contract.RPCRequest) (*contract.RPCResponse, error) {
	var raw []byte
	if _, err := c.do(ctx, contract.RouteMCP, msg, &raw, "Accept", "application/json, text/event-stream"); err != nil {
		return nil, err
	}
	if len(raw) == 0 {
		return nil, nil
	}
	out := new(contract.RPCResponse)
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, fmt.Errorf("agent-context: read %s answer: %w", contract.PathMCP, err)
	}
	return out, nil
}

// ProtectedResourceMetadata calls GET /.well-known/oauth-protected-resource: the MCP
// endpoint's OAuth protected resource metadata (RFC 9728).
func (c *Client) ProtectedResourceMetadata(ctx context.Context) (*contract.ProtectedResourceMetadata, error) {
	return call[contract.ProtectedResourceMetadata](ctx, c, contract.RouteOAuthProtectedResource, nil)
}
