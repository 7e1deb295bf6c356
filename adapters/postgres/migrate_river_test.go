package postgres_test

import (
	"context"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
)

// TestRiverSchemaMatchesRiverMigrations proves that migration 00004 leaves exactly the
// schema River's own migrations build, and records their versions: it fails when an
// upgrade of River brings a migration that no goose migration applies yet.
func TestRiverSchemaMatchesRiverMigrations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDB(t)

	ours, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	require.NoError(t, err)
	res, err := ours.Validate(ctx, nil)
	require.NoError(t, err)
	require.True(t, res.OK, "River migrations missing from the goose migrations: %v", res.Messages)

	_, err = pool.Exec(ctx, "CREATE SCHEMA river_reference")
	require.NoError(t, err)
	reference, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: "river_reference"})
	require.NoError(t, err)
	_, err = reference.Migrate(ctx, rivermigrate.DirectionUp, nil)
	require.NoError(t, err)

	want := riverCatalog(t, pool, "river_reference")
	require.NotEmpty(t, want)
	require.Equal(t, want, riverCatalog(t, pool, "public"))
}

// riverCatalog describes River's objects in schema, with the schema's name removed:
// tables and their persistence, columns, constraints, indexes, the enum, functions and
// the recorded migration versions, one sorted line each.
func riverCatalog(t *testing.T, pool *pgxpool.Pool, schema string) []string {
	t.Helper()
	queries := []string{
		`SELECT 'table ' || c.relname || ' ' || c.relpersistence::text
		 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		 WHERE n.nspname = $1 AND c.relkind = 'r' AND c.relname LIKE 'river%'`,
		`SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
		        || ' notnull=' || a.attnotnull || ' default=' || coalesce(pg_get_expr(d.adbin, d.adrelid), '-')
		 FROM pg_attribute a
		 JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		 LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		 WHERE n.nspname = $1 AND c.relkind = 'r' AND c.relname LIKE 'river%' AND a.attnum > 0 AND NOT a.attisdropped`,
		`SELECT 'constraint ' || c.relname || '.' || k.conname || ' ' || pg_get_constraintdef(k.oid)
		 FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		 WHERE n.nspname = $1 AND c.relname LIKE 'river%'`,
		`SELECT 'index ' || indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename LIKE 'river%'`,
		`SELECT 'enum ' || t.typname || ' ' || string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder)
		 FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace JOIN pg_enum e ON e.enumtypid = t.oid
		 WHERE n.nspname = $1 AND t.typname LIKE 'river%' GROUP BY t.typname`,
		`SELECT 'function ' || p.proname || '(' || pg_get_function_arguments(p.oid) || ') '
		        || pg_get_function_result(p.oid) || ' ' || p.provolatile::text || ' ' || l.lanname || ' ' || p.prosrc
		 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace JOIN pg_language l ON l.oid = p.prolang
		 WHERE n.nspname = $1 AND p.proname LIKE 'river%'`,
	}
	space := regexp.MustCompile(`\s+`)
	var out []string
	for _, q := range queries {
		rows, err := pool.Query(context.Background(), q, schema)
		require.NoError(t, err)
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		for _, l := range lines {
			l = strings.ReplaceAll(l, schema+".", "")
			out = append(out, strings.TrimSpace(space.ReplaceAllString(l, " ")))
		}
	}
	rows, err := pool.Query(context.Background(),
		"SELECT 'migration ' || line || ' ' || version FROM "+pgx.Identifier{schema, "river_migration"}.Sanitize())
	require.NoError(t, err)
	versions, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	out = append(out, versions...)
	sort.Strings(out)
	return out
}
