package postgres

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// A unique violation is recognized as Postgres reports it and as Citus passes it on
// from a shard (XX000, the shard's constraint in the message), and names the schema's
// constraint either way; other internal errors are not conflicts.
func TestUniqueViolationOnPostgresAndCitus(t *testing.T) {
	for _, tc := range []struct {
		name       string
		err        error
		constraint string
		unique     bool
	}{
		{"postgres", &pgconn.PgError{Code: "23505", ConstraintName: "messages_pkey",
			Message: `duplicate key value violates unique constraint "messages_pkey"`}, "messages_pkey", true},
		{"citus 23505", &pgconn.PgError{Code: "23505", ConstraintName: "messages_pkey_102111",
			Message: `duplicate key value violates unique constraint "messages_pkey_102111"`}, "messages_pkey", true},
		{"citus XX000", fmt.Errorf("append: %w", &pgconn.PgError{Code: "XX000",
			Message: `duplicate key value violates unique constraint "messages_pkey_102111"`}), "messages_pkey", true},
		{"citus XX000 of a runtime table", &pgconn.PgError{Code: "XX000",
			Message: `duplicate key value violates unique constraint "entry_vectors_3_pkey_102242"`}, "entry_vectors_3_pkey", true},
		{"other internal error", &pgconn.PgError{Code: "XX000", Message: "could not find named tuplestore"}, "", false},
		{"check violation", &pgconn.PgError{Code: "23514", ConstraintName: "version_gte_1"}, "", false},
		{"not from the database", errors.New("duplicate key value violates unique constraint \"x\""), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			constraint, unique := uniqueViolation(tc.err)
			require.Equal(t, tc.unique, unique)
			require.Equal(t, tc.constraint, constraint)
			var re *runtime.Error
			if errors.As(translate(tc.err), &re) {
				require.True(t, tc.unique)
				require.Equal(t, contract.CodeConflict, re.Code)
			} else {
				require.False(t, tc.unique)
			}
		})
	}
}
