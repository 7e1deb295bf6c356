package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// fakeMCPService answers JSON-RPC requests as the service's MCP endpoint would, by
// method: "big" with a result of params.size bytes, "proxy" with a proxy's HTML 502,
// "cut" with an answer shorter than its Content-Length, "unreadable" with the
// service's 400 JSON-RPC error of a null id, "empty" with an empty 200; notifications
// with 202.
func fakeMCPService(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Size int `json:"size"`
			} `json:"params"`
		}
		if err := json.NewDecoder(r.Body).Decode(&msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if len(msg.ID) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		switch msg.Method {
		case "big":
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"text":"%s"}}`, msg.ID, strings.Repeat("a", msg.Params.Size))
		case "proxy":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, "<html>bad gateway</html>")
		case "cut":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "1000")
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0",`)
		case "unreadable":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"the request has no method"}}`)
		case "empty":
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// runBridge runs the bridge on the lines of stdin against base until stdin ends, and
// returns the lines of its output by their id, and (their first 200 bytes) those that
// are not JSON.
func runBridge(t *testing.T, base string, stdin string) (answers map[string]stdioAnswer, unreadable []string) {
	t.Helper()
	var stdout, stderr syncBuffer
	require.NoError(t, mcpCommand(context.Background(), []string{"stdio", "--url", base}, strings.NewReader(stdin), &stdout, &stderr))
	answers = map[string]stdioAnswer{}
	for line := range strings.Lines(stdout.String()) {
		var a stdioAnswer
		if json.Unmarshal([]byte(line), &a) != nil {
			unreadable = append(unreadable, line[:min(len(line), 200)])
			continue
		}
		answers[string(a.ID)] = a
	}
	return answers, unreadable
}

type stdioAnswer struct {
	ID     json.RawMessage `json:"id"`
	Result struct {
		Text string `json:"text"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// TestMCPStdioAnswerOfAnySize: an answer larger than any body bound passes whole, on
// one line, beside a small one.
func TestMCPStdioAnswerOfAnySize(t *testing.T) {
	t.Parallel()
	size := 40 << 20
	answers, unreadable := runBridge(t, fakeMCPService(t), fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"big","params":{"size":%d}}`+"\n"+
		`{"jsonrpc":"2.0","id":2,"method":"big","params":{"size":3}}`+"\n", size))
	require.Empty(t, unreadable)
	require.Len(t, answers, 2)
	require.Nil(t, answers["1"].Error)
	require.Len(t, answers["1"].Result.Text, size)
	require.Equal(t, "aaa", answers["2"].Result.Text)
}

// TestMCPStdioUnforwarded: every request the bridge cannot have answered gets a
// JSON-RPC error of its id; notifications get nothing.
func TestMCPStdioUnforwarded(t *testing.T) {
	t.Parallel()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	unreachable := "http://" + closed.Addr().String()
	require.NoError(t, closed.Close())
	answers, unreadable := runBridge(t, unreachable, `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`+"\n"+
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	require.Empty(t, unreadable)
	require.Len(t, answers, 1)
	require.NotNil(t, answers["7"].Error)
	require.Contains(t, answers["7"].Error.Message, "could not be reached")

	// The answer cut short ends its line, which the client skips, before the error.
	// The id comes after a params larger than the service takes (as the TypeScript
	// SDK writes it).
	tooLarge := `{"jsonrpc":"2.0","method":"tools/call","params":{"text":"` + strings.Repeat("b", contract.MaxRequestBodyBytes) + `"},"id":"late"}`
	answers, unreadable = runBridge(t, fakeMCPService(t), strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"proxy"}`,
		`{"jsonrpc":"2.0","id":2,"method":"cut"}`,
		`{"jsonrpc":"2.0","id":3,"method":"unreadable"}`,
		`{"jsonrpc":"2.0","id":4,"method":"empty"}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled"}`,
		tooLarge,
	}, "\n")+"\n")
	require.Equal(t, []string{`{"jsonrpc":"2.0",` + "\n"}, unreadable)
	require.Len(t, answers, 5, "%v", answers)
	for id, want := range map[string]string{`1`: "HTTP 502", `2`: "reading the service's answer",
		`3`: "no method", `4`: "HTTP 200", `"late"`: "larger than"} {
		require.NotNil(t, answers[id].Error, id)
		require.Contains(t, answers[id].Error.Message, want, id)
	}
}

// TestRPCIDScanner: the scanner finds the top-level id wherever it sits, fed in pieces
// of any size, past strings and nested values that hold look-alikes; without a valid
// one it finds none.
func TestRPCIDScanner(t *testing.T) {
	t.Parallel()
	for msg, want := range map[string]string{
		`{"jsonrpc":"2.0","id":12,"method":"m"}`:                                        `12`,
		`{"method":"m","params":{"id":1,"s":"\"id\":2,"},"jsonrpc":"2.0","id":"a\"}b"}`: `"a\"}b"`,
		`{ "params" : [ {"id":3} ] , "id" : -4.5 }`:                                     `-4.5`,
		`{"idx":5,"xid":6,"id":"7"}`:                                                    `"7"`,
		`{"method":"m","id":null}`:                                                      ``,
		`{"method":"m","id":{"a":1}}`:                                                   ``,
		`{"method":"m","params":{"id":8}}`:                                              ``,
		`["id",9]`:                                                                      ``,
	} {
		for _, piece := range []int{1, 3, len(msg)} {
			var scan rpcIDScanner
			for chunk := range slices.Chunk([]byte(msg), piece) {
				scan.feed(chunk)
			}
			require.Equal(t, want, string(scan.id()), "%s in pieces of %d", msg, piece)
		}
	}
}
