package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/agent-context/agent-context/adapters/postgres/textindex"
	"github.com/agent-context/agent-context/runtime"
)

// PackText implements memory.ProjectionStore. In one transaction, when the scope is
// due, under its pack lock (taken without waiting: a scope another pack or a deletion
// holds is skipped), it moves up to limit pending postings into their terms' blocks, filling
// each term's last block before it starts another, and removes up to limit dropped
// postings from the blocks that hold them. It returns how many postings it moved or
// removed.
func (s *ProjectionStore) PackText(ctx context.Context, scope runtime.Scope, limit, over int) (int, error) {
	done := 0
	err := inTx(ctx, s.db, func(tx pgx.Tx) error {
		var locked bool
		if err := tx.QueryRow(ctx, `
			SELECT CASE WHEN (SELECT count(*) FROM (SELECT 1 FROM entry_text_postings
			                                        WHERE tenant_id = $1 AND project_id = $2 LIMIT $3::bigint + 1) p) > $3
			                 OR EXISTS (SELECT 1 FROM entry_text_dropped WHERE tenant_id = $1 AND project_id = $2)
			            THEN pg_try_advisory_xact_lock(entry_text_pack_lock($1, $2)) ELSE false END`,
			scope.TenantID, scope.ProjectID, over).Scan(&locked); err != nil || !locked {
			return translate(err)
		}
		moved, err := takePending(ctx, tx, scope, limit)
		if err != nil {
			return err
		}
		dropped, err := takeDropped(ctx, tx, scope, limit)
		if err != nil {
			return err
		}
		blocks, err := touchedBlocks(ctx, tx, scope, moved, dropped)
		if err != nil {
			return err
		}
		done = len(dropped)
		for _, ps := range moved {
			done += len(ps)
		}
		return writeBlocks(ctx, tx, scope, textindex.PackBlocks(blocks, moved, dropped))
	})
	return done, err
}

// removeDropped removes up to limit of the scope's dropped postings from the blocks
// that hold them, under the scope's pack lock (waited for: a deletion has time, and
// must not report done while a block still holds a deleted document's terms). It
// returns how many it removed.
func removeDropped(ctx context.Context, tx pgx.Tx, scope runtime.Scope, limit int) (int, error) {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(entry_text_pack_lock($1, $2))`, scope.TenantID, scope.ProjectID); err != nil {
		return 0, translate(err)
	}
	dropped, err := takeDropped(ctx, tx, scope, limit)
	if err != nil || len(dropped) == 0 {
		return 0, err
	}
	blocks, err := touchedBlocks(ctx, tx, scope, nil, dropped)
	if err != nil {
		return 0, err
	}
	removed := 0
	for _, ords := range dropped {
		removed += len(ords)
	}
	return removed, writeBlocks(ctx, tx, scope, textindex.PackBlocks(blocks, nil, dropped))
}

// takePending deletes up to limit of the scope's pending postings and returns them by
// term, sorted by ordinal.
func takePending(ctx context.Context, tx pgx.Tx, scope runtime.Scope, limit int) (map[string][]textindex.Posting, error) {
	rows, err := tx.Query(ctx, `
		DELETE FROM entry_text_postings p
		USING (SELECT term, ord FROM entry_text_postings
		       WHERE tenant_id = $1 AND project_id = $2 ORDER BY term, ord LIMIT $3) x
		WHERE p.tenant_id = $1 AND p.project_id = $2 AND p.term = x.term AND p.ord = x.ord
		RETURNING p.term, p.ord, p.tf, p.length, p.created_at_ms`, scope.TenantID, scope.ProjectID, limit)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	out := map[string][]textindex.Posting{}
	for rows.Next() {
		var term string
		var p textindex.Posting
		if err := rows.Scan(&term, &p.Ord, &p.TF, &p.Length, &p.Created); err != nil {
			return nil, translate(err)
		}
		out[term] = append(out[term], p)
	}
	for _, ps := range out {
		slices.SortFunc(ps, textindex.ByOrd)
	}
	return out, translate(rows.Err())
}

// takeDropped deletes up to limit of the scope's dropped postings and returns their
// ordinals by term.
func takeDropped(ctx context.Context, tx pgx.Tx, scope runtime.Scope, limit int) (map[string][]int64, error) {
	rows, err := tx.Query(ctx, `
		DELETE FROM entry_text_dropped d
		USING (SELECT term, ord FROM entry_text_dropped
		       WHERE tenant_id = $1 AND project_id = $2 ORDER BY term, ord LIMIT $3) x
		WHERE d.tenant_id = $1 AND d.project_id = $2 AND d.term = x.term AND d.ord = x.ord
		RETURNING d.term, d.ord`, scope.TenantID, scope.ProjectID, limit)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	out := map[string][]int64{}
	for rows.Next() {
		var term string
		var ord int64
		if err := rows.Scan(&term, &ord); err != nil {
			return nil, translate(err)
		}
		out[term] = append(out[term], ord)
	}
	return out, translate(rows.Err())
}

// touchedBlocks reads the blocks a pack may rewrite: the last block of each term with
// moved postings (its postings only when it has room: a full one is read for its
// number), and every block whose ordinals span a dropped one.
func touchedBlocks(ctx context.Context, tx pgx.Tx, scope runtime.Scope, moved map[string][]textindex.Posting, dropped map[string][]int64) ([]textindex.Block, error) {
	var movedTerms, droppedTerms []string
	var droppedOrds []int64
	for term := range moved {
		movedTerms = append(movedTerms, term)
	}
	for term, ords := range dropped {
		for _, o := range ords {
			droppedTerms, droppedOrds = append(droppedTerms, term), append(droppedOrds, o)
		}
	}
	rows, err := tx.Query(ctx, `
		SELECT b.term, b.block, CASE WHEN b.postings < $6 THEN b.data END FROM unnest($3::text[]) AS t(term)
		CROSS JOIN LATERAL (
		    SELECT b.term, b.block, b.postings, b.data FROM entry_text_blocks b
		    WHERE b.tenant_id = $1 AND b.project_id = $2 AND b.term = t.term COLLATE "C"
		    ORDER BY b.block DESC LIMIT 1) b
		UNION ALL
		SELECT DISTINCT b.term, b.block, b.data FROM unnest($4::text[], $5::bigint[]) AS d(term, ord)
		JOIN entry_text_blocks b ON b.tenant_id = $1 AND b.project_id = $2 AND b.term = d.term COLLATE "C"
		  AND d.ord BETWEEN b.first_ord AND b.last_ord`,
		scope.TenantID, scope.ProjectID, movedTerms, droppedTerms, droppedOrds, textindex.BlockPostings)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	type key struct {
		term  string
		block int32
	}
	seen := map[key]int{}
	var out []textindex.Block
	for rows.Next() {
		var b textindex.Block
		var data []byte
		if err := rows.Scan(&b.Term, &b.Number, &data); err != nil {
			return nil, translate(err)
		}
		b.Full = data == nil
		if b.Postings, err = textindex.DecodeBlock(nil, data); err != nil {
			return nil, fmt.Errorf("term %q block %d of %s/%s: %w", b.Term, b.Number, scope.TenantID, scope.ProjectID, err)
		}
		k := key{b.Term, b.Number}
		if i, ok := seen[k]; ok {
			if !b.Full {
				out[i] = b
			}
			continue
		}
		seen[k] = len(out)
		out = append(out, b)
	}
	return out, translate(rows.Err())
}

// writeBlocks stores the blocks a pack wrote, and deletes those it emptied.
func writeBlocks(ctx context.Context, tx pgx.Tx, scope runtime.Scope, blocks []textindex.Block) error {
	var terms, goneTerms []string
	var numbers, goneNumbers, counts []int32
	var firsts, lasts []int64
	var data [][]byte
	for _, b := range blocks {
		if len(b.Postings) == 0 {
			goneTerms, goneNumbers = append(goneTerms, b.Term), append(goneNumbers, b.Number)
			continue
		}
		terms, numbers, counts = append(terms, b.Term), append(numbers, b.Number), append(counts, int32(len(b.Postings)))
		firsts, lasts = append(firsts, b.Postings[0].Ord), append(lasts, b.Postings[len(b.Postings)-1].Ord)
		data = append(data, textindex.EncodeBlock(b.Postings))
	}
	_, err := tx.Exec(ctx, `
		WITH gone AS (
		    DELETE FROM entry_text_blocks b USING unnest($3::text[], $4::int[]) AS g(term, block)
		    WHERE b.tenant_id = $1 AND b.project_id = $2 AND b.term = g.term COLLATE "C" AND b.block = g.block
		)
		INSERT INTO entry_text_blocks (tenant_id, project_id, term, block, first_ord, last_ord, postings, data)
		SELECT $1, $2, w.term, w.block, w.first_ord, w.last_ord, w.postings, w.data
		FROM unnest($5::text[], $6::int[], $7::bigint[], $8::bigint[], $9::int[], $10::bytea[])
		    AS w(term, block, first_ord, last_ord, postings, data)
		ON CONFLICT (tenant_id, project_id, term, block) DO UPDATE
		SET first_ord = excluded.first_ord, last_ord = excluded.last_ord, postings = excluded.postings, data = excluded.data`,
		scope.TenantID, scope.ProjectID, goneTerms, goneNumbers, terms, numbers, firsts, lasts, counts, data)
	return translate(err)
}

// PendingTextScopes implements memory.ProjectionStore: a loose index scan of the
// pending postings' and the dropped postings' primary keys, at most limit scopes each
// (on Citus, every shard's distinct scopes).
func (s *ProjectionStore) PendingTextScopes(ctx context.Context, after *runtime.Scope, limit, over int) ([]runtime.Scope, *runtime.Scope, error) {
	walk := func(table string) string {
		return `(` + distinctScopes(table) + ` SELECT tenant_id, project_id FROM scopes LIMIT $3)`
	}
	const due = `
		SELECT s.tenant_id, s.project_id,
		       (SELECT count(*) FROM (SELECT 1 FROM entry_text_postings p
		                              WHERE p.tenant_id = s.tenant_id AND p.project_id = s.project_id
		                              LIMIT $4::bigint + 1) p) > $4
		       OR EXISTS (SELECT 1 FROM entry_text_dropped d WHERE d.tenant_id = s.tenant_id AND d.project_id = s.project_id)
		FROM (%s UNION %s) s
		ORDER BY s.tenant_id, s.project_id
		LIMIT $3`
	return scopeWalk(ctx, s.db, after, scopeQueries{
		postgres: fmt.Sprintf(due, walk("entry_text_postings"), walk("entry_text_dropped")),
		citus:    fmt.Sprintf(due, everyScope("entry_text_postings", ""), everyScope("entry_text_dropped", "")),
	}, limit, over)
}
