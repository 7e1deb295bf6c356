// Package pgcluster runs a private Postgres cluster for one process: the embedded
// default of `agent-context serve` and the throwaway server of the test harness.
//
// Layout of Options.DataDir (the Postgres data directory itself):
//
//	PG_VERSION, base/, ...     the cluster, created by initdb on the first Start only
//	agent-context-password     the superuser's password, mode 0600, owned by the server user
//	server.log                 everything the server writes (never our stdout)
//
// The cluster listens on 127.0.0.1 on a port picked afresh at every Start, with no Unix
// socket (so /var/run/postgresql permissions never matter) and scram-sha-256 password
// authentication for the superuser "postgres".
//
// Postgres refuses to run as root. When the process is root, the server runs as the owner
// of an existing data directory, else as the "postgres" system user, else as "nobody";
// and Start grants that user search (x) permission on any ancestor directory it could
// not otherwise traverse, logging each change.
//
// While a Cluster is running it holds an exclusive flock on the password file, so a
// second process on the same DataDir fails fast instead of stealing the cluster; and a
// postmaster found running without that lock is left over from a crashed run, which
// Start stops before starting its own.
package pgcluster
