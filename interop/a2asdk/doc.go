// Package a2asdk proves Google A2A interoperability with the official Go SDKs as
// clients of the real service: github.com/a2aproject/a2a-go v0.3.15 (A2A 0.3) and
// github.com/a2aproject/a2a-go/v2 v2.4.0 (A2A 1.0, without its a2av0 compat layer),
// pinned exactly. It is a module of its own so that the SDKs' dependency trees stay
// out of the service's module; `make test` runs it. The tests build the agent-context
// binary and run it against a database cloned by pgtest.
package a2asdk
