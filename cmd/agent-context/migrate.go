package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime/debug"
	"text/tabwriter"

	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgcluster"
	"github.com/agent-context/agent-context/migrations"
)

func migrateCommand(ctx context.Context, cfg Config, action string, stdout io.Writer) (err error) {
	if action != "up" && action != "down" && action != "status" {
		// Checked before anything starts: a typo must not boot the embedded cluster.
		return usageError{fmt.Sprintf("unknown migrate action %q (want up, down or status)", action)}
	}
	dsn := cfg.DatabaseURL
	if dsn == "" {
		cluster, startErr := pgcluster.Start(ctx, pgcluster.Options{
			DataDir: filepath.Join(cfg.DataDir, "pg"),
			Logger:  cfg.NewLogger(),
		})
		if startErr != nil {
			return fmt.Errorf("embedded postgres: %w", startErr)
		}
		defer func() { err = errors.Join(err, cluster.Stop(context.WithoutCancel(ctx))) }()
		dsn = cluster.DSN()
	}
	m, err := postgres.NewMigrator(dsn)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, m.Close()) }()
	switch action {
	case "up":
		return m.Up(ctx)
	case "down":
		return m.Down(ctx)
	default: // status
		statuses, err := m.Status(ctx)
		if err != nil {
			return err
		}
		// The table is laid out in memory, so the one write to stdout is the one that can fail.
		var table bytes.Buffer
		w := tabwriter.NewWriter(&table, 0, 4, 2, ' ', 0)
		_, _ = fmt.Fprintln(w, "VERSION\tSTATE\tAPPLIED AT\tMIGRATION")
		for _, s := range statuses {
			state, at := "pending", "-"
			if s.Applied {
				state, at = "applied", s.AppliedAt
			}
			_, _ = fmt.Fprintf(w, "%d\t%s\t%s\t%s\n", s.Version, state, at, s.Name)
		}
		_ = w.Flush()
		_, err = stdout.Write(table.Bytes())
		return err
	}
}

// Set at build time with -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = ""
)

func versionCommand(stdout io.Writer) error {
	_, err := fmt.Fprintf(stdout, "agent-context %s\ncommit %s\nschema %d\n", version, revision(), migrations.Latest())
	return err
}

// revision is the commit the binary was built from: the ldflags value, else the VCS
// stamp of the build, else "unknown".
func revision() string {
	rev := commit
	if rev == "" {
		if info, ok := debug.ReadBuildInfo(); ok {
			for _, s := range info.Settings {
				if s.Key == "vcs.revision" {
					rev = s.Value
				}
			}
		}
	}
	if rev == "" {
		rev = "unknown"
	}
	return rev
}
