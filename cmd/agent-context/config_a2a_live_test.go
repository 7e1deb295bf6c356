package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestA2ALiveConfig(t *testing.T) {
	t.Parallel()
	load := func(env map[string]string) (Config, error) {
		return LoadConfig(func(k string) string { return env[k] })
	}
	cfg, err := load(nil)
	require.NoError(t, err)
	require.Equal(t, 30*time.Minute, cfg.A2ALive.StreamMax)
	require.Equal(t, 15*time.Second, cfg.A2ALive.StreamKeepAlive)
	require.Equal(t, 256, cfg.A2ALive.MaxWaitersPerTenant)
	require.Empty(t, cfg.A2ALive.PushAllowHosts)

	cfg, err = load(map[string]string{"AGENT_CONTEXT_A2A_STREAM_MAX": "5m", "AGENT_CONTEXT_A2A_STREAM_KEEPALIVE": "2s",
		"AGENT_CONTEXT_MAX_WAITERS_PER_TENANT": "1000",
		"AGENT_CONTEXT_A2A_PUSH_ALLOW_HOSTS":   " Hooks.Internal ,127.0.0.1,,[::1]"})
	require.NoError(t, err)
	require.Equal(t, 5*time.Minute, cfg.A2ALive.StreamMax)
	require.Equal(t, 2*time.Second, cfg.A2ALive.StreamKeepAlive)
	require.Equal(t, 1000, cfg.A2ALive.MaxWaitersPerTenant)
	require.Equal(t, []string{"hooks.internal", "127.0.0.1", "::1"}, cfg.A2ALive.PushAllowHosts)

	for _, bad := range [][2]string{
		{"AGENT_CONTEXT_A2A_STREAM_MAX", "forever"},
		{"AGENT_CONTEXT_A2A_STREAM_MAX", "0s"},
		{"AGENT_CONTEXT_A2A_STREAM_KEEPALIVE", "-1s"},
		{"AGENT_CONTEXT_A2A_STREAM_KEEPALIVE", "often"},
		{"AGENT_CONTEXT_MAX_WAITERS_PER_TENANT", "0"},
		{"AGENT_CONTEXT_MAX_WAITERS_PER_TENANT", "many"},
		{"AGENT_CONTEXT_A2A_PUSH_ALLOW_HOSTS", "https://hooks.internal/x"},
	} {
		_, err := load(map[string]string{bad[0]: bad[1]})
		require.ErrorContains(t, err, bad[0], "%s=%s", bad[0], bad[1])
	}
}
