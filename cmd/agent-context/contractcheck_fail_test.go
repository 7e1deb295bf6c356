package main

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
)

// TestContractCheckDetectsDrift proves the validator of TestOpenAPIContract bites: an
// answer that matches the document passes, and each way an answer can drift from it
// (a member missing, added or of another type, an undocumented status, an envelope
// without its request ID or with a code the status does not carry, a missing header)
// is reported.
func TestContractCheckDetectsDrift(t *testing.T) {
	t.Parallel()
	check := newContractCheck(t, http.DefaultTransport)
	input := func(route contract.Route, body string) *openapi3filter.RequestValidationInput {
		req, err := http.NewRequestWithContext(context.Background(), route.Method, "http://127.0.0.1"+route.Path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		found, params, err := check.router.FindRoute(req)
		require.NoError(t, err)
		return &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: found, Options: check.opts}
	}
	header := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"req-1"}}
	batch := input(contract.RouteMessagesBatch, `{"messages":[]}`)
	envelope := func(status int, code, category string) string {
		return `{"status":` + strconv.Itoa(status) + `,"message":"m","error":{"code":"` + code + `","message":"m","category":"` + category +
			`","retryable":false,"requestId":"req-1","details":{}}}`
	}

	require.NoError(t, check.validateResponse(batch, 200, header, []byte(`{"appended":1,"skipped":0,"skippedIds":[]}`)))
	require.NoError(t, check.validateResponse(batch, 409, header, []byte(envelope(409, "CONFLICT", "conflict"))))
	for name, drift := range map[string]struct {
		status int
		header http.Header
		body   string
	}{
		"member missing":         {200, header, `{"appended":1,"skipped":0}`},
		"member added":           {200, header, `{"appended":1,"skipped":0,"skippedIds":[],"total":1}`},
		"member of another type": {200, header, `{"appended":"1","skipped":0,"skippedIds":[]}`},
		"undocumented status":    {418, header, envelope(418, "CONFLICT", "conflict")},
		"envelope without requestId": {409, header,
			`{"status":409,"message":"m","error":{"code":"CONFLICT","message":"m","category":"conflict","retryable":false,"details":{}}}`},
		"code the status does not carry": {409, header, envelope(409, "NOT_FOUND", "not_found")},
		"no X-Request-Id header":         {200, http.Header{"Content-Type": {"application/json"}}, `{"appended":1,"skipped":0,"skippedIds":[]}`},
	} {
		require.Error(t, check.validateResponse(batch, drift.status, drift.header, []byte(drift.body)), name)
	}
	page := input(contract.RouteMessages, `{"scope":{"conversationId":"c"}}`)
	require.NoError(t, check.validateResponse(page, 200, header, []byte(`{"messages":[],"nextCursor":null}`)))
	require.Error(t, check.validateResponse(page, 200, header, []byte(`{"messages":[],"nextCursor":5}`)),
		"a 3.1 type array ([string, null]) is enforced")
}

// TestContractCheckDetectsUndocumentedRoutes: a served route missing from the
// document, and a documented route the server does not serve, are both reported; and
// a request to a path without an operation is recorded as a violation.
func TestContractCheckDetectsUndocumentedRoutes(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	check := newContractCheck(t, http.DefaultTransport)
	served := app.main.server.ServedRoutes()
	require.NoError(t, compareRoutes(check.documentedRoutes(), served))

	err := compareRoutes(check.documentedRoutes(), append(served, "POST "+contract.PrefixContext+"/not-yet-built"))
	require.ErrorContains(t, err, "served but not documented in contract/openapi.yaml: POST /internal/v1/context/not-yet-built")
	err = compareRoutes(check.documentedRoutes(), served[1:])
	require.ErrorContains(t, err, "documented but not served: "+served[0])

	hc := &http.Client{Transport: check}
	resp, err := hc.Post(app.base+contract.PrefixContext+"/not-yet-built", "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Len(t, check.failures, 1)
	require.Contains(t, check.failures[0], "POST /internal/v1/context/not-yet-built: not documented")
}
