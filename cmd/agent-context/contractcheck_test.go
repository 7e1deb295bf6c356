package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
)

// contractCheck is an http.RoundTripper that validates every request and response it
// carries against the OpenAPI document with kin-openapi (the validator enables JSON
// Schema 2020-12 for a 3.1 document), and records which documented route answered
// with which status. Failures are collected and reported by requireClean.
type contractCheck struct {
	doc    *openapi3.T
	router routers.Router
	opts   *openapi3filter.Options
	base   http.RoundTripper

	mu        sync.Mutex
	seen      map[string]map[int]bool
	viaClient map[string]bool
	failures  []string
}

// expectation says what a request is meant to be; the zero value is a valid request
// sent by the typed client.
type expectation struct {
	// invalid: the document must refuse the request too (a bound, an unknown member,
	// a missing credential): the server and the document agree on what is invalid.
	invalid bool
	// skipRequest names why the request is not validated (a 32 MiB body).
	skipRequest string
	// raw: sent by hand (wire details), not through the typed client.
	raw bool
	// unrouted: a path or method the document has no operation for.
	unrouted bool
}

type expectationKey struct{}

func expect(ctx context.Context, e expectation) context.Context {
	return context.WithValue(ctx, expectationKey{}, e)
}

// loadContract loads the embedded document the way a client of the contract would.
func loadContract(t testing.TB) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(contract.OpenAPIYAML())
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()))
	return doc
}

func newContractCheck(t testing.TB, base http.RoundTripper) *contractCheck {
	t.Helper()
	doc := loadContract(t)
	router, err := gorillamux.NewRouter(doc)
	require.NoError(t, err)
	return &contractCheck{
		doc: doc, router: router, base: base,
		opts: &openapi3filter.Options{
			IncludeResponseStatus: true,
			AuthenticationFunc: func(_ context.Context, in *openapi3filter.AuthenticationInput) error {
				if _, ok := bearerToken(in.RequestValidationInput.Request.Header.Get("Authorization")); !ok {
					return errors.New("no bearer token")
				}
				return nil
			},
		},
		seen: map[string]map[int]bool{}, viaClient: map[string]bool{},
	}
}

func bearerToken(h string) (string, bool) {
	scheme, token, ok := strings.Cut(h, " ")
	return token, ok && strings.EqualFold(scheme, "Bearer") && token != ""
}

func (c *contractCheck) fail(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failures = append(c.failures, fmt.Sprintf(format, args...))
}

// RoundTrip implements http.RoundTripper.
func (c *contractCheck) RoundTrip(req *http.Request) (*http.Response, error) {
	exp, _ := req.Context().Value(expectationKey{}).(expectation)
	what := req.Method + " " + req.URL.Path
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		if !exp.unrouted {
			c.fail("%s: not documented: %v", what, err)
		}
		return c.sendUnrouted(req, what)
	}
	if exp.unrouted {
		c.fail("%s: documented, but the test expected no operation", what)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: c.opts}
	if exp.skipRequest == "" {
		err := openapi3filter.ValidateRequest(req.Context(), in)
		switch {
		case exp.invalid && err == nil:
			c.fail("%s: the document accepts a request the test sends as invalid", what)
		case !exp.invalid && err != nil:
			c.fail("%s: request does not match the document: %v", what, err)
		}
	}
	resp, body, err := c.send(req)
	if err != nil {
		return nil, err
	}
	if err := c.validateResponse(in, resp.StatusCode, resp.Header, body); err != nil {
		c.fail("%s → %d: response does not match the document: %v\nbody: %.400s", what, resp.StatusCode, err, body)
	}
	key := route.Method + " " + route.Path
	c.mu.Lock()
	if c.seen[key] == nil {
		c.seen[key] = map[int]bool{}
	}
	c.seen[key][resp.StatusCode] = true
	if !exp.raw {
		c.viaClient[key] = true
	}
	c.mu.Unlock()
	return resp, nil
}

// send carries req and reads the answer whole, leaving it readable for the caller.
func (c *contractCheck) send(req *http.Request) (*http.Response, []byte, error) {
	resp, err := c.base.RoundTrip(req)
	if err != nil {
		return nil, nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, body, nil
}

// validateResponse checks one answer against the operation of in.
func (c *contractCheck) validateResponse(in *openapi3filter.RequestValidationInput, status int, header http.Header, body []byte) error {
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: status, Header: header, Options: c.opts}
	out.SetBodyBytes(body)
	return openapi3filter.ValidateResponse(in.Request.Context(), out)
}

// sendUnrouted sends a request the document has no operation for (an unknown path, a
// wrong method) and checks that the answer is the error envelope all the same.
func (c *contractCheck) sendUnrouted(req *http.Request, what string) (*http.Response, error) {
	resp, body, err := c.send(req)
	if err != nil {
		return nil, err
	}
	if req.Method != http.MethodHead {
		if err := c.validateEnvelope(body); err != nil {
			c.fail("%s → %d: not the error envelope: %v", what, resp.StatusCode, err)
		}
	}
	return resp, nil
}

// validateEnvelope checks body against the document's ErrorResponse schema.
func (c *contractCheck) validateEnvelope(body []byte) error {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return err
	}
	return c.doc.Components.Schemas["ErrorResponse"].Value.VisitJSON(v, openapi3.EnableJSONSchema2020())
}

// documentedStatuses lists every "METHOD path" of the document with its statuses.
func (c *contractCheck) documentedStatuses() map[string][]int {
	out := map[string][]int{}
	for path, item := range c.doc.Paths.Map() {
		for method, op := range item.Operations() {
			var statuses []int
			for code := range op.Responses.Map() {
				var n int
				_, err := fmt.Sscanf(code, "%d", &n)
				if err == nil {
					statuses = append(statuses, n)
				}
			}
			sort.Ints(statuses)
			out[method+" "+path] = statuses
		}
	}
	return out
}

// unobserved lists every documented route and status that no answer showed.
func (c *contractCheck) unobserved() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var missing []string
	for route, statuses := range c.documentedStatuses() {
		for _, s := range statuses {
			if !c.seen[route][s] {
				missing = append(missing, fmt.Sprintf("%s %d", route, s))
			}
		}
	}
	sort.Strings(missing)
	return missing
}

// notViaClient lists the documented routes the typed client never called.
func (c *contractCheck) notViaClient() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var missing []string
	for route := range c.documentedStatuses() {
		if !c.viaClient[route] {
			missing = append(missing, route)
		}
	}
	sort.Strings(missing)
	return missing
}

// requireClean fails the test with every failure recorded.
func (c *contractCheck) requireClean(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Empty(t, c.failures, "contract violations:\n%s", strings.Join(c.failures, "\n"))
}

// compareRoutes reports the routes served but not documented and documented but not
// served ("METHOD path" each).
func compareRoutes(documented, served []string) error {
	var errs []string
	for _, r := range served {
		if !slices.Contains(documented, r) {
			errs = append(errs, "served but not documented in contract/openapi.yaml: "+r)
		}
	}
	for _, r := range documented {
		if !slices.Contains(served, r) {
			errs = append(errs, "documented but not served: "+r)
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

func (c *contractCheck) documentedRoutes() []string {
	var out []string
	for r := range c.documentedStatuses() {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}
