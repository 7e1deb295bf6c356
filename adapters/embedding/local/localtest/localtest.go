// Package localtest finds and loads the local embedder's model for tests. A missing
// model fails the test (never skips it): the golden comparison is the local adapter's
// proof of correctness, and `make setup` always installs the model.
package localtest

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/embedding/local"
)

// ModelDir is where tests find the model: AGENT_CONTEXT_MODEL_DIR (the Makefile
// exports it), else the repository's .agent-context/models, where `make setup` puts it.
func ModelDir(tb testing.TB) string {
	tb.Helper()
	if dir := os.Getenv("AGENT_CONTEXT_MODEL_DIR"); dir != "" {
		return dir
	}
	dir, err := os.Getwd()
	require.NoError(tb, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, ".agent-context", "models")
		}
		parent := filepath.Dir(dir)
		require.NotEqual(tb, dir, parent, "no go.mod above the test's directory")
		dir = parent
	}
}

var (
	once     sync.Once
	embedder *local.Embedder
	loadErr  error
)

// MustEmbedder loads the model once per test binary, or fails tb saying how to get it.
func MustEmbedder(tb testing.TB) *local.Embedder {
	tb.Helper()
	dir := ModelDir(tb)
	once.Do(func() { embedder, loadErr = local.New(dir) })
	require.NoError(tb, loadErr, "the local embedder's model is missing or damaged: run `make setup` (or deploy/local/fetch-model.sh DIR with AGENT_CONTEXT_MODEL_DIR=DIR)")
	return embedder
}
