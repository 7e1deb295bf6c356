package main

import (
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
	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/telemetry"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
	"github.com/agent-context/agent-context/runtime/ratelimit"
	"github.com/agent-context/agent-context/runtime/transfer"
	"github.com/agent-context/agent-context/server"
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
	// Shutdown (08-operations.md): for DrainDelay after SIGTERM /ready answers 503
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
	// Runtime tokens (02-auth.md): a JWKS file or URL switches runtime-token mode on.
	JWKSFile        string
	JWKSURL         string
	TokenIssuer     string
	TokenMaxTTL     time.Duration
	TokenAlgorithms []string
	// JWKSMaxStaleness is how long a JWKS URL's last good key set keeps verifying
	// while the key server cannot be reached.
	JWKSMaxStaleness time.Duration
	// Background operations (03-conversations.md): the default retention policy (0:
	// none) and how often it runs, and this replica's job workers (0: it runs no jobs,
	// other replicas do) and stuck-job rescue window.
	RetentionMaxAge   time.Duration
	RetentionInterval time.Duration
	JobWorkers        int
	JobRescueAfter    time.Duration
	// ProjectionSweepInterval is how often the vector projection's sweep looks for
	// entries its jobs missed and scopes whose embedder changed.
	ProjectionSweepInterval time.Duration
	// Embeddings (05-entries.md): the embedder (local, hash or openai), where the local
	// model lives (default <data dir>/models), and the OpenAI-compatible endpoint.
	Embedder            string
	ModelDir            string
	EmbeddingURL        string
	EmbeddingModel      string
	EmbeddingDimensions int
	EmbeddingAPIKey     string
	EmbeddingTimeout    time.Duration
	// Knowledge providers (06-knowledge.md), read and checked from
	// AGENT_CONTEXT_KNOWLEDGE_PROVIDERS_FILE at start; none when it is unset.
	KnowledgeProvidersFile string
	Knowledge              knowledge.Config
	// Tracing is read from the standard OTEL_* variables (docs/observability.md).
	Tracing telemetry.Config
	// Agent-to-agent coordination (07-a2a.md): the live messages kept per scope, how
	// long terminal tasks and events are kept, and how often the sweeper purges.
	A2AMaxMessages    int
	A2ATaskRetention  time.Duration
	A2AEventRetention time.Duration
	A2ASweepInterval  time.Duration
	// Rate limits (07-a2a.md): the per-minute budgets of the three levels (0: off)
	// and where the buckets live (memory: per replica; postgres: shared).
	RateLimits       ratelimit.RateLimits
	RateLimitBackend string
	// Export artifacts (05-entries.md): how long one lives from its creation, and how
	// often the purge job removes expired ones.
	ExportTTL           time.Duration
	ExportPurgeInterval time.Duration
	// ExportStepBytes bounds the records one export step reads (0: the default
	// 8 MiB); tests make it small to spread an export over many steps.
	ExportStepBytes int64
	// PricingFile holds the model prices of the cost report (unset: every model costs
	// 0). It is read and checked when serve starts.
	PricingFile string
	// Envelopes and the Google A2A endpoint (07-a2a.md): the pinned peer key file, the
	// HMAC keys by key ID, whether unsigned envelopes are refused, the recipient of
	// tasks sent to POST /a2a without metadata.toAgent, and the URL the agent card
	// advertises (else derived from each request).
	A2APeersFile     string
	A2AHMACKeys      map[string][]byte
	A2ARequireSigned bool
	A2ADefaultAgent  string
	A2ALive          A2ALiveConfig
	PublicURL        string
}

// DefaultExportPurgeInterval is how often expired export artifacts are purged.
const DefaultExportPurgeInterval = 5 * time.Minute

// LoadConfig reads the configuration from getenv. A bad value is an error naming the
// variable, so the service never starts half configured.
func LoadConfig(getenv func(string) string) (Config, error) {
	cfg := Config{
		Bind:                 "127.0.0.1:5120",
		DataDir:              ".agent-context",
		LogLevel:             slog.LevelInfo,
		LogFormat:            "json",
		StatementTimeout:     30 * time.Second,
		DrainDelay:           5 * time.Second,
		DrainTimeout:         20 * time.Second,
		TokenIssuer:          jwtauth.DefaultIssuer,
		TokenMaxTTL:          jwtauth.DefaultMaxTTL,
		TokenAlgorithms:      jwtauth.DefaultAlgorithms,
		JWKSMaxStaleness:     jwtauth.DefaultMaxStaleness,
		MaxInFlightBodyBytes: server.DefaultMaxInFlightBodyBytes,
	}
	cfg.RetentionInterval, cfg.JobWorkers, cfg.JobRescueAfter = time.Hour, postgres.DefaultJobWorkers, postgres.DefaultRescueAfter
	cfg.ProjectionSweepInterval = postgres.DefaultProjectionSweepInterval
	cfg.Embedder, cfg.EmbeddingTimeout = EmbedderLocal, openai.DefaultTimeout
	cfg.A2AMaxMessages, cfg.A2ATaskRetention = contract.DefaultA2AMaxMessages, a2a.DefaultA2ATaskRetention
	cfg.A2AEventRetention, cfg.A2ASweepInterval = a2a.DefaultA2AEventRetention, time.Minute
	cfg.RateLimits, cfg.RateLimitBackend = ratelimit.DefaultRateLimits, RateLimitMemory
	cfg.ExportTTL, cfg.ExportPurgeInterval = transfer.DefaultExportTTL, DefaultExportPurgeInterval
	var errs []string
	str := func(name string, dst *string) {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	boolean := func(name string, dst *bool) {
		if v := getenv(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s must be true or false, got %q", name, v))
				return
			}
			*dst = b
		}
	}
	duration := func(name string, dst *time.Duration) {
		if v := getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				errs = append(errs, fmt.Sprintf("%s must be a positive Go duration such as 30s, got %q", name, v))
				return
			}
			*dst = d
		}
	}
	// A duration that may be switched off with 0s.
	optionalDuration := func(name string, dst *time.Duration) {
		if v := getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				errs = append(errs, fmt.Sprintf("%s must be a Go duration such as 5s (0s for none), got %q", name, v))
				return
			}
			*dst = d
		}
	}
	str("AGENT_CONTEXT_BIND", &cfg.Bind)
	str("AGENT_CONTEXT_DATABASE_URL", &cfg.DatabaseURL)
	str("AGENT_CONTEXT_DATA_DIR", &cfg.DataDir)
	str("AGENT_CONTEXT_SERVICE_TOKEN", &cfg.ServiceToken)
	str("AGENT_CONTEXT_JWKS_FILE", &cfg.JWKSFile)
	str("AGENT_CONTEXT_JWKS_URL", &cfg.JWKSURL)
	str("AGENT_CONTEXT_TOKEN_ISSUER", &cfg.TokenIssuer)
	duration("AGENT_CONTEXT_TOKEN_MAX_TTL", &cfg.TokenMaxTTL)
	duration("AGENT_CONTEXT_JWKS_MAX_STALENESS", &cfg.JWKSMaxStaleness)
	if v := getenv("AGENT_CONTEXT_TOKEN_ALGORITHMS"); v != "" {
		algs, err := jwtauth.ParseAlgorithms(v)
		if err != nil {
			errs = append(errs, fmt.Sprintf("AGENT_CONTEXT_TOKEN_ALGORITHMS: %v, got %q", err, v))
		}
		cfg.TokenAlgorithms = algs
	}
	if strings.IndexFunc(cfg.ServiceToken, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		// A token read from a file often keeps its newline; no client could send it
		// (the bearer token ends at the first space), so every call would be refused.
		errs = append(errs, "AGENT_CONTEXT_SERVICE_TOKEN must not contain whitespace or control characters")
	}
	if cfg.JWKSFile != "" && cfg.JWKSURL != "" {
		errs = append(errs, "set only one of AGENT_CONTEXT_JWKS_FILE and AGENT_CONTEXT_JWKS_URL")
	}
	if cfg.JWKSURL != "" {
		if u, err := url.Parse(cfg.JWKSURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Sprintf("AGENT_CONTEXT_JWKS_URL must be an absolute http or https URL, got %q", cfg.JWKSURL))
		}
	}
	boolean("AGENT_CONTEXT_ALLOW_OPEN", &cfg.AllowOpen)
	cfg.AutoMigrate = cfg.DatabaseURL == ""
	boolean("AGENT_CONTEXT_AUTO_MIGRATE", &cfg.AutoMigrate)
	duration("AGENT_CONTEXT_STATEMENT_TIMEOUT", &cfg.StatementTimeout)
	optionalDuration("AGENT_CONTEXT_DRAIN_DELAY", &cfg.DrainDelay)
	duration("AGENT_CONTEXT_DRAIN_TIMEOUT", &cfg.DrainTimeout)
	duration("AGENT_CONTEXT_RETENTION_MAX_AGE", &cfg.RetentionMaxAge)
	duration("AGENT_CONTEXT_RETENTION_INTERVAL", &cfg.RetentionInterval)
	duration("AGENT_CONTEXT_JOB_RESCUE_AFTER", &cfg.JobRescueAfter)
	duration("AGENT_CONTEXT_PROJECTION_SWEEP_INTERVAL", &cfg.ProjectionSweepInterval)
	if cfg.JobRescueAfter < time.Second {
		errs = append(errs, fmt.Sprintf("AGENT_CONTEXT_JOB_RESCUE_AFTER must be at least 1s, got %q", getenv("AGENT_CONTEXT_JOB_RESCUE_AFTER")))
	}
	if v := getenv("AGENT_CONTEXT_JOB_WORKERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Sprintf("AGENT_CONTEXT_JOB_WORKERS must be a non-negative integer, got %q", v))
		}
		cfg.JobWorkers = n
	}
	duration("AGENT_CONTEXT_A2A_TASK_RETENTION", &cfg.A2ATaskRetention)
	duration("AGENT_CONTEXT_A2A_EVENT_RETENTION", &cfg.A2AEventRetention)
	duration("AGENT_CONTEXT_A2A_SWEEP_INTERVAL", &cfg.A2ASweepInterval)
	duration("AGENT_CONTEXT_EXPORT_TTL", &cfg.ExportTTL)
	duration("AGENT_CONTEXT_EXPORT_PURGE_INTERVAL", &cfg.ExportPurgeInterval)
	if v := getenv("AGENT_CONTEXT_A2A_MAX_MESSAGES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			errs = append(errs, fmt.Sprintf("AGENT_CONTEXT_A2A_MAX_MESSAGES must be a positive integer, got %q", v))
		}
		cfg.A2AMaxMessages = n
	}
	str("AGENT_CONTEXT_A2A_PEERS_FILE", &cfg.A2APeersFile)
	boolean("AGENT_CONTEXT_A2A_REQUIRE_SIGNED", &cfg.A2ARequireSigned)
	if v := getenv("AGENT_CONTEXT_A2A_HMAC_KEYS"); v != "" {
		keys, err := parseHMACKeys(v)
		if err != nil {
			errs = append(errs, "AGENT_CONTEXT_A2A_HMAC_KEYS "+err.Error())
		}
		cfg.A2AHMACKeys = keys
	}
	str("AGENT_CONTEXT_A2A_DEFAULT_AGENT", &cfg.A2ADefaultAgent)
	if cfg.A2ADefaultAgent != "" && runtime.ValidateID("agent", cfg.A2ADefaultAgent) != nil {
		errs = append(errs, fmt.Sprintf("AGENT_CONTEXT_A2A_DEFAULT_AGENT must be an agent ID, got %q", cfg.A2ADefaultAgent))
	}
	str("AGENT_CONTEXT_PUBLIC_URL", &cfg.PublicURL)
	if cfg.PublicURL != "" {
		if u, err := url.Parse(cfg.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			u.RawQuery != "" || u.Fragment != "" {
			errs = append(errs, fmt.Sprintf("AGENT_CONTEXT_PUBLIC_URL must be an absolute http or https URL, got %q", cfg.PublicURL))
		}
		cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	}
	if v := getenv("AGENT_CONTEXT_DB_MAX_CONNS"); v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 1 {
			errs = append(errs, fmt.Sprintf("AGENT_CONTEXT_DB_MAX_CONNS must be a positive integer, got %q", v))
		}
		cfg.MaxConns = int32(n)
	}
	if v := getenv("AGENT_CONTEXT_MAX_INFLIGHT_BODY_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < contract.MaxRequestBodyBytes {
			// Below one maximal body, a request the contract allows could never be served.
			errs = append(errs, fmt.Sprintf("AGENT_CONTEXT_MAX_INFLIGHT_BODY_BYTES must be an integer of at least %d (one maximal request body), got %q",
				contract.MaxRequestBodyBytes, v))
		}
		cfg.MaxInFlightBodyBytes = n
	}
	if v := getenv("AGENT_CONTEXT_LOG_LEVEL"); v != "" {
		if err := cfg.LogLevel.UnmarshalText([]byte(v)); err != nil {
			errs = append(errs, fmt.Sprintf("AGENT_CONTEXT_LOG_LEVEL must be debug, info, warn or error, got %q", v))
		}
	}
	if v := getenv("AGENT_CONTEXT_LOG_FORMAT"); v != "" {
		if v != "json" && v != "text" {
			errs = append(errs, fmt.Sprintf("AGENT_CONTEXT_LOG_FORMAT must be json or text, got %q", v))
		}
		cfg.LogFormat = v
	}
	errs = append(errs, loadEmbeddingConfig(getenv, &cfg, duration)...)
	tracing, err := telemetry.ConfigFromEnv(getenv)
	if err != nil {
		errs = append(errs, err.Error())
	}
	cfg.Tracing = tracing
	errs = append(errs, loadRateLimitConfig(getenv, &cfg)...)
	str("AGENT_CONTEXT_PRICING_FILE", &cfg.PricingFile)
	if _, _, err := net.SplitHostPort(cfg.Bind); err != nil {
		errs = append(errs, fmt.Sprintf("AGENT_CONTEXT_BIND must be host:port, got %q", cfg.Bind))
	}
	errs = append(errs, loadKnowledgeConfig(getenv, &cfg)...)
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
func loadEmbeddingConfig(getenv func(string) string, cfg *Config, duration func(string, *time.Duration)) []string {
	var errs []string
	if v := getenv("AGENT_CONTEXT_EMBEDDER"); v != "" {
		cfg.Embedder = v
	}
	switch cfg.Embedder {
	case EmbedderLocal, EmbedderHash, EmbedderOpenAI:
	default:
		errs = append(errs, fmt.Sprintf("AGENT_CONTEXT_EMBEDDER must be local, hash or openai, got %q", cfg.Embedder))
	}
	cfg.ModelDir = getenv("AGENT_CONTEXT_MODEL_DIR")
	cfg.EmbeddingURL = getenv("AGENT_CONTEXT_EMBEDDING_URL")
	cfg.EmbeddingModel = getenv("AGENT_CONTEXT_EMBEDDING_MODEL")
	cfg.EmbeddingAPIKey = getenv("AGENT_CONTEXT_EMBEDDING_API_KEY")
	duration("AGENT_CONTEXT_EMBEDDING_TIMEOUT", &cfg.EmbeddingTimeout)
	openAI := cfg.Embedder == EmbedderOpenAI
	if cfg.EmbeddingURL != "" {
		if u, err := url.Parse(cfg.EmbeddingURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Sprintf("AGENT_CONTEXT_EMBEDDING_URL must be an absolute http or https URL, got %q", cfg.EmbeddingURL))
		}
	} else if openAI {
		errs = append(errs, "AGENT_CONTEXT_EMBEDDING_URL is required with AGENT_CONTEXT_EMBEDDER=openai")
	}
	if cfg.EmbeddingModel == "" && openAI {
		errs = append(errs, "AGENT_CONTEXT_EMBEDDING_MODEL is required with AGENT_CONTEXT_EMBEDDER=openai")
	}
	if v := getenv("AGENT_CONTEXT_EMBEDDING_DIMENSIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > openai.MaxDimensions {
			errs = append(errs, fmt.Sprintf("AGENT_CONTEXT_EMBEDDING_DIMENSIONS must be an integer from 1 to %d, got %q", openai.MaxDimensions, v))
		}
		cfg.EmbeddingDimensions = n
	} else if openAI {
		errs = append(errs, "AGENT_CONTEXT_EMBEDDING_DIMENSIONS is required with AGENT_CONTEXT_EMBEDDER=openai")
	}
	if strings.IndexFunc(cfg.EmbeddingAPIKey, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		errs = append(errs, "AGENT_CONTEXT_EMBEDDING_API_KEY must not contain whitespace or control characters")
	}
	return errs
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
// secrets, each key the UTF-8 bytes of its secret. The error never repeats a secret.
func parseHMACKeys(v string) (map[string][]byte, error) {
	var raw map[string]string
	if err := json.Unmarshal([]byte(v), &raw); err != nil || raw == nil {
		return nil, errors.New(`must be a JSON object {"keyId": "secret"}`)
	}
	keys := make(map[string][]byte, len(raw))
	for id, secret := range raw {
		if id == "" || strings.Contains(id, ":") || secret == "" {
			return nil, errors.New("needs non-empty key IDs without ':' and non-empty secrets")
		}
		keys[id] = []byte(secret)
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
