// Command pgtestrun runs a command against one throwaway Postgres cluster, so a whole
// `go test ./...` shares a single server instead of starting one per package:
//
//	go run ./adapters/postgres/pgtest/pgtestrun -- go test ./...
//
// It starts the cluster in a temp directory, sets AGENT_CONTEXT_TEST_DATABASE_URL for
// the command, passes its output through, forwards signals to it, stops and removes
// the cluster and exits with the command's exit code.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

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
	cluster, err := startCluster(filepath.Join(dir, "pg"), signals)
	if err != nil {
		_ = os.RemoveAll(dir)
		return 1, err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := cluster.Stop(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "pgtestrun:", err) // keep the directory for its server.log
			return
		}
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintln(os.Stderr, "pgtestrun:", err)
		}
	}()

	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), pgtest.EnvDatabaseURL+"="+cluster.AdminDSN())
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

// startCluster starts the shared cluster; a signal meanwhile cancels the start, or
// stops the cluster if it won the race.
func startCluster(dataDir string, signals <-chan os.Signal) (*pgcluster.Cluster, error) {
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
		Settings: pgtest.ServerSettings(),
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
