package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/contract/client"
)

// envBenchServe makes TestExportBenchService run the service (the benchmark's child).
const envBenchServe = "AGENT_CONTEXT_BENCH_SERVE"

// TestExportBenchService is the service process of BenchmarkExportMemory and
// BenchmarkMessagesRecentThroughput: the test binary run again with
// AGENT_CONTEXT_BENCH_SERVE=1 serves until SIGTERM, so that its peak memory is the
// service's alone and its clients are outside it. It skips in every other run.
func TestExportBenchService(t *testing.T) {
	if os.Getenv(envBenchServe) == "" {
		t.Skip("the service process of BenchmarkExportMemory")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	require.NoError(t, run(ctx, []string{"serve"}, os.Getenv, os.Stdout))
}

// BenchmarkExportMemory exports one conversation holding 1 GiB of message content
// (16,384 messages of 64 KiB; AGENT_CONTEXT_BENCH_EXPORT_MB changes the size) from a
// service running in a process of its own, and reports the export's MB/s and that
// process's peak resident memory (VmHWM) idle and after the export; the target is
// under 100 MB, the bound 150 MB. The baseline, measured in the same run on the same
// rows, is one streaming SELECT of the content by the benchmark itself: the floor of
// reading the data at all. Each round is one export.
//
//	go run ./adapters/postgres/pgtest/pgtestrun -- go test -run '^$' -bench BenchmarkExportMemory -benchtime 1x -timeout 60m ./cmd/agent-context
func BenchmarkExportMemory(b *testing.B) {
	ctx := context.Background()
	megabytes := 1024
	if v := os.Getenv("AGENT_CONTEXT_BENCH_EXPORT_MB"); v != "" {
		var err error
		megabytes, err = strconv.Atoi(v)
		require.NoError(b, err)
	}
	const messageBytes = 64 << 10
	messages := megabytes << 20 / messageBytes
	dsn := pgtest.NewDSN(b)
	pool := openBenchPool(b, dsn)
	loadStart := time.Now()
	content := loadBigConversation(b, pool, messages, messageBytes)
	b.Logf("loaded %d messages, %d MiB of content, in %s", messages, content>>20, time.Since(loadStart).Round(time.Second))

	// The floor: the content read by one streaming statement.
	start := time.Now()
	var read int64
	rows, err := pool.Query(ctx, `SELECT content FROM messages WHERE tenant_id = 'local' AND project_id = 'local'
		AND conversation_id = 'big' ORDER BY sequence`)
	require.NoError(b, err)
	for rows.Next() {
		read += int64(len(rows.RawValues()[0]))
	}
	require.NoError(b, rows.Err())
	rows.Close()
	floor := float64(read) / (1 << 20) / time.Since(start).Seconds()

	svc := startServiceProcess(b, dsn)
	c := client.New(client.WithBaseURL(svc.base), client.WithHTTPClient(&http.Client{Timeout: time.Minute}))
	idle := svc.peakRSS(b)
	b.SetBytes(content)
	b.ResetTimer()
	var elapsed time.Duration
	for range b.N {
		start := time.Now()
		started, err := c.Export(ctx, &contract.ExportRequest{ConversationID: ptrTo("big")})
		require.NoError(b, err)
		op, err := awaitOperation(ctx, c, started.Operation.ID)
		require.NoError(b, err)
		elapsed += time.Since(start)
		require.EqualValues(b, messages, op.Progress.Done)
	}
	b.StopTimer()
	peak := svc.peakRSS(b)
	b.ReportMetric(float64(content)/(1<<20)/(elapsed.Seconds()/float64(b.N)), "export-MB/s")
	b.ReportMetric(floor, "select-MB/s")
	b.ReportMetric(float64(idle)/(1<<20), "idle-VmHWM-MB")
	b.ReportMetric(float64(peak)/(1<<20), "peak-VmHWM-MB")
	require.Less(b, peak, int64(150<<20), "the export's peak RSS passes the bound")
}

func openBenchPool(b *testing.B, dsn string) *pgxpool.Pool {
	b.Helper()
	pool, err := postgres.NewPool(context.Background(), dsn, postgres.PoolOptions{MaxConns: 2, ApplicationName: "bench-loader"})
	require.NoError(b, err)
	b.Cleanup(pool.Close)
	return pool
}

// loadBigConversation copies n messages of size bytes of words into the conversation
// "big" of scope local/local and returns their content bytes. The search documents are
// left empty: an export never reads them, and building them for a gigabyte would make
// the load, not the export, the benchmark's cost.
func loadBigConversation(b *testing.B, pool *pgxpool.Pool, n, size int) int64 {
	b.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 11))
	var total int64
	i := 0
	empty := pgtype.TSVector{Valid: true}
	_, err := pool.CopyFrom(ctx, pgx.Identifier{"messages"}, postgres.MessageColumns, pgx.CopyFromFunc(func() ([]any, error) {
		if i == n {
			return nil, nil
		}
		i++
		var sb strings.Builder
		for sb.Len() < size {
			sb.WriteString(msgBenchWords[rng.IntN(len(msgBenchWords))])
			sb.WriteByte(' ')
		}
		text := sb.String()
		total += int64(len(text))
		return []any{"local", "local", "big", fmt.Sprintf("m-%06d", i), int64(i), contract.RoleUser, text,
			int64(1_700_000_000_000 + i), nil, empty}, nil
	}))
	require.NoError(b, err)
	_, err = pool.Exec(ctx, `INSERT INTO conversations (tenant_id, project_id, conversation_id, last_sequence, message_count, created_at_ms)
		VALUES ('local', 'local', 'big', $1, $1, 0)`, n)
	require.NoError(b, err)
	_, err = pool.Exec(ctx, "VACUUM ANALYZE messages")
	require.NoError(b, err)
	return total
}

// serviceProcess is the service running in a child process.
type serviceProcess struct {
	cmd  *exec.Cmd
	base string
}

var servingAddr = regexp.MustCompile(`"msg":"agent-context serving".*"addr":"([^"]+)"`)

// startServiceProcess runs the service (this test binary, as TestExportBenchService)
// on dsn, on a free loopback port, with the production configuration but for env
// (NAME=value settings added), and stops it with SIGTERM at the end.
func startServiceProcess(b testing.TB, dsn string, env ...string) *serviceProcess {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestExportBenchService$")
	cmd.Env = append(append(os.Environ(), envBenchServe+"=1", "AGENT_CONTEXT_DATABASE_URL="+dsn, "AGENT_CONTEXT_BIND=127.0.0.1:0",
		"AGENT_CONTEXT_EMBEDDER=hash", "AGENT_CONTEXT_RATE_LIMIT_AGENT_PER_MIN=0", "AGENT_CONTEXT_DRAIN_DELAY=0s"), env...)
	stderr, err := cmd.StderrPipe()
	require.NoError(b, err)
	require.NoError(b, cmd.Start())
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	lines := bufio.NewScanner(stderr)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
	for lines.Scan() {
		if m := servingAddr.FindStringSubmatch(lines.Text()); m != nil {
			go func() {
				for lines.Scan() {
				}
			}()
			return &serviceProcess{cmd: cmd, base: "http://" + m[1]}
		}
	}
	b.Fatalf("the service process ended before serving: %v", lines.Err())
	return nil
}

// peakRSS is the process's peak resident set size so far (VmHWM), in bytes.
func (s *serviceProcess) peakRSS(b *testing.B) int64 {
	b.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	require.NoError(b, err)
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			require.NoError(b, err)
			return kb << 10
		}
	}
	b.Fatal("no VmHWM in /proc status")
	return 0
}
