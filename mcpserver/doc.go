// Package mcpserver is the Model Context Protocol door of the service (docs/mcp.md):
// every capability an agent needs (memory, conversations, windows, knowledge and the
// A2A coordination of the lean-ctx seed's ctx_agent and ctx_task) as MCP tools over
// streamable HTTP, served by the official Go SDK in stateless mode.
//
// A tool is another door to the use case its HTTP route calls, never a second
// implementation: it turns its snake_case arguments into the route's request, calls
// the same runtime use case and returns the route's answer unchanged. The host
// (package server) authenticates the HTTP request, bounds its body and puts the
// caller into the request's context (WithPrincipal); this package checks each call
// against the capability of the route its tool wraps (contract.MCPToolRoutes) and
// asks the host to rate-limit it and to shape its refusals.
//
// It imports the runtime areas and the contract, never SQL, adapters or the echo host.
package mcpserver
