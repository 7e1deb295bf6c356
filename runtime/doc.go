// Package runtime is the shared base of agent-context's use cases: errors, the caller
// (Principal, Scope), the clock, IDs, cursors, the strict JSON decoder, validation and
// canonical JSON, the event log's records and ports, the unit of work and the job
// kinds. Each bounded context is a package below it (conversation, operation, memory,
// a2a, transfer, knowledge, cost, ratelimit) holding its use cases and the ports it
// needs. Nothing here imports an HTTP framework, a database driver or an adapter:
// server calls into the areas, adapters implement their ports.
package runtime
