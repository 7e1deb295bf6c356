// Command agent-context is the system of record for what AI agents said, saw and
// remembered. `agent-context serve` runs the service; see `agent-context help`.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout)
	stop()
	if err != nil {
		var usage usageError
		fmt.Fprintln(os.Stderr, "agent-context:", err)
		if errors.As(err, &usage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

const usage = `usage: agent-context <command>

commands:
  serve                    run the service (default bind 127.0.0.1:5120)
  migrate up|down|status   apply, roll back one, or list the database migrations
  version                  print the version, commit and schema version
  health [--ready]         exit 0 when the local service answers /health (or /ready) with 200
  token keygen             write a development signing key and JWKS into <data dir>/keys
  token mint --sub S --tenant T --project P --cap C [--ttl 15m] [--user-token U]
                           print a runtime token signed with that key (token -h: details)
  knowledge serve-example [--bind ADDR] DIR
                           serve a folder of Markdown files as a knowledge provider
  a2a keygen --agent A --key-id K --out FILE
                           write an Ed25519 envelope signing key; print its peers-file entry
  a2a sign FILE (--key KEYFILE | --hmac KEYID)
                           print the envelope in FILE signed (a2a -h: details)
  export --out FILE [--conversation ID] [--include KINDS] [--url URL] [--token T]
                           export the scope into an agent-context-ndjson/v1 FILE
  import [--url URL] [--token T] FILE
                           import such a FILE into the scope (export -h: details)
  mcp stdio --url BASE [--token-file FILE]
                           speak MCP on stdin/stdout, forwarding to BASE's MCP endpoint
`

// run dispatches a command line. It is main without the process: tests call it.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{"no command given\n" + usage}
	}
	if (args[0] == "serve" || args[0] == "version") && len(args) > 1 {
		// Configuration is environment only: a flag here would be silently ignored.
		return usageError{fmt.Sprintf("%s takes no arguments (configure it with AGENT_CONTEXT_* variables), got %q\n%s",
			args[0], args[1], usage)}
	}
	switch args[0] {
	case "serve":
		cfg, err := LoadConfig(getenv)
		if err != nil {
			return err
		}
		m := NewMain(cfg)
		if err := m.Run(ctx); err != nil {
			_ = m.Close()
			return err
		}
		<-ctx.Done()
		// The first signal starts the drain; a second one cuts its delay short.
		hurry, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		return m.Shutdown(hurry)
	case "migrate":
		if len(args) != 2 {
			return usageError{"migrate needs one of up, down, status\n" + usage}
		}
		cfg, err := LoadConfig(getenv)
		if err != nil {
			return err
		}
		return migrateCommand(ctx, cfg, args[1], stdout)
	case "token":
		return tokenCommand(args[1:], getenv, stdout)
	case "knowledge":
		return knowledgeCommand(ctx, args[1:], stdout)
	case "a2a":
		return a2aCommand(args[1:], getenv, stdout)
	case "mcp":
		return mcpCommand(ctx, args[1:], os.Stdin, stdout, os.Stderr)
	case "export":
		return exportCommand(ctx, args[1:], getenv, stdout)
	case "import":
		return importCommand(ctx, args[1:], getenv, stdout)
	case "version":
		return versionCommand(stdout)
	case "health":
		return healthCommand(ctx, args[1:], getenv, stdout)
	case "help", "-h", "--help":
		_, err := io.WriteString(stdout, usage)
		return err
	default:
		return usageError{fmt.Sprintf("unknown command %q\n%s", args[0], usage)}
	}
}
