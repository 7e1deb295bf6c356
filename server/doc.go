// Package server is the REST door of agent-context and the host of every door: on one
// echo router it serves the JSON routes of contract.Routes through the gate
// (authentication, admission, strict decoding, bounds and the error envelope all come
// from package gate), and routes the other doors' paths — MCP, Google A2A JSON-RPC, the
// console — to their handlers, given to it by the binary. Around all of them it keeps
// the request ID, the request log line, the metrics, the span and the drain.
package server
