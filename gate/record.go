package gate

import (
	"context"

	"github.com/agent-context/agent-context/runtime"
)

// Record is what a request tells the host about itself for its log line, its
// metrics and its span: the host (package server) puts a fresh one in every request's
// context, the gate and the doors fill it in as the request goes.
type Record struct {
	// RequestID is the request's ID, as answered in X-Request-Id and every envelope.
	RequestID string
	// Route replaces the matched route template as the request's label: mcp:<tool>
	// for an MCP tool call, so a tool is logged and counted under its own name.
	Route string
	// Code is the error code the request was answered with, if any.
	Code string
	// Principal is the authenticated caller, once there is one.
	Principal *runtime.Principal
	// Fault marks a failure whose cause was logged as an error (a 5xx with a cause).
	Fault bool
	// ClientGone marks a request whose client went away before its answer.
	ClientGone bool
}

type recordKey struct{}

// WithRecord returns ctx carrying rec.
func WithRecord(ctx context.Context, rec *Record) context.Context {
	return context.WithValue(ctx, recordKey{}, rec)
}

// RecordOf returns the record of the request ctx belongs to; a context without one
// (a call made outside an HTTP request) gets a record of its own that nobody reads.
func RecordOf(ctx context.Context) *Record {
	if rec, ok := ctx.Value(recordKey{}).(*Record); ok {
		return rec
	}
	return &Record{}
}
