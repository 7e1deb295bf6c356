package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

var (
	pathWindows          = contract.RouteWindowsCreate.Path
	pathWindowsGet       = contract.RouteWindowsGet.Path
	pathWindowsLineage   = contract.RouteWindowsLineage.Path
	pathDerivations      = contract.RouteDerivationsCreate.Path
	pathInvocations      = contract.RouteModelInvocationsCreate.Path
	pathInvocationsGet   = contract.RouteModelInvocationsGet.Path
	winTenantA           = []string{"x-infra-tenant-id", "tenant-a", "x-infra-project-id", "project-1", "x-infra-subject", "planner"}
	winTenantB           = []string{"x-infra-tenant-id", "tenant-b", "x-infra-project-id", "project-1", "x-infra-subject", "planner"}
	windowTrickyContents = []string{
		"",
		"plain ascii",
		"multi-byte: é ß 你好 こんにちは 🙂 👩‍💻 \u2028\u2029",
		`JSON-special: "quotes" \backslash\ /slash/ {"a":[1,2]}`,
		"controls: \x00 \x01 \b \f \n \r \t \x1f \x7f",
		"<html> & </html>",
	}
)

// winItem is one item of a window request as a client writes it.
func winItem(i int, content string) map[string]any {
	return map[string]any{"id": fmt.Sprintf("item-%d", i), "ordinal": i, "kind": "message", "role": "user", "content": content}
}

func winBody(id, conversation, stage string, items []map[string]any) map[string]any {
	body := map[string]any{
		"conversation": map[string]any{"conversationId": conversation},
		"stage":        stage, "purpose": "chat_completion", "tokenCount": 320, "items": items,
	}
	if id != "" {
		body["id"] = id
	}
	return body
}

func winItems(n int, content func(i int) string) []map[string]any {
	items := make([]map[string]any, n)
	for i := range items {
		items[i] = winItem(i, content(i))
	}
	return items
}

func winSmall(i int) string { return fmt.Sprintf("content %d", i) }

// createWindow creates a window and asserts 201.
func (a *testApp) createWindow(t *testing.T, body any, headers ...string) contract.Window {
	t.Helper()
	var w contract.Window
	a.post(t, pathWindows, body, headers...).requireOK(t, http.StatusCreated, &w)
	return w
}

func requireWinField(t *testing.T, e contract.ErrorBody, field string) {
	t.Helper()
	require.Equal(t, field, e.Details["field"], "%v", e)
}

func TestWindowsCreateAndGet(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	body := winBody("window-1", "conversation-1", "assembled", winItems(3, winSmall))
	body["metadata"] = map[string]any{"trace": "t-1"}
	resp := app.post(t, pathWindows, body)
	var created contract.Window
	resp.requireOK(t, http.StatusCreated, &created)
	var members map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(resp.Body, &members))
	require.NotContains(t, members, "items", "POST /windows answers without items")
	for _, m := range []string{"id", "conversation", "stage", "purpose", "tokenCount", "metadata", "createdAtMs", "itemCount", "contentBytes", "contentSha256"} {
		require.Contains(t, members, m)
	}
	require.Equal(t, "window-1", created.ID)
	require.Equal(t, 3, created.ItemCount)
	require.EqualValues(t, len("content 0")*3, created.ContentBytes)
	require.Regexp(t, "^[0-9a-f]{64}$", created.ContentSHA256)
	require.Positive(t, created.CreatedAtMs)

	// Identical retry: 200 with the stored window. Optional members spelled null are
	// the same content as absent ones, and metadata compares canonically.
	var again contract.Window
	app.post(t, pathWindows, body).requireOK(t, http.StatusOK, &again)
	require.Equal(t, created, again)
	spelled := winBody("window-1", "conversation-1", "assembled", winItems(3, winSmall))
	spelled["metadata"] = json.RawMessage(`{ "trace" : "t-1" }`)
	for _, it := range spelled["items"].([]map[string]any) {
		it["sourceRecordId"], it["knowledgeEvidence"], it["metadata"] = nil, nil, nil
	}
	app.post(t, pathWindows, spelled).requireOK(t, http.StatusOK, &again)
	require.Equal(t, created, again)
	// Same ID, different content: 409 naming the ID.
	changed := winBody("window-1", "conversation-1", "assembled", winItems(3, func(i int) string { return "other" }))
	e := app.post(t, pathWindows, changed).requireError(t, http.StatusConflict, contract.CodeIdempotencyConflict)
	require.Equal(t, []any{"window-1"}, e.Details["ids"])
	// A conflicting retry naming a new conversation does not create that conversation.
	elsewhere := winBody("window-1", "conversation-elsewhere", "assembled", winItems(3, winSmall))
	elsewhere["metadata"] = body["metadata"]
	app.post(t, pathWindows, elsewhere).requireError(t, http.StatusConflict, contract.CodeIdempotencyConflict)
	var conversations int
	require.NoError(t, openPool(t, app.dsn).QueryRow(context.Background(),
		`SELECT count(*) FROM conversations WHERE conversation_id = 'conversation-elsewhere'`).Scan(&conversations))
	require.Zero(t, conversations)

	var got contract.Window
	app.post(t, pathWindowsGet, map[string]any{"windowId": "window-1"}).requireOK(t, http.StatusOK, &got)
	require.Len(t, got.Items, 3)
	for i, it := range got.Items {
		require.Equal(t, i, it.Ordinal)
		require.Equal(t, winSmall(i), it.Content)
		require.Equal(t, "user", *it.Role)
		require.Nil(t, it.SourceRecordID)
	}
	require.JSONEq(t, `{"trace":"t-1"}`, string(got.Metadata))
	require.Equal(t, created.ContentSHA256, got.ContentSHA256)

	// Without an ID (absent or null) the server generates one.
	generated := app.createWindow(t, winBody("", "conversation-1", "original", []map[string]any{}))
	require.NotEmpty(t, generated.ID)
	nullID := winBody("", "conversation-1", "original", []map[string]any{})
	nullID["id"] = nil
	require.NotEqual(t, generated.ID, app.createWindow(t, nullID).ID)
	var empty map[string]json.RawMessage
	app.post(t, pathWindowsGet, map[string]any{"windowId": generated.ID}).requireOK(t, http.StatusOK, &empty)
	require.JSONEq(t, `[]`, string(empty["items"]), "an empty window has items: []")

	app.post(t, pathWindowsGet, map[string]any{"windowId": "missing"}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
}

// TestWindowsRoundTrip2000Items stores the largest window and reads it back byte for
// byte, then recomputes contentSha256 from the response with a general RFC 8785
// implementation, as a client would.
func TestWindowsRoundTrip2000Items(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	content := func(i int) string { return fmt.Sprintf("%d|%s", i, windowTrickyContents[i%len(windowTrickyContents)]) }
	items := winItems(contract.MaxWindowItems, content)
	items[7]["metadata"] = map[string]any{"z": 1.50, "a": []any{"x", nil}}
	items[8]["sourceRecordId"] = "message-8"
	delete(items[9], "role")
	created := app.createWindow(t, winBody("big", "conversation-1", "original", items))
	require.Equal(t, contract.MaxWindowItems, created.ItemCount)

	resp := app.post(t, pathWindowsGet, map[string]any{"windowId": "big"})
	var got contract.Window
	resp.requireOK(t, http.StatusOK, &got)
	require.Len(t, got.Items, contract.MaxWindowItems)
	var total int64
	for i, it := range got.Items {
		require.Equal(t, content(i), it.Content, "item %d", i)
		require.Equal(t, i, it.Ordinal)
		total += int64(len(it.Content))
	}
	require.Equal(t, total, got.ContentBytes)
	require.Equal(t, "message-8", *got.Items[8].SourceRecordID)
	require.Nil(t, got.Items[9].Role)
	require.JSONEq(t, `{"a":["x",null],"z":1.5}`, string(got.Items[7].Metadata))

	// The items array exactly as the response carries it, canonicalized and hashed.
	var members map[string]jsontext.Value
	require.NoError(t, json.Unmarshal(resp.Body, &members))
	canonical := members["items"].Clone()
	require.NoError(t, canonical.Canonicalize())
	sum := sha256.Sum256(canonical)
	require.Equal(t, hex.EncodeToString(sum[:]), got.ContentSHA256)
	require.Equal(t, created.ContentSHA256, got.ContentSHA256)
}

func TestWindowsSizeLimits(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	e := app.post(t, pathWindows, winBody("w", "c", "original", winItems(contract.MaxWindowItems+1, winSmall))).
		requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
	requireWinField(t, e, "items")
	require.EqualValues(t, contract.MaxWindowItems, e.Details["limit"])

	quarter := strings.Repeat("a", contract.MaxWindowItemContentBytes)
	over := winItems(5, func(int) string { return quarter })
	over[4]["content"] = "a"
	e = app.post(t, pathWindows, winBody("w", "c", "original", over)).requireError(t, http.StatusRequestEntityTooLarge, contract.CodePayloadTooLarge)
	requireWinField(t, e, "items")
	require.EqualValues(t, contract.MaxWindowContentBytes, e.Details["limit"])

	e = app.post(t, pathWindows, winBody("w", "c", "original", []map[string]any{winItem(0, quarter+"a")})).
		requireError(t, http.StatusRequestEntityTooLarge, contract.CodePayloadTooLarge)
	requireWinField(t, e, "items[0].content")
	require.EqualValues(t, contract.MaxWindowItemContentBytes, e.Details["limit"])
	app.post(t, pathWindowsGet, map[string]any{"windowId": "w"}).requireError(t, http.StatusNotFound, contract.CodeNotFound)

	exact := app.createWindow(t, winBody("exact", "c", "original", winItems(4, func(int) string { return quarter })))
	require.EqualValues(t, contract.MaxWindowContentBytes, exact.ContentBytes)
	var got contract.Window
	app.post(t, pathWindowsGet, map[string]any{"windowId": "exact"}).requireOK(t, http.StatusOK, &got)
	require.Len(t, got.Items, 4)
	require.Equal(t, quarter, got.Items[3].Content)
}

func TestWindowsRequestValidation(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	cases := []struct {
		name   string
		body   string
		status int
		field  string
	}{
		{"snapshotId is not windowId", `{"snapshotId": "w"}`, 400, "snapshotId"},
		{"server field in request", `{"conversation": {"conversationId": "c"}, "stage": "original", "purpose": "p", "tokenCount": 1, "items": [], "createdAtMs": 5}`, 400, "createdAtMs"},
		{"wrong case", `{"Id": "w", "conversation": {"conversationId": "c"}, "stage": "original", "purpose": "p", "tokenCount": 1, "items": []}`, 400, "Id"},
		{"tenant in body", `{"tenantId": "x", "conversation": {"conversationId": "c"}, "stage": "original", "purpose": "p", "tokenCount": 1, "items": []}`, 400, "tenantId"},
		{"unknown item field", `{"conversation": {"conversationId": "c"}, "stage": "original", "purpose": "p", "tokenCount": 1, "items": [{"id": "i", "ordinal": 0, "kind": "message", "content": "", "text": "x"}]}`, 400, "items[0].text"},
		{"ordinal gap", `{"conversation": {"conversationId": "c"}, "stage": "original", "purpose": "p", "tokenCount": 1, "items": [{"id": "i", "ordinal": 0, "kind": "message", "content": ""}, {"id": "j", "ordinal": 2, "kind": "message", "content": ""}]}`, 400, "items[1].ordinal"},
		{"evidence on a message", `{"conversation": {"conversationId": "c"}, "stage": "original", "purpose": "p", "tokenCount": 1, "items": [{"id": "i", "ordinal": 0, "kind": "message", "content": "", "knowledgeEvidence": {"provider": "p", "resourceRef": "r", "excerpt": ""}}]}`, 400, "items[0].knowledgeEvidence"},
		{"evidence missing", `{"conversation": {"conversationId": "c"}, "stage": "original", "purpose": "p", "tokenCount": 1, "items": [{"id": "i", "ordinal": 0, "kind": "knowledge_evidence", "content": ""}]}`, 400, "items[0].knowledgeEvidence"},
		{"content missing", `{"conversation": {"conversationId": "c"}, "stage": "original", "purpose": "p", "tokenCount": 1, "items": [{"id": "i", "ordinal": 0, "kind": "message"}]}`, 400, "items[0].content"},
		{"id over 191", `{"id": "` + strings.Repeat("x", 192) + `", "conversation": {"conversationId": "c"}, "stage": "original", "purpose": "p", "tokenCount": 1, "items": []}`, 400, "id"},
		{"stage unknown", `{"conversation": {"conversationId": "c"}, "stage": "final", "purpose": "p", "tokenCount": 1, "items": []}`, 400, "stage"},
		{"tokenCount negative", `{"conversation": {"conversationId": "c"}, "stage": "original", "purpose": "p", "tokenCount": -1, "items": []}`, 400, "tokenCount"},
		{"tokenCount fractional", `{"conversation": {"conversationId": "c"}, "stage": "original", "purpose": "p", "tokenCount": 1.5, "items": []}`, 400, "tokenCount"},
		{"metadata over 64 KiB", `{"conversation": {"conversationId": "c"}, "stage": "original", "purpose": "p", "tokenCount": 1, "items": [], "metadata": {"k": "` + strings.Repeat("m", 64<<10) + `"}}`, 413, "metadata"},
		{"empty id", `{"id": "", "conversation": {"conversationId": "c"}, "stage": "original", "purpose": "p", "tokenCount": 1, "items": []}`, 400, "id"},
		{"ordinal repeated", `{"conversation": {"conversationId": "c"}, "stage": "original", "purpose": "p", "tokenCount": 1, "items": [{"id": "i", "ordinal": 0, "kind": "message", "content": ""}, {"id": "j", "ordinal": 0, "kind": "message", "content": ""}]}`, 400, "items[1].ordinal"},
		{"item id over 191", `{"conversation": {"conversationId": "c"}, "stage": "original", "purpose": "p", "tokenCount": 1, "items": [{"id": "` + strings.Repeat("i", 192) + `", "ordinal": 0, "kind": "message", "content": ""}]}`, 400, "items[0].id"},
		{"item metadata number beyond a double", `{"conversation": {"conversationId": "c"}, "stage": "original", "purpose": "p", "tokenCount": 1, "items": [{"id": "i", "ordinal": 0, "kind": "message", "content": "", "metadata": {"n": 1e400}}]}`, 400, "items[0].metadata"},
	}
	for _, tc := range cases {
		path := pathWindows
		if strings.Contains(tc.body, "snapshotId") {
			path = pathWindowsGet
		}
		code := contract.CodeValidationFailed
		if tc.status == http.StatusRequestEntityTooLarge {
			code = contract.CodePayloadTooLarge
		}
		e := app.post(t, path, tc.body).requireError(t, tc.status, code)
		require.Equal(t, tc.field, e.Details["field"], tc.name)
	}
	// The last item of a full window is wrong: nothing of the window is stored.
	late := winItems(contract.MaxWindowItems, winSmall)
	late[contract.MaxWindowItems-1]["kind"] = "image"
	e := app.post(t, pathWindows, winBody("late", "c", "original", late)).requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
	requireWinField(t, e, "items[1999].kind")

	// Nothing was half-stored: no window, no item, not even the implicit conversation.
	var windows, items, conversations int
	require.NoError(t, openPool(t, app.dsn).QueryRow(context.Background(), `
		SELECT (SELECT count(*) FROM context_windows), (SELECT count(*) FROM context_window_items),
			(SELECT count(*) FROM conversations)`).Scan(&windows, &items, &conversations))
	require.Equal(t, [3]int{0, 0, 0}, [3]int{windows, items, conversations})
}

func TestWindowsKnowledgeEvidenceRoundTrip(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	evidence := map[string]any{
		"provider": "enterprise-knowledge", "resourceRef": "kb://space-1/page 42?x=1&y=<2>", "revisionRef": "rev-7",
		"segmentRef": nil, "excerpt": "The staging cluster deploys from the release branch. 发布", "score": 0.8,
		"retrievedAtMs": 1700000000123,
	}
	items := []map[string]any{
		winItem(0, "what is the deploy policy?"),
		{"id": "kb-1", "ordinal": 1, "kind": "knowledge_evidence", "content": "[kb] release branch", "knowledgeEvidence": evidence},
	}
	app.createWindow(t, winBody("with-evidence", "c", "assembled", items))
	resp := app.post(t, pathWindowsGet, map[string]any{"windowId": "with-evidence"})
	var got struct {
		Items []map[string]json.RawMessage `json:"items"`
	}
	resp.requireOK(t, http.StatusOK, &got)
	want, err := json.Marshal(evidence)
	require.NoError(t, err)
	require.JSONEq(t, string(want), string(got.Items[1]["knowledgeEvidence"]))
	require.JSONEq(t, "null", string(got.Items[0]["knowledgeEvidence"]))
	require.JSONEq(t, `"knowledge_evidence"`, string(got.Items[1]["kind"]))
}

func TestDerivationsEndToEnd(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	for _, id := range []string{"w1", "w2", "w3"} {
		app.createWindow(t, winBody(id, "c", "original", winItems(1, winSmall)))
	}
	body := map[string]any{
		"id": "derivation-1", "sourceWindowId": "w1", "targetWindowId": "w2", "kind": "compress",
		"strategy": "summarize-oldest", "strategyVersion": "1", "inputTokenCount": 9000, "outputTokenCount": 3000,
		"inputItemCount": 40, "outputItemCount": 12, "metadata": nil,
	}
	var d contract.Derivation
	app.post(t, pathDerivations, body).requireOK(t, http.StatusCreated, &d)
	require.Equal(t, "derivation-1", d.ID)
	require.Positive(t, d.CreatedAtMs)
	require.EqualValues(t, 3000, *d.OutputTokenCount)
	var again contract.Derivation
	app.post(t, pathDerivations, body).requireOK(t, http.StatusOK, &again)
	require.Equal(t, d, again)
	body["kind"] = "trim"
	app.post(t, pathDerivations, body).requireError(t, http.StatusConflict, contract.CodeIdempotencyConflict)

	// A second derivation between the same windows, with its own (generated) ID.
	var second contract.Derivation
	app.post(t, pathDerivations, map[string]any{"sourceWindowId": "w1", "targetWindowId": "w2", "kind": "trim"}).
		requireOK(t, http.StatusCreated, &second)
	require.NotEqual(t, d.ID, second.ID)

	e := app.post(t, pathDerivations, map[string]any{"sourceWindowId": "nope", "targetWindowId": "w2", "kind": "trim"}).
		requireError(t, http.StatusNotFound, contract.CodeNotFound)
	requireWinField(t, e, "sourceWindowId")
	e = app.post(t, pathDerivations, map[string]any{"sourceWindowId": "w1", "targetWindowId": "nope", "kind": "trim"}).
		requireError(t, http.StatusNotFound, contract.CodeNotFound)
	requireWinField(t, e, "targetWindowId")
	e = app.post(t, pathDerivations, map[string]any{"sourceWindowId": "w1", "targetWindowId": "w1", "kind": "trim"}).
		requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
	requireWinField(t, e, "targetWindowId")
	e = app.post(t, pathDerivations, map[string]any{"sourceWindowId": "w1", "targetWindowId": "w3", "kind": "merge"}).
		requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
	requireWinField(t, e, "kind")

	app.post(t, pathDerivations, map[string]any{"sourceWindowId": "w2", "targetWindowId": "w3", "kind": "reorder"}).
		requireOK(t, http.StatusCreated, nil)
	// w3 → w1 would close w1 → w2 → w3 → w1.
	e = app.post(t, pathDerivations, map[string]any{"sourceWindowId": "w3", "targetWindowId": "w1", "kind": "assemble"}).
		requireError(t, http.StatusConflict, contract.CodeConflict)
	require.Equal(t, "derivation_cycle", e.Details["reason"])
}

func TestWindowsLineageEndToEnd(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	app.createWindow(t, winBody("original", "c", "original", winItems(40, winSmall)))
	app.createWindow(t, winBody("assembled", "c", "assembled", winItems(20, winSmall)))
	app.createWindow(t, winBody("compressed", "c", "compressed", winItems(5, winSmall)))
	app.post(t, pathDerivations, map[string]any{"id": "d-assemble", "sourceWindowId": "original", "targetWindowId": "assembled", "kind": "assemble"}).
		requireOK(t, http.StatusCreated, nil)
	app.post(t, pathDerivations, map[string]any{"id": "d-compress", "sourceWindowId": "assembled", "targetWindowId": "compressed", "kind": "compress"}).
		requireOK(t, http.StatusCreated, nil)

	var l contract.Lineage
	app.post(t, pathWindowsLineage, map[string]any{"windowId": "compressed"}).requireOK(t, http.StatusOK, &l)
	require.Len(t, l.Windows, 3)
	require.Equal(t, contract.LineageWindow{ID: "compressed", Stage: "compressed", Purpose: "chat_completion", TokenCount: 320, ItemCount: 5, CreatedAtMs: l.Windows[0].CreatedAtMs}, l.Windows[0])
	require.Equal(t, []string{"compressed", "assembled", "original"}, []string{l.Windows[0].ID, l.Windows[1].ID, l.Windows[2].ID})
	require.Equal(t, []int{5, 20, 40}, []int{l.Windows[0].ItemCount, l.Windows[1].ItemCount, l.Windows[2].ItemCount})
	require.Len(t, l.Derivations, 2)
	require.Equal(t, "d-compress", l.Derivations[0].ID)
	require.Equal(t, "compress", l.Derivations[0].Kind)
	require.Equal(t, "d-assemble", l.Derivations[1].ID)

	app.post(t, pathWindowsLineage, map[string]any{"windowId": "compressed", "maxDepth": 1}).requireOK(t, http.StatusOK, &l)
	require.Len(t, l.Windows, 2)
	require.Len(t, l.Derivations, 1)

	for _, depth := range []int{0, 257} {
		e := app.post(t, pathWindowsLineage, map[string]any{"windowId": "compressed", "maxDepth": depth}).
			requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
		requireWinField(t, e, "maxDepth")
		require.EqualValues(t, 256, e.Details["limit"])
	}
	app.post(t, pathWindowsLineage, map[string]any{"windowId": "missing"}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
}

func winInvocation(id, conversation, window string) map[string]any {
	return map[string]any{
		"id": id, "conversation": map[string]any{"conversationId": conversation}, "requestWindowId": window,
		"toolName": nil, "provider": "openai", "model": "gpt-4.1-mini", "state": "succeeded",
		"inputTokens": 3000, "outputTokens": 250, "cachedTokens": 1024,
		"startedAtMs": 1700000000000, "completedAtMs": 1700000000840, "latencyMs": 840,
		"finishReason": "stop", "responseContent": "the answer", "error": nil, "metadata": nil,
	}
}

func TestModelInvocationsEndToEnd(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	app.createWindow(t, winBody("w1", "c1", "assembled", winItems(1, winSmall)), winTenantA...)
	app.createWindow(t, winBody("w2", "c2", "assembled", winItems(1, winSmall)), winTenantA...)
	app.createWindow(t, winBody("foreign", "c1", "assembled", winItems(1, winSmall)), winTenantB...)

	body := winInvocation("invocation-1", "c1", "w1")
	var saved contract.ModelInvocation
	app.post(t, pathInvocations, body, winTenantA...).requireOK(t, http.StatusOK, &saved)
	require.Equal(t, "planner", saved.AgentID, "agentId defaults to x-infra-subject")
	require.EqualValues(t, 1024, saved.CachedTokens)
	require.Equal(t, "the answer", *saved.ResponseContent)
	require.Nil(t, saved.Error)
	var again contract.ModelInvocation
	app.post(t, pathInvocations, body, winTenantA...).requireOK(t, http.StatusOK, &again)
	require.Equal(t, saved, again)
	var got contract.ModelInvocation
	app.post(t, pathInvocationsGet, map[string]any{"invocationId": "invocation-1"}, winTenantA...).requireOK(t, http.StatusOK, &got)
	require.Equal(t, saved, got)

	body["outputTokens"] = 251
	app.post(t, pathInvocations, body, winTenantA...).requireError(t, http.StatusConflict, contract.CodeIdempotencyConflict)

	e := app.post(t, pathInvocations, winInvocation("i2", "c1", "missing"), winTenantA...).requireError(t, http.StatusNotFound, contract.CodeNotFound)
	requireWinField(t, e, "requestWindowId")
	e = app.post(t, pathInvocations, winInvocation("i2", "c1", "foreign"), winTenantA...).requireError(t, http.StatusNotFound, contract.CodeNotFound)
	requireWinField(t, e, "requestWindowId")
	e = app.post(t, pathInvocations, winInvocation("i2", "c1", "w2"), winTenantA...).requireError(t, http.StatusConflict, contract.CodeConflict)
	requireWinField(t, e, "requestWindowId")

	failed := winInvocation("i3", "c1", "w1")
	failed["state"] = "failed"
	e = app.post(t, pathInvocations, failed, winTenantA...).requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
	requireWinField(t, e, "error")
	failed["error"] = map[string]any{"code": "rate_limited", "message": "429 from upstream"}
	failed["agentId"] = "critic"
	failed["responseContent"] = nil
	app.post(t, pathInvocations, failed, winTenantA...).requireOK(t, http.StatusOK, &got)
	require.Equal(t, &contract.InvocationError{Code: "rate_limited", Message: "429 from upstream"}, got.Error)
	require.Equal(t, "critic", got.AgentID)

	cached := winInvocation("i4", "c1", "w1")
	cached["cachedTokens"] = 3001
	e = app.post(t, pathInvocations, cached, winTenantA...).requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
	requireWinField(t, e, "cachedTokens")
	big := winInvocation("i4", "c1", "w1")
	big["responseContent"] = strings.Repeat("r", contract.MaxResponseContentBytes+1)
	e = app.post(t, pathInvocations, big, winTenantA...).requireError(t, http.StatusRequestEntityTooLarge, contract.CodePayloadTooLarge)
	requireWinField(t, e, "responseContent")
	long := winInvocation("i4", "c1", "w1")
	long["finishReason"] = strings.Repeat("f", 65)
	e = app.post(t, pathInvocations, long, winTenantA...).requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
	requireWinField(t, e, "finishReason")

	// Integers on the wire stop at 2^53 − 1 (docs/api.md), also where no field
	// bound of its own applies; nothing is stored.
	for _, field := range []string{"inputTokens", "latencyMs", "startedAtMs"} {
		huge := winInvocation("i4", "c1", "w1")
		huge[field] = json.Number("9007199254740992")
		e = app.post(t, pathInvocations, huge, winTenantA...).requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
		requireWinField(t, e, field)
		require.Equal(t, float64(runtime.MaxSequence), e.Details["limit"], field)
	}

	app.post(t, pathInvocationsGet, map[string]any{"invocationId": "i2"}, winTenantA...).requireError(t, http.StatusNotFound, contract.CodeNotFound)
	app.post(t, pathInvocationsGet, map[string]any{"invocationId": "i4"}, winTenantA...).requireError(t, http.StatusNotFound, contract.CodeNotFound)
}

// TestWindowsDeletedConversation tombstones a conversation the way the delete route
// does first (the head row's deleted_at_ms) and checks every window route treats its
// records as gone.
func TestWindowsDeletedConversation(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	app.createWindow(t, winBody("w1", "doomed", "original", winItems(2, winSmall)))
	app.createWindow(t, winBody("w2", "doomed", "assembled", winItems(1, winSmall)))
	app.createWindow(t, winBody("w3", "kept", "compressed", winItems(1, winSmall)))
	app.post(t, pathDerivations, map[string]any{"sourceWindowId": "w1", "targetWindowId": "w2", "kind": "assemble"}).requireOK(t, http.StatusCreated, nil)
	app.post(t, pathDerivations, map[string]any{"sourceWindowId": "w2", "targetWindowId": "w3", "kind": "compress"}).requireOK(t, http.StatusCreated, nil)
	app.post(t, pathInvocations, winInvocation("i1", "doomed", "w2")).requireOK(t, http.StatusOK, nil)

	conn, err := pgx.Connect(context.Background(), app.dsn)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(context.Background(), `UPDATE conversations SET deleted_at_ms = 1 WHERE conversation_id = 'doomed'`)
	require.NoError(t, err)

	app.post(t, pathWindowsGet, map[string]any{"windowId": "w1"}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
	app.post(t, pathWindowsLineage, map[string]any{"windowId": "w2"}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
	app.post(t, pathInvocationsGet, map[string]any{"invocationId": "i1"}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
	var l contract.Lineage
	app.post(t, pathWindowsLineage, map[string]any{"windowId": "w3"}).requireOK(t, http.StatusOK, &l)
	require.Len(t, l.Windows, 1)
	require.Empty(t, l.Derivations)

	e := app.post(t, pathWindows, winBody("w4", "doomed", "original", winItems(1, winSmall))).requireError(t, http.StatusConflict, contract.CodeConflict)
	require.Equal(t, "conversation_deleted", e.Details["reason"])
	e = app.post(t, pathInvocations, winInvocation("i2", "doomed", "w2")).requireError(t, http.StatusConflict, contract.CodeConflict)
	require.Equal(t, "conversation_deleted", e.Details["reason"])
	e = app.post(t, pathDerivations, map[string]any{"sourceWindowId": "w3", "targetWindowId": "w1", "kind": "trim"}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
	requireWinField(t, e, "targetWindowId")
}

// TestWindowsTenantIsolation writes the same IDs in two tenants and checks all six
// routes keep them apart.
func TestWindowsTenantIsolation(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	for _, h := range [][]string{winTenantA, winTenantB} {
		tenant := h[1]
		app.createWindow(t, winBody("w1", "c", "original", winItems(2, func(i int) string { return tenant + " secret" })), h...)
		app.createWindow(t, winBody("w2", "c", "compressed", winItems(1, func(i int) string { return tenant + " summary" })), h...)
		app.post(t, pathDerivations, map[string]any{"id": "d", "sourceWindowId": "w1", "targetWindowId": "w2", "kind": "compress", "strategy": tenant}, h...).
			requireOK(t, http.StatusCreated, nil)
		inv := winInvocation("i", "c", "w2")
		inv["responseContent"] = tenant + " answer"
		app.post(t, pathInvocations, inv, h...).requireOK(t, http.StatusOK, nil)
	}
	for _, h := range [][]string{winTenantA, winTenantB} {
		tenant := h[1]
		var w contract.Window
		app.post(t, pathWindowsGet, map[string]any{"windowId": "w1"}, h...).requireOK(t, http.StatusOK, &w)
		require.Equal(t, tenant+" secret", w.Items[0].Content)
		var l contract.Lineage
		app.post(t, pathWindowsLineage, map[string]any{"windowId": "w2"}, h...).requireOK(t, http.StatusOK, &l)
		require.Len(t, l.Windows, 2)
		require.Len(t, l.Derivations, 1)
		require.Equal(t, tenant, *l.Derivations[0].Strategy)
		var m contract.ModelInvocation
		app.post(t, pathInvocationsGet, map[string]any{"invocationId": "i"}, h...).requireOK(t, http.StatusOK, &m)
		require.Equal(t, tenant+" answer", *m.ResponseContent)
	}
	// A third tenant sees none of it, and cannot point at it.
	third := []string{"x-infra-tenant-id", "tenant-c", "x-infra-project-id", "project-1"}
	app.post(t, pathWindowsGet, map[string]any{"windowId": "w1"}, third...).requireError(t, http.StatusNotFound, contract.CodeNotFound)
	app.post(t, pathWindowsLineage, map[string]any{"windowId": "w2"}, third...).requireError(t, http.StatusNotFound, contract.CodeNotFound)
	app.post(t, pathInvocationsGet, map[string]any{"invocationId": "i"}, third...).requireError(t, http.StatusNotFound, contract.CodeNotFound)
	app.post(t, pathDerivations, map[string]any{"sourceWindowId": "w1", "targetWindowId": "w2", "kind": "trim"}, third...).
		requireError(t, http.StatusNotFound, contract.CodeNotFound)
	app.post(t, pathInvocations, winInvocation("i", "c", "w2"), third...).requireError(t, http.StatusNotFound, contract.CodeNotFound)
	// Tenant B's windows are unchanged by tenant A's identical-ID writes: a retry with
	// tenant A's content conflicts only in A's scope.
	app.post(t, pathWindows, winBody("w1", "c", "original", winItems(2, func(int) string { return "tenant-a secret" })), winTenantB...).
		requireError(t, http.StatusConflict, contract.CodeIdempotencyConflict)
	app.post(t, pathWindows, winBody("w1", "c", "original", winItems(2, func(int) string { return "tenant-a secret" })), third...).
		requireOK(t, http.StatusCreated, nil)
}

func TestWindowsCapabilities(t *testing.T) {
	t.Parallel()
	app, minter := startSecuredApp(t)
	mint := minter.bearer
	steps := []struct {
		route  contract.Route
		body   any
		status int
	}{
		{contract.RouteWindowsCreate, winBody("w1", "c", "original", winItems(1, winSmall)), http.StatusCreated},
		{contract.RouteWindowsCreate, winBody("w2", "c", "assembled", winItems(1, winSmall)), http.StatusCreated},
		{contract.RouteWindowsGet, map[string]any{"windowId": "w1"}, http.StatusOK},
		{contract.RouteDerivationsCreate, map[string]any{"sourceWindowId": "w1", "targetWindowId": "w2", "kind": "assemble"}, http.StatusCreated},
		{contract.RouteWindowsLineage, map[string]any{"windowId": "w2"}, http.StatusOK},
		{contract.RouteModelInvocationsCreate, winInvocation("i", "c", "w2"), http.StatusOK},
		{contract.RouteModelInvocationsGet, map[string]any{"invocationId": "i"}, http.StatusOK},
	}
	for _, s := range steps {
		required := s.route.Capabilities[0]
		other := contract.CapContextRead
		if required == contract.CapContextRead {
			other = contract.CapContextWrite
		}
		e := app.post(t, s.route.Path, s.body, "Authorization", mint(other, contract.CapMessagesAppend)).
			requireError(t, http.StatusForbidden, contract.CodeTokenForbidden)
		require.Equal(t, required, e.Details["requiredCapability"])
		app.post(t, s.route.Path, s.body, "Authorization", mint(required)).requireOK(t, s.status, nil)
	}
}

// TestWindowsConversationDeleteRemovesEveryRow deletes a conversation through the
// route and checks that, once the operation succeeded, no window, item, derivation or
// invocation content of it remains in any column of any table; a derivation from it
// into a kept conversation goes with it.
func TestWindowsConversationDeleteRemovesEveryRow(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	const conv = "conv-window-doomed"
	secret := func(i int) string { return fmt.Sprintf("okapiwindowcontent %d", i) }
	items := winItems(3, secret)
	items[1]["metadata"] = map[string]any{"note": "okapiitemmeta"}
	items = append(items, map[string]any{"id": "kb", "ordinal": 3, "kind": "knowledge_evidence", "content": secret(3),
		"knowledgeEvidence": map[string]any{"provider": "p", "resourceRef": "okapiresource", "excerpt": "okapiexcerpt"}})
	body := winBody("w1", conv, "original", items)
	body["metadata"] = map[string]any{"note": "okapiwindowmeta"}
	app.createWindow(t, body)
	app.createWindow(t, winBody("w2", conv, "compressed", winItems(1, secret)))
	app.createWindow(t, winBody("kept", "kept-conversation", "assembled", winItems(1, func(int) string { return "kept" })))
	app.post(t, pathDerivations, map[string]any{"sourceWindowId": "w1", "targetWindowId": "w2", "kind": "compress",
		"strategy": "okapistrategy", "metadata": map[string]any{"note": "okapiderivationmeta"}}).requireOK(t, http.StatusCreated, nil)
	app.post(t, pathDerivations, map[string]any{"sourceWindowId": "w2", "targetWindowId": "kept", "kind": "assemble",
		"metadata": map[string]any{"note": "okapicrossmeta"}}).requireOK(t, http.StatusCreated, nil)
	inv := winInvocation("i1", conv, "w2")
	inv["responseContent"] = "okapiresponse"
	inv["metadata"] = map[string]any{"note": "okapiinvocationmeta"}
	app.post(t, pathInvocations, inv).requireOK(t, http.StatusOK, nil)

	_, op := app.deleteConversation(t, conv)
	app.post(t, pathWindowsGet, map[string]any{"windowId": "w1"}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
	done := app.waitOperation(t, op.ID)
	require.Equal(t, contract.OperationSucceeded, done.State, "%+v", done)

	pool := openPool(t, app.dsn)
	require.Empty(t, columnsContaining(t, pool, "okapi"))
	for _, table := range []string{"context_windows", "context_window_items", "window_derivations", "model_invocations"} {
		var n int
		require.NoError(t, pool.QueryRow(context.Background(),
			fmt.Sprintf(`SELECT count(*) FROM %s WHERE conversation_id = $1`, table), conv).Scan(&n))
		require.Zero(t, n, table)
	}
	var l contract.Lineage
	app.post(t, pathWindowsLineage, map[string]any{"windowId": "kept"}).requireOK(t, http.StatusOK, &l)
	require.Len(t, l.Windows, 1)
	require.Empty(t, l.Derivations)
}

// requireShape asserts a response body equals want exactly (every member present, null
// where empty), after copying the server's createdAtMs into want.
func requireShape(t *testing.T, resp *testResponse, status int, want string) {
	t.Helper()
	require.Equal(t, status, resp.Status, "body: %s", resp.Body)
	var got map[string]any
	require.NoError(t, json.Unmarshal(resp.Body, &got))
	created, ok := got["createdAtMs"].(float64)
	require.True(t, ok, "createdAtMs: %s", resp.Body)
	require.Positive(t, created)
	var expected map[string]any
	require.NoError(t, json.Unmarshal([]byte(want), &expected))
	expected["createdAtMs"] = created
	require.Equal(t, expected, got)
}

// TestWindowsWireShapes sends the spec's examples and compares the whole answers with
// the documents the spec shows: every member present, null where empty.
func TestWindowsWireShapes(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	window := `{"id": "window-1", "conversation": {"conversationId": "conversation-1"}, "stage": "assembled",
		"purpose": "chat_completion", "tokenCount": 320,
		"items": [{"id": "item-1", "ordinal": 0, "kind": "message", "role": "user", "content": "hello",
			"sourceRecordId": "message-1", "knowledgeEvidence": null, "metadata": null},
			{"id": "item-2", "ordinal": 1, "kind": "tool_result", "content": ""}],
		"metadata": null}`
	sum := sha256.Sum256([]byte(`[{"content":"hello","id":"item-1","kind":"message","knowledgeEvidence":null,"metadata":null,"ordinal":0,"role":"user","sourceRecordId":"message-1"},` +
		`{"content":"","id":"item-2","kind":"tool_result","knowledgeEvidence":null,"metadata":null,"ordinal":1,"role":null,"sourceRecordId":null}]`))
	header := `"id": "window-1", "conversation": {"conversationId": "conversation-1"}, "stage": "assembled",
		"purpose": "chat_completion", "tokenCount": 320, "metadata": null, "itemCount": 2, "contentBytes": 5,
		"contentSha256": "` + hex.EncodeToString(sum[:]) + `"`
	requireShape(t, app.post(t, pathWindows, window), http.StatusCreated, `{`+header+`}`)
	requireShape(t, app.post(t, pathWindows, window), http.StatusOK, `{`+header+`}`)
	requireShape(t, app.post(t, pathWindowsGet, `{"windowId": "window-1"}`), http.StatusOK, `{`+header+`,
		"items": [{"id": "item-1", "ordinal": 0, "kind": "message", "role": "user", "content": "hello",
			"sourceRecordId": "message-1", "knowledgeEvidence": null, "metadata": null},
			{"id": "item-2", "ordinal": 1, "kind": "tool_result", "role": null, "content": "",
			"sourceRecordId": null, "knowledgeEvidence": null, "metadata": null}]}`)

	app.createWindow(t, winBody("window-2", "conversation-1", "compressed", winItems(1, winSmall)))
	derivation := `{"id": "derivation-1", "sourceWindowId": "window-1", "targetWindowId": "window-2",
		"kind": "compress", "strategy": "summarize-oldest", "strategyVersion": "1",
		"inputTokenCount": 9000, "outputTokenCount": 3000, "inputItemCount": 40, "outputItemCount": 12,
		"metadata": null}`
	requireShape(t, app.post(t, pathDerivations, derivation), http.StatusCreated, derivation)
	requireShape(t, app.post(t, pathDerivations, derivation), http.StatusOK, derivation)
	bare := `{"id": "derivation-2", "sourceWindowId": "window-1", "targetWindowId": "window-2", "kind": "trim"}`
	requireShape(t, app.post(t, pathDerivations, bare), http.StatusCreated, `{"id": "derivation-2",
		"sourceWindowId": "window-1", "targetWindowId": "window-2", "kind": "trim", "strategy": null,
		"strategyVersion": null, "inputTokenCount": null, "outputTokenCount": null, "inputItemCount": null,
		"outputItemCount": null, "metadata": null}`)

	var lineage map[string][]map[string]any
	app.post(t, pathWindowsLineage, `{"windowId": "window-2"}`).requireOK(t, http.StatusOK, &lineage)
	require.Len(t, lineage["windows"], 2)
	require.ElementsMatch(t, []string{"id", "stage", "purpose", "tokenCount", "itemCount", "createdAtMs"}, slices.Collect(maps.Keys(lineage["windows"][0])))
	require.Len(t, lineage["derivations"], 2)
	require.Len(t, lineage["derivations"][0], 12, "a lineage derivation is the full record")

	invocation := `{"id": "invocation-1", "conversation": {"conversationId": "conversation-1"},
		"requestWindowId": "window-2", "agentId": "planner", "toolName": null, "provider": "openai",
		"model": "gpt-4.1-mini", "state": "succeeded", "inputTokens": 3000, "outputTokens": 250,
		"cachedTokens": 1024, "startedAtMs": 1700000000000, "completedAtMs": 1700000000840, "latencyMs": 840,
		"finishReason": "stop", "responseContent": "...", "error": null, "metadata": null}`
	requireShape(t, app.post(t, pathInvocations, invocation), http.StatusOK, invocation)
	requireShape(t, app.post(t, pathInvocations, invocation), http.StatusOK, invocation)
	requireShape(t, app.post(t, pathInvocationsGet, `{"invocationId": "invocation-1"}`), http.StatusOK, invocation)
}

// TestWindowsEmptyIDs checks that an explicit empty ID is an invalid client-chosen ID,
// not a request to generate one (only an absent or null ID is), on every create route.
func TestWindowsEmptyIDs(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	app.createWindow(t, winBody("w1", "c", "original", winItems(1, winSmall)))
	app.createWindow(t, winBody("w2", "c", "assembled", winItems(1, winSmall)))
	e := app.post(t, pathDerivations, map[string]any{"id": "", "sourceWindowId": "w1", "targetWindowId": "w2", "kind": "assemble"}).
		requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
	requireWinField(t, e, "id")
	for _, field := range []string{"id", "agentId"} {
		inv := winInvocation("i1", "c", "w2")
		inv[field] = ""
		e = app.post(t, pathInvocations, inv).requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
		requireWinField(t, e, field)
	}
	var d contract.Derivation
	app.post(t, pathDerivations, map[string]any{"id": nil, "sourceWindowId": "w1", "targetWindowId": "w2", "kind": "assemble"}).
		requireOK(t, http.StatusCreated, &d)
	require.NotEmpty(t, d.ID)
	inv := winInvocation("", "c", "w2")
	inv["id"], inv["agentId"] = nil, nil
	var m contract.ModelInvocation
	app.post(t, pathInvocations, inv).requireOK(t, http.StatusOK, &m)
	require.NotEmpty(t, m.ID)
	require.Equal(t, "service", m.AgentID, "agentId null is the caller's subject")
}

// TestWindowAndInvocationLists: windows/list and model-invocations/list page newest
// first over the scope or one conversation, leave out deleted conversations, and bind
// their cursors to the list and the conversation.
func TestWindowAndInvocationLists(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	pathList, pathInvList := contract.RouteWindowsList.Path, contract.RouteModelInvocationsList.Path
	windows := map[string]contract.Window{}
	for _, w := range []struct{ id, conversation string }{{"w1", "c1"}, {"w2", "c2"}, {"w3", "c1"}, {"w4", "c3"}, {"w5", "c1"}} {
		windows[w.id] = app.createWindow(t, winBody(w.id, w.conversation, "original", winItems(2, winSmall)))
	}
	byTime := func(ids ...string) []string {
		out := append([]string{}, ids...)
		slices.SortFunc(out, func(x, y string) int {
			if c := cmp.Compare(windows[y].CreatedAtMs, windows[x].CreatedAtMs); c != 0 {
				return c
			}
			return strings.Compare(x, y)
		})
		return out
	}
	require.Equal(t, byTime("w1", "w2", "w3", "w4", "w5"), listAll(t, app, pathList, nil, "windows"))
	require.Equal(t, byTime("w1", "w3", "w5"), listAll(t, app, pathList, map[string]any{"conversationId": "c1"}, "windows"))
	var page contract.WindowList
	app.post(t, pathList, map[string]any{"conversationId": "c2"}).requireOK(t, http.StatusOK, &page)
	require.Len(t, page.Windows, 1)
	require.Equal(t, windows["w2"], page.Windows[0], "a summary is the window without its items")

	// Invocations: startedAtMs descending, then ID.
	for i, inv := range []struct {
		id, conversation, window string
		startedAtMs              int64
	}{{"i1", "c1", "w1", 3000}, {"i2", "c1", "w3", 1000}, {"i3", "c2", "w2", 3000}, {"i4", "c1", "w5", 2000}} {
		body := winInvocation(inv.id, inv.conversation, inv.window)
		body["startedAtMs"], body["completedAtMs"] = inv.startedAtMs, inv.startedAtMs+int64(i)
		app.post(t, pathInvocations, body).requireOK(t, http.StatusOK, nil)
	}
	require.Equal(t, []string{"i1", "i3", "i4", "i2"}, listAll(t, app, pathInvList, nil, "invocations"))
	require.Equal(t, []string{"i1", "i4", "i2"}, listAll(t, app, pathInvList, map[string]any{"conversationId": "c1"}, "invocations"))
	var invs contract.InvocationList
	app.post(t, pathInvList, map[string]any{"conversationId": "c2"}).requireOK(t, http.StatusOK, &invs)
	var got contract.ModelInvocation
	app.post(t, pathInvocationsGet, map[string]any{"invocationId": "i3"}).requireOK(t, http.StatusOK, &got)
	require.Equal(t, []contract.ModelInvocation{got}, invs.Invocations)

	// Cursors are bound to the list and the conversation.
	app.post(t, pathList, map[string]any{"conversationId": "c1", "limit": 1}).requireOK(t, http.StatusOK, &page)
	require.NotNil(t, page.NextCursor)
	for _, bad := range []struct {
		path string
		body map[string]any
	}{
		{pathList, map[string]any{"cursor": *page.NextCursor}},
		{pathList, map[string]any{"conversationId": "c2", "cursor": *page.NextCursor}},
		{pathInvList, map[string]any{"conversationId": "c1", "cursor": *page.NextCursor}},
	} {
		e := app.post(t, bad.path, bad.body).requireError(t, http.StatusBadRequest, contract.CodeInvalidCursor)
		requireWinField(t, e, "cursor")
	}
	for _, path := range []string{pathList, pathInvList} {
		for _, body := range []map[string]any{{"limit": 0}, {"limit": 501}} {
			e := app.post(t, path, body).requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
			requireWinField(t, e, "limit")
			require.EqualValues(t, 500, e.Details["limit"])
		}
		e := app.post(t, path, map[string]any{"conversationId": "a b"}).requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
		requireWinField(t, e, "conversationId")
	}

	// A deleted conversation's windows and invocations are listed no more.
	app.post(t, contract.RouteConversationsDelete.Path, map[string]any{"conversationId": "c1"}).requireOK(t, http.StatusAccepted, nil)
	require.Equal(t, byTime("w2", "w4"), listAll(t, app, pathList, nil, "windows"))
	require.Equal(t, []string{"i3"}, listAll(t, app, pathInvList, nil, "invocations"))
	require.Empty(t, listAll(t, app, pathList, map[string]any{"conversationId": "c1"}, "windows"))
}
