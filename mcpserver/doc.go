// Package mcpserver is the Model Context Protocol door of the service (docs/mcp.md):
// every capability an agent needs (memory, conversations, windows, knowledge and the
// A2A coordination of the lean-ctx seed's ctx_agent and ctx_task) as MCP tools over
// streamable HTTP, served by the official Go SDK in stateless mode.
//
// A tool is another door to the use case its HTTP route calls, never a second
// implementation: it turns its snake_case arguments into the route's request, calls
// the same runtime use case and returns the route's answer unchanged. The gate
// authenticates the HTTP request, bounds its body and answers its refusals; this
// package reads the JSON-RPC message once, serves only the contract's methods, checks
// each call against the capability of the route its tool wraps (contract.MCPToolRoutes)
// and has the gate rate-limit it.
//
// It imports the gate, the runtime areas and the contract, never another door, SQL,
// adapters or echo.
package mcpserver
