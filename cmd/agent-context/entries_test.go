package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime/memory"
)

var (
	pathEntries       = contract.RouteEntriesCreate.Path
	pathEntriesGet    = contract.RouteEntriesGet.Path
	pathEntriesMerge  = contract.RouteEntriesMerge.Path
	pathEntriesFix    = contract.RouteEntriesCorrect.Path
	pathEntriesExpire = contract.RouteEntriesExpire.Path
	pathRecall        = contract.RouteRecall.Path
	pathRebuild       = contract.RouteVectorRebuild.Path
)

// entryBody is a create request of a fact with content.
func entryBody(id, content string) map[string]any {
	return map[string]any{"id": id, "kind": "fact", "content": content}
}

func (a *testApp) createEntry(t *testing.T, body any, headers ...string) contract.ContextEntry {
	t.Helper()
	var e contract.ContextEntry
	a.post(t, pathEntries, body, headers...).requireOK(t, http.StatusCreated, &e)
	return e
}

func (a *testApp) getEntry(t *testing.T, id string, headers ...string) contract.ContextEntry {
	t.Helper()
	var e contract.ContextEntry
	a.post(t, pathEntriesGet, map[string]any{"entryId": id}, headers...).requireOK(t, http.StatusOK, &e)
	return e
}

func (a *testApp) recall(t *testing.T, body any, headers ...string) contract.RecallResponse {
	t.Helper()
	var res contract.RecallResponse
	a.post(t, pathRecall, body, headers...).requireOK(t, http.StatusOK, &res)
	require.NotNil(t, res.Results)
	return res
}

// recallIDs recalls and returns the IDs of the results, best first.
func (a *testApp) recallIDs(t *testing.T, body any, headers ...string) []string {
	t.Helper()
	return resultIDs(a.recall(t, body, headers...).Results)
}

func resultIDs(results []contract.RecallResult) []string {
	ids := []string{}
	for _, r := range results {
		ids = append(ids, r.Entry.ID)
	}
	return ids
}

// waitProjected waits until the caller's scope has no entry waiting to be embedded.
func (a *testApp) waitProjected(t *testing.T, headers ...string) contract.VectorProjectionStatus {
	t.Helper()
	deadline := time.Now().Add(operationDeadline)
	for {
		st := a.status(t, headers...).VectorProjection
		if st.PendingEntries == 0 {
			return st
		}
		require.True(t, time.Now().Before(deadline), "%d entries still pending", st.PendingEntries)
		time.Sleep(20 * time.Millisecond)
	}
}

// TestEntriesCreateAndGet: every member on the wire, the defaults, the server's
// fields, and create's idempotency.
func TestEntriesCreateAndGet(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	before := time.Now().UnixMilli()
	expires := before + time.Hour.Milliseconds()
	body := map[string]any{
		"id": "entry-1", "kind": "preference", "content": "The user prefers dark mode.",
		"conversationId": "conv-1", "sourceRecordIds": []string{"m-7", "m-8"}, "tags": []string{"ui", "prefs"},
		"importance": 0.8, "expiresAtMs": expires, "metadata": map[string]any{"b": 1, "a": []int{1, 2}},
	}
	r := app.post(t, pathEntries, body)
	var wire map[string]json.RawMessage
	r.requireOK(t, http.StatusCreated, &wire)
	require.Len(t, wire, 16, "every member of a ContextEntry: %s", r.Body)
	for field, want := range map[string]string{
		"status": `"active"`, "version": "1", "supersedes": "null", "supersededBy": "null", "mergedInto": "null",
		"metadata": `{"b":1,"a":[1,2]}`, "tags": `["ui","prefs"]`, "sourceRecordIds": `["m-7","m-8"]`,
		"importance": "0.8", "conversationId": `"conv-1"`,
	} {
		require.JSONEq(t, want, string(wire[field]), field)
	}
	var e contract.ContextEntry
	r.requireOK(t, http.StatusCreated, &e)
	require.GreaterOrEqual(t, e.CreatedAtMs, before)
	require.Equal(t, e.CreatedAtMs, e.UpdatedAtMs)
	require.Equal(t, expires, *e.ExpiresAtMs)
	require.Equal(t, e, app.getEntry(t, "entry-1"))

	// An identical retry answers 200 with the stored entry; a key order or number
	// spelling of metadata is no difference, any client field is.
	retry := map[string]any{}
	for k, v := range body {
		retry[k] = v
	}
	retry["metadata"] = json.RawMessage(`{"a":[1,2.0],"b":1}`)
	var again contract.ContextEntry
	app.post(t, pathEntries, retry).requireOK(t, http.StatusOK, &again)
	require.Equal(t, e, again)
	for field, value := range map[string]any{
		"content": "The user prefers light mode.", "kind": "fact", "tags": []string{"ui"}, "importance": 0.5,
		"conversationId": nil, "sourceRecordIds": nil, "expiresAtMs": expires + 1, "metadata": nil,
	} {
		changed := map[string]any{}
		for k, v := range body {
			changed[k] = v
		}
		changed[field] = value
		env := app.post(t, pathEntries, changed).requireError(t, http.StatusConflict, contract.CodeIdempotencyConflict)
		require.Equal(t, []any{"entry-1"}, env.Details["ids"], field)
	}
	require.Equal(t, e, app.getEntry(t, "entry-1"), "a refused create changes nothing")

	// Defaults: a generated ID, importance 0.5, empty lists, nulls.
	r = app.post(t, pathEntries, map[string]any{"kind": "fact", "content": "Staging deploys from main."})
	r.requireOK(t, http.StatusCreated, &wire)
	for field, want := range map[string]string{
		"importance": "0.5", "tags": "[]", "sourceRecordIds": "[]", "conversationId": "null",
		"expiresAtMs": "null", "metadata": "null",
	} {
		require.JSONEq(t, want, string(wire[field]), field)
	}
	var generated string
	require.NoError(t, json.Unmarshal(wire["id"], &generated))
	require.Len(t, generated, 36, "a UUIDv7")

	app.post(t, pathEntriesGet, map[string]any{"entryId": "nope"}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
	app.post(t, pathEntriesGet, map[string]any{"entryId": "entry-1"}, "x-infra-tenant-id", "other").
		requireError(t, http.StatusNotFound, contract.CodeNotFound)
}

// fieldErr asserts an error envelope with details.field (and details.limit when limit
// is not nil).
func fieldErr(t *testing.T, r *testResponse, status int, code, field string, limit any) {
	t.Helper()
	e := r.requireError(t, status, code)
	require.Equal(t, field, e.Details["field"], "body: %s", r.Body)
	if limit != nil {
		require.EqualValues(t, limit, e.Details["limit"], "body: %s", r.Body)
	}
}

// TestEntriesBadInput: every bad input of the entry routes gets the contract's error
// with details.field (and details.limit for bounds), and nothing is written.
func TestEntriesBadInput(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	now := time.Now().UnixMilli()
	with := func(field string, value any) map[string]any {
		b := entryBody("e-bad", "some content")
		b[field] = value
		return b
	}
	tags := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("t%d", i)
		}
		return out
	}
	ids := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("s%d", i)
		}
		return out
	}
	for _, c := range []struct {
		name   string
		body   any
		status int
		field  string
		limit  any
	}{
		{"empty content", with("content", ""), 400, "content", nil},
		{"whitespace content", with("content", " \n\t"), 400, "content", nil},
		{"absent content", map[string]any{"kind": "fact"}, 400, "content", nil},
		{"oversized content", with("content", strings.Repeat("x", contract.MaxEntryContentBytes+1)), 413, "content", contract.MaxEntryContentBytes},
		{"NUL in content", with("content", "a\x00b"), 400, "content", nil},
		{"unknown kind", with("kind", "rumour"), 400, "kind", nil},
		{"absent kind", map[string]any{"content": "x"}, 400, "kind", nil},
		{"too many tags", with("tags", tags(contract.MaxEntryTags+1)), 400, "tags", contract.MaxEntryTags},
		{"a tag with a space", with("tags", []string{"ok", "not ok"}), 400, "tags[1]", nil},
		{"a repeated tag", with("tags", []string{"a", "b", "a"}), 400, "tags[2]", nil},
		{"too many sources", with("sourceRecordIds", ids(contract.MaxEntrySourceRecordIDs+1)), 400, "sourceRecordIds", contract.MaxEntrySourceRecordIDs},
		{"an empty source", with("sourceRecordIds", []string{""}), 400, "sourceRecordIds[0]", nil},
		{"importance above 1", with("importance", 1.5), 400, "importance", 1},
		{"negative importance", with("importance", -0.1), 400, "importance", 1},
		{"expiry in the past", with("expiresAtMs", now-1), 400, "expiresAtMs", nil},
		{"expiry beyond 2^53-1", with("expiresAtMs", int64(1)<<53), 400, "expiresAtMs", int64(1)<<53 - 1},
		{"a bad conversation ID", with("conversationId", "a b"), 400, "conversationId", nil},
		{"an empty ID", with("id", ""), 400, "id", nil},
		{"oversized metadata", with("metadata", map[string]any{"x": strings.Repeat("m", contract.MaxMetadataBytes)}), 413, "metadata", contract.MaxMetadataBytes},
		{"server-owned status", with("status", "active"), 400, "status", nil},
		{"server-owned version", with("version", 1), 400, "version", nil},
		{"server-owned supersedes", with("supersedes", nil), 400, "supersedes", nil},
		{"server-owned supersededBy", with("supersededBy", "x"), 400, "supersededBy", nil},
		{"server-owned mergedInto", with("mergedInto", "x"), 400, "mergedInto", nil},
		{"server-owned createdAtMs", with("createdAtMs", 0), 400, "createdAtMs", nil},
		{"server-owned updatedAtMs", with("updatedAtMs", 0), 400, "updatedAtMs", nil},
		{"a tenant in the body", with("tenantId", "other"), 400, "tenantId", nil},
	} {
		r := app.post(t, pathEntries, c.body)
		code := contract.CodeValidationFailed
		if c.status == 413 {
			code = contract.CodePayloadTooLarge
		}
		t.Run(c.name, func(t *testing.T) { fieldErr(t, r, c.status, code, c.field, c.limit) })
	}
	app.post(t, pathEntriesGet, map[string]any{"entryId": "e-bad"}).requireError(t, http.StatusNotFound, contract.CodeNotFound)

	// The other routes.
	app.createEntry(t, entryBody("a", "first"))
	app.createEntry(t, entryBody("b", "second"))
	manyIDs := ids(contract.MaxMergeEntries + 1)
	merged := map[string]any{"kind": "fact", "content": "both"}
	for _, c := range []struct {
		name, path string
		body       any
		status     int
		field      string
		limit      any
	}{
		{"get without an ID", pathEntriesGet, map[string]any{}, 400, "entryId", nil},
		{"correct without content", pathEntriesFix, map[string]any{"entryId": "a"}, 400, "content", nil},
		{"correct with oversized content", pathEntriesFix, map[string]any{"entryId": "a", "content": strings.Repeat("x", contract.MaxEntryContentBytes+1)}, 413, "content", contract.MaxEntryContentBytes},
		{"correct with a past expiry", pathEntriesFix, map[string]any{"entryId": "a", "content": "x", "expiresAtMs": now}, 400, "expiresAtMs", nil},
		{"correct with too many tags", pathEntriesFix, map[string]any{"entryId": "a", "content": "x", "tags": tags(33)}, 400, "tags", contract.MaxEntryTags},
		{"correct with a long reason", pathEntriesFix, map[string]any{"entryId": "a", "content": "x", "reason": strings.Repeat("r", contract.MaxEntryReasonChars+1)}, 400, "reason", contract.MaxEntryReasonChars},
		{"correct with a server field", pathEntriesFix, map[string]any{"entryId": "a", "content": "x", "version": 2}, 400, "version", nil},
		{"merge one entry", pathEntriesMerge, map[string]any{"entryIds": []string{"a"}, "merged": merged}, 400, "entryIds", nil},
		{"merge 101 entries", pathEntriesMerge, map[string]any{"entryIds": manyIDs, "merged": merged}, 400, "entryIds", contract.MaxMergeEntries},
		{"merge a repeated entry", pathEntriesMerge, map[string]any{"entryIds": []string{"a", "b", "a"}, "merged": merged}, 400, "entryIds[2]", nil},
		{"merge without merged", pathEntriesMerge, map[string]any{"entryIds": []string{"a", "b"}}, 400, "merged", nil},
		{"merge with empty content", pathEntriesMerge, map[string]any{"entryIds": []string{"a", "b"}, "merged": map[string]any{"kind": "fact", "content": ""}}, 400, "merged.content", nil},
		{"merge with a bad kind", pathEntriesMerge, map[string]any{"entryIds": []string{"a", "b"}, "merged": map[string]any{"kind": "x", "content": "c"}}, 400, "merged.kind", nil},
		{"merge naming sources", pathEntriesMerge, map[string]any{"entryIds": []string{"a", "b"}, "merged": map[string]any{"kind": "fact", "content": "c", "sourceRecordIds": []string{"m"}}}, 400, "merged.sourceRecordIds", nil},
		{"expire without an ID", pathEntriesExpire, map[string]any{"reason": "old"}, 400, "entryId", nil},
		{"expire with a server field", pathEntriesExpire, map[string]any{"entryId": "a", "status": "expired"}, 400, "status", nil},
		{"recall without a query", pathRecall, map[string]any{}, 400, "query", nil},
		{"recall with a blank query", pathRecall, map[string]any{"query": "   "}, 400, "query", nil},
		{"recall with an oversized query", pathRecall, map[string]any{"query": strings.Repeat("q", contract.MaxRecallQueryBytes+1)}, 413, "query", contract.MaxRecallQueryBytes},
		{"recall topK 0", pathRecall, map[string]any{"query": "q", "topK": 0}, 400, "topK", contract.MaxRecallTopK},
		{"recall topK 101", pathRecall, map[string]any{"query": "q", "topK": 101}, 400, "topK", contract.MaxRecallTopK},
		{"recall topK 2.5", pathRecall, map[string]any{"query": "q", "topK": 2.5}, 400, "topK", nil},
		{"recall in an unknown mode", pathRecall, map[string]any{"query": "q", "mode": "fuzzy"}, 400, "mode", nil},
		{"recall an unknown kind", pathRecall, map[string]any{"query": "q", "filter": map[string]any{"kinds": []string{"fact", "rumour"}}}, 400, "filter.kinds[1]", nil},
		{"recall with too many tags", pathRecall, map[string]any{"query": "q", "filter": map[string]any{"tags": tags(33)}}, 400, "filter.tags", contract.MaxEntryTags},
		{"recall with a bad conversation", pathRecall, map[string]any{"query": "q", "filter": map[string]any{"conversationId": ""}}, 400, "filter.conversationId", nil},
		{"recall with an unknown filter", pathRecall, map[string]any{"query": "q", "filter": map[string]any{"status": "active"}}, 400, "filter.status", nil},
		{"recall with a non-numeric minScore", pathRecall, map[string]any{"query": "q", "minScore": "high"}, 400, "minScore", nil},
		{"rebuild with an unknown embedder", pathRebuild, map[string]any{"embedder": "bert"}, 400, "embedder", nil},
		{"rebuild with an unconfigured embedder", pathRebuild, map[string]any{"embedder": "openai"}, 400, "embedder", nil},
		{"rebuild with an unknown field", pathRebuild, map[string]any{"embedder": nil, "tenantId": "x"}, 400, "tenantId", nil},
	} {
		r := app.post(t, c.path, c.body)
		code := contract.CodeValidationFailed
		if c.status == 413 {
			code = contract.CodePayloadTooLarge
		}
		t.Run(c.name, func(t *testing.T) { fieldErr(t, r, c.status, code, c.field, c.limit) })
	}
	for _, id := range []string{"a", "b"} {
		e := app.getEntry(t, id)
		require.Equal(t, contract.EntryActive, e.Status, "refused requests change nothing")
		require.Equal(t, int64(1), e.Version)
	}
}

// TestEntriesCorrect: a correction creates the next version and supersedes the old
// one; only an active entry can be corrected; a refused correction changes nothing.
func TestEntriesCorrect(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	expires := time.Now().Add(time.Hour).UnixMilli()
	old := app.createEntry(t, map[string]any{"id": "e1", "kind": "instruction", "content": "Deploy on Fridays.",
		"conversationId": "c1", "sourceRecordIds": []string{"m1"}, "tags": []string{"deploy"}, "importance": 0.9,
		"expiresAtMs": expires, "metadata": map[string]any{"k": "v"}})

	var res contract.CorrectEntryResponse
	app.post(t, pathEntriesFix, map[string]any{"entryId": "e1", "content": "Never deploy on Fridays.", "reason": "policy changed"}).
		requireOK(t, http.StatusCreated, &res)
	v2 := res.Entry
	require.NotEqual(t, "e1", v2.ID)
	require.Equal(t, int64(2), v2.Version)
	require.Equal(t, "e1", *v2.Supersedes)
	require.Equal(t, contract.EntryActive, v2.Status)
	require.Equal(t, "Never deploy on Fridays.", v2.Content)
	// Inherited: kind, conversation, sources, tags, importance, expiry, metadata.
	require.Equal(t, old.Kind, v2.Kind)
	require.Equal(t, old.ConversationID, v2.ConversationID)
	require.Equal(t, old.SourceRecordIDs, v2.SourceRecordIDs)
	require.Equal(t, old.Tags, v2.Tags)
	require.Equal(t, old.Importance, v2.Importance)
	require.Equal(t, old.ExpiresAtMs, v2.ExpiresAtMs)
	require.JSONEq(t, string(old.Metadata), string(v2.Metadata))
	require.Equal(t, contract.EntrySuperseded, res.Superseded.Status)
	require.Equal(t, v2.ID, *res.Superseded.SupersededBy)
	require.GreaterOrEqual(t, res.Superseded.UpdatedAtMs, old.UpdatedAtMs)
	require.Equal(t, res.Superseded, app.getEntry(t, "e1"))
	require.Equal(t, v2, app.getEntry(t, v2.ID))

	// The superseded version cannot be corrected, merged or expired.
	e := app.post(t, pathEntriesFix, map[string]any{"entryId": "e1", "content": "again"}).
		requireError(t, http.StatusConflict, contract.CodeConflict)
	require.Equal(t, contract.EntrySuperseded, e.Details["status"])
	app.post(t, pathEntriesExpire, map[string]any{"entryId": "e1"}).requireError(t, http.StatusConflict, contract.CodeConflict)

	// Given fields replace the inherited ones; tags [] clears them.
	app.post(t, pathEntriesFix, map[string]any{"entryId": v2.ID, "content": "Deploy Tuesdays.", "tags": []string{},
		"importance": 0.1, "expiresAtMs": expires + 5}).requireOK(t, http.StatusCreated, &res)
	v3 := res.Entry
	require.Equal(t, int64(3), v3.Version)
	require.Equal(t, v2.ID, *v3.Supersedes)
	require.Empty(t, v3.Tags)
	require.NotNil(t, v3.Tags)
	require.Equal(t, 0.1, v3.Importance)
	require.Equal(t, expires+5, *v3.ExpiresAtMs)

	app.post(t, pathEntriesFix, map[string]any{"entryId": "missing", "content": "x"}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
	app.post(t, pathEntriesFix, map[string]any{"entryId": v3.ID, "content": "x"}, "x-infra-tenant-id", "other").
		requireError(t, http.StatusNotFound, contract.CodeNotFound)

	// Only the newest version is recalled.
	app.waitProjected(t)
	for _, mode := range contract.RecallModes {
		require.Equal(t, []string{v3.ID}, app.recallIDs(t, map[string]any{"query": "deploy Fridays Tuesdays", "mode": mode}), mode)
	}
}

// Concurrent corrections of one entry: exactly one wins, the others are CONFLICT.
func TestEntriesConcurrentCorrections(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	app.createEntry(t, entryBody("e", "original"))
	const n = 8
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = app.post(t, pathEntriesFix, map[string]any{"entryId": "e", "content": fmt.Sprintf("fix %d", i)}).Status
		}()
	}
	wg.Wait()
	won := 0
	for _, s := range statuses {
		require.Contains(t, []int{http.StatusCreated, http.StatusConflict}, s)
		if s == http.StatusCreated {
			won++
		}
	}
	require.Equal(t, 1, won, "%v", statuses)
	require.Equal(t, contract.EntrySuperseded, app.getEntry(t, "e").Status)
}

// TestEntriesMerge: a merge replaces active entries by one, atomically; every failure
// (unknown, foreign, not active) changes nothing; a retry naming the merged ID
// replays.
func TestEntriesMerge(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	later := time.Now().Add(2 * time.Hour).UnixMilli()
	app.createEntry(t, map[string]any{"id": "a", "kind": "fact", "content": "The API runs on port 8080.",
		"conversationId": "c", "sourceRecordIds": []string{"m1", "m2"}, "importance": 0.3, "expiresAtMs": later - 10})
	app.createEntry(t, map[string]any{"id": "b", "kind": "fact", "content": "The API listens on 8080 in staging.",
		"conversationId": "c", "sourceRecordIds": []string{"m2", "m3"}, "importance": 0.7, "expiresAtMs": later})
	app.createEntry(t, entryBody("gone", "superseded soon"))
	app.post(t, pathEntriesFix, map[string]any{"entryId": "gone", "content": "now"}).requireOK(t, http.StatusCreated, nil)
	app.createEntry(t, entryBody("theirs", "another tenant's"), "x-infra-tenant-id", "other")

	unchanged := func() {
		t.Helper()
		for _, id := range []string{"a", "b"} {
			require.Equal(t, contract.EntryActive, app.getEntry(t, id).Status, id)
		}
		app.post(t, pathEntriesGet, map[string]any{"entryId": "ab"}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
	}
	merged := map[string]any{"id": "ab", "kind": "fact", "content": "The API uses port 8080.", "tags": []string{"api"}}
	e := app.post(t, pathEntriesMerge, map[string]any{"entryIds": []string{"a", "b", "missing"}, "merged": merged}).
		requireError(t, http.StatusNotFound, contract.CodeNotFound)
	require.Equal(t, "entryIds[2]", e.Details["field"])
	unchanged()
	app.post(t, pathEntriesMerge, map[string]any{"entryIds": []string{"a", "theirs"}, "merged": merged}).
		requireError(t, http.StatusNotFound, contract.CodeNotFound)
	unchanged()
	e = app.post(t, pathEntriesMerge, map[string]any{"entryIds": []string{"a", "gone", "b"}, "merged": merged}).
		requireError(t, http.StatusConflict, contract.CodeConflict)
	require.Equal(t, []any{"gone"}, e.Details["ids"])
	unchanged()

	var res contract.MergeEntriesResponse
	app.post(t, pathEntriesMerge, map[string]any{"entryIds": []string{"b", "a"}, "merged": merged}).
		requireOK(t, http.StatusCreated, &res)
	m := res.Entry
	require.Equal(t, "ab", m.ID)
	require.Equal(t, contract.EntryActive, m.Status)
	require.Equal(t, int64(1), m.Version)
	require.Equal(t, []string{"m2", "m3", "m1"}, m.SourceRecordIDs, "the union, in the order of entryIds")
	require.Equal(t, "c", *m.ConversationID, "the conversation all sources share")
	require.Equal(t, 0.7, m.Importance, "the highest importance")
	require.Equal(t, later, *m.ExpiresAtMs, "the latest expiry")
	require.Equal(t, []string{"api"}, m.Tags)
	require.Equal(t, []string{"b", "a"}, resultIDs([]contract.RecallResult{{Entry: res.Sources[0]}, {Entry: res.Sources[1]}}))
	for _, src := range res.Sources {
		require.Equal(t, contract.EntryMerged, src.Status)
		require.Equal(t, "ab", *src.MergedInto)
		require.Equal(t, src, app.getEntry(t, src.ID))
	}
	require.Equal(t, m, app.getEntry(t, "ab"))

	// The same merge again replays; another merged entry under the ID conflicts; a
	// merged source cannot be merged again.
	var replay contract.MergeEntriesResponse
	app.post(t, pathEntriesMerge, map[string]any{"entryIds": []string{"b", "a"}, "merged": merged}).
		requireOK(t, http.StatusOK, &replay)
	require.Equal(t, res, replay)
	other := map[string]any{"id": "ab", "kind": "fact", "content": "Something else."}
	app.post(t, pathEntriesMerge, map[string]any{"entryIds": []string{"b", "a"}, "merged": other}).
		requireError(t, http.StatusConflict, contract.CodeIdempotencyConflict)
	app.post(t, pathEntriesMerge, map[string]any{"entryIds": []string{"a", "b"}, "merged": map[string]any{"kind": "fact", "content": "x"}}).
		requireError(t, http.StatusConflict, contract.CodeConflict)
	// An ID that exists as another entry is taken.
	app.createEntry(t, entryBody("c1", "one"))
	app.createEntry(t, entryBody("c2", "two"))
	app.post(t, pathEntriesMerge, map[string]any{"entryIds": []string{"c1", "c2"}, "merged": map[string]any{"id": "ab", "kind": "fact", "content": "x"}}).
		requireError(t, http.StatusConflict, contract.CodeIdempotencyConflict)
	require.Equal(t, contract.EntryActive, app.getEntry(t, "c1").Status)

	app.waitProjected(t)
	require.Equal(t, []string{"ab"}, app.recallIDs(t, map[string]any{"query": "API port 8080", "filter": map[string]any{"tags": []string{"api"}}}))
	ids := app.recallIDs(t, map[string]any{"query": "API port 8080 staging"})
	require.Contains(t, ids, "ab")
	require.NotContains(t, ids, "a", "merged sources are not recalled")
	require.NotContains(t, ids, "b")
}

// TestEntriesExpire: an expiry ends an entry now and is idempotent; a superseded or
// merged entry cannot expire; an entry whose expiresAtMs passed reads as expired and
// is no longer recalled, nor corrected.
func TestEntriesExpire(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	app.createEntry(t, entryBody("e", "The kiwi server is retired."))
	before := time.Now().UnixMilli()
	var ex contract.ContextEntry
	app.post(t, pathEntriesExpire, map[string]any{"entryId": "e", "reason": "obsolete"}).requireOK(t, http.StatusOK, &ex)
	require.Equal(t, contract.EntryExpired, ex.Status)
	require.GreaterOrEqual(t, *ex.ExpiresAtMs, before)
	require.Equal(t, *ex.ExpiresAtMs, ex.UpdatedAtMs)
	var again contract.ContextEntry
	app.post(t, pathEntriesExpire, map[string]any{"entryId": "e"}).requireOK(t, http.StatusOK, &again)
	require.Equal(t, ex, again, "nothing changes")
	require.Equal(t, ex, app.getEntry(t, "e"))
	app.post(t, pathEntriesFix, map[string]any{"entryId": "e", "content": "x"}).requireError(t, http.StatusConflict, contract.CodeConflict)
	app.post(t, pathEntriesExpire, map[string]any{"entryId": "nope"}).requireError(t, http.StatusNotFound, contract.CodeNotFound)

	app.createEntry(t, entryBody("s", "to be superseded"))
	app.post(t, pathEntriesFix, map[string]any{"entryId": "s", "content": "superseding"}).requireOK(t, http.StatusCreated, nil)
	e := app.post(t, pathEntriesExpire, map[string]any{"entryId": "s"}).requireError(t, http.StatusConflict, contract.CodeConflict)
	require.Equal(t, contract.EntrySuperseded, e.Details["status"])
	app.createEntry(t, entryBody("m1", "merge me"))
	app.createEntry(t, entryBody("m2", "merge me too"))
	app.post(t, pathEntriesMerge, map[string]any{"entryIds": []string{"m1", "m2"}, "merged": map[string]any{"kind": "fact", "content": "merged"}}).
		requireOK(t, http.StatusCreated, nil)
	app.post(t, pathEntriesExpire, map[string]any{"entryId": "m1"}).requireError(t, http.StatusConflict, contract.CodeConflict)

	// Natural expiry.
	soon := time.Now().Add(1500 * time.Millisecond).UnixMilli()
	app.createEntry(t, map[string]any{"id": "brief", "kind": "observation", "content": "The kiwi build is flaky today.", "expiresAtMs": soon})
	app.waitProjected(t)
	require.Contains(t, app.recallIDs(t, map[string]any{"query": "kiwi build flaky"}), "brief")
	time.Sleep(time.Until(time.UnixMilli(soon + 50)))
	require.Equal(t, contract.EntryExpired, app.getEntry(t, "brief").Status)
	for _, mode := range contract.RecallModes {
		require.NotContains(t, app.recallIDs(t, map[string]any{"query": "kiwi build flaky", "mode": mode}), "brief", mode)
	}
	app.post(t, pathEntriesFix, map[string]any{"entryId": "brief", "content": "x"}).requireError(t, http.StatusConflict, contract.CodeConflict)
	var unchanged contract.ContextEntry
	app.post(t, pathEntriesExpire, map[string]any{"entryId": "brief"}).requireOK(t, http.StatusOK, &unchanged)
	require.Equal(t, soon, *unchanged.ExpiresAtMs, "already expired: nothing changes")
	require.NotContains(t, app.recallIDs(t, map[string]any{"query": "kiwi server retired"}), "e", "an expired entry is not recalled")
}

// TestEntriesTombstonedConversation: an entry naming a deleted conversation is
// refused; the conversation's entries vanish with the deletion's 202.
func TestEntriesTombstonedConversation(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	body := entryBody("e", "The walrus cluster has three nodes.")
	body["conversationId"] = "c"
	app.createEntry(t, body)
	app.createEntry(t, entryBody("free", "The walrus cluster is in Frankfurt."))
	app.waitProjected(t)
	require.ElementsMatch(t, []string{"e", "free"}, app.recallIDs(t, map[string]any{"query": "walrus cluster"}))
	app.deleteConversation(t, "c")
	app.post(t, pathEntriesGet, map[string]any{"entryId": "e"}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
	for _, mode := range contract.RecallModes {
		require.Equal(t, []string{"free"}, app.recallIDs(t, map[string]any{"query": "walrus cluster", "mode": mode}), mode)
	}
	app.post(t, pathEntriesFix, map[string]any{"entryId": "e", "content": "x"}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
	app.post(t, pathEntriesExpire, map[string]any{"entryId": "e"}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
	body["id"] = "late"
	e := app.post(t, pathEntries, body).requireError(t, http.StatusConflict, contract.CodeConflict)
	require.Equal(t, "conversation_deleted", e.Details["reason"])
	merged := map[string]any{"kind": "fact", "content": "x", "conversationId": "c"}
	app.createEntry(t, entryBody("free2", "another"))
	e = app.post(t, pathEntriesMerge, map[string]any{"entryIds": []string{"free", "free2"}, "merged": merged}).
		requireError(t, http.StatusConflict, contract.CodeConflict)
	require.Equal(t, "conversation_deleted", e.Details["reason"])
	require.Equal(t, contract.EntryActive, app.getEntry(t, "free").Status)
}

// TestEntryEvents: every entry write appends one entry_written event per entry it
// created or changed, with IDs and the action only; retries and no-op expiries append
// none.
func TestEntryEvents(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	body := entryBody("a", "The lynx secret content.")
	body["conversationId"] = "c"
	app.createEntry(t, body)
	app.post(t, pathEntries, body).requireOK(t, http.StatusOK, nil)
	var fixed contract.CorrectEntryResponse
	app.post(t, pathEntriesFix, map[string]any{"entryId": "a", "content": "The lynx, corrected."}).requireOK(t, http.StatusCreated, &fixed)
	app.createEntry(t, entryBody("b", "bee"))
	app.post(t, pathEntriesMerge, map[string]any{"entryIds": []string{fixed.Entry.ID, "b"},
		"merged": map[string]any{"id": "ab", "kind": "fact", "content": "both"}}).requireOK(t, http.StatusCreated, nil)
	app.post(t, pathEntriesExpire, map[string]any{"entryId": "ab"}).requireOK(t, http.StatusOK, nil)
	app.post(t, pathEntriesExpire, map[string]any{"entryId": "ab"}).requireOK(t, http.StatusOK, nil)

	var page contract.EventPage
	r := app.post(t, contract.RouteA2AEventsPoll.Path, map[string]any{"filter": map[string]any{"kinds": []string{contract.EventEntryWritten}}})
	r.requireOK(t, http.StatusOK, &page)
	require.NotContains(t, string(r.Body), "lynx", "events hold IDs, never content")
	type payload struct {
		EntryID        string  `json:"entryId"`
		ConversationID *string `json:"conversationId"`
		Action         string  `json:"action"`
	}
	var got []payload
	for _, e := range page.Events {
		require.Equal(t, contract.ConsistencyEventual, e.ConsistencyLevel)
		var p payload
		require.NoError(t, json.Unmarshal(e.Payload, &p))
		got = append(got, p)
	}
	c := ptrTo("c")
	require.Equal(t, []payload{
		{"a", c, "created"},
		{fixed.Entry.ID, c, "corrected"}, {"a", c, "superseded"},
		{"b", nil, "created"},
		{"ab", nil, "merged"}, {fixed.Entry.ID, c, "merged_into"}, {"b", nil, "merged_into"},
		{"ab", nil, "expired"},
	}, got)
}

// listAll pages through a list route with limit 2 and returns the IDs in order, failing
// on a repeated one.
func listAll(t *testing.T, app *testApp, path string, body map[string]any, items string) []string {
	t.Helper()
	var ids []string
	seen := map[string]bool{}
	req := map[string]any{"limit": 2}
	for k, v := range body {
		req[k] = v
	}
	for {
		var page map[string]json.RawMessage
		app.post(t, path, req).requireOK(t, http.StatusOK, &page)
		var rows []struct {
			ID             string `json:"id"`
			ConversationID string `json:"conversationId"`
		}
		require.NoError(t, json.Unmarshal(page[items], &rows))
		require.LessOrEqual(t, len(rows), 2)
		for _, r := range rows {
			id := r.ID
			if id == "" {
				id = r.ConversationID
			}
			require.False(t, seen[id], "%s listed twice", id)
			seen[id] = true
			ids = append(ids, id)
		}
		var next *string
		require.NoError(t, json.Unmarshal(page["nextCursor"], &next))
		if next == nil {
			return ids
		}
		require.Len(t, rows, 2, "a page before the last is full")
		req["cursor"] = *next
	}
}

// TestEntriesListAndHistory: entries/list pages newest first through every filter with
// cursors bound to them, and entries/history returns a correction chain oldest first
// from any of its versions.
func TestEntriesListAndHistory(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	pathList, pathHistory := contract.RouteEntriesList.Path, contract.RouteEntriesHistory.Path
	app.createEntry(t, map[string]any{"id": "a", "kind": "fact", "content": "alpha", "tags": []string{"x"}, "conversationId": "c1"})
	app.createEntry(t, map[string]any{"id": "b", "kind": "preference", "content": "beta", "tags": []string{"x", "y"}})
	app.createEntry(t, map[string]any{"id": "c", "kind": "fact", "content": "gamma", "conversationId": "c1"})
	app.createEntry(t, entryBody("d", "delta"))
	app.createEntry(t, entryBody("e", "epsilon"))
	var fix contract.CorrectEntryResponse
	app.post(t, pathEntriesFix, map[string]any{"entryId": "a", "content": "alpha two"}).requireOK(t, http.StatusCreated, &fix)
	a2 := fix.Entry.ID
	app.post(t, pathEntriesFix, map[string]any{"entryId": a2, "content": "alpha three"}).requireOK(t, http.StatusCreated, &fix)
	a3 := fix.Entry.ID
	app.post(t, pathEntriesMerge, map[string]any{"entryIds": []string{"c", "d"},
		"merged": map[string]any{"id": "cd", "kind": "summary", "content": "gamma and delta"}}).requireOK(t, http.StatusCreated, nil)
	app.post(t, pathEntriesExpire, map[string]any{"entryId": "e"}).requireOK(t, http.StatusOK, nil)

	all := []string{"a", "b", "c", "d", "e", a2, a3, "cd"}
	entries := map[string]contract.ContextEntry{}
	for _, id := range all {
		entries[id] = app.getEntry(t, id)
	}
	newestFirst := func(ids ...string) []string {
		out := append([]string{}, ids...)
		slices.SortFunc(out, func(x, y string) int {
			if c := cmp.Compare(entries[y].CreatedAtMs, entries[x].CreatedAtMs); c != 0 {
				return c
			}
			return strings.Compare(x, y)
		})
		return out
	}
	for _, tc := range []struct {
		body map[string]any
		want []string
	}{
		{map[string]any{}, newestFirst(all...)},
		{map[string]any{"status": "active"}, newestFirst("b", a3, "cd")},
		{map[string]any{"status": "superseded"}, newestFirst("a", a2)},
		{map[string]any{"status": "merged"}, newestFirst("c", "d")},
		{map[string]any{"status": "expired"}, []string{"e"}},
		{map[string]any{"kinds": []string{"preference", "summary"}}, newestFirst("b", "cd")},
		{map[string]any{"tags": []string{"y", "x"}}, []string{"b"}},
		{map[string]any{"tags": []string{"x"}, "status": "active"}, newestFirst("b", a3)},
		{map[string]any{"conversationId": "c1"}, newestFirst("a", a2, a3, "c")},
		{map[string]any{"conversationId": "nowhere"}, nil},
	} {
		require.Equal(t, tc.want, listAll(t, app, pathList, tc.body, "entries"), "%v", tc.body)
	}
	var page contract.EntryList
	app.post(t, pathList, map[string]any{"limit": 8}).requireOK(t, http.StatusOK, &page)
	require.Len(t, page.Entries, 8)
	require.Nil(t, page.NextCursor, "a full last page has no next cursor")
	require.Equal(t, entries["e"], page.Entries[slices.IndexFunc(page.Entries, func(e contract.ContextEntry) bool { return e.ID == "e" })])

	// A cursor is bound to its list and filters.
	app.post(t, pathList, map[string]any{"status": "active", "limit": 1}).requireOK(t, http.StatusOK, &page)
	require.NotNil(t, page.NextCursor)
	for _, other := range []map[string]any{
		{"status": "merged", "cursor": *page.NextCursor},
		{"cursor": *page.NextCursor},
		{"status": "active", "kinds": []string{"fact"}, "cursor": *page.NextCursor},
	} {
		fieldErr(t, app.post(t, pathList, other), http.StatusBadRequest, contract.CodeInvalidCursor, "cursor", nil)
	}
	fieldErr(t, app.post(t, contract.RouteWindowsList.Path, map[string]any{"cursor": *page.NextCursor}),
		http.StatusBadRequest, contract.CodeInvalidCursor, "cursor", nil)
	app.post(t, pathList, map[string]any{"status": "active", "limit": 1, "cursor": *page.NextCursor}).requireOK(t, http.StatusOK, nil)

	// Bad input.
	fieldErr(t, app.post(t, pathList, map[string]any{"status": "gone"}), http.StatusBadRequest, contract.CodeValidationFailed, "status", nil)
	fieldErr(t, app.post(t, pathList, map[string]any{"kinds": []string{"fact", "rumor"}}), http.StatusBadRequest, contract.CodeValidationFailed, "kinds[1]", nil)
	fieldErr(t, app.post(t, pathList, map[string]any{"tags": []string{"a b"}}), http.StatusBadRequest, contract.CodeValidationFailed, "tags[0]", nil)
	fieldErr(t, app.post(t, pathList, map[string]any{"limit": 0}), http.StatusBadRequest, contract.CodeValidationFailed, "limit", 500)
	fieldErr(t, app.post(t, pathList, map[string]any{"limit": 501}), http.StatusBadRequest, contract.CodeValidationFailed, "limit", 500)
	fieldErr(t, app.post(t, pathList, map[string]any{"limit": 2.5}), http.StatusBadRequest, contract.CodeValidationFailed, "limit", 500)
	fieldErr(t, app.post(t, pathList, map[string]any{"cursor": "bm90LWEtY3Vyc29y"}), http.StatusBadRequest, contract.CodeInvalidCursor, "cursor", nil)

	// History: the whole chain, oldest first, from any of its versions.
	for _, id := range []string{"a", a2, a3} {
		var h contract.EntryHistory
		app.post(t, pathHistory, map[string]any{"entryId": id}).requireOK(t, http.StatusOK, &h)
		require.Equal(t, []contract.ContextEntry{entries["a"], entries[a2], entries[a3]}, h.Versions, id)
	}
	var h contract.EntryHistory
	app.post(t, pathHistory, map[string]any{"entryId": "c"}).requireOK(t, http.StatusOK, &h)
	require.Equal(t, []contract.ContextEntry{entries["c"]}, h.Versions)
	require.Equal(t, "cd", *h.Versions[0].MergedInto)
	fieldErr(t, app.post(t, pathHistory, map[string]any{"entryId": "none"}), http.StatusNotFound, contract.CodeNotFound, "entryId", nil)
	fieldErr(t, app.post(t, pathHistory, map[string]any{"entryId": ""}), http.StatusBadRequest, contract.CodeValidationFailed, "entryId", nil)
}

// TestBacklogBurstDrains: a burst of writes larger than one claim, sent at once from
// several clients, drains to pendingEntries 0, and then every entry is found by
// meaning alone (vector mode, its own text as the query: the hash embedder gives equal
// texts equal vectors, so it comes first).
func TestBacklogBurstDrains(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	const burst = 3*memory.DefaultProjectionBatch + 7
	contents := make([]string, burst)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for w := range errs {
		wg.Go(func() {
			for i := w; i < burst && errs[w] == nil; i += len(errs) {
				contents[i] = fmt.Sprintf("burst memory %d: the %s cluster drains its queue %s", i,
					[]string{"staging", "billing", "search"}[i%3], []string{"nightly", "hourly", "weekly", "daily"}[i%4])
				r, err := app.send(context.Background(), http.MethodPost, pathEntries, entryBody(fmt.Sprintf("burst-%03d", i), contents[i]))
				if err == nil && r.Status != http.StatusCreated {
					err = fmt.Errorf("entry %d: status %d: %s", i, r.Status, r.Body)
				}
				errs[w] = err
			}
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	st := app.waitProjected(t)
	require.EqualValues(t, 1, st.Generation)
	for i, content := range contents {
		res := app.recall(t, map[string]any{"query": content, "mode": "vector", "topK": 1})
		require.Equal(t, []string{fmt.Sprintf("burst-%03d", i)}, resultIDs(res.Results), "entry %d by its own text", i)
		require.Zero(t, res.Watermark.PendingEntries)
	}
}
