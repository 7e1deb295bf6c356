package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
)

// envMCPStdioArgs makes this test binary run `agent-context mcp` with the arguments it
// holds (separated by newlines) instead of its tests, so that the SDK's command
// transport can start the bridge as the process a desktop client starts.
const envMCPStdioArgs = "AGENT_CONTEXT_TEST_MCP_STDIO_ARGS"

// TestMCPStdioProcess is the bridge process when envMCPStdioArgs is set (and a no-op
// otherwise).
func TestMCPStdioProcess(t *testing.T) {
	args := os.Getenv(envMCPStdioArgs)
	if args == "" {
		t.Skip("runs only as the bridge process of TestMCPStdio")
	}
	err := run(context.Background(), append([]string{"mcp"}, strings.Split(args, "\n")...), os.Getenv, os.Stdout)
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
	os.Exit(0)
}

// bridgeCommand is the command that runs `agent-context mcp args...` (this test binary).
func bridgeCommand(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestMCPStdioProcess$")
	cmd.Env = append(os.Environ(), envMCPStdioArgs+"="+strings.Join(args, "\n"))
	return cmd
}

// TestMCPStdio: the SDK's client, over its command transport, starts the stdio bridge
// and uses the tools of the real Main through it with the token of the token file;
// without a valid token every request fails with the service's code; the bridge exits
// when its stdin closes.
func TestMCPStdio(t *testing.T) {
	t.Parallel()
	app, minter := startSecuredApp(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(strings.TrimPrefix(minter.bearer(contract.AllCapabilities...), "Bearer ")+"\n"), 0o600))

	client := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "1"}, nil)
	cmd := bridgeCommand("stdio", "--url", app.base+"/", "--token-file", tokenFile)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	session, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err, "stderr: %s", stderr.String())
	require.Equal(t, contract.MCPServerName, session.InitializeResult().ServerInfo.Name)
	tools, err := session.ListTools(context.Background(), nil)
	require.NoError(t, err)
	require.Len(t, tools.Tools, 12)
	var entry contract.ContextEntry
	mcpOK(t, session, contract.ToolMemoryRemember, map[string]any{"id": "e-stdio", "content": "bridged through stdio"}, &entry)
	var recalled contract.RecallResponse
	mcpOK(t, session, contract.ToolMemoryRecall, map[string]any{"query": "bridged", "mode": "text"}, &recalled)
	require.Len(t, recalled.Results, 1)
	mcpRefused(t, session, contract.ToolMemoryGet, map[string]any{"entry_id": "e-none"}, contract.CodeNotFound)
	_, err = session.CallTool(context.Background(), &mcp.CallToolParams{Name: "no_such_tool"})
	require.Error(t, err)

	// Closing the session closes the bridge's stdin: the process ends by itself, with
	// status 0 (the transport would otherwise signal it after a grace period).
	require.NoError(t, session.Close())
	require.NotNil(t, cmd.ProcessState)
	require.True(t, cmd.ProcessState.Success(), "stderr: %s", stderr.String())

	// A token the service refuses: the initialize request fails with the service's
	// code, as a JSON-RPC error.
	require.NoError(t, os.WriteFile(tokenFile, []byte("not-a-token"), 0o600))
	bad := bridgeCommand("stdio", "--url", app.base, "--token-file", tokenFile)
	_, err = mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "1"}, nil).Connect(context.Background(),
		&mcp.CommandTransport{Command: bad}, nil)
	require.ErrorContains(t, err, contract.CodeTokenInvalid)
}

// TestMCPStdioUsage: bad command lines are usage errors.
func TestMCPStdioUsage(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	var usage usageError
	for _, args := range [][]string{{"mcp"}, {"mcp", "sse"}, {"mcp", "stdio"}, {"mcp", "stdio", "--url", "ftp://x"},
		{"mcp", "stdio", "--url", "http://127.0.0.1:1", "extra"}} {
		require.ErrorAs(t, run(context.Background(), args, func(string) string { return "" }, &out), &usage, "%v", args)
	}
	err := run(context.Background(), []string{"mcp", "stdio", "--url", "http://127.0.0.1:1", "--token-file", filepath.Join(t.TempDir(), "none")},
		func(string) string { return "" }, &out)
	require.ErrorContains(t, err, "token file")
}
