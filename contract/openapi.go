package contract

import (
	"bytes"
	_ "embed"
)

//go:embed openapi.yaml
var openAPIYAML []byte

// OpenAPIYAML returns the OpenAPI 3.1 document of every route in Routes, as it is kept
// in the source (contract/openapi.yaml). The server serves it at GET /openapi.yaml and,
// converted to JSON, at GET /openapi.json.
func OpenAPIYAML() []byte { return bytes.Clone(openAPIYAML) }
