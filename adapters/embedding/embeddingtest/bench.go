package embeddingtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/agent-context/agent-context/runtime/memory"
)

// shortMemories are entry-sized texts (8–12 words), the typical content of a memory.
var shortMemories = []string{
	"The staging cluster deploys from the release branch every weekday.",
	"Alice prefers answers in German and short bullet points.",
	"Rotate the API keys before the audit next month.",
	"The user's train to Berlin leaves at 9:40 on Sunday.",
	"Our incident postmortem found a missing database index on orders.",
	"Never run migrations on Friday afternoons without a second reviewer.",
	"The billing service retries failed card payments three times.",
	"Bob is allergic to peanuts and avoids Thai restaurants.",
}

// query is a 10-word recall query.
const query = "how do we deploy the staging cluster on weekdays?"

// BenchmarkThroughput embeds batches of 32 distinct short memories from as many
// goroutines as -cpu says (run with -cpu 1,2 for one and two workers) and reports
// texts/s.
func BenchmarkThroughput(b *testing.B, e memory.Embedder) {
	batch := make([]string, 32)
	for i := range batch {
		batch[i] = fmt.Sprintf("%s (%d)", shortMemories[i%len(shortMemories)], i)
	}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := e.Embed(context.Background(), batch); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "texts/s")
}

// BenchmarkQuery measures the latency of embedding one 10-word query alone (ns/op).
func BenchmarkQuery(b *testing.B, e memory.Embedder) {
	for b.Loop() {
		if _, err := e.Embed(context.Background(), []string{query}); err != nil {
			b.Fatal(err)
		}
	}
}
