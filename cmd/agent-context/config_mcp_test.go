package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMCPConfig: AGENT_CONTEXT_MCP_AUTHORIZATION_SERVERS is a comma-separated list of
// absolute http(s) URLs (blanks ignored, none when unset); anything else names the
// variable and the value.
func TestMCPConfig(t *testing.T) {
	t.Parallel()
	load := func(v string) (Config, error) {
		return LoadConfig(func(k string) string {
			return map[string]string{"AGENT_CONTEXT_MCP_AUTHORIZATION_SERVERS": v}[k]
		})
	}
	cfg, err := load("")
	require.NoError(t, err)
	require.Empty(t, cfg.MCPAuthorizationServers)
	cfg, err = load(" https://id.example.test , ,http://localhost:9000/realms/a ")
	require.NoError(t, err)
	require.Equal(t, []string{"https://id.example.test", "http://localhost:9000/realms/a"}, cfg.MCPAuthorizationServers)
	for _, bad := range []string{"id.example.test", "ftp://id.example.test", "https://", "https://ok.test,mailto:x"} {
		_, err := load(bad)
		require.ErrorContains(t, err, "AGENT_CONTEXT_MCP_AUTHORIZATION_SERVERS", bad)
	}
}

// TestMCPMaxBodyConfig: AGENT_CONTEXT_MCP_MAX_BODY is a number of bytes from 256 KiB to
// the routes' 32 MiB (default 4 MiB); anything else names the variable and the value.
func TestMCPMaxBodyConfig(t *testing.T) {
	t.Parallel()
	load := func(v string) (Config, error) {
		return LoadConfig(func(k string) string { return map[string]string{"AGENT_CONTEXT_MCP_MAX_BODY": v}[k] })
	}
	cfg, err := load("")
	require.NoError(t, err)
	require.EqualValues(t, 4<<20, cfg.MCPMaxBodyBytes)
	cfg, err = load("1048576")
	require.NoError(t, err)
	require.EqualValues(t, 1<<20, cfg.MCPMaxBodyBytes)
	for _, bad := range []string{"4MiB", "-1", "1024", "33554433"} {
		_, err := load(bad)
		require.ErrorContains(t, err, "AGENT_CONTEXT_MCP_MAX_BODY", bad)
		require.ErrorContains(t, err, bad)
	}
}
