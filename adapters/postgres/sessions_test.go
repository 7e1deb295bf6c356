package postgres_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/session"
)

// sessionClock is a clock a test moves.
type sessionClock struct{ now time.Time }

func (c *sessionClock) Now() time.Time { return c.now }

func staticPrincipal(subject string) runtime.Principal {
	return runtime.Principal{Scope: runtime.Scope{TenantID: "t1", ProjectID: "p1"}, Subject: subject,
		Capabilities: map[string]bool{contract.CapContextRead: true}, TrustedHeaders: true}
}

// insertExpiredSessions writes n sessions of n other principals that expire at
// expires, directly: a sign-in each would take long.
func insertExpiredSessions(t *testing.T, pool *pgxpool.Pool, expires time.Time, n int) {
	t.Helper()
	_, err := pool.Exec(t.Context(), `
	INSERT INTO console_sessions (id_hash, tenant_id, project_id, subject, capabilities, csrf_token, created_at, expires_at)
	SELECT sha256(i::text::bytea), 't1', 'p1', 'agent-' || i, '{}', 'csrf', $1, $1
	FROM generate_series(1, $2) AS i`, expires, n)
	require.NoError(t, err)
}

// TestSessionsEndWithTheirStaticToken: a session of the static token resumes under
// the same token and is gone under another one (for good: its row is deleted); a
// session of open mode ends once a token is set; a runtime token's session does not
// depend on the static token.
func TestSessionsEndWithTheirStaticToken(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store := newDB(t, pgtest.NewDB(t)).Sessions()
	clock := &sessionClock{now: time.Now()}
	underA := session.NewSessions(store, clock, "token-a")
	underB := session.NewSessions(store, clock, "token-b")
	open := session.NewSessions(store, clock, "")

	static, err := underA.Start(ctx, staticPrincipal("service"), time.Time{})
	require.NoError(t, err)
	runtimeP := staticPrincipal("agent")
	runtimeP.TrustedHeaders = false
	fromJWT, err := underA.Start(ctx, runtimeP, clock.now.Add(time.Hour))
	require.NoError(t, err)
	openS, err := open.Start(ctx, staticPrincipal("service"), time.Time{})
	require.NoError(t, err)

	resumed, err := underA.Resume(ctx, static.ID)
	require.NoError(t, err)
	require.Equal(t, "service", resumed.Principal.Subject)
	_, err = underB.Resume(ctx, static.ID)
	require.Equal(t, contract.CodeNotFound, runtime.ErrorCode(err))
	_, err = underA.Resume(ctx, static.ID)
	require.Equal(t, contract.CodeNotFound, runtime.ErrorCode(err), "the row is deleted")

	_, err = underB.Resume(ctx, openS.ID)
	require.Equal(t, contract.CodeNotFound, runtime.ErrorCode(err))

	_, err = underB.Resume(ctx, fromJWT.ID)
	require.NoError(t, err)
}

// TestSessionsPerPrincipalAreBounded: the sign-in past MaxSessionsPerPrincipal ends the
// principal's oldest live session, and only it; another principal's are untouched, and
// an expired session, even a newer one, does not count.
func TestSessionsPerPrincipalAreBounded(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.NewDB(t)
	store := newDB(t, pool).Sessions()
	clock := &sessionClock{now: time.Now()}
	sessions := session.NewSessions(store, clock, "token")

	other, err := sessions.Start(ctx, staticPrincipal("someone else"), time.Time{})
	require.NoError(t, err)
	signIn := func() string {
		clock.now = clock.now.Add(time.Second)
		s, err := sessions.Start(ctx, staticPrincipal("service"), time.Time{})
		require.NoError(t, err)
		return s.ID
	}
	var ids []string
	for range session.MaxSessionsPerPrincipal - 1 {
		ids = append(ids, signIn())
	}
	// A runtime token's session of the same principal, expired at the next sign-in.
	// That sign-in's purge stops at the 100 sessions of others that expired before it.
	insertExpiredSessions(t, pool, clock.now.Add(1500*time.Millisecond), 100)
	shortLived := staticPrincipal("service")
	shortLived.TrustedHeaders = false
	clock.now = clock.now.Add(time.Second)
	_, err = sessions.Start(ctx, shortLived, clock.now.Add(time.Second))
	require.NoError(t, err)
	clock.now = clock.now.Add(time.Second)
	ids = append(ids, signIn())
	for _, id := range ids {
		_, err := sessions.Resume(ctx, id)
		require.NoError(t, err, "%d live sessions", len(ids))
	}

	ids = append(ids, signIn())
	_, err = sessions.Resume(ctx, ids[0])
	require.Equal(t, contract.CodeNotFound, runtime.ErrorCode(err), "the oldest ended")
	for _, id := range ids[1:] {
		_, err := sessions.Resume(ctx, id)
		require.NoError(t, err)
	}
	_, err = sessions.Resume(ctx, other.ID)
	require.NoError(t, err)
}

// TestSessionSweepDeletesExpiredSessions: the sweep deletes every expired session,
// more than one batch of them, and no live one.
func TestSessionSweepDeletesExpiredSessions(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.NewDB(t)
	store := newDB(t, pool).Sessions()
	clock := &sessionClock{now: time.Now()}
	sessions := session.NewSessions(store, clock, "token")
	// More than a batch.
	const expired = 1100
	insertExpiredSessions(t, pool, clock.now.Add(time.Minute), expired)
	live, err := sessions.Start(ctx, staticPrincipal("service"), time.Time{})
	require.NoError(t, err)

	clock.now = clock.now.Add(2 * time.Minute)
	deleted, err := sessions.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, expired, deleted)
	var left int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM console_sessions`).Scan(&left))
	require.Equal(t, 1, left)
	_, err = sessions.Resume(ctx, live.ID)
	require.NoError(t, err)
}
