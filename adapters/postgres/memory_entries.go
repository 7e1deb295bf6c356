package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/agent-context/agent-context/adapters/postgres/textindex"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/memory"
)

// EntryStore keeps context entries in context_entries.
type EntryStore struct {
	db DBTX
}

var _ memory.EntryStore = (*EntryStore)(nil)

// entryColumns are the columns of a contract.ContextEntry, in the order scanEntry
// reads them, qualified by the alias e.
const entryColumns = `e.entry_id, e.kind, e.content, e.conversation_id, e.source_record_ids, e.tags, e.importance,
	e.expires_at_ms, e.metadata::text, e.status, e.version, e.supersedes, e.superseded_by, e.merged_into,
	e.created_at_ms, e.updated_at_ms`

// entryRow scans rows of entryColumns (followed by extra destinations) into entries.
type entryRow struct {
	e        contract.ContextEntry
	metadata *string
}

func (r *entryRow) dest(extra ...any) []any {
	e := &r.e
	return append([]any{&e.ID, &e.Kind, &e.Content, &e.ConversationID, &e.SourceRecordIDs, &e.Tags, &e.Importance,
		&e.ExpiresAtMs, &r.metadata, &e.Status, &e.Version, &e.Supersedes, &e.SupersededBy, &e.MergedInto,
		&e.CreatedAtMs, &e.UpdatedAtMs}, extra...)
}

func (r *entryRow) entry() contract.ContextEntry {
	e := r.e
	e.Metadata = jsonValue(r.metadata)
	if e.SourceRecordIDs == nil {
		e.SourceRecordIDs = []string{}
	}
	if e.Tags == nil {
		e.Tags = []string{}
	}
	return e
}

// scopeTag is the prefix of every lexeme of a scope's entry documents: 12 hex digits
// of the SHA-256 of the scope and a colon. The full-text index of entries is on the
// documents alone, and with its lexemes qualified by the scope each posting list holds
// one scope's entries of one word, so a search costs what its scope holds, not what
// every tenant holds (an index keyed by (tenant_id, project_id, search) reads the whole
// scope's posting list for every search). Two scopes whose tags collide share posting
// lists, never results: every query also filters on tenant_id and project_id.
func scopeTag(scope runtime.Scope) string {
	sum := sha256.Sum256([]byte(scope.TenantID + "\x1f" + scope.ProjectID))
	return hex.EncodeToString(sum[:6]) + ":"
}

// entryDocument is the full-text document of an entry's content in scope and its
// length in terms: the message search's document (textindex) with its words
// stemmed and stop words left out (textindex.EnglishTerm), every lexeme prefixed by scopeTag.
func entryDocument(scope runtime.Scope, content string) (pgtype.TSVector, int) {
	b := textindex.DocumentBuilder{English: true}
	v := b.Build(content)
	tag := scopeTag(scope)
	for i := range v.Lexemes {
		v.Lexemes[i].Word = tag + v.Lexemes[i].Word
	}
	return v, b.Terms()
}

// liveConversation is the condition that the row alias (an entry, or its vector)
// belongs to no deleted conversation: entries of a tombstoned one are absent for
// every read from the moment of the tombstone.
func liveConversation(alias string) string {
	return `NOT EXISTS (
	SELECT 1 FROM conversations c
	WHERE c.tenant_id = ` + alias + `.tenant_id AND c.project_id = ` + alias + `.project_id
	  AND c.conversation_id = ` + alias + `.conversation_id AND c.deleted_at_ms IS NOT NULL)`
}

// entryInsertColumns are the columns an entry's create writes, in the order of
// entryInsertArgs, and the created row's ended_at_ms after them.
const entryInsertColumns = `tenant_id, project_id, entry_id, kind, content, conversation_id, source_record_ids,
	tags, importance, expires_at_ms, metadata, status, version, supersedes, superseded_by, merged_into,
	request_sha256, created_at_ms, updated_at_ms, search, search_length, ended_at_ms`

// entryInsertArgs are the parameters of one entry's row after the scope's two.
const entryInsertArgs = 19

// CreateEntries implements memory.EntryStore: the conversations' claims (in the order
// of their IDs) and one insert of every entry, then the text index's share of the
// entries created (their postings, and the BM25 statistics of the active ones), in
// one savepoint that is rolled back when no entry was created, so that a retry
// writes nothing. The batch updates the scope's statistics rows once: once per entry,
// in one transaction, each update would walk past every earlier version of them.
func (s *EntryStore) CreateEntries(ctx context.Context, scope runtime.Scope, entries []contract.ContextEntry, digests []string) ([]memory.EntryWrite, error) {
	out := make([]memory.EntryWrite, len(entries))
	if len(entries) == 0 {
		return out, nil
	}
	err := inTx(ctx, s.db, func(tx pgx.Tx) error {
		if err := claimEntryConversations(ctx, tx, scope, entries); err != nil {
			return err
		}
		var values strings.Builder
		args := make([]any, 2, 2+entryInsertArgs*len(entries))
		args[0], args[1] = scope.TenantID, scope.ProjectID
		texts := make(map[string]*entryText, len(entries))
		for i := range entries {
			e := &entries[i]
			doc, length := entryDocument(scope, e.Content)
			if _, ok := texts[e.ID]; !ok {
				texts[e.ID] = &entryText{active: e.Status == contract.EntryActive, doc: doc, length: int32(length), created: e.CreatedAtMs}
			}
			n := len(args)
			if i > 0 {
				values.WriteString(", ")
			}
			values.WriteString("($1, $2")
			for k := 1; k <= entryInsertArgs; k++ {
				values.WriteString(", $" + strconv.Itoa(n+k))
			}
			// ended_at_ms: an entry created in another status than active (an import)
			// ended when it was last updated.
			fmt.Fprintf(&values, ", CASE WHEN $%d <> 'active' THEN $%d::bigint END)", n+10, n+17)
			args = append(args, e.ID, e.Kind, e.Content, e.ConversationID, e.SourceRecordIDs, e.Tags,
				e.Importance, e.ExpiresAtMs, jsonParam(e.Metadata), e.Status, e.Version, e.Supersedes, e.SupersededBy,
				e.MergedInto, digests[i], e.CreatedAtMs, e.UpdatedAtMs, doc, length)
		}
		rows, err := tx.Query(ctx, `INSERT INTO context_entries (`+entryInsertColumns+`)
			VALUES `+values.String()+` ON CONFLICT DO NOTHING RETURNING entry_id, text_ord`, args...)
		if err != nil {
			return translate(err)
		}
		var inserted []string
		var text textChange
		var id string
		var ord int64
		if _, err := pgx.ForEachRow(rows, []any{&id, &ord}, func() error {
			inserted = append(inserted, id)
			t := texts[id]
			t.ord = ord
			text.inserted(t)
			return nil
		}); err != nil {
			return translate(err)
		}
		if err := text.apply(ctx, tx, scope); err != nil {
			return err
		}
		// An ID the batch holds twice was inserted for its first occurrence; the later
		// ones find it stored, as they would one create after another.
		fresh := make(map[string]bool, len(inserted))
		for _, id := range inserted {
			fresh[id] = true
		}
		var taken []string
		for i := range entries {
			if fresh[entries[i].ID] {
				out[i].Created, fresh[entries[i].ID] = true, false
			} else {
				taken = append(taken, entries[i].ID)
			}
		}
		if len(taken) > 0 {
			if err := s.storedEntries(ctx, tx, scope, taken, entries, out); err != nil {
				return err
			}
		}
		if len(inserted) == 0 {
			return errRecordExists
		}
		return nil
	})
	if err != nil && !errors.Is(err, errRecordExists) {
		return nil, err
	}
	return out, nil
}

// storedEntries fills in out the stored entry and digest of every entry whose ID is
// among taken and that was not created.
func (s *EntryStore) storedEntries(ctx context.Context, tx pgx.Tx, scope runtime.Scope, taken []string, entries []contract.ContextEntry, out []memory.EntryWrite) error {
	rows, err := tx.Query(ctx, `SELECT `+entryColumns+`, e.request_sha256 FROM context_entries e
		WHERE e.tenant_id = $1 AND e.project_id = $2 AND e.entry_id = ANY($3)`,
		scope.TenantID, scope.ProjectID, taken)
	if err != nil {
		return translate(err)
	}
	stored := make(map[string]memory.EntryWrite, len(taken))
	var r entryRow
	var digest string
	if _, err := pgx.ForEachRow(rows, r.dest(&digest), func() error {
		e := r.entry()
		stored[e.ID] = memory.EntryWrite{Stored: e, StoredDigest: digest}
		return nil
	}); err != nil {
		return translate(err)
	}
	for i := range entries {
		if !out[i].Created {
			out[i] = stored[entries[i].ID]
		}
	}
	return nil
}

// claimEntryConversations claims the conversations the entries name, each once, in
// the order of their IDs; a conversation created here takes the creation time of the
// first entry naming it.
func claimEntryConversations(ctx context.Context, tx pgx.Tx, scope runtime.Scope, entries []contract.ContextEntry) error {
	first := map[string]int64{}
	for i := range entries {
		if id := entries[i].ConversationID; id != nil {
			if _, ok := first[*id]; !ok {
				first[*id] = entries[i].CreatedAtMs
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(first)) {
		if err := claimConversation(ctx, tx, scope, id, first[id]); err != nil {
			return err
		}
	}
	return nil
}

// GetEntry implements memory.EntryStore.
func (s *EntryStore) GetEntry(ctx context.Context, scope runtime.Scope, id string) (contract.ContextEntry, error) {
	var r entryRow
	err := s.db.QueryRow(ctx, `SELECT `+entryColumns+` FROM context_entries e
		WHERE e.tenant_id = $1 AND e.project_id = $2 AND e.entry_id = $3 AND `+liveConversation("e"),
		scope.TenantID, scope.ProjectID, id).Scan(r.dest()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return contract.ContextEntry{}, runtime.NotFound("entryId", "entry")
	}
	if err != nil {
		return contract.ContextEntry{}, translate(err)
	}
	return r.entry(), nil
}

// LockEntries implements memory.EntryStore. Rows are locked in ID order, so that two
// transitions over overlapping entries cannot deadlock.
func (s *EntryStore) LockEntries(ctx context.Context, scope runtime.Scope, ids []string) ([]contract.ContextEntry, error) {
	rows, err := s.db.Query(ctx, `SELECT `+entryColumns+` FROM context_entries e
		WHERE e.tenant_id = $1 AND e.project_id = $2 AND e.entry_id = ANY($3) AND `+liveConversation("e")+`
		ORDER BY e.entry_id
		FOR UPDATE OF e`,
		scope.TenantID, scope.ProjectID, ids)
	if err != nil {
		return nil, translate(err)
	}
	return collectEntries(rows)
}

func collectEntries(rows pgx.Rows) ([]contract.ContextEntry, error) {
	defer rows.Close()
	var out []contract.ContextEntry
	for rows.Next() {
		var r entryRow
		if err := rows.Scan(r.dest()...); err != nil {
			return nil, translate(err)
		}
		out = append(out, r.entry())
	}
	return out, translate(rows.Err())
}

// UpdateStatus implements memory.EntryStore with one statement, and the BM25
// statistics of the entries that became or stopped being active in the same
// transaction (a status leaves the document and its postings as they are). The time
// an entry leaves the active status is kept as its ended_at_ms, for recall as of an
// instant.
func (s *EntryStore) UpdateStatus(ctx context.Context, scope runtime.Scope, entries []contract.ContextEntry, reason *string) error {
	n := len(entries)
	ids, statuses := make([]string, n), make([]string, n)
	supersededBy, mergedInto := make([]*string, n), make([]*string, n)
	expires, updated := make([]*int64, n), make([]int64, n)
	for i, e := range entries {
		ids[i], statuses[i], supersededBy[i], mergedInto[i] = e.ID, e.Status, e.SupersededBy, e.MergedInto
		expires[i], updated[i] = e.ExpiresAtMs, e.UpdatedAtMs
	}
	return inTx(ctx, s.db, func(tx pgx.Tx) error {
		// o is the rows as they were: locked first, once, in ID order, as LockEntries
		// does.
		rows, err := tx.Query(ctx, `
			WITH o AS MATERIALIZED (
			    SELECT o.entry_id, o.status FROM context_entries o
			    WHERE o.tenant_id = $1 AND o.project_id = $2 AND o.entry_id = ANY($3::text[])
			    ORDER BY o.entry_id FOR UPDATE
			)
			UPDATE context_entries e
			SET status = u.status, superseded_by = u.superseded_by, merged_into = u.merged_into,
			    expires_at_ms = u.expires_at_ms, updated_at_ms = u.updated_at_ms, status_reason = $9,
			    ended_at_ms = CASE WHEN u.status <> 'active' THEN coalesce(e.ended_at_ms, u.updated_at_ms) END
			FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[], $8::bigint[])
			     AS u(entry_id, status, superseded_by, merged_into, expires_at_ms, updated_at_ms)
			JOIN o USING (entry_id)
			WHERE e.tenant_id = $1 AND e.project_id = $2 AND e.entry_id = ANY($3::text[]) AND e.entry_id = u.entry_id
			RETURNING o.status = 'active', u.status = 'active', e.search, e.search_length`,
			scope.TenantID, scope.ProjectID, ids, statuses, supersededBy, mergedInto, expires, updated, reason)
		if err != nil {
			return translate(err)
		}
		var text textChange
		var was bool
		var t entryText
		if _, err := pgx.ForEachRow(rows, []any{&was, &t.active, &t.doc, &t.length}, func() error {
			old := t
			old.active = was
			text.updated(&old, &t, false)
			return nil
		}); err != nil {
			return translate(err)
		}
		return text.apply(ctx, tx, scope)
	})
}

// previousContent is the content of the entry written just before the entry e in
// its conversation (memory.EmbedInput.Previous), "" when there is none: the latest
// of its conversation's entries, in any status, created before it (of those created
// in the same millisecond, the one numbered before it), other than those it
// supersedes or merges. It walks context_entries_by_conversation_created back from
// the entry's creation time. The statement's $1 and $2 are the scope, named for this
// table too rather than through e's: Citus routes a statement to the tenant's shard
// when every table it reads names the tenant.
func previousContent(alias string) string {
	return `coalesce((
	SELECT p.content FROM context_entries p
	WHERE p.tenant_id = $1 AND p.project_id = $2
	  AND p.conversation_id = ` + alias + `.conversation_id AND p.created_at_ms <= ` + alias + `.created_at_ms
	  AND (p.created_at_ms, p.text_ord) < (` + alias + `.created_at_ms, ` + alias + `.text_ord)
	  AND p.superseded_by IS DISTINCT FROM ` + alias + `.entry_id AND p.merged_into IS DISTINCT FROM ` + alias + `.entry_id
	ORDER BY p.created_at_ms DESC, p.text_ord DESC
	LIMIT 1), '')`
}

// ActiveEntries implements memory.EntryStore, walking the primary key.
func (s *EntryStore) ActiveEntries(ctx context.Context, scope runtime.Scope, after string, limit int, nowMs int64) ([]memory.EmbedInput, error) {
	rows, err := s.db.Query(ctx, `
		SELECT e.entry_id, e.content, `+previousContent("e")+` FROM context_entries e
		WHERE e.tenant_id = $1 AND e.project_id = $2 AND e.entry_id > $3 AND e.status = 'active'
		  AND (e.expires_at_ms IS NULL OR e.expires_at_ms > $5) AND `+liveConversation("e")+`
		ORDER BY e.entry_id
		LIMIT $4`,
		scope.TenantID, scope.ProjectID, after, limit, nowMs)
	if err != nil {
		return nil, translate(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[memory.EmbedInput])
	return out, translate(err)
}

// ListEntries implements memory.EntryStore: a walk of context_entries_by_created, of
// context_entries_by_conversation_created for one conversation, or of
// context_entries_by_status_created for a stored status; kinds and tags filter the
// walk.
func (s *EntryStore) ListEntries(ctx context.Context, scope runtime.Scope, q memory.EntryQuery) ([]contract.ContextEntry, error) {
	where, args := listWhere("e", "e.created_at_ms", "e.entry_id", scope, q.ConversationID, q.PageQuery)
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	switch q.Status {
	case "":
	case contract.EntryActive:
		where += ` AND e.status = 'active' AND (e.expires_at_ms IS NULL OR e.expires_at_ms > ` + arg(q.NowMs) + `)`
	case contract.EntryExpired:
		// An active entry whose expiry has passed reads as expired.
		where += ` AND (e.status = 'expired' OR e.status = 'active' AND e.expires_at_ms <= ` + arg(q.NowMs) + `)`
	default:
		where += ` AND e.status = ` + arg(q.Status)
	}
	if len(q.Kinds) > 0 {
		where += ` AND e.kind = ANY(` + arg(q.Kinds) + `::text[])`
	}
	if len(q.Tags) > 0 {
		where += ` AND e.tags @> ` + arg(q.Tags) + `::text[]`
	}
	rows, err := s.db.Query(ctx, `SELECT `+entryColumns+` FROM context_entries e
		WHERE `+where+` AND `+liveConversation("e")+`
		ORDER BY e.created_at_ms DESC, e.entry_id
		LIMIT $3`, args...)
	if err != nil {
		return nil, translate(err)
	}
	out, err := collectEntries(rows)
	if out == nil {
		out = []contract.ContextEntry{}
	}
	return out, err
}

// EntryHistory implements memory.EntryStore: from id back through supersedes to the
// first version, and from there forward through supersededBy, each step a primary
// key lookup; at most maxVersions steps each way.
func (s *EntryStore) EntryHistory(ctx context.Context, scope runtime.Scope, id string, maxVersions int) ([]contract.ContextEntry, error) {
	rows, err := s.db.Query(ctx, `
		WITH RECURSIVE back AS (
			SELECT e.entry_id, e.supersedes, 0 AS depth FROM context_entries e
			WHERE e.tenant_id = $1 AND e.project_id = $2 AND e.entry_id = $3 AND `+liveConversation("e")+`
			UNION ALL
			SELECT e.entry_id, e.supersedes, b.depth + 1 FROM back b
			JOIN context_entries e ON e.tenant_id = $1 AND e.project_id = $2 AND e.entry_id = b.supersedes
			WHERE b.depth < $4
		), first AS (
			SELECT entry_id FROM back ORDER BY depth DESC LIMIT 1
		), chain AS (
			SELECT e.entry_id, e.superseded_by, 0 AS depth FROM first f
			JOIN context_entries e ON e.tenant_id = $1 AND e.project_id = $2 AND e.entry_id = f.entry_id
			UNION ALL
			SELECT e.entry_id, e.superseded_by, c.depth + 1 FROM chain c
			JOIN context_entries e ON e.tenant_id = $1 AND e.project_id = $2 AND e.entry_id = c.superseded_by
			WHERE c.depth < $4
		)
		SELECT `+entryColumns+` FROM chain c
		JOIN context_entries e ON e.tenant_id = $1 AND e.project_id = $2 AND e.entry_id = c.entry_id
		ORDER BY c.depth`,
		scope.TenantID, scope.ProjectID, id, maxVersions-1)
	if err != nil {
		return nil, translate(err)
	}
	out, err := collectEntries(rows)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, runtime.NotFound("entryId", "entry")
	}
	return out, nil
}
