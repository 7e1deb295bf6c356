package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/agent-context/agent-context/adapters/peerregistry"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
)

const a2aUsage = `usage: agent-context a2a <keygen|sign> [flags]

  a2a keygen --agent A --key-id K --out FILE [--force]
      write an Ed25519 key for signing envelopes as agent A into FILE (mode 0600) and
      print the entry to add to the receiver's AGENT_CONTEXT_A2A_PEERS_FILE.

  a2a sign FILE (--key KEYFILE | --hmac KEYID)
      print the envelope in FILE (- for standard input) signed: with the Ed25519 key
      keygen wrote, or with the HMAC-SHA256 secret KEYID names in
      AGENT_CONTEXT_A2A_HMAC_KEYS. The output is the envelope's RFC 8785 canonical JSON
      with its signature member, ready for POST /internal/v1/a2a/handoff.
`

// signingKey is the private key file `a2a keygen` writes.
type signingKey struct {
	Agent string `json:"agent"`
	KeyID string `json:"keyId"`
	Alg   string `json:"alg"`
	// PrivateKey is base64url (no padding) of the 32-byte Ed25519 seed.
	PrivateKey string `json:"privateKey"`
}

// a2aCommand runs `agent-context a2a ...`: what a peer needs to produce a signed
// envelope by hand.
func a2aCommand(args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{"a2a needs keygen or sign\n" + a2aUsage}
	}
	switch args[0] {
	case "help", "-h", "--help":
		_, err := io.WriteString(stdout, a2aUsage)
		return err
	case "keygen":
		return a2aKeygen(args[1:], stdout)
	case "sign":
		return a2aSign(args[1:], getenv, stdout)
	default:
		return usageError{fmt.Sprintf("unknown a2a command %q\n%s", args[0], a2aUsage)}
	}
}

func a2aKeygen(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("keygen", flag.ContinueOnError)
	agent := fs.String("agent", "", "the agent the key signs for")
	keyID := fs.String("key-id", "", "the key's ID in the peers file")
	out := fs.String("out", "", "the private key file to write")
	force := fs.Bool("force", false, "replace an existing file")
	if done, err := parseCommandFlags("a2a", a2aUsage, fs, args, stdout); done {
		return err
	}
	if runtime.ValidateID("agent", *agent) != nil || *keyID == "" || strings.ContainsAny(*keyID, ": \t") || *out == "" {
		return usageError{"a2a keygen needs --agent (an agent ID), --key-id (no ':' or spaces) and --out\n" + a2aUsage}
	}
	if _, err := os.Stat(*out); err == nil && !*force {
		return fmt.Errorf("%s exists; pass --force to replace it (envelopes signed with the old key stop verifying)", *out)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	key, err := json.MarshalIndent(signingKey{Agent: *agent, KeyID: *keyID, Alg: "Ed25519",
		PrivateKey: base64.RawURLEncoding.EncodeToString(priv.Seed())}, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(*out, append(key, '\n'), 0o600); err != nil {
		return err
	}
	entry, err := json.MarshalIndent(peerregistry.File{*agent: {{KeyID: *keyID, Alg: "Ed25519",
		PublicKey: base64.RawURLEncoding.EncodeToString(pub)}}}, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", entry)
	return err
}

func a2aSign(args []string, getenv func(string) string, stdout io.Writer) error {
	// The file comes first (a2a sign FILE --key K), which package flag would take for
	// the end of the flags.
	if len(args) == 0 || (strings.HasPrefix(args[0], "-") && args[0] != "-") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			_, err := io.WriteString(stdout, a2aUsage)
			return err
		}
		return usageError{"a2a sign needs the envelope FILE first\n" + a2aUsage}
	}
	file := args[0]
	fs := flag.NewFlagSet("sign", flag.ContinueOnError)
	keyFile := fs.String("key", "", "the Ed25519 key file a2a keygen wrote")
	hmacID := fs.String("hmac", "", "the key ID of an AGENT_CONTEXT_A2A_HMAC_KEYS secret")
	if done, err := parseCommandFlags("a2a", a2aUsage, fs, args[1:], stdout); done {
		return err
	}
	if (*keyFile == "") == (*hmacID == "") {
		return usageError{"a2a sign needs exactly one of --key and --hmac\n" + a2aUsage}
	}
	var raw []byte
	var err error
	if file == "-" {
		raw, err = io.ReadAll(io.LimitReader(os.Stdin, contract.MaxRequestBodyBytes+1))
	} else {
		raw, err = os.ReadFile(file)
	}
	if err != nil {
		return err
	}
	alg, keyID, sign, err := envelopeSigner(*keyFile, *hmacID, getenv)
	if err != nil {
		return err
	}
	signed, err := a2a.SignEnvelope(raw, alg, keyID, sign)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	_, err = fmt.Fprintf(stdout, "%s\n", signed)
	return err
}

// envelopeSigner returns the algorithm, key ID and signing function of an Ed25519 key
// file or of an HMAC secret from the configuration.
func envelopeSigner(keyFile, hmacID string, getenv func(string) string) (string, string, func([]byte) []byte, error) {
	if hmacID != "" {
		keys, err := parseHMACKeys(getenv("AGENT_CONTEXT_A2A_HMAC_KEYS"))
		if err != nil {
			return "", "", nil, fmt.Errorf("AGENT_CONTEXT_A2A_HMAC_KEYS %w", err)
		}
		key, ok := keys[hmacID]
		if !ok {
			return "", "", nil, fmt.Errorf("AGENT_CONTEXT_A2A_HMAC_KEYS has no key %q", hmacID)
		}
		return contract.SignatureHMACSHA256, hmacID, a2a.HMACSigner(key.Secret), nil
	}
	data, err := os.ReadFile(keyFile)
	if err != nil {
		return "", "", nil, err
	}
	var k signingKey
	if err := json.Unmarshal(data, &k); err != nil {
		return "", "", nil, fmt.Errorf("%s: not a key file of a2a keygen", keyFile)
	}
	seed, err := base64.RawURLEncoding.Strict().DecodeString(k.PrivateKey)
	if err != nil || len(seed) != ed25519.SeedSize || k.Alg != "Ed25519" || k.KeyID == "" {
		return "", "", nil, errors.New(keyFile + ": not an Ed25519 key file of a2a keygen")
	}
	priv := ed25519.NewKeyFromSeed(seed)
	return contract.SignatureEd25519, k.KeyID, func(msg []byte) []byte { return ed25519.Sign(priv, msg) }, nil
}
