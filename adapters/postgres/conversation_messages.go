package postgres

import (
	"context"
	"errors"
	"maps"
	"math"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/agent-context/agent-context/adapters/postgres/textindex"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/conversation"
)

// DefaultSearchTimeout bounds one message search unless DBOptions says otherwise.
const DefaultSearchTimeout = 5 * time.Second

// DefaultSearchCandidates is how many of the newest matches a search ranks unless
// DBOptions says otherwise: enough that the best hits of a common word are among the
// recent ones, few enough that ranking them stays cheap and that the slowest case (a
// word of about 1 % of the messages, where walking the newest messages and collecting
// every match through the GIN index cost the same) stays near 100 ms on a million
// messages. docs/conversations.md and docs/benchmarks.md have the figures.
const DefaultSearchCandidates = 1000

// MessageStore keeps conversation messages in the messages table, with conversation
// heads (sequence allocation, tombstones) in conversations.
type MessageStore struct {
	db               DBTX
	searchTimeout    time.Duration
	searchCandidates int
}

var _ conversation.MessageStore = (*MessageStore)(nil)

// MessageColumns are the columns of the messages table an append copies, in the order
// of MessageRow.
var MessageColumns = []string{
	"tenant_id", "project_id", "conversation_id", "message_id", "sequence", "role", "content",
	"created_at_ms", "metadata", "search",
}

// MessageRow is the row an append copies for m (with its sequence and time filled in),
// search document included. Benchmarks and bulk loaders copy the very same rows.
func MessageRow(scope runtime.Scope, m contract.ConversationRecord) []any {
	return messageRow(scope, m, textindex.DocumentVector(m.Content))
}

func messageRow(scope runtime.Scope, m contract.ConversationRecord, doc pgtype.TSVector) []any {
	return []any{
		scope.TenantID, scope.ProjectID, m.Scope.ConversationID, m.ID, m.Sequence, m.Role, m.Content,
		m.CreatedAtMs, []byte(m.Metadata), doc,
	}
}

// batchDocuments builds the search documents of a batch in the background, spread over
// the CPUs, so that the work (the largest CPU cost of an append) overlaps the append's
// round trips and its COPY instead of preceding them, and happens before the head
// locks are held, not under them. The records are built in chunks of consecutive
// records, taken in batch order, so the COPY, which streams rows in batch order, waits
// only for the chunk of the row it sends next while later chunks are still being
// built. Only the records within the first maxEarlyDocumentBytes of content are built
// ahead; get leaves the others invalid, for insertMessages to build one at a time as
// the COPY streams them, so the documents of a batch of large messages are never all
// held at once.
func batchDocuments(batch []contract.ConversationRecord) *documents {
	early, size := 0, 0
	for early < len(batch) && size+len(batch[early].Content) <= maxEarlyDocumentBytes {
		size += len(batch[early].Content)
		early++
	}
	chunks := (early + documentsPerChunk - 1) / documentsPerChunk
	d := &documents{docs: make([]pgtype.TSVector, len(batch)), ready: make([]chan struct{}, chunks)}
	for c := range d.ready {
		d.ready[c] = make(chan struct{})
	}
	var next atomic.Int64
	for range min(goruntime.GOMAXPROCS(0), chunks) {
		d.wg.Go(func() {
			var b textindex.DocumentBuilder
			for c := int(next.Add(1) - 1); c < chunks; c = int(next.Add(1) - 1) {
				for i := c * documentsPerChunk; i < min(early, (c+1)*documentsPerChunk); i++ {
					d.docs[i] = b.Build(batch[i].Content)
				}
				close(d.ready[c])
			}
		})
	}
	return d
}

// documents are the search documents batchDocuments builds.
type documents struct {
	docs  []pgtype.TSVector
	ready []chan struct{} // closed when the documents of its chunk are built
	wg    sync.WaitGroup
}

// get returns the document of the batch's record i once it is built, or an invalid
// one for a record beyond the documents built ahead.
func (d *documents) get(i int) pgtype.TSVector {
	if c := i / documentsPerChunk; c < len(d.ready) {
		<-d.ready[c]
	}
	return d.docs[i]
}

// wait returns once every builder goroutine has ended.
func (d *documents) wait() { d.wg.Wait() }

const (
	// documentsPerChunk is how many consecutive records a builder takes at a time:
	// large enough that a chunk is worth its channel, small enough that the COPY
	// starts soon after the first chunk is done.
	documentsPerChunk = 32
	// maxEarlyDocumentBytes bounds the content whose documents an append builds ahead.
	maxEarlyDocumentBytes = 4 << 20
)

// AppendMessages implements conversation.MessageStore. The batch costs a fixed number of
// statements whatever its size: one locks and moves the heads (claimHeads), one copies
// the new rows, and only an append that skips records or carries its own sequences
// needs a third to correct the heads.
//
// A batch is assumed to be new, since retries are rare: the first attempt plans and
// copies without looking for stored IDs. Under the head locks the only way the copy
// can meet an existing row is an ID the conversation already holds (a primary-key
// violation); then, or when the plan without stored records fails, the attempt rolls
// back and a second one reads the stored digests first, so PlanAppend can skip
// identical repeats and refuse different ones with every offending ID.
func (s *MessageStore) AppendMessages(ctx context.Context, scope runtime.Scope, batch []contract.ConversationRecord, planner conversation.AppendPlanner, nowMs int64) (conversation.AppendResult, error) {
	docs := batchDocuments(batch)
	// Every attempt's goroutines end before the append returns.
	defer docs.wait()
	res, err := s.appendOnce(ctx, scope, batch, planner, docs, nowMs, false)
	if errors.Is(err, errRepeatedID) {
		res, err = s.appendOnce(ctx, scope, batch, planner, docs, nowMs, true)
	}
	return res, err
}

// errRepeatedID ends an optimistic append that met a stored ID.
var errRepeatedID = errors.New("the batch repeats a stored message ID")

func (s *MessageStore) appendOnce(ctx context.Context, scope runtime.Scope, batch []contract.ConversationRecord, planner conversation.AppendPlanner, docs *documents, nowMs int64, lookup bool) (conversation.AppendResult, error) {
	var res conversation.AppendResult
	err := inTx(ctx, s.db, func(tx pgx.Tx) error {
		last, assumed, err := claimHeads(ctx, tx, scope, batch, nowMs)
		if err != nil {
			return err
		}
		var existing []conversation.MessageDigest
		if lookup {
			if existing, err = digests(ctx, tx, scope, batch, last); err != nil {
				return err
			}
		}
		plan, err := planner(batch, last, existing, nowMs)
		if err != nil {
			// Without the stored records a repeat may look like a sequence collision,
			// and a refusal may not name every conflicting ID: decide with them.
			if !lookup && hasMessages(last) {
				return errRepeatedID
			}
			return err
		}
		if err := insertMessages(ctx, tx, scope, batch, plan.Insert, docs); err != nil {
			if constraint, ok := uniqueViolation(err); !lookup && ok && constraint == "messages_pkey" {
				return errRepeatedID
			}
			return translate(err)
		}
		if err := correctHeads(ctx, tx, scope, batch, plan, last, assumed); err != nil {
			return err
		}
		res = conversation.AppendResult{Appended: len(plan.Insert), SkippedIDs: plan.SkippedIDs}
		return nil
	})
	return res, err
}

// hasMessages reports whether any of the claimed conversations holds messages (a head
// whose last sequence is 0 has none).
func hasMessages(last map[string]int64) bool {
	for _, seq := range last {
		if seq > 0 {
			return true
		}
	}
	return false
}

// digests reads what PlanAppend needs of the stored messages whose IDs the batch
// repeats. A conversation whose last sequence is 0 has no messages, so its records are
// not looked up. The lateral subquery, fenced by OFFSET 0 so the planner cannot flatten
// it, makes this one primary-key probe per ID whatever the statistics say (a generic
// plan over stale ones once joined every row of the scope). The content is compared by
// hash: a retry of 500 large records does not read them all back.
func digests(ctx context.Context, tx DBTX, scope runtime.Scope, batch []contract.ConversationRecord, last map[string]int64) ([]conversation.MessageDigest, error) {
	var conversationIDs, ids []string
	for _, m := range batch {
		if last[m.Scope.ConversationID] > 0 {
			conversationIDs = append(conversationIDs, m.Scope.ConversationID)
			ids = append(ids, m.ID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := tx.Query(ctx, `
		SELECT m.conversation_id, m.message_id, m.role, m.sequence, m.created_at_ms,
		       sha256(convert_to(m.content, 'UTF8')), m.metadata
		FROM (SELECT DISTINCT * FROM unnest($3::text[], $4::text[])) AS b(conversation_id, message_id)
		CROSS JOIN LATERAL (
			SELECT * FROM messages
			WHERE tenant_id = $1 AND project_id = $2
			  AND conversation_id = b.conversation_id AND message_id = b.message_id
			OFFSET 0
		) AS m`,
		scope.TenantID, scope.ProjectID, conversationIDs, ids)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	var out []conversation.MessageDigest
	for rows.Next() {
		var d conversation.MessageDigest
		var sum []byte
		if err := rows.Scan(&d.ConversationID, &d.ID, &d.Role, &d.Sequence, &d.CreatedAtMs, &sum, &d.Metadata); err != nil {
			return nil, translate(err)
		}
		copy(d.ContentSHA256[:], sum)
		out = append(out, d)
	}
	return out, translate(rows.Err())
}

// insertMessages copies the new rows msgs of batch in one COPY, each with the search
// document docs builds for its record of batch (a record the plan inserts is the first
// of its ID in the batch), or built now where docs builds none; the error is left
// untranslated for the caller to recognize a repeated ID. Sequences cannot collide: every appender of these conversations holds
// their head locks.
func insertMessages(ctx context.Context, tx DBTX, scope runtime.Scope, batch, msgs []contract.ConversationRecord, docs *documents) error {
	if len(msgs) == 0 {
		return nil
	}
	type key struct{ conversation, id string }
	first := make(map[key]int, len(batch))
	for i := len(batch) - 1; i >= 0; i-- {
		first[key{batch[i].Scope.ConversationID, batch[i].ID}] = i
	}
	var late textindex.DocumentBuilder
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"messages"}, MessageColumns, pgx.CopyFromSlice(len(msgs), func(i int) ([]any, error) {
		m := msgs[i]
		doc := docs.get(first[key{m.Scope.ConversationID, m.ID}])
		if !doc.Valid {
			doc = late.Build(m.Content)
		}
		return messageRow(scope, m, doc), nil
	}))
	return err
}

// claimHeads locks the head rows of the batch's conversations in ID order (so that
// concurrent appenders cannot deadlock), creating missing ones, and returns each one's
// last sequence before the append. In the same statement it moves each head's last
// sequence and message count ahead by the number of the batch's records in its
// conversation, the outcome of the common append (new records, server-assigned
// sequences), which then needs no statement of its own; assumed holds the new last
// sequences for correctHeads. It also marks the append's time as each head's last
// activity (what conversations/list orders by; an append of retries alone counts as
// activity too). A tombstoned conversation is refused with 409 CONFLICT, reason
// conversation_deleted.
//
// The upsert locks a conflicting head row even where its WHERE clause leaves a
// tombstone unchanged, and returns only the rows it inserted or updated: a
// conversation missing from the result is a tombstone.
func claimHeads(ctx context.Context, tx DBTX, scope runtime.Scope, batch []contract.ConversationRecord, nowMs int64) (last, assumed map[string]int64, err error) {
	assumed = map[string]int64{}
	for _, m := range batch {
		assumed[m.Scope.ConversationID]++
	}
	ids := slices.Sorted(maps.Keys(assumed))
	counts := make([]int64, len(ids))
	for i, id := range ids {
		counts[i] = assumed[id]
	}
	rows, err := tx.Query(ctx, `
		INSERT INTO conversations AS c (tenant_id, project_id, conversation_id, last_sequence, message_count,
			created_at_ms, last_at_ms)
		SELECT $1, $2, v.id, v.n, v.n, $5, $5 FROM unnest($3::text[], $4::bigint[]) AS v(id, n) ORDER BY v.id
		ON CONFLICT (tenant_id, project_id, conversation_id) DO UPDATE
		SET last_sequence = c.last_sequence + excluded.last_sequence,
		    message_count = c.message_count + excluded.message_count,
		    last_at_ms = greatest(c.last_at_ms, excluded.last_at_ms)
		WHERE c.deleted_at_ms IS NULL
		RETURNING c.conversation_id, c.last_sequence`,
		scope.TenantID, scope.ProjectID, ids, counts, nowMs)
	if err != nil {
		return nil, nil, translate(err)
	}
	defer rows.Close()
	last = make(map[string]int64, len(ids))
	for rows.Next() {
		var id string
		var seq int64
		if err := rows.Scan(&id, &seq); err != nil {
			return nil, nil, translate(err)
		}
		last[id] = seq - assumed[id]
		assumed[id] = seq
	}
	if err := rows.Err(); err != nil {
		return nil, nil, translate(err)
	}
	if len(last) < len(ids) {
		var deleted []string
		for _, id := range ids {
			if _, ok := last[id]; !ok {
				deleted = append(deleted, id)
			}
		}
		return nil, nil, runtime.Errorf(contract.CodeConflict, "the conversation has been deleted").
			With("reason", "conversation_deleted").With("conversationIds", deleted)
	}
	return last, assumed, nil
}

// correctHeads sets the last sequence and the message count of each conversation
// whose head claimHeads moved to other values than the plan's outcome: where records
// were skipped, refused or given their own sequences. claimHeads counted every record of
// the batch; the count is corrected by those the plan does not insert. The common
// append changes nothing here.
func correctHeads(ctx context.Context, tx DBTX, scope runtime.Scope, batch []contract.ConversationRecord, plan conversation.AppendPlan, before, assumed map[string]int64) error {
	uncounted := map[string]int64{}
	for _, m := range batch {
		uncounted[m.Scope.ConversationID]++
	}
	for _, m := range plan.Insert {
		uncounted[m.Scope.ConversationID]--
	}
	var ids []string
	var seqs, counts []int64
	for id, was := range before {
		want := was
		if seq, ok := plan.LastSequence[id]; ok {
			want = seq
		}
		if want != assumed[id] || uncounted[id] != 0 {
			ids = append(ids, id)
			seqs = append(seqs, want)
			counts = append(counts, uncounted[id])
		}
	}
	if len(ids) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `
		UPDATE conversations c SET last_sequence = v.last_sequence, message_count = c.message_count - v.uncounted
		FROM unnest($3::text[], $4::bigint[], $5::bigint[]) AS v(conversation_id, last_sequence, uncounted)
		WHERE c.tenant_id = $1 AND c.project_id = $2 AND c.conversation_id = v.conversation_id`,
		scope.TenantID, scope.ProjectID, ids, seqs, counts)
	return translate(err)
}

// The two directions of a conversation listing; both walk messages_by_sequence. The
// head check reads the conversation's row once (an uncorrelated subquery), so a
// deleted conversation lists nothing from the moment it is tombstoned.
const (
	listAscSQL = `
		SELECT message_id, role, content, sequence, created_at_ms, metadata
		FROM messages
		WHERE tenant_id = $1 AND project_id = $2 AND conversation_id = $3
		  AND sequence > $4 AND role = ANY($5::text[])
		  AND NOT EXISTS (SELECT 1 FROM conversations
		                  WHERE tenant_id = $1 AND project_id = $2 AND conversation_id = $3
		                    AND deleted_at_ms IS NOT NULL)
		ORDER BY sequence
		LIMIT $6`
	listDescSQL = `
		SELECT message_id, role, content, sequence, created_at_ms, metadata
		FROM messages
		WHERE tenant_id = $1 AND project_id = $2 AND conversation_id = $3
		  AND sequence < $4 AND role = ANY($5::text[])
		  AND NOT EXISTS (SELECT 1 FROM conversations
		                  WHERE tenant_id = $1 AND project_id = $2 AND conversation_id = $3
		                    AND deleted_at_ms IS NOT NULL)
		ORDER BY sequence DESC
		LIMIT $6`
)

// ListMessages implements conversation.MessageStore. It fetches one row more than the limit
// to know whether another follows, and stops early at the byte budget.
func (s *MessageStore) ListMessages(ctx context.Context, scope runtime.Scope, q conversation.MessageQuery) ([]contract.ConversationRecord, bool, error) {
	query, after := listAscSQL, q.After
	if q.Descending {
		query = listDescSQL
		if after == 0 {
			after = math.MaxInt64
		}
	}
	roles := q.Roles
	if len(roles) == 0 {
		roles = contract.Roles
	}
	rows, err := s.db.Query(ctx, query, scope.TenantID, scope.ProjectID, q.ConversationID, after, roles, q.Limit+1)
	if err != nil {
		return nil, false, translate(err)
	}
	defer rows.Close()
	var msgs []contract.ConversationRecord
	var used int64
	for rows.Next() {
		if len(msgs) == q.Limit {
			return msgs, true, nil
		}
		m := contract.ConversationRecord{Scope: contract.ConversationScope{ConversationID: q.ConversationID}}
		if err := rows.Scan(&m.ID, &m.Role, &m.Content, &m.Sequence, &m.CreatedAtMs, &m.Metadata); err != nil {
			return nil, false, translate(err)
		}
		used += int64(len(m.Content) + len(m.Metadata))
		if len(msgs) > 0 && used > q.MaxBytes {
			return msgs, true, nil
		}
		msgs = append(msgs, m)
	}
	if err := rows.Err(); err != nil {
		return nil, false, translate(err)
	}
	if msgs == nil {
		msgs = []contract.ConversationRecord{}
	}
	return msgs, false, nil
}

// searchSQL finds the messages matching a tsquery ($3) and ranks the newest $7 of them
// (the candidates) with ts_rank normalized by document length (flag 1), so a short
// message that is about the words outranks a long one that mentions them once. $5
// holds the LIKE patterns of the query's unsegmented runs (empty: no check).
//
// Ranking every match would cost in proportion to the matches: a word in a third of a
// million messages took 1.5 s. The newest candidates are found by whichever path is
// cheaper for the words, chosen by the planner from the column's lexeme statistics
// (the statement is planned with its values, see SearchMessages): for a common word,
// messages_by_age walked backwards with the tsquery as a filter, which stops after
// about $7 / (share of the messages matching) rows; for a rare one, messages_search
// (GIN) and a top-$7 sort of its few matches. docs/conversations.md has the figures.
//
// searchConversationSQL confines it to one conversation ($8), whose newest candidates
// are those of the highest sequences (messages_by_sequence walked backwards): a
// statement of its own rather than an optional condition, so each keeps a plan that
// fits it.
const searchSQL = `
	WITH candidates AS (
	    SELECT m.conversation_id, m.message_id, m.role, m.content, m.sequence, m.created_at_ms, m.metadata, m.search
	    FROM messages m
	    WHERE m.tenant_id = $1 AND m.project_id = $2 AND m.search @@ $3::tsquery
	      AND m.role = ANY($4::text[])
	      AND m.content LIKE ALL ($5::text[])
	      AND NOT EXISTS (SELECT 1 FROM conversations c
	                      WHERE c.tenant_id = m.tenant_id AND c.project_id = m.project_id
	                        AND c.conversation_id = m.conversation_id AND c.deleted_at_ms IS NOT NULL)
	    ORDER BY m.created_at_ms DESC, m.conversation_id DESC, m.sequence DESC
	    LIMIT $7
	)
	SELECT conversation_id, message_id, role, content, sequence, created_at_ms, metadata,
	       ts_rank(search, $3::tsquery, 1) AS score
	FROM candidates
	ORDER BY score DESC, created_at_ms DESC, conversation_id, sequence DESC
	LIMIT $6`

var searchConversationSQL = strings.NewReplacer(
	"WHERE m.tenant_id = $1 AND m.project_id = $2 AND", "WHERE m.tenant_id = $1 AND m.project_id = $2 AND m.conversation_id = $8 AND",
	"ORDER BY m.created_at_ms DESC, m.conversation_id DESC, m.sequence DESC", "ORDER BY m.sequence DESC",
).Replace(searchSQL)

// SearchMessages implements conversation.MessageStore. The search runs in its own
// transaction with a local statement timeout; running out of it is SERVICE_UNAVAILABLE
// with reason statement_timeout.
func (s *MessageStore) SearchMessages(ctx context.Context, scope runtime.Scope, q conversation.SearchQuery) ([]contract.SearchHit, error) {
	tsquery, runs := textindex.SearchQuery(q.Text)
	hits := []contract.SearchHit{}
	if tsquery == "" {
		return hits, nil
	}
	patterns := make([]string, len(runs))
	for i, r := range runs {
		patterns[i] = textindex.LikeContains(r)
	}
	roles := q.Roles
	if len(roles) == 0 {
		roles = contract.Roles
	}
	err := inTx(ctx, s.db, func(tx pgx.Tx) error {
		if err := setLocalTimeout(ctx, tx, s.searchTimeout); err != nil {
			return err
		}
		// Planned with the values (an unnamed statement), never with a generic plan:
		// the cheaper path to the candidates depends on how common the words are.
		args := []any{pgx.QueryExecModeExec, scope.TenantID, scope.ProjectID, tsquery, roles, patterns, q.Limit, s.searchCandidates}
		query := searchSQL
		if q.ConversationID != "" {
			query, args = searchConversationSQL, append(args, q.ConversationID)
		}
		rows, err := tx.Query(ctx, query, args...)
		if err != nil {
			return translate(err)
		}
		defer rows.Close()
		var used int64
		for rows.Next() {
			var h contract.SearchHit
			var score float32
			m := &h.Message
			if err := rows.Scan(&m.Scope.ConversationID, &m.ID, &m.Role, &m.Content, &m.Sequence, &m.CreatedAtMs,
				&m.Metadata, &score); err != nil {
				return translate(err)
			}
			used += int64(len(m.Content) + len(m.Metadata))
			if len(hits) > 0 && used > q.MaxBytes {
				return nil
			}
			h.Score = float4Score(score)
			hits = append(hits, h)
		}
		return translate(rows.Err())
	})
	if err != nil {
		return nil, err
	}
	return hits, nil
}

// float4Score is a float4 rank as the shortest decimal that reads back as it, not its
// float64 expansion (0.0607927 rather than 0.060792699456214905).
func float4Score(score float32) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(float64(score), 'g', -1, 32), 64)
	return f
}
