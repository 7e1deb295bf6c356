package main

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
)

func TestServeHealthAndReady(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	var health contract.Health
	app.do(t, http.MethodGet, "/health", nil).requireOK(t, http.StatusOK, &health)
	require.Equal(t, contract.Health{Status: "ok", Service: "agent-context-infra"}, health)

	var ready contract.Ready
	app.do(t, http.MethodGet, "/ready", nil).requireOK(t, http.StatusOK, &ready)
	require.Equal(t, ready.LatestVersion, ready.SchemaVersion)
	require.Positive(t, ready.SchemaVersion)

	app.do(t, http.MethodGet, "/nope", nil).requireError(t, http.StatusNotFound, contract.CodeRouteNotFound)
}

func TestMigrateStatusWithDSN(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	var out bytes.Buffer
	env := map[string]string{"AGENT_CONTEXT_DATABASE_URL": app.dsn}
	require.NoError(t, run(context.Background(), []string{"migrate", "status"}, func(k string) string { return env[k] }, &out))
	require.Contains(t, out.String(), "00001_foundation.sql")
	require.NotContains(t, out.String(), "pending")
	require.Contains(t, out.String(), "applied")
}

func TestOpenModeRefusesPublicBind(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig(func(k string) string {
		return map[string]string{"AGENT_CONTEXT_BIND": "0.0.0.0:0", "AGENT_CONTEXT_DATABASE_URL": "postgres://unused"}[k]
	})
	require.NoError(t, err)
	err = NewMain(cfg).Run(context.Background())
	require.ErrorContains(t, err, "AGENT_CONTEXT_ALLOW_OPEN")
}

func TestConfigErrorsNameTheVariable(t *testing.T) {
	t.Parallel()
	for name, value := range map[string]string{
		"AGENT_CONTEXT_ALLOW_OPEN":        "maybe",
		"AGENT_CONTEXT_STATEMENT_TIMEOUT": "soon",
		"AGENT_CONTEXT_LOG_FORMAT":        "xml",
		"AGENT_CONTEXT_BIND":              "5120",
		"AGENT_CONTEXT_DB_MAX_CONNS":      "-1",
	} {
		_, err := LoadConfig(func(k string) string {
			if k == name {
				return value
			}
			return ""
		})
		require.ErrorContains(t, err, name)
	}
}

func TestCommandLine(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"version"}, func(string) string { return "" }, &out))
	require.Contains(t, out.String(), "schema ")
	var usage usageError
	require.ErrorAs(t, run(context.Background(), nil, func(string) string { return "" }, &out), &usage)
	require.ErrorAs(t, run(context.Background(), []string{"bogus"}, func(string) string { return "" }, &out), &usage)
	require.ErrorAs(t, run(context.Background(), []string{"migrate"}, func(string) string { return "" }, &out), &usage)
}
