package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/agent-context/agent-context/adapters/knowledge/markdown"
)

const knowledgeUsage = `usage: agent-context knowledge serve-example [--bind 127.0.0.1:7001] DIR

  knowledge serve-example [--bind ADDR] DIR
      serve the Markdown files below DIR as a knowledge provider (the protocol of
      docs/knowledge-provider-protocol.md) with keyword scoring, until interrupted.
      Point a providers file at it:
        {"providers": [{"name": "docs", "baseUrl": "http://127.0.0.1:7001"}]}
`

// knowledgeCommand runs `agent-context knowledge ...`.
func knowledgeCommand(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{"knowledge needs serve-example\n" + knowledgeUsage}
	}
	switch args[0] {
	case "help", "-h", "--help":
		_, err := io.WriteString(stdout, knowledgeUsage)
		return err
	case "serve-example":
		return serveExample(ctx, args[1:], stdout)
	default:
		return usageError{fmt.Sprintf("unknown knowledge command %q\n%s", args[0], knowledgeUsage)}
	}
}

// serveExample serves the reference provider until ctx ends.
func serveExample(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("serve-example", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	bind := fs.String("bind", "127.0.0.1:7001", "listen address")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			_, err = io.WriteString(stdout, knowledgeUsage)
			return err
		}
		return usageError{fmt.Sprintf("knowledge serve-example: %v\n%s", err, knowledgeUsage)}
	}
	if fs.NArg() != 1 {
		return usageError{"knowledge serve-example needs exactly one folder\n" + knowledgeUsage}
	}
	provider, err := markdown.Load(fs.Arg(0))
	if err != nil {
		return err
	}
	listener, err := net.Listen("tcp", *bind)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *bind, err)
	}
	srv := &http.Server{Handler: provider, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(listener) }()
	if _, err := fmt.Fprintf(stdout, "serving %d Markdown documents from %s on http://%s\n",
		provider.Documents(), fs.Arg(0), listener.Addr()); err != nil {
		_ = srv.Close()
		return err
	}
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return err
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
