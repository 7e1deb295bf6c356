package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"

	"github.com/labstack/echo/v4"
)

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

// encodeJSON writes v's JSON, with encoding/json's final newline, to buf.
func encodeJSON(buf *bytes.Buffer, v any) error {
	if w, ok := v.(jsonWriter); ok {
		return w.WriteJSON(buf)
	}
	return json.NewEncoder(buf).Encode(v)
}

// writeJSON is how every answer is written: encoded whole into a pooled buffer first,
// then sent with its Content-Length in one write. An answer that cannot be encoded
// therefore becomes a 500 envelope instead of a half-written body, and an answer of
// any size goes out without chunked framing.
func writeJSON(c echo.Context, status int, v any) error {
	buf := responseBuffers.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledResponse {
			buf.Reset()
			responseBuffers.Put(buf)
		}
	}()
	if err := encodeJSON(buf, v); err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	h.Set(echo.HeaderContentLength, strconv.Itoa(buf.Len()))
	c.Response().WriteHeader(status)
	if c.Request().Method == http.MethodHead {
		return nil
	}
	_, err := c.Response().Write(buf.Bytes())
	return err
}
