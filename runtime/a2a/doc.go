// Package a2a holds agent-to-agent coordination: agents, messages, tasks, event
// polling, signed envelopes, the Google A2A protocol methods, redacted snapshots and
// the sweeper that expires what coordination leaves behind.
package a2a
