package local_test

import (
	"testing"

	"github.com/agent-context/agent-context/adapters/embedding/embeddingtest"
)

// BenchmarkLocalShortMemories: texts/s on short memories; -cpu 1,2 for 1 and 2 workers.
func BenchmarkLocalShortMemories(b *testing.B) {
	embeddingtest.BenchmarkThroughput(b, MustEmbedder(b))
}

// BenchmarkLocalQuery: latency of one 10-word query.
func BenchmarkLocalQuery(b *testing.B) {
	embeddingtest.BenchmarkQuery(b, MustEmbedder(b))
}
