package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver for goose
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/agent-context/agent-context/migrations"
)

// MigrationStatus is one migration and whether the database has applied it.
type MigrationStatus struct {
	Version   int64
	Name      string
	Applied   bool
	AppliedAt string
}

// Migrator applies the embedded goose migrations under a Postgres session advisory
// lock, so several replicas starting at once migrate exactly once.
type Migrator struct {
	db       *sql.DB
	provider *goose.Provider
}

// NewMigrator opens a dedicated database/sql connection for goose on dsn.
func NewMigrator(dsn string) (*Migrator, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("open migration connection: %w", err)
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("create migration lock: %w", err)
	}
	sub, err := fs.Sub(migrations.FS, ".")
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, db, sub, goose.WithSessionLocker(locker))
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("create migration provider: %w", err)
	}
	return &Migrator{db: db, provider: provider}, nil
}

// Up applies every pending migration, then, on a Citus coordinator, distributes the
// tables Citus does not know yet (Distribute).
func (m *Migrator) Up(ctx context.Context) error {
	if _, err := m.provider.Up(ctx); err != nil {
		return err
	}
	return m.Distribute(ctx)
}

// Down rolls back the most recent migration.
func (m *Migrator) Down(ctx context.Context) error {
	_, err := m.provider.Down(ctx)
	if errors.Is(err, goose.ErrNoNextVersion) {
		return nil
	}
	return err
}

// Status lists every embedded migration with its applied state.
func (m *Migrator) Status(ctx context.Context) ([]MigrationStatus, error) {
	results, err := m.provider.Status(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]MigrationStatus, 0, len(results))
	for _, r := range results {
		s := MigrationStatus{Version: r.Source.Version, Name: r.Source.Path, Applied: r.State == goose.StateApplied}
		if s.Applied {
			s.AppliedAt = r.AppliedAt.UTC().Format("2006-01-02T15:04:05Z")
		}
		out = append(out, s)
	}
	return out, nil
}

// Versions returns the database's current schema version and the newest embedded one.
func (m *Migrator) Versions(ctx context.Context) (current, latest int64, err error) {
	current, err = m.provider.GetDBVersion(ctx)
	if err != nil {
		return 0, 0, err
	}
	sources := m.provider.ListSources()
	if len(sources) > 0 {
		latest = sources[len(sources)-1].Version
	}
	return current, latest, nil
}

// Close releases the migration connection.
func (m *Migrator) Close() error { return m.db.Close() }

// Migrate applies every pending migration to the database at dsn.
func Migrate(ctx context.Context, dsn string) error {
	m, err := NewMigrator(dsn)
	if err != nil {
		return err
	}
	return errors.Join(m.Up(ctx), m.Close())
}
