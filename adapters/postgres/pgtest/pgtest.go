package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgcluster"
	"github.com/agent-context/agent-context/migrations"
)

// EnvDatabaseURL names the variable that points the tests at an existing server.
const EnvDatabaseURL = "AGENT_CONTEXT_TEST_DATABASE_URL"

// ServerSettings returns the settings of throwaway test clusters: durability off, since
// the data dies with the run, and room for the pools of many parallel tests.
func ServerSettings() map[string]string {
	return map[string]string{
		"fsync":              "off",
		"synchronous_commit": "off",
		"full_page_writes":   "off",
		"max_connections":    "300",
	}
}

// server is the Postgres this test process uses, provisioned on the first NewDB.
type server struct {
	adminDSN string
	admin    *pgxpool.Pool
	template string
	teardown func()   // stops what provisioning started; nil for an external server
	workers  []worker // the Citus workers, when the server is a Citus coordinator
}

var (
	mu     sync.Mutex
	inMain bool
	srv    *server
	srvErr error
)

// Main runs the package's tests with pgtest available and tears the server down
// afterwards; call it from TestMain. The server is provisioned on the first NewDB, so a
// run that selects no database test starts nothing.
func Main(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	mu.Lock()
	inMain = true
	mu.Unlock()

	code := m.Run()

	mu.Lock()
	defer mu.Unlock()
	if srv != nil {
		srv.admin.Close()
		for _, w := range srv.workers {
			w.admin.Close()
		}
		if srv.teardown != nil {
			srv.teardown()
		}
	}
	return code
}

// NewDB returns a pool on a fresh database cloned from the migrated template. The
// pool is closed and the database dropped when tb ends.
func NewDB(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	dsn := NewDSN(tb)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := postgres.NewPool(ctx, dsn, postgres.PoolOptions{MaxConns: 4, ApplicationName: "pgtest"})
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	// Registered after NewDSN's cleanup, so it runs before the database is dropped.
	tb.Cleanup(func() {
		closed := make(chan struct{})
		go func() { pool.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			// pool.Close waits for every acquired connection; don't hang the run on a leak.
			tb.Errorf("pgtest: the pool still has connections in use 10s after the test ended: a conn, rows or tx was not released")
		}
	})
	return pool
}

// NewDSN creates a fresh database cloned from the migrated template and returns its
// connection URL, for tests that start the real server on it. The database is dropped
// (disconnecting any remaining sessions) when tb ends.
func NewDSN(tb testing.TB) string {
	tb.Helper()
	s := provisioned(tb)
	name := "agent_context_test_" + randomHex(8)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.createDatabase(ctx, name); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.execEverywhere(ctx, "DROP DATABASE IF EXISTS "+ident(name)+" WITH (FORCE)"); err != nil {
			tb.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	dsn, err := withDatabase(s.adminDSN, name)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	return dsn
}

// NewPlainDSN is NewDSN for tests of the migrations' history: on plain Postgres it is
// NewDSN; on a Citus cluster it is a database on the coordinator alone, without Citus,
// migrated the way plain Postgres is. Migrations before 00033 kept derived data with
// triggers, which Citus refuses on distributed tables, so rolling a distributed
// database back past 00033 is not a path a Citus deployment has: a database joins a
// cluster at the latest version.
func NewPlainDSN(tb testing.TB) string {
	tb.Helper()
	s := provisioned(tb)
	if !s.citus() {
		return NewDSN(tb)
	}
	name := "agent_context_plain_" + randomHex(8)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := s.admin.Exec(ctx, "CREATE DATABASE "+ident(name)); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := s.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(name)+" WITH (FORCE)"); err != nil {
			tb.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	dsn, err := withDatabase(s.adminDSN, name)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	if err := postgres.Migrate(ctx, dsn); err != nil {
		tb.Fatalf("pgtest: migrate %s: %v", name, err)
	}
	return dsn
}

// provisioned returns the server, provisioning it on first use. Parallel tests wait on
// the lock while the first one provisions; a failure fails every test that asks.
func provisioned(tb testing.TB) *server {
	tb.Helper()
	mu.Lock()
	defer mu.Unlock()
	if !inMain {
		tb.Fatal("pgtest: call pgtest.Main(m) from TestMain in this package")
	}
	if srv == nil && srvErr == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		srv, srvErr = provision(ctx)
	}
	if srvErr != nil {
		tb.Fatal(srvErr)
	}
	return srv
}

func provision(ctx context.Context) (*server, error) {
	s := &server{}
	var err error
	switch {
	case os.Getenv(EnvDatabaseURL) != "":
		s.adminDSN = os.Getenv(EnvDatabaseURL)
	case hasLocalPostgres():
		s.adminDSN, s.teardown, err = startCluster(ctx)
	case dockerAvailable(ctx):
		s.adminDSN, s.teardown, err = startContainer(ctx)
	default:
		return nil, errors.New("pgtest: no Postgres to test against: run deploy/local/setup.sh " +
			"(installs Postgres 15 and pgvector), or set " + EnvDatabaseURL + " to a server with pgvector, " +
			"or start a Docker engine")
	}
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*server, error) {
		if s.admin != nil {
			s.admin.Close()
		}
		for _, w := range s.workers {
			w.admin.Close()
		}
		if s.teardown != nil {
			s.teardown()
		}
		return nil, err
	}
	if s.admin, err = postgres.NewPool(ctx, s.adminDSN, postgres.PoolOptions{MaxConns: 4, ApplicationName: "pgtest-admin"}); err != nil {
		return fail(fmt.Errorf("pgtest: %w", err))
	}
	if err := s.connectWorkers(ctx); err != nil {
		return fail(err)
	}
	if s.template, err = s.ensureTemplate(ctx); err != nil {
		return fail(err)
	}
	return s, nil
}

func hasLocalPostgres() bool {
	_, err := pgcluster.FindBinDir()
	return err == nil
}

// startCluster starts a throwaway cluster in a temp directory. A watchdog process
// removes it if this process dies before teardown (a panic or -timeout skips TestMain's
// return), so no postmaster outlives the run.
func startCluster(ctx context.Context) (string, func(), error) {
	dir, err := os.MkdirTemp("", "agent-context-pgtest-*")
	if err != nil {
		return "", nil, fmt.Errorf("pgtest: %w", err)
	}
	dataDir := filepath.Join(dir, "pg")
	c, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: dataDir, Database: "postgres", Settings: ServerSettings()})
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, fmt.Errorf("pgtest: start a local Postgres: %w", err)
	}
	watchdog := startWatchdog(dataDir, dir)
	teardown := func() {
		if watchdog != nil {
			_ = syscall.Kill(-watchdog.Process.Pid, syscall.SIGKILL)
			_ = watchdog.Wait()
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.Stop(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
			return // leave the directory for a look at server.log
		}
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		}
	}
	return c.AdminDSN(), teardown, nil
}

const watchdogScript = `while kill -0 "$1" 2>/dev/null; do sleep 1; done
pid=$(head -n 1 "$2/postmaster.pid" 2>/dev/null) && kill -QUIT "$pid" 2>/dev/null
while [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
rm -rf "$3"`

// startWatchdog returns nil when the shell cannot start; cleanup then rests on Main.
func startWatchdog(dataDir, dir string) *exec.Cmd {
	cmd := exec.Command("/bin/sh", "-c", watchdogScript, "pgtest-watchdog", strconv.Itoa(os.Getpid()), dataDir, dir)
	// Its own process group, so a Ctrl-C that kills the tests leaves it to clean up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil
	}
	return cmd
}

// ensureTemplate builds the migrated template once per server and schema. Parallel
// test processes serialize on an advisory lock; a database by that name not yet marked
// as a template is a build that died midway, and is rebuilt. On Citus the template is
// made on every node, joined into a Citus database and migrated (which distributes its
// tables) through the coordinator; the coordinator's copy is marked a template last.
func (s *server) ensureTemplate(ctx context.Context) (string, error) {
	name := "agent_context_tmpl_" + migrations.Hash()
	if ready, err := s.templateReady(ctx, name); err != nil || ready {
		return name, err
	}
	conn, err := s.admin.Acquire(ctx)
	if err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	defer conn.Release()
	const lockKey = 0x61676374786d706c // "agctxmpl"
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey); err != nil {
		return "", fmt.Errorf("pgtest: lock template build: %w", err)
	}
	// An unlock can only fail on a broken connection, which the pool drops on Release:
	// the lock ends with its session.
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", lockKey) }()

	if ready, err := s.templateReady(ctx, name); err != nil || ready {
		return name, err
	}
	for _, sql := range []string{
		"DROP DATABASE IF EXISTS " + ident(name) + " WITH (FORCE)",
		"CREATE DATABASE " + ident(name),
	} {
		if err := s.execEverywhere(ctx, sql); err != nil {
			return "", fmt.Errorf("pgtest: template %s: %w", name, err)
		}
	}
	if s.citus() {
		if err := s.joinCitus(ctx, name); err != nil {
			return "", err
		}
	}
	dsn, err := withDatabase(s.adminDSN, name)
	if err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	err = postgres.Migrate(ctx, dsn)
	if s.citus() {
		err = toleratedRefusals(err)
	}
	if err != nil {
		return "", fmt.Errorf("pgtest: migrate template %s: %w", name, err)
	}
	// Cloning fails while anyone is connected to the template; goose's backends may
	// still be exiting (and on Citus its maintenance daemon and the coordinator's
	// connections hold every node's copy), and closing connections keeps them out.
	err = s.execEverywhere(ctx, "ALTER DATABASE "+ident(name)+" WITH ALLOW_CONNECTIONS false")
	if err == nil {
		err = s.execEverywhere(ctx, "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE datname = $1", name)
	}
	if err == nil {
		err = s.execEverywhere(ctx, "ALTER DATABASE "+ident(name)+" WITH IS_TEMPLATE true")
	}
	if err != nil {
		return "", fmt.Errorf("pgtest: template %s: %w", name, err)
	}
	return name, nil
}

func (s *server) templateReady(ctx context.Context, name string) (bool, error) {
	var ready bool
	err := s.admin.QueryRow(ctx, "SELECT datistemplate FROM pg_database WHERE datname = $1", name).Scan(&ready)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("pgtest: look up template: %w", err)
	}
	return ready, nil
}

// createDatabase clones the template, on Citus on every node. Postgres refuses while
// another session is connected to the template ("source database is being accessed by
// other users", 55006), which can briefly happen; retry that.
func (s *server) createDatabase(ctx context.Context, name string) error {
	pools := []*pgxpool.Pool{}
	for _, w := range s.workers {
		pools = append(pools, w.admin)
	}
	for _, pool := range append(pools, s.admin) {
		if err := s.cloneTemplate(ctx, pool, name); err != nil {
			return err
		}
	}
	return nil
}

func (s *server) cloneTemplate(ctx context.Context, pool *pgxpool.Pool, name string) error {
	sql := "CREATE DATABASE " + ident(name) + " TEMPLATE " + ident(s.template)
	for delay := 10 * time.Millisecond; ; delay *= 2 {
		_, err := pool.Exec(ctx, sql)
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" || delay > 2*time.Second {
			if err != nil {
				return fmt.Errorf("create database %s: %w", name, err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("create database %s: %w", name, err)
		case <-time.After(delay):
		}
	}
}

// withDatabase points dsn, a URL or keyword/value string, at database.
func withDatabase(dsn, database string) (string, error) {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path, u.RawPath = "/"+database, ""
		return u.String(), nil
	}
	if _, err := pgconn.ParseConfig(dsn); err != nil {
		return "", err
	}
	return dsn + " dbname=" + database, nil // a later keyword overrides an earlier one
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
