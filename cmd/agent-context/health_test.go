package main

import (
	"bytes"
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHealthCommand runs `agent-context health` the way the image's HEALTHCHECK does:
// against the service named by AGENT_CONTEXT_BIND, including a wildcard bind.
func TestHealthCommand(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	_, port, err := net.SplitHostPort(app.main.Addr())
	require.NoError(t, err)
	health := func(bind string, args ...string) (string, error) {
		var out bytes.Buffer
		err := run(context.Background(), append([]string{"health"}, args...), func(k string) string {
			return map[string]string{"AGENT_CONTEXT_BIND": bind}[k]
		}, &out)
		return out.String(), err
	}

	for _, bind := range []string{app.main.Addr(), "0.0.0.0:" + port} {
		out, err := health(bind)
		require.NoError(t, err, bind)
		require.JSONEq(t, `{"status":"ok","service":"agent-context-infra"}`, out)
		out, err = health(bind, "--ready")
		require.NoError(t, err, bind)
		require.Contains(t, out, `"status":"ok"`)
	}

	var usage usageError
	_, err = health(app.main.Addr(), "--live")
	require.ErrorAs(t, err, &usage)

	// Draining: /health still answers, /ready does not.
	app.main.server.Drain()
	_, err = health(app.main.Addr())
	require.NoError(t, err)
	_, err = health(app.main.Addr(), "--ready")
	require.ErrorContains(t, err, "503")

	// Stopped: both fail.
	require.NoError(t, app.main.Close())
	_, err = health(app.main.Addr())
	require.Error(t, err)
}
