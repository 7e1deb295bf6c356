package postgres_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
)

// TestEnvelopePayloadBounds: a scope keeps at most MaxEnvelopes stored payloads and
// MaxEnvelopeBytes of them; the oldest payloads go first, their records stay (a replay
// is still a duplicate), and the running totals match the table, purges included.
func TestEnvelopePayloadBounds(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	db := newDB(t, pool)
	clock := &a2aClock{}
	clock.ms.Store(a2aStartMs)
	coord := a2a.NewCoordination(a2a.Config{DB: db.A2A(), Cursors: runtime.NewCursorCodec(make([]byte, 32)), Clock: clock,
		MaxEnvelopes: 3, MaxEnvelopeBytes: 1000})
	scope := runtime.Scope{TenantID: "t", ProjectID: "p"}
	alice := runtime.Principal{Scope: scope, Subject: "alice", Capabilities: map[string]bool{contract.CapA2ASend: true}}
	ctx := context.Background()
	sent := map[string][]byte{}
	handoff := func(raw []byte) contract.MessageAck {
		t.Helper()
		ack, err := coord.Envelopes.Handoff(ctx, alice, &a2a.Handoff{Raw: raw, Decode: json.Unmarshal})
		require.NoError(t, err)
		return *ack
	}
	post := func(id string, size int) contract.MessageAck {
		t.Helper()
		clock.advance(time.Millisecond)
		raw, err := json.Marshal(map[string]any{"message_id": id, "from": "alice", "to": "bob",
			"ts": clock.Now().UTC().Format(time.RFC3339Nano), "ttl_ms": 60_000, "version": "1.0",
			"content_type": contract.ContentContextPackage, "payload": map[string]any{"n": strings.Repeat("x", size-8)}})
		require.NoError(t, err)
		sent[id] = raw
		return handoff(raw)
	}
	stored := func() []string {
		t.Helper()
		rows, err := pool.Query(ctx, `SELECT message_id FROM a2a_envelopes WHERE payload IS NOT NULL ORDER BY accepted_at_ms`)
		require.NoError(t, err)
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		var totals, actual [2]int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce((SELECT payloads FROM a2a_envelope_payloads), 0),
			coalesce((SELECT payload_bytes FROM a2a_envelope_payloads), 0),
			(SELECT count(*) FROM a2a_envelopes WHERE payload IS NOT NULL),
			(SELECT coalesce(sum(payload_bytes), 0) FROM a2a_envelopes WHERE payload IS NOT NULL)`).
			Scan(&totals[0], &totals[1], &actual[0], &actual[1]))
		require.Equal(t, actual, totals, "the running totals are the table's")
		return ids
	}

	for _, id := range []string{"e1", "e2", "e3", "e4", "e5"} {
		require.Equal(t, contract.AckAccepted, post(id, 100).Status)
	}
	require.Equal(t, []string{"e3", "e4", "e5"}, stored(), "at most 3 payloads, the oldest gone")
	var sizes []int64
	rows, err := pool.Query(ctx, `SELECT payload_bytes FROM a2a_envelopes ORDER BY accepted_at_ms`)
	require.NoError(t, err)
	sizes, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	require.Equal(t, []int64{0, 0, 100, 100, 100}, sizes, "a payload counts as the compact JSON received")
	require.Equal(t, contract.AckDuplicate, handoff(sent["e1"]).Status, "a dropped payload's record still answers a replay")
	var records int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM a2a_envelopes`).Scan(&records))
	require.Equal(t, 5, records)

	post("e6", 700) // 4 payloads: e3 goes; 900 bytes fit
	require.Equal(t, []string{"e4", "e5", "e6"}, stored())
	post("e7", 500) // e4 for the count, then e5 and e6 for the bytes
	require.Equal(t, []string{"e7"}, stored())

	// The purge takes what it deletes off the totals.
	clock.advance(8 * 24 * time.Hour)
	purged, err := db.A2A().Stores().Envelopes.PurgeEnvelopes(ctx, scope, clock.Now().UnixMilli(), clock.Now().UnixMilli(), 100)
	require.NoError(t, err)
	require.Equal(t, 7, purged)
	require.Empty(t, stored())
}
