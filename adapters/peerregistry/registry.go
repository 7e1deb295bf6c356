// Package peerregistry reads the pinned registry of peers' Ed25519 public keys
// (AGENT_CONTEXT_A2A_PEERS_FILE, docs/a2a-protocol.md) and re-reads it when it changes, so keys
// rotate without a restart and are never fetched from a URL per request.
package peerregistry

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"

	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
)

// MaxFileBytes bounds the registry file.
const MaxFileBytes = 4 << 20

// Key is one entry of the file: {"keyId", "alg": "Ed25519", "publicKey": base64url of
// the raw 32 bytes, "tenants": the tenants it may be used in, absent or null for any}.
type Key struct {
	KeyID     string          `json:"keyId"`
	Alg       string          `json:"alg"`
	PublicKey string          `json:"publicKey"`
	Tenants   json.RawMessage `json:"tenants,omitempty"`
}

// File is the registry file's document: each agent's keys.
type File map[string][]Key

// Registry is the registry as last read. Each lookup stats the file (one system call)
// and re-reads it when its identity, size or modification time changed; a file whose
// bytes hash as before is not parsed again, and one that cannot be used keeps the keys
// in force (logged once per change).
type Registry struct {
	path string
	log  *slog.Logger

	state atomic.Pointer[state]
	mu    sync.Mutex // serialises reloads
}

type state struct {
	info os.FileInfo
	sum  [sha256.Size]byte
	keys map[string]map[string]a2a.PeerKey
}

var _ a2a.PeerKeys = (*Registry)(nil)

// Open reads the registry at path; a file that cannot be read or parsed is an error.
func Open(path string, log *slog.Logger) (*Registry, error) {
	if log == nil {
		log = slog.Default()
	}
	r := &Registry{path: path, log: log}
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("A2A peers file: %w", err)
	}
	if err := r.load(info); err != nil {
		return nil, fmt.Errorf("A2A peers file %s: %w", path, err)
	}
	return r, nil
}

// Ed25519Key implements a2a.PeerKeys.
func (r *Registry) Ed25519Key(agent, keyID string) (a2a.PeerKey, bool) {
	key, ok := r.current().keys[agent][keyID]
	return key, ok
}

func same(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

func (r *Registry) current() *state {
	cur := r.state.Load()
	info, err := os.Stat(r.path)
	if err != nil || same(cur.info, info) {
		// A file missing for a moment (being replaced) keeps the keys in force.
		return cur
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !same(r.state.Load().info, info) {
		if err := r.load(info); err != nil {
			r.log.Warn("A2A peers file changed but cannot be used; keeping the previous keys",
				slog.String("path", r.path), slog.Any("error", err))
		}
	}
	return r.state.Load()
}

// load reads the file; the caller holds mu (or is Open). On failure the new stamp is
// kept with the old keys, so a broken file is reported once.
func (r *Registry) load(info os.FileInfo) error {
	old := r.state.Load()
	keep := func() {
		if old != nil {
			r.state.Store(&state{info: info, sum: old.sum, keys: old.keys})
		}
	}
	f, err := os.Open(r.path)
	if err != nil {
		keep()
		return err
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err == nil && len(data) > MaxFileBytes {
		err = fmt.Errorf("larger than %d bytes", MaxFileBytes)
	}
	if err != nil {
		keep()
		return err
	}
	sum := sha256.Sum256(data)
	if old != nil && sum == old.sum {
		keep()
		return nil
	}
	keys, err := Parse(data)
	if err != nil {
		keep()
		return err
	}
	r.state.Store(&state{info: info, sum: sum, keys: keys})
	return nil
}

// Parse reads a registry document: every key an Ed25519 key of 32 bytes, key IDs
// unique per agent, tenants null or a non-empty array of tenant IDs.
func Parse(data []byte) (map[string]map[string]a2a.PeerKey, error) {
	var doc File
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("not a peers document: %w", err)
	}
	if doc == nil {
		return nil, errors.New("not a peers document: null")
	}
	keys := make(map[string]map[string]a2a.PeerKey, len(doc))
	for agent, list := range doc {
		if err := runtime.ValidateID("agent", agent); err != nil {
			return nil, fmt.Errorf("agent %q: not a valid agent ID", agent)
		}
		keys[agent] = make(map[string]a2a.PeerKey, len(list))
		for i, k := range list {
			if k.Alg != "Ed25519" {
				return nil, fmt.Errorf("%s[%d]: alg must be Ed25519", agent, i)
			}
			if k.KeyID == "" {
				return nil, fmt.Errorf("%s[%d]: keyId is required", agent, i)
			}
			if _, dup := keys[agent][k.KeyID]; dup {
				return nil, fmt.Errorf("%s[%d]: duplicate keyId %q", agent, i, k.KeyID)
			}
			raw, err := base64.RawURLEncoding.Strict().DecodeString(k.PublicKey)
			if err != nil || len(raw) != ed25519.PublicKeySize {
				return nil, fmt.Errorf("%s[%d]: publicKey must be base64url (no padding) of 32 bytes", agent, i)
			}
			tenants, err := parseTenants(k.Tenants)
			if err != nil {
				return nil, fmt.Errorf("%s[%d]: %w", agent, i, err)
			}
			keys[agent][k.KeyID] = a2a.PeerKey{Public: ed25519.PublicKey(raw), Tenants: tenants}
		}
	}
	return keys, nil
}

// parseTenants reads a key's tenants: absent or null is any tenant (nil); otherwise a
// non-empty array of tenant IDs, since an empty one would make a key no envelope can use.
func parseTenants(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var tenants []string
	if err := json.Unmarshal(raw, &tenants); err != nil || len(tenants) == 0 {
		return nil, errors.New("tenants must be null or a non-empty array of tenant IDs")
	}
	for _, t := range tenants {
		if runtime.ValidateID("tenant", t) != nil {
			return nil, fmt.Errorf("tenants: %q is not a valid tenant ID", t)
		}
	}
	return tenants, nil
}
