package knowledge_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/knowledge"
)

func TestParseConfigJSONAndYAMLAgree(t *testing.T) {
	t.Parallel()
	jsonFile := `{"default": "wiki", "probeIntervalMs": 5000, "providers": [
		{"name": "wiki", "baseUrl": "http://127.0.0.1:7001/", "timeoutMs": 1500, "maxHits": 20,
		 "forwardUserAuthorization": true, "defaultRequirement": "required", "circuitFailures": 3, "circuitOpenMs": 1000},
		{"name": "tickets", "baseUrl": "https://tickets.internal/api/knowledge"}]}`
	yamlFile := `
default: wiki
probeIntervalMs: 5000
providers:
  - name: wiki
    baseUrl: http://127.0.0.1:7001/
    timeoutMs: 1500
    maxHits: 20
    forwardUserAuthorization: true
    defaultRequirement: required
    circuitFailures: 3
    circuitOpenMs: 1000
  - name: tickets
    baseUrl: https://tickets.internal/api/knowledge
`
	want := knowledge.Config{Default: "wiki", ProbeInterval: 5 * time.Second, Providers: []knowledge.ProviderConfig{
		{Name: "wiki", BaseURL: "http://127.0.0.1:7001", Timeout: 1500 * time.Millisecond, MaxHits: 20,
			ForwardUserAuthorization: true, DefaultRequirement: "required", CircuitFailures: 3, CircuitOpen: time.Second},
		{Name: "tickets", BaseURL: "https://tickets.internal/api/knowledge", Timeout: knowledge.DefaultTimeout, MaxHits: 100,
			DefaultRequirement: "optional", CircuitFailures: knowledge.DefaultCircuitFailures, CircuitOpen: knowledge.DefaultCircuitOpen},
	}}
	dir := t.TempDir()
	for name, body := range map[string]string{"providers.json": jsonFile, "providers.yaml": yamlFile, "providers": yamlFile} {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
		got, err := knowledge.LoadConfig(path)
		require.NoError(t, err, name)
		require.Equal(t, want, got, name)
	}
}

func TestParseConfigDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := knowledge.ParseConfig([]byte(`{"providers": [{"name": "only", "baseUrl": "http://127.0.0.1:1"}]}`), true)
	require.NoError(t, err)
	require.Empty(t, cfg.Default, "no default, even with a single provider: queries must name one")
	require.Equal(t, knowledge.DefaultProbeInterval, cfg.ProbeInterval)

	cfg, err = knowledge.ParseConfig([]byte(`{"probeIntervalMs": 0, "providers": [
		{"name": "a", "baseUrl": "http://127.0.0.1:1"}, {"name": "b", "baseUrl": "http://127.0.0.1:2"}]}`), true)
	require.NoError(t, err)
	require.Empty(t, cfg.Default, "two providers and no default: queries must name one")
	require.Zero(t, cfg.ProbeInterval)

	cfg, err = knowledge.ParseConfig([]byte(`{"providers": []}`), true)
	require.NoError(t, err)
	require.Empty(t, cfg.Providers)
}

// Every mistake of a file is reported, each on its own, naming the field.
func TestParseConfigReportsEveryMistake(t *testing.T) {
	t.Parallel()
	_, err := knowledge.ParseConfig([]byte(`{"default": "ghost", "probeIntervalMs": -1, "providers": [
		{"name": "wiki", "baseUrl": "http://127.0.0.1:7001", "defaultRequirement": "sometimes"},
		{"name": "wiki", "baseUrl": "ftp://127.0.0.1:7001", "timeoutMs": 0},
		{"name": "bad name", "baseUrl": "http://user:pw@127.0.0.1:7001", "timeoutMs": 600001, "maxHits": 101},
		{"name": "q", "baseUrl": "http://127.0.0.1:7001/?x=1", "maxHits": 0, "circuitFailures": 0, "circuitOpenMs": 0},
		{"name": "rel", "baseUrl": "/relative"}]}`), true)
	var cfgErr *knowledge.ConfigError
	require.ErrorAs(t, err, &cfgErr)
	require.Equal(t, []string{
		"probeIntervalMs must be between 0 (never probe) and 86400000, got -1",
		`providers[0].defaultRequirement must be one of required, optional, disabled, got "sometimes"`,
		`providers[1].name "wiki" is already the name of providers[0]`,
		`providers[1].baseUrl must be an absolute http or https URL, got "ftp://127.0.0.1:7001"`,
		"providers[1].timeoutMs must be between 1 and 60000, got 0",
		`providers[2].name must be 1–191 characters without whitespace or control characters, got "bad name"`,
		`providers[2].baseUrl must not hold credentials, got "http://user:pw@127.0.0.1:7001"`,
		"providers[2].timeoutMs must be between 1 and 60000, got 600001",
		"providers[2].maxHits must be between 1 and 100, got 101",
		`providers[3].baseUrl must not have a query or fragment, got "http://127.0.0.1:7001/?x=1"`,
		"providers[3].maxHits must be between 1 and 100, got 0",
		"providers[3].circuitFailures must be between 1 and 1000, got 0",
		"providers[3].circuitOpenMs must be between 1 and 3600000, got 0",
		`providers[4].baseUrl must be an absolute http or https URL, got "/relative"`,
		`default "ghost" names no provider of the file`,
	}, cfgErr.Problems)
}

func TestParseConfigRefusesMalformedFiles(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, body string
		json       bool
		want       string
	}{
		{"empty", "  \n", true, "the file is empty"},
		{"unknown field", `{"providers": [{"name": "a", "baseUrl": "http://x", "timeout": 5}]}`, true, "unknown field providers[0].timeout"},
		{"case matters", `{"Providers": []}`, true, "unknown field Providers"},
		{"duplicate key", `{"providers": [], "providers": []}`, true, "providers is given twice"},
		{"wrong type", `{"providers": [{"name": "a", "baseUrl": "http://x", "timeoutMs": "2s"}]}`, true,
			"providers[0].timeoutMs has the wrong type or an out-of-range value"},
		{"not an object", `[1, 2]`, true, "the file must hold an object with default, probeIntervalMs and providers"},
		{"broken JSON", `{"providers": [`, true, "not valid JSON"},
		{"broken YAML", "providers: [\n  - name: a\n  baseUrl", false, "not valid YAML"},
		{"YAML unknown field", "providers:\n  - name: a\n    baseUrl: http://x\n    retries: 3\n", false, "unknown field providers[0].retries"},
		{"YAML duplicate key", "default: a\ndefault: b\n", false, "not valid YAML"},
	} {
		_, err := knowledge.ParseConfig([]byte(c.body), c.json)
		var cfgErr *knowledge.ConfigError
		require.ErrorAs(t, err, &cfgErr, c.name)
		require.Len(t, cfgErr.Problems, 1, c.name)
		require.Contains(t, cfgErr.Problems[0], c.want, c.name)
	}
	_, err := knowledge.LoadConfig(filepath.Join(t.TempDir(), "missing.json"))
	require.ErrorContains(t, err, "no such file")
}
