// Command pgtestrun runs a command against one throwaway Postgres cluster, so a whole
// `go test ./...` shares a single server instead of starting one per package:
//
//	go run ./adapters/postgres/pgtest/pgtestrun -- go test ./...
//
// It starts the cluster in a temp directory, sets AGENT_CONTEXT_TEST_DATABASE_URL for
// the command, passes its output through, forwards signals to it, stops and removes
// the cluster and exits with the command's exit code.
//
// With AGENT_CONTEXT_TEST_CITUS=1 it starts a Citus cluster instead (`make test/citus`):
// a coordinator and two workers, three servers on loopback with Citus preloaded, and
// sets AGENT_CONTEXT_TEST_CITUS_WORKERS beside the coordinator's URL; pgtest then builds
// every database on all three (see pgtest's package documentation). Citus must be
// installed: deploy/local/setup.sh builds it when CITUS_TARBALL names its source.
package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agent-context/agent-context/adapters/postgres/pgcluster"
	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
)

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: pgtestrun -- command [args...]")
		os.Exit(2)
	}
	code, err := run(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgtestrun:", err)
	}
	os.Exit(code)
}

func run(args []string) (int, error) {
	// Take signals from the start: during startup one aborts the run (and the cluster is
	// still stopped); afterwards they go to the child.
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(signals)

	dir, err := os.MkdirTemp("", "agent-context-pgtestrun-*")
	if err != nil {
		return 1, err
	}
	nodes := []string{"pg"}
	settings := pgtest.ServerSettings()
	if os.Getenv(pgtest.EnvCitus) == "1" {
		nodes = []string{"coordinator", "worker1", "worker2"}
		settings = pgtest.CitusServerSettings()
	}
	var clusters []*pgcluster.Cluster
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		stopped := true
		for _, c := range clusters {
			if err := c.Stop(ctx); err != nil {
				fmt.Fprintln(os.Stderr, "pgtestrun:", err) // keep the directory for its server.log
				stopped = false
			}
		}
		if !stopped {
			return
		}
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintln(os.Stderr, "pgtestrun:", err)
		}
	}()
	for _, node := range nodes {
		cluster, err := startCluster(filepath.Join(dir, node), settings, signals)
		if err != nil && len(nodes) > 1 {
			return 1, fmt.Errorf("start the Citus %s (is Citus installed? deploy/local/setup.sh builds it when CITUS_TARBALL names its source): %w", node, err)
		}
		if err != nil {
			return 1, err
		}
		clusters = append(clusters, cluster)
	}
	env := []string{pgtest.EnvDatabaseURL + "=" + clusters[0].AdminDSN()}
	if len(clusters) > 1 {
		workers, err := joinWorkers(clusters[0], clusters[1:])
		if err != nil {
			return 1, err
		}
		env = append(env, pgtest.EnvCitusWorkers+"="+strings.Join(workers, " "))
	}

	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		return 1, err
	}
	go func() {
		for sig := range signals {
			_ = cmd.Process.Signal(sig)
		}
	}()

	err = cmd.Wait()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		if status, ok := exitErr.Sys().(syscall.WaitStatus); ok && status.Signaled() {
			return 128 + int(status.Signal()), nil // the shell's convention
		}
		return exitErr.ExitCode(), nil
	}
	if err != nil {
		return 1, err
	}
	return 0, nil
}

// joinWorkers gives every worker the coordinator's superuser password, since Citus
// connects from node to node with one password per role (pgtest stores it in each
// database's pg_dist_authinfo), and returns the workers' URLs with it.
func joinWorkers(coordinator *pgcluster.Cluster, workers []*pgcluster.Cluster) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	coord, err := url.Parse(coordinator.AdminDSN())
	if err != nil {
		return nil, err
	}
	password, _ := coord.User.Password()
	urls := make([]string, len(workers))
	for i, w := range workers {
		conn, err := pgx.Connect(ctx, w.AdminDSN())
		if err != nil {
			return nil, fmt.Errorf("worker %d: %w", i+1, err)
		}
		_, err = conn.Exec(ctx, "ALTER ROLE "+pgx.Identifier{coord.User.Username()}.Sanitize()+" PASSWORD '"+strings.ReplaceAll(password, "'", "''")+"'")
		_ = conn.Close(ctx)
		if err != nil {
			return nil, fmt.Errorf("worker %d: %w", i+1, err)
		}
		u, err := url.Parse(w.AdminDSN())
		if err != nil {
			return nil, err
		}
		u.User = coord.User
		urls[i] = u.String()
	}
	return urls, nil
}

// startCluster starts one server of the run; a signal meanwhile cancels the start, or
// stops the server if it won the race.
func startCluster(dataDir string, settings map[string]string, signals <-chan os.Signal) (*pgcluster.Cluster, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	started := make(chan struct{})
	watched := make(chan bool)
	go func() {
		select {
		case <-signals:
			cancel()
			watched <- true
		case <-started:
			watched <- false
		}
	}()
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{
		DataDir:  dataDir,
		Database: "postgres",
		Settings: settings,
	})
	close(started)
	if interrupted := <-watched; interrupted && err == nil {
		stopCtx, stopCancel := context.WithTimeout(context.Background(), time.Minute)
		defer stopCancel()
		_ = cluster.Stop(stopCtx)
		return nil, errors.New("interrupted")
	}
	return cluster, err
}
