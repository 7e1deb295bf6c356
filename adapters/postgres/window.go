package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// WindowStore keeps context windows, their items, derivations and model invocations.
type WindowStore struct {
	db *DB
}

// NewWindowStore returns the store over db.
func NewWindowStore(db *DB) *WindowStore { return &WindowStore{db: db} }

var _ runtime.WindowStore = (*WindowStore)(nil)

// errRecordExists ends a create's transaction when the ID is taken: the stored record
// is returned for comparison, and rolling back undoes whatever the create did first
// (above all, implicitly creating a conversation), so a retry, identical or
// conflicting, writes nothing.
var errRecordExists = errors.New("postgres: a record with this ID exists")

// windowItemColumns are the columns of one COPY of a window's items.
var windowItemColumns = []string{
	"tenant_id", "project_id", "window_id", "ordinal", "conversation_id", "item_id", "kind",
	"role", "content", "source_record_id", "knowledge_evidence", "metadata",
}

// windowConversationJoin joins the head row of alias's conversation so that records of a
// deleted conversation read as absent.
func windowConversationJoin(alias string) string {
	return ` JOIN conversations c ON c.tenant_id = ` + alias + `.tenant_id AND c.project_id = ` + alias +
		`.project_id AND c.conversation_id = ` + alias + `.conversation_id AND c.deleted_at_ms IS NULL `
}

// CreateWindow implements runtime.WindowStore: one insert of the header and one COPY
// of every item, in one transaction that holds the conversation against deletion.
func (s *WindowStore) CreateWindow(ctx context.Context, scope runtime.Scope, w *contract.Window) (contract.Window, bool, error) {
	var stored contract.Window
	created := false
	err := s.db.InTx(ctx, func(ctx context.Context, tx DBTX) error {
		if err := claimConversation(ctx, tx, scope, w.Conversation.ConversationID, w.CreatedAtMs); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `
			INSERT INTO context_windows (tenant_id, project_id, window_id, conversation_id, stage, purpose,
				token_count, item_count, content_bytes, content_sha256, metadata, created_at_ms)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
			ON CONFLICT DO NOTHING`,
			scope.TenantID, scope.ProjectID, w.ID, w.Conversation.ConversationID, w.Stage, w.Purpose,
			w.TokenCount, w.ItemCount, w.ContentBytes, w.ContentSHA256, windowJSONParam(w.Metadata), w.CreatedAtMs)
		if err != nil {
			return translate(err)
		}
		if tag.RowsAffected() == 0 {
			if stored, err = windowHeader(ctx, tx, scope, w.ID); err != nil {
				return err
			}
			return errRecordExists
		}
		if err := copyWindowItems(ctx, tx, scope, w); err != nil {
			return err
		}
		stored, created = *w, true
		stored.Items = nil
		return nil
	})
	if err != nil && !errors.Is(err, errRecordExists) {
		return contract.Window{}, false, err
	}
	return stored, created, nil
}

// copyWindowItems writes every item of w with one COPY.
func copyWindowItems(ctx context.Context, tx DBTX, scope runtime.Scope, w *contract.Window) error {
	if len(w.Items) == 0 {
		return nil
	}
	row := make([]any, len(windowItemColumns))
	src := pgx.CopyFromSlice(len(w.Items), func(i int) ([]any, error) {
		it := &w.Items[i]
		var evidence any
		if it.KnowledgeEvidence != nil {
			raw, err := json.Marshal(it.KnowledgeEvidence)
			if err != nil {
				return nil, err
			}
			evidence = string(raw)
		}
		row[0], row[1], row[2], row[3] = scope.TenantID, scope.ProjectID, w.ID, int32(it.Ordinal)
		row[4], row[5], row[6], row[7] = w.Conversation.ConversationID, it.ID, it.Kind, it.Role
		row[8], row[9], row[10], row[11] = []byte(it.Content), it.SourceRecordID, evidence, windowJSONParam(it.Metadata)
		return row, nil
	})
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"context_window_items"}, windowItemColumns, src); err != nil {
		return translate(err)
	}
	return nil
}

// windowHeader reads a stored window without items, whatever its conversation's state:
// an idempotent retry compares against it.
func windowHeader(ctx context.Context, tx DBTX, scope runtime.Scope, id string) (contract.Window, error) {
	w := contract.Window{ID: id}
	var metadata *string
	err := tx.QueryRow(ctx, `
		SELECT conversation_id, stage, purpose, token_count, item_count, content_bytes, content_sha256,
			metadata::text, created_at_ms
		FROM context_windows
		WHERE tenant_id = $1 AND project_id = $2 AND window_id = $3`,
		scope.TenantID, scope.ProjectID, id).Scan(&w.Conversation.ConversationID, &w.Stage, &w.Purpose,
		&w.TokenCount, &w.ItemCount, &w.ContentBytes, &w.ContentSHA256, &metadata, &w.CreatedAtMs)
	if err != nil {
		return contract.Window{}, translate(err)
	}
	w.Metadata = windowJSONValue(metadata)
	return w, nil
}

// GetWindow implements runtime.WindowStore with one statement, so header and items come
// from one snapshot: a header row (part 0) and one row per item (part 1), each item
// put in its place by ordinal here, whatever order the rows arrive in.
func (s *WindowStore) GetWindow(ctx context.Context, scope runtime.Scope, windowID string) (contract.Window, error) {
	rows, err := s.db.Pool.Query(ctx, `
		WITH head AS (
			SELECT w.conversation_id, w.stage, w.purpose, w.token_count, w.item_count, w.content_bytes,
				w.content_sha256, w.metadata::text AS metadata, w.created_at_ms
			FROM context_windows w`+windowConversationJoin("w")+`
			WHERE w.tenant_id = $1 AND w.project_id = $2 AND w.window_id = $3
		)
		SELECT 0 AS part, conversation_id, stage, purpose, token_count, item_count, content_bytes,
			content_sha256, metadata, created_at_ms,
			NULL::integer, NULL::text, NULL::text, NULL::text, NULL::bytea, NULL::text, NULL::text
		FROM head
		UNION ALL
		-- An item row carries its own metadata in the header's metadata column.
		SELECT 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, metadata::text, NULL,
			ordinal, item_id, kind, role, content, source_record_id, knowledge_evidence::text
		FROM context_window_items
		WHERE tenant_id = $1 AND project_id = $2 AND window_id = $3 AND EXISTS (SELECT 1 FROM head)`,
		scope.TenantID, scope.ProjectID, windowID)
	if err != nil {
		return contract.Window{}, translate(err)
	}
	defer rows.Close()
	w := contract.Window{ID: windowID}
	var items []contract.WindowItem
	headerSeen := false
	for rows.Next() {
		var (
			part                                     int32
			conversation, stage, purpose, sha        *string
			tokenCount, contentBytes, createdAt      *int64
			itemCount, ordinal                       *int32
			metadata, itemID, kind, role, source, ev *string
		)
		// content (column 15) is taken from the raw row below: one copy instead of two.
		if err := rows.Scan(&part, &conversation, &stage, &purpose, &tokenCount, &itemCount, &contentBytes,
			&sha, &metadata, &createdAt, &ordinal, &itemID, &kind, &role, nil, &source, &ev); err != nil {
			return contract.Window{}, translate(err)
		}
		if part == 0 {
			headerSeen = true
			w.Conversation.ConversationID, w.Stage, w.Purpose, w.ContentSHA256 = *conversation, *stage, *purpose, *sha
			w.TokenCount, w.ItemCount, w.ContentBytes, w.CreatedAtMs = *tokenCount, int(*itemCount), *contentBytes, *createdAt
			w.Metadata = windowJSONValue(metadata)
			continue
		}
		items = append(items, contract.WindowItem{
			ID: *itemID, Ordinal: int(*ordinal), Kind: *kind, Role: role, Content: string(rows.RawValues()[14]),
			SourceRecordID: source, Metadata: windowJSONValue(metadata),
		})
		it := &items[len(items)-1]
		if ev != nil {
			it.KnowledgeEvidence = new(contract.KnowledgeEvidence)
			if err := json.Unmarshal([]byte(*ev), it.KnowledgeEvidence); err != nil {
				return contract.Window{}, fmt.Errorf("window %q item %d: knowledge evidence: %w", windowID, it.Ordinal, err)
			}
		}
	}
	if err := rows.Err(); err != nil {
		return contract.Window{}, translate(err)
	}
	if !headerSeen {
		return contract.Window{}, runtime.NotFound("windowId", "window")
	}
	if len(items) != w.ItemCount {
		return contract.Window{}, fmt.Errorf("window %q: %d stored items, the header says %d", windowID, len(items), w.ItemCount)
	}
	// Ordinals are the primary key's last column, so each of 0..n-1 occurs exactly once.
	w.Items = make([]contract.WindowItem, len(items))
	for _, it := range items {
		if it.Ordinal < 0 || it.Ordinal >= len(items) {
			return contract.Window{}, fmt.Errorf("window %q: stored item ordinal %d out of range", windowID, it.Ordinal)
		}
		w.Items[it.Ordinal] = it
	}
	return w, nil
}

// lockDerivations serializes derivation creates of one scope for the rest of the
// transaction, so two concurrent edges cannot each pass the cycle check and together
// close a cycle. The two-key form keeps this lock space apart from other features'.
func lockDerivations(ctx context.Context, tx DBTX, scope runtime.Scope) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('agent-context.window_derivations'), hashtext($1 || E'\x1f' || $2))`,
		scope.TenantID, scope.ProjectID)
	return translate(err)
}

// CreateDerivation implements runtime.WindowStore.
func (s *WindowStore) CreateDerivation(ctx context.Context, scope runtime.Scope, d *contract.Derivation) (contract.Derivation, bool, error) {
	var stored contract.Derivation
	created := false
	err := s.db.InTx(ctx, func(ctx context.Context, tx DBTX) error {
		if err := lockDerivations(ctx, tx, scope); err != nil {
			return err
		}
		targetConversation, err := lockDerivationWindows(ctx, tx, scope, d)
		if err != nil {
			return err
		}
		if existing, err := storedDerivation(ctx, tx, scope, d.ID); err == nil {
			stored = existing
			return nil
		} else if runtime.ErrorCode(err) != contract.CodeNotFound {
			return err
		}
		var cycle bool
		err = tx.QueryRow(ctx, `
			WITH RECURSIVE ancestors (window_id) AS (
				SELECT $3::text
				UNION
				SELECT d.source_window_id
				FROM ancestors a
				JOIN window_derivations d
					ON d.tenant_id = $1 AND d.project_id = $2 AND d.target_window_id = a.window_id
			)
			SELECT EXISTS (SELECT 1 FROM ancestors WHERE window_id = $4)`,
			scope.TenantID, scope.ProjectID, d.SourceWindowID, d.TargetWindowID).Scan(&cycle)
		if err != nil {
			return translate(err)
		}
		if cycle {
			return runtime.Errorf(contract.CodeConflict, "the derivation would close a cycle: the target is already an ancestor of the source").
				With("reason", "derivation_cycle")
		}
		_, err = tx.Exec(ctx, `
			INSERT INTO window_derivations (tenant_id, project_id, derivation_id, conversation_id,
				source_window_id, target_window_id, kind, strategy, strategy_version,
				input_token_count, output_token_count, input_item_count, output_item_count, metadata, created_at_ms)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`,
			scope.TenantID, scope.ProjectID, d.ID, targetConversation, d.SourceWindowID, d.TargetWindowID,
			d.Kind, d.Strategy, d.StrategyVersion, d.InputTokenCount, d.OutputTokenCount,
			d.InputItemCount, d.OutputItemCount, windowJSONParam(d.Metadata), d.CreatedAtMs)
		if err != nil {
			return translate(err)
		}
		stored, created = *d, true
		return nil
	})
	if err != nil {
		return contract.Derivation{}, false, err
	}
	return stored, created, nil
}

// lockDerivationWindows checks that both windows of d exist in scope with live
// conversations, holds those conversations against deletion until commit, and returns
// the target window's conversation.
func lockDerivationWindows(ctx context.Context, tx DBTX, scope runtime.Scope, d *contract.Derivation) (string, error) {
	rows, err := tx.Query(ctx, `
		SELECT w.window_id, w.conversation_id
		FROM context_windows w`+windowConversationJoin("w")+`
		WHERE w.tenant_id = $1 AND w.project_id = $2 AND w.window_id = ANY($3::text[])
		ORDER BY c.conversation_id
		FOR SHARE OF c`,
		scope.TenantID, scope.ProjectID, []string{d.SourceWindowID, d.TargetWindowID})
	if err != nil {
		return "", translate(err)
	}
	found := map[string]string{}
	for rows.Next() {
		var id, conversation string
		if err := rows.Scan(&id, &conversation); err != nil {
			rows.Close()
			return "", translate(err)
		}
		found[id] = conversation
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return "", translate(err)
	}
	if _, ok := found[d.SourceWindowID]; !ok {
		return "", runtime.NotFound("sourceWindowId", "source window")
	}
	target, ok := found[d.TargetWindowID]
	if !ok {
		return "", runtime.NotFound("targetWindowId", "target window")
	}
	return target, nil
}

// derivationColumns are the columns scanDerivation reads, of alias d.
const derivationColumns = `d.derivation_id, d.source_window_id, d.target_window_id, d.kind, d.strategy,
	d.strategy_version, d.input_token_count, d.output_token_count, d.input_item_count,
	d.output_item_count, d.metadata::text, d.created_at_ms`

func scanDerivation(row pgx.Row) (contract.Derivation, error) {
	var d contract.Derivation
	var metadata *string
	err := row.Scan(&d.ID, &d.SourceWindowID, &d.TargetWindowID, &d.Kind, &d.Strategy, &d.StrategyVersion,
		&d.InputTokenCount, &d.OutputTokenCount, &d.InputItemCount, &d.OutputItemCount, &metadata, &d.CreatedAtMs)
	d.Metadata = windowJSONValue(metadata)
	return d, err
}

// storedDerivation reads a derivation by ID; NOT_FOUND when there is none.
func storedDerivation(ctx context.Context, tx DBTX, scope runtime.Scope, id string) (contract.Derivation, error) {
	d, err := scanDerivation(tx.QueryRow(ctx, `
		SELECT `+derivationColumns+`
		FROM window_derivations d
		WHERE d.tenant_id = $1 AND d.project_id = $2 AND d.derivation_id = $3`,
		scope.TenantID, scope.ProjectID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return contract.Derivation{}, runtime.NotFound("id", "derivation")
	}
	return d, translate(err)
}

// Lineage implements runtime.WindowStore with one recursive statement. It walks from
// the window to its sources through at most maxDepth derivations, never through a
// window of a deleted conversation, and returns each window found with the derivations
// into it whose source was found too (as a JSON array in contract form).
func (s *WindowStore) Lineage(ctx context.Context, scope runtime.Scope, windowID string, maxDepth int) (contract.Lineage, error) {
	rows, err := s.db.Pool.Query(ctx, `
		WITH RECURSIVE walk (window_id, depth) AS (
			SELECT w.window_id, 0
			FROM context_windows w`+windowConversationJoin("w")+`
			WHERE w.tenant_id = $1 AND w.project_id = $2 AND w.window_id = $3
			UNION
			SELECT d.source_window_id, a.depth + 1
			FROM walk a
			JOIN window_derivations d
				ON d.tenant_id = $1 AND d.project_id = $2 AND d.target_window_id = a.window_id
			JOIN context_windows w
				ON w.tenant_id = $1 AND w.project_id = $2 AND w.window_id = d.source_window_id`+windowConversationJoin("w")+`
			WHERE a.depth < $4
		),
		found AS (
			SELECT window_id, min(depth) AS depth FROM walk GROUP BY window_id
		)
		SELECT w.window_id, w.stage, w.purpose, w.token_count, w.item_count, w.created_at_ms,
			(SELECT json_agg(json_build_object(
					'id', d.derivation_id, 'sourceWindowId', d.source_window_id,
					'targetWindowId', d.target_window_id, 'kind', d.kind, 'strategy', d.strategy,
					'strategyVersion', d.strategy_version, 'inputTokenCount', d.input_token_count,
					'outputTokenCount', d.output_token_count, 'inputItemCount', d.input_item_count,
					'outputItemCount', d.output_item_count, 'metadata', d.metadata,
					'createdAtMs', d.created_at_ms)
					ORDER BY d.created_at_ms, d.derivation_id)
				FROM window_derivations d
				WHERE d.tenant_id = $1 AND d.project_id = $2 AND d.target_window_id = w.window_id
					AND d.source_window_id IN (SELECT window_id FROM found))::text
		FROM found f
		JOIN context_windows w ON w.tenant_id = $1 AND w.project_id = $2 AND w.window_id = f.window_id
		ORDER BY f.depth, w.created_at_ms, w.window_id`,
		scope.TenantID, scope.ProjectID, windowID, maxDepth)
	if err != nil {
		return contract.Lineage{}, translate(err)
	}
	defer rows.Close()
	out := contract.Lineage{Windows: []contract.LineageWindow{}, Derivations: []contract.Derivation{}}
	for rows.Next() {
		var w contract.LineageWindow
		var edges *string
		if err := rows.Scan(&w.ID, &w.Stage, &w.Purpose, &w.TokenCount, &w.ItemCount, &w.CreatedAtMs, &edges); err != nil {
			return contract.Lineage{}, translate(err)
		}
		out.Windows = append(out.Windows, w)
		if edges != nil {
			var ds []contract.Derivation
			if err := json.Unmarshal([]byte(*edges), &ds); err != nil {
				return contract.Lineage{}, fmt.Errorf("lineage of %q: derivations: %w", windowID, err)
			}
			out.Derivations = append(out.Derivations, ds...)
		}
	}
	if err := rows.Err(); err != nil {
		return contract.Lineage{}, translate(err)
	}
	if len(out.Windows) == 0 {
		return contract.Lineage{}, runtime.NotFound("windowId", "window")
	}
	return out, nil
}

// invocationColumns are the columns scanInvocation reads.
const invocationColumns = `m.invocation_id, m.conversation_id, m.request_window_id, m.agent_id, m.tool_name,
	m.provider, m.model, m.state, m.input_tokens, m.output_tokens, m.cached_tokens, m.started_at_ms,
	m.completed_at_ms, m.latency_ms, m.finish_reason, m.response_content, m.error::text,
	m.metadata::text, m.created_at_ms`

func scanInvocation(row pgx.Row) (contract.ModelInvocation, error) {
	var m contract.ModelInvocation
	var response []byte
	var errJSON, metadata *string
	err := row.Scan(&m.ID, &m.Conversation.ConversationID, &m.RequestWindowID, &m.AgentID, &m.ToolName,
		&m.Provider, &m.Model, &m.State, &m.InputTokens, &m.OutputTokens, &m.CachedTokens, &m.StartedAtMs,
		&m.CompletedAtMs, &m.LatencyMs, &m.FinishReason, &response, &errJSON, &metadata, &m.CreatedAtMs)
	if err != nil {
		return contract.ModelInvocation{}, err
	}
	if response != nil {
		content := string(response)
		m.ResponseContent = &content
	}
	if errJSON != nil {
		m.Error = new(contract.InvocationError)
		if err := json.Unmarshal([]byte(*errJSON), m.Error); err != nil {
			return contract.ModelInvocation{}, fmt.Errorf("invocation %q: error: %w", m.ID, err)
		}
	}
	m.Metadata = windowJSONValue(metadata)
	return m, nil
}

// SaveInvocation implements runtime.WindowStore.
func (s *WindowStore) SaveInvocation(ctx context.Context, scope runtime.Scope, inv *contract.ModelInvocation) (contract.ModelInvocation, bool, error) {
	var stored contract.ModelInvocation
	created := false
	err := s.db.InTx(ctx, func(ctx context.Context, tx DBTX) error {
		conversation := inv.Conversation.ConversationID
		if err := claimConversation(ctx, tx, scope, conversation, inv.CreatedAtMs); err != nil {
			return err
		}
		var windowConversation string
		err := tx.QueryRow(ctx, `
			SELECT w.conversation_id
			FROM context_windows w`+windowConversationJoin("w")+`
			WHERE w.tenant_id = $1 AND w.project_id = $2 AND w.window_id = $3`,
			scope.TenantID, scope.ProjectID, inv.RequestWindowID).Scan(&windowConversation)
		if errors.Is(err, pgx.ErrNoRows) {
			return runtime.NotFound("requestWindowId", "request window")
		}
		if err != nil {
			return translate(err)
		}
		if windowConversation != conversation {
			return runtime.Errorf(contract.CodeConflict, "the request window belongs to another conversation").
				With("field", "requestWindowId").With("reason", "window_in_other_conversation")
		}
		var response []byte
		if inv.ResponseContent != nil {
			response = []byte(*inv.ResponseContent)
		}
		var errJSON any
		if inv.Error != nil {
			raw, err := json.Marshal(inv.Error)
			if err != nil {
				return err
			}
			errJSON = string(raw)
		}
		tag, err := tx.Exec(ctx, `
			INSERT INTO model_invocations (tenant_id, project_id, invocation_id, conversation_id,
				request_window_id, agent_id, tool_name, provider, model, state, input_tokens, output_tokens,
				cached_tokens, started_at_ms, completed_at_ms, latency_ms, finish_reason, response_content,
				error, metadata, created_at_ms)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)
			ON CONFLICT DO NOTHING`,
			scope.TenantID, scope.ProjectID, inv.ID, conversation, inv.RequestWindowID, inv.AgentID,
			inv.ToolName, inv.Provider, inv.Model, inv.State, inv.InputTokens, inv.OutputTokens,
			inv.CachedTokens, inv.StartedAtMs, inv.CompletedAtMs, inv.LatencyMs, inv.FinishReason,
			response, errJSON, windowJSONParam(inv.Metadata), inv.CreatedAtMs)
		if err != nil {
			return translate(err)
		}
		if tag.RowsAffected() == 0 {
			stored, err = scanInvocation(tx.QueryRow(ctx, `
				SELECT `+invocationColumns+`
				FROM model_invocations m
				WHERE m.tenant_id = $1 AND m.project_id = $2 AND m.invocation_id = $3`,
				scope.TenantID, scope.ProjectID, inv.ID))
			if err != nil {
				return translate(err)
			}
			return errRecordExists
		}
		stored, created = *inv, true
		return nil
	})
	if err != nil && !errors.Is(err, errRecordExists) {
		return contract.ModelInvocation{}, false, err
	}
	return stored, created, nil
}

// GetInvocation implements runtime.WindowStore.
func (s *WindowStore) GetInvocation(ctx context.Context, scope runtime.Scope, invocationID string) (contract.ModelInvocation, error) {
	m, err := scanInvocation(s.db.Pool.QueryRow(ctx, `
		SELECT `+invocationColumns+`
		FROM model_invocations m`+windowConversationJoin("m")+`
		WHERE m.tenant_id = $1 AND m.project_id = $2 AND m.invocation_id = $3`,
		scope.TenantID, scope.ProjectID, invocationID))
	if errors.Is(err, pgx.ErrNoRows) {
		return contract.ModelInvocation{}, runtime.NotFound("invocationId", "model invocation")
	}
	if err != nil {
		return contract.ModelInvocation{}, translate(err)
	}
	return m, nil
}

// windowJSONParam passes compacted JSON (nil for none) to a json column.
func windowJSONParam(v json.RawMessage) any {
	if v == nil {
		return nil
	}
	return string(v)
}

// windowJSONValue turns a json column read as text back into a raw value (nil for NULL).
func windowJSONValue(v *string) json.RawMessage {
	if v == nil {
		return nil
	}
	return json.RawMessage(*v)
}
