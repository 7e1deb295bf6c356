package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

var (
	pathExports  = contract.RouteExports.Path
	pathArtifact = contract.RouteExportArtifactsGet.Path
	pathChunk    = contract.RouteExportArtifactsChunk.Path
	pathImports  = contract.RouteImports.Path
	pathAdvanced = contract.RouteAdvancedOperations.Path
)

// tenantHeaders are the open-mode headers of a scope of tenant in project "p".
func tenantHeaders(tenant string) []string {
	return []string{"x-infra-tenant-id", tenant, "x-infra-project-id", "p"}
}

// export runs an export of the caller's scope to its end and returns the artifact and
// the artifact's bytes, read chunk by chunk, each chunk and the whole checked against
// their SHA-256.
func (a *testApp) export(t *testing.T, body any, headers ...string) (contract.ExportArtifact, []byte) {
	t.Helper()
	var res contract.OperationResponse
	a.post(t, pathExports, body, headers...).requireOK(t, http.StatusAccepted, &res)
	require.Equal(t, contract.OperationExport, res.Operation.Kind)
	op := a.waitOperation(t, res.Operation.ID, headers...)
	require.Equal(t, contract.OperationSucceeded, op.State, "%+v", op.Error)
	var result contract.ExportResult
	require.NoError(t, json.Unmarshal(op.Result, &result))
	art, data := a.readArtifact(t, result.ArtifactID, headers...)
	require.Equal(t, op.ID, art.OperationID)
	return art, data
}

// readArtifact reads a ready artifact whole.
func (a *testApp) readArtifact(t *testing.T, id string, headers ...string) (contract.ExportArtifact, []byte) {
	t.Helper()
	var art contract.ExportArtifact
	a.post(t, pathArtifact, map[string]any{"artifactId": id}, headers...).requireOK(t, http.StatusOK, &art)
	require.Equal(t, contract.ArtifactReady, art.State)
	require.NotNil(t, art.SHA256)
	var data []byte
	for i := range art.ChunkCount {
		var c contract.ExportChunk
		a.post(t, pathChunk, map[string]any{"artifactId": id, "index": i}, headers...).requireOK(t, http.StatusOK, &c)
		require.Equal(t, i, c.Index)
		require.Equal(t, i == art.ChunkCount-1, c.Last)
		raw, err := base64.StdEncoding.DecodeString(c.Data)
		require.NoError(t, err)
		require.LessOrEqual(t, len(raw), contract.MaxExportChunkBytes)
		sum := sha256.Sum256(raw)
		require.Equal(t, hex.EncodeToString(sum[:]), c.SHA256, "chunk %d", i)
		data = append(data, raw...)
	}
	sum := sha256.Sum256(data)
	require.Equal(t, hex.EncodeToString(sum[:]), *art.SHA256)
	require.EqualValues(t, len(data), art.TotalBytes)
	return art, data
}

// importData posts data inline.
func (a *testApp) importData(t *testing.T, data []byte, headers ...string) *testResponse {
	t.Helper()
	return a.post(t, pathImports, map[string]any{"format": contract.FormatNDJSON, "data": base64.StdEncoding.EncodeToString(data)}, headers...)
}

// importOK imports data and returns the answer.
func (a *testApp) importOK(t *testing.T, data []byte, headers ...string) contract.ImportResponse {
	t.Helper()
	var res contract.ImportResponse
	a.importData(t, data, headers...).requireOK(t, http.StatusOK, &res)
	return res
}

// seedScope writes records of every kind into the caller's scope, with the members
// that are easiest to lose in a round trip: metadata with <, > and & and numbers as
// spelled, CJK text, NUL and control characters in item content, a knowledge
// evidence item, explicit sequences and times, a failed invocation, and entries that
// are active, superseded, merged and expired.
func seedScope(t *testing.T, app *testApp, headers ...string) {
	t.Helper()
	var records []map[string]any
	for i := range 30 {
		r := rec("conv-a", fmt.Sprintf("m-%02d", i), contract.Roles[i%4], fmt.Sprintf("deploy note %d: release <train> & more — 部署 %d", i, i))
		r["metadata"] = map[string]any{"html": "<b>&</b>", "n": 1.50, "i": i}
		records = append(records, r)
	}
	explicit := rec("conv-b", "m-x", "user", "a message with its own sequence")
	explicit["sequence"], explicit["createdAtMs"] = 40, 1_700_000_000_000
	records = append(records, explicit)
	app.appendOK(t, batchOf(records...), headers...)

	items := winItems(3, func(i int) string { return fmt.Sprintf("item %d with \x00 NUL and \x01 controls", i) })
	items[1]["metadata"] = map[string]any{"note": "<meta>", "z": []any{1, 2.0}}
	items = append(items, map[string]any{"id": "kb", "ordinal": 3, "kind": "knowledge_evidence", "content": "",
		"knowledgeEvidence": map[string]any{"provider": "docs", "resourceRef": "doc://1", "excerpt": "an excerpt", "score": 0.8, "retrievedAtMs": 7}})
	w1 := winBody("w-1", "conv-a", "original", items)
	w1["metadata"] = map[string]any{"k": "v"}
	app.createWindow(t, w1, headers...)
	app.createWindow(t, winBody("w-2", "conv-a", "compressed", winItems(1, winSmall)), headers...)
	app.createWindow(t, winBody("w-empty", "conv-b", "assembled", []map[string]any{}), headers...)
	app.post(t, pathDerivations, map[string]any{"id": "d-1", "sourceWindowId": "w-1", "targetWindowId": "w-2", "kind": "compress",
		"strategy": "summarize", "inputTokenCount": 9000, "metadata": map[string]any{"why": "<too long>"}}, headers...).requireOK(t, http.StatusCreated, nil)
	app.post(t, pathDerivations, map[string]any{"id": "d-2", "sourceWindowId": "w-2", "targetWindowId": "w-empty", "kind": "trim"}, headers...).
		requireOK(t, http.StatusCreated, nil)
	inv := winInvocation("inv-1", "conv-a", "w-2")
	inv["responseContent"], inv["metadata"], inv["toolName"] = "the answer <ok>", map[string]any{"cost": 0.10}, "search"
	app.post(t, pathInvocations, inv, headers...).requireOK(t, http.StatusOK, nil)
	failed := winInvocation("inv-2", "conv-a", "w-2")
	failed["state"], failed["error"] = "failed", map[string]any{"code": "rate_limited", "message": "later"}
	app.post(t, pathInvocations, failed, headers...).requireOK(t, http.StatusOK, nil)

	app.createEntry(t, map[string]any{"id": "e-1", "kind": "fact", "content": "Staging deploys from the release train.",
		"conversationId": "conv-a", "sourceRecordIds": []string{"m-01"}, "tags": []string{"deploy"}, "importance": 0.7,
		"expiresAtMs": time.Now().Add(time.Hour).UnixMilli(), "metadata": map[string]any{"src": "<chat>"}}, headers...)
	app.post(t, pathEntriesFix, map[string]any{"entryId": "e-1", "content": "Staging deploys from main.", "reason": "moved"}, headers...).
		requireOK(t, http.StatusCreated, nil)
	for _, id := range []string{"e-2", "e-3", "e-4"} {
		app.createEntry(t, map[string]any{"id": id, "kind": "observation", "content": "note " + id + " about deploys"}, headers...)
	}
	app.post(t, pathEntriesMerge, map[string]any{"entryIds": []string{"e-2", "e-3"},
		"merged": map[string]any{"id": "e-23", "kind": "summary", "content": "notes two and three about deploys"}}, headers...).
		requireOK(t, http.StatusCreated, nil)
	app.post(t, pathEntriesExpire, map[string]any{"entryId": "e-4"}, headers...).requireOK(t, http.StatusOK, nil)
	app.createEntry(t, map[string]any{"id": "e-5", "kind": "preference", "content": "部署 preference in Chinese"}, headers...)
	app.waitProjected(t, headers...)
}

// readRoute is one read of every read route a round trip must keep.
type readRoute struct {
	path string
	body any
}

// seededReads are the reads of everything seedScope wrote.
func seededReads(t *testing.T, app *testApp, headers ...string) []readRoute {
	t.Helper()
	var reads []readRoute
	for _, conv := range []string{"conv-a", "conv-b"} {
		scope := map[string]any{"conversationId": conv}
		reads = append(reads,
			readRoute{pathRecent, map[string]any{"scope": scope, "limit": 500}},
			readRoute{pathRecent, map[string]any{"scope": scope, "limit": 3, "roles": []string{"user"}}},
			readRoute{pathPage, map[string]any{"scope": scope, "limit": 500}},
			readRoute{pathPage, map[string]any{"scope": scope, "limit": 500, "order": "desc"}},
			readRoute{pathSearch, map[string]any{"query": "deploy", "scope": scope}})
	}
	for _, q := range []string{"deploy note", "部署", "release train", "sequence"} {
		reads = append(reads, readRoute{pathSearch, map[string]any{"query": q, "limit": 100}})
	}
	for _, w := range []string{"w-1", "w-2", "w-empty"} {
		reads = append(reads, readRoute{pathWindowsGet, map[string]any{"windowId": w}}, readRoute{pathWindowsLineage, map[string]any{"windowId": w}})
	}
	for _, i := range []string{"inv-1", "inv-2"} {
		reads = append(reads, readRoute{pathInvocationsGet, map[string]any{"invocationId": i}})
	}
	// The correction of e-1 got a generated ID: read it through e-1's supersededBy.
	corrected := *app.getEntry(t, "e-1", headers...).SupersededBy
	for _, e := range []string{"e-1", corrected, "e-2", "e-3", "e-4", "e-23", "e-5"} {
		reads = append(reads, readRoute{pathEntriesGet, map[string]any{"entryId": e}})
	}
	for _, mode := range contract.RecallModes {
		reads = append(reads,
			readRoute{pathRecall, map[string]any{"query": "how does staging deploy", "mode": mode, "topK": 100}},
			readRoute{pathRecall, map[string]any{"query": "notes about deploys", "mode": mode, "filter": map[string]any{"kinds": []string{"summary"}}}})
	}
	reads = append(reads, readRoute{contract.RouteCosts.Path, map[string]any{"groupBy": "conversation"}})
	return reads
}

// TestExportImportRoundTrip exports a scope holding records of every kind (over many
// small steps, so chunks are cut across lines), imports the artifact's bytes into an
// empty scope, and compares the answers of every read route byte for byte. A second
// import of the same bytes skips everything, and exporting the copy gives the same
// records line for line.
func TestExportImportRoundTrip(t *testing.T) {
	t.Parallel()
	app := startApp(t, func(c *Config) { c.ExportStepBytes = 512 })
	a, b := tenantHeaders("tenant-a"), tenantHeaders("tenant-b")
	seedScope(t, app, a...)

	art, data := app.export(t, map[string]any{}, a...)
	require.Greater(t, art.ChunkCount, 2, "the header and the records' chunks")
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	var header contract.ExportHeader
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &header))
	require.Equal(t, contract.RecordCounts{Messages: 31, Windows: 3, Derivations: 2, Invocations: 2, Entries: 7}, header.Counts)
	require.Equal(t, contract.NDJSONFormatVersion, header.FormatVersion)
	require.Len(t, lines, 1+31+3+2+2+7)
	for i, line := range lines[1:] {
		var l struct {
			Type   string          `json:"type"`
			Record json.RawMessage `json:"record"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &l), "line %d", i+2)
		want := contract.RecordMessage
		switch {
		case i >= 31+3+2+2:
			want = contract.RecordEntry
		case i >= 31+3+2:
			want = contract.RecordInvocation
		case i >= 31+3:
			want = contract.RecordDerivation
		case i >= 31:
			want = contract.RecordWindow
		}
		require.Equal(t, want, l.Type, "line %d: the stream's order", i+2)
	}
	require.Contains(t, string(data), `"content":"deploy note 0: release <train> & more — 部署 0"`, "text is not HTML-escaped")

	res := app.importOK(t, data, b...)
	require.Equal(t, contract.ImportResponse{Imported: header.Counts}, res)
	app.waitProjected(t, b...)
	for _, read := range seededReads(t, app, a...) {
		ra, rb := app.post(t, read.path, read.body, a...), app.post(t, read.path, read.body, b...)
		require.Equal(t, http.StatusOK, ra.Status, "%s %v: %s", read.path, read.body, ra.Body)
		require.Equal(t, string(ra.Body), string(rb.Body), "%s %v", read.path, read.body)
	}

	again := app.importOK(t, data, b...)
	require.Equal(t, contract.ImportResponse{Skipped: header.Counts}, again, "a repeated import is a visible retry")

	_, copied := app.export(t, map[string]any{}, b...)
	copiedLines := strings.Split(strings.TrimSuffix(string(copied), "\n"), "\n")
	require.Equal(t, lines[1:], copiedLines[1:], "the copy exports the same records")
}

// An export of one conversation holds its records only, and include selects the kinds.
func TestExportOneConversation(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	seedScope(t, app)
	_, data := app.export(t, map[string]any{"conversationId": "conv-b"})
	var header contract.ExportHeader
	first, rest, _ := bytes.Cut(data, []byte("\n"))
	require.NoError(t, json.Unmarshal(first, &header))
	// The derivation into w-empty comes from a window of conv-a: it is left out, so
	// that the export imports on its own.
	require.Equal(t, contract.RecordCounts{Messages: 1, Windows: 1}, header.Counts)
	require.NotContains(t, string(rest), "conv-a")

	_, data = app.export(t, map[string]any{"include": []string{"entries", "windows"}})
	first, _, _ = bytes.Cut(data, []byte("\n"))
	require.NoError(t, json.Unmarshal(first, &header))
	require.Equal(t, contract.RecordCounts{Windows: 3, Entries: 7}, header.Counts)

	var op contract.OperationResponse
	app.post(t, pathExports, map[string]any{"include": []string{"windows", "messages"}, "conversationId": nil}).
		requireOK(t, http.StatusAccepted, &op)
	require.JSONEq(t, `{"conversationId":null,"include":["messages","windows"]}`, string(op.Operation.Request))
}

// ndjson builds an agent-context-ndjson/v1 stream: the header with counts, then lines
// (each a JSON value, or a string sent as it is).
func ndjson(t *testing.T, counts contract.RecordCounts, lines ...any) []byte {
	t.Helper()
	var b bytes.Buffer
	head, err := json.Marshal(contract.ExportHeader{Type: contract.RecordHeader, FormatVersion: 1, ExportedAtMs: 1, Counts: counts})
	require.NoError(t, err)
	b.Write(head)
	for _, l := range lines {
		b.WriteByte('\n')
		if s, ok := l.(string); ok {
			b.WriteString(s)
			continue
		}
		raw, err := json.Marshal(l)
		require.NoError(t, err)
		b.Write(raw)
	}
	b.WriteByte('\n')
	return b.Bytes()
}

// messageLine is a record line of a message.
func messageLine(conversation, id, content string, sequence int64) map[string]any {
	return map[string]any{"type": "message", "record": map[string]any{"id": id, "scope": map[string]any{"conversationId": conversation},
		"role": "user", "content": content, "sequence": sequence, "createdAtMs": 1_700_000_000_000, "metadata": nil}}
}

// editLines applies edit to the record of every line of data whose record has the
// given ID, and returns the stream.
func editLines(t *testing.T, data []byte, edits map[string]func(record map[string]any)) []byte {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	for i, line := range lines[1:] {
		var l map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &l))
		record := l["record"].(map[string]any)
		if edit, ok := edits[record["id"].(string)]; ok {
			edit(record)
			raw, err := json.Marshal(l)
			require.NoError(t, err)
			lines[i+1] = string(raw)
		}
	}
	return []byte(strings.Join(lines, "\n") + "\n")
}

// A conflicting import is 409 IDEMPOTENCY_CONFLICT naming every conflicting record, in
// stream order, and writes nothing, not even its new records.
func TestImportConflicts(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	a, b := tenantHeaders("tenant-a"), tenantHeaders("tenant-b")
	seedScope(t, app, a...)
	_, data := app.export(t, map[string]any{}, a...)
	app.importOK(t, data, b...)

	changed := editLines(t, data, map[string]func(map[string]any){
		"m-03":  func(r map[string]any) { r["content"] = "changed" },
		"m-x":   func(r map[string]any) { r["sequence"] = 41 },
		"w-2":   func(r map[string]any) { r["metadata"] = map[string]any{"changed": true} },
		"d-1":   func(r map[string]any) { r["strategy"] = "other" },
		"inv-2": func(r map[string]any) { r["latencyMs"] = 1 },
		"e-5":   func(r map[string]any) { r["content"] = "changed preference" },
	})
	// A record new to the scope, before the conflicts are known.
	lines := strings.SplitN(string(changed), "\n", 2)
	var header contract.ExportHeader
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &header))
	header.Counts.Messages++
	head, err := json.Marshal(header)
	require.NoError(t, err)
	fresh, err := json.Marshal(messageLine("conv-new", "m-new", "a new message", 1))
	require.NoError(t, err)
	changed = []byte(string(head) + "\n" + string(fresh) + "\n" + lines[1])

	e := app.importData(t, changed, b...).requireError(t, http.StatusConflict, contract.CodeIdempotencyConflict)
	require.Equal(t, []any{"message:conv-a/m-03", "message:conv-b/m-x", "window:w-2", "derivation:d-1", "invocation:inv-2", "entry:e-5"},
		e.Details["ids"])
	require.EqualValues(t, 6, e.Details["conflicts"])
	require.Equal(t, false, e.Details["truncated"])
	require.Empty(t, app.recent(t, map[string]any{"scope": map[string]any{"conversationId": "conv-new"}}, b...), "nothing imported")
	require.Equal(t, "deploy note 3: release <train> & more — 部署 3",
		app.recent(t, map[string]any{"scope": map[string]any{"conversationId": "conv-a"}, "limit": 500}, b...)[3].Content)

	// An import from the artifact itself (same scope) skips everything.
	var op contract.OperationResponse
	app.post(t, pathExports, map[string]any{}, a...).requireOK(t, http.StatusAccepted, &op)
	done := app.waitOperation(t, op.Operation.ID, a...)
	var result contract.ExportResult
	require.NoError(t, json.Unmarshal(done.Result, &result))
	var res contract.ImportResponse
	app.post(t, pathImports, map[string]any{"artifactId": result.ArtifactID}, a...).requireOK(t, http.StatusOK, &res)
	require.Equal(t, contract.RecordCounts{Messages: 31, Windows: 3, Derivations: 2, Invocations: 2, Entries: 7}, res.Skipped)
	require.Equal(t, contract.RecordCounts{}, res.Imported)
}

// Every bad import answers the envelope and imports nothing: each stream below starts
// with a valid message that must not be stored.
func TestImportBadInput(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	a, c := tenantHeaders("tenant-a"), tenantHeaders("tenant-c")
	app.appendOK(t, batchOf(rec("conv-seq", "m-1", "user", "first")), c...)
	app.appendOK(t, batchOf(rec("conv-gone", "m-1", "user", "gone")), c...)
	_, op := app.deleteConversation(t, "conv-gone", c...)
	app.waitOperation(t, op.ID, c...)
	art, _ := app.export(t, map[string]any{}, a...)

	ok := messageLine("conv-ok", "m-ok", "must not be stored", 1)
	one := contract.RecordCounts{Messages: 1}
	two := contract.RecordCounts{Messages: 2}
	window := map[string]any{"type": "window", "record": map[string]any{"id": "w-x", "conversation": map[string]any{"conversationId": "conv-ok"},
		"stage": "original", "purpose": "chat", "tokenCount": 1, "metadata": nil, "createdAtMs": 1, "itemCount": 1, "contentBytes": 1,
		"contentSha256": strings.Repeat("0", 64),
		"items": []any{map[string]any{"id": "i", "ordinal": 0, "kind": "message", "role": nil, "content": "x", "sourceRecordId": nil,
			"knowledgeEvidence": nil, "metadata": nil}}}}
	derivation := map[string]any{"type": "derivation", "record": map[string]any{"id": "d-x", "sourceWindowId": "w-none",
		"targetWindowId": "w-none-2", "kind": "trim", "createdAtMs": 1}}
	b64 := func(data []byte) string { return base64.StdEncoding.EncodeToString(data) }
	valid := b64(ndjson(t, one, ok))
	cases := []struct {
		name   string
		body   any
		status int
		code   string
		field  string
		check  func(t *testing.T, e contract.ErrorBody)
	}{
		{"unknown format", map[string]any{"format": "csv", "data": valid}, 400, contract.CodeValidationFailed, "format", nil},
		{"data without format", map[string]any{"data": valid}, 400, contract.CodeValidationFailed, "format", nil},
		{"neither data nor artifact", map[string]any{"format": contract.FormatNDJSON}, 400, contract.CodeValidationFailed, "data", nil},
		{"data and artifact", map[string]any{"format": contract.FormatNDJSON, "data": valid, "artifactId": art.ID}, 400, contract.CodeValidationFailed, "artifactId", nil},
		{"bad base64", map[string]any{"format": contract.FormatNDJSON, "data": "!!!!" + valid}, 400, contract.CodeValidationFailed, "data", nil},
		{"base64 without padding", map[string]any{"format": contract.FormatNDJSON, "data": strings.TrimRight(b64([]byte("x")), "=")}, 400, contract.CodeValidationFailed, "data", nil},
		{"base64 with line breaks", map[string]any{"format": contract.FormatNDJSON, "data": valid[:4] + "\n" + valid[4:]}, 400, contract.CodeValidationFailed, "data", nil},
		{"bad base64 at the end", map[string]any{"format": contract.FormatNDJSON, "data": valid + "A*=="}, 400, contract.CodeValidationFailed, "data", nil},
		{"empty data", map[string]any{"format": contract.FormatNDJSON, "data": ""}, 400, contract.CodeValidationFailed, "data", nil},
		{"data over 16 MiB", map[string]any{"format": contract.FormatNDJSON, "data": strings.Repeat("A", (contract.MaxImportDataBytes/3+1)*4)},
			413, contract.CodePayloadTooLarge, "data", func(t *testing.T, e contract.ErrorBody) {
				require.EqualValues(t, contract.MaxImportDataBytes, e.Details["limit"])
			}},
		{"a line that is not JSON", map[string]any{"format": contract.FormatNDJSON, "data": b64(ndjson(t, two, ok, "not json"))},
			400, contract.CodeValidationFailed, "data", lineIs(3)},
		{"an unknown type", map[string]any{"format": contract.FormatNDJSON, "data": b64(ndjson(t, two, ok, map[string]any{"type": "gadget", "record": map[string]any{}}))},
			400, contract.CodeValidationFailed, "data", pathIs(3, "type")},
		{"a record with an unknown member", map[string]any{"format": contract.FormatNDJSON, "data": b64(ndjson(t, two, ok,
			map[string]any{"type": "message", "record": map[string]any{"id": "m", "scope": map[string]any{"conversationId": "c"}, "role": "user", "content": "x", "bogus": 1}}))},
			400, contract.CodeValidationFailed, "data", pathIs(3, "record.bogus")},
		{"a record before its type", map[string]any{"format": contract.FormatNDJSON, "data": b64(ndjson(t, two, ok,
			`{"record":{"id":"m","scope":{"conversationId":"c"},"role":"king","content":"x"},"type":"message"}`))},
			400, contract.CodeValidationFailed, "data", pathIs(3, "record.role")},
		{"a line without a record", map[string]any{"format": contract.FormatNDJSON, "data": b64(ndjson(t, two, ok, map[string]any{"type": "message"}))},
			400, contract.CodeValidationFailed, "data", pathIs(3, "record")},
		{"two values on a line", map[string]any{"format": contract.FormatNDJSON, "data": b64(ndjson(t, two, ok, `{"type":"message"} {}`))},
			400, contract.CodeValidationFailed, "data", lineIs(3)},
		{"a line across lines", map[string]any{"format": contract.FormatNDJSON, "data": b64(ndjson(t, two, ok, "{\n}"))},
			400, contract.CodeValidationFailed, "data", lineIs(3)},
		{"an empty line", map[string]any{"format": contract.FormatNDJSON, "data": b64(ndjson(t, two, ok, "", ok))},
			400, contract.CodeValidationFailed, "data", lineIs(3)},
		{"no header", map[string]any{"format": contract.FormatNDJSON, "data": b64([]byte(mustJSON(t, ok) + "\n"))},
			400, contract.CodeValidationFailed, "data", lineIs(1)},
		{"a second header", map[string]any{"format": contract.FormatNDJSON, "data": b64(ndjson(t, two, ok, map[string]any{"type": "header", "record": map[string]any{}}))},
			400, contract.CodeValidationFailed, "data", pathIs(3, "type")},
		{"another format version", map[string]any{"format": contract.FormatNDJSON, "data": b64([]byte(strings.Replace(string(ndjson(t, one, ok)), `"formatVersion":1`, `"formatVersion":2`, 1)))},
			400, contract.CodeValidationFailed, "data", pathIs(1, "formatVersion")},
		{"a header whose counts lie", map[string]any{"format": contract.FormatNDJSON, "data": b64(ndjson(t, two, ok))},
			400, contract.CodeValidationFailed, "data", func(t *testing.T, e contract.ErrorBody) {
				require.Equal(t, "counts_mismatch", e.Details["reason"])
			}},
		{"a window whose digest lies", map[string]any{"format": contract.FormatNDJSON, "data": b64(ndjson(t, contract.RecordCounts{Messages: 1, Windows: 1}, ok, window))},
			400, contract.CodeValidationFailed, "data", pathIs(3, "record.contentSha256")},
		{"a derivation of missing windows", map[string]any{"format": contract.FormatNDJSON, "data": b64(ndjson(t, contract.RecordCounts{Messages: 1, Derivations: 1}, ok, derivation))},
			404, contract.CodeNotFound, "data", pathIs(3, "record.sourceWindowId")},
		{"a record of a deleted conversation", map[string]any{"format": contract.FormatNDJSON, "data": b64(ndjson(t, two, ok, messageLine("conv-gone", "m-2", "late", 2)))},
			409, contract.CodeConflict, "", func(t *testing.T, e contract.ErrorBody) {
				require.Equal(t, "conversation_deleted", e.Details["reason"])
			}},
		{"a sequence behind the conversation's", map[string]any{"format": contract.FormatNDJSON, "data": b64(ndjson(t, two, ok, messageLine("conv-seq", "m-0", "behind", 1)))},
			409, contract.CodeConflict, "", func(t *testing.T, e contract.ErrorBody) {
				require.Equal(t, "sequence_conflict", e.Details["reason"])
				require.Equal(t, []any{"message:conv-seq/m-0"}, e.Details["ids"])
			}},
		{"an artifact of another scope", map[string]any{"artifactId": art.ID}, 404, contract.CodeNotFound, "artifactId", nil},
		{"a bad artifact ID", map[string]any{"artifactId": "a b"}, 400, contract.CodeValidationFailed, "artifactId", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := app.post(t, pathImports, tc.body, c...).requireError(t, tc.status, tc.code)
			if tc.field != "" {
				require.Equal(t, tc.field, e.Details["field"], "%v", e)
			}
			if tc.check != nil {
				tc.check(t, e)
			}
		})
	}
	require.Empty(t, app.recent(t, map[string]any{"scope": map[string]any{"conversationId": "conv-ok"}}, c...), "nothing half-imported")
	require.Len(t, app.recent(t, map[string]any{"scope": map[string]any{"conversationId": "conv-seq"}}, c...), 1)
	res := app.importOK(t, ndjson(t, one, ok), c...)
	require.EqualValues(t, 1, res.Imported.Messages, "the valid stream imports")

	// Chunks out of range, and artifacts of other scopes, are 404.
	for _, index := range []int{art.ChunkCount, art.ChunkCount + 100} {
		e := app.post(t, pathChunk, map[string]any{"artifactId": art.ID, "index": index}, a...).requireError(t, http.StatusNotFound, contract.CodeNotFound)
		require.Equal(t, "index", e.Details["field"])
	}
	e := app.post(t, pathChunk, map[string]any{"artifactId": art.ID, "index": -1}, a...).requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
	require.Equal(t, "index", e.Details["field"])
	e = app.post(t, pathChunk, map[string]any{"artifactId": art.ID}, a...).requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
	require.Equal(t, "index", e.Details["field"])
	app.post(t, pathChunk, map[string]any{"artifactId": art.ID, "index": 0}, c...).requireError(t, http.StatusNotFound, contract.CodeNotFound)
	app.post(t, pathArtifact, map[string]any{"artifactId": art.ID}, c...).requireError(t, http.StatusNotFound, contract.CodeNotFound)

	// Bad export and advanced requests.
	for _, bad := range []struct {
		path  string
		body  any
		field string
	}{
		{pathExports, map[string]any{"include": []string{}}, "include"},
		{pathExports, map[string]any{"include": []string{"messages", "gadgets"}}, "include[1]"},
		{pathExports, map[string]any{"include": []string{"messages", "messages"}}, "include[1]"},
		{pathExports, map[string]any{"conversationId": "a b"}, "conversationId"},
		{pathExports, map[string]any{"tenantId": "other"}, "tenantId"},
		{pathAdvanced, map[string]any{"kind": "defrag"}, "kind"},
		{pathAdvanced, map[string]any{"kind": "verify_integrity", "params": map[string]any{"deep": true}}, "params.deep"},
		{pathAdvanced, map[string]any{"kind": "verify_integrity", "params": []any{}}, "params"},
	} {
		e := app.post(t, bad.path, bad.body, a...).requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
		require.Equal(t, bad.field, e.Details["field"], "%s %v", bad.path, bad.body)
	}
}

// lineIs checks details.line.
func lineIs(line int) func(t *testing.T, e contract.ErrorBody) {
	return func(t *testing.T, e contract.ErrorBody) {
		require.EqualValues(t, line, e.Details["line"], "%v", e.Details)
	}
}

// pathIs checks details.line and details.path.
func pathIs(line int, path string) func(t *testing.T, e contract.ErrorBody) {
	return func(t *testing.T, e contract.ErrorBody) {
		require.EqualValues(t, line, e.Details["line"], "%v", e.Details)
		require.Equal(t, path, e.Details["path"], "%v", e.Details)
	}
}

// Deleting a conversation removes every export artifact that holds its records, at
// once for every route and physically by the deletion job; artifacts without its
// records stay, and an export after the deletion leaves it out.
func TestExportConversationDeletion(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	const doomed = "conv-doomed"
	secrets := []string{"lemurmessage", "lemuritem", "lemurresponse", "lemurentry"}
	app.appendOK(t, batchOf(rec(doomed, "m-1", "user", "the lemurmessage"), rec("kept", "k-1", "user", "kept message")))
	app.createWindow(t, winBody("w-d", doomed, "original", winItems(1, func(int) string { return "lemuritem" })))
	inv := winInvocation("i-d", doomed, "w-d")
	inv["responseContent"] = "lemurresponse"
	app.post(t, pathInvocations, inv).requireOK(t, http.StatusOK, nil)
	app.createEntry(t, map[string]any{"id": "e-d", "kind": "fact", "content": "the lemurentry", "conversationId": doomed})
	whole, _ := app.export(t, map[string]any{})
	one, _ := app.export(t, map[string]any{"conversationId": doomed})
	kept, keptData := app.export(t, map[string]any{"conversationId": "kept"})
	pool := openPool(t, app.dsn)
	for _, s := range secrets {
		require.Contains(t, columnsContaining(t, pool, s), "export_chunks.data", s)
	}

	_, op := app.deleteConversation(t, doomed)
	for _, id := range []string{whole.ID, one.ID} {
		app.post(t, pathArtifact, map[string]any{"artifactId": id}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
		app.post(t, pathChunk, map[string]any{"artifactId": id, "index": 0}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
		app.post(t, pathImports, map[string]any{"artifactId": id}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
	}
	_, again := app.readArtifact(t, kept.ID)
	require.Equal(t, keptData, again, "an artifact without the conversation's records stays")

	done := app.waitOperation(t, op.ID)
	require.Equal(t, contract.OperationSucceeded, done.State)
	for _, s := range secrets {
		require.Empty(t, columnsContaining(t, pool, s), "%s remains after the deletion", s)
	}
	require.Equal(t, []string{"conversations.conversation_id", "operations.conversation_id", "operations.request"},
		columnsContaining(t, pool, doomed), "only the tombstone and the operation record name the conversation")

	_, data := app.export(t, map[string]any{})
	require.NotContains(t, string(data), doomed)
	first, _, _ := bytes.Cut(data, []byte("\n"))
	var header contract.ExportHeader
	require.NoError(t, json.Unmarshal(first, &header))
	require.Equal(t, contract.RecordCounts{Messages: 1}, header.Counts)
	_, data = app.export(t, map[string]any{"conversationId": doomed})
	first, _, _ = bytes.Cut(data, []byte("\n"))
	require.NoError(t, json.Unmarshal(first, &header))
	require.Equal(t, contract.RecordCounts{}, header.Counts)
}

// advanced runs an advanced operation to its end and returns it.
func (a *testApp) advanced(t *testing.T, kind string, headers ...string) contract.Operation {
	t.Helper()
	var res contract.OperationResponse
	a.post(t, pathAdvanced, map[string]any{"kind": kind, "params": map[string]any{}}, headers...).requireOK(t, http.StatusAccepted, &res)
	require.Equal(t, contract.OperationAdvanced, res.Operation.Kind)
	require.JSONEq(t, `{"kind":"`+kind+`","params":{}}`, string(res.Operation.Request))
	op := a.waitOperation(t, res.Operation.ID, headers...)
	require.Equal(t, contract.OperationSucceeded, op.State, "%+v", op.Error)
	return op
}

// Tampering with a stored window's content in the database makes verify_integrity
// report exactly that window, with the stored and the recomputed digest; the windows
// are checked over many steps.
func TestVerifyIntegrityFindsTampering(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	const windows = 25
	for i := range windows {
		app.createWindow(t, winBody(fmt.Sprintf("w-%02d", i), "conv-v", "original", winItems(3, winSmall)))
	}
	clean := app.advanced(t, contract.AdvancedVerifyIntegrity)
	require.JSONEq(t, `{"windowsChecked":25,"mismatchCount":0,"mismatches":[]}`, string(clean.Result))
	require.Equal(t, contract.OperationProgress{Done: windows, Total: ptrTo[int64](windows)}, clean.Progress)

	var stored contract.Window
	app.post(t, pathWindowsGet, map[string]any{"windowId": "w-07"}).requireOK(t, http.StatusOK, &stored)
	pool := openPool(t, app.dsn)
	_, err := pool.Exec(context.Background(), `UPDATE context_window_items SET content = 'tampered'::bytea
		WHERE window_id = 'w-07' AND ordinal = 1`)
	require.NoError(t, err)
	// A window of another scope, tampered too, is not this scope's to report.
	app.createWindow(t, winBody("w-07", "conv-v", "original", winItems(3, winSmall)), tenantHeaders("other")...)
	_, err = pool.Exec(context.Background(), `UPDATE context_window_items SET content = 'x'::bytea
		WHERE window_id = 'w-07' AND tenant_id = 'other'`)
	require.NoError(t, err)

	var result contract.IntegrityResult
	require.NoError(t, json.Unmarshal(app.advanced(t, contract.AdvancedVerifyIntegrity).Result, &result))
	items := make([]contract.WindowItem, 3)
	for i, content := range []string{"content 0", "tampered", "content 2"} {
		items[i] = contract.WindowItem{ID: fmt.Sprintf("item-%d", i), Ordinal: i, Kind: "message", Role: ptrTo("user"), Content: content}
	}
	_, tampered, err := runtime.WindowDigest(items)
	require.NoError(t, err)
	require.Equal(t, contract.IntegrityResult{WindowsChecked: windows, MismatchCount: 1, Mismatches: []contract.IntegrityMismatch{{
		WindowID: "w-07", ConversationID: "conv-v", StoredSHA256: stored.ContentSHA256, ComputedSHA256: tampered,
		StoredItemCount: 3, ComputedItemCount: 3, StoredContentBytes: stored.ContentBytes, ComputedContentBytes: stored.ContentBytes - 9 + 8,
	}}}, result)
}

// purge_expired_entries removes the entries whose expiry passed (with their vectors),
// and keeps active, superseded and merged ones; reindex_text_search rebuilds full-text
// documents lost from the database.
func TestAdvancedPurgeAndReindex(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	// e-soon and e-old expire in an hour; their expiry is moved into the past below, as
	// the clock would, so that no step of the test races a deadline.
	soon := time.Now().Add(time.Hour).UnixMilli()
	app.createEntry(t, map[string]any{"id": "e-soon", "kind": "fact", "content": "expires soon", "expiresAtMs": soon})
	app.createEntry(t, map[string]any{"id": "e-gone", "kind": "fact", "content": "expired by hand"})
	app.post(t, pathEntriesExpire, map[string]any{"entryId": "e-gone"}).requireOK(t, http.StatusOK, nil)
	app.createEntry(t, map[string]any{"id": "e-live", "kind": "fact", "content": "stays active", "expiresAtMs": time.Now().Add(time.Hour).UnixMilli()})
	app.createEntry(t, map[string]any{"id": "e-old", "kind": "fact", "content": "corrected before it expired", "expiresAtMs": soon})
	app.post(t, pathEntriesFix, map[string]any{"entryId": "e-old", "content": "the correction",
		"expiresAtMs": time.Now().Add(time.Hour).UnixMilli()}).requireOK(t, http.StatusCreated, nil)
	app.appendOK(t, batchOf(rec("conv-r", "m-1", "user", "the reindexed capybara")))
	app.waitProjected(t)
	pool := openPool(t, app.dsn)
	_, err := pool.Exec(context.Background(), `UPDATE context_entries SET expires_at_ms = $1 WHERE expires_at_ms = $2`,
		time.Now().Add(-time.Second).UnixMilli(), soon)
	require.NoError(t, err)
	vectorsBefore := vectorRows(t, app)

	purged := app.advanced(t, contract.AdvancedPurgeExpiredEntries)
	require.JSONEq(t, `{"purgedEntries":2}`, string(purged.Result))
	for _, id := range []string{"e-soon", "e-gone"} {
		app.post(t, pathEntriesGet, map[string]any{"entryId": id}).requireError(t, http.StatusNotFound, contract.CodeNotFound)
	}
	require.Equal(t, contract.EntryActive, app.getEntry(t, "e-live").Status)
	require.Equal(t, contract.EntrySuperseded, app.getEntry(t, "e-old").Status, "history stays")
	require.Equal(t, vectorsBefore-1, vectorRows(t, app), "e-soon's vector goes with it")
	require.JSONEq(t, `{"purgedEntries":0}`, string(app.advanced(t, contract.AdvancedPurgeExpiredEntries).Result))

	_, err = pool.Exec(context.Background(), `UPDATE messages SET search = ''::tsvector`)
	require.NoError(t, err)
	_, err = pool.Exec(context.Background(), `UPDATE context_entries SET search = ''::tsvector`)
	require.NoError(t, err)
	pgtest.RecountText(t, pool)
	require.Empty(t, app.searchIDs(t, map[string]any{"query": "capybara"}))
	require.Empty(t, app.recallIDs(t, map[string]any{"query": "stays active", "mode": "text"}))
	reindexed := app.advanced(t, contract.AdvancedReindexTextSearch)
	require.JSONEq(t, `{"messages":1,"entries":3}`, string(reindexed.Result), "e-live, e-old and its correction")
	require.Equal(t, []string{"m-1"}, app.searchIDs(t, map[string]any{"query": "capybara"}))
	require.Equal(t, []string{"e-live"}, app.recallIDs(t, map[string]any{"query": "stays active", "mode": "text"}))
}

// An artifact expires AGENT_CONTEXT_EXPORT_TTL after it was created: it reads as
// expired, its chunks and an import from it are refused, and the purge job removes
// it with its chunks.
func TestExportArtifactExpiry(t *testing.T) {
	t.Parallel()
	app := startApp(t, func(c *Config) { c.ExportTTL = 90 * time.Minute })
	app.appendOK(t, batchOf(rec("conv-x", "m-1", "user", "short-lived")))
	art, _ := app.export(t, map[string]any{})
	require.Equal(t, art.CreatedAtMs+90*60*1000, art.ExpiresAtMs)
	// The clock moves past the expiry: the artifact's expiry moves before it.
	pool := openPool(t, app.dsn)
	_, err := pool.Exec(context.Background(), `UPDATE export_artifacts SET expires_at_ms = $1`, time.Now().Add(-time.Second).UnixMilli())
	require.NoError(t, err)
	var got contract.ExportArtifact
	app.post(t, pathArtifact, map[string]any{"artifactId": art.ID}).requireOK(t, http.StatusOK, &got)
	require.Equal(t, contract.ArtifactExpired, got.State)
	for _, r := range []*testResponse{
		app.post(t, pathChunk, map[string]any{"artifactId": art.ID, "index": 0}),
		app.post(t, pathImports, map[string]any{"artifactId": art.ID}),
	} {
		e := r.requireError(t, http.StatusConflict, contract.CodeConflict)
		require.Equal(t, "artifact_expired", e.Details["reason"])
	}

	purging := startApp(t, func(c *Config) { c.ExportPurgeInterval = 200 * time.Millisecond })
	purging.appendOK(t, batchOf(rec("conv-x", "m-1", "user", "short-lived")))
	gone, _ := purging.export(t, map[string]any{})
	_, err = openPool(t, purging.dsn).Exec(context.Background(), `UPDATE export_artifacts SET expires_at_ms = $1`,
		time.Now().Add(-time.Second).UnixMilli())
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return purging.post(t, pathArtifact, map[string]any{"artifactId": gone.ID}).Status == http.StatusNotFound
	}, time.Minute, 50*time.Millisecond)
	var chunks int
	require.NoError(t, openPool(t, purging.dsn).QueryRow(context.Background(), `SELECT count(*) FROM export_chunks`).Scan(&chunks))
	require.Zero(t, chunks)
}

// An A2A snapshot with write: true is stored as a ready export artifact (format
// a2a-snapshot/v1, evidence key proof:a2a-snapshot-v1) holding the redacted document
// the answer carries, with a succeeded export operation; it is not an import source.
func TestA2ASnapshotWriteStoresArtifact(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	app.post(t, contract.RouteA2AAgentsRegister.Path, map[string]any{"agentType": "planner"}).requireOK(t, http.StatusOK, nil)
	app.post(t, contract.RouteA2AMessagesPost.Path, map[string]any{"messageId": "m-1",
		"content": "deploy with password=" + snapshotSecrets[2]}).requireOK(t, http.StatusOK, nil)

	r := app.post(t, contract.RouteA2ASnapshot.Path, map[string]any{"write": true})
	var snap contract.Snapshot
	r.requireOK(t, http.StatusOK, &snap)
	require.NotNil(t, snap.ArtifactID)
	require.NotContains(t, string(r.Body), snapshotSecrets[2])
	art, data := app.readArtifact(t, *snap.ArtifactID)
	require.Equal(t, 1, art.ChunkCount)
	id := *snap.ArtifactID
	snap.ArtifactID = nil
	want, err := json.Marshal(snap)
	require.NoError(t, err)
	require.JSONEq(t, string(want), string(data), "the artifact holds the snapshot as answered, without its own ID")
	require.Contains(t, string(data), "password=[REDACTED:password]")

	op := app.operation(t, art.OperationID)
	require.Equal(t, contract.OperationExport, op.Kind)
	require.Equal(t, contract.OperationSucceeded, op.State)
	require.JSONEq(t, `{"artifactId":"`+id+`"}`, string(op.Result))
	require.JSONEq(t, `{"privacy":"redacted","write":true}`, string(op.Request))
	var format, evidence string
	require.NoError(t, openPool(t, app.dsn).QueryRow(context.Background(),
		`SELECT format, evidence_key FROM export_artifacts WHERE artifact_id = $1`, id).Scan(&format, &evidence))
	require.Equal(t, contract.FormatA2ASnapshot, format)
	require.Equal(t, contract.SnapshotEvidenceKey, evidence)

	e := app.post(t, pathImports, map[string]any{"artifactId": id}).requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
	require.Equal(t, "artifactId", e.Details["field"])
}

// `agent-context export --out FILE` and `agent-context import FILE` move a scope: the
// file is the artifact, and an import in parts (cut at record boundaries) restores
// the same reads; a file whose header lies imports nothing.
func TestExportImportCommands(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	seedScope(t, app, tenantHeaders("tenant-a")...)
	file := t.TempDir() + "/scope.ndjson"
	env := func(string) string { return "" }
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"export", "--url", app.base, "--tenant", "tenant-a", "--project", "p",
		"--out", file}, env, &out))
	require.Contains(t, out.String(), "exported artifact")
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	sum := sha256.Sum256(data)
	require.Contains(t, out.String(), hex.EncodeToString(sum[:]))

	out.Reset()
	require.NoError(t, run(context.Background(), []string{"import", "--url", app.base, "--tenant", "tenant-b", "--project", "p",
		"--part-bytes", "2048", file}, env, &out))
	require.Contains(t, out.String(), "imported "+file)
	require.Contains(t, out.String(), "31 messages, 3 windows, 2 derivations, 2 invocations, 7 entries; skipped 0 messages")
	require.NotContains(t, out.String(), "in 1 part(s)", "the file went in parts")
	app.waitProjected(t, tenantHeaders("tenant-b")...)
	for _, read := range seededReads(t, app, tenantHeaders("tenant-a")...) {
		ra, rb := app.post(t, read.path, read.body, tenantHeaders("tenant-a")...), app.post(t, read.path, read.body, tenantHeaders("tenant-b")...)
		require.Equal(t, string(ra.Body), string(rb.Body), "%s %v", read.path, read.body)
	}

	lying := t.TempDir() + "/lying.ndjson"
	require.NoError(t, os.WriteFile(lying, bytes.Replace(data, []byte(`"messages":31`), []byte(`"messages":32`), 1), 0o600))
	err = run(context.Background(), []string{"import", "--url", app.base, "--tenant", "tenant-c", "--project", "p", lying}, env, &out)
	require.ErrorContains(t, err, "do not match")
	require.Empty(t, app.recent(t, map[string]any{"scope": map[string]any{"conversationId": "conv-a"}}, tenantHeaders("tenant-c")...))

	var usage usageError
	require.ErrorAs(t, run(context.Background(), []string{"export"}, env, &out), &usage)
	require.ErrorAs(t, run(context.Background(), []string{"import", "a", "b"}, env, &out), &usage)
}
