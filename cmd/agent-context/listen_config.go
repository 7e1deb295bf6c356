package main

import (
	"github.com/jackc/pgx/v5"
)

// loadListenConfig reads AGENT_CONTEXT_LISTEN_DATABASE_URL: the DSN of the event
// listener's own connections (the LISTEN and the hints after commits), for a pool that
// goes through PgBouncer in transaction mode, which cannot hold a LISTEN. Unset, the
// listener connects with the pool's settings.
func loadListenConfig(getenv func(string) string, cfg *Config) []string {
	cfg.ListenDatabaseURL = getenv("AGENT_CONTEXT_LISTEN_DATABASE_URL")
	if cfg.ListenDatabaseURL == "" {
		return nil
	}
	if _, err := pgx.ParseConfig(cfg.ListenDatabaseURL); err != nil {
		// The parse error may quote the password: name the variable only.
		return []string{"AGENT_CONTEXT_LISTEN_DATABASE_URL is not a valid Postgres URL or DSN"}
	}
	return nil
}
