package pgmetrics

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"
)

// TestJobMetricsOutcomes: every way a job run ends is counted under its outcome,
// a panic included (and still raised to River).
func TestJobMetricsOutcomes(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := NewJobMetrics(reg)
	job := &rivertype.JobRow{Kind: "k"}
	for _, err := range []error{nil, river.JobSnooze(0), river.JobCancel(errors.New("gone")), errors.New("transient"),
		fmt.Errorf("wrapped: %w", river.JobSnooze(0))} {
		got := m.Work(context.Background(), job, func(context.Context) error { return err })
		require.Equal(t, err, got)
	}
	require.Panics(t, func() {
		_ = m.Work(context.Background(), job, func(context.Context) error { panic("boom") })
	})
	for outcome, want := range map[string]float64{"completed": 1, "snoozed": 2, "cancelled": 1, "errored": 1, "panicked": 1} {
		require.Equal(t, want, testutil.ToFloat64(m.runs.WithLabelValues("k", outcome)), outcome)
	}
	require.Equal(t, 5, testutil.CollectAndCount(m.duration, "agent_context_jobs_run_duration_seconds"), "one series per outcome")
}
