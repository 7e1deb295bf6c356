package a2asdk

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
)

// binary is the agent-context binary TestMain builds.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "a2asdk-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "agent-context")
	// Built in the service's own module, with its dependency versions, not this one's.
	build := exec.Command("go", "build", "-o", binary, "./cmd/agent-context")
	build.Dir = filepath.Join("..", "..")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		panic(fmt.Sprintf("build agent-context: %v", err))
	}
	defer os.RemoveAll(dir)
	pgtest.Main(m)
}

// service is a running agent-context process in runtime-token mode.
type service struct {
	t    *testing.T
	base string
	env  []string
}

// startService runs the binary on a loopback port over a fresh database, with a key
// pair from `token keygen`, and waits for the address it logs.
func startService(t *testing.T) *service {
	t.Helper()
	dataDir := t.TempDir()
	s := &service{t: t, env: append(os.Environ(),
		"AGENT_CONTEXT_DATA_DIR="+dataDir,
		"AGENT_CONTEXT_DATABASE_URL="+pgtest.NewDSN(t),
		"AGENT_CONTEXT_AUTO_MIGRATE=false",
		"AGENT_CONTEXT_BIND=127.0.0.1:0",
		"AGENT_CONTEXT_JWKS_FILE="+filepath.Join(dataDir, "keys", "jwks.json"),
		"AGENT_CONTEXT_LOG_FORMAT=json",
		// The A2A routes embed nothing: the lexical embedder needs no model files.
		"AGENT_CONTEXT_EMBEDDER=hash",
	)}
	s.command("token", "keygen")
	s.serve()
	return s
}

// replica starts a second agent-context process on the first's database and keys: a
// second replica of the same service. Its base URL is the returned service's.
func (s *service) replica() *service {
	s.t.Helper()
	r := &service{t: s.t, env: s.env}
	r.serve()
	return r
}

// serve runs the binary with s.env and waits for the address it logs.
func (s *service) serve() {
	t := s.t
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, binary, "serve")
	cmd.Env = s.env
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	// The log is read to its end, then the process waited for (Wait must follow the
	// reads); a process that stops before it serves fails the test with its log.
	addr := make(chan string, 1)
	exited := make(chan string, 1)
	go func() {
		var log strings.Builder
		lines := bufio.NewScanner(stderr)
		for lines.Scan() {
			log.Write(lines.Bytes())
			log.WriteByte('\n')
			var line struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal(lines.Bytes(), &line) == nil && line.Msg == "agent-context serving" {
				addr <- line.Addr
			}
		}
		err := cmd.Wait()
		exited <- fmt.Sprintf("%v\n%s", err, log.String())
	}()
	t.Cleanup(func() {
		cancel()
		<-exited
	})
	select {
	case a := <-addr:
		s.base = "http://" + a
	case log := <-exited:
		exited <- log
		t.Fatalf("agent-context stopped before it served: %s", log)
	case <-time.After(time.Minute):
		t.Fatal("agent-context did not start within a minute")
	}
}

// command runs a subcommand of the binary and returns its output.
func (s *service) command(args ...string) string {
	s.t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = s.env
	out, err := cmd.Output()
	require.NoError(s.t, err, "agent-context %s", strings.Join(args, " "))
	return string(out)
}

// token mints a runtime token for subject with the A2A capabilities.
func (s *service) token(subject string) string {
	s.t.Helper()
	return strings.TrimSpace(s.command("token", "mint", "--sub", subject, "--tenant", "acme", "--project", "alpha",
		"--cap", "a2a:tasks,a2a:send,a2a:read"))
}

// restUpdate moves a task to state through the REST route, as its recipient.
func (s *service) restUpdate(token, taskID, state string) {
	s.t.Helper()
	s.rest(token, "/internal/v1/a2a/tasks/update", map[string]any{"taskId": taskID, "state": state})
}

// rest posts body to a REST route of the A2A area with token and asserts 200.
func (s *service) rest(token, path string, body any) {
	s.t.Helper()
	raw, err := json.Marshal(body)
	require.NoError(s.t, err)
	req, err := http.NewRequest(http.MethodPost, s.base+path, bytes.NewReader(raw))
	require.NoError(s.t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	require.Equal(s.t, http.StatusOK, resp.StatusCode)
}
