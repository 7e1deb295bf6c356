// Package server is the HTTP host of agent-context: routing, authentication, the
// capability check, strict JSON decoding, limits, request IDs, logging and the one
// error handler that turns every error into the contract's envelope.
package server
