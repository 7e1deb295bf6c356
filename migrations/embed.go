// Package migrations holds the goose SQL migrations of agent-context, embedded in the
// binary so that `agent-context migrate` and `serve` need no files beside them.
package migrations

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

// FS is the embedded migration files, named NNNNN_description.sql.
//
//go:embed *.sql
var FS embed.FS

// Hash returns a short hex digest over the names and contents of every migration, in
// order. Test harnesses name template databases by it, so a schema change produces a
// new template while unchanged migrations are shared safely by parallel test processes.
func Hash() string {
	names, err := fs.Glob(FS, "*.sql")
	if err != nil {
		panic(err)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, name := range names {
		b, err := FS.ReadFile(name)
		if err != nil {
			panic(err)
		}
		h.Write([]byte(name))
		h.Write([]byte{0})
		h.Write(b)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Latest returns the version of the newest embedded migration.
func Latest() int64 {
	names, err := fs.Glob(FS, "*.sql")
	if err != nil {
		panic(err)
	}
	var latest int64
	for _, name := range names {
		v, err := strconv.ParseInt(strings.SplitN(name, "_", 2)[0], 10, 64)
		if err != nil {
			panic("migration " + name + " is not named NNNNN_description.sql")
		}
		latest = max(latest, v)
	}
	return latest
}
