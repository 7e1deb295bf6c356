// Package a2arpc is the Google A2A door (docs/a2a-protocol.md): the agent card and
// POST /a2a, JSON-RPC 2.0 in both protocol generations (0.3 and 1.0), with its streams
// and push notification configs, over the A2A use cases. Like every door it comes in
// through the gate (authentication, rate limits, capability, the body bound and the
// error envelope) and imports neither another door nor an adapter.
package a2arpc
