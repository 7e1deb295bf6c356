package manifests

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/stretchr/testify/require"
)

// parseDockerfile parses a Dockerfile with BuildKit's own parser into its stages.
func parseDockerfile(t *testing.T, file string) []instructions.Stage {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	ast, err := parser.Parse(f)
	require.NoError(t, err)
	stages, _, err := instructions.Parse(ast.AST, nil)
	require.NoError(t, err)
	require.NotEmpty(t, stages)
	return stages
}

// commands returns the stage's instructions of type T.
func commands[T instructions.Command](s instructions.Stage) []T {
	var out []T
	for _, c := range s.Commands {
		if typed, ok := c.(T); ok {
			out = append(out, typed)
		}
	}
	return out
}

// requireContextSources asserts every COPY from the build context names a file or
// directory that exists there.
func requireContextSources(t *testing.T, stages []instructions.Stage, context string) {
	t.Helper()
	for _, s := range stages {
		for _, c := range commands[*instructions.CopyCommand](s) {
			if c.From != "" {
				continue
			}
			for _, src := range c.SourcePaths {
				if src == "." {
					continue
				}
				_, err := os.Stat(filepath.Join(context, src))
				require.NoError(t, err, "stage %s copies %s from the build context", s.Name, src)
			}
		}
	}
}

// requireNonRootUser asserts the stage's last USER is neither root nor uid 0.
func requireNonRootUser(t *testing.T, s instructions.Stage) {
	t.Helper()
	users := commands[*instructions.UserCommand](s)
	require.NotEmpty(t, users, "the final stage sets no USER: it would run as root")
	user, _, _ := strings.Cut(users[len(users)-1].User, ":")
	require.NotContains(t, []string{"", "root", "0"}, user)
}

// TestServiceDockerfile: multi-stage, the model fetched and checked by
// fetch-model.sh in a build stage, a static binary, a non-root final image whose
// HEALTHCHECK runs the binary's own health command.
func TestServiceDockerfile(t *testing.T) {
	t.Parallel()
	stages := parseDockerfile(t, filepath.Join(repoRoot, "deploy", "docker", "Dockerfile"))
	require.GreaterOrEqual(t, len(stages), 3)
	requireContextSources(t, stages, repoRoot)
	final := stages[len(stages)-1]

	stageRunning := func(needle string) string {
		for _, s := range stages[:len(stages)-1] {
			for _, run := range commands[*instructions.RunCommand](s) {
				if strings.Contains(strings.Join(run.CmdLine, " "), needle) {
					return s.Name
				}
			}
		}
		return ""
	}
	model := stageRunning("fetch-model.sh")
	require.NotEmpty(t, model, "no build stage runs deploy/local/fetch-model.sh")
	build := stageRunning("go build")
	require.NotEmpty(t, build, "no build stage runs go build")
	for _, s := range stages {
		if s.Name == build {
			runs := commands[*instructions.RunCommand](s)
			line := strings.Join(runs[len(runs)-1].CmdLine, " ")
			require.Contains(t, line, "CGO_ENABLED=0", "the binary must be static")
			require.Contains(t, line, "./cmd/agent-context")
		}
	}

	copiedFrom := map[string][]string{}
	for _, c := range commands[*instructions.CopyCommand](final) {
		copiedFrom[c.From] = append(copiedFrom[c.From], c.DestPath)
	}
	require.Contains(t, copiedFrom, model, "the final image does not take the model from its stage")
	require.Contains(t, copiedFrom[build], "/usr/local/bin/agent-context")
	require.NotContains(t, copiedFrom, "", "the final image takes nothing straight from the build context")

	requireNonRootUser(t, final)
	entry := commands[*instructions.EntrypointCommand](final)
	require.Len(t, entry, 1)
	require.False(t, entry[0].PrependShell, "exec form: SIGTERM reaches the service, not a shell")
	require.Equal(t, []string{"/usr/local/bin/agent-context"}, entry[0].CmdLine)
	cmd := commands[*instructions.CmdCommand](final)
	require.Len(t, cmd, 1)
	require.Equal(t, []string{"serve"}, cmd[0].CmdLine)

	health := commands[*instructions.HealthCheckCommand](final)
	require.Len(t, health, 1)
	require.Equal(t, []string{"CMD", "/usr/local/bin/agent-context", "health"}, health[0].Health.Test,
		"the image has no shell or curl: the binary checks itself")

	env := map[string]string{}
	for _, e := range commands[*instructions.EnvCommand](final) {
		for _, kv := range e.Env {
			env[kv.Key] = kv.Value
		}
	}
	require.Equal(t, "0.0.0.0:5120", env["AGENT_CONTEXT_BIND"])
	require.NotEmpty(t, env["AGENT_CONTEXT_MODEL_DIR"])
	require.Contains(t, copiedFrom[model], env["AGENT_CONTEXT_MODEL_DIR"], "the model lands where the service looks")
	expose := commands[*instructions.ExposeCommand](final)
	require.Len(t, expose, 1)
	require.Equal(t, []string{"5120"}, expose[0].Ports)
}

// TestGatewayDockerfile: Debian's nginx with this repository's configuration, non-root,
// rendering the template on start and replacing the shell with nginx.
func TestGatewayDockerfile(t *testing.T) {
	t.Parallel()
	context := filepath.Join(repoRoot, "deploy", "gateway")
	stages := parseDockerfile(t, filepath.Join(context, "Dockerfile"))
	requireContextSources(t, stages, context)
	final := stages[len(stages)-1]
	require.True(t, strings.HasPrefix(final.BaseName, "debian:"), "the gateway runs Debian's nginx, as the tests do: %s", final.BaseName)
	requireNonRootUser(t, final)

	var copied []string
	for _, c := range commands[*instructions.CopyCommand](final) {
		copied = append(copied, c.SourcePaths...)
	}
	slices.Sort(copied)
	require.Equal(t, []string{"nginx.conf.template", "render.sh"}, copied)
	cmd := commands[*instructions.CmdCommand](final)
	require.Len(t, cmd, 1)
	line := strings.Join(cmd[0].CmdLine, " ")
	require.Contains(t, line, "render.sh")
	require.Contains(t, line, "exec nginx -e stderr -c")
	stop := commands[*instructions.StopSignalCommand](final)
	require.Len(t, stop, 1)
	require.Equal(t, "SIGQUIT", stop[0].Signal, "nginx finishes in-flight requests on SIGQUIT, not on SIGTERM")
}
