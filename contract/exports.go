package contract

import "encoding/json"

// Routes of export, import and the advanced operations (docs/export.md).
var (
	RouteExports              = Route{MethodPost, PrefixContext + "/exports", []string{CapContextAdmin}}
	RouteExportArtifactsGet   = Route{MethodPost, PrefixContext + "/export-artifacts/get", []string{CapContextAdmin}}
	RouteExportArtifactsChunk = Route{MethodPost, PrefixContext + "/export-artifacts/chunk", []string{CapContextAdmin}}
	RouteImports              = Route{MethodPost, PrefixContext + "/imports", []string{CapContextAdmin}}
	RouteAdvancedOperations   = Route{MethodPost, PrefixContext + "/advanced-operations", []string{CapContextAdmin}}
)

// Formats of export artifacts. An export writes FormatNDJSON, the only format an
// import reads; an A2A snapshot written with write: true is stored as
// FormatA2ASnapshot.
const (
	FormatNDJSON      = "agent-context-ndjson/v1"
	FormatA2ASnapshot = "a2a-snapshot/v1"
	// NDJSONFormatVersion is the header's formatVersion of FormatNDJSON.
	NDJSONFormatVersion = 1
	// SnapshotEvidenceKey is the evidence key an A2A snapshot artifact is stored under.
	SnapshotEvidenceKey = "proof:a2a-snapshot-v1"
)

// Limits of export and import (docs/api.md).
const (
	MaxExportChunkBytes = 1 << 20
	MaxImportDataBytes  = 16 << 20
)

// Record types of an agent-context-ndjson/v1 line; the first line is the header.
const (
	RecordHeader     = "header"
	RecordMessage    = "message"
	RecordWindow     = "window"
	RecordDerivation = "derivation"
	RecordInvocation = "invocation"
	RecordEntry      = "entry"
)

// What an export may include, in the order the stream holds them.
const (
	IncludeMessages    = "messages"
	IncludeWindows     = "windows"
	IncludeDerivations = "derivations"
	IncludeInvocations = "invocations"
	IncludeEntries     = "entries"
)

// ExportIncludes lists what an export may include, in stream order.
var ExportIncludes = []string{IncludeMessages, IncludeWindows, IncludeDerivations, IncludeInvocations, IncludeEntries}

// Artifact states. An artifact is building while its export runs, ready once stored
// whole, and expired once its expiresAtMs has passed (until the purge removes it).
const (
	ArtifactBuilding = "building"
	ArtifactReady    = "ready"
	ArtifactExpired  = "expired"
)

// ExportRequest is the body of POST /exports, and the request echo of its operation.
// A null ConversationID exports everything in scope; Include defaults to all of
// ExportIncludes.
type ExportRequest struct {
	ConversationID *string  `json:"conversationId"`
	Include        []string `json:"include"`
}

// ExportResult is the result of a succeeded export operation.
type ExportResult struct {
	ArtifactID string `json:"artifactId"`
}

// RecordCounts counts records by type: the header's counts and an import's answer.
type RecordCounts struct {
	Messages    int64 `json:"messages"`
	Windows     int64 `json:"windows"`
	Derivations int64 `json:"derivations"`
	Invocations int64 `json:"invocations"`
	Entries     int64 `json:"entries"`
}

// ExportHeader is the first line of an agent-context-ndjson/v1 stream. Counts says how
// many records of each type follow.
type ExportHeader struct {
	Type          string       `json:"type"`
	FormatVersion int          `json:"formatVersion"`
	ExportedAtMs  int64        `json:"exportedAtMs"`
	Counts        RecordCounts `json:"counts"`
}

// GetArtifactRequest is the body of POST /export-artifacts/get.
type GetArtifactRequest struct {
	ArtifactID string `json:"artifactId"`
}

// ExportArtifact describes a stored artifact. ChunkCount and TotalBytes count what is
// stored so far; SHA256 (lowercase hex of the whole artifact) is null until it is
// ready.
type ExportArtifact struct {
	ID          string  `json:"id"`
	OperationID string  `json:"operationId"`
	State       string  `json:"state"`
	ChunkCount  int     `json:"chunkCount"`
	TotalBytes  int64   `json:"totalBytes"`
	SHA256      *string `json:"sha256"`
	CreatedAtMs int64   `json:"createdAtMs"`
	ExpiresAtMs int64   `json:"expiresAtMs"`
}

// GetChunkRequest is the body of POST /export-artifacts/chunk. Index is required.
type GetChunkRequest struct {
	ArtifactID string `json:"artifactId"`
	Index      *int   `json:"index"`
}

// ExportChunk is one chunk of an artifact: Data is standard base64 with padding
// (RFC 4648 §4) of at most MaxExportChunkBytes bytes, SHA256 their lowercase hex
// digest, and Last marks the final chunk.
type ExportChunk struct {
	Index  int    `json:"index"`
	Data   string `json:"data"`
	SHA256 string `json:"sha256"`
	Last   bool   `json:"last"`
}

// ImportRequest is the body of POST /imports: either Format and Data (standard base64
// of at most MaxImportDataBytes decoded bytes) or ArtifactID (an export of the same
// scope).
type ImportRequest struct {
	Format     *string `json:"format,omitempty"`
	Data       *string `json:"data,omitempty"`
	ArtifactID *string `json:"artifactId,omitempty"`
}

// ImportResponse reports an import: the records written now and those skipped because
// an identical record was already stored.
type ImportResponse struct {
	Imported RecordCounts `json:"imported"`
	Skipped  RecordCounts `json:"skipped"`
}

// Advanced operation kinds.
const (
	AdvancedPurgeExpiredEntries = "purge_expired_entries"
	AdvancedReindexTextSearch   = "reindex_text_search"
	AdvancedVerifyIntegrity     = "verify_integrity"
)

// AdvancedKinds lists the advanced operation kinds.
var AdvancedKinds = []string{AdvancedPurgeExpiredEntries, AdvancedReindexTextSearch, AdvancedVerifyIntegrity}

// AdvancedOperationRequest is the body of POST /advanced-operations, and the request
// echo of its operation. No kind takes parameters yet: Params is an empty object (or
// absent).
type AdvancedOperationRequest struct {
	Kind   string          `json:"kind"`
	Params json.RawMessage `json:"params"`
}

// PurgeExpiredEntriesResult is the result of purge_expired_entries: the entries whose
// expiry had passed when the operation was created, removed with their vectors.
type PurgeExpiredEntriesResult struct {
	PurgedEntries int64 `json:"purgedEntries"`
}

// ReindexResult is the result of reindex_text_search: the messages and entries whose
// full-text documents were rebuilt.
type ReindexResult struct {
	Messages int64 `json:"messages"`
	Entries  int64 `json:"entries"`
}

// MaxIntegrityMismatches bounds the mismatches a verify_integrity result lists;
// MismatchCount counts them all.
const MaxIntegrityMismatches = 1000

// IntegrityResult is the result of verify_integrity: how many windows were checked,
// and each window whose stored contentSha256 (or itemCount, contentBytes) differs from
// what its stored items give.
type IntegrityResult struct {
	WindowsChecked int64               `json:"windowsChecked"`
	MismatchCount  int64               `json:"mismatchCount"`
	Mismatches     []IntegrityMismatch `json:"mismatches"`
}

// IntegrityMismatch is one window whose items no longer give its stored digest.
type IntegrityMismatch struct {
	WindowID             string `json:"windowId"`
	ConversationID       string `json:"conversationId"`
	StoredSHA256         string `json:"storedSha256"`
	ComputedSHA256       string `json:"computedSha256"`
	StoredItemCount      int    `json:"storedItemCount"`
	ComputedItemCount    int    `json:"computedItemCount"`
	StoredContentBytes   int64  `json:"storedContentBytes"`
	ComputedContentBytes int64  `json:"computedContentBytes"`
}
