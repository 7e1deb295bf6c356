package knowledge

import (
	"bytes"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"go.yaml.in/yaml/v3"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// Defaults and bounds of the providers file.
const (
	DefaultTimeout         = 2 * time.Second
	MaxTimeout             = time.Minute
	DefaultCircuitFailures = 5
	MaxCircuitFailures     = 1000
	DefaultCircuitOpen     = 30 * time.Second
	MaxCircuitOpen         = time.Hour
	DefaultProbeInterval   = 30 * time.Second
	MaxProbeInterval       = 24 * time.Hour
)

// Config is the knowledge providers file (AGENT_CONTEXT_KNOWLEDGE_PROVIDERS_FILE),
// checked.
type Config struct {
	// Default names the provider of queries that name none; "" for none.
	Default string
	// ProbeInterval is how often each provider's capabilities are fetched; 0 never.
	ProbeInterval time.Duration
	Providers     []ProviderConfig
}

// ProviderConfig is one provider.
type ProviderConfig struct {
	Name string
	// BaseURL has no trailing slash; the protocol's paths are appended to it.
	BaseURL string
	// Timeout bounds one call, from connecting to the last byte of the body.
	Timeout time.Duration
	// MaxHits caps the hits of one query (1–100).
	MaxHits int
	// ForwardUserAuthorization sends the caller's x-infra-user-authorization along.
	ForwardUserAuthorization bool
	// DefaultRequirement applies to queries that name no requirement.
	DefaultRequirement string
	// CircuitFailures consecutive failures open the circuit for CircuitOpen; then one
	// trial call decides whether it closes again.
	CircuitFailures int
	CircuitOpen     time.Duration
}

// ConfigError lists every mistake of a providers file, one line each.
type ConfigError struct {
	Problems []string
}

// Error implements error.
func (e *ConfigError) Error() string { return strings.Join(e.Problems, "; ") }

// configFile is the providers file as written: pointers tell absent from zero.
type configFile struct {
	Default         *string        `json:"default"`
	ProbeIntervalMs *int64         `json:"probeIntervalMs"`
	Providers       []providerFile `json:"providers"`
}

type providerFile struct {
	Name                     string `json:"name"`
	BaseURL                  string `json:"baseUrl"`
	TimeoutMs                *int64 `json:"timeoutMs"`
	MaxHits                  *int   `json:"maxHits"`
	ForwardUserAuthorization bool   `json:"forwardUserAuthorization"`
	DefaultRequirement       string `json:"defaultRequirement"`
	CircuitFailures          *int   `json:"circuitFailures"`
	CircuitOpenMs            *int64 `json:"circuitOpenMs"`
}

// LoadConfig reads and checks a providers file: JSON when its name ends in .json,
// YAML otherwise. Every mistake is reported (*ConfigError), not only the first.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, &ConfigError{Problems: []string{err.Error()}}
	}
	return ParseConfig(data, strings.EqualFold(filepath.Ext(path), ".json"))
}

// ParseConfig checks the contents of a providers file, JSON or YAML. Member names are
// case-sensitive; unknown and duplicate members are refused.
func ParseConfig(data []byte, isJSON bool) (Config, error) {
	fail := func(format string, args ...any) (Config, error) {
		return Config{}, &ConfigError{Problems: []string{fmt.Sprintf(format, args...)}}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return fail("the file is empty")
	}
	if !isJSON {
		var doc any
		if err := yaml.Unmarshal(data, &doc); err != nil {
			return fail("not valid YAML: %v", err)
		}
		var err error
		if data, err = stdjson.Marshal(doc); err != nil {
			return fail("not valid YAML for this file: %v", err)
		}
	}
	var f configFile
	if err := json.Unmarshal(data, &f, json.RejectUnknownMembers(true)); err != nil {
		return fail("%s", describeDecodeError(err))
	}
	return f.check()
}

// describeDecodeError names the field a decoding error is about.
func describeDecodeError(err error) string {
	var syntactic *jsontext.SyntacticError
	if errors.As(err, &syntactic) {
		if strings.Contains(syntactic.Err.Error(), "duplicate object member name") {
			return fmt.Sprintf("%s is given twice", runtime.FieldPath(syntactic.JSONPointer))
		}
		return fmt.Sprintf("not valid JSON: %v", syntactic.Err)
	}
	var semantic *json.SemanticError
	if errors.As(err, &semantic) {
		field := runtime.FieldPath(semantic.JSONPointer)
		switch {
		case strings.Contains(semantic.Error(), "unknown object member name"):
			return fmt.Sprintf("unknown field %s", field)
		case field == "":
			return "the file must hold an object with default, probeIntervalMs and providers"
		default:
			return fmt.Sprintf("%s has the wrong type or an out-of-range value", field)
		}
	}
	return err.Error()
}

// check validates every field and applies the defaults.
func (f configFile) check() (Config, error) {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	cfg := Config{ProbeInterval: DefaultProbeInterval}
	if f.ProbeIntervalMs != nil {
		cfg.ProbeInterval = time.Duration(*f.ProbeIntervalMs) * time.Millisecond
		if *f.ProbeIntervalMs < 0 || cfg.ProbeInterval > MaxProbeInterval {
			add("probeIntervalMs must be between 0 (never probe) and %d, got %d", MaxProbeInterval.Milliseconds(), *f.ProbeIntervalMs)
		}
	}
	first := map[string]int{}
	for i, p := range f.Providers {
		at := fmt.Sprintf("providers[%d]", i)
		pc := ProviderConfig{
			Name: p.Name, ForwardUserAuthorization: p.ForwardUserAuthorization,
			Timeout: DefaultTimeout, MaxHits: contract.MaxKnowledgeTopK, DefaultRequirement: contract.RequirementOptional,
			CircuitFailures: DefaultCircuitFailures, CircuitOpen: DefaultCircuitOpen,
		}
		if err := runtime.ValidateID("name", p.Name); err != nil {
			add("%s.name must be 1–%d characters without whitespace or control characters, got %q", at, contract.MaxIDChars, p.Name)
		} else if j, dup := first[p.Name]; dup {
			add("%s.name %q is already the name of providers[%d]", at, p.Name, j)
		} else {
			first[p.Name] = i
		}
		var err error
		if pc.BaseURL, err = checkBaseURL(p.BaseURL); err != nil {
			add("%s.baseUrl %v, got %q", at, err, p.BaseURL)
		}
		if p.TimeoutMs != nil {
			pc.Timeout = time.Duration(*p.TimeoutMs) * time.Millisecond
			if *p.TimeoutMs < 1 || pc.Timeout > MaxTimeout {
				add("%s.timeoutMs must be between 1 and %d, got %d", at, MaxTimeout.Milliseconds(), *p.TimeoutMs)
			}
		}
		if p.MaxHits != nil {
			pc.MaxHits = *p.MaxHits
			if pc.MaxHits < 1 || pc.MaxHits > contract.MaxKnowledgeTopK {
				add("%s.maxHits must be between 1 and %d, got %d", at, contract.MaxKnowledgeTopK, pc.MaxHits)
			}
		}
		if p.DefaultRequirement != "" {
			pc.DefaultRequirement = p.DefaultRequirement
			if !slices.Contains(contract.Requirements, p.DefaultRequirement) {
				add("%s.defaultRequirement must be one of %s, got %q", at, strings.Join(contract.Requirements, ", "), p.DefaultRequirement)
			}
		}
		if p.CircuitFailures != nil {
			pc.CircuitFailures = *p.CircuitFailures
			if pc.CircuitFailures < 1 || pc.CircuitFailures > MaxCircuitFailures {
				add("%s.circuitFailures must be between 1 and %d, got %d", at, MaxCircuitFailures, pc.CircuitFailures)
			}
		}
		if p.CircuitOpenMs != nil {
			pc.CircuitOpen = time.Duration(*p.CircuitOpenMs) * time.Millisecond
			if *p.CircuitOpenMs < 1 || pc.CircuitOpen > MaxCircuitOpen {
				add("%s.circuitOpenMs must be between 1 and %d, got %d", at, MaxCircuitOpen.Milliseconds(), *p.CircuitOpenMs)
			}
		}
		cfg.Providers = append(cfg.Providers, pc)
	}
	// Only the file's default is the default: a lone provider is not one implicitly,
	// so adding a second one never changes where queries naming none go.
	if f.Default != nil {
		cfg.Default = *f.Default
		if _, ok := first[cfg.Default]; !ok {
			add("default %q names no provider of the file", cfg.Default)
		}
	}
	if len(problems) > 0 {
		return Config{}, &ConfigError{Problems: problems}
	}
	return cfg, nil
}

// checkBaseURL accepts an absolute http or https URL without credentials, query or
// fragment, and returns it without a trailing slash. Credentials in the URL would be
// sent as Basic authentication: the protocol carries only the caller's.
func checkBaseURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return "", errors.New("must be an absolute http or https URL")
	case u.User != nil:
		return "", errors.New("must not hold credentials")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "", errors.New("must not have a query or fragment")
	}
	return strings.TrimRight(raw, "/"), nil
}
