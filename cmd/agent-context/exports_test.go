package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
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
