package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Secret returns the server secret called name, creating it from crypto/rand on first
// use. Every replica reads the same row, so a cursor minted by one replica verifies on
// another.
func (db *DB) Secret(ctx context.Context, name string) ([]byte, error) {
	candidate := make([]byte, 32)
	if _, err := rand.Read(candidate); err != nil {
		return nil, fmt.Errorf("generate secret: %w", err)
	}
	// A replica that races another's first insert can see neither row in its statement
	// snapshot; the second attempt, with a new snapshot, sees the winner's.
	var secret []byte
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		err = db.Pool.QueryRow(ctx, `
		WITH ins AS (
			INSERT INTO server_secrets (name, secret) VALUES ($1, $2)
			ON CONFLICT (name) DO NOTHING
			RETURNING secret
		)
		SELECT secret FROM ins
		UNION ALL
		SELECT secret FROM server_secrets WHERE name = $1
		LIMIT 1`, name, candidate).Scan(&secret)
		if !errors.Is(err, pgx.ErrNoRows) {
			break
		}
	}
	if err != nil {
		return nil, translate(err)
	}
	return secret, nil
}
