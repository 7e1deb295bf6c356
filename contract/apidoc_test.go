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

// apiDocPath is the project's own tour of the API, whose code table users read.
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
