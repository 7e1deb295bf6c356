package main

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
)

// TestEmbeddedDefault runs serve with no database URL: it creates a private cluster in
// the data dir, migrates it, serves, and on a second start reuses the same data.
func TestEmbeddedDefault(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dataDir := t.TempDir()
	start := func() *Main {
		cfg, err := LoadConfig(func(k string) string {
			return map[string]string{"AGENT_CONTEXT_DATA_DIR": dataDir, "AGENT_CONTEXT_BIND": "127.0.0.1:0", "AGENT_CONTEXT_LOG_LEVEL": "error",
				"AGENT_CONTEXT_DRAIN_DELAY": "0s", "AGENT_CONTEXT_EMBEDDER": "hash"}[k]
		})
		require.NoError(t, err)
		require.True(t, cfg.AutoMigrate, "the embedded default migrates on start")
		m := NewMain(cfg)
		require.NoError(t, m.Run(ctx))
		return m
	}

	first := start()
	app := &testApp{main: first, base: "http://" + first.Addr(), client: http.DefaultClient}
	var ready contract.Ready
	app.do(t, http.MethodGet, "/ready", nil).requireOK(t, http.StatusOK, &ready)
	require.Equal(t, ready.LatestVersion, ready.SchemaVersion)

	conn, err := pgx.Connect(ctx, first.cluster.DSN())
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE TABLE restart_marker (v text); INSERT INTO restart_marker VALUES ('kept')")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
	require.NoError(t, first.Close())

	second := start()
	conn, err = pgx.Connect(ctx, second.cluster.DSN())
	require.NoError(t, err)
	var v string
	require.NoError(t, conn.QueryRow(ctx, "SELECT v FROM restart_marker").Scan(&v))
	require.Equal(t, "kept", v)
	require.NoError(t, conn.Close(ctx))
	require.NoError(t, second.Close())

	// migrate status against the embedded default starts the same cluster on its own.
	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"migrate", "status"}, func(k string) string {
		return map[string]string{"AGENT_CONTEXT_DATA_DIR": dataDir, "AGENT_CONTEXT_LOG_LEVEL": "error"}[k]
	}, &out))
	require.Contains(t, out.String(), "00001_foundation.sql")
	require.Contains(t, out.String(), "applied")
	require.NotContains(t, out.String(), "pending")
}
