package postgres

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/agent-context/agent-context/runtime"
)

// posting is one term's occurrence in a document: the document's ordinal (its entry's
// text_ord), how often the document holds the term, the document's length and its
// entry's creation time.
type posting struct {
	ord     int64
	tf      int32
	length  int32
	created int64
}

// textBlockPostings is how many postings a block of entry_text_blocks holds at most
// (about 40 kB): a pack rewrites a term's last block while it has room, so a block
// bounds what one pack rewrites per term.
const textBlockPostings = 8192

// encodeBlock packs postings sorted by ordinal: per posting, the ordinal's distance
// from the one before (the first's from 0) and its tf and length as unsigned varints,
// and its creation time's distance from the one before as a signed varint.
func encodeBlock(ps []posting) []byte {
	out := make([]byte, 0, 6*len(ps))
	var ord, created int64
	for _, p := range ps {
		out = binary.AppendUvarint(out, uint64(p.ord-ord))
		out = binary.AppendUvarint(out, uint64(p.tf))
		out = binary.AppendUvarint(out, uint64(p.length))
		out = binary.AppendVarint(out, p.created-created)
		ord, created = p.ord, p.created
	}
	return out
}

var errCorruptBlock = errors.New("a block of packed postings does not decode")

// decodeBlock appends the postings of data to dst.
func decodeBlock(dst []posting, data []byte) ([]posting, error) {
	var ord, created int64
	for len(data) > 0 {
		var fields [3]uint64
		for i := range fields {
			v, n := binary.Uvarint(data)
			if n <= 0 {
				return dst, errCorruptBlock
			}
			fields[i], data = v, data[n:]
		}
		d, n := binary.Varint(data)
		if n <= 0 {
			return dst, errCorruptBlock
		}
		data = data[n:]
		ord += int64(fields[0])
		created += d
		dst = append(dst, posting{ord: ord, tf: int32(fields[1]), length: int32(fields[2]), created: created})
	}
	return dst, nil
}

func byOrd(a, b posting) int { return cmp.Compare(a.ord, b.ord) }

// textBlock is a block of a term as a pack rewrites it.
type textBlock struct {
	term     string
	block    int32
	full     bool // read for its number only: its postings are not read, nor written
	postings []posting
}

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
		return writeBlocks(ctx, tx, scope, packBlocks(blocks, moved, dropped))
	})
	return done, err
}

// takePending deletes up to limit of the scope's pending postings and returns them by
// term, sorted by ordinal.
func takePending(ctx context.Context, tx pgx.Tx, scope runtime.Scope, limit int) (map[string][]posting, error) {
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
	out := map[string][]posting{}
	for rows.Next() {
		var term string
		var p posting
		if err := rows.Scan(&term, &p.ord, &p.tf, &p.length, &p.created); err != nil {
			return nil, translate(err)
		}
		out[term] = append(out[term], p)
	}
	for _, ps := range out {
		slices.SortFunc(ps, byOrd)
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
func touchedBlocks(ctx context.Context, tx pgx.Tx, scope runtime.Scope, moved map[string][]posting, dropped map[string][]int64) ([]textBlock, error) {
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
		scope.TenantID, scope.ProjectID, movedTerms, droppedTerms, droppedOrds, textBlockPostings)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	type key struct {
		term  string
		block int32
	}
	seen := map[key]int{}
	var out []textBlock
	for rows.Next() {
		var b textBlock
		var data []byte
		if err := rows.Scan(&b.term, &b.block, &data); err != nil {
			return nil, translate(err)
		}
		b.full = data == nil
		if b.postings, err = decodeBlock(nil, data); err != nil {
			return nil, fmt.Errorf("term %q block %d of %s/%s: %w", b.term, b.block, scope.TenantID, scope.ProjectID, err)
		}
		k := key{b.term, b.block}
		if i, ok := seen[k]; ok {
			if !b.full {
				out[i] = b
			}
			continue
		}
		seen[k] = len(out)
		out = append(out, b)
	}
	return out, translate(rows.Err())
}

// packBlocks returns the blocks a pack writes: the touched blocks without the dropped
// ordinals (an emptied block is written empty, and then deleted), each term's moved
// postings merged into its last block while it has room and into new blocks after it.
// A full last block is not written unless a dropped ordinal made room in it.
func packBlocks(touched []textBlock, moved map[string][]posting, dropped map[string][]int64) []textBlock {
	last := map[string]int{} // the term's touched block of the highest number
	for i := range touched {
		b := &touched[i]
		if gone := dropped[b.term]; len(gone) > 0 && !b.full {
			set := make(map[int64]bool, len(gone))
			for _, o := range gone {
				set[o] = true
			}
			b.postings = slices.DeleteFunc(b.postings, func(p posting) bool { return set[p.ord] })
		}
		if j, ok := last[b.term]; !ok || touched[j].block < b.block {
			last[b.term] = i
		}
	}
	out := slices.DeleteFunc(slices.Clone(touched), func(b textBlock) bool { return b.full })
	for term, ps := range moved {
		next := int32(0)
		if i, ok := last[term]; ok {
			b := touched[i]
			next = b.block + 1
			if !b.full {
				room := max(textBlockPostings-len(b.postings), 0)
				merged := append(b.postings, ps[:min(room, len(ps))]...)
				slices.SortFunc(merged, byOrd)
				ps = ps[min(room, len(ps)):]
				j := slices.IndexFunc(out, func(o textBlock) bool { return o.term == term && o.block == b.block })
				out[j].postings = merged
			}
		}
		for len(ps) > 0 {
			n := min(textBlockPostings, len(ps))
			out = append(out, textBlock{term: term, block: next, postings: ps[:n]})
			ps, next = ps[n:], next+1
		}
	}
	return out
}

// writeBlocks stores the blocks a pack wrote, and deletes those it emptied.
func writeBlocks(ctx context.Context, tx pgx.Tx, scope runtime.Scope, blocks []textBlock) error {
	var terms, goneTerms []string
	var numbers, goneNumbers, counts []int32
	var firsts, lasts []int64
	var data [][]byte
	for _, b := range blocks {
		if len(b.postings) == 0 {
			goneTerms, goneNumbers = append(goneTerms, b.term), append(goneNumbers, b.block)
			continue
		}
		terms, numbers, counts = append(terms, b.term), append(numbers, b.block), append(counts, int32(len(b.postings)))
		firsts, lasts = append(firsts, b.postings[0].ord), append(lasts, b.postings[len(b.postings)-1].ord)
		data = append(data, encodeBlock(b.postings))
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
// pending postings' and the dropped postings' primary keys, at most limit scopes each.
func (s *ProjectionStore) PendingTextScopes(ctx context.Context, after *runtime.Scope, limit, over int) ([]runtime.Scope, *runtime.Scope, error) {
	walk := func(table string) string {
		return `(` + distinctScopes(table) + ` SELECT tenant_id, project_id FROM scopes LIMIT $3)`
	}
	return scopeWalk(ctx, s.db, after, `
		SELECT s.tenant_id, s.project_id,
		       (SELECT count(*) FROM (SELECT 1 FROM entry_text_postings p
		                              WHERE p.tenant_id = s.tenant_id AND p.project_id = s.project_id
		                              LIMIT $4::bigint + 1) p) > $4
		       OR EXISTS (SELECT 1 FROM entry_text_dropped d WHERE d.tenant_id = s.tenant_id AND d.project_id = s.project_id)
		FROM (`+walk("entry_text_postings")+` UNION `+walk("entry_text_dropped")+`) s
		ORDER BY s.tenant_id, s.project_id
		LIMIT $3`, limit, over)
}
