package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/embedding/hash"
	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/textindex"
	"github.com/agent-context/agent-context/adapters/postgres/worker"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/memory"
	"github.com/agent-context/agent-context/runtime/operation"
)

var (
	pathDelete     = contract.RouteConversationsDelete.Path
	pathRetention  = contract.RouteConversationsRetention.Path
	pathOperations = contract.RouteOperations.Path
	pathStatus     = contract.RouteMaintenanceStatus.Path
)

// operationDeadline bounds every wait for a background operation. It is generous: a
// wait ends as soon as the state is reached, and a stuck job is rescued within a
// minute.
const operationDeadline = 90 * time.Second

// oldRec is a record created at createdAtMs.
func oldRec(conversation, id, content string, createdAtMs int64) map[string]any {
	r := rec(conversation, id, "user", content)
	r["createdAtMs"] = createdAtMs
	return r
}

// deleteConversation posts a deletion and returns the status and operation.
func (a *testApp) deleteConversation(t *testing.T, id string, headers ...string) (int, contract.Operation) {
	t.Helper()
	res, created, err := a.typed(headers...).DeleteConversation(context.Background(), &contract.DeleteConversationRequest{ConversationID: id})
	require.NoError(t, err)
	if created {
		return http.StatusAccepted, res.Operation
	}
	return http.StatusOK, res.Operation
}

// retention posts a retention request and returns its operation.
func (a *testApp) retention(t *testing.T, body any, headers ...string) contract.Operation {
	t.Helper()
	var res contract.OperationResponse
	a.post(t, pathRetention, body, headers...).requireOK(t, http.StatusAccepted, &res)
	require.Equal(t, contract.OperationRetention, res.Operation.Kind)
	return res.Operation
}

// operation reads an operation.
func (a *testApp) operation(t *testing.T, id string, headers ...string) contract.Operation {
	t.Helper()
	res, err := a.typed(headers...).GetOperation(context.Background(), &contract.GetOperationRequest{OperationID: id})
	require.NoError(t, err)
	return res.Operation
}

// waitOperation polls an operation until it has finished (or the deadline fails the
// test) and returns it.
func (a *testApp) waitOperation(t *testing.T, id string, headers ...string) contract.Operation {
	t.Helper()
	deadline := time.Now().Add(operationDeadline)
	for {
		op := a.operation(t, id, headers...)
		if op.State == contract.OperationSucceeded || op.State == contract.OperationFailed {
			return op
		}
		require.True(t, time.Now().Before(deadline), "operation %s still %s", id, op.State)
		time.Sleep(50 * time.Millisecond)
	}
}

func (a *testApp) status(t *testing.T, headers ...string) contract.MaintenanceStatus {
	t.Helper()
	st, err := a.typed(headers...).MaintenanceStatus(context.Background())
	require.NoError(t, err)
	return *st
}

func openPool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := postgres.NewPool(context.Background(), dsn, postgres.PoolOptions{MaxConns: 4})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// columnsContaining scans every column of every table of the database (whatever
// migrations created them) and lists the table.column whose text form contains
// needle; bytea columns are searched for needle's bytes.
func columnsContaining(t *testing.T, pool *pgxpool.Pool, needle string) []string {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `
		SELECT c.table_schema, c.table_name, c.column_name, c.data_type
		FROM information_schema.columns c
		JOIN information_schema.tables t USING (table_schema, table_name)
		WHERE t.table_type = 'BASE TABLE' AND c.table_schema NOT IN ('pg_catalog', 'information_schema')
		ORDER BY 1, 2, 3`)
	require.NoError(t, err)
	type column struct{ Schema, Table, Name, Type string }
	columns, err := pgx.CollectRows(rows, pgx.RowToStructByPos[column])
	require.NoError(t, err)
	require.Greater(t, len(columns), 20, "the scan must see the whole schema")
	var found []string
	for _, c := range columns {
		ident := pgx.Identifier{c.Schema, c.Table}.Sanitize()
		col := pgx.Identifier{c.Name}.Sanitize()
		query := fmt.Sprintf(`SELECT EXISTS (SELECT 1 FROM %s WHERE strpos(%s::text, $1) > 0)`, ident, col)
		arg := any(needle)
		if c.Type == "bytea" {
			query = fmt.Sprintf(`SELECT EXISTS (SELECT 1 FROM %s WHERE position($1::bytea IN %s) > 0)`, ident, col)
			arg = []byte(needle)
		}
		var hit bool
		require.NoError(t, pool.QueryRow(ctx, query, arg).Scan(&hit), "%s.%s", c.Table, c.Name)
		if hit {
			found = append(found, c.Table+"."+c.Name)
		}
	}
	return found
}

// deletionSecrets are the unique strings TestConversationDeleteEndToEnd writes into
// every kind of content a conversation holds, so that the scan after the deletion
// names what was left behind.
var deletionSecrets = []string{
	"quixoticzebra",       // message content (and its search document)
	"wombatmetadata",      // message metadata
	"narwhalitem",         // window item content
	"pangolinitemmeta",    // window item metadata
	"axolotlevidence",     // window item knowledge evidence
	"capybarawindowmeta",  // window metadata
	"ibexderivationmeta",  // derivation metadata
	"ibexstrategy",        // derivation strategy
	"tapircrossmeta",      // metadata of a derivation from the conversation into another
	"marmotresponse",      // invocation responseContent
	"geckoinvocationmeta", // invocation metadata
	"jackalerror",         // a failed invocation's error message
	"okapientrycontent",   // entry content (and its search document, its vectors' source)
	"okapientrymeta",      // entry metadata
	"okapitag",            // entry tags (copied into its vectors)
	"okapisource",         // entry sourceRecordIds
	"okapireason",         // the reason of a correction
}

// Deleting a conversation hides it at once — messages, windows, invocations,
// derivations, search — keeps it tombstoned for appends, windows and invocations, and,
// once the operation has succeeded, leaves no byte of its content in any column of any
// table: only the tombstone and the operation record name it.
func TestConversationDeleteEndToEnd(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	const conv = "conv-quokka-7"
	var records []map[string]any
	for i := range 12 {
		r := rec(conv, fmt.Sprintf("m%d", i), "user", fmt.Sprintf("the quixoticzebra said %d", i))
		r["metadata"] = map[string]any{"note": "wombatmetadata", "n": i}
		records = append(records, r)
	}
	records = append(records, rec("kept", "k1", "user", "the placidotter stays here"))
	app.appendOK(t, batchOf(records...))
	require.Len(t, app.searchIDs(t, map[string]any{"query": "quixoticzebra"}), 12)

	items := winItems(3, func(i int) string { return fmt.Sprintf("narwhalitem %d", i) })
	items[1]["metadata"] = map[string]any{"note": "pangolinitemmeta"}
	items = append(items, map[string]any{"id": "kb", "ordinal": 3, "kind": "knowledge_evidence", "content": "narwhalitem kb",
		"knowledgeEvidence": map[string]any{"provider": "p", "resourceRef": "r", "excerpt": "axolotlevidence"}})
	w1 := winBody("w1", conv, "original", items)
	w1["metadata"] = map[string]any{"note": "capybarawindowmeta"}
	app.createWindow(t, w1)
	app.createWindow(t, winBody("w2", conv, "compressed", winItems(1, func(int) string { return "narwhalitem summary" })))
	app.createWindow(t, winBody("kw", "kept", "assembled", winItems(1, func(int) string { return "keptwindowcontent" })))
	app.post(t, pathDerivations, map[string]any{"id": "d1", "sourceWindowId": "w1", "targetWindowId": "w2", "kind": "compress",
		"strategy": "ibexstrategy", "metadata": map[string]any{"note": "ibexderivationmeta"}}).requireOK(t, http.StatusCreated, nil)
	app.post(t, pathDerivations, map[string]any{"id": "d2", "sourceWindowId": "w2", "targetWindowId": "kw", "kind": "assemble",
		"metadata": map[string]any{"note": "tapircrossmeta"}}).requireOK(t, http.StatusCreated, nil)
	inv := winInvocation("i1", conv, "w2")
	inv["responseContent"] = "marmotresponse"
	inv["metadata"] = map[string]any{"note": "geckoinvocationmeta"}
	app.post(t, pathInvocations, inv).requireOK(t, http.StatusOK, nil)
	failed := winInvocation("i2", conv, "w2")
	failed["state"], failed["responseContent"] = "failed", nil
	failed["error"] = map[string]any{"code": "upstream", "message": "jackalerror"}
	app.post(t, pathInvocations, failed).requireOK(t, http.StatusOK, nil)
	app.createEntry(t, map[string]any{"id": "ent-1", "kind": "fact", "content": "okapientrycontent v1", "conversationId": conv,
		"tags": []string{"okapitag"}, "sourceRecordIds": []string{"okapisource"}, "metadata": map[string]any{"note": "okapientrymeta"}})
	app.post(t, pathEntriesFix, map[string]any{"entryId": "ent-1", "content": "okapientrycontent v2", "reason": "okapireason"}).
		requireOK(t, http.StatusCreated, nil)
	app.createEntry(t, map[string]any{"id": "ent-kept", "kind": "fact", "content": "the placidotter entry stays"})
	app.waitProjected(t)
	pool := openPool(t, app.dsn)
	for _, secret := range deletionSecrets {
		require.NotEmpty(t, columnsContaining(t, pool, secret), "the scan finds %s before the deletion", secret)
	}

	before := time.Now().UnixMilli()
	r := app.post(t, pathDelete, map[string]any{"conversationId": conv})
	var wire map[string]map[string]json.RawMessage
	r.requireOK(t, http.StatusAccepted, &wire)
	for field, want := range map[string]string{
		"startedAtMs": "null", "completedAtMs": "null", "result": "null", "error": "null",
		"progress": `{"done":0,"total":null}`,
	} {
		require.JSONEq(t, want, string(wire["operation"][field]), field)
	}
	var res contract.OperationResponse
	r.requireOK(t, http.StatusAccepted, &res)
	op := res.Operation
	require.True(t, strings.HasPrefix(op.ID, "op-"), op.ID)
	require.Equal(t, contract.OperationConversationDelete, op.Kind)
	require.Equal(t, contract.OperationPending, op.State)
	require.GreaterOrEqual(t, op.CreatedAtMs, before)
	require.Equal(t, op.CreatedAtMs, op.UpdatedAtMs)
	require.Nil(t, op.StartedAtMs)
	require.Nil(t, op.CompletedAtMs)
	require.Equal(t, contract.OperationProgress{}, op.Progress)
	require.JSONEq(t, `{"conversationId":"`+conv+`"}`, string(op.Request))
	require.Nil(t, op.Error)

	// Immediately invisible: reads answer as for a conversation that never existed.
	scope := map[string]any{"conversationId": conv}
	require.Empty(t, app.recent(t, map[string]any{"scope": scope}))
	page := app.page(t, map[string]any{"scope": scope})
	require.Empty(t, page.Messages)
	require.Nil(t, page.NextCursor)
	require.Empty(t, app.searchIDs(t, map[string]any{"query": "quixoticzebra"}))
	require.Empty(t, app.searchIDs(t, map[string]any{"query": "quixoticzebra", "scope": scope}))
	require.Equal(t, []string{"k1"}, app.searchIDs(t, map[string]any{"query": "placidotter"}))
	for _, w := range []string{"w1", "w2"} {
		app.post(t, pathWindowsGet, map[string]any{"windowId": w}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
		app.post(t, pathWindowsLineage, map[string]any{"windowId": w}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
	}
	for _, i := range []string{"i1", "i2"} {
		app.post(t, pathInvocationsGet, map[string]any{"invocationId": i}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
	}
	app.post(t, pathEntriesGet, map[string]any{"entryId": "ent-1"}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
	for _, mode := range contract.RecallModes {
		require.Equal(t, []string{"ent-kept"}, app.recallIDs(t, map[string]any{"query": "okapientrycontent placidotter entry", "mode": mode}), mode)
	}
	var lineage contract.Lineage
	app.post(t, pathWindowsLineage, map[string]any{"windowId": "kw"}).requireOK(t, http.StatusOK, &lineage)
	require.Len(t, lineage.Windows, 1, "the derivation from the deleted conversation is gone from the lineage")
	require.Empty(t, lineage.Derivations)

	// Tombstoned: an append, a window or an invocation naming it is refused and
	// changes nothing; a derivation cannot name its windows.
	for _, refused := range []struct {
		path string
		body any
	}{
		{pathBatch, batchOf(rec(conv, "late", "user", "too late"), rec("kept", "k2", "user", "fine"))},
		{pathWindows, winBody("w3", conv, "original", winItems(1, winSmall))},
		{pathInvocations, winInvocation("i3", conv, "w2")},
		{pathEntries, map[string]any{"kind": "fact", "content": "too late", "conversationId": conv}},
	} {
		e := app.post(t, refused.path, refused.body).requireError(t, http.StatusConflict, contract.CodeConflict)
		require.Equal(t, "conversation_deleted", e.Details["reason"], refused.path)
	}
	require.Equal(t, []string{"k1"}, recordIDs(app.recent(t, map[string]any{"scope": map[string]any{"conversationId": "kept"}})))
	app.post(t, pathDerivations, map[string]any{"sourceWindowId": "kw", "targetWindowId": "w1", "kind": "trim"}).
		requireError(t, http.StatusNotFound, contract.CodeNotFound)

	// Deleting again returns the same operation.
	status, again := app.deleteConversation(t, conv)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, op.ID, again.ID)

	// 12 messages, 2 windows with 5 items and their 2 window_created events, the
	// derivation between them, 2 invocations, 2 entries (the superseded version and
	// its correction), the correction's vector and the entries' 3 entry_written
	// events; the derivation into "kept" goes with its source window.
	done := app.waitOperation(t, op.ID)
	require.Equal(t, contract.OperationSucceeded, done.State, "%+v", done)
	require.Equal(t, contract.OperationProgress{Done: 30, Total: ptrTo[int64](30)}, done.Progress)
	require.JSONEq(t, `{"deletedRecords":30}`, string(done.Result))
	require.NotNil(t, done.StartedAtMs)
	require.NotNil(t, done.CompletedAtMs)
	require.GreaterOrEqual(t, *done.CompletedAtMs, *done.StartedAtMs)
	require.Equal(t, *done.CompletedAtMs, done.UpdatedAtMs)
	require.Nil(t, done.Error)

	for _, secret := range deletionSecrets {
		require.Empty(t, columnsContaining(t, pool, secret), "%s remains after the deletion", secret)
	}
	require.Contains(t, columnsContaining(t, pool, "placidotter"), "messages.content", "the scan finds what is there")
	require.Contains(t, columnsContaining(t, pool, "keptwindowcontent"), "context_window_items.content")
	require.Contains(t, columnsContaining(t, pool, "placidotter"), "context_entries.content")
	require.EqualValues(t, 1, vectorRows(t, app), "the kept entry's vector stays")
	require.Equal(t, []string{"conversations.conversation_id", "operations.conversation_id", "operations.request"},
		columnsContaining(t, pool, conv), "only the tombstone and the operation record name the conversation")

	_, again = app.deleteConversation(t, conv)
	require.Equal(t, done, again)
}

// Deleting a conversation whose deletion failed starts the same operation again: it
// goes back to pending (202), loses its error, and its job runs it to the end.
func TestConversationDeleteRetriesAFailedDeletion(t *testing.T) {
	t.Parallel()
	app := startApp(t, func(c *Config) { c.JobWorkers = 0 })
	app.appendOK(t, batchOf(rec("c", "m1", "user", "doomed words")))
	_, op := app.deleteConversation(t, "c")
	pool := openPool(t, app.dsn)
	_, err := pool.Exec(context.Background(), `
		UPDATE operations SET state = 'failed', error_code = 'INTERNAL', error_message = 'the operation failed',
		                      completed_at_ms = updated_at_ms
		WHERE operation_id = $1`, op.ID)
	require.NoError(t, err)
	_, err = pool.Exec(context.Background(), `DELETE FROM river_job WHERE args->>'operationId' = $1`, op.ID)
	require.NoError(t, err)
	require.Equal(t, contract.OperationFailed, app.operation(t, op.ID).State)

	status, again := app.deleteConversation(t, "c")
	require.Equal(t, http.StatusAccepted, status)
	require.Equal(t, op.ID, again.ID)
	require.Equal(t, contract.OperationPending, again.State)
	require.Nil(t, again.Error)
	require.Nil(t, again.CompletedAtMs)
	require.NoError(t, app.main.Close())

	worker := startApp(t, func(c *Config) { c.DatabaseURL = app.dsn })
	done := worker.waitOperation(t, op.ID)
	require.Equal(t, contract.OperationSucceeded, done.State, "%+v", done)
	require.Empty(t, columnsContaining(t, pool, "doomed words"))
	// Deleting again now returns the finished operation unchanged.
	status, final := worker.deleteConversation(t, "c")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, done, final)
}

// A conversation that never existed can be deleted, and stays tombstoned.
func TestConversationDeleteNeverExisting(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	status, op := app.deleteConversation(t, "never-was")
	require.Equal(t, http.StatusAccepted, status)
	done := app.waitOperation(t, op.ID)
	require.Equal(t, contract.OperationSucceeded, done.State)
	require.JSONEq(t, `{"deletedRecords":0}`, string(done.Result))
	e := app.post(t, pathBatch, batchOf(rec("never-was", "m1", "user", "hi"))).requireError(t, http.StatusConflict, contract.CodeConflict)
	require.Equal(t, "conversation_deleted", e.Details["reason"])
}

// Every validation rule of the deletion, retention and operations routes.
func TestOperationsValidation(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	long := strings.Repeat("x", contract.MaxIDChars+1)
	policy := map[string]any{"maxAgeMs": contract.MinRetentionMaxAgeMs}
	cases := []struct {
		name   string
		path   string
		body   any
		status int
		code   string
		field  string
		limit  any
	}{
		{"delete: missing id", pathDelete, `{}`, 400, contract.CodeValidationFailed, "conversationId", nil},
		{"delete: empty id", pathDelete, map[string]any{"conversationId": ""}, 400, contract.CodeValidationFailed, "conversationId", nil},
		{"delete: whitespace", pathDelete, map[string]any{"conversationId": "a b"}, 400, contract.CodeValidationFailed, "conversationId", nil},
		{"delete: control character", pathDelete, map[string]any{"conversationId": "a\u0007"}, 400, contract.CodeValidationFailed, "conversationId", nil},
		{"delete: too long", pathDelete, map[string]any{"conversationId": long}, 400, contract.CodeValidationFailed, "conversationId", float64(contract.MaxIDChars)},
		{"delete: wrong type", pathDelete, `{"conversationId": 7}`, 400, contract.CodeValidationFailed, "conversationId", nil},
		{"delete: unknown field", pathDelete, map[string]any{"conversationId": "c", "tenantId": "t"}, 400, contract.CodeValidationFailed, "tenantId", nil},
		{"delete: wrong case", pathDelete, `{"ConversationId": "c"}`, 400, contract.CodeValidationFailed, "ConversationId", nil},
		{"retention: no policy", pathRetention, `{}`, 400, contract.CodeValidationFailed, "policy", nil},
		{"retention: null policy", pathRetention, `{"policy": null}`, 400, contract.CodeValidationFailed, "policy", nil},
		{"retention: empty policy", pathRetention, `{"policy": {}}`, 400, contract.CodeValidationFailed, "policy", nil},
		{"retention: null fields", pathRetention, `{"policy": {"maxAgeMs": null, "keepLastMessages": null}}`, 400, contract.CodeValidationFailed, "policy", nil},
		{"retention: negative age", pathRetention, `{"policy": {"maxAgeMs": -1}}`, 400, contract.CodeValidationFailed, "policy.maxAgeMs", float64(runtime.MaxSequence)},
		{"retention: negative keep", pathRetention, `{"policy": {"keepLastMessages": -5}}`, 400, contract.CodeValidationFailed, "policy.keepLastMessages", float64(contract.MaxRetentionKeepLast)},
		{"retention: age below a minute", pathRetention, `{"policy": {"maxAgeMs": 59999}}`, 400, contract.CodeValidationFailed, "policy.maxAgeMs", float64(runtime.MaxSequence)},
		{"retention: zero age", pathRetention, `{"policy": {"maxAgeMs": 0, "keepLastMessages": 5}}`, 400, contract.CodeValidationFailed, "policy.maxAgeMs", float64(runtime.MaxSequence)},
		{"retention: keep zero", pathRetention, `{"policy": {"keepLastMessages": 0}}`, 400, contract.CodeValidationFailed, "policy.keepLastMessages", float64(contract.MaxRetentionKeepLast)},
		{"retention: keep zero beside an age", pathRetention, `{"policy": {"maxAgeMs": 60000, "keepLastMessages": 0}}`, 400, contract.CodeValidationFailed, "policy.keepLastMessages", float64(contract.MaxRetentionKeepLast)},
		{"retention: absurd keep", pathRetention, `{"policy": {"keepLastMessages": 1000001}}`, 400, contract.CodeValidationFailed, "policy.keepLastMessages", float64(contract.MaxRetentionKeepLast)},
		{"retention: huge age", pathRetention, `{"policy": {"maxAgeMs": 9007199254740992}}`, 400, contract.CodeValidationFailed, "policy.maxAgeMs", float64(runtime.MaxSequence)},
		{"retention: fractional age", pathRetention, `{"policy": {"maxAgeMs": 1.5}}`, 400, contract.CodeValidationFailed, "policy.maxAgeMs", nil},
		{"retention: unknown policy field", pathRetention, `{"policy": {"maxAgeMs": 1, "maxCount": 3}}`, 400, contract.CodeValidationFailed, "policy.maxCount", nil},
		{"retention: empty conversation", pathRetention, map[string]any{"policy": policy, "conversationId": ""}, 400, contract.CodeValidationFailed, "conversationId", nil},
		{"retention: bad conversation", pathRetention, map[string]any{"policy": policy, "conversationId": "a b"}, 400, contract.CodeValidationFailed, "conversationId", nil},
		{"retention: long conversation", pathRetention, map[string]any{"policy": policy, "conversationId": long}, 400, contract.CodeValidationFailed, "conversationId", float64(contract.MaxIDChars)},
		{"retention: wrong dryRun", pathRetention, map[string]any{"policy": policy, "dryRun": "yes"}, 400, contract.CodeValidationFailed, "dryRun", nil},
		{"retention: unknown field", pathRetention, map[string]any{"policy": policy, "projectId": "p"}, 400, contract.CodeValidationFailed, "projectId", nil},
		{"operations: missing id", pathOperations, `{}`, 400, contract.CodeValidationFailed, "operationId", nil},
		{"operations: bad id", pathOperations, map[string]any{"operationId": "a b"}, 400, contract.CodeValidationFailed, "operationId", nil},
		{"operations: unknown field", pathOperations, map[string]any{"operationId": "op-1", "kind": "export"}, 400, contract.CodeValidationFailed, "kind", nil},
		{"operations: missing", pathOperations, map[string]any{"operationId": "op-nope"}, 404, contract.CodeNotFound, "operationId", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := app.post(t, tc.path, tc.body).requireError(t, tc.status, tc.code)
			require.Equal(t, tc.field, e.Details["field"], "%+v", e)
			if tc.limit != nil {
				require.Equal(t, tc.limit, e.Details["limit"])
			}
		})
	}
	app.post(t, pathStatus, `{}`).requireError(t, http.StatusMethodNotAllowed, contract.CodeMethodNotAllowed)
	// Valid edge values are accepted.
	app.retention(t, map[string]any{"policy": map[string]any{"maxAgeMs": contract.MinRetentionMaxAgeMs}})
	app.retention(t, map[string]any{"policy": map[string]any{"keepLastMessages": 1}, "conversationId": "c", "dryRun": true})
	app.retention(t, map[string]any{"policy": map[string]any{"maxAgeMs": runtime.MaxSequence, "keepLastMessages": contract.MaxRetentionKeepLast}})
}

// Retention through the API: dry run, age and keep-last together, one conversation,
// the whole scope; the maintenance status reports the last run.
func TestRetentionEndToEnd(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	var records []map[string]any
	for i := range 6 {
		records = append(records, oldRec("c1", fmt.Sprintf("a%d", i), "old words", int64(1000+i)))
	}
	for i := range 3 {
		records = append(records, oldRec("c2", fmt.Sprintf("b%d", i), "old words", int64(1000+i)))
	}
	records = append(records, rec("c2", "fresh", "user", "new words"))
	app.appendOK(t, batchOf(records...))
	other := []string{"x-infra-tenant-id", "tenant-b"}
	app.appendOK(t, batchOf(oldRec("c1", "a0", "old words", 1000)), other...)
	require.Nil(t, app.status(t).Retention.LastRunAtMs)

	hour := int64(time.Hour / time.Millisecond)
	dry := app.waitOperation(t, app.retention(t, map[string]any{
		"policy": map[string]any{"maxAgeMs": hour, "keepLastMessages": 2}, "dryRun": true,
	}).ID)
	require.Equal(t, contract.OperationSucceeded, dry.State)
	require.JSONEq(t, `{"deletedMessages":6,"affectedConversations":2}`, string(dry.Result))
	require.JSONEq(t, `{"policy":{"maxAgeMs":3600000,"keepLastMessages":2},"conversationId":null,"dryRun":true}`, string(dry.Request))
	require.Len(t, app.recent(t, map[string]any{"scope": map[string]any{"conversationId": "c1"}}), 6)
	require.Nil(t, app.status(t).Retention.LastRunAtMs, "a dry run is not a run")

	one := app.waitOperation(t, app.retention(t, map[string]any{
		"policy": map[string]any{"keepLastMessages": 4}, "conversationId": "c1",
	}).ID)
	require.JSONEq(t, `{"deletedMessages":2,"affectedConversations":1}`, string(one.Result))
	require.Equal(t, []string{"a2", "a3", "a4", "a5"}, recordIDs(app.recent(t, map[string]any{"scope": map[string]any{"conversationId": "c1"}})))

	all := app.waitOperation(t, app.retention(t, map[string]any{"policy": map[string]any{"maxAgeMs": hour}}).ID)
	require.JSONEq(t, `{"deletedMessages":7,"affectedConversations":2}`, string(all.Result))
	require.Empty(t, app.recent(t, map[string]any{"scope": map[string]any{"conversationId": "c1"}}))
	require.Equal(t, []string{"fresh"}, recordIDs(app.recent(t, map[string]any{"scope": map[string]any{"conversationId": "c2"}})))
	require.Equal(t, []string{"a0"}, recordIDs(app.recent(t, map[string]any{"scope": map[string]any{"conversationId": "c1"}}, other...)),
		"another tenant's messages are untouched")

	st := app.status(t)
	require.Equal(t, all.CompletedAtMs, st.Retention.LastRunAtMs)
	require.Nil(t, st.Retention.DefaultMaxAgeMs)
	require.Nil(t, app.status(t, other...).Retention.LastRunAtMs)
}

// The maintenance status counts the caller's scope only and reports the fixed facts.
func TestMaintenanceStatusEndToEnd(t *testing.T) {
	t.Parallel()
	app := startApp(t, func(c *Config) { c.JobWorkers = 0 }) // operations stay pending
	other := []string{"x-infra-tenant-id", "tenant-b"}
	app.deleteConversation(t, "c1")
	app.deleteConversation(t, "c2")
	app.retention(t, map[string]any{"policy": map[string]any{"maxAgeMs": contract.MinRetentionMaxAgeMs}})
	app.deleteConversation(t, "c1", other...)

	var raw map[string]any
	app.do(t, http.MethodGet, pathStatus, nil).requireOK(t, http.StatusOK, &raw)
	db, err := postgres.NewDB(context.Background(), openPool(t, app.dsn), postgres.DBOptions{})
	require.NoError(t, err)
	current, latest, err := db.Versions(context.Background())
	require.NoError(t, err)
	require.Equal(t, latest, current)
	require.Equal(t, map[string]any{
		"operations": map[string]any{"pending": 3.0, "running": 0.0, "failedLast24h": 0.0},
		"retention":  map[string]any{"lastRunAtMs": nil, "defaultMaxAgeMs": nil},
		"vectorProjection": map[string]any{"generation": 1.0, "model": hash.ModelID + memory.ContextInput, "dimensions": 384.0,
			"pendingEntries": 0.0, "indexedThroughMs": 0.0},
		"database": map[string]any{"ok": true, "schemaVersion": float64(current)},
	}, raw)
	require.Equal(t, contract.OperationCounts{Pending: 1}, app.status(t, other...).Operations)
	require.Equal(t, contract.OperationCounts{}, app.status(t, "x-infra-project-id", "elsewhere").Operations)
}

// An operation is visible in its own scope only.
func TestOperationsScopeIsolation(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	_, op := app.deleteConversation(t, "shared-id")
	app.post(t, pathOperations, map[string]any{"operationId": op.ID}, "x-infra-tenant-id", "tenant-b").
		requireError(t, http.StatusNotFound, contract.CodeNotFound)
	app.post(t, pathOperations, map[string]any{"operationId": op.ID}, "x-infra-project-id", "project-b").
		requireError(t, http.StatusNotFound, contract.CodeNotFound)
	// The same conversation ID in another tenant is a different conversation.
	app.appendOK(t, batchOf(rec("shared-id", "m1", "user", "hello")), "x-infra-tenant-id", "tenant-b")
	status, theirs := app.deleteConversation(t, "shared-id", "x-infra-tenant-id", "tenant-b")
	require.Equal(t, http.StatusAccepted, status)
	require.NotEqual(t, op.ID, theirs.ID)
	app.waitOperation(t, op.ID)
	require.JSONEq(t, `{"deletedRecords":1}`, string(app.waitOperation(t, theirs.ID, "x-infra-tenant-id", "tenant-b").Result))
}

// The capability rules: deletion and retention need messages:delete; operations admit
// messages:delete or context:admin, and an operation of another kind needs
// context:admin; the status needs messages:read.
func TestOperationsCapabilities(t *testing.T) {
	t.Parallel()
	app, minter := startSecuredApp(t)
	mint := func(caps ...string) []string { return []string{"Authorization", minter.bearer(caps...)} }
	forbidden := func(r *testResponse, capability string) {
		t.Helper()
		e := r.requireError(t, http.StatusForbidden, contract.CodeTokenForbidden)
		require.Equal(t, capability, e.Details["requiredCapability"])
	}
	deleter := mint(contract.CapMessagesDelete)
	admin := mint(contract.CapContextAdmin)
	reader := mint(contract.CapMessagesRead)

	forbidden(app.post(t, pathDelete, map[string]any{"conversationId": "c"}, reader...), contract.CapMessagesDelete)
	forbidden(app.post(t, pathDelete, map[string]any{"conversationId": "c"}, admin...), contract.CapMessagesDelete)
	forbidden(app.post(t, pathRetention, map[string]any{"policy": map[string]any{"maxAgeMs": contract.MinRetentionMaxAgeMs}}, reader...), contract.CapMessagesDelete)
	_, del := app.deleteConversation(t, "c", deleter...)
	ret := app.retention(t, map[string]any{"policy": map[string]any{"maxAgeMs": contract.MinRetentionMaxAgeMs}}, deleter...)

	// Neither capability: refused before the body is read, naming messages:delete.
	forbidden(app.post(t, pathOperations, `not json`, reader...), contract.CapMessagesDelete)
	for _, id := range []string{del.ID, ret.ID} {
		require.Equal(t, id, app.operation(t, id, deleter...).ID)
		require.Equal(t, id, app.operation(t, id, admin...).ID)
	}

	// An operation of another kind (no route creates one yet: insert it directly).
	pool := openPool(t, app.dsn)
	_, err := pool.Exec(context.Background(), `
		INSERT INTO operations (tenant_id, project_id, operation_id, kind, state, request, created_at_ms, updated_at_ms)
		VALUES ('acme', 'alpha', 'op-export-1', 'export', 'pending', '{}', 1, 1)`)
	require.NoError(t, err)
	forbidden(app.post(t, pathOperations, map[string]any{"operationId": "op-export-1"}, deleter...), contract.CapContextAdmin)
	export := app.operation(t, "op-export-1", admin...)
	require.Equal(t, contract.OperationExport, export.Kind)
	require.Equal(t, contract.OperationPending, export.State)
	// A missing operation is 404 for both, never 403.
	app.post(t, pathOperations, map[string]any{"operationId": "op-nope"}, deleter...).requireError(t, http.StatusNotFound, contract.CodeNotFound)

	forbidden(app.do(t, http.MethodGet, pathStatus, nil, deleter...), contract.CapMessagesRead)
	require.Equal(t, int64(384), int64(app.status(t, reader...).VectorProjection.Dimensions))
}

// An operation whose worker died mid-way (its job left running, part of its steps
// committed) is rescued by a new process on the same database and finishes exactly
// once: every count is exact and nothing is deleted twice or left behind.
func TestOperationSurvivesRestart(t *testing.T) {
	t.Parallel()
	first := startApp(t, func(c *Config) { c.JobWorkers = 0 }) // an API replica: works no jobs
	var records []map[string]any
	for c := range 3 {
		for i := range 8 {
			records = append(records, oldRec(fmt.Sprintf("c%d", c), fmt.Sprintf("m%d", i), "old", int64(1000+i)))
		}
	}
	for i := range 10 {
		records = append(records, rec("doomed", fmt.Sprintf("d%d", i), "user", "doomed words"))
	}
	first.appendOK(t, batchOf(records...))
	ret := first.retention(t, map[string]any{"policy": map[string]any{"keepLastMessages": 3}})
	_, del := first.deleteConversation(t, "doomed")

	// The worker that died: it ran a few steps (each committed with its progress), and
	// River still shows its job running, attempted an hour ago by a client that is gone.
	// The deletion's worker died in the operation's last attempt (the tenth): its job is
	// rescued all the same, not discarded with its operation left running.
	pool := openPool(t, first.dsn)
	db, err := postgres.NewDB(context.Background(), pool, postgres.DBOptions{})
	require.NoError(t, err)
	dead := operation.NewMaintenance(operation.MaintenanceConfig{DB: db.Operation(), Schema: db, BatchSize: 4})
	scope := runtime.Scope{TenantID: "local", ProjectID: "local"}
	for _, id := range []string{ret.ID, del.ID} {
		for range 2 {
			finished, err := dead.RunOperation(context.Background(), scope, id, time.Now())
			require.NoError(t, err)
			require.False(t, finished)
		}
	}
	tag, err := pool.Exec(context.Background(), `
		UPDATE river_job SET state = 'running', attempted_at = now() - interval '1 hour',
		                     attempted_by = ARRAY['a-replica-that-died'],
		                     attempt = CASE WHEN args->>'operationId' = $1 THEN 10 ELSE 1 END
		WHERE kind = 'agent_context_operation'`, del.ID)
	require.NoError(t, err)
	require.Equal(t, int64(2), tag.RowsAffected())
	midway := first.operation(t, ret.ID)
	require.Equal(t, contract.OperationRunning, midway.State)
	require.Equal(t, int64(8), midway.Progress.Done)
	require.Equal(t, contract.OperationRunning, first.operation(t, del.ID).State)
	require.Equal(t, contract.OperationProgress{Done: 8}, first.operation(t, del.ID).Progress)
	require.NoError(t, first.main.Close())

	second := startApp(t, func(c *Config) { c.DatabaseURL = first.dsn })
	retDone := second.waitOperation(t, ret.ID)
	require.Equal(t, contract.OperationSucceeded, retDone.State, "%+v", retDone)
	require.JSONEq(t, `{"deletedMessages":15,"affectedConversations":3}`, string(retDone.Result))
	// Progress counts the messages examined: a keep-last walk reads exactly those
	// beyond the keep boundaries (the deleted conversation is skipped from its head).
	require.Equal(t, contract.OperationProgress{Done: 15, Total: ptrTo[int64](15)}, retDone.Progress)
	require.Equal(t, midway.StartedAtMs, retDone.StartedAtMs, "the operation was started once")
	delDone := second.waitOperation(t, del.ID)
	require.Equal(t, contract.OperationSucceeded, delDone.State, "%+v", delDone)
	require.JSONEq(t, `{"deletedRecords":10}`, string(delDone.Result))
	require.Equal(t, contract.OperationProgress{Done: 10, Total: ptrTo[int64](10)}, delDone.Progress)
	for c := range 3 {
		require.Equal(t, []string{"m5", "m6", "m7"},
			recordIDs(second.recent(t, map[string]any{"scope": map[string]any{"conversationId": fmt.Sprintf("c%d", c)}})))
	}
	var remaining int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) FROM messages WHERE conversation_id = 'doomed'`).Scan(&remaining))
	require.Zero(t, remaining)

	// River ran each job once more after the rescue, and completed it (recorded by
	// the time the queue has stopped).
	require.NoError(t, second.main.Close())
	rows, err := pool.Query(context.Background(), `
		SELECT state::text, attempt FROM river_job WHERE kind = 'agent_context_operation' ORDER BY id`)
	require.NoError(t, err)
	type jobRow struct {
		State   string
		Attempt int
	}
	jobs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[jobRow])
	require.NoError(t, err)
	require.Equal(t, []jobRow{{"completed", 2}, {"completed", 11}}, jobs)
}

// The configured default policy runs on its own in every scope holding messages, and
// the maintenance status reports it.
func TestDefaultRetentionPolicy(t *testing.T) {
	t.Parallel()
	api := startApp(t, func(c *Config) { c.JobWorkers = 0 })
	other := []string{"x-infra-tenant-id", "tenant-b"}
	api.appendOK(t, batchOf(oldRec("c", "old", "old", 1000), rec("c", "new", "user", "new")))
	api.appendOK(t, batchOf(oldRec("c", "old", "old", 1000)), other...)
	require.Nil(t, api.status(t).Retention.DefaultMaxAgeMs)

	worker := startApp(t, func(c *Config) {
		c.DatabaseURL = api.dsn
		c.RetentionMaxAge = 24 * time.Hour
	})
	for _, headers := range [][]string{nil, other} {
		deadline := time.Now().Add(operationDeadline)
		for worker.status(t, headers...).Retention.LastRunAtMs == nil {
			require.True(t, time.Now().Before(deadline), "the default policy never ran")
			time.Sleep(50 * time.Millisecond)
		}
		st := worker.status(t, headers...)
		require.Equal(t, int64(24*time.Hour/time.Millisecond), *st.Retention.DefaultMaxAgeMs)
	}
	require.Equal(t, []string{"new"}, recordIDs(worker.recent(t, map[string]any{"scope": map[string]any{"conversationId": "c"}})))
	require.Empty(t, worker.recent(t, map[string]any{"scope": map[string]any{"conversationId": "c"}}, other...))
}

func TestOperationsConfigErrors(t *testing.T) {
	t.Parallel()
	for name, value := range map[string]string{
		"AGENT_CONTEXT_RETENTION_MAX_AGE":      "30 days",
		"AGENT_CONTEXT_RETENTION_INTERVAL":     "-1h",
		"AGENT_CONTEXT_JOB_RESCUE_AFTER":       "500ms",
		"AGENT_CONTEXT_JOB_WORKERS":            "many",
		"AGENT_CONTEXT_JOB_WORKERS_PUSH":       "-4",
		"AGENT_CONTEXT_JOB_WORKERS_PROJECTION": "1.5",
		"AGENT_CONTEXT_JOB_WORKERS_OPERATIONS": "0",
	} {
		_, err := LoadConfig(func(k string) string {
			if k == name {
				return value
			}
			return ""
		})
		require.ErrorContains(t, err, name)
		require.ErrorContains(t, err, value)
	}
	cfg, err := LoadConfig(func(k string) string {
		return map[string]string{"AGENT_CONTEXT_RETENTION_MAX_AGE": "720h", "AGENT_CONTEXT_JOB_WORKERS": "0"}[k]
	})
	require.NoError(t, err)
	require.Equal(t, 720*time.Hour, cfg.RetentionMaxAge)
	require.Zero(t, cfg.JobWorkers)
	require.Equal(t, time.Hour, cfg.RetentionInterval)
	require.Equal(t, 15*time.Second, cfg.JobRescueAfter)
	require.Equal(t, worker.DefaultClassWorkers, cfg.JobClasses)

	cfg, err = LoadConfig(func(k string) string {
		return map[string]string{"AGENT_CONTEXT_JOB_WORKERS_PUSH": "8", "AGENT_CONTEXT_JOB_WORKERS_OPERATIONS": "1"}[k]
	})
	require.NoError(t, err)
	require.Equal(t, worker.ClassWorkers{Push: 8, Projection: 2, Operations: 1}, cfg.JobClasses, "a class not set keeps its default")
}

func ptrTo[T any](v T) *T { return &v }

// A deleted conversation's rare words leave the text index with it: every message,
// window item, invocation response and entry (content, metadata, an earlier version)
// holds a word of its own, packed into blocks before the deletion; once the operation
// has succeeded, no table holds any of them, nor its stem (the form the index keeps),
// while the words another conversation of the scope shares stay, and so does the
// word of an entry version kept there for history.
func TestConversationDeleteLeavesNoTerm(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	pool := openPool(t, app.dsn)
	var secrets []string
	// A rare word: random, and ending in a digit so that stemming keeps it whole.
	rare := func(prefix string) string {
		b := make([]byte, 6)
		_, err := rand.Read(b)
		require.NoError(t, err)
		return prefix + hex.EncodeToString(b) + "7"
	}
	word := func() string {
		w := rare("zqx")
		secrets = append(secrets, w)
		if stem, _ := textindex.EnglishTerm(w); stem != w {
			secrets = append(secrets, stem)
		}
		return w
	}
	const conv, kept = "conv-rare", "conv-kept"
	app.appendOK(t, batchOf(rec(conv, "m1", "user", "ledger "+word()), rec(kept, "k1", "user", "ledger stays")))
	app.createWindow(t, winBody("w1", conv, "original", winItems(2, func(int) string { return "ledger " + word() })))
	inv := winInvocation("i1", conv, "w1")
	inv["responseContent"] = "ledger " + word()
	app.post(t, pathInvocations, inv).requireOK(t, http.StatusOK, nil)
	app.createEntry(t, map[string]any{"id": "e-gone", "kind": "fact", "content": "walrus ledger " + word(), "conversationId": conv,
		"metadata": map[string]any{"note": word()}})
	app.post(t, pathEntriesFix, map[string]any{"entryId": "e-gone", "content": "walrus ledger " + word()}).
		requireOK(t, http.StatusCreated, nil)
	app.createEntry(t, map[string]any{"id": "e-solo", "kind": "fact", "content": word() + " " + word(), "conversationId": conv})
	history := rare("zqxhistory")
	app.createEntry(t, map[string]any{"id": "e-kept", "kind": "fact", "content": "walrus ledger " + history, "conversationId": kept})
	app.post(t, pathEntriesFix, map[string]any{"entryId": "e-kept", "content": "walrus ledger kept"}).requireOK(t, http.StatusCreated, nil)
	app.waitProjected(t)
	packText(t, pool)
	for _, w := range secrets {
		require.NotEmpty(t, columnsContaining(t, pool, w), "the scan finds %s before the deletion", w)
	}

	_, op := app.deleteConversation(t, conv)
	require.Equal(t, contract.OperationSucceeded, app.waitOperation(t, op.ID).State)
	for _, w := range secrets {
		require.Empty(t, columnsContaining(t, pool, w), "%s remains after the deletion", w)
	}
	require.Subset(t, columnsContaining(t, pool, "walrus"), []string{"entry_text_blocks.term", "entry_text_terms.term"},
		"the words the scope still holds stay")
	require.Equal(t, []string{"context_entries.content", "context_entries.search", "entry_text_blocks.term"},
		columnsContaining(t, pool, history), "the kept history version keeps its postings, and no term row counts it")
}
