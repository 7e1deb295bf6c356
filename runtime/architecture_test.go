package runtime_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/agent-context/agent-context"

// rule forbids packages matching From (the package itself, and its subpackages unless
// Exact; never those in Except) from depending (directly or transitively) on packages matching any of Deny.
type rule struct {
	From   string
	Exact  bool
	Except []string
	Deny   []string
}

// areas are runtime's bounded contexts, one package each; allowed lists the areas each
// may use. Only transfer reads several (it exports and imports conversations, windows,
// entries and runs its steps as operations), and memory rebuilds its projection as an
// operation. Every other area uses the shared base alone.
var (
	areas   = []string{"a2a", "conversation", "cost", "knowledge", "memory", "operation", "ratelimit", "session", "transfer"}
	allowed = map[string][]string{
		"transfer": {"conversation", "memory", "operation"},
		"memory":   {"operation"},
	}
)

// topLevel lists the module's top-level packages (and folders of packages), each with
// its role; a package outside them fails TestTopLevelPackagesAreListed until it is
// listed here and its rules are written.
var topLevel = map[string]string{
	"contract":   "what clients see: routes, DTOs, codes",
	"runtime":    "the use cases, by area, and their shared base",
	"gate":       "the one way in for every door: auth, admission, bodies, errors",
	"server":     "door: the REST API on echo",
	"mcpserver":  "door: the MCP tools",
	"console":    "door: the operator console",
	"a2arpc":     "door: Google A2A JSON-RPC, its streams, push and card",
	"adapters":   "the ports' implementations: Postgres, JWT, embedders, webhooks",
	"cmd":        "the binary and its wiring",
	"migrations": "the SQL migrations",
	"deploy":     "deployment files (their checks are a module of their own)",
}

// doors are the packages through which requests come in: each comes through the gate
// and calls the use cases, and none imports another.
var doors = []string{"server", "mcpserver", "console", "a2arpc"}

// The dependency direction: doors → gate → runtime ← adapters, contract a leaf.
// runtime must stay free of HTTP, database drivers, doors and adapters; its shared base
// depends on no area, and an area on no other area but those allowed.
var rules = append(append([]rule{
	// The test stand-ins assert with testify, which brings net/http; only tests import them.
	{From: module + "/runtime", Except: []string{module + "/runtime/runtimetest"}, Deny: append([]string{
		"net/http", "github.com/labstack/echo", "github.com/jackc/pgx", "github.com/pgvector",
		module + "/adapters", module + "/cmd", module + "/gate",
	}, modulePaths(doors...)...)},
	{From: module + "/runtime", Exact: true, Deny: areaPaths(areas...)},
	{From: module + "/contract", Deny: []string{
		module + "/runtime", module + "/adapters", module + "/server", module + "/cmd", module + "/gate",
		"github.com/labstack/echo", "github.com/jackc/pgx",
	}},
	{From: module + "/adapters", Deny: append([]string{module + "/cmd", module + "/gate", "github.com/labstack/echo"},
		modulePaths(doors...)...)},
	// The gate knows runtime's base, the rate limits and the contract: no area, door,
	// adapter, router or driver.
	{From: module + "/gate", Deny: append(append([]string{module + "/adapters", module + "/cmd",
		"github.com/labstack/echo", "github.com/jackc/pgx", module + "/runtime/runtimetest"},
		modulePaths(doors...)...), areaPaths(slices.DeleteFunc(slices.Clone(areas), func(a string) bool { return a == "ratelimit" })...)...)},
}, doorRules()...), areaRules()...)

func modulePaths(names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = module + "/" + n
	}
	return out
}

// doorRules forbids each door every other door, the adapters, the binary, the
// database driver and the test stand-ins; only server runs on echo.
func doorRules() []rule {
	var out []rule
	for _, d := range doors {
		deny := []string{module + "/adapters", module + "/cmd", "github.com/jackc/pgx", module + "/runtime/runtimetest"}
		for _, other := range doors {
			if other != d {
				deny = append(deny, module+"/"+other)
			}
		}
		if d != "server" {
			deny = append(deny, "github.com/labstack/echo")
		}
		out = append(out, rule{From: module + "/" + d, Deny: deny})
	}
	return out
}

func areaPaths(names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = module + "/runtime/" + n
	}
	return out
}

// areaRules forbids each area every other area it is not allowed, and every package
// but the test stand-ins' own tests the stand-ins.
func areaRules() []rule {
	var out []rule
	for _, a := range areas {
		var deny []string
		for _, other := range areas {
			if other != a && !slices.Contains(allowed[a], other) {
				deny = append(deny, other)
			}
		}
		out = append(out, rule{From: module + "/runtime/" + a, Deny: append(areaPaths(deny...), module+"/runtime/runtimetest")})
	}
	return append(out, rule{From: module + "/adapters", Deny: []string{module + "/runtime/runtimetest"}})
}

type goPackage struct {
	ImportPath string
	Deps       []string
}

func matches(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// violations lists every dependency that breaks a rule.
func violations(pkgs []goPackage, rules []rule) []string {
	var out []string
	for _, p := range pkgs {
		for _, r := range rules {
			if r.Exact && p.ImportPath != r.From || !matches(p.ImportPath, r.From) || slices.Contains(r.Except, p.ImportPath) {
				continue
			}
			for _, dep := range p.Deps {
				for _, deny := range r.Deny {
					if matches(dep, deny) {
						out = append(out, fmt.Sprintf("%s depends on %s", p.ImportPath, dep))
					}
				}
			}
		}
	}
	return out
}

func TestImportDirection(t *testing.T) {
	t.Parallel()
	pkgs := listPackages(t)
	require.NotEmpty(t, pkgs)
	require.Empty(t, violations(pkgs, rules))
}

// listPackages lists the module's packages with their dependencies.
func listPackages(t *testing.T) []goPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Deps", module+"/...")
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	var pkgs []goPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p goPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else {
			require.NoError(t, err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestTopLevelPackagesAreListed refuses a top-level package that topLevel does not
// list: a new one needs its place in the layers decided first.
func TestTopLevelPackagesAreListed(t *testing.T) {
	t.Parallel()
	pkgs := listPackages(t)
	require.Empty(t, unlisted(pkgs))
}

// unlisted names the packages outside every listed top-level folder.
func unlisted(pkgs []goPackage) []string {
	var out []string
	for _, p := range pkgs {
		rest, _ := strings.CutPrefix(p.ImportPath, module+"/")
		top, _, _ := strings.Cut(rest, "/")
		if _, ok := topLevel[top]; !ok {
			out = append(out, p.ImportPath)
		}
	}
	return out
}

func TestTopLevelListDetectsNewPackages(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{module + "/newdoor"}, unlisted([]goPackage{
		{ImportPath: module + "/server"}, {ImportPath: module + "/adapters/postgres/textindex"}, {ImportPath: module + "/newdoor"},
	}))
}

func TestImportDirectionDetectsViolations(t *testing.T) {
	t.Parallel()
	pkgs := []goPackage{
		{ImportPath: module + "/runtime", Deps: []string{"context", "net/http", module + "/contract"}},
		{ImportPath: module + "/runtime/sub", Deps: []string{"github.com/jackc/pgx/v5"}},
		{ImportPath: module + "/server", Deps: []string{module + "/runtime"}},
		{ImportPath: module + "/runtime/a2a", Deps: []string{module + "/runtime", module + "/runtime/conversation"}},
		{ImportPath: module + "/runtime/transfer", Deps: []string{module + "/runtime/memory", module + "/runtime/operation"}},
		{ImportPath: module + "/runtime/memory", Deps: []string{module + "/runtime/operation", module + "/runtime/transfer"}},
		{ImportPath: module + "/runtime", Deps: []string{module + "/runtime/cost"}},
		{ImportPath: module + "/runtime/cost", Deps: []string{module + "/runtime/runtimetest"}},
		{ImportPath: module + "/console", Deps: []string{module + "/gate", module + "/server"}},
		{ImportPath: module + "/mcpserver", Deps: []string{module + "/gate", "github.com/labstack/echo/v4"}},
		{ImportPath: module + "/gate", Deps: []string{module + "/runtime/ratelimit", module + "/runtime/memory"}},
	}
	require.Equal(t, []string{
		module + "/runtime depends on net/http",
		module + "/runtime/sub depends on github.com/jackc/pgx/v5",
		module + "/runtime/a2a depends on " + module + "/runtime/conversation",
		module + "/runtime/memory depends on " + module + "/runtime/transfer",
		module + "/runtime depends on " + module + "/runtime/cost",
		module + "/runtime/cost depends on " + module + "/runtime/runtimetest",
		module + "/console depends on " + module + "/server",
		module + "/mcpserver depends on github.com/labstack/echo/v4",
		module + "/gate depends on " + module + "/runtime/memory",
	}, violations(pkgs, rules))
}
