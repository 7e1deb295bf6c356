// Package gate is the one way in for every door of the service — the REST API
// (package server), the MCP tools (mcpserver), the operator console (console) and the
// Google A2A JSON-RPC endpoint (a2arpc). Whatever door a request comes through, the
// gate authenticates its caller (static token, runtime token or open mode), admits it
// (the rate limits, then the capability of the contract.Route it reads or writes),
// reads its body under one bound checked before anything is parsed, decodes it
// strictly, bounds its numbers per route, and turns every error into the contract's
// wire answer. A door only translates its protocol onto the use cases.
//
// The gate imports runtime and contract of this module and never a door, an area or
// an adapter; it knows HTTP only as net/http.
package gate
