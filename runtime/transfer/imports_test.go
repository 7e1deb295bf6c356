package transfer_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/conversation"
	"github.com/agent-context/agent-context/runtime/memory"
	"github.com/agent-context/agent-context/runtime/operation"
	"github.com/agent-context/agent-context/runtime/runtimetest"
	"github.com/agent-context/agent-context/runtime/transfer"
)

// importStores are stores that keep what an import writes in memory, as the
// database would: messages through the append planner, records by ID.
type importStores struct {
	conversation.WindowStore
	memory.EntryStore
	memory.ProjectionStore
	transfer.ArtifactStore
	last     map[string]int64
	messages int
	windows  map[string]contract.Window
	derived  map[string]contract.Derivation
	invoked  map[string]contract.ModelInvocation
	entries  map[string]string
	queued   int
	chunks   []transfer.ArtifactChunk
}

func newImportStores() *importStores {
	return &importStores{last: map[string]int64{}, windows: map[string]contract.Window{}, derived: map[string]contract.Derivation{},
		invoked: map[string]contract.ModelInvocation{}, entries: map[string]string{}}
}

func (s *importStores) db() runtimetest.DB[transfer.Stores] {
	return runtimetest.DB[transfer.Stores]{S: transfer.Stores{Messages: s, Windows: s, Entries: s, Projection: s, Artifacts: s, Jobs: &runtimetest.Jobs{},
		Operations: &stubOperations{}, Steps: stubSteps{}}}
}

func (s *importStores) AppendMessages(_ context.Context, _ runtime.Scope, batch []contract.ConversationRecord, plan conversation.AppendPlanner, nowMs int64) (conversation.AppendResult, error) {
	p, err := plan(batch, s.last, nil, nowMs)
	if err != nil {
		return conversation.AppendResult{}, err
	}
	for c, seq := range p.LastSequence {
		s.last[c] = seq
	}
	s.messages += len(p.Insert)
	return conversation.AppendResult{Appended: len(p.Insert), SkippedIDs: p.SkippedIDs}, nil
}

func (s *importStores) ListMessages(context.Context, runtime.Scope, conversation.MessageQuery) ([]contract.ConversationRecord, bool, error) {
	return nil, false, nil
}

func (s *importStores) SearchMessages(context.Context, runtime.Scope, conversation.SearchQuery) ([]contract.SearchHit, error) {
	return nil, nil
}

func (s *importStores) CreateWindow(_ context.Context, _ runtime.Scope, w *contract.Window) (contract.Window, bool, error) {
	if stored, ok := s.windows[w.ID]; ok {
		return stored, false, nil
	}
	s.windows[w.ID] = *w
	return *w, true, nil
}

func (s *importStores) CreateDerivation(_ context.Context, _ runtime.Scope, d *contract.Derivation) (contract.Derivation, bool, error) {
	if stored, ok := s.derived[d.ID]; ok {
		return stored, false, nil
	}
	s.derived[d.ID] = *d
	return *d, true, nil
}

func (s *importStores) SaveInvocation(_ context.Context, _ runtime.Scope, m *contract.ModelInvocation) (contract.ModelInvocation, bool, error) {
	if stored, ok := s.invoked[m.ID]; ok {
		return stored, false, nil
	}
	s.invoked[m.ID] = *m
	return *m, true, nil
}

func (s *importStores) CreateEntries(_ context.Context, _ runtime.Scope, entries []contract.ContextEntry, digests []string) ([]memory.EntryWrite, error) {
	out := make([]memory.EntryWrite, len(entries))
	for i, e := range entries {
		if stored, ok := s.entries[e.ID]; ok {
			out[i] = memory.EntryWrite{Stored: e, StoredDigest: stored}
			continue
		}
		s.entries[e.ID] = digests[i]
		out[i] = memory.EntryWrite{Created: true}
	}
	return out, nil
}

func (s *importStores) Enqueue(_ context.Context, _ runtime.Scope, entries []contract.ContextEntry, _ memory.EmbeddingModel) error {
	s.queued += len(entries)
	return nil
}

func (s *importStores) CreateArtifact(context.Context, runtime.Scope, transfer.Artifact, *string) error {
	return nil
}

func (s *importStores) WriteChunks(_ context.Context, _ runtime.Scope, _ string, chunks []transfer.ArtifactChunk, _ []string) error {
	s.chunks = append(s.chunks, chunks...)
	return nil
}

func (s *importStores) FinishArtifact(context.Context, runtime.Scope, string, string) error {
	return nil
}

// stubOperations records the operations created; nothing else of it is called.
type stubOperations struct {
	operation.OperationStore
	created []contract.Operation
}

func (s *stubOperations) CreateOperations(_ context.Context, ops []operation.NewOperation) error {
	for _, o := range ops {
		s.created = append(s.created, o.Operation)
	}
	return nil
}

// stubSteps accepts every step.
type stubSteps struct{}

func (stubSteps) LockStep(context.Context, runtime.Scope, string, time.Duration, any) (bool, error) {
	return true, nil
}
func (stubSteps) SaveStep(context.Context, runtime.Scope, string, any, int64, int64) error {
	return nil
}
func (stubSteps) SucceedStep(context.Context, runtime.Scope, string, any, int64, int64) error {
	return nil
}

// importInline imports data into s through the use case, as POST /imports does.
func importInline(s *importStores, data []byte) (*contract.ImportResponse, error) {
	x := transfer.NewExports(transfer.ExportsConfig{DB: s.db()})
	encoded := base64.StdEncoding.EncodeToString(data)
	format := contract.FormatNDJSON
	return x.Import(context.Background(), runtime.Principal{Scope: runtime.Scope{TenantID: "t", ProjectID: "p"}, Subject: "agent"},
		&contract.ImportRequest{Format: &format, Data: &encoded})
}

const importHeader = `{"type":"header","formatVersion":1,"exportedAtMs":1,"counts":{"messages":2,"windows":1,"derivations":0,"invocations":0,"entries":1}}`

// A stream imports record by record: messages through the append planner, the window
// checked against its digest, the active entry queued for embedding.
func TestImportWritesEachRecord(t *testing.T) {
	t.Parallel()
	s := newImportStores()
	res, err := importInline(s, []byte(importHeader+"\n"+
		`{"type":"message","record":{"id":"m-1","scope":{"conversationId":"c"},"role":"user","content":"hi","sequence":3,"createdAtMs":5,"metadata":null}}`+"\n"+
		`{"record":{"id":"m-2","scope":{"conversationId":"c"},"role":"tool","content":"ok"},"type":"message"}`+"\n"+
		`{"type":"window","record":{"id":"w","conversation":{"conversationId":"c"},"stage":"original","purpose":"p","tokenCount":1,"items":[],`+
		`"metadata":null,"createdAtMs":9,"itemCount":0,"contentBytes":0,"contentSha256":"4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"}}`+"\n"+
		`{"type":"entry","record":{"id":"e","kind":"fact","content":"x","conversationId":null,"sourceRecordIds":[],"tags":[],"importance":0.5,`+
		`"expiresAtMs":1,"metadata":null,"status":"active","version":1,"supersedes":null,"supersededBy":null,"mergedInto":null,"createdAtMs":1,"updatedAtMs":1}}`))
	require.NoError(t, err)
	require.Equal(t, contract.RecordCounts{Messages: 2, Windows: 1, Entries: 1}, res.Imported)
	require.EqualValues(t, 4, s.last["c"], "the second message follows the first's own sequence")
	require.EqualValues(t, 9, s.windows["w"].CreatedAtMs, "the window keeps its time")
	require.Equal(t, 1, s.queued)
}

// A snapshot artifact is cut into chunks of exactly 1 MiB (the last one shorter),
// each with its SHA-256.
func TestStoreSnapshotCutsChunks(t *testing.T) {
	t.Parallel()
	s := newImportStores()
	data := bytes.Repeat([]byte("0123456789abcdef"), (5<<20)/32)
	_, err := transfer.NewExports(transfer.ExportsConfig{DB: s.db()}).StoreSnapshot(context.Background(), runtime.Scope{}, data, json.RawMessage(`{}`))
	require.NoError(t, err)
	require.Len(t, s.chunks, 3)
	var joined []byte
	for i, c := range s.chunks {
		require.Equal(t, i, c.Index)
		sum := sha256.Sum256(c.Data)
		require.Equal(t, hex.EncodeToString(sum[:]), c.SHA256)
		joined = append(joined, c.Data...)
	}
	require.Len(t, s.chunks[0].Data, contract.MaxExportChunkBytes)
	require.Len(t, s.chunks[1].Data, contract.MaxExportChunkBytes)
	require.Len(t, s.chunks[2].Data, len(data)-2*contract.MaxExportChunkBytes)
	require.Equal(t, data, joined)
}

// FuzzImportNDJSON feeds any stream to the import: a refusal is a 4xx of the contract
// naming the data (with the line where one is at fault) or, for records that repeat an
// ID with other content, the records as "<type>:<id>"; nothing panics, and a stream
// that imports wrote (or skipped as identical) exactly the records its header counts.
// Seed corpus: testdata/fuzz/FuzzImportNDJSON/.
func FuzzImportNDJSON(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		s := newImportStores()
		res, err := importInline(s, data)
		if err != nil {
			var re *runtime.Error
			require.ErrorAs(t, err, &re)
			switch re.Code {
			case contract.CodeConflict:
			case contract.CodeIdempotencyConflict:
				ids, _ := re.Details["ids"].([]string)
				require.NotEmpty(t, ids, "%v", err)
				for _, id := range ids {
					require.Regexp(t, `^(message|window|derivation|invocation|entry):.`, id)
				}
			default:
				require.Contains(t, []string{contract.CodeValidationFailed, contract.CodePayloadTooLarge}, re.Code, "%v", err)
				require.Equal(t, "data", re.Details["field"], "%v", err)
			}
			return
		}
		first, _, _ := strings.Cut(string(data), "\n")
		var header contract.ExportHeader
		require.NoError(t, json.Unmarshal([]byte(first), &header))
		i, k := res.Imported, res.Skipped
		require.Equal(t, header.Counts, contract.RecordCounts{Messages: i.Messages + k.Messages, Windows: i.Windows + k.Windows,
			Derivations: i.Derivations + k.Derivations, Invocations: i.Invocations + k.Invocations, Entries: i.Entries + k.Entries})
		require.EqualValues(t, i.Messages, s.messages)
		require.Len(t, s.windows, int(i.Windows))
		require.Len(t, s.entries, int(i.Entries))
	})
}

func (s *importStores) ListConversations(context.Context, runtime.Scope, string, runtime.PageQuery) ([]contract.ConversationSummary, error) {
	return nil, nil
}
