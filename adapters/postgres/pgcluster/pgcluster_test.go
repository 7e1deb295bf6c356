package pgcluster_test

import (
	"context"
	"os"
	osexec "os/exec"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres/pgcluster"
)

var fastSettings = map[string]string{"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}

func TestFindBinDir(t *testing.T) {
	t.Parallel()

	dir, err := pgcluster.FindBinDir()
	require.NoError(t, err)
	for _, name := range []string{"postgres", "initdb", "pg_ctl"} {
		require.FileExists(t, filepath.Join(dir, name))
	}
}

// Restart keeps the port (and so the DSN) and the data; connections made before it
// are closed by it.
func TestClusterRestartKeepsTheDSN(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: filepath.Join(t.TempDir(), "pg"), Settings: fastSettings})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	dsn := c.DSN()
	exec(t, dsn, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('before restart')")
	before, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer before.Close(ctx)

	require.NoError(t, c.Restart(ctx))
	require.Equal(t, dsn, c.DSN())
	require.Error(t, before.Ping(ctx), "the restart closed the old connection")
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var v string
	require.NoError(t, conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v))
	require.Equal(t, "before restart", v)
	require.NoError(t, c.Stop(ctx))
	require.Error(t, c.Restart(ctx), "a stopped cluster does not restart")
}

func TestClusterSurvivesRestart(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	opts := pgcluster.Options{DataDir: filepath.Join(t.TempDir(), "pg"), Database: "restart_test", Settings: fastSettings}

	c, err := pgcluster.Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	exec(t, c.DSN(), "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('before restart')")
	require.NoError(t, c.Stop(ctx))
	require.NoError(t, c.Stop(ctx), "stopping twice is fine")

	info, err := os.Stat(filepath.Join(opts.DataDir, "agent-context-password"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	c2, err := pgcluster.Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c2.Stop(context.Background()) })

	conn, err := pgx.Connect(ctx, c2.DSN())
	require.NoError(t, err)
	defer conn.Close(ctx)
	var v string
	require.NoError(t, conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v))
	require.Equal(t, "before restart", v)

	var db string
	require.NoError(t, conn.QueryRow(ctx, "SELECT current_database()").Scan(&db))
	require.Equal(t, "restart_test", db)
	require.NoError(t, c2.Stop(ctx))
}

func TestSecondStartOnSameDataDirFails(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	// An existing empty directory is fine as DataDir.
	opts := pgcluster.Options{DataDir: t.TempDir(), Settings: fastSettings}

	c, err := pgcluster.Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop(context.Background()) })

	_, err = pgcluster.Start(ctx, opts)
	require.ErrorContains(t, err, "in use by another process")

	// The running cluster is untouched by the refused start.
	exec(t, c.AdminDSN(), "SELECT 1")
	require.NoError(t, c.Stop(ctx))
}

// TestLeftoverServerIsStopped simulates a crashed process: a child starts a cluster
// and exits without stopping it, leaving the postmaster running on the data directory.
func TestLeftoverServerIsStopped(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dataDir := filepath.Join(t.TempDir(), "pg")

	child := osexec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperStartAndExit$")
	child.Env = append(os.Environ(), "PGCLUSTER_HELPER_DATA_DIR="+dataDir)
	out, err := child.CombinedOutput()
	require.NoError(t, err, string(out))
	require.FileExists(t, filepath.Join(dataDir, "postmaster.pid"), "the child left its server running")

	c, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: dataDir, Settings: fastSettings})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	exec(t, c.DSN(), "SELECT 1")
	require.NoError(t, c.Stop(ctx))
	require.NoFileExists(t, filepath.Join(dataDir, "postmaster.pid"))
}

func TestHelperStartAndExit(t *testing.T) {
	dataDir := os.Getenv("PGCLUSTER_HELPER_DATA_DIR")
	if dataDir == "" {
		t.Skip("helper process for TestLeftoverServerIsStopped")
	}
	_, err := pgcluster.Start(t.Context(), pgcluster.Options{DataDir: dataDir, Settings: fastSettings})
	require.NoError(t, err)
	os.Exit(0) // no Stop: the server outlives this process, as after a crash
}

func exec(t *testing.T, dsn, sql string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(t.Context(), sql)
	require.NoError(t, err)
}
