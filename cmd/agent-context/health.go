package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/agent-context/agent-context/contract"
)

// healthTimeout bounds one health probe: a container runtime runs it again on its own
// interval, so a hung service must fail the probe, not hang it.
const healthTimeout = 5 * time.Second

// healthCommand runs `agent-context health [--ready]`: it asks the service listening on
// AGENT_CONTEXT_BIND for /health (or /ready) and fails unless the answer is 200. The
// container image has no shell and no curl, so its HEALTHCHECK runs this.
func healthCommand(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	path := contract.PathHealth
	switch {
	case len(args) == 0:
	case len(args) == 1 && (args[0] == "--ready" || args[0] == "-ready"):
		path = contract.PathReady
	default:
		return usageError{fmt.Sprintf("health takes only --ready, got %q\n%s", strings.Join(args, " "), usage)}
	}
	cfg, err := LoadConfig(getenv)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	url := "http://" + probeAddr(cfg.Bind) + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	// Straight to the local listener: no proxy from the environment.
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if err != nil {
		return fmt.Errorf("health: reading %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health: %s answered %d: %s", url, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	_, err = fmt.Fprintf(stdout, "%s\n", strings.TrimSpace(string(body)))
	return err
}

// probeAddr turns a listen address into one to connect to: a wildcard host (all
// interfaces) is reached on loopback.
func probeAddr(bind string) string {
	host, port, err := net.SplitHostPort(bind)
	if err != nil {
		return bind
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return net.JoinHostPort(host, port)
}
