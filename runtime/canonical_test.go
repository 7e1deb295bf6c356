package runtime_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/runtimetest"
)

// referenceDigest computes contentSha256 the slow, obvious way a client would: marshal
// the items, canonicalize with an RFC 8785 library, hash.
func referenceDigest(t testing.TB, items []contract.WindowItem) string {
	raw, err := json.Marshal(items)
	require.NoError(t, err)
	v := jsontext.Value(raw)
	require.NoError(t, v.Canonicalize())
	sum := sha256.Sum256(v)
	return hex.EncodeToString(sum[:])
}

func TestWindowDigestDocumentedForm(t *testing.T) {
	t.Parallel()
	items := []contract.WindowItem{
		{ID: "item-1", Ordinal: 0, Kind: "message", Role: runtimetest.Ptr("user"), Content: "hello", SourceRecordID: runtimetest.Ptr("message-1")},
		{ID: "item-2", Ordinal: 1, Kind: "knowledge_evidence", Content: "tab\there \"q\" é 🙂\u2028",
			KnowledgeEvidence: &contract.KnowledgeEvidence{Provider: "p", ResourceRef: "r", Excerpt: "x", Score: runtimetest.Ptr(0.5), RetrievedAtMs: 7},
			Metadata:          json.RawMessage(`{"z": 1.50, "a": [1e2, "<b>"]}`)},
	}
	// The exact canonical text docs/windows.md describes.
	canonical := `[{"content":"hello","id":"item-1","kind":"message","knowledgeEvidence":null,"metadata":null,"ordinal":0,"role":"user","sourceRecordId":"message-1"},` +
		`{"content":"tab\there \"q\" é 🙂` + "\u2028" + `","id":"item-2","kind":"knowledge_evidence",` +
		`"knowledgeEvidence":{"excerpt":"x","provider":"p","resourceRef":"r","retrievedAtMs":7,"revisionRef":null,"score":0.5,"segmentRef":null},` +
		`"metadata":{"a":[100,"<b>"],"z":1.5},"ordinal":1,"role":null,"sourceRecordId":null}]`
	sum := sha256.Sum256([]byte(canonical))
	n, digest, err := runtime.WindowDigest(items)
	require.NoError(t, err)
	require.Equal(t, hex.EncodeToString(sum[:]), digest)
	require.Equal(t, referenceDigest(t, items), digest)
	require.EqualValues(t, len("hello")+len(items[1].Content), n)

	n, digest, err = runtime.WindowDigest(nil)
	require.NoError(t, err)
	empty := sha256.Sum256([]byte("[]"))
	require.Equal(t, hex.EncodeToString(empty[:]), digest)
	require.Zero(t, n)
}

// FuzzWindowDigest checks the streaming encoder against a general RFC 8785
// implementation for arbitrary content, IDs and metadata strings.
func FuzzWindowDigest(f *testing.F) {
	for _, s := range []string{"", "a", "\x00\x01\x1f\x7f", `"\/`, "é🙂\u2028\u2029\ufeff", "\b\f\n\r\t"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, content, other string) {
		if !utf8.ValidString(content) || !utf8.ValidString(other) {
			return // the decoder refuses invalid UTF-8 before a digest is ever taken
		}
		meta, err := json.Marshal(map[string]string{other: content})
		require.NoError(t, err)
		items := []contract.WindowItem{{ID: "i", Kind: "message", Content: content, Role: runtimetest.Ptr(other), Metadata: meta}}
		_, digest, err := runtime.WindowDigest(items)
		require.NoError(t, err)
		require.Equal(t, referenceDigest(t, items), digest)
	})
}

// BenchmarkWindowDigest hashes a 2,000-item window of 1 KiB items.
func BenchmarkWindowDigest(b *testing.B) {
	items := make([]contract.WindowItem, contract.MaxWindowItems)
	for i := range items {
		items[i] = contract.WindowItem{ID: "item", Ordinal: i, Kind: "message", Role: runtimetest.Ptr("user"),
			Content: "héllo 你好 \"quoted\"\n" + strings.Repeat("x", 1000)}
	}
	b.SetBytes(int64(contract.MaxWindowItems * len(items[0].Content)))
	for range b.N {
		if _, _, err := runtime.WindowDigest(items); err != nil {
			b.Fatal(err)
		}
	}
}
