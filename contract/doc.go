// Package contract is what clients of agent-context import: route paths, request and
// response types, error codes and capabilities, exactly as the wire contract defines
// them (the tour is docs/api.md; every route is in openapi.yaml). It imports nothing
// else of this module.
package contract
