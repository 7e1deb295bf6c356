package server

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
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

// errInvalidUTF8 is the decoder's cause for invalid UTF-8. The library keeps that
// sentinel in an internal package, so it is taken once from the library itself, and
// errors are then recognised by identity, never by their text.
var errInvalidUTF8 = func() error {
	_, err := jsontext.NewDecoder(bytes.NewReader([]byte("\"\xff\""))).ReadValue()
	var syntactic *jsontext.SyntacticError
	if !errors.As(err, &syntactic) || syntactic.Err == nil {
		panic(fmt.Sprintf("the JSON decoder accepted invalid UTF-8 (%v)", err))
	}
	return syntactic.Err
}()

// decodeJSON unmarshals data into v strictly (see decodeBody) and turns every failure
// into a VALIDATION_FAILED error whose details.field is the offending path. Failures
// are told apart by the library's error types and sentinels: their messages may
// quote member names, which are the client's text.
func decodeJSON(data []byte, v any) error {
	err := json.Unmarshal(data, v, json.RejectUnknownMembers(true), safeIntegers)
	if err == nil {
		return nil
	}
	var syntactic *jsontext.SyntacticError
	if errors.As(err, &syntactic) {
		field := runtime.FieldPath(syntactic.JSONPointer)
		switch {
		case errors.Is(syntactic.Err, jsontext.ErrDuplicateName):
			return runtime.Invalid(field, "duplicate field %q", field)
		case errors.Is(syntactic.Err, errInvalidUTF8):
			return runtime.Invalid(fieldOr(field, "body"), "the value is not valid UTF-8")
		default:
			return runtime.Invalid(fieldOr(field, "body"), "malformed JSON")
		}
	}
	var semantic *json.SemanticError
	if errors.As(err, &semantic) {
		field := fieldOr(runtime.FieldPath(semantic.JSONPointer), "body")
		switch {
		case errors.Is(semantic.Err, json.ErrUnknownName):
			return runtime.Invalid(field, "unknown field %q", field)
		case errors.Is(semantic.Err, errUnsafeInteger):
			return runtime.TooMany(field, runtime.MaxSequence, "%s is out of range", field)
		case errors.Is(semantic.Err, errNotInteger):
			return runtime.Invalid(field, "%s must be an integer", field)
		}
		if semantic.JSONKind != 0 {
			return runtime.Invalid(field, "%s has the wrong type or an out-of-range value", field)
		}
		return runtime.Invalid(field, "%s is invalid", field)
	}
	return runtime.Invalid("body", "malformed JSON")
}

// safeIntegers holds every integer of a request to the range JavaScript clients read
// exactly, ±(2^53 − 1) (01-conventions.md), whatever Go type the field has. A number
// beyond it fails with errUnsafeInteger, one with a fraction or an exponent with
// errNotInteger; anything else (null, a string) takes the default path (ErrUnsupported), which refuses
// it as the wrong type.
var safeIntegers = json.WithUnmarshalers(json.JoinUnmarshalers(
	json.UnmarshalFromFunc(func(dec *jsontext.Decoder, v *int64) error {
		n, err := readSafeInteger(dec)
		if err == nil {
			*v = n
		}
		return err
	}),
	json.UnmarshalFromFunc(func(dec *jsontext.Decoder, v *int) error {
		n, err := readSafeInteger(dec)
		if err == nil {
			*v = int(n)
		}
		return err
	}),
))

var (
	errUnsafeInteger = errors.New("integer beyond ±(2^53 - 1)")
	errNotInteger    = errors.New("number is not an integer")
)

func readSafeInteger(dec *jsontext.Decoder) (int64, error) {
	if dec.PeekKind() != '0' {
		return 0, errors.ErrUnsupported
	}
	raw, err := dec.ReadValue()
	if err != nil {
		return 0, err
	}
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		if n < -runtime.MaxSequence || n > runtime.MaxSequence {
			return 0, errUnsafeInteger
		}
		return n, nil
	}
	if f, err := strconv.ParseFloat(string(raw), 64); err != nil || math.Abs(f) > runtime.MaxSequence {
		// ParseFloat fails only on a syntactically valid number out of float64's range.
		return 0, errUnsafeInteger
	}
	return 0, errNotInteger
}

func fieldOr(field, fallback string) string {
	if field == "" {
		return fallback
	}
	return field
}

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
