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
	require.Empty(t, cfg.A2ALive.PushAllowHosts)

	cfg, err = load(map[string]string{"AGENT_CONTEXT_A2A_STREAM_MAX": "5m",
		"AGENT_CONTEXT_A2A_PUSH_ALLOW_HOSTS": " Hooks.Internal ,127.0.0.1,,[::1]"})
	require.NoError(t, err)
	require.Equal(t, 5*time.Minute, cfg.A2ALive.StreamMax)
	require.Equal(t, []string{"hooks.internal", "127.0.0.1", "::1"}, cfg.A2ALive.PushAllowHosts)

	for name, value := range map[string]string{
		"AGENT_CONTEXT_A2A_STREAM_MAX":       "forever",
		"AGENT_CONTEXT_A2A_PUSH_ALLOW_HOSTS": "https://hooks.internal/x",
	} {
		_, err := load(map[string]string{name: value})
		require.ErrorContains(t, err, name)
	}
	_, err = load(map[string]string{"AGENT_CONTEXT_A2A_STREAM_MAX": "0s"})
	require.ErrorContains(t, err, "AGENT_CONTEXT_A2A_STREAM_MAX")
}
