package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agent-context/agent-context/adapters/postgres"
)

const (
	// EnvCitus, set to 1, makes pgtestrun start a Citus cluster instead of one server.
	EnvCitus = "AGENT_CONTEXT_TEST_CITUS"
	// EnvCitusWorkers holds the admin URLs of the Citus workers, space-separated, when
	// EnvDatabaseURL is a Citus coordinator. Their superuser and password are the
	// coordinator's, which Citus presents when it connects from node to node.
	EnvCitusWorkers = "AGENT_CONTEXT_TEST_CITUS_WORKERS"
)

// CitusServerSettings returns the settings of a throwaway Citus node: ServerSettings,
// Citus preloaded, prepared transactions for its two-phase commits across nodes, and
// four shards per table instead of 32, because every test database is made on every
// node and its size, so the time to copy it, grows with the shards. The nodes talk
// over loopback without TLS: the throwaway servers have no certificates, and Citus's
// default (sslmode=require) would have libpq look for client certificates in a home
// directory the server's user may not read.
func CitusServerSettings() map[string]string {
	s := ServerSettings()
	s["shared_preload_libraries"] = "citus"
	s["max_prepared_transactions"] = s["max_connections"]
	s["citus.shard_count"] = "4"
	s["citus.node_conninfo"] = "sslmode=disable"
	return s
}

// worker is a Citus worker of the test server.
type worker struct {
	adminDSN string
	admin    *pgxpool.Pool
}

// connectWorkers opens an admin pool on every worker named by EnvCitusWorkers.
func (s *server) connectWorkers(ctx context.Context) error {
	for _, dsn := range strings.Fields(os.Getenv(EnvCitusWorkers)) {
		pool, err := postgres.NewPool(ctx, dsn, postgres.PoolOptions{MaxConns: 4, ApplicationName: "pgtest-admin"})
		if err != nil {
			return fmt.Errorf("pgtest: citus worker: %w", err)
		}
		s.workers = append(s.workers, worker{adminDSN: dsn, admin: pool})
	}
	return nil
}

// citus says whether the test server is a Citus coordinator with workers.
func (s *server) citus() bool { return len(s.workers) > 0 }

// execEverywhere runs sql on every worker's admin database, then on the coordinator's:
// a database is made ready on the workers before the coordinator's copy, whose state
// is the one pgtest checks.
func (s *server) execEverywhere(ctx context.Context, sql string, args ...any) error {
	for _, w := range s.workers {
		if _, err := w.admin.Exec(ctx, sql, args...); err != nil {
			return fmt.Errorf("citus worker %s: %w", hostPort(w.adminDSN), err)
		}
	}
	_, err := s.admin.Exec(ctx, sql, args...)
	return err
}

// joinCitus makes the template database a Citus database: the extensions on every
// node (Citus wants its own and pgvector's on each before a node joins), the password
// Citus presents to the other nodes, and the nodes. Databases cloned from the template
// on every node then hold the same Citus catalog, shards included, so each test gets
// a cluster of its own in the time of three local copies.
func (s *server) joinCitus(ctx context.Context, name string) error {
	dsns := []string{s.adminDSN}
	for _, w := range s.workers {
		dsns = append(dsns, w.adminDSN)
	}
	for _, dsn := range dsns {
		if err := execOn(ctx, dsn, name, "CREATE EXTENSION IF NOT EXISTS citus", "CREATE EXTENSION IF NOT EXISTS vector"); err != nil {
			return err
		}
	}
	coord, err := url.Parse(s.adminDSN)
	if err != nil {
		return fmt.Errorf("pgtest: citus coordinator URL: %w", err)
	}
	password, _ := coord.User.Password()
	host, port, err := net.SplitHostPort(coord.Host)
	if err != nil {
		return fmt.Errorf("pgtest: citus coordinator URL: %w", err)
	}
	stmts := []string{
		fmt.Sprintf("INSERT INTO pg_dist_authinfo (nodeid, rolename, authinfo) VALUES (0, %s, %s)",
			literal(coord.User.Username()), literal("password="+password)),
		fmt.Sprintf("SELECT citus_set_coordinator_host(%s, %s)", literal(host), port),
	}
	for _, w := range s.workers {
		wHost, wPort, err := net.SplitHostPort(hostPort(w.adminDSN))
		if err != nil {
			return fmt.Errorf("pgtest: citus worker URL: %w", err)
		}
		stmts = append(stmts, fmt.Sprintf("SELECT citus_add_node(%s, %s)", literal(wHost), wPort))
	}
	return execOn(ctx, s.adminDSN, name, stmts...)
}

// execOn runs stmts in database on the server of dsn.
func execOn(ctx context.Context, dsn, database string, stmts ...string) error {
	dbDSN, err := withDatabase(dsn, database)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	conn, err := pgx.Connect(ctx, dbDSN)
	if err != nil {
		return fmt.Errorf("pgtest: %s: %w", hostPort(dsn), err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	for _, stmt := range stmts {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("pgtest: %s: %s: %w", hostPort(dsn), stmt, err)
		}
	}
	return nil
}

// toleratedRefusals lets the template be built on Citus while Citus still refuses to
// distribute some tables: they stay local to the coordinator, every test runs, and the
// refusals are printed once per template, so a run shows what remains to be done.
func toleratedRefusals(err error) error {
	var refused *postgres.DistributionError
	if !errors.As(err, &refused) {
		return err
	}
	fmt.Fprintf(os.Stderr, "pgtest: %d tables stay local on the coordinator:\n", len(refused.Refused))
	for _, r := range refused.Refused {
		fmt.Fprintf(os.Stderr, "pgtest:   %s: %v\n", r.Table, r.Err)
		// Citus says why in the detail, which PgError's message leaves out.
		if pgErr := (*pgconn.PgError)(nil); errors.As(r.Err, &pgErr) && pgErr.Detail != "" {
			fmt.Fprintf(os.Stderr, "pgtest:     %s\n", pgErr.Detail)
		}
	}
	return nil
}

func hostPort(dsn string) string {
	if u, err := url.Parse(dsn); err == nil {
		return u.Host
	}
	return "?"
}

func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
