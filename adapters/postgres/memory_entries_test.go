package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/memory"
)

func newEntry(t *testing.T, id, content string, conversation *string) (contract.ContextEntry, string) {
	t.Helper()
	e := contract.ContextEntry{ID: id, Kind: "fact", Content: content, ConversationID: conversation,
		SourceRecordIDs: []string{}, Tags: []string{}, Importance: contract.DefaultEntryImportance,
		Status: contract.EntryActive, Version: 1, CreatedAtMs: 1_000, UpdatedAtMs: 1_000}
	digest, err := memory.EntryDigest(&e)
	require.NoError(t, err)
	return e, digest
}

// One create of many entries: each new ID is created once (its first occurrence), an
// ID stored before or earlier in the batch answers the stored entry and its digest, in
// the order asked; a batch that creates nothing writes nothing, not even the claim of
// a conversation it names; the BM25 statistics count each created entry once.
func TestCreateEntriesBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	db := newDB(t, pool)
	scope := runtime.Scope{TenantID: "t", ProjectID: "p"}
	conv := "conv-1"
	create := func(entries []contract.ContextEntry, digests []string) []memory.EntryWrite {
		t.Helper()
		var out []memory.EntryWrite
		require.NoError(t, db.Memory().WithinTx(ctx, func(ctx context.Context, tx memory.Stores) error {
			var err error
			out, err = tx.Entries.CreateEntries(ctx, scope, entries, digests)
			return err
		}))
		return out
	}
	count := func(query string) (n int64) {
		t.Helper()
		require.NoError(t, pool.QueryRow(ctx, query).Scan(&n))
		return n
	}

	old, oldDigest := newEntry(t, "old", "the ledger closes at midnight", nil)
	require.True(t, create([]contract.ContextEntry{old}, []string{oldDigest})[0].Created)

	a, aDigest := newEntry(t, "a", "billing retries nightly", &conv)
	a2, a2Digest := newEntry(t, "a", "another content under the same ID", nil)
	oldAgain, oldAgainDigest := newEntry(t, "old", "other words for a stored ID", nil)
	b, bDigest := newEntry(t, "b", "the runbook names the billing owner", nil)
	w := create([]contract.ContextEntry{a, a2, oldAgain, b}, []string{aDigest, a2Digest, oldAgainDigest, bDigest})
	require.Len(t, w, 4)
	require.True(t, w[0].Created)
	require.False(t, w[1].Created)
	require.Equal(t, "billing retries nightly", w[1].Stored.Content, "a later occurrence finds the first one stored")
	require.Equal(t, aDigest, w[1].StoredDigest)
	require.False(t, w[2].Created)
	require.Equal(t, old.Content, w[2].Stored.Content)
	require.Equal(t, oldDigest, w[2].StoredDigest)
	require.True(t, w[3].Created)
	require.EqualValues(t, 3, count(`SELECT count(*) FROM context_entries`))
	require.EqualValues(t, 3, count(`SELECT sum(docs) FROM entry_text_stats`), "each created entry counted once")
	require.EqualValues(t, 2, count(`SELECT sum(docs) FROM entry_text_terms WHERE term = 'bill'`))
	require.EqualValues(t, 1, count(`SELECT count(*) FROM conversations WHERE conversation_id = 'conv-1'`))

	other := "conv-2"
	c, cDigest := newEntry(t, "b", "the runbook names the billing owner", &other)
	w = create([]contract.ContextEntry{c}, []string{cDigest})
	require.False(t, w[0].Created)
	require.Equal(t, bDigest, w[0].StoredDigest)
	require.Zero(t, count(`SELECT count(*) FROM conversations WHERE conversation_id = 'conv-2'`),
		"a create that created nothing claimed nothing")

	// Many entries in one transaction cost one statement per batch, whatever the
	// transaction already wrote.
	many, digests := make([]contract.ContextEntry, 1_200), make([]string, 1_200)
	for i := range many {
		many[i], digests[i] = newEntry(t, fmt.Sprintf("m-%04d", i), fmt.Sprintf("note %d about the billing service", i), nil)
	}
	require.NoError(t, db.Memory().WithinTx(ctx, func(ctx context.Context, tx memory.Stores) error {
		for from := 0; from < len(many); from += 500 {
			to := min(from+500, len(many))
			w, err := tx.Entries.CreateEntries(ctx, scope, many[from:to], digests[from:to])
			if err != nil {
				return err
			}
			for i := range w {
				if !w[i].Created {
					return fmt.Errorf("%s was not created", many[from+i].ID)
				}
			}
		}
		return nil
	}))
	require.EqualValues(t, 1_203, count(`SELECT sum(docs) FROM entry_text_stats`))
	require.EqualValues(t, 1_202, count(`SELECT sum(docs) FROM entry_text_terms WHERE term = 'bill'`))
}

// The BM25 statistics stay a recount of the active entries through a mixed load from
// concurrent writers (each transaction writing its own shard): creations, corrections
// (a version superseded and its successor created in one transaction), expiries and
// physical deletions of whole chains. A term no active entry holds has no row left,
// whichever shards counted it.
func TestTextStatisticsMatchTheEntries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	db := newDB(t, pool)
	scope := runtime.Scope{TenantID: "t", ProjectID: "p"}
	within := func(fn func(ctx context.Context, tx memory.Stores) error) error {
		return db.Memory().WithinTx(ctx, fn)
	}
	create := func(ctx context.Context, tx memory.Stores, id, content string) error {
		e, digest := newEntry(t, id, content, nil)
		_, err := tx.Entries.CreateEntries(ctx, scope, []contract.ContextEntry{e}, []string{digest})
		return err
	}
	ended := func(id, status string, by *string) []contract.ContextEntry {
		return []contract.ContextEntry{{ID: id, Status: status, SupersededBy: by, UpdatedAtMs: 2_000}}
	}
	workers := make(chan error, 4)
	for w := range cap(workers) {
		go func() {
			workers <- func() error {
				for i := range 40 {
					id := fmt.Sprintf("w%d-%02d", w, i)
					if err := within(func(ctx context.Context, tx memory.Stores) error {
						return create(ctx, tx, id, fmt.Sprintf("ledger shard%d rare%dq%d", w, w, i))
					}); err != nil {
						return err
					}
					var err error
					switch i % 4 {
					case 1:
						next := id + "-v2"
						err = within(func(ctx context.Context, tx memory.Stores) error {
							if err := create(ctx, tx, next, fmt.Sprintf("ledger corrected fixed%dq%d", w, i)); err != nil {
								return err
							}
							return tx.Entries.UpdateStatus(ctx, scope, ended(id, contract.EntrySuperseded, &next), nil)
						})
					case 2:
						err = within(func(ctx context.Context, tx memory.Stores) error {
							return tx.Entries.UpdateStatus(ctx, scope, ended(id, contract.EntryExpired, nil), nil)
						})
					case 3:
						prev, chain := fmt.Sprintf("w%d-%02d", w, i-1), fmt.Sprintf("w%d-%02d", w, i-2)
						err = postgres.DeleteEntries(ctx, pool, scope, []string{prev, chain, chain + "-v2"})
					}
					if err != nil {
						return err
					}
				}
				return nil
			}()
		}()
	}
	for range cap(workers) {
		require.NoError(t, <-workers)
	}

	pgtest.RequireTextStatistics(t, pool, "the mixed load")
	var shards, gone int
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT count(DISTINCT shard), count(*) FILTER (WHERE term IN ('rare0q1', 'rare0q2', 'fixed0q1'))
		FROM entry_text_terms`).Scan(&shards, &gone))
	require.Greater(t, shards, 1, "the writers counted in several shards")
	require.Zero(t, gone, "the terms of expired, superseded and deleted entries have no row")
}
