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

// The dependency direction of the design card: server → runtime ← adapters, contract a
// leaf, the MCP door (mcpserver) beside server. runtime must stay free of HTTP, database drivers and adapters; its shared base
// depends on no area, and an area on no other area but those allowed.
var rules = append([]rule{
	// The test stand-ins assert with testify, which brings net/http; only tests import them.
	{From: module + "/runtime", Except: []string{module + "/runtime/runtimetest"}, Deny: []string{
		"net/http", "github.com/labstack/echo", "github.com/jackc/pgx", "github.com/pgvector",
		module + "/adapters", module + "/server", module + "/cmd",
	}},
	{From: module + "/runtime", Exact: true, Deny: areaPaths(areas...)},
	{From: module + "/contract", Deny: []string{
		module + "/runtime", module + "/adapters", module + "/server", module + "/cmd",
		"github.com/labstack/echo", "github.com/jackc/pgx",
	}},
	{From: module + "/adapters", Deny: []string{module + "/server", module + "/cmd", "github.com/labstack/echo"}},
	{From: module + "/server", Deny: []string{module + "/adapters", module + "/cmd", "github.com/jackc/pgx", module + "/console"}},
	// The MCP door calls the use cases as the server's routes do, beside the echo host.
	{From: module + "/mcpserver", Deny: []string{
		module + "/adapters", module + "/server", module + "/cmd", "github.com/labstack/echo", "github.com/jackc/pgx",
	}},
	// The console is a door beside server: it reads through the use cases, never SQL,
	// and borrows only server's credential check.
	{From: module + "/console", Deny: []string{module + "/adapters", module + "/cmd", "github.com/jackc/pgx",
		module + "/runtime/runtimetest"}},
}, areaRules()...)

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
	return append(out, rule{From: module + "/server", Deny: []string{module + "/runtime/runtimetest"}},
		rule{From: module + "/adapters", Deny: []string{module + "/runtime/runtimetest"}})
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
	require.NotEmpty(t, pkgs)
	require.Empty(t, violations(pkgs, rules))
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
	}
	require.Equal(t, []string{
		module + "/runtime depends on net/http",
		module + "/runtime/sub depends on github.com/jackc/pgx/v5",
		module + "/runtime/a2a depends on " + module + "/runtime/conversation",
		module + "/runtime/memory depends on " + module + "/runtime/transfer",
		module + "/runtime depends on " + module + "/runtime/cost",
		module + "/runtime/cost depends on " + module + "/runtime/runtimetest",
	}, violations(pkgs, rules))
}
