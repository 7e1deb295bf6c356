package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwk"

	"github.com/agent-context/agent-context/adapters/jwtauth"
	"github.com/agent-context/agent-context/adapters/telemetry"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// Files `token keygen` writes under <AGENT_CONTEXT_DATA_DIR>/keys.
const (
	keysDir        = "keys"
	signingKeyFile = "signing.jwk"
	jwksFile       = "jwks.json"
)

const tokenUsage = `usage: agent-context token <keygen|mint> [flags]

  token keygen [--force]
      write an Ed25519 signing key (private JWK, mode 0600) and a JWKS with its public
      key into <AGENT_CONTEXT_DATA_DIR>/keys; serve with AGENT_CONTEXT_JWKS_FILE set to
      the JWKS. --force replaces an existing key (tokens signed with it stop verifying).

  token mint --sub S --tenant T --project P --cap C [--cap C ...] [--ttl 15m]
             [--user-token U] [--jti J] [--key FILE]
      print a runtime token signed with that key (iss AGENT_CONTEXT_TOKEN_ISSUER, aud
      agent-context-infra). --cap repeats or takes a comma-separated list; --user-token
      binds the token to an end-user token sent in x-infra-user-authorization.
`

// tokenCommand runs `agent-context token ...`: local key management for development
// and tests. Production tokens come from the runtime identity service.
func tokenCommand(args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{"token needs keygen or mint\n" + tokenUsage}
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		_, err := io.WriteString(stdout, tokenUsage)
		return err
	}
	cfg, err := LoadConfig(getenv)
	if err != nil {
		return err
	}
	switch args[0] {
	case "keygen":
		return tokenKeygen(cfg, args[1:], stdout)
	case "mint":
		return tokenMint(cfg, args[1:], stdout)
	default:
		return usageError{fmt.Sprintf("unknown token command %q\n%s", args[0], tokenUsage)}
	}
}

// parseFlags parses the flags of `token` subcommands; see parseCommandFlags.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) (done bool, err error) {
	return parseCommandFlags("token", tokenUsage, fs, args, stdout)
}

// parseCommandFlags parses args into fs, the flag set of a subcommand of command; -h
// prints usage and reports done.
func parseCommandFlags(command, usage string, fs *flag.FlagSet, args []string, stdout io.Writer) (done bool, err error) {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			_, err = io.WriteString(stdout, usage)
			return true, err
		}
		return true, usageError{fmt.Sprintf("%s %s: %v\n%s", command, fs.Name(), err, usage)}
	}
	if fs.NArg() > 0 {
		return true, usageError{fmt.Sprintf("%s %s: unexpected argument %q\n%s", command, fs.Name(), fs.Arg(0), usage)}
	}
	return false, nil
}

func tokenKeygen(cfg Config, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("keygen", flag.ContinueOnError)
	force := fs.Bool("force", false, "replace an existing key")
	if done, err := parseFlags(fs, args, stdout); done {
		return err
	}
	dir := filepath.Join(cfg.DataDir, keysDir)
	keyPath, setPath := filepath.Join(dir, signingKeyFile), filepath.Join(dir, jwksFile)
	if !*force {
		for _, p := range []string{keyPath, setPath} {
			if _, err := os.Stat(p); err == nil {
				return fmt.Errorf("%s exists; pass --force to replace it (tokens signed with the old key stop verifying)", p)
			} else if !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	key, err := jwtauth.GenerateKey()
	if err != nil {
		return fmt.Errorf("generate key: %w", err)
	}
	set, err := jwtauth.PublicSet(key)
	if err != nil {
		return err
	}
	private, err := json.MarshalIndent(key, "", "  ")
	if err != nil {
		return err
	}
	public, err := json.MarshalIndent(set, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := writeFileAtomic(keyPath, append(private, '\n'), 0o600); err != nil {
		return err
	}
	if err := writeFileAtomic(setPath, append(public, '\n'), 0o644); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "signing key %s (private: keep it secret)\nkey set     %s (public)\nkid         %s\n\nserve with:  AGENT_CONTEXT_JWKS_FILE=%s agent-context serve\n",
		keyPath, setPath, key.KeyID(), setPath)
	return err
}

// writeFileAtomic writes data to path through a temporary file created with perm, so a
// reader (the server watching the JWKS) never sees half a file and the private key is
// never readable by others, even for a moment.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // after the rename there is nothing to remove
	if err := tmp.Chmod(perm); err != nil {
		_ = tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// capsFlag collects repeated --cap flags, each possibly a comma-separated list.
type capsFlag []string

func (c *capsFlag) String() string { return strings.Join(*c, ",") }

func (c *capsFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*c = append(*c, s)
		}
	}
	return nil
}

func tokenMint(cfg Config, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("mint", flag.ContinueOnError)
	sub := fs.String("sub", "", "subject: the runtime identity or agent ID")
	tenant := fs.String("tenant", "", "tenant_id")
	project := fs.String("project", "", "project_id")
	var caps capsFlag
	fs.Var(&caps, "cap", "capability (repeat, or comma-separated)")
	ttl := fs.Duration("ttl", 15*time.Minute, "lifetime")
	userToken := fs.String("user-token", "", "bind the token to this end-user token")
	jti := fs.String("jti", "", "token ID (default: a fresh one)")
	keyPath := fs.String("key", filepath.Join(cfg.DataDir, keysDir, signingKeyFile), "private JWK")
	if done, err := parseFlags(fs, args, stdout); done {
		return err
	}
	for _, id := range []struct{ flag, value string }{{"--sub", *sub}, {"--tenant", *tenant}, {"--project", *project}} {
		if err := runtime.ValidateID(id.flag, id.value); err != nil {
			return usageError{fmt.Sprintf("token mint: %s: %v\n%s", id.flag, errorMessage(err), tokenUsage)}
		}
	}
	for _, c := range caps {
		if !slices.Contains(contract.AllCapabilities, c) {
			return usageError{fmt.Sprintf("token mint: unknown capability %q (known: %s)", c, strings.Join(contract.AllCapabilities, ", "))}
		}
	}
	if *ttl <= 0 || *ttl > cfg.TokenMaxTTL {
		return usageError{fmt.Sprintf("token mint: --ttl must be positive and at most %s (AGENT_CONTEXT_TOKEN_MAX_TTL), got %s", cfg.TokenMaxTTL, *ttl)}
	}
	if *jti == "" {
		*jti = runtime.NewID()
	}
	data, err := os.ReadFile(*keyPath)
	if err != nil {
		return fmt.Errorf("read signing key (run `agent-context token keygen` first): %w", err)
	}
	key, err := jwk.ParseKey(data)
	if err != nil {
		return fmt.Errorf("signing key %s: %w", *keyPath, err)
	}
	if private, err := jwk.IsPrivateKey(key); err != nil || !private {
		return fmt.Errorf("signing key %s is not a private key", *keyPath)
	}
	tok, err := jwtauth.Mint(key, jwtauth.Token{
		Issuer:       cfg.TokenIssuer,
		Subject:      *sub,
		TenantID:     *tenant,
		ProjectID:    *project,
		Capabilities: caps,
		UserToken:    *userToken,
		TokenID:      *jti,
		TTL:          *ttl,
	})
	if err != nil {
		return fmt.Errorf("mint: %w", err)
	}
	_, err = fmt.Fprintln(stdout, tok)
	return err
}

func errorMessage(err error) string {
	var re *runtime.Error
	if errors.As(err, &re) {
		return re.Message
	}
	return err.Error()
}

// newTokenVerifier builds the runtime-token verifier when a JWKS file or URL is
// configured, and returns nil otherwise (runtime-token mode off).
func newTokenVerifier(ctx context.Context, cfg Config, log *slog.Logger, tracing *telemetry.Tracing) (*jwtauth.Verifier, error) {
	if cfg.JWKSFile == "" && cfg.JWKSURL == "" {
		return nil, nil
	}
	v, err := jwtauth.New(ctx, jwtauth.Options{
		JWKSFile:     cfg.JWKSFile,
		JWKSURL:      cfg.JWKSURL,
		Issuer:       cfg.TokenIssuer,
		MaxTTL:       cfg.TokenMaxTTL,
		Algorithms:   cfg.TokenAlgorithms,
		MaxStaleness: cfg.JWKSMaxStaleness,
		Logger:       log,
		// A JWKS fetch is a client span when tracing is on (each fetch is also
		// bounded by the verifier's own timeout).
		HTTPClient: &http.Client{Timeout: 10 * time.Second, Transport: tracing.Transport(nil)},
	})
	if err != nil {
		return nil, fmt.Errorf("runtime tokens: %w", err)
	}
	return v, nil
}
