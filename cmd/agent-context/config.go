package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agent-context/agent-context/adapters/embedding/openai"
	"github.com/agent-context/agent-context/adapters/jwtauth"
	"github.com/agent-context/agent-context/adapters/knowledge"
	"github.com/agent-context/agent-context/adapters/postgres/worker"
	"github.com/agent-context/agent-context/adapters/telemetry"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/gate"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
	"github.com/agent-context/agent-context/runtime/memory"
	"github.com/agent-context/agent-context/runtime/ratelimit"
	"github.com/agent-context/agent-context/runtime/transfer"
)

// Config is the service configuration, read from AGENT_CONTEXT_* variables.
type Config struct {
	Bind             string
	DatabaseURL      string
	DataDir          string
	ServiceToken     string
	AllowOpen        bool
	AutoMigrate      bool
	LogLevel         slog.Level
	LogFormat        string
	StatementTimeout time.Duration
	// Shutdown (docs/deploy.md): for DrainDelay after SIGTERM /ready answers 503
	// while requests are still served, so load balancers stop routing here; then the
	// listener closes and in-flight requests have DrainTimeout to finish.
	DrainDelay   time.Duration
	DrainTimeout time.Duration
	MaxConns     int32
	// MaxInFlightBodyBytes bounds the bytes all requests together hold for their
	// bodies; beyond it requests are refused with 503 (reason overloaded).
	MaxInFlightBodyBytes int64
	// LogOutput receives the logs (default os.Stderr); tests capture them.
	LogOutput io.Writer
	// Runtime tokens (docs/auth.md): a JWKS file or URL switches runtime-token mode on.
	JWKSFile        string
	JWKSURL         string
	TokenIssuer     string
	TokenMaxTTL     time.Duration
	TokenAlgorithms []string
	// JWKSMaxStaleness is how long a JWKS URL's last good key set keeps verifying
	// while the key server cannot be reached.
	JWKSMaxStaleness time.Duration
	// Background operations (docs/operations.md): the default retention policy (0:
	// none) and how often it runs, this replica's job workers (JobWorkers 0: it runs no
	// jobs, other replicas do; otherwise the workers of the queue used before the job
	// classes), each class's workers and the stuck-job rescue window.
	RetentionMaxAge   time.Duration
	RetentionInterval time.Duration
	JobWorkers        int
	JobClasses        worker.ClassWorkers
	JobRescueAfter    time.Duration
	// ProjectionSweepInterval is how often the vector projection's sweep looks for
	// entries its jobs missed and scopes whose embedder changed.
	ProjectionSweepInterval time.Duration
	// Embeddings (docs/embeddings.md): the embedder (local, hash or openai), where the local
	// model lives (default <data dir>/models), and the OpenAI-compatible endpoint.
	Embedder            string
	ModelDir            string
	EmbeddingURL        string
	EmbeddingModel      string
	EmbeddingDimensions int
	EmbeddingAPIKey     string
	EmbeddingTimeout    time.Duration
	// EmbeddingQuery bounds the query embedding of a recall (loadQueryBudgetConfig).
	EmbeddingQuery memory.QueryBudget
	// MetricsRefresh is how often, at most, /metrics counts rows in the database
	// (loadMetricsConfig).
	MetricsRefresh time.Duration
	// A2AMaxEnvelopes bounds the stored envelope payloads per scope
	// (loadEnvelopeConfig; 0: the default).
	A2AMaxEnvelopes int
	// Knowledge providers (docs/knowledge.md), read and checked from
	// AGENT_CONTEXT_KNOWLEDGE_PROVIDERS_FILE at start; none when it is unset.
	KnowledgeProvidersFile string
	Knowledge              knowledge.Config
	// Tracing is read from the standard OTEL_* variables (docs/observability.md).
	Tracing telemetry.Config
	// Agent-to-agent coordination (docs/a2a.md): the live messages kept per scope, how
	// long terminal tasks and events are kept, and how often the sweeper purges.
	A2AMaxMessages    int
	A2ATaskRetention  time.Duration
	A2AEventRetention time.Duration
	A2ASweepInterval  time.Duration
	// Rate limits (docs/rate-limits.md): the per-minute budgets of the three levels (0: off)
	// and where the buckets live (memory: per replica; postgres: shared).
	RateLimits       ratelimit.RateLimits
	RateLimitBackend string
	// Export artifacts (docs/export.md): how long one lives from its creation, and how
	// often the purge job removes expired ones.
	ExportTTL           time.Duration
	ExportPurgeInterval time.Duration
	// ExportStepBytes bounds the records one export step reads (0: the default
	// 8 MiB); tests make it small to spread an export over many steps.
	ExportStepBytes int64
	// PricingFile holds the model prices of the cost report (unset: every model costs
	// 0). It is read and checked when serve starts.
	PricingFile string
	// Envelopes and the Google A2A endpoint (docs/a2a-protocol.md): the pinned peer key file, the
	// HMAC keys by key ID, whether unsigned envelopes are refused, the recipient of
	// tasks sent to POST /a2a without metadata.toAgent, and the URL the agent card
	// advertises (else derived from each request).
	A2APeersFile     string
	A2AHMACKeys      map[string]a2a.HMACKey
	A2ARequireSigned bool
	A2ADefaultAgent  string
	A2ALive          A2ALiveConfig
	PublicURL        string
	// MCPMaxBodyBytes bounds an MCP request body (AGENT_CONTEXT_MCP_MAX_BODY).
	MCPMaxBodyBytes int64
	// MCPAuthorizationServers are named by the MCP endpoint's protected resource
	// metadata (docs/mcp.md).
	MCPAuthorizationServers []string
	// ListenDatabaseURL is the DSN of the event listener's own connections (unset:
	// the pool's settings); a direct one when the pool goes through PgBouncer.
	ListenDatabaseURL string
}

// DefaultExportPurgeInterval is how often expired export artifacts are purged.
const DefaultExportPurgeInterval = 5 * time.Minute

// LoadConfig reads the configuration from getenv. A bad value is an error naming the
// variable, so the service never starts half configured. Each section's loader sets its
// defaults, reads its variables and returns one message per bad value; the messages come
// section by section, in the order below.
func LoadConfig(getenv func(string) string) (Config, error) {
	var cfg Config
	var errs []string
	errs = append(errs, loadAuthConfig(getenv, &cfg)...)
	errs = append(errs, loadDatabaseConfig(getenv, &cfg)...)
	errs = append(errs, loadDrainConfig(getenv, &cfg)...)
	errs = append(errs, loadOperationsConfig(getenv, &cfg)...)
	errs = append(errs, loadA2AConfig(getenv, &cfg)...)
	errs = append(errs, loadExportConfig(getenv, &cfg)...)
	errs = append(errs, loadServerConfig(getenv, &cfg)...)
	errs = append(errs, loadLogConfig(getenv, &cfg)...)
	errs = append(errs, loadEmbeddingConfig(getenv, &cfg)...)
	errs = append(errs, loadTracingConfig(getenv, &cfg)...)
	errs = append(errs, loadRateLimitConfig(getenv, &cfg)...)
	errs = append(errs, loadCostConfig(getenv, &cfg)...)
	errs = append(errs, loadKnowledgeConfig(getenv, &cfg)...)
	errs = append(errs, loadMCPConfig(getenv, &cfg)...)
	errs = append(errs, loadListenConfig(getenv, &cfg)...)
	errs = append(errs, loadQueryBudgetConfig(getenv, &cfg)...)
	errs = append(errs, loadMetricsConfig(getenv, &cfg)...)
	errs = append(errs, loadEnvelopeConfig(getenv, &cfg)...)
	errs = append(errs, loadA2ALiveConfig(getenv, &cfg)...)
	switch len(errs) {
	case 0:
	case 1:
		return Config{}, fmt.Errorf("configuration: %s", errs[0])
	default:
		// One line per mistake, so that every one of them can be fixed at once.
		return Config{}, fmt.Errorf("configuration: %d problems:\n  %s", len(errs), strings.Join(errs, "\n  "))
	}
	abs, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return Config{}, fmt.Errorf("configuration: AGENT_CONTEXT_DATA_DIR: %w", err)
	}
	cfg.DataDir = abs
	if cfg.ModelDir == "" {
		cfg.ModelDir = filepath.Join(cfg.DataDir, "models")
	}
	if cfg.ModelDir, err = filepath.Abs(cfg.ModelDir); err != nil {
		return Config{}, fmt.Errorf("configuration: AGENT_CONTEXT_MODEL_DIR: %w", err)
	}
	return cfg, nil
}

// envReader reads one section's variables, keeping one message per bad value. A
// variable that is unset or empty leaves its destination (the default) as it is.
type envReader struct {
	getenv func(string) string
	errs   []string
}

func (e *envReader) problem(format string, args ...any) {
	e.errs = append(e.errs, fmt.Sprintf(format, args...))
}

func (e *envReader) str(name string, dst *string) {
	if v := e.getenv(name); v != "" {
		*dst = v
	}
}

func (e *envReader) boolean(name string, dst *bool) {
	if v := e.getenv(name); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			e.problem("%s must be true or false, got %q", name, v)
			return
		}
		*dst = b
	}
}

func (e *envReader) duration(name string, dst *time.Duration) {
	if v := e.getenv(name); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			e.problem("%s must be a positive Go duration such as 30s, got %q", name, v)
			return
		}
		*dst = d
	}
}

// optionalDuration reads a duration that may be switched off with 0s.
func (e *envReader) optionalDuration(name string, dst *time.Duration) {
	if v := e.getenv(name); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			e.problem("%s must be a Go duration such as 5s (0s for none), got %q", name, v)
			return
		}
		*dst = d
	}
}

// hasSpaceOrControl reports whether a secret holds a character no bearer token or header
// can carry: a token read from a file often keeps its newline.
func hasSpaceOrControl(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0
}

// httpURL reports whether s is an absolute http or https URL.
func httpURL(s string) (*url.URL, bool) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, false
	}
	return u, true
}

// loadAuthConfig reads the service token, the runtime tokens' settings (a JWKS file or
// URL switches runtime-token mode on) and AGENT_CONTEXT_ALLOW_OPEN.
func loadAuthConfig(getenv func(string) string, cfg *Config) []string {
	e := envReader{getenv: getenv}
	cfg.TokenIssuer, cfg.TokenMaxTTL = jwtauth.DefaultIssuer, jwtauth.DefaultMaxTTL
	cfg.TokenAlgorithms, cfg.JWKSMaxStaleness = jwtauth.DefaultAlgorithms, jwtauth.DefaultMaxStaleness
	e.str("AGENT_CONTEXT_SERVICE_TOKEN", &cfg.ServiceToken)
	e.str("AGENT_CONTEXT_JWKS_FILE", &cfg.JWKSFile)
	e.str("AGENT_CONTEXT_JWKS_URL", &cfg.JWKSURL)
	e.str("AGENT_CONTEXT_TOKEN_ISSUER", &cfg.TokenIssuer)
	e.duration("AGENT_CONTEXT_TOKEN_MAX_TTL", &cfg.TokenMaxTTL)
	e.duration("AGENT_CONTEXT_JWKS_MAX_STALENESS", &cfg.JWKSMaxStaleness)
	if v := getenv("AGENT_CONTEXT_TOKEN_ALGORITHMS"); v != "" {
		algs, err := jwtauth.ParseAlgorithms(v)
		if err != nil {
			e.problem("AGENT_CONTEXT_TOKEN_ALGORITHMS: %v, got %q", err, v)
		}
		cfg.TokenAlgorithms = algs
	}
	if hasSpaceOrControl(cfg.ServiceToken) {
		// No client could send it (the bearer token ends at the first space), so every
		// call would be refused.
		e.problem("AGENT_CONTEXT_SERVICE_TOKEN must not contain whitespace or control characters")
	}
	if cfg.JWKSFile != "" && cfg.JWKSURL != "" {
		e.problem("set only one of AGENT_CONTEXT_JWKS_FILE and AGENT_CONTEXT_JWKS_URL")
	}
	if _, ok := httpURL(cfg.JWKSURL); cfg.JWKSURL != "" && !ok {
		e.problem("AGENT_CONTEXT_JWKS_URL must be an absolute http or https URL, got %q", cfg.JWKSURL)
	}
	e.boolean("AGENT_CONTEXT_ALLOW_OPEN", &cfg.AllowOpen)
	return e.errs
}

// loadDatabaseConfig reads where the database is (an external URL, else the embedded
// cluster under the data directory), whether serve migrates it, and the pool's limits.
func loadDatabaseConfig(getenv func(string) string, cfg *Config) []string {
	e := envReader{getenv: getenv}
	cfg.DataDir, cfg.StatementTimeout = ".agent-context", 30*time.Second
	e.str("AGENT_CONTEXT_DATABASE_URL", &cfg.DatabaseURL)
	e.str("AGENT_CONTEXT_DATA_DIR", &cfg.DataDir)
	cfg.AutoMigrate = cfg.DatabaseURL == ""
	e.boolean("AGENT_CONTEXT_AUTO_MIGRATE", &cfg.AutoMigrate)
	e.duration("AGENT_CONTEXT_STATEMENT_TIMEOUT", &cfg.StatementTimeout)
	if v := getenv("AGENT_CONTEXT_DB_MAX_CONNS"); v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 1 {
			e.problem("AGENT_CONTEXT_DB_MAX_CONNS must be a positive integer, got %q", v)
		}
		cfg.MaxConns = int32(n)
	}
	return e.errs
}

// loadDrainConfig reads how long a SIGTERM'd replica keeps serving while /ready answers
// 503, and how long in-flight requests then have to finish.
func loadDrainConfig(getenv func(string) string, cfg *Config) []string {
	e := envReader{getenv: getenv}
	cfg.DrainDelay, cfg.DrainTimeout = 5*time.Second, 20*time.Second
	e.optionalDuration("AGENT_CONTEXT_DRAIN_DELAY", &cfg.DrainDelay)
	e.duration("AGENT_CONTEXT_DRAIN_TIMEOUT", &cfg.DrainTimeout)
	return e.errs
}

// loadOperationsConfig reads the default retention policy and the background jobs: this
// replica's workers, their stuck-job rescue window and the projection's sweep.
func loadOperationsConfig(getenv func(string) string, cfg *Config) []string {
	e := envReader{getenv: getenv}
	cfg.RetentionInterval, cfg.JobWorkers, cfg.JobRescueAfter = time.Hour, worker.DefaultJobWorkers, worker.DefaultRescueAfter
	cfg.ProjectionSweepInterval = worker.DefaultProjectionSweepInterval
	e.duration("AGENT_CONTEXT_RETENTION_MAX_AGE", &cfg.RetentionMaxAge)
	e.duration("AGENT_CONTEXT_RETENTION_INTERVAL", &cfg.RetentionInterval)
	e.duration("AGENT_CONTEXT_JOB_RESCUE_AFTER", &cfg.JobRescueAfter)
	e.duration("AGENT_CONTEXT_PROJECTION_SWEEP_INTERVAL", &cfg.ProjectionSweepInterval)
	if cfg.JobRescueAfter < time.Second {
		e.problem("AGENT_CONTEXT_JOB_RESCUE_AFTER must be at least 1s, got %q", getenv("AGENT_CONTEXT_JOB_RESCUE_AFTER"))
	}
	if v := getenv("AGENT_CONTEXT_JOB_WORKERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			e.problem("AGENT_CONTEXT_JOB_WORKERS must be a non-negative integer, got %q", v)
		}
		cfg.JobWorkers = n
	}
	cfg.JobClasses = worker.DefaultClassWorkers
	for _, class := range []struct {
		name    string
		workers *int
	}{
		{"AGENT_CONTEXT_JOB_WORKERS_PUSH", &cfg.JobClasses.Push},
		{"AGENT_CONTEXT_JOB_WORKERS_PROJECTION", &cfg.JobClasses.Projection},
		{"AGENT_CONTEXT_JOB_WORKERS_OPERATIONS", &cfg.JobClasses.Operations},
	} {
		if v := getenv(class.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				e.problem("%s must be a positive integer, got %q", class.name, v)
			}
			*class.workers = n
		}
	}
	return e.errs
}

// loadA2AConfig reads agent-to-agent coordination's bounds and retention, the
// envelopes' keys and the Google A2A endpoint's settings (default agent, public URL).
func loadA2AConfig(getenv func(string) string, cfg *Config) []string {
	e := envReader{getenv: getenv}
	cfg.A2AMaxMessages, cfg.A2ATaskRetention = contract.DefaultA2AMaxMessages, a2a.DefaultA2ATaskRetention
	cfg.A2AEventRetention, cfg.A2ASweepInterval = a2a.DefaultA2AEventRetention, time.Minute
	e.duration("AGENT_CONTEXT_A2A_TASK_RETENTION", &cfg.A2ATaskRetention)
	e.duration("AGENT_CONTEXT_A2A_EVENT_RETENTION", &cfg.A2AEventRetention)
	e.duration("AGENT_CONTEXT_A2A_SWEEP_INTERVAL", &cfg.A2ASweepInterval)
	if v := getenv("AGENT_CONTEXT_A2A_MAX_MESSAGES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			e.problem("AGENT_CONTEXT_A2A_MAX_MESSAGES must be a positive integer, got %q", v)
		}
		cfg.A2AMaxMessages = n
	}
	e.str("AGENT_CONTEXT_A2A_PEERS_FILE", &cfg.A2APeersFile)
	e.boolean("AGENT_CONTEXT_A2A_REQUIRE_SIGNED", &cfg.A2ARequireSigned)
	if v := getenv("AGENT_CONTEXT_A2A_HMAC_KEYS"); v != "" {
		keys, err := parseHMACKeys(v)
		if err != nil {
			e.problem("AGENT_CONTEXT_A2A_HMAC_KEYS %s", err)
		}
		cfg.A2AHMACKeys = keys
	}
	e.str("AGENT_CONTEXT_A2A_DEFAULT_AGENT", &cfg.A2ADefaultAgent)
	if cfg.A2ADefaultAgent != "" && runtime.ValidateID("agent", cfg.A2ADefaultAgent) != nil {
		e.problem("AGENT_CONTEXT_A2A_DEFAULT_AGENT must be an agent ID, got %q", cfg.A2ADefaultAgent)
	}
	e.str("AGENT_CONTEXT_PUBLIC_URL", &cfg.PublicURL)
	if cfg.PublicURL != "" {
		if u, ok := httpURL(cfg.PublicURL); !ok || u.RawQuery != "" || u.Fragment != "" {
			e.problem("AGENT_CONTEXT_PUBLIC_URL must be an absolute http or https URL, got %q", cfg.PublicURL)
		}
		cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	}
	return e.errs
}

// loadExportConfig reads how long an export artifact lives and how often expired ones
// are purged.
func loadExportConfig(getenv func(string) string, cfg *Config) []string {
	e := envReader{getenv: getenv}
	cfg.ExportTTL, cfg.ExportPurgeInterval = transfer.DefaultExportTTL, DefaultExportPurgeInterval
	e.duration("AGENT_CONTEXT_EXPORT_TTL", &cfg.ExportTTL)
	e.duration("AGENT_CONTEXT_EXPORT_PURGE_INTERVAL", &cfg.ExportPurgeInterval)
	return e.errs
}

// loadServerConfig reads the listener's address and the bound on the request bodies
// held at once.
func loadServerConfig(getenv func(string) string, cfg *Config) []string {
	e := envReader{getenv: getenv}
	cfg.Bind, cfg.MaxInFlightBodyBytes = "127.0.0.1:5120", gate.DefaultMaxInFlightBodyBytes
	if v := getenv("AGENT_CONTEXT_MAX_INFLIGHT_BODY_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < contract.MaxRequestBodyBytes {
			// Below one maximal body, a request the contract allows could never be served.
			e.problem("AGENT_CONTEXT_MAX_INFLIGHT_BODY_BYTES must be an integer of at least %d (one maximal request body), got %q",
				contract.MaxRequestBodyBytes, v)
		}
		cfg.MaxInFlightBodyBytes = n
	}
	e.str("AGENT_CONTEXT_BIND", &cfg.Bind)
	if _, _, err := net.SplitHostPort(cfg.Bind); err != nil {
		e.problem("AGENT_CONTEXT_BIND must be host:port, got %q", cfg.Bind)
	}
	return e.errs
}

// loadLogConfig reads the log's level and format.
func loadLogConfig(getenv func(string) string, cfg *Config) []string {
	e := envReader{getenv: getenv}
	cfg.LogLevel, cfg.LogFormat = slog.LevelInfo, "json"
	if v := getenv("AGENT_CONTEXT_LOG_LEVEL"); v != "" {
		if err := cfg.LogLevel.UnmarshalText([]byte(v)); err != nil {
			e.problem("AGENT_CONTEXT_LOG_LEVEL must be debug, info, warn or error, got %q", v)
		}
	}
	if v := getenv("AGENT_CONTEXT_LOG_FORMAT"); v != "" {
		if v != "json" && v != "text" {
			e.problem("AGENT_CONTEXT_LOG_FORMAT must be json or text, got %q", v)
		}
		cfg.LogFormat = v
	}
	return e.errs
}

// loadTracingConfig reads the standard OTEL_* variables (docs/observability.md).
func loadTracingConfig(getenv func(string) string, cfg *Config) []string {
	tracing, err := telemetry.ConfigFromEnv(getenv)
	cfg.Tracing = tracing
	if err != nil {
		return []string{err.Error()}
	}
	return nil
}

// loadCostConfig reads the cost report's price file; it is read and checked when serve
// starts.
func loadCostConfig(getenv func(string) string, cfg *Config) []string {
	cfg.PricingFile = getenv("AGENT_CONTEXT_PRICING_FILE")
	return nil
}

// loadKnowledgeConfig reads and checks the providers file that
// AGENT_CONTEXT_KNOWLEDGE_PROVIDERS_FILE names (none when unset) into cfg and returns
// one message per mistake in it.
func loadKnowledgeConfig(getenv func(string) string, cfg *Config) []string {
	cfg.KnowledgeProvidersFile = getenv("AGENT_CONTEXT_KNOWLEDGE_PROVIDERS_FILE")
	if cfg.KnowledgeProvidersFile == "" {
		return nil
	}
	var err error
	if cfg.Knowledge, err = knowledge.LoadConfig(cfg.KnowledgeProvidersFile); err == nil {
		return nil
	}
	problems := []string{err.Error()}
	var cfgErr *knowledge.ConfigError
	if errors.As(err, &cfgErr) {
		problems = cfgErr.Problems
	}
	errs := make([]string, len(problems))
	for i, p := range problems {
		errs[i] = fmt.Sprintf("AGENT_CONTEXT_KNOWLEDGE_PROVIDERS_FILE %s: %s", cfg.KnowledgeProvidersFile, p)
	}
	return errs
}

// The values of AGENT_CONTEXT_EMBEDDER.
const (
	EmbedderLocal  = "local"
	EmbedderHash   = "hash"
	EmbedderOpenAI = "openai"
)

// loadEmbeddingConfig reads the AGENT_CONTEXT_EMBEDDER, _MODEL_DIR and _EMBEDDING_*
// variables into cfg and returns one message per bad value. The endpoint's URL, model
// and dimensions are required with the openai embedder (and checked whenever set).
func loadEmbeddingConfig(getenv func(string) string, cfg *Config) []string {
	cfg.Embedder, cfg.EmbeddingTimeout = EmbedderLocal, openai.DefaultTimeout
	e := envReader{getenv: getenv}
	if v := getenv("AGENT_CONTEXT_EMBEDDER"); v != "" {
		cfg.Embedder = v
	}
	switch cfg.Embedder {
	case EmbedderLocal, EmbedderHash, EmbedderOpenAI:
	default:
		e.problem("AGENT_CONTEXT_EMBEDDER must be local, hash or openai, got %q", cfg.Embedder)
	}
	cfg.ModelDir = getenv("AGENT_CONTEXT_MODEL_DIR")
	cfg.EmbeddingURL = getenv("AGENT_CONTEXT_EMBEDDING_URL")
	cfg.EmbeddingModel = getenv("AGENT_CONTEXT_EMBEDDING_MODEL")
	cfg.EmbeddingAPIKey = getenv("AGENT_CONTEXT_EMBEDDING_API_KEY")
	e.duration("AGENT_CONTEXT_EMBEDDING_TIMEOUT", &cfg.EmbeddingTimeout)
	openAI := cfg.Embedder == EmbedderOpenAI
	if cfg.EmbeddingURL != "" {
		if _, ok := httpURL(cfg.EmbeddingURL); !ok {
			e.problem("AGENT_CONTEXT_EMBEDDING_URL must be an absolute http or https URL, got %q", cfg.EmbeddingURL)
		}
	} else if openAI {
		e.problem("AGENT_CONTEXT_EMBEDDING_URL is required with AGENT_CONTEXT_EMBEDDER=openai")
	}
	if cfg.EmbeddingModel == "" && openAI {
		e.problem("AGENT_CONTEXT_EMBEDDING_MODEL is required with AGENT_CONTEXT_EMBEDDER=openai")
	}
	if v := getenv("AGENT_CONTEXT_EMBEDDING_DIMENSIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > openai.MaxDimensions {
			e.problem("AGENT_CONTEXT_EMBEDDING_DIMENSIONS must be an integer from 1 to %d, got %q", openai.MaxDimensions, v)
		}
		cfg.EmbeddingDimensions = n
	} else if openAI {
		e.problem("AGENT_CONTEXT_EMBEDDING_DIMENSIONS is required with AGENT_CONTEXT_EMBEDDER=openai")
	}
	if hasSpaceOrControl(cfg.EmbeddingAPIKey) {
		e.problem("AGENT_CONTEXT_EMBEDDING_API_KEY must not contain whitespace or control characters")
	}
	return e.errs
}

// The values of AGENT_CONTEXT_RATE_LIMIT_BACKEND.
const (
	RateLimitMemory   = "memory"
	RateLimitPostgres = "postgres"
)

// loadRateLimitConfig reads the AGENT_CONTEXT_RATE_LIMIT_* variables into cfg and
// returns one message per bad value. Each budget also answers to the seed's names,
// LEAN_CTX_RATE_LIMIT_* and LCTX_RATE_LIMIT_*; the first of the three names that is
// set counts, and a message names the variable it came from.
func loadRateLimitConfig(getenv func(string) string, cfg *Config) []string {
	var errs []string
	cfg.RateLimits, cfg.RateLimitBackend = ratelimit.DefaultRateLimits, RateLimitMemory
	for _, level := range []struct {
		suffix string
		dst    *int64
	}{
		{"GLOBAL_PER_MIN", &cfg.RateLimits.GlobalPerMin},
		{"AGENT_PER_MIN", &cfg.RateLimits.AgentPerMin},
		{"TOOL_PER_MIN", &cfg.RateLimits.ToolPerMin},
	} {
		for _, prefix := range []string{"AGENT_CONTEXT_RATE_LIMIT_", "LEAN_CTX_RATE_LIMIT_", "LCTX_RATE_LIMIT_"} {
			name := prefix + level.suffix
			v := getenv(name)
			if v == "" {
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 || n > ratelimit.MaxRatePerMin {
				errs = append(errs, fmt.Sprintf("%s must be an integer from 0 (off) to %d requests a minute, got %q",
					name, int64(ratelimit.MaxRatePerMin), v))
			}
			*level.dst = n
			break
		}
	}
	if v := getenv("AGENT_CONTEXT_RATE_LIMIT_BACKEND"); v != "" {
		cfg.RateLimitBackend = v
	}
	if cfg.RateLimitBackend != RateLimitMemory && cfg.RateLimitBackend != RateLimitPostgres {
		errs = append(errs, fmt.Sprintf("AGENT_CONTEXT_RATE_LIMIT_BACKEND must be memory or postgres, got %q", cfg.RateLimitBackend))
	}
	return errs
}

// parseHMACKeys reads AGENT_CONTEXT_A2A_HMAC_KEYS: a JSON object of key IDs to
// {"secret", "agents", "tenants"}, each secret used as its UTF-8 bytes, each key bound
// to the senders it may sign for and, unless tenants is absent or null, to tenants.
// The old {"keyId": "secret"} form let any holder sign as any agent and is refused
// with the migration it needs. The error never repeats a secret.
func parseHMACKeys(v string) (map[string]a2a.HMACKey, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(v), &raw); err != nil || raw == nil {
		return nil, errors.New(`must be a JSON object {"keyId": {"secret": "...", "agents": ["agent-a"], "tenants": null}}`)
	}
	keys := make(map[string]a2a.HMACKey, len(raw))
	for id, entry := range raw {
		if id == "" || strings.Contains(id, ":") {
			return nil, errors.New("needs non-empty key IDs without ':'")
		}
		if len(entry) > 0 && entry[0] == '"' {
			return nil, fmt.Errorf(`key %q uses the old {"keyId": "secret"} form, which binds the key to no agent: `+
				`write {"%s": {"secret": "...", "agents": ["<agents it signs for>"]}}`, id, id)
		}
		var k struct {
			Secret  string          `json:"secret"`
			Agents  []string        `json:"agents"`
			Tenants json.RawMessage `json:"tenants"`
		}
		dec := json.NewDecoder(bytes.NewReader(entry))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&k); err != nil {
			return nil, fmt.Errorf(`key %q must be an object {"secret": string, "agents": [string], "tenants": [string] or null}`, id)
		}
		if k.Secret == "" {
			return nil, fmt.Errorf("key %q needs a non-empty secret", id)
		}
		if len(k.Agents) == 0 {
			return nil, fmt.Errorf("key %q needs a non-empty agents list: the senders it may sign for", id)
		}
		for _, agent := range k.Agents {
			if runtime.ValidateID("agent", agent) != nil {
				return nil, fmt.Errorf("key %q: agents holds %q, not an agent ID", id, agent)
			}
		}
		key := a2a.HMACKey{Secret: []byte(k.Secret), Agents: k.Agents}
		if len(k.Tenants) > 0 && string(k.Tenants) != "null" {
			if err := json.Unmarshal(k.Tenants, &key.Tenants); err != nil || len(key.Tenants) == 0 {
				return nil, fmt.Errorf("key %q: tenants must be null or a non-empty array of tenant IDs", id)
			}
			for _, tenant := range key.Tenants {
				if runtime.ValidateID("tenant", tenant) != nil {
					return nil, fmt.Errorf("key %q: tenants holds %q, not a tenant ID", id, tenant)
				}
			}
		}
		keys[id] = key
	}
	return keys, nil
}

// NewLogger builds the process logger.
func (c Config) NewLogger() *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.LogLevel}
	out := c.LogOutput
	if out == nil {
		out = os.Stderr
	}
	if c.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(out, opts))
	}
	return slog.New(slog.NewJSONHandler(out, opts))
}

// loopbackBind reports whether addr listens on loopback only.
func loopbackBind(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
