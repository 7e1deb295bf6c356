package postgres

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres/textindex"
	"github.com/agent-context/agent-context/contract"
)

// An append builds ahead only the documents of its first 4 MiB of content, each as
// textindex.DocumentVector would; the rest are left for the COPY to build one at a time.
func TestBatchDocumentsBoundsEarlyWork(t *testing.T) {
	t.Parallel()
	mib := strings.Repeat("a", 1<<20)
	var batch []contract.ConversationRecord
	for i := range 100 {
		batch = append(batch, contract.ConversationRecord{Content: fmt.Sprintf("word%d 東京タワー", i)})
	}
	batch = append(batch, contract.ConversationRecord{Content: mib}, contract.ConversationRecord{Content: mib}, contract.ConversationRecord{Content: mib},
		contract.ConversationRecord{Content: mib}, contract.ConversationRecord{Content: "after"})
	docs := batchDocuments(batch)
	for i := range 103 {
		require.Equal(t, textindex.DocumentVector(batch[i].Content), docs.get(i), i)
	}
	require.False(t, docs.get(103).Valid)
	require.False(t, docs.get(104).Valid)
	docs.wait()
}
