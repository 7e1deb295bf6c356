package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgmetrics"
	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
)

// reading counts the statements that read table.
func (l *statementLog) reading(table string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, sql := range l.sql {
		if strings.Contains(sql, "FROM "+table) {
			n++
		}
	}
	return n
}

// TestMetricsScrapesAreCheap: /metrics needs no credential, so its scrape rate is
// anyone's; 100 scrapes in a row count the A2A tables and the projection's queue once,
// not 100 times. Once the refresh interval has passed, the next scrape counts again
// and shows what changed.
func TestMetricsScrapesAreCheap(t *testing.T) {
	t.Parallel()
	log := &statementLog{}
	config, err := pgxpool.ParseConfig(pgtest.NewDSN(t))
	require.NoError(t, err)
	config.ConnConfig.Tracer = log
	pool, err := pgxpool.NewWithConfig(context.Background(), config)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	reg := prometheus.NewPedanticRegistry()
	hub, err := postgres.NewEventHub(context.Background(), pool, postgres.EventHubOptions{Registerer: reg, MetricsRefresh: time.Hour})
	require.NoError(t, err)
	t.Cleanup(hub.Close)
	reg.MustRegister(pgmetrics.NewProjectionCollector(pool, time.Hour))

	gauge := func(reg *prometheus.Registry, name, state string) float64 {
		t.Helper()
		families, err := reg.Gather()
		require.NoError(t, err)
		for _, f := range families {
			for _, m := range f.GetMetric() {
				if f.GetName() == name && (state == "" || m.GetLabel()[0].GetValue() == state) {
					return m.GetGauge().GetValue()
				}
			}
		}
		t.Fatalf("no metric %s %s", name, state)
		return 0
	}
	for range 100 {
		require.Zero(t, gauge(reg, "agent_context_a2a_messages", "live"))
		require.Zero(t, gauge(reg, "agent_context_vector_projection_backlog", ""))
	}
	require.Equal(t, 1, log.reading("a2a_tasks"), "one count for 100 scrapes")
	require.Equal(t, 1, log.reading("a2a_messages"))
	require.Equal(t, 1, log.reading("entry_projection_queue"))

	// With a short interval, a scrape after it counts again and shows the change.
	short := prometheus.NewPedanticRegistry()
	short.MustRegister(pgmetrics.NewProjectionCollector(pool, 50*time.Millisecond))
	require.Zero(t, gauge(short, "agent_context_vector_projection_backlog", ""))
	_, err = pool.Exec(context.Background(), `
		INSERT INTO entry_projection_queue (tenant_id, project_id, entry_id, created_at_ms) VALUES ('t', 'p', 'e', 1)`)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return gauge(short, "agent_context_vector_projection_backlog", "") == 1 },
		time.Minute, 10*time.Millisecond)
	require.Zero(t, gauge(reg, "agent_context_vector_projection_backlog", ""), "within its interval the first still answers from its read")
}
