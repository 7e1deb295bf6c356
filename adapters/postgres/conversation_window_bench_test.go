package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
)

// The window benchmarks move 2,000 items of benchItemBytes each (about 2 MB a window)
// through the use case and the store, beside raw pgx doing the same I/O on the same
// table, so docs/benchmarks.md can report the overhead as a ratio.
const benchItemBytes = 1024

func benchContent(i int) string {
	prefix := fmt.Sprintf("%d: héllo 你好 ", i)
	return prefix + strings.Repeat("x", benchItemBytes-len(prefix))
}

func reportWindowRate(b *testing.B) {
	b.SetBytes(contract.MaxWindowItems * benchItemBytes)
	b.ReportMetric(float64(b.N*contract.MaxWindowItems)/b.Elapsed().Seconds(), "items/s")
}

// BenchmarkWindowCreate2000 creates a 2,000-item window per operation: validation,
// contentSha256, the conversation claim, the header insert and one COPY.
func BenchmarkWindowCreate2000(b *testing.B) {
	wb := setupWindows(b)
	ctx := context.Background()
	req := windowRequest("", "bench", contract.StageAssembled, contract.MaxWindowItems, benchContent)
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("bench-%d", i)
		req.ID = &id
		if _, _, err := wb.windows.CreateWindow(ctx, wb.p, req); err != nil {
			b.Fatal(err)
		}
	}
	reportWindowRate(b)
}

// BenchmarkWindowGet2000 reads a 2,000-item window per operation.
func BenchmarkWindowGet2000(b *testing.B) {
	wb := setupWindows(b)
	ctx := context.Background()
	_, _, err := wb.windows.CreateWindow(ctx, wb.p, windowRequest("bench", "bench", contract.StageAssembled, contract.MaxWindowItems, benchContent))
	require.NoError(b, err)
	req := &contract.GetWindowRequest{WindowID: "bench"}
	b.ResetTimer()
	for range b.N {
		w, err := wb.windows.GetWindow(ctx, wb.p, req)
		if err != nil || len(w.Items) != contract.MaxWindowItems {
			b.Fatal(err, len(w.Items))
		}
	}
	reportWindowRate(b)
}

// BenchmarkRawCopy2000 is the baseline of BenchmarkWindowCreate2000: one CopyFrom of
// the same 2,000 item rows into the same table, nothing else.
func BenchmarkRawCopy2000(b *testing.B) {
	wb := setupWindows(b)
	ctx := context.Background()
	columns := []string{"tenant_id", "project_id", "window_id", "ordinal", "conversation_id", "item_id", "kind",
		"role", "content", "source_record_id", "knowledge_evidence", "metadata"}
	rows := make([][]any, contract.MaxWindowItems)
	for i := range rows {
		rows[i] = []any{"tenant-a", "project-a", "", int32(i), "bench", fmt.Sprintf("item-%d", i), "message",
			"user", []byte(benchContent(i)), nil, nil, nil}
	}
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("raw-%d", i)
		for _, r := range rows {
			r[2] = id
		}
		if _, err := wb.pool.CopyFrom(ctx, pgx.Identifier{"context_window_items"}, columns, pgx.CopyFromRows(rows)); err != nil {
			b.Fatal(err)
		}
	}
	reportWindowRate(b)
}

// BenchmarkRawSelect2000 is the baseline of BenchmarkWindowGet2000: the 2,000 item rows
// of one window read with a plain ordered SELECT, scanned into byte slices.
func BenchmarkRawSelect2000(b *testing.B) {
	wb := setupWindows(b)
	ctx := context.Background()
	_, _, err := wb.windows.CreateWindow(ctx, wb.p, windowRequest("bench", "bench", contract.StageAssembled, contract.MaxWindowItems, benchContent))
	require.NoError(b, err)
	b.ResetTimer()
	for range b.N {
		rows, err := wb.pool.Query(ctx, `
			SELECT item_id, ordinal, kind, role, content, source_record_id, knowledge_evidence::text, metadata::text
			FROM context_window_items
			WHERE tenant_id = $1 AND project_id = $2 AND window_id = $3
			ORDER BY ordinal`, "tenant-a", "project-a", "bench")
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for rows.Next() {
			var id, kind string
			var ordinal int32
			var role, source, evidence, metadata *string
			var content []byte
			if err := rows.Scan(&id, &ordinal, &kind, &role, &content, &source, &evidence, &metadata); err != nil {
				b.Fatal(err)
			}
			n++
		}
		if rows.Err() != nil || n != contract.MaxWindowItems {
			b.Fatal(rows.Err(), n)
		}
	}
	reportWindowRate(b)
}
