package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"sync"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// ToError maps any error to the runtime.Error a door answers: a runtime.Error with a
// code of the contract's table as it is; a request that ran out of time (or whose
// client went away) SERVICE_UNAVAILABLE, reason timeout; anything else INTERNAL, its
// text kept for the log only.
func ToError(err error) *runtime.Error {
	var re *runtime.Error
	if errors.As(err, &re) {
		if _, known := contract.Codes[re.Code]; known {
			return re
		}
		return &runtime.Error{Code: contract.CodeInternal, Message: "internal error", Err: err}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return (&runtime.Error{Code: contract.CodeServiceUnavailable, Message: "the request did not finish in time", Err: err}).
			With("reason", "timeout")
	}
	return &runtime.Error{Code: contract.CodeInternal, Message: "internal error", Err: err}
}

// Refuse is the envelope's error object for err as every door answers it, with its
// HTTP status. An internal cause is logged with the request ID (the caller never sees
// it) and the code is recorded for the request's log line, metrics and span.
func (g *Gate) Refuse(ctx context.Context, err error) (int, contract.ErrorBody) {
	re := ToError(err)
	info := contract.Codes[re.Code]
	rec := RecordOf(ctx)
	if info.Status >= 500 && (re.Err != nil || re.Code == contract.CodeInternal) {
		// A failure with a cause to investigate; a deliberate refusal (draining,
		// overloaded) has none and is only a WARN request line.
		rec.Fault = true
		g.log.ErrorContext(ctx, "request failed",
			slog.String("request_id", rec.RequestID),
			slog.String("code", re.Code),
			slog.Any("error", err))
	}
	rec.Code = re.Code
	details := re.Details
	if details == nil {
		details = map[string]any{}
	}
	return info.Status, contract.ErrorBody{
		Code:      re.Code,
		Message:   re.Message,
		Category:  info.Category,
		Retryable: info.Retryable,
		RequestID: rec.RequestID,
		Details:   details,
	}
}

// RetryAfter is the Retry-After header value of a refusal, if it has one: the wait
// of a RATE_LIMITED answer in whole seconds, rounded up, at least 1.
func RetryAfter(e contract.ErrorBody) (string, bool) {
	if e.Code != contract.CodeRateLimited {
		return "", false
	}
	ms, ok := e.Details["retryAfterMs"].(int64)
	if !ok {
		return "", false
	}
	return strconv.FormatInt(max(1, (ms+999)/1000), 10), true
}

// Challenge is the WWW-Authenticate of a 401 (RFC 9110 §11.6.1): the scheme that
// would be accepted.
const Challenge = `Bearer realm="` + contract.Service + `"`

// WriteError answers err with the error envelope and its status, Retry-After on a
// rate-limit refusal and a WWW-Authenticate challenge on a 401 (Challenge, unless the
// door has set its own).
func (g *Gate) WriteError(w http.ResponseWriter, r *http.Request, err error) {
	status, body := g.Refuse(r.Context(), err)
	h := w.Header()
	if after, ok := RetryAfter(body); ok {
		h.Set("Retry-After", after)
	}
	if status == http.StatusUnauthorized && h.Get("WWW-Authenticate") == "" {
		h.Set("WWW-Authenticate", Challenge)
	}
	if werr := WriteJSON(w, r, status, contract.ErrorResponse{Status: status, Message: body.Message, Error: body}); werr != nil {
		g.log.WarnContext(r.Context(), "writing error response failed",
			slog.String("request_id", body.RequestID), slog.Any("error", werr))
	}
}

// maxPooledResponse bounds the buffers kept for reuse: a rare large answer (a 16 MiB
// window) is encoded into a buffer of its own and then dropped, so the pool never
// holds more than a few small buffers per CPU.
const maxPooledResponse = 256 << 10

var responseBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// jsonWriter is an answer that encodes itself, into the bytes encoding/json would
// write (contract/wirejson.go): the hottest reads skip the reflection.
type jsonWriter interface {
	WriteJSON(buf *bytes.Buffer) error
}

// EncodeJSON writes v's JSON, with encoding/json's final newline, to buf.
func EncodeJSON(buf *bytes.Buffer, v any) error {
	if w, ok := v.(jsonWriter); ok {
		return w.WriteJSON(buf)
	}
	return json.NewEncoder(buf).Encode(v)
}

// WriteJSON is how every JSON answer is written: encoded whole into a pooled buffer
// first, then sent with its Content-Length in one write. An answer that cannot be
// encoded therefore becomes a 500 envelope instead of a half-written body, and an
// answer of any size goes out without chunked framing. HEAD gets the headers only.
func WriteJSON(w http.ResponseWriter, r *http.Request, status int, v any) error {
	buf := responseBuffers.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledResponse {
			buf.Reset()
			responseBuffers.Put(buf)
		}
	}()
	if err := EncodeJSON(buf, v); err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return nil
	}
	_, err := w.Write(buf.Bytes())
	return err
}
