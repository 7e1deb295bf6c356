package server

import (
	"bytes"
	"mime"
	"net/http"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// decodeBody reads r's JSON body into v with the contract's strictness: the content
// type must be JSON, the body at most l.maxBytes, member names match case-sensitively,
// unknown and duplicate members are refused, and nothing may follow the value.
// Go's encoding/json is too lenient for that (case-insensitive names, last duplicate
// wins), so the stricter decoder of the json v2 prototype does the work. The bytes
// buffered are reserved in hold, which the caller releases once the request is done.
func decodeBody(r *http.Request, v any, l bodyLimits, hold *bodyHold) error {
	body, err := readBody(r, l, hold)
	if err != nil {
		return err
	}
	return decodeJSON(body, v)
}

// readBody reads r's JSON body as decodeBody does, up to the decoding: a JSON content
// type, no content coding, at most l.maxBytes reserved in hold, an object (or anything
// but valid JSON, which decoding then refuses with the offending field).
func readBody(r *http.Request, l bodyLimits, hold *bodyHold) ([]byte, error) {
	if err := checkJSONContentType(r.Header.Get(echoHeaderContentType)); err != nil {
		return nil, err
	}
	if err := checkContentEncoding(r.Header.Values(headerContentEncoding)); err != nil {
		return nil, err
	}
	body, err := l.readBody(r, hold)
	if err != nil {
		return nil, err
	}
	// RFC 8259 §8.1 lets a parser ignore a byte order mark; some Windows tools send one.
	body = bytes.TrimLeft(bytes.TrimPrefix(body, utf8BOM), " \t\r\n")
	if len(body) == 0 {
		return nil, runtime.Invalid("body", "a JSON body is required")
	}
	if body[0] != '{' && jsontext.Value(body).IsValid() {
		// Every request is an object; null in particular would decode as an empty
		// request, since unmarshalling null is a no-op.
		return nil, runtime.Invalid("body", "the request body must be a JSON object")
	}
	return body, nil
}

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// decodeJSON is runtime.DecodeJSON: the one strict decoder of every body and of every
// line an import reads.
func decodeJSON(data []byte, v any) error { return runtime.DecodeJSON(data, v) }

// checkJSONContentType accepts application/json with any parameters (charset=utf-8).
func checkJSONContentType(value string) error {
	mediaType, params, err := mime.ParseMediaType(value)
	if err != nil || mediaType != "application/json" {
		return runtime.Errorf(contract.CodeUnsupportedMediaType, "the request body must be application/json").
			With("field", echoHeaderContentType)
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return runtime.Errorf(contract.CodeUnsupportedMediaType, "the request body must be UTF-8 JSON").
			With("field", echoHeaderContentType)
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
	echoHeaderContentType = "Content-Type"
	headerContentEncoding = "Content-Encoding"
)
