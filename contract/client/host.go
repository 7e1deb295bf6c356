package client

import (
	"context"

	"github.com/agent-context/agent-context/contract"
)

// Health calls GET /health.
func (c *Client) Health(ctx context.Context) (*contract.Health, error) {
	return call[contract.Health](ctx, c, contract.RouteHealth, nil)
}

// Ready calls GET /ready; a server that is not ready answers an *Error with code
// SERVICE_UNAVAILABLE and details.reason.
func (c *Client) Ready(ctx context.Context) (*contract.Ready, error) {
	return call[contract.Ready](ctx, c, contract.RouteReady, nil)
}

// Metrics calls GET /metrics and returns the Prometheus text exposition.
func (c *Client) Metrics(ctx context.Context) ([]byte, error) {
	return raw(ctx, c, contract.RouteMetrics)
}

// OpenAPIJSON calls GET /openapi.json and returns the document.
func (c *Client) OpenAPIJSON(ctx context.Context) ([]byte, error) {
	return raw(ctx, c, contract.RouteOpenAPIJSON)
}

// OpenAPIYAML calls GET /openapi.yaml and returns the document.
func (c *Client) OpenAPIYAML(ctx context.Context) ([]byte, error) {
	return raw(ctx, c, contract.RouteOpenAPIYAML)
}

func raw(ctx context.Context, c *Client, route contract.Route) ([]byte, error) {
	var out []byte
	if _, err := c.do(ctx, route, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}
