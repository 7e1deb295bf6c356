// Package runtime holds the use cases of agent-context and the ports they need from
// the outside world (stores, queues, clocks, providers). It imports no HTTP framework,
// no database driver and no adapter: server calls into it, adapters implement its ports.
package runtime
