package runtime

import (
	"errors"
	"fmt"

	"github.com/agent-context/agent-context/contract"
)

// Error is the one error type use cases return to their callers. Code is a code of the
// contract's table; Message is safe to show a client; Details becomes the envelope's
// details object. Err, when set, is the internal cause: it is logged, never sent.
type Error struct {
	Code    string
	Message string
	Details map[string]any
	Err     error
}

// Errorf returns an Error with code and a client-safe formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Error implements error.
func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Unwrap returns the internal cause.
func (e *Error) Unwrap() error { return e.Err }

// With returns e with details[key] = value.
func (e *Error) With(key string, value any) *Error {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	e.Details[key] = value
	return e
}

// Wrap returns e with an internal cause attached.
func (e *Error) Wrap(err error) *Error {
	e.Err = err
	return e
}

// ErrorCode returns the contract code of err: the code of the first *Error in its
// chain, or INTERNAL for anything else (nil gives "").
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return contract.CodeInternal
}

// Invalid returns a VALIDATION_FAILED error naming the offending field.
func Invalid(field, format string, args ...any) *Error {
	return Errorf(contract.CodeValidationFailed, format, args...).With("field", field)
}

// TooMany returns the VALIDATION_FAILED error for an oversized collection or a number
// out of range: the contract answers those 400 with the bound in details.limit.
func TooMany(field string, limit int64, format string, args ...any) *Error {
	return Invalid(field, format, args...).With("limit", limit)
}

// TooLarge returns the PAYLOAD_TOO_LARGE error for a byte-size bound.
func TooLarge(field string, limit int64) *Error {
	return Errorf(contract.CodePayloadTooLarge, "%s exceeds %d bytes", field, limit).
		With("field", field).With("limit", limit)
}

// Forbidden is the refusal of a caller that lacks capability (INTERNAL_TOKEN_FORBIDDEN
// naming it): the one form of it, whether a door's admission or a use case that needs
// more for a part of its work (an admin's view) refuses.
func Forbidden(capability string) *Error {
	return Errorf(contract.CodeTokenForbidden, "the credential lacks the required capability").
		With("requiredCapability", capability)
}

// NotFound returns the NOT_FOUND error for a record absent from the caller's scope.
// The message is the same whether the record is missing or belongs to another scope.
func NotFound(field, what string) *Error {
	return Errorf(contract.CodeNotFound, "%s not found", what).With("field", field)
}
