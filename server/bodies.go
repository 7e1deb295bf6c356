package server

import (
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// DefaultMaxInFlightBodyBytes bounds the bytes all requests together hold for their
// bodies when Config.Bodies.MaxInFlightBytes is unset: eight maximal (32 MiB) bodies.
const DefaultMaxInFlightBodyBytes = 256 << 20

// bodyChunkBytes is the first buffer, and the least growth, for a body of unknown
// length (chunked transfer encoding).
const bodyChunkBytes = 64 << 10

// bodyLimits are the two bounds on request bodies: maxBytes for one body (the
// contract's 413) and a budget shared by every request in flight, so that however
// many large bodies arrive at once the memory they pin stays bounded.
type bodyLimits struct {
	maxBytes int64
	budget   *bodyBudget
}

// bodyBudget counts the bytes reserved for request bodies across requests. A request
// reserves before it buffers (by the declared Content-Length, or chunk by chunk for a
// body of unknown length) and gives its reservation back when its response is
// written; a reservation the budget cannot cover is refused at once, never waited
// for, so an overloaded replica sheds load instead of growing.
type bodyBudget struct {
	limit int64

	mu   sync.Mutex
	used int64
	peak int64 // the high-water mark of used
}

func newBodyBudget(limit int64) *bodyBudget { return &bodyBudget{limit: limit} }

func (b *bodyBudget) reserve(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > b.limit-b.used {
		return false
	}
	b.used += n
	b.peak = max(b.peak, b.used)
	return true
}

func (b *bodyBudget) release(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
}

// usage returns the bytes reserved now and the most ever reserved at once.
func (b *bodyBudget) usage() (used, peak int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak
}

// bodyHold is one request's reservation.
type bodyHold struct {
	budget *bodyBudget
	n      int64
}

// grow reserves n more bytes, or answers 503 SERVICE_UNAVAILABLE (reason overloaded).
func (h *bodyHold) grow(n int64) error {
	if !h.budget.reserve(n) {
		return runtime.Errorf(contract.CodeServiceUnavailable,
			"the server holds too many request bodies at the moment; retry shortly").With("reason", "overloaded")
	}
	h.n += n
	return nil
}

// release gives the reservation back; it may be called more than once.
func (h *bodyHold) release() {
	h.budget.release(h.n)
	h.n = 0
}

// errClientClosed marks a request whose client went away (or stalled past the read
// timeout) before its body arrived: there is no one left to answer.
var errClientClosed = errors.New("the client closed the request")

// readBody buffers r's body (at most l.maxBytes) under hold. A declared
// Content-Length is reserved whole and read into a buffer of exactly that size; a
// body of unknown length is reserved as its buffer grows.
func (l bodyLimits) readBody(r *http.Request, hold *bodyHold) ([]byte, error) {
	if r.ContentLength > l.maxBytes {
		// Refused on the declared length alone: nothing is read or buffered.
		return nil, runtime.TooLarge("body", l.maxBytes)
	}
	if r.ContentLength >= 0 {
		if err := hold.grow(r.ContentLength); err != nil {
			return nil, err
		}
		buf := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, buf); err != nil {
			return nil, errors.Join(errClientClosed, err)
		}
		return buf, nil
	}
	body := http.MaxBytesReader(nil, r.Body, l.maxBytes)
	var buf []byte
	for {
		if len(buf) == cap(buf) {
			// One byte past the limit is room enough to notice an oversized body.
			size := min(max(2*int64(cap(buf)), bodyChunkBytes), l.maxBytes+1)
			if err := hold.grow(size - int64(cap(buf))); err != nil {
				return nil, err
			}
			grown := make([]byte, len(buf), size)
			copy(grown, buf)
			buf = grown
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case errors.Is(err, io.EOF):
			return buf, nil
		case err != nil:
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				return nil, runtime.TooLarge("body", l.maxBytes)
			}
			return nil, errors.Join(errClientClosed, err)
		}
	}
}
