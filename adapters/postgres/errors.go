package postgres

import (
	"context"
	"errors"
	"net"
	"regexp"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// SQLSTATE codes the adapter translates.
const (
	sqlstateUniqueViolation  = "23505"
	sqlstateInternalError    = "XX000"
	sqlstateUndefinedTable   = "42P01"
	sqlstateQueryCanceled    = "57014"
	sqlstateAdminShutdown    = "57P01"
	sqlstateCannotConnectNow = "57P03"
	sqlstateTooManyConns     = "53300"
	sqlstateDeadlock         = "40P01"
	sqlstateSerialization    = "40001"
)

// translate maps a database error to the runtime's error type, once, at the adapter
// edge. Errors already translated pass through; the cause is kept for the log only.
func translate(err error) error {
	if err == nil {
		return nil
	}
	var re *runtime.Error
	if errors.As(err, &re) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case sqlstateQueryCanceled:
			return unavailable("statement_timeout", err)
		case sqlstateAdminShutdown, sqlstateCannotConnectNow, sqlstateTooManyConns:
			return unavailable("database", err)
		case sqlstateDeadlock:
			return unavailable("deadlock", err)
		case sqlstateSerialization:
			return unavailable("serialization_failure", err)
		}
		if _, ok := uniqueViolation(err); ok {
			return &runtime.Error{Code: contract.CodeConflict, Message: "the record conflicts with an existing one", Err: err}
		}
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var netErr net.Error
	var connectErr *pgconn.ConnectError
	if errors.As(err, &netErr) || errors.As(err, &connectErr) || pgconn.SafeToRetry(err) {
		return unavailable("database", err)
	}
	return err
}

// citusUniqueViolation is the message of a unique violation that Citus passes on from a
// worker as an internal error (XX000) on some paths, COPY through the coordinator among
// them, instead of as 23505. It names the shard's constraint.
var citusUniqueViolation = regexp.MustCompile(`^duplicate key value violates unique constraint "([^"]+)"`)

// shardSuffix is what Citus appends to a table's names on its shards: "_" and the
// shard's ID. No constraint of the schema ends in "_" and digits.
var shardSuffix = regexp.MustCompile(`_[0-9]+$`)

// uniqueViolation reports whether err is a unique violation, as Postgres reports it
// (23505) or as Citus passes it on from a shard (XX000 naming the shard's constraint),
// and names the constraint as the schema does: without the shard's suffix.
func uniqueViolation(err error) (string, bool) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return "", false
	}
	name := pgErr.ConstraintName
	switch pgErr.Code {
	case sqlstateUniqueViolation:
	case sqlstateInternalError:
		m := citusUniqueViolation.FindStringSubmatch(pgErr.Message)
		if m == nil {
			return "", false
		}
		name = m[1]
	default:
		return "", false
	}
	return shardSuffix.ReplaceAllString(name, ""), true
}

// txConflict reports whether err is Postgres aborting a transaction that collided
// with another one (a deadlock, or a serialization failure): running it again may
// succeed.
func txConflict(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == sqlstateDeadlock || pgErr.Code == sqlstateSerialization)
}

func unavailable(reason string, err error) error {
	msg := "the database is unavailable"
	switch reason {
	case "statement_timeout":
		msg = "the statement took too long and was canceled"
	case "deadlock", "serialization_failure":
		msg = "the change collided with a concurrent one; retry it"
	}
	return (&runtime.Error{Code: contract.CodeServiceUnavailable, Message: msg, Err: err}).With("reason", reason)
}
