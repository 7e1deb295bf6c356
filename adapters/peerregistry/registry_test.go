package peerregistry_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/peerregistry"
	"github.com/agent-context/agent-context/runtime/a2a"
)

func publicKey(seed string) (ed25519.PublicKey, string) {
	s := sha256.Sum256([]byte(seed))
	pub := ed25519.NewKeyFromSeed(s[:]).Public().(ed25519.PublicKey)
	return pub, base64.RawURLEncoding.EncodeToString(pub)
}

// write replaces the file at path with doc and gives it modification time at, so that
// a change is visible however coarse the file system's clock.
func write(t *testing.T, path string, doc any, at time.Time) {
	t.Helper()
	data, ok := doc.([]byte)
	if !ok {
		var err error
		data, err = json.Marshal(doc)
		require.NoError(t, err)
	}
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, data, 0o600))
	require.NoError(t, os.Chtimes(tmp, at, at))
	require.NoError(t, os.Rename(tmp, path))
}

func TestOpenRefusesUnusableFiles(t *testing.T) {
	t.Parallel()
	_, good := publicKey("a")
	dir := t.TempDir()
	_, err := peerregistry.Open(filepath.Join(dir, "missing.json"), nil)
	require.ErrorContains(t, err, "A2A peers file")
	for name, doc := range map[string]string{
		"not JSON":         `{"agent-a": [`,
		"null":             `null`,
		"unknown member":   `{"agent-a": [{"keyId": "k1", "alg": "Ed25519", "publicKey": "` + good + `", "use": "sig"}]}`,
		"another alg":      `{"agent-a": [{"keyId": "k1", "alg": "RS256", "publicKey": "` + good + `"}]}`,
		"no key ID":        `{"agent-a": [{"alg": "Ed25519", "publicKey": "` + good + `"}]}`,
		"duplicate keyId":  `{"agent-a": [{"keyId": "k1", "alg": "Ed25519", "publicKey": "` + good + `"}, {"keyId": "k1", "alg": "Ed25519", "publicKey": "` + good + `"}]}`,
		"short key":        `{"agent-a": [{"keyId": "k1", "alg": "Ed25519", "publicKey": "AAAA"}]}`,
		"padded key":       `{"agent-a": [{"keyId": "k1", "alg": "Ed25519", "publicKey": "` + good + `="}]}`,
		"bad agent ID":     `{"agent a": [{"keyId": "k1", "alg": "Ed25519", "publicKey": "` + good + `"}]}`,
		"tenants a string": `{"agent-a": [{"keyId": "k1", "alg": "Ed25519", "publicKey": "` + good + `", "tenants": "acme"}]}`,
		"tenants numbers":  `{"agent-a": [{"keyId": "k1", "alg": "Ed25519", "publicKey": "` + good + `", "tenants": [1]}]}`,
		"tenants empty":    `{"agent-a": [{"keyId": "k1", "alg": "Ed25519", "publicKey": "` + good + `", "tenants": []}]}`,
		"tenant not an ID": `{"agent-a": [{"keyId": "k1", "alg": "Ed25519", "publicKey": "` + good + `", "tenants": ["a b"]}]}`,
		"too large":        `{"agent-a": [], "pad": "` + strings.Repeat("x", peerregistry.MaxFileBytes) + `"}`,
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".json")
		write(t, path, []byte(doc), time.Now())
		_, err := peerregistry.Open(path, nil)
		require.Error(t, err, name)
		require.ErrorContains(t, err, path, name)
	}
}

func TestKeysRotateAndABrokenFileKeepsThem(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "peers.json")
	k1, k1Text := publicKey("k1")
	k2, k2Text := publicKey("k2")
	start := time.Now().Add(-time.Hour)
	write(t, path, peerregistry.File{"agent-a": {{KeyID: "k1", Alg: "Ed25519", PublicKey: k1Text}}}, start)
	var log bytes.Buffer
	r, err := peerregistry.Open(path, slog.New(slog.NewTextHandler(&log, nil)))
	require.NoError(t, err)

	got, ok := r.Ed25519Key("agent-a", "k1")
	require.True(t, ok)
	require.Equal(t, a2a.PeerKey{Public: k1}, got)
	_, ok = r.Ed25519Key("agent-b", "k1")
	require.False(t, ok, "a key ID belongs to its agent only")
	_, ok = r.Ed25519Key("agent-a", "k2")
	require.False(t, ok)

	// Rotation: k2 added, k1 withdrawn; read on the next lookup.
	write(t, path, peerregistry.File{"agent-a": {{KeyID: "k2", Alg: "Ed25519", PublicKey: k2Text,
		Tenants: json.RawMessage(`["acme", "globex"]`)}}}, start.Add(time.Minute))
	got, ok = r.Ed25519Key("agent-a", "k2")
	require.True(t, ok)
	k2Bound := a2a.PeerKey{Public: k2, Tenants: []string{"acme", "globex"}}
	require.Equal(t, k2Bound, got)
	_, ok = r.Ed25519Key("agent-a", "k1")
	require.False(t, ok)

	// A broken replacement keeps the keys in force, and says so once.
	write(t, path, []byte(`{"agent-a": [{"keyId": "k3"`), start.Add(2*time.Minute))
	for range 3 {
		got, ok = r.Ed25519Key("agent-a", "k2")
		require.True(t, ok)
		require.Equal(t, k2Bound, got)
	}
	require.Equal(t, 1, strings.Count(log.String(), "cannot be used"), log.String())

	// A missing file (mid-replacement) keeps them too; the next good file wins.
	require.NoError(t, os.Remove(path))
	_, ok = r.Ed25519Key("agent-a", "k2")
	require.True(t, ok)
	write(t, path, peerregistry.File{"agent-a": {{KeyID: "k1", Alg: "Ed25519", PublicKey: k1Text,
		Tenants: json.RawMessage(`null`)}}}, start.Add(3*time.Minute))
	got, ok = r.Ed25519Key("agent-a", "k1")
	require.True(t, ok)
	require.Equal(t, a2a.PeerKey{Public: k1}, got)
	_, ok = r.Ed25519Key("agent-a", "k2")
	require.False(t, ok)
}
