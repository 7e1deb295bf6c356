package contract_test

import (
	"context"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
)

// loadOpenAPI loads and validates the embedded document.
func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(contract.OpenAPIYAML())
	require.NoError(t, err)
	require.True(t, doc.IsOpenAPI31OrLater())
	require.NoError(t, doc.Validate(context.Background(), openapi3.EnableSchemaPatternValidation()))
	return doc
}

// TestOpenAPIDocumentsEveryRoute: the document has exactly the operations of
// contract.Routes(), public routes without security and every other with the bearer
// scheme and its capabilities.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	documented := map[string]*openapi3.Operation{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			documented[method+" "+path] = op
		}
	}
	for _, r := range contract.Routes() {
		key := r.Method + " " + r.Path
		op, ok := documented[key]
		require.True(t, ok, "%s is served but not documented in contract/openapi.yaml", key)
		delete(documented, key)
		if r.Public() {
			require.NotNil(t, op.Security, key)
			require.Empty(t, *op.Security, "%s is public: its security must be []", key)
			continue
		}
		require.Nil(t, op.Security, "%s inherits the document's bearer security", key)
		require.Equal(t, anySlice(r.Capabilities), op.Extensions["x-capabilities"], key)
		for _, status := range []string{"400", "401", "403", "429"} {
			require.NotNil(t, op.Responses.Value(status), "%s documents no %s", key, status)
		}
		// POST /a2a answers every body after authentication with HTTP 200 and a
		// JSON-RPC error (docs/a2a-protocol.md), never 413 or 415.
		if r.Method == contract.MethodPost && r.Path != contract.PathA2AJSONRPC {
			for _, status := range []string{"413", "415"} {
				require.NotNil(t, op.Responses.Value(status), "%s documents no %s", key, status)
			}
		}
	}
	require.Empty(t, documented, "documented operations that contract.Routes() does not serve")
}

func anySlice(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// TestOpenAPIErrorCodes: the envelope schema lists exactly the contract's code table.
func TestOpenAPIErrorCodes(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	codes := doc.Components.Schemas["ErrorBody"].Value.Properties["code"].Value.Enum
	require.Len(t, codes, len(contract.Codes))
	for _, c := range codes {
		_, ok := contract.Codes[c.(string)]
		require.True(t, ok, "%v is not in the code table", c)
	}
	require.True(t, strings.HasPrefix(doc.OpenAPI, "3.1."))
}
