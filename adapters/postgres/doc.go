// Package postgres implements the runtime's ports on Postgres with pgx v5 and pgvector:
// the connection pool, transactions, error translation, migrations and the stores.
// SQL lives here and nowhere else.
package postgres
