package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/agent-context/agent-context/runtime"
)

// The text index of a scope's entries (docs/entries.md, "The text half") is kept by
// the statements that write context_entries, in their transaction, not by triggers
// (Citus distributes no table with triggers): every store that inserts, updates or
// deletes entries hands what it changed to a textChange, whose apply writes the
// statistics and postings as triggers on the table did until migration 00033.
//
// The BM25 statistics (migration 00018) count, per scope, the active entries and
// their total length (entry_text_stats), and per term the active entries holding it
// (entry_text_terms), in 16 shards, one per transaction (its ID modulo 16), so that
// concurrent writers of one scope seldom wait for each other; a transaction locks its
// shard's scope row before any term row. A statement that decrements terms then takes
// the scope's terms lock and removes the rows of a term left at zero (migration
// 00032): a deleted entry's rare words do not stay in the vocabulary.
//
// The postings (migration 00029) are keyed by the entry's ordinal, text_ord, given
// when it is stored and again whenever its document, length or creation time
// changes: a document that goes loses its pending postings, and its packed ones are
// listed as dropped for the next pack. Whether a posting is still pending is read
// after the scope's pack lock is taken (shared here, exclusive in a pack), so that a
// pack moving it into a block at the same time cannot leave it there unlisted.

// entryText is what the text index takes from an entry's row: whether it is active
// (counted in the statistics), its document and length, and the ordinal and creation
// time its postings carry.
type entryText struct {
	active  bool
	doc     pgtype.TSVector
	length  int32
	ord     int64
	created int64
}

// textChange collects the text index's share of a statement over a scope's entries:
// the documents counted in (+1) or out (−1) of the statistics, the postings of the
// documents that went (by their ordinals) and of those that came.
type textChange struct {
	signs     []int32
	docs      []pgtype.TSVector
	lengths   []int32
	decrement bool

	goneOrds []int64
	goneDocs []pgtype.TSVector

	cameOrds    []int64
	cameDocs    []pgtype.TSVector
	cameLengths []int32
	cameCreated []int64
}

func (c *textChange) count(sign int32, e *entryText) {
	c.signs, c.docs, c.lengths = append(c.signs, sign), append(c.docs, e.doc), append(c.lengths, e.length)
	c.decrement = c.decrement || sign < 0
}

func (c *textChange) gone(e *entryText) {
	c.goneOrds, c.goneDocs = append(c.goneOrds, e.ord), append(c.goneDocs, e.doc)
}

func (c *textChange) came(e *entryText) {
	c.cameOrds, c.cameDocs = append(c.cameOrds, e.ord), append(c.cameDocs, e.doc)
	c.cameLengths, c.cameCreated = append(c.cameLengths, e.length), append(c.cameCreated, e.created)
}

// inserted adds an entry the statement inserted: its postings, and its count if active.
func (c *textChange) inserted(e *entryText) {
	if e.active {
		c.count(1, e)
	}
	c.came(e)
}

// deleted adds an entry the statement deleted: its postings go, and its count if it
// was active.
func (c *textChange) deleted(e *entryText) {
	if e.active {
		c.count(-1, e)
	}
	c.gone(e)
}

// updated adds an entry the statement updated from old to new. The statistics change
// only where it changed whether the entry is active, or its document (docChanged);
// the postings only where it took a new ordinal.
func (c *textChange) updated(old, new *entryText, docChanged bool) {
	if old.active && (!new.active || docChanged) {
		c.count(-1, old)
	}
	if new.active && (!old.active || docChanged) {
		c.count(1, new)
	}
	if old.ord != new.ord {
		c.gone(old)
		c.came(new)
	}
}

// Each statement below takes the scope as $1 and $2. A document's terms are its
// lexemes without the scope's tag (the first 13 characters).
const (
	// textPackLockSQL takes the scope's pack lock, shared.
	textPackLockSQL = `SELECT pg_advisory_xact_lock_shared(entry_text_pack_lock($1, $2))`
	// textDroppedSQL lists the packed postings of the documents that went ($3
	// ordinals, $4 documents): those not pending any more.
	textDroppedSQL = `
		INSERT INTO entry_text_dropped (tenant_id, project_id, term, ord)
		SELECT $1, $2, substr(l.lexeme, 14), o.ord
		FROM unnest($3::bigint[], $4::tsvector[]) AS o(ord, search)
		CROSS JOIN LATERAL unnest(o.search) AS l(lexeme, positions, weights)
		WHERE NOT EXISTS (SELECT 1 FROM entry_text_postings p
		                  WHERE p.tenant_id = $1 AND p.project_id = $2
		                    AND p.term = substr(l.lexeme, 14) COLLATE "C" AND p.ord = o.ord)
		ON CONFLICT DO NOTHING`
	// textUnpendSQL deletes their pending postings.
	textUnpendSQL = `
		DELETE FROM entry_text_postings p
		USING unnest($3::bigint[], $4::tsvector[]) AS o(ord, search)
		CROSS JOIN LATERAL unnest(o.search) AS l(lexeme, positions, weights)
		WHERE p.tenant_id = $1 AND p.project_id = $2
		  AND p.term = substr(l.lexeme, 14) COLLATE "C" AND p.ord = o.ord`
	// textPendSQL writes the pending postings of the documents that came ($3
	// ordinals, $4 documents, $5 lengths, $6 creation times).
	textPendSQL = `
		INSERT INTO entry_text_postings (tenant_id, project_id, term, ord, tf, length, created_at_ms)
		SELECT $1, $2, substr(l.lexeme, 14), n.ord, coalesce(cardinality(l.positions), 0), n.length, n.created_at_ms
		FROM unnest($3::bigint[], $4::tsvector[], $5::integer[], $6::bigint[]) AS n(ord, search, length, created_at_ms)
		CROSS JOIN LATERAL unnest(n.search) AS l(lexeme, positions, weights)`
	// textCountSQL adds the documents counted in or out ($3 signs, $4 lengths) to the
	// scope's row of the transaction's shard.
	textCountSQL = `
		INSERT INTO entry_text_stats AS t (tenant_id, project_id, shard, docs, length)
		SELECT $1, $2, (txid_current() % 16)::smallint, sum(d.sign), sum(d.sign::bigint * d.length)
		FROM unnest($3::integer[], $4::integer[]) AS d(sign, length)
		HAVING count(*) > 0
		ON CONFLICT (tenant_id, project_id, shard) DO UPDATE
		SET docs = t.docs + excluded.docs, length = t.length + excluded.length`
	// textCountTermsSQL adds them ($3 signs, $4 documents) to their terms' rows of the
	// shard, in term order.
	textCountTermsSQL = `
		INSERT INTO entry_text_terms AS t (tenant_id, project_id, term, shard, docs)
		SELECT $1, $2, substr(l.lexeme, 14), (txid_current() % 16)::smallint, sum(d.sign)
		FROM unnest($3::integer[], $4::tsvector[]) AS d(sign, search)
		CROSS JOIN LATERAL unnest(d.search) AS l(lexeme, positions, weights)
		GROUP BY 3 HAVING sum(d.sign) <> 0 ORDER BY 3
		ON CONFLICT (tenant_id, project_id, term, shard) DO UPDATE SET docs = t.docs + excluded.docs`
	// textTermsLockSQL takes the scope's terms lock.
	textTermsLockSQL = `SELECT pg_advisory_xact_lock(hashtextextended($1 || '/' || $2, 7462))`
	// textZeroTermsSQL removes the decremented terms whose shards sum to zero: their
	// rows are locked (those another writer holds are skipped) and removed when every
	// row of the term was locked and the locked rows still sum to zero. A term with a
	// row locked by another writer is left to that writer: it either adds to the term
	// or, decrementing it, removes the rows once it holds the terms lock and sees this
	// transaction's rows committed. Each term's rows are read by the primary key, from
	// the decremented terms (the LATERAL subqueries): the scope is a constant here, and
	// a join would otherwise be free to walk every term of the scope.
	textZeroTermsSQL = `
		WITH decremented AS MATERIALIZED (
		    SELECT substr(l.lexeme, 14) AS term
		    FROM unnest($3::integer[], $4::tsvector[]) AS d(sign, search)
		    CROSS JOIN LATERAL unnest(d.search) AS l(lexeme, positions, weights)
		    GROUP BY 1 HAVING sum(d.sign) < 0
		), zero AS MATERIALIZED (
		    SELECT x.term, s.shards
		    FROM decremented x
		    CROSS JOIN LATERAL (SELECT sum(t.docs) AS docs, count(*) AS shards FROM entry_text_terms t
		                        WHERE t.tenant_id = $1 AND t.project_id = $2 AND t.term = x.term) s
		    WHERE s.docs = 0
		    ORDER BY x.term
		), locked AS (
		    SELECT z.term, t.docs, z.shards
		    FROM zero z
		    CROSS JOIN LATERAL (SELECT t.docs FROM entry_text_terms t
		                        WHERE t.tenant_id = $1 AND t.project_id = $2 AND t.term = z.term
		                        ORDER BY t.shard
		                        FOR UPDATE SKIP LOCKED) t
		), gone AS (
		    SELECT term FROM locked
		    GROUP BY 1 HAVING sum(docs) = 0 AND count(*) = min(shards)
		)
		DELETE FROM entry_text_terms t
		WHERE t.tenant_id = $1 AND t.project_id = $2 AND t.term = ANY(ARRAY(SELECT term FROM gone))`
)

// apply writes the change in tx, in one round trip: the postings first, then the
// statistics (the order the triggers ran in, which the locks' order relies on).
func (c *textChange) apply(ctx context.Context, tx pgx.Tx, scope runtime.Scope) error {
	b := &pgx.Batch{}
	t, p := scope.TenantID, scope.ProjectID
	if len(c.goneOrds) > 0 {
		b.Queue(textPackLockSQL, t, p)
		b.Queue(textDroppedSQL, t, p, c.goneOrds, c.goneDocs)
		b.Queue(textUnpendSQL, t, p, c.goneOrds, c.goneDocs)
	}
	if len(c.cameOrds) > 0 {
		b.Queue(textPendSQL, t, p, c.cameOrds, c.cameDocs, c.cameLengths, c.cameCreated)
	}
	if len(c.signs) > 0 {
		b.Queue(textCountSQL, t, p, c.signs, c.lengths)
		b.Queue(textCountTermsSQL, t, p, c.signs, c.docs)
		if c.decrement {
			b.Queue(textTermsLockSQL, t, p)
			b.Queue(textZeroTermsSQL, t, p, c.signs, c.docs)
		}
	}
	if b.Len() == 0 {
		return nil
	}
	return translate(tx.SendBatch(ctx, b).Close())
}
