package postgres

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// distributionLockKey serializes distribution across replicas that migrate at once,
// as goose's own lock does for the migrations ("agctxdst").
const distributionLockKey = 0x6167637478647374

// TableRefusal is one table Citus would not distribute.
type TableRefusal struct {
	Table string
	Err   error
}

// DistributionError lists every table Citus refused. Distribution goes on past a
// refusal, so one run reports them all and a later run, once fixed, picks up where
// this one stopped (tables already distributed are skipped).
type DistributionError struct {
	Refused []TableRefusal
}

func (e *DistributionError) Error() string {
	parts := make([]string, len(e.Refused))
	for i, r := range e.Refused {
		parts[i] = r.Table + ": " + r.Err.Error()
	}
	return fmt.Sprintf("citus refused to distribute %d tables: %s", len(e.Refused), strings.Join(parts, "; "))
}

// citusTable is a table of the schema not yet known to Citus.
type citusTable struct {
	name       string
	tenant     bool     // has a tenant_id column in every unique key: distributed by it
	references []string // tables its foreign keys point at
}

// Distribute hands the schema to Citus when the database has the citus extension
// (a Citus coordinator) and does nothing otherwise: every table with a tenant_id
// becomes a distributed table by tenant_id, all colocated so a tenant's rows of every
// table sit on one node and joins and foreign keys stay local there; every other table
// becomes a reference table (copied to every node, since distributed rows refer to
// them), except River's and goose's bookkeeping, which only the coordinator reads. A
// table whose primary key or other unique key leaves out its tenant_id is found by that
// key before its tenant is known (console_sessions, by the session's hash): Citus
// cannot distribute it by tenant, and it becomes a reference table too.
// Up calls it after the migrations, so a later migration's new tables are distributed
// by the same run that creates them.
func (m *Migrator) Distribute(ctx context.Context) error {
	conn, err := m.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	var citus bool
	if err := conn.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')`).Scan(&citus); err != nil {
		return fmt.Errorf("look for citus: %w", err)
	}
	if !citus {
		return nil
	}
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, distributionLockKey); err != nil {
		return fmt.Errorf("lock distribution: %w", err)
	}
	// An unlock fails only on a broken connection, whose session and lock end with it.
	defer func() {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, distributionLockKey)
	}()

	// The document number is unique across scopes, which Citus cannot keep: on a
	// cluster it is unique within its scope instead (the sequence still hands out
	// each number once). Plain Postgres keeps the index over the number alone, which
	// the text half's plans need (migration 00033).
	for _, stmt := range []string{
		`CREATE UNIQUE INDEX IF NOT EXISTS context_entries_by_scope_text_ord ON context_entries (tenant_id, project_id, text_ord)`,
		`DROP INDEX IF EXISTS context_entries_by_text_ord`,
	} {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("the document number's index for citus: %w", err)
		}
	}
	tables, anchor, err := undistributedTables(ctx, conn)
	if err != nil {
		return err
	}
	var refused []TableRefusal
	failed := map[string]bool{}
	for _, t := range distributionOrder(tables) {
		if blocked := slices.IndexFunc(t.references, func(r string) bool { return failed[r] }); blocked >= 0 {
			failed[t.name] = true
			refused = append(refused, TableRefusal{t.name, fmt.Errorf("references %s, which was refused", t.references[blocked])})
			continue
		}
		var err error
		switch {
		case !t.tenant:
			_, err = conn.ExecContext(ctx, `SELECT create_reference_table($1)`, t.name)
		case anchor == "":
			// The first distributed table starts the colocation group the others join.
			_, err = conn.ExecContext(ctx, `SELECT create_distributed_table($1, 'tenant_id')`, t.name)
			if err == nil {
				anchor = t.name
			}
		default:
			_, err = conn.ExecContext(ctx, `SELECT create_distributed_table($1, 'tenant_id', colocate_with => $2)`, t.name, anchor)
		}
		if err != nil {
			failed[t.name] = true
			refused = append(refused, TableRefusal{t.name, err})
		}
	}
	if len(refused) > 0 {
		return &DistributionError{Refused: refused}
	}
	return nil
}

// undistributedTables reads the current schema's ordinary tables that Citus does not
// know yet, with their foreign keys, and the hash-distributed table new ones colocate
// with ("" before the first).
func undistributedTables(ctx context.Context, conn *sql.Conn) ([]citusTable, string, error) {
	rows, err := conn.QueryContext(ctx, `
		SELECT c.relname,
		       EXISTS (SELECT 1 FROM pg_attribute a
		               WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped
		                 AND NOT EXISTS (SELECT 1 FROM pg_index i
		                                 WHERE i.indrelid = c.oid AND i.indisunique AND NOT a.attnum = ANY (i.indkey))),
		       coalesce(string_agg(DISTINCT r.relname, ' ') FILTER (WHERE r.oid <> c.oid), '')
		FROM pg_class c
		LEFT JOIN pg_constraint f ON f.conrelid = c.oid AND f.contype = 'f'
		LEFT JOIN pg_class r ON r.oid = f.confrelid
		WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p')
		  AND NOT c.relispartition
		  AND c.relname NOT LIKE 'river\_%' AND c.relname <> 'goose_db_version'
		  AND NOT EXISTS (SELECT 1 FROM pg_dist_partition p WHERE p.logicalrelid = c.oid)
		GROUP BY c.oid, c.relname`)
	if err != nil {
		return nil, "", fmt.Errorf("list tables to distribute: %w", err)
	}
	var tables []citusTable
	for rows.Next() {
		var t citusTable
		var refs string
		if err := rows.Scan(&t.name, &t.tenant, &refs); err != nil {
			_ = rows.Close()
			return nil, "", err
		}
		t.references = strings.Fields(refs)
		tables = append(tables, t)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, "", fmt.Errorf("list tables to distribute: %w", err)
	}
	var anchor string
	if err = conn.QueryRowContext(ctx, colocationAnchorSQL).Scan(&anchor); err != nil {
		return nil, "", fmt.Errorf("find the colocation group: %w", err)
	}
	return tables, anchor, nil
}

// colocationAnchorSQL names a hash-distributed table of the schema's colocation group,
// "" before the first.
const colocationAnchorSQL = `
	SELECT coalesce(min(logicalrelid::regclass::text), '') FROM pg_dist_partition
	WHERE partmethod = 'h' AND colocationid = (
		SELECT min(colocationid) FROM pg_dist_partition WHERE partmethod = 'h')`

// OnCitus reports whether the database is a Citus coordinator: the statements that
// Citus runs differently from one Postgres choose by it.
func OnCitus(ctx context.Context, db DBTX) (bool, error) {
	var citus bool
	err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')`).Scan(&citus)
	return citus, translate(err)
}

// distributeCreated hands a table made at run time (a vector generation's table) to
// Citus as it is made, in the transaction that creates it, when the database is a
// Citus coordinator: distributed by tenant_id in the colocation group of the schema's
// tables, so its rows sit beside their tenant's entries. On plain Postgres it does
// nothing.
func distributeCreated(ctx context.Context, tx DBTX, table string) error {
	if citus, err := OnCitus(ctx, tx); err != nil || !citus {
		return err
	}
	// The transaction writes vector_models (a reference table) after the distribution:
	// Citus allows that only when the distribution ran its shards one at a time.
	if _, err := tx.Exec(ctx, `SET LOCAL citus.multi_shard_modify_mode TO 'sequential'`); err != nil {
		return translate(err)
	}
	var anchor string
	if err := tx.QueryRow(ctx, colocationAnchorSQL).Scan(&anchor); err != nil {
		return translate(err)
	}
	if anchor == "" {
		_, err := tx.Exec(ctx, `SELECT create_distributed_table($1, 'tenant_id')`, table)
		return translate(err)
	}
	_, err := tx.Exec(ctx, `SELECT create_distributed_table($1, 'tenant_id', colocate_with => $2)`, table, anchor)
	return translate(err)
}

// distributionOrder puts reference tables first, since distributed tables point at
// them, then every table after the tables it references (Citus refuses a foreign key
// to a table it does not know yet), by name otherwise. A reference to a table outside
// the list (already distributed, or kept local) does not order anything.
func distributionOrder(tables []citusTable) []citusTable {
	sorted := slices.Clone(tables)
	slices.SortFunc(sorted, func(a, b citusTable) int {
		if a.tenant != b.tenant {
			if a.tenant {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.name, b.name)
	})
	pending := map[string]bool{}
	for _, t := range sorted {
		pending[t.name] = true
	}
	out := make([]citusTable, 0, len(sorted))
	for len(out) < len(sorted) {
		progressed := false
		for _, t := range sorted {
			if !pending[t.name] || slices.ContainsFunc(t.references, func(r string) bool { return pending[r] }) {
				continue
			}
			pending[t.name] = false
			out = append(out, t)
			progressed = true
		}
		if !progressed {
			// A cycle of foreign keys: add the rest as they come, and let Citus say
			// which of them it refuses.
			for _, t := range sorted {
				if pending[t.name] {
					pending[t.name] = false
					out = append(out, t)
				}
			}
		}
	}
	return out
}
