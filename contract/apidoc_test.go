package contract_test

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
)

// apiDocPath is the project's own tour of the API, whose code and capability tables
// users read.
const apiDocPath = "../docs/api.md"

// codeRow matches a row of the code table: | status | `CODE` | category | retryable | when |.
var codeRow = regexp.MustCompile("^\\|\\s*(\\d{3})\\s*\\|\\s*`([A-Z_]+)`\\s*\\|\\s*([a-z_]+)\\s*\\|\\s*(true|false)\\s*\\|")

// codeTableDiff reads the code table rows of doc and lists every way they differ from
// codes: a code missing from the document, a code the table does not know, a code
// listed twice, and a status, category or retryability that differs.
func codeTableDiff(doc string, codes map[string]contract.CodeInfo) []string {
	var diffs []string
	seen := map[string]bool{}
	for _, line := range strings.Split(doc, "\n") {
		m := codeRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		status, _ := strconv.Atoi(m[1])
		code := m[2]
		got := contract.CodeInfo{Status: status, Category: m[3], Retryable: m[4] == "true"}
		if seen[code] {
			diffs = append(diffs, code+" is listed twice")
		}
		seen[code] = true
		want, ok := codes[code]
		switch {
		case !ok:
			diffs = append(diffs, code+" is not in contract.Codes")
		case got != want:
			diffs = append(diffs, fmt.Sprintf("%s: the document says %+v, contract.Codes %+v", code, got, want))
		}
	}
	for code := range codes {
		if !seen[code] {
			diffs = append(diffs, code+" is missing from the document")
		}
	}
	slices.Sort(diffs)
	return diffs
}

// TestAPIDocCodeTable keeps the code table of docs/api.md equal to contract.Codes, the
// table the error handler applies: every code, with its status, category and
// retryability.
func TestAPIDocCodeTable(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(apiDocPath)
	require.NoError(t, err)
	require.Empty(t, codeTableDiff(string(doc), contract.Codes))
}

// TestAPIDocCodeTableCanFail shows the check catches each kind of drift.
func TestAPIDocCodeTableCanFail(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(apiDocPath)
	require.NoError(t, err)
	text := string(doc)

	missing := strings.Replace(text, "| 415 | `UNSUPPORTED_MEDIA_TYPE` |", "| 415 | UNSUPPORTED_MEDIA_TYPE |", 1)
	require.Equal(t, []string{"UNSUPPORTED_MEDIA_TYPE is missing from the document"}, codeTableDiff(missing, contract.Codes))

	status := strings.Replace(text, "| 410 | `ENVELOPE_EXPIRED` |", "| 400 | `ENVELOPE_EXPIRED` |", 1)
	require.Equal(t, []string{"ENVELOPE_EXPIRED: the document says {Status:400 Category:validation Retryable:false}, " +
		"contract.Codes {Status:410 Category:validation Retryable:false}"}, codeTableDiff(status, contract.Codes))

	retryable := strings.Replace(text, "| `INTERNAL` | internal | false |", "| `INTERNAL` | internal | true |", 1)
	require.Len(t, codeTableDiff(retryable, contract.Codes), 1)

	unknown := text + "\n| 418 | `TEAPOT` | validation | false | never |\n"
	require.Equal(t, []string{"TEAPOT is not in contract.Codes"}, codeTableDiff(unknown, contract.Codes))

	codes := maps.Clone(contract.Codes)
	codes["NEW_CODE"] = contract.CodeInfo{Status: 400, Category: contract.CategoryValidation}
	require.Equal(t, []string{"NEW_CODE is missing from the document"}, codeTableDiff(text, codes))
}

// capabilityRow matches a row of the capability table: | `capability` | routes |.
var capabilityRow = regexp.MustCompile("^\\|\\s*`([a-z0-9]+:[a-z]+)`\\s*\\|(.*)\\|\\s*$")

// routeName matches the short name of a route in that table; other code spans (a
// member such as `privacy: full`) are not routes.
var routeName = regexp.MustCompile(`^((GET|POST) )?/?[a-z0-9-]+(/[a-z0-9-]+)*$`)

// codeSpan is the text of one Markdown code span.
var codeSpan = regexp.MustCompile("`([^`]+)`")

// shortRouteName is how the capability table names route: the path under its area's
// prefix, with GET spelled out, and a path outside the prefixes with its method.
func shortRouteName(r contract.Route) string {
	var name string
	switch {
	case strings.HasPrefix(r.Path, contract.PrefixContext+"/"):
		name = strings.TrimPrefix(r.Path, contract.PrefixContext+"/")
	case strings.HasPrefix(r.Path, contract.PrefixKnowledge+"/"):
		name = "knowledge/" + strings.TrimPrefix(r.Path, contract.PrefixKnowledge+"/")
	case strings.HasPrefix(r.Path, contract.PrefixA2A+"/"):
		name = "a2a/" + strings.TrimPrefix(r.Path, contract.PrefixA2A+"/")
	default:
		return r.Method + " " + r.Path
	}
	if r.Method != contract.MethodPost {
		name = r.Method + " " + name
	}
	return name
}

// capabilityTableDiff lists every way the capability table of doc differs from routes:
// a route whose capabilities there are not exactly the ones it requires, and a name
// there that is no route.
func capabilityTableDiff(doc string, routes []contract.Route) []string {
	documented := map[string][]string{}
	for _, line := range strings.Split(doc, "\n") {
		m := capabilityRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for _, span := range codeSpan.FindAllStringSubmatch(m[2], -1) {
			if routeName.MatchString(span[1]) {
				documented[span[1]] = append(documented[span[1]], m[1])
			}
		}
	}
	var diffs []string
	for _, r := range routes {
		if r.Public() {
			continue
		}
		name := shortRouteName(r)
		got, want := slices.Sorted(slices.Values(documented[name])), slices.Sorted(slices.Values(r.Capabilities))
		if !slices.Equal(got, want) {
			diffs = append(diffs, fmt.Sprintf("%s: the document says %v, contract.Routes() %v", name, got, want))
		}
		delete(documented, name)
	}
	for name := range documented {
		diffs = append(diffs, name+" is not a route")
	}
	slices.Sort(diffs)
	return diffs
}

// TestAPIDocCapabilityTable keeps the capability table of docs/api.md equal to
// contract.Routes(), the table the server enforces: every route with a credential, under
// exactly the capabilities that admit it.
func TestAPIDocCapabilityTable(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(apiDocPath)
	require.NoError(t, err)
	require.Empty(t, capabilityTableDiff(string(doc), contract.Routes()))
}

// TestAPIDocCapabilityTableCanFail shows the check catches a route left out, a route
// under the wrong capability and a name that is no route.
func TestAPIDocCapabilityTableCanFail(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(apiDocPath)
	require.NoError(t, err)
	text := string(doc)

	missing := strings.Replace(text, "| `context:retrieve` | `recall` |", "| `context:retrieve` | recall |", 1)
	require.Equal(t, []string{"recall: the document says [], contract.Routes() [context:retrieve]"},
		capabilityTableDiff(missing, contract.Routes()))

	moved := strings.Replace(text, "| `messages:search` | `messages/search` |", "| `messages:read` | `messages/search` |", 1)
	require.Equal(t, []string{"messages/search: the document says [messages:read], contract.Routes() [messages:search]"},
		capabilityTableDiff(moved, contract.Routes()))

	unknown := strings.Replace(text, "| `costs:read` | `a2a/costs` |", "| `costs:read` | `a2a/costs`, `a2a/costs/daily` |", 1)
	require.Equal(t, []string{"a2a/costs/daily is not a route"}, capabilityTableDiff(unknown, contract.Routes()))

	routes := append(slices.Clone(contract.Routes()), contract.Route{
		Method: contract.MethodPost, Path: contract.PrefixContext + "/streams", Capabilities: []string{contract.CapMessagesRead},
	})
	require.Equal(t, []string{"streams: the document says [], contract.Routes() [messages:read]"},
		capabilityTableDiff(text, routes))
}
