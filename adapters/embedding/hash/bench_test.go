package hash_test

import (
	"testing"

	"github.com/agent-context/agent-context/adapters/embedding/embeddingtest"
	"github.com/agent-context/agent-context/adapters/embedding/hash"
)

// BenchmarkHashShortMemories is the baseline of BenchmarkLocalShortMemories.
func BenchmarkHashShortMemories(b *testing.B) {
	embeddingtest.BenchmarkThroughput(b, hash.New())
}

// BenchmarkHashQuery is the baseline of BenchmarkLocalQuery.
func BenchmarkHashQuery(b *testing.B) {
	embeddingtest.BenchmarkQuery(b, hash.New())
}
