package runtime_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/agent-context/agent-context"

// rule forbids packages matching From from depending (directly or transitively) on
// packages matching any of Deny.
type rule struct {
	From string
	Deny []string
}

// The dependency direction of the design card: server → runtime ← adapters, contract a
// leaf, the MCP door (mcpserver) beside server. runtime must stay free of HTTP, database drivers and adapters.
var rules = []rule{
	{From: module + "/runtime", Deny: []string{
		"net/http", "github.com/labstack/echo", "github.com/jackc/pgx", "github.com/pgvector",
		module + "/adapters", module + "/server", module + "/cmd",
	}},
	{From: module + "/contract", Deny: []string{
		module + "/runtime", module + "/adapters", module + "/server", module + "/cmd",
		"github.com/labstack/echo", "github.com/jackc/pgx",
	}},
	{From: module + "/adapters", Deny: []string{module + "/server", module + "/cmd", "github.com/labstack/echo"}},
	{From: module + "/server", Deny: []string{module + "/adapters", module + "/cmd", "github.com/jackc/pgx"}},
	// The MCP door calls the use cases as the server's routes do, beside the echo host.
	{From: module + "/mcpserver", Deny: []string{
		module + "/adapters", module + "/server", module + "/cmd", "github.com/labstack/echo", "github.com/jackc/pgx",
	}},
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
			if !matches(p.ImportPath, r.From) {
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
	}
	require.Equal(t, []string{
		module + "/runtime depends on net/http",
		module + "/runtime/sub depends on github.com/jackc/pgx/v5",
	}, violations(pkgs, rules))
}
