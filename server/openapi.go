package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/labstack/echo/v4"
	"go.yaml.in/yaml/v3"

	"github.com/agent-context/agent-context/contract"
)

// openAPIRoutes serves the contract's OpenAPI document, as kept in the source (YAML)
// and as JSON converted once here, so that no request pays for the conversion.
func (s *Server) openAPIRoutes() {
	doc := contract.OpenAPIYAML()
	asJSON, err := yamlToJSON(doc)
	if err != nil {
		// The embedded document is checked by contract's tests; a build that breaks it
		// must not start.
		panic(fmt.Sprintf("contract/openapi.yaml: %v", err))
	}
	s.handle(contract.RouteOpenAPIYAML, func(c echo.Context) error {
		return c.Blob(http.StatusOK, "application/yaml", doc)
	})
	s.handle(contract.RouteOpenAPIJSON, func(c echo.Context) error {
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, asJSON)
	})
}

// yamlToJSON converts a YAML document whose mappings all have string keys.
func yamlToJSON(doc []byte) ([]byte, error) {
	var v any
	if err := yaml.Unmarshal(doc, &v); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ServedRoutes lists "METHOD path" of every route the router serves, sorted; HEAD
// mirrors of GET routes are left out (HTTP defines them). The OpenAPI test compares it
// with the document.
func (s *Server) ServedRoutes() []string {
	routes := s.echo.Routes()
	get := map[string]bool{}
	for _, r := range routes {
		if r.Method == http.MethodGet {
			get[r.Path] = true
		}
	}
	var out []string
	for _, r := range routes {
		// The console is HTML for browsers, not the JSON API the document describes.
		if r.Method == echo.RouteNotFound || (r.Method == http.MethodHead && get[r.Path]) ||
			r.Path == consolePrefix || strings.HasPrefix(r.Path, consolePrefix+"/") {
			continue
		}
		out = append(out, r.Method+" "+r.Path)
	}
	sort.Strings(out)
	return out
}
