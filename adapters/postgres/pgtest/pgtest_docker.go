package pgtest

import (
	"context"
	"fmt"
	"os/exec"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
)

// dockerImage is Postgres 15 with pgvector, the versions the service supports.
const dockerImage = "pgvector/pgvector:pg15"

// dockerAvailable reports whether a Docker engine answers; an installed CLI alone is
// not enough.
func dockerAvailable(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, "docker", "info").Run() == nil
}

// startContainer runs Postgres in Docker. testcontainers' reaper removes the container
// if this process dies before teardown.
func startContainer(ctx context.Context) (string, func(), error) {
	args := []string{"postgres"}
	for name, value := range ServerSettings() {
		args = append(args, "-c", name+"="+value)
	}
	ctr, err := tcpostgres.Run(ctx, dockerImage,
		tcpostgres.WithDatabase("postgres"),
		tcpostgres.WithUsername("postgres"),
		tcpostgres.WithPassword("postgres"),
		tcpostgres.BasicWaitStrategies(),
		testcontainers.WithCmd(args...),
	)
	teardown := func() { _ = testcontainers.TerminateContainer(ctr) }
	if err != nil {
		teardown()
		return "", nil, fmt.Errorf("pgtest: start %s in Docker: %w", dockerImage, err)
	}
	dsn, err := ctr.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		teardown()
		return "", nil, fmt.Errorf("pgtest: %w", err)
	}
	return dsn, teardown, nil
}
