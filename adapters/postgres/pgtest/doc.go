// Package pgtest gives every database test its own Postgres database, cloned in
// milliseconds from a template that holds the migrated schema.
//
// Use it from TestMain, then ask for a database in each test:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		t.Parallel()
//		pool := pgtest.NewDB(t)
//		...
//	}
//
// The server is found on first use, in this order:
//  1. AGENT_CONTEXT_TEST_DATABASE_URL: an existing server; the URL's database is the
//     admin database the test databases are created from. `make test` runs the whole
//     `go test ./...` under pgtestrun, which starts one cluster and sets this variable.
//  2. Local Postgres binaries (see pgcluster.FindBinDir): a throwaway cluster in a temp
//     directory with fsync off, removed when Main returns or, after a panic or a test
//     timeout, by a small watchdog process once the test binary is gone.
//  3. A Docker engine: the pgvector/pgvector:pg15 image through testcontainers.
//  4. Otherwise the test fails, saying how to install Postgres; it never skips.
//
// On Citus (`make test/citus`: pgtestrun with AGENT_CONTEXT_TEST_CITUS=1 starts a
// coordinator and two workers and names the workers in AGENT_CONTEXT_TEST_CITUS_WORKERS),
// a database cannot be cloned across the cluster, so every database, the template
// included, is made on each node under the same name: the template gets the citus and
// vector extensions on every node, the nodes are registered in it and it is migrated
// through the coordinator, which distributes its tables onto the workers' copies. A
// test's database is then a clone of the local template on each node, and a
// consistent Citus database of its own. Tables Citus refuses to distribute are
// listed on stderr and stay local on the coordinator.
//
// The template database is named agent_context_tmpl_<migrations.Hash()>, so it is built
// once per server and schema version and shared by every test process; a schema change
// simply yields a new template.
package pgtest
