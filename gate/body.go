package gate

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// DefaultMaxInFlightBodyBytes bounds the bytes all requests together hold for their
// bodies when Config.MaxInFlightBodyBytes is unset: eight maximal (32 MiB) bodies.
const DefaultMaxInFlightBodyBytes = 256 << 20

// bodyChunkBytes is the first buffer, and the least growth, for a body of unknown
// length (chunked transfer encoding).
const bodyChunkBytes = 64 << 10

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
	mu     sync.Mutex
	n      int64
}

// grow reserves n more bytes, or answers 503 SERVICE_UNAVAILABLE (reason overloaded).
func (h *bodyHold) grow(n int64) error {
	if !h.budget.reserve(n) {
		return runtime.Errorf(contract.CodeServiceUnavailable,
			"the server holds too many request bodies at the moment; retry shortly").With("reason", "overloaded")
	}
	h.mu.Lock()
	h.n += n
	h.mu.Unlock()
	return nil
}

// release gives the reservation back; it may be called more than once.
func (h *bodyHold) release() {
	h.mu.Lock()
	n := h.n
	h.n = 0
	h.mu.Unlock()
	h.budget.release(n)
}

// ErrClientClosed marks a request whose client went away (or stalled past the read
// timeout) before its body arrived: there is no one left to answer.
var ErrClientClosed = errors.New("the client closed the request")

// ReadBody buffers r's body, refusing one over maxBytes (0: the gate's bound) with 413
// before a byte of it is parsed: a declared Content-Length is refused on its own,
// a body of unknown length as soon as it grows past the bound. The bytes buffered are
// reserved in the gate's in-flight budget until release is called (release is never
// nil and may be called more than once): the caller releases once it no longer holds
// the body or what it decoded from it.
func (g *Gate) ReadBody(r *http.Request, maxBytes int64) (body []byte, release func(), err error) {
	if maxBytes <= 0 {
		maxBytes = g.maxBody
	}
	hold := &bodyHold{budget: g.budget}
	body, err = readBody(r, maxBytes, hold)
	if err != nil {
		hold.release()
		return nil, func() {}, err
	}
	return body, hold.release, nil
}

// readBody buffers r's body (at most maxBytes) under hold. A declared Content-Length
// is reserved whole and read into a buffer of exactly that size; a body of unknown
// length is reserved as its buffer grows.
func readBody(r *http.Request, maxBytes int64, hold *bodyHold) ([]byte, error) {
	if r.ContentLength > maxBytes {
		// Refused on the declared length alone: nothing is read or buffered.
		return nil, runtime.TooLarge("body", maxBytes)
	}
	if r.ContentLength >= 0 {
		if err := hold.grow(r.ContentLength); err != nil {
			return nil, err
		}
		buf := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, buf); err != nil {
			return nil, errors.Join(ErrClientClosed, err)
		}
		return buf, nil
	}
	body := http.MaxBytesReader(nil, r.Body, maxBytes)
	var buf []byte
	for {
		if len(buf) == cap(buf) {
			// One byte past the limit is room enough to notice an oversized body.
			size := min(max(2*int64(cap(buf)), bodyChunkBytes), maxBytes+1)
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
				return nil, runtime.TooLarge("body", maxBytes)
			}
			return nil, errors.Join(ErrClientClosed, err)
		}
	}
}

// ReadJSON reads r's JSON body as ReadBody does, after checking its headers
// (CheckJSONRequest), and returns it without a byte order mark or leading space. A
// body that is valid JSON but no object is refused (every request is an object; null
// in particular would decode as an empty request); one that is not valid JSON is
// returned for the decoder to refuse with the offending field.
func (g *Gate) ReadJSON(r *http.Request, maxBytes int64) (body []byte, release func(), err error) {
	if err := CheckJSONRequest(r); err != nil {
		return nil, func() {}, err
	}
	body, release, err = g.ReadBody(r, maxBytes)
	if err != nil {
		return nil, release, err
	}
	body = TrimJSON(body)
	if len(body) == 0 {
		release()
		return nil, func() {}, runtime.Invalid("body", "a JSON body is required")
	}
	if body[0] != '{' && jsontext.Value(body).IsValid() {
		release()
		return nil, func() {}, runtime.Invalid("body", "the request body must be a JSON object")
	}
	return body, release, nil
}

// Decode reads r's JSON body (ReadJSON, the gate's bound) and decodes it into v with
// the contract's strictness (runtime.DecodeJSON): member names match
// case-sensitively, unknown and duplicate members are refused, nothing may follow
// the value. The caller calls release once it no longer holds v.
func (g *Gate) Decode(r *http.Request, v any) (release func(), err error) {
	body, release, err := g.ReadJSON(r, 0)
	if err != nil {
		return release, err
	}
	return release, runtime.DecodeJSON(body, v)
}

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// TrimJSON drops a byte order mark and the JSON white space around a JSON text: RFC
// 8259 §8.1 lets a parser ignore the mark, and some Windows tools send one.
func TrimJSON(body []byte) []byte {
	return bytes.Trim(bytes.TrimPrefix(body, utf8BOM), " \t\r\n")
}

// CheckJSONRequest checks the headers of a JSON request: application/json (any
// parameters, charset UTF-8 if given) and no content coding.
func CheckJSONRequest(r *http.Request) error {
	if err := checkJSONContentType(r.Header.Get(headerContentType)); err != nil {
		return err
	}
	return checkContentEncoding(r.Header.Values(headerContentEncoding))
}

// checkJSONContentType accepts application/json with any parameters (charset=utf-8).
func checkJSONContentType(value string) error {
	mediaType, params, err := mime.ParseMediaType(value)
	if err != nil || mediaType != "application/json" {
		return runtime.Errorf(contract.CodeUnsupportedMediaType, "the request body must be application/json").
			With("field", headerContentType)
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return runtime.Errorf(contract.CodeUnsupportedMediaType, "the request body must be UTF-8 JSON").
			With("field", headerContentType)
	}
	return nil
}

// checkContentEncoding refuses compressed bodies: decoding them is not offered (a
// gzip bomb would need its own bound), and reading one as JSON would give a misleading
// "malformed JSON". RFC 7694 answers an unsupported content coding with 415.
func checkContentEncoding(values []string) error {
	for _, v := range values {
		for _, coding := range strings.Split(v, ",") {
			if coding = strings.TrimSpace(coding); coding != "" && !strings.EqualFold(coding, "identity") {
				return runtime.Errorf(contract.CodeUnsupportedMediaType, "the request body must not be compressed (Content-Encoding)").
					With("field", headerContentEncoding)
			}
		}
	}
	return nil
}

const (
	headerContentType     = "Content-Type"
	headerContentEncoding = "Content-Encoding"
)

// InFlightBodyBytes returns the bytes the gate holds for request bodies now and the
// most it ever held at once.
func (g *Gate) InFlightBodyBytes() (used, peak int64) { return g.budget.usage() }
