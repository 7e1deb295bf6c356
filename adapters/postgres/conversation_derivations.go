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

// lockDerivations serializes derivation creates of one scope for the rest of the
// transaction, so two concurrent edges cannot each pass the cycle check and together
// close a cycle. The two-key form keeps this lock space apart from other features'.
func lockDerivations(ctx context.Context, tx DBTX, scope runtime.Scope) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('agent-context.window_derivations'), hashtext($1 || E'\x1f' || $2))`,
		scope.TenantID, scope.ProjectID)
	return translate(err)
}

// CreateDerivation implements conversation.WindowStore.
func (s *WindowStore) CreateDerivation(ctx context.Context, scope runtime.Scope, d *contract.Derivation) (contract.Derivation, bool, error) {
	var stored contract.Derivation
	created := false
	err := inTx(ctx, s.db, func(tx pgx.Tx) error {
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
			d.InputItemCount, d.OutputItemCount, jsonParam(d.Metadata), d.CreatedAtMs)
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
	d.Metadata = jsonValue(metadata)
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

// Lineage implements conversation.WindowStore with one recursive statement. It walks from
// the window to its sources through at most maxDepth derivations, never through a
// window of a deleted conversation, and returns each window found with the derivations
// into it whose source was found too (as a JSON array in contract form).
func (s *WindowStore) Lineage(ctx context.Context, scope runtime.Scope, windowID string, maxDepth int) (contract.Lineage, error) {
	rows, err := s.db.Query(ctx, `
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
