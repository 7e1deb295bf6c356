package contract

import "encoding/json"

// Routes of context entries, recall and the vector projection (docs/entries.md).
var (
	RouteEntriesCreate  = Route{MethodPost, PrefixContext + "/entries", []string{CapContextWrite}}
	RouteEntriesGet     = Route{MethodPost, PrefixContext + "/entries/get", []string{CapContextRead}}
	RouteEntriesCorrect = Route{MethodPost, PrefixContext + "/entries/correct", []string{CapContextWrite}}
	RouteEntriesMerge   = Route{MethodPost, PrefixContext + "/entries/merge", []string{CapContextWrite}}
	RouteEntriesExpire  = Route{MethodPost, PrefixContext + "/entries/expire", []string{CapContextWrite}}
	RouteEntriesList    = Route{MethodPost, PrefixContext + "/entries/list", []string{CapContextRead}}
	RouteEntriesHistory = Route{MethodPost, PrefixContext + "/entries/history", []string{CapContextRead}}
	RouteRecall         = Route{MethodPost, PrefixContext + "/recall", []string{CapContextRetrieve}}
	RouteVectorRebuild  = Route{MethodPost, PrefixContext + "/projections/vector/rebuild", []string{CapContextAdmin}}
)

// Limits of context entries and recall (docs/api.md, docs/entries.md).
const (
	MaxEntryContentBytes = 64 << 10
	MaxEntryTags         = 32
	// MaxEntrySourceRecordIDs bounds an entry's sourceRecordIds, also the union a
	// merge computes (docs/entries.md; the contract sets no bound).
	MaxEntrySourceRecordIDs = 1000
	// MaxEntryReasonChars bounds the reason of a correction or an expiry.
	MaxEntryReasonChars = 1024
	MinMergeEntries     = 2
	MaxMergeEntries     = 100
	MaxRecallQueryBytes = 16 << 10
	DefaultRecallTopK   = 10
	MaxRecallTopK       = 100
	DefaultListLimit    = 50
	MaxListLimit        = 500
	// DefaultEntryImportance is the importance of an entry that states none.
	DefaultEntryImportance = 0.5
)

// Entry kinds.
const (
	EntryKindFact        = "fact"
	EntryKindPreference  = "preference"
	EntryKindInstruction = "instruction"
	EntryKindSummary     = "summary"
	EntryKindObservation = "observation"
)

// Entry statuses. Only active entries whose expiresAtMs has not passed are recalled;
// an active entry whose expiresAtMs has passed reads as expired.
const (
	EntryActive     = "active"
	EntrySuperseded = "superseded"
	EntryMerged     = "merged"
	EntryExpired    = "expired"
)

// Recall modes.
const (
	RecallHybrid = "hybrid"
	RecallVector = "vector"
	RecallText   = "text"
)

// DegradationEmbeddingUnavailable is the degradationReason of a hybrid recall answered
// from text alone because the embedding provider could not embed the query.
const DegradationEmbeddingUnavailable = "embedding_unavailable"

// Enumerations of the entry contract.
var (
	EntryKinds = []string{
		EntryKindFact, EntryKindPreference, EntryKindInstruction, EntryKindSummary, EntryKindObservation,
	}
	EntryStatuses = []string{EntryActive, EntrySuperseded, EntryMerged, EntryExpired}
	RecallModes   = []string{RecallHybrid, RecallVector, RecallText}
)

// ContextEntry is a durable piece of long-term context. Every member is present on the
// wire, null where empty. Status, Version, Supersedes, SupersededBy, MergedInto,
// CreatedAtMs and UpdatedAtMs are the server's; a request never carries them.
type ContextEntry struct {
	ID              string          `json:"id"`
	Kind            string          `json:"kind"`
	Content         string          `json:"content"`
	ConversationID  *string         `json:"conversationId"`
	SourceRecordIDs []string        `json:"sourceRecordIds"`
	Tags            []string        `json:"tags"`
	Importance      float64         `json:"importance"`
	ExpiresAtMs     *int64          `json:"expiresAtMs"`
	Metadata        json.RawMessage `json:"metadata"`
	Status          string          `json:"status"`
	Version         int64           `json:"version"`
	Supersedes      *string         `json:"supersedes"`
	SupersededBy    *string         `json:"supersededBy"`
	MergedInto      *string         `json:"mergedInto"`
	CreatedAtMs     int64           `json:"createdAtMs"`
	UpdatedAtMs     int64           `json:"updatedAtMs"`
}

// CreateEntryRequest is the body of POST /entries: the client fields of an entry. A
// nil ID asks the server to generate one; Importance defaults to 0.5.
type CreateEntryRequest struct {
	ID              *string         `json:"id,omitempty"`
	Kind            string          `json:"kind"`
	Content         string          `json:"content"`
	ConversationID  *string         `json:"conversationId,omitempty"`
	SourceRecordIDs []string        `json:"sourceRecordIds,omitempty"`
	Tags            []string        `json:"tags,omitempty"`
	Importance      *float64        `json:"importance,omitempty"`
	ExpiresAtMs     *int64          `json:"expiresAtMs,omitempty"`
	Metadata        json.RawMessage `json:"metadata,omitempty"`
}

// GetEntryRequest is the body of POST /entries/get.
type GetEntryRequest struct {
	EntryID string `json:"entryId"`
}

// CorrectEntryRequest is the body of POST /entries/correct. Tags, Importance and
// ExpiresAtMs replace the corrected entry's when present (tags: [] clears them) and
// are inherited when absent or null.
type CorrectEntryRequest struct {
	EntryID     string   `json:"entryId"`
	Content     string   `json:"content"`
	Reason      *string  `json:"reason,omitempty"`
	Tags        []string `json:"tags,omitempty"`
	Importance  *float64 `json:"importance,omitempty"`
	ExpiresAtMs *int64   `json:"expiresAtMs,omitempty"`
}

// CorrectEntryResponse answers a correction: the new active entry and the one it
// superseded.
type CorrectEntryResponse struct {
	Entry      ContextEntry `json:"entry"`
	Superseded ContextEntry `json:"superseded"`
}

// MergedEntry is the entry a merge creates: the client fields of a create except
// sourceRecordIds, which is the union of the sources'.
type MergedEntry struct {
	ID             *string         `json:"id,omitempty"`
	Kind           string          `json:"kind"`
	Content        string          `json:"content"`
	ConversationID *string         `json:"conversationId,omitempty"`
	Tags           []string        `json:"tags,omitempty"`
	Importance     *float64        `json:"importance,omitempty"`
	ExpiresAtMs    *int64          `json:"expiresAtMs,omitempty"`
	Metadata       json.RawMessage `json:"metadata,omitempty"`
}

// MergeEntriesRequest is the body of POST /entries/merge: 2–100 distinct active
// entries and the entry that replaces them.
type MergeEntriesRequest struct {
	EntryIDs []string     `json:"entryIds"`
	Merged   *MergedEntry `json:"merged"`
}

// MergeEntriesResponse answers a merge: the merged entry and its sources, in the
// order of the request's entryIds.
type MergeEntriesResponse struct {
	Entry   ContextEntry   `json:"entry"`
	Sources []ContextEntry `json:"sources"`
}

// ExpireEntryRequest is the body of POST /entries/expire.
type ExpireEntryRequest struct {
	EntryID string  `json:"entryId"`
	Reason  *string `json:"reason,omitempty"`
}

// ListEntriesRequest is the body of POST /entries/list: every filter is optional
// (null: any). Status is one of EntryStatuses; Tags keeps entries carrying all of
// them; Limit defaults to 50. Cursor is the previous page's nextCursor, valid with
// the same filters only.
type ListEntriesRequest struct {
	Status         *string  `json:"status,omitempty"`
	Kinds          []string `json:"kinds,omitempty"`
	Tags           []string `json:"tags,omitempty"`
	ConversationID *string  `json:"conversationId,omitempty"`
	Cursor         *string  `json:"cursor,omitempty"`
	Limit          *int     `json:"limit,omitempty"`
}

// EntryList is one page of entries, newest first; NextCursor is null exactly when no
// further entry exists.
type EntryList struct {
	Entries    []ContextEntry `json:"entries"`
	NextCursor *string        `json:"nextCursor"`
}

// EntryHistoryRequest is the body of POST /entries/history.
type EntryHistoryRequest struct {
	EntryID string `json:"entryId"`
}

// EntryHistory is the chain of versions an entry belongs to, oldest first: from the
// first version, through every correction, to the current one. A version merged into
// another entry carries it in mergedInto.
type EntryHistory struct {
	Versions []ContextEntry `json:"versions"`
}

// RecallFilter narrows a recall: entries of one of Kinds (empty: any), of
// ConversationID (null: any) and carrying every one of Tags.
type RecallFilter struct {
	Kinds          []string `json:"kinds,omitempty"`
	ConversationID *string  `json:"conversationId,omitempty"`
	Tags           []string `json:"tags,omitempty"`
}

// RecallRequest is the body of POST /recall. TopK defaults to 10 and Mode to hybrid;
// MinScore drops results scoring below it.
type RecallRequest struct {
	Query    string        `json:"query"`
	TopK     *int          `json:"topK,omitempty"`
	Mode     string        `json:"mode,omitempty"`
	Filter   *RecallFilter `json:"filter,omitempty"`
	MinScore *float64      `json:"minScore,omitempty"`
	AsOfMs   *int64        `json:"asOfMs,omitempty"`
}

// RecallBreakdown shows where a result came from: its 1-based rank and score in the
// vector half (cosine similarity) and in the text half (its BM25 score); null for a
// half that did not find it or did not run.
type RecallBreakdown struct {
	VectorRank  *int     `json:"vectorRank"`
	VectorScore *float64 `json:"vectorScore"`
	TextRank    *int     `json:"textRank"`
	TextScore   *float64 `json:"textScore"`
}

// RecallResult is one recalled entry. Score is the fusion of both halves' scores in
// hybrid mode (between 0 and 1), the cosine similarity in vector mode and the BM25
// score in text mode; higher is better.
type RecallResult struct {
	Entry     ContextEntry    `json:"entry"`
	Score     float64         `json:"score"`
	Breakdown RecallBreakdown `json:"breakdown"`
}

// RecallWatermark says how current the vector projection of the caller's scope is:
// its generation, how many entries wait to be embedded (the text half finds them
// meanwhile), and the creation time through which every entry is embedded.
type RecallWatermark struct {
	Generation       int64 `json:"generation"`
	PendingEntries   int64 `json:"pendingEntries"`
	IndexedThroughMs int64 `json:"indexedThroughMs"`
}

// RecallResponse answers a recall: the results, best first. Degraded is true when a
// hybrid recall was answered from text alone; DegradationReason then says why.
type RecallResponse struct {
	Results           []RecallResult  `json:"results"`
	Watermark         RecallWatermark `json:"watermark"`
	Degraded          bool            `json:"degraded"`
	DegradationReason *string         `json:"degradationReason"`
}

// Embedder names of a rebuild request (and of AGENT_CONTEXT_EMBEDDER).
const (
	EmbedderLocal  = "local"
	EmbedderHash   = "hash"
	EmbedderOpenAI = "openai"
)

// Embedders lists the embedder names.
var Embedders = []string{EmbedderLocal, EmbedderHash, EmbedderOpenAI}

// RebuildProjectionRequest is the body of POST /projections/vector/rebuild, and the
// request echo of its operation. A null Embedder rebuilds with the configured one.
type RebuildProjectionRequest struct {
	Embedder *string `json:"embedder"`
}

// RebuildProjectionResult is the result of a succeeded vector_rebuild operation: the
// generation now serving recall, its model, and how many entries the rebuild embedded.
type RebuildProjectionResult struct {
	Generation      int64  `json:"generation"`
	Model           string `json:"model"`
	Dimensions      int    `json:"dimensions"`
	EmbeddedEntries int64  `json:"embeddedEntries"`
}
