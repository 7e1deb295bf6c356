// Package contract is what clients of agent-context import: route paths, request and
// response types, error codes and capabilities, exactly as the wire contract in
// shared/spec defines them. It imports nothing else of this module.
package contract
