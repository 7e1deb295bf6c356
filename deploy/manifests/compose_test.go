package manifests

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/require"
)

// repoRoot is the repository root, seen from this package.
const repoRoot = "../.."

// loadCompose loads docker-compose.yml with the Compose specification's own loader
// (schema validation, interpolation, normalization; no engine) in environment env.
func loadCompose(t *testing.T, env map[string]string) *types.Project {
	t.Helper()
	root, err := filepath.Abs(repoRoot)
	require.NoError(t, err)
	project, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  root,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(root, "docker-compose.yml")}},
		Environment: env,
	})
	require.NoError(t, err)
	return project
}

func service(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, err := p.GetService(name)
	require.NoError(t, err, "docker-compose.yml has no service %q", name)
	return s
}

func environment(t *testing.T, s types.ServiceConfig, name string) string {
	t.Helper()
	v, ok := s.Environment[name]
	require.True(t, ok && v != nil, "%s sets no %s", s.Name, name)
	return *v
}

// TestComposeServices: Postgres with pgvector, a one-shot migration that the service
// waits for, the service, and the gateway in front of it.
func TestComposeServices(t *testing.T) {
	t.Parallel()
	p := loadCompose(t, map[string]string{})
	names := p.ServiceNames()
	slices.Sort(names)
	require.Equal(t, []string{"agent-context", "gateway", "migrate", "postgres"}, names)

	pg := service(t, p, "postgres")
	require.Contains(t, pg.Image, "pgvector", "the service needs the vector extension")
	require.NotNil(t, pg.HealthCheck)
	require.NotEmpty(t, pg.HealthCheck.Test)

	migrate := service(t, p, "migrate")
	require.Equal(t, types.ShellCommand{"migrate", "up"}, migrate.Command)
	require.Equal(t, types.ServiceConditionHealthy, migrate.DependsOn["postgres"].Condition)
	require.Contains(t, []string{"", "no"}, migrate.Restart, "a migration runs once")

	svc := service(t, p, "agent-context")
	require.Equal(t, types.ShellCommand{"serve"}, svc.Command)
	require.Equal(t, types.ServiceConditionCompletedSuccessfully, svc.DependsOn["migrate"].Condition,
		"the service starts only after the migration succeeded")
	require.Equal(t, migrate.Image, svc.Image, "migration and service run the same build")
	require.Equal(t, environment(t, migrate, "AGENT_CONTEXT_DATABASE_URL"), environment(t, svc, "AGENT_CONTEXT_DATABASE_URL"))
	require.Contains(t, environment(t, svc, "AGENT_CONTEXT_DATABASE_URL"), "@postgres:5432/")
	for _, s := range []types.ServiceConfig{migrate, svc} {
		require.NotNil(t, s.Build, s.Name)
		require.Equal(t, "deploy/docker/Dockerfile", s.Build.Dockerfile, s.Name)
		require.FileExists(t, filepath.Join(s.Build.Context, s.Build.Dockerfile), s.Name)
	}

	gw := service(t, p, "gateway")
	require.NotNil(t, gw.Build)
	require.FileExists(t, filepath.Join(gw.Build.Context, "Dockerfile"))
	require.FileExists(t, filepath.Join(gw.Build.Context, "nginx.conf.template"))
	require.Equal(t, "agent-context:5120", environment(t, gw, "GATEWAY_UPSTREAM"), "the gateway calls the service by its name and port")
	require.Equal(t, types.ServiceConditionHealthy, gw.DependsOn["agent-context"].Condition)

	// Nothing is published beyond this machine.
	for _, s := range p.Services {
		for _, port := range s.Ports {
			require.Equal(t, "127.0.0.1", port.HostIP, "%s publishes %s on every interface", s.Name, port.Published)
		}
	}
	published := func(s types.ServiceConfig) []uint32 {
		var out []uint32
		for _, port := range s.Ports {
			out = append(out, port.Target)
		}
		return out
	}
	require.Equal(t, []uint32{5120}, published(svc))
	require.Equal(t, []uint32{8080}, published(gw))
	require.Equal(t, "8080", environment(t, gw, "GATEWAY_LISTEN"))
}

// TestComposeStopGrace: docker stops the service no sooner than its drain takes (the
// drain delay, then the drain timeout for requests and again for jobs).
func TestComposeStopGrace(t *testing.T) {
	t.Parallel()
	svc := service(t, loadCompose(t, map[string]string{}), "agent-context")
	delay, err := time.ParseDuration(environment(t, svc, "AGENT_CONTEXT_DRAIN_DELAY"))
	require.NoError(t, err)
	timeout, err := time.ParseDuration(environment(t, svc, "AGENT_CONTEXT_DRAIN_TIMEOUT"))
	require.NoError(t, err)
	require.NotNil(t, svc.StopGracePeriod)
	require.Less(t, delay+2*timeout, time.Duration(*svc.StopGracePeriod))
}

// TestComposeServiceToken: the static token is interpolated from the environment, with
// a development default.
func TestComposeServiceToken(t *testing.T) {
	t.Parallel()
	require.Equal(t, "change-me", environment(t, service(t, loadCompose(t, map[string]string{}), "agent-context"), "AGENT_CONTEXT_SERVICE_TOKEN"))
	p := loadCompose(t, map[string]string{"AGENT_CONTEXT_SERVICE_TOKEN": "from-the-shell"})
	require.Equal(t, "from-the-shell", environment(t, service(t, p, "agent-context"), "AGENT_CONTEXT_SERVICE_TOKEN"))
}

// TestComposeRefusesUnknownKeys proves the loader these tests rely on validates: a
// misspelled key is an error, not ignored.
func TestComposeRefusesUnknownKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "compose.yml")
	require.NoError(t, os.WriteFile(file, []byte("services:\n  a:\n    image: x\n    dependz_on: [b]\n"), 0o600))
	_, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  dir,
		ConfigFiles: []types.ConfigFile{{Filename: file}},
		Environment: map[string]string{},
	}, func(o *loader.Options) { o.SetProjectName("check", true) })
	require.Error(t, err)
	require.True(t, strings.Contains(err.Error(), "dependz_on"), err.Error())
}
