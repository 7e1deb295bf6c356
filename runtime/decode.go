package runtime

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// DecodeJSON unmarshals data into v with the contract's strictness (docs/api.md):
// member names match case-sensitively, unknown and duplicate members are refused, and
// nothing may follow the value. Go's encoding/json is too lenient for that
// (case-insensitive names, last duplicate wins), so the stricter decoder of the json v2
// prototype does the work. Every failure is a VALIDATION_FAILED error whose
// details.field is the offending path (body when there is none).
// Every integer must be within ±(2^53 − 1) (docs/api.md): beyond it is 400 with
// details.limit, a fraction where an integer belongs 400.
func DecodeJSON(data []byte, v any) error {
	return DecodeFailure(json.Unmarshal(data, v, json.RejectUnknownMembers(true), safeIntegers), "body")
}

// DecodeNext unmarshals the next value of dec into v as strictly as DecodeJSON; a
// failure names its path, or fallback when there is none.
func DecodeNext(dec *jsontext.Decoder, v any, fallback string) error {
	return DecodeFailure(json.UnmarshalDecode(dec, v, json.RejectUnknownMembers(true), safeIntegers), fallback)
}

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

// DecodeFailure turns a failure of the json v2 decoder into a VALIDATION_FAILED error
// naming the offending path (fallback when there is none). Failures are told apart by
// the library's error types and sentinels: their messages may quote member names,
// which are the client's text. An *Error in the chain (a reader's failure, which is
// always one) is returned as it is.
func DecodeFailure(err error, fallback string) error {
	if err == nil {
		return nil
	}
	var re *Error
	if errors.As(err, &re) {
		return re
	}
	var syntactic *jsontext.SyntacticError
	if errors.As(err, &syntactic) {
		field := FieldPath(syntactic.JSONPointer)
		switch {
		case errors.Is(syntactic.Err, jsontext.ErrDuplicateName):
			// A member named "" at the top level has an empty path: the message
			// quotes it as it is, details.field names the fallback.
			return Invalid(fieldOr(field, fallback), "duplicate field %q", field)
		case errors.Is(syntactic.Err, errInvalidUTF8):
			return Invalid(fieldOr(field, fallback), "the value is not valid UTF-8")
		default:
			return Invalid(fieldOr(field, fallback), "malformed JSON")
		}
	}
	var semantic *json.SemanticError
	if errors.As(err, &semantic) {
		path := FieldPath(semantic.JSONPointer)
		field := fieldOr(path, fallback)
		switch {
		case errors.Is(semantic.Err, json.ErrUnknownName):
			return Invalid(field, "unknown field %q", path)
		case errors.Is(semantic.Err, errUnsafeInteger):
			return TooMany(field, MaxSequence, "%s is out of range", field)
		case errors.Is(semantic.Err, errNotInteger):
			return Invalid(field, "%s must be an integer", field)
		}
		if semantic.JSONKind != 0 {
			return Invalid(field, "%s has the wrong type or an out-of-range value", field)
		}
		return Invalid(field, "%s is invalid", field)
	}
	return Invalid(fallback, "malformed JSON")
}

// safeIntegers holds every integer of a request to the range JavaScript clients read
// exactly, ±(2^53 − 1) (docs/api.md), whatever Go type the field has. A number
// beyond it fails with errUnsafeInteger, one with a fraction or an exponent with
// errNotInteger; anything else (null, a string) takes the default path
// (ErrUnsupported), which refuses it as the wrong type.
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
		if n < -MaxSequence || n > MaxSequence {
			return 0, errUnsafeInteger
		}
		return n, nil
	}
	if f, err := strconv.ParseFloat(string(raw), 64); err != nil || math.Abs(f) > MaxSequence {
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
