package main

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/a2arpc"
	"github.com/agent-context/agent-context/adapters/embedding/openai"
	"github.com/agent-context/agent-context/adapters/jwtauth"
	"github.com/agent-context/agent-context/adapters/postgres/pgmetrics"
	"github.com/agent-context/agent-context/adapters/postgres/worker"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/gate"
	"github.com/agent-context/agent-context/mcpserver"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
	"github.com/agent-context/agent-context/runtime/ratelimit"
	"github.com/agent-context/agent-context/runtime/transfer"
)

// With nothing set, every section has its defaults.
func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig(func(string) string { return "" })
	require.NoError(t, err)
	dataDir, err := filepath.Abs(".agent-context")
	require.NoError(t, err)
	require.Equal(t, Config{
		Bind: "127.0.0.1:5120", DataDir: dataDir, AutoMigrate: true, LogLevel: slog.LevelInfo, LogFormat: "json",
		StatementTimeout: 30 * time.Second, DrainDelay: 5 * time.Second, DrainTimeout: 20 * time.Second,
		MaxInFlightBodyBytes: gate.DefaultMaxInFlightBodyBytes,
		TokenIssuer:          jwtauth.DefaultIssuer, TokenMaxTTL: jwtauth.DefaultMaxTTL, TokenAlgorithms: jwtauth.DefaultAlgorithms,
		JWKSMaxStaleness:  jwtauth.DefaultMaxStaleness,
		RetentionInterval: time.Hour, JobWorkers: worker.DefaultJobWorkers, JobClasses: worker.DefaultClassWorkers, JobRescueAfter: worker.DefaultRescueAfter,
		ProjectionSweepInterval: worker.DefaultProjectionSweepInterval,
		Embedder:                EmbedderLocal, ModelDir: filepath.Join(dataDir, "models"), EmbeddingTimeout: openai.DefaultTimeout,
		A2AMaxMessages: contract.DefaultA2AMaxMessages, A2ATaskRetention: a2a.DefaultA2ATaskRetention,
		A2AEventRetention: a2a.DefaultA2AEventRetention, A2ASweepInterval: time.Minute,
		RateLimits: ratelimit.DefaultRateLimits, RateLimitBackend: RateLimitMemory,
		ExportTTL: transfer.DefaultExportTTL, ExportPurgeInterval: DefaultExportPurgeInterval,
		MetricsRefresh: pgmetrics.DefaultRefresh,
		A2ALive: A2ALiveConfig{StreamMax: a2arpc.DefaultStreamMax, StreamKeepAlive: a2arpc.DefaultStreamKeepAlive,
			MaxWaitersPerTenant: runtime.DefaultMaxWaitersPerTenant},
		MCPMaxBodyBytes: mcpserver.DefaultMaxBodyBytes,
		Tracing:         cfg.Tracing, // telemetry's own defaults, tested there
	}, cfg)
}

// Every variable set wrong at once: one line per mistake, none lost, in section order.
func TestConfigEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"AGENT_CONTEXT_BIND":                      "5120",
		"AGENT_CONTEXT_SERVICE_TOKEN":             "s3cret\n",
		"AGENT_CONTEXT_JWKS_FILE":                 "jwks.json",
		"AGENT_CONTEXT_JWKS_URL":                  "ftp://keys",
		"AGENT_CONTEXT_TOKEN_MAX_TTL":             "long",
		"AGENT_CONTEXT_JWKS_MAX_STALENESS":        "0s",
		"AGENT_CONTEXT_TOKEN_ALGORITHMS":          "none",
		"AGENT_CONTEXT_ALLOW_OPEN":                "maybe",
		"AGENT_CONTEXT_AUTO_MIGRATE":              "sometimes",
		"AGENT_CONTEXT_STATEMENT_TIMEOUT":         "soon",
		"AGENT_CONTEXT_DRAIN_DELAY":               "-1s",
		"AGENT_CONTEXT_DRAIN_TIMEOUT":             "0s",
		"AGENT_CONTEXT_RETENTION_MAX_AGE":         "old",
		"AGENT_CONTEXT_RETENTION_INTERVAL":        "-1h",
		"AGENT_CONTEXT_JOB_RESCUE_AFTER":          "10ms",
		"AGENT_CONTEXT_PROJECTION_SWEEP_INTERVAL": "never",
		"AGENT_CONTEXT_JOB_WORKERS":               "-2",
		"AGENT_CONTEXT_JOB_WORKERS_PUSH":          "0",
		"AGENT_CONTEXT_JOB_WORKERS_OPERATIONS":    "two",
		"AGENT_CONTEXT_A2A_TASK_RETENTION":        "forever",
		"AGENT_CONTEXT_A2A_EVENT_RETENTION":       "-1h",
		"AGENT_CONTEXT_A2A_SWEEP_INTERVAL":        "often",
		"AGENT_CONTEXT_EXPORT_TTL":                "1 day",
		"AGENT_CONTEXT_EXPORT_PURGE_INTERVAL":     "0",
		"AGENT_CONTEXT_A2A_MAX_MESSAGES":          "0",
		"AGENT_CONTEXT_A2A_REQUIRE_SIGNED":        "perhaps",
		"AGENT_CONTEXT_A2A_HMAC_KEYS":             `["s3cret"]`,
		"AGENT_CONTEXT_A2A_DEFAULT_AGENT":         "two words",
		"AGENT_CONTEXT_PUBLIC_URL":                "localhost:5120",
		"AGENT_CONTEXT_DB_MAX_CONNS":              "-1",
		"AGENT_CONTEXT_MAX_INFLIGHT_BODY_BYTES":   "1024",
		"AGENT_CONTEXT_LOG_LEVEL":                 "loud",
		"AGENT_CONTEXT_LOG_FORMAT":                "xml",
		"AGENT_CONTEXT_EMBEDDER":                  "openai",
		"AGENT_CONTEXT_EMBEDDING_DIMENSIONS":      "0",
		"AGENT_CONTEXT_EMBEDDING_TIMEOUT":         "slow",
		"AGENT_CONTEXT_EMBEDDING_API_KEY":         "k 1",
		"OTEL_TRACES_EXPORTER":                    "zipkin",
		"AGENT_CONTEXT_RATE_LIMIT_GLOBAL_PER_MIN": "-1",
		"LCTX_RATE_LIMIT_TOOL_PER_MIN":            "many",
		"AGENT_CONTEXT_RATE_LIMIT_BACKEND":        "redis",
		"AGENT_CONTEXT_KNOWLEDGE_PROVIDERS_FILE":  filepath.Join(t.TempDir(), "absent.yaml"),
	}
	_, err := LoadConfig(func(k string) string { return env[k] })
	require.Error(t, err)
	lines := strings.Split(err.Error(), "\n")
	for i := range lines[1:] {
		lines[i+1] = strings.ReplaceAll(lines[i+1], env["AGENT_CONTEXT_KNOWLEDGE_PROVIDERS_FILE"], "<file>")
	}
	require.Equal(t, []string{
		"configuration: 43 problems:",
		"  AGENT_CONTEXT_TOKEN_MAX_TTL must be a positive Go duration such as 30s, got \"long\"",
		"  AGENT_CONTEXT_JWKS_MAX_STALENESS must be a positive Go duration such as 30s, got \"0s\"",
		"  AGENT_CONTEXT_TOKEN_ALGORITHMS: none is never accepted: runtime tokens must be signed with an asymmetric key, got \"none\"",
		"  AGENT_CONTEXT_SERVICE_TOKEN must not contain whitespace or control characters",
		"  set only one of AGENT_CONTEXT_JWKS_FILE and AGENT_CONTEXT_JWKS_URL",
		"  AGENT_CONTEXT_JWKS_URL must be an absolute http or https URL, got \"ftp://keys\"",
		"  AGENT_CONTEXT_ALLOW_OPEN must be true or false, got \"maybe\"",
		"  AGENT_CONTEXT_AUTO_MIGRATE must be true or false, got \"sometimes\"",
		"  AGENT_CONTEXT_STATEMENT_TIMEOUT must be a positive Go duration such as 30s, got \"soon\"",
		"  AGENT_CONTEXT_DB_MAX_CONNS must be a positive integer, got \"-1\"",
		"  AGENT_CONTEXT_DRAIN_DELAY must be a Go duration such as 5s (0s for none), got \"-1s\"",
		"  AGENT_CONTEXT_DRAIN_TIMEOUT must be a positive Go duration such as 30s, got \"0s\"",
		"  AGENT_CONTEXT_RETENTION_MAX_AGE must be a positive Go duration such as 30s, got \"old\"",
		"  AGENT_CONTEXT_RETENTION_INTERVAL must be a positive Go duration such as 30s, got \"-1h\"",
		"  AGENT_CONTEXT_PROJECTION_SWEEP_INTERVAL must be a positive Go duration such as 30s, got \"never\"",
		"  AGENT_CONTEXT_JOB_RESCUE_AFTER must be at least 1s, got \"10ms\"",
		"  AGENT_CONTEXT_JOB_WORKERS must be a non-negative integer, got \"-2\"",
		"  AGENT_CONTEXT_JOB_WORKERS_PUSH must be a positive integer, got \"0\"",
		"  AGENT_CONTEXT_JOB_WORKERS_OPERATIONS must be a positive integer, got \"two\"",
		"  AGENT_CONTEXT_A2A_TASK_RETENTION must be a positive Go duration such as 30s, got \"forever\"",
		"  AGENT_CONTEXT_A2A_EVENT_RETENTION must be a positive Go duration such as 30s, got \"-1h\"",
		"  AGENT_CONTEXT_A2A_SWEEP_INTERVAL must be a positive Go duration such as 30s, got \"often\"",
		"  AGENT_CONTEXT_A2A_MAX_MESSAGES must be a positive integer, got \"0\"",
		"  AGENT_CONTEXT_A2A_REQUIRE_SIGNED must be true or false, got \"perhaps\"",
		"  AGENT_CONTEXT_A2A_HMAC_KEYS must be a JSON object {\"keyId\": {\"secret\": \"...\", \"agents\": [\"agent-a\"], \"tenants\": null}}",
		"  AGENT_CONTEXT_A2A_DEFAULT_AGENT must be an agent ID, got \"two words\"",
		"  AGENT_CONTEXT_PUBLIC_URL must be an absolute http or https URL, got \"localhost:5120\"",
		"  AGENT_CONTEXT_EXPORT_TTL must be a positive Go duration such as 30s, got \"1 day\"",
		"  AGENT_CONTEXT_EXPORT_PURGE_INTERVAL must be a positive Go duration such as 30s, got \"0\"",
		"  AGENT_CONTEXT_MAX_INFLIGHT_BODY_BYTES must be an integer of at least 33554432 (one maximal request body), got \"1024\"",
		"  AGENT_CONTEXT_BIND must be host:port, got \"5120\"",
		"  AGENT_CONTEXT_LOG_LEVEL must be debug, info, warn or error, got \"loud\"",
		"  AGENT_CONTEXT_LOG_FORMAT must be json or text, got \"xml\"",
		"  AGENT_CONTEXT_EMBEDDING_TIMEOUT must be a positive Go duration such as 30s, got \"slow\"",
		"  AGENT_CONTEXT_EMBEDDING_URL is required with AGENT_CONTEXT_EMBEDDER=openai",
		"  AGENT_CONTEXT_EMBEDDING_MODEL is required with AGENT_CONTEXT_EMBEDDER=openai",
		"  AGENT_CONTEXT_EMBEDDING_DIMENSIONS must be an integer from 1 to 16000, got \"0\"",
		"  AGENT_CONTEXT_EMBEDDING_API_KEY must not contain whitespace or control characters",
		"  OTEL_TRACES_EXPORTER must be otlp, console or none, got \"zipkin\"",
		"  AGENT_CONTEXT_RATE_LIMIT_GLOBAL_PER_MIN must be an integer from 0 (off) to 1000000000 requests a minute, got \"-1\"",
		"  LCTX_RATE_LIMIT_TOOL_PER_MIN must be an integer from 0 (off) to 1000000000 requests a minute, got \"many\"",
		"  AGENT_CONTEXT_RATE_LIMIT_BACKEND must be memory or postgres, got \"redis\"",
		"  AGENT_CONTEXT_KNOWLEDGE_PROVIDERS_FILE <file>: open <file>: no such file or directory",
	}, lines)
}
