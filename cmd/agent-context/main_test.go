package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime/a2a"
)

func TestServeHealthAndReady(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	health, err := app.typed().Health(context.Background())
	require.NoError(t, err)
	require.Equal(t, contract.Health{Status: "ok", Service: "agent-context-infra"}, *health)

	ready, err := app.typed().Ready(context.Background())
	require.NoError(t, err)
	require.Equal(t, ready.LatestVersion, ready.SchemaVersion)
	require.Positive(t, ready.SchemaVersion)

	app.do(t, http.MethodGet, "/nope", nil).requireError(t, http.StatusNotFound, contract.CodeRouteNotFound)

	// HEAD is GET without the body.
	for _, path := range []string{"/health", "/ready"} {
		r := app.do(t, http.MethodHead, path, nil)
		require.Equal(t, http.StatusOK, r.Status, path)
		require.Empty(t, r.Body)
		require.Equal(t, "application/json", r.Header.Get("Content-Type"))
	}
}

// rawRequest writes a request byte for byte (net/http refuses to send some of these)
// and returns the status line and the rest of the answer.
func rawRequest(t *testing.T, addr, request string) (statusLine, rest string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	_, err = io.WriteString(conn, request)
	require.NoError(t, err)
	out, err := io.ReadAll(conn)
	require.NoError(t, err)
	statusLine, rest, _ = strings.Cut(string(out), "\r\n")
	return statusLine, rest
}

// TestWireGarbage sends what a careless or hostile client might: bytes HTTP forbids in a
// header (net/http answers those itself with a plain 400 before any routing, see
// docs/foundation.md), oversized headers, compressed and BOM-prefixed bodies. Nothing
// is ever a 5xx, and nothing malformed reaches a handler.
func TestWireGarbage(t *testing.T) {
	t.Parallel()
	app := startApp(t, func(c *Config) { c.ServiceToken = "static-secret" })
	addr := strings.TrimPrefix(app.base, "http://")
	path := contract.RouteMessagesRecent.Path
	body := `{"scope":{"conversationId":"c"}}`
	request := func(extraHeaders string) string {
		return "POST " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer static-secret\r\n" +
			"Content-Type: application/json\r\n" + extraHeaders + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body
	}
	status, rest := rawRequest(t, addr, request(""))
	require.Equal(t, "HTTP/1.1 200 OK", status, rest)

	for name, header := range map[string]string{
		"control character in a scope header":      "x-infra-tenant-id: a\x01b\r\n",
		"NUL in a scope header":                    "x-infra-subject: a\x00b\r\n",
		"DEL in the request ID":                    "X-Request-Id: a\x7fb\r\n",
		"control character in the user credential": "x-infra-user-authorization: Bearer a\x1bb\r\n",
	} {
		status, rest := rawRequest(t, addr, request(header))
		require.Equal(t, "HTTP/1.1 400 Bad Request", status, "%s: %s", name, rest)
	}
	// Bytes HTTP allows but IDs do not: the envelope names the header.
	for header, value := range map[string]string{
		"x-infra-tenant-id":  "a\tb",
		"x-infra-project-id": "caf\xe9",
		"x-infra-subject":    strings.Repeat("s", contract.MaxIDChars+1),
	} {
		status, rest := rawRequest(t, addr, request(header+": "+value+"\r\n"))
		require.Equal(t, "HTTP/1.1 400 Bad Request", status, rest)
		require.Contains(t, rest, `"code":"VALIDATION_FAILED"`)
		require.Contains(t, rest, `"field":"`+header+`"`)
	}
	status, _ = rawRequest(t, addr, request("X-Filler: "+strings.Repeat("f", 70<<10)+"\r\n"))
	require.Equal(t, "HTTP/1.1 431 Request Header Fields Too Large", status)

	bearer := []string{"Authorization", "Bearer static-secret"}
	r := app.do(t, http.MethodPost, path, "\uFEFF"+body, bearer...)
	r.requireOK(t, http.StatusOK, nil)
	e := app.do(t, http.MethodPost, path, body, append(bearer, "Content-Encoding", "gzip")...).
		requireError(t, http.StatusUnsupportedMediaType, contract.CodeUnsupportedMediaType)
	require.Equal(t, "Content-Encoding", e.Details["field"])
	rid := strings.Repeat("r", contract.MaxRequestIDChars)
	r = app.do(t, http.MethodPost, path, body, append(bearer, "X-Request-Id", rid)...)
	r.requireOK(t, http.StatusOK, nil)
	require.Equal(t, rid, r.Header.Get("X-Request-Id"))
}

func TestMigrateStatusWithDSN(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	var out bytes.Buffer
	env := map[string]string{"AGENT_CONTEXT_DATABASE_URL": app.dsn}
	require.NoError(t, run(context.Background(), []string{"migrate", "status"}, func(k string) string { return env[k] }, &out))
	require.Contains(t, out.String(), "00001_foundation.sql")
	require.NotContains(t, out.String(), "pending")
	require.Contains(t, out.String(), "applied")
}

func TestOpenModeRefusesPublicBind(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig(func(k string) string {
		return map[string]string{"AGENT_CONTEXT_BIND": "0.0.0.0:0", "AGENT_CONTEXT_DATABASE_URL": "postgres://unused"}[k]
	})
	require.NoError(t, err)
	err = NewMain(cfg).Run(context.Background())
	require.ErrorContains(t, err, "AGENT_CONTEXT_ALLOW_OPEN")
}

func TestConfigErrorsNameTheVariable(t *testing.T) {
	t.Parallel()
	for name, value := range map[string]string{
		"AGENT_CONTEXT_ALLOW_OPEN":                 "maybe",
		"AGENT_CONTEXT_STATEMENT_TIMEOUT":          "soon",
		"AGENT_CONTEXT_LOG_FORMAT":                 "xml",
		"AGENT_CONTEXT_BIND":                       "5120",
		"AGENT_CONTEXT_DB_MAX_CONNS":               "-1",
		"AGENT_CONTEXT_SERVICE_TOKEN":              "s3cret\n",
		"AGENT_CONTEXT_A2A_MAX_MESSAGES":           "0",
		"AGENT_CONTEXT_A2A_TASK_RETENTION":         "forever",
		"AGENT_CONTEXT_A2A_EVENT_RETENTION":        "-1h",
		"AGENT_CONTEXT_A2A_SWEEP_INTERVAL":         "often",
		"AGENT_CONTEXT_A2A_REQUIRE_SIGNED":         "perhaps",
		"AGENT_CONTEXT_A2A_HMAC_KEYS":              `["s3cret"]`,
		"AGENT_CONTEXT_A2A_DEFAULT_AGENT":          "two words",
		"AGENT_CONTEXT_PUBLIC_URL":                 "localhost:5120",
		"AGENT_CONTEXT_EMBEDDING_QUERY_TIMEOUT":    "0s",
		"AGENT_CONTEXT_EMBEDDING_CIRCUIT_FAILURES": "0",
		"AGENT_CONTEXT_EMBEDDING_CIRCUIT_OPEN":     "never",
		"AGENT_CONTEXT_EMBEDDING_QUERY_CACHE":      "-1",
		"AGENT_CONTEXT_METRICS_REFRESH":            "10ms",
		"AGENT_CONTEXT_A2A_MAX_ENVELOPES":          "0",
		"AGENT_CONTEXT_LISTEN_DATABASE_URL":        "postgres://user:s3cret@[broken/db",
	} {
		_, err := LoadConfig(func(k string) string {
			if k == name {
				return value
			}
			return ""
		})
		require.ErrorContains(t, err, name)
		require.NotContains(t, err.Error(), "s3cret")
	}
	// HMAC keys need IDs without ':', secrets and agents; the old bare-secret form is
	// refused with the form to write instead; each on one line naming the variable
	// and repeating no secret.
	for keys, says := range map[string]string{
		`{"k:1": {"secret": "s3cret", "agents": ["a"]}}`: "without ':'",
		`{"": {"secret": "s3cret", "agents": ["a"]}}`:    "without ':'",
		`{"k1": "s3cret"}`:                                                  `old {"keyId": "secret"} form`,
		`{"k1": {"agents": ["a"]}}`:                                         "non-empty secret",
		`{"k1": {"secret": "", "agents": ["a"]}}`:                           "non-empty secret",
		`{"k1": {"secret": "s3cret"}}`:                                      "non-empty agents",
		`{"k1": {"secret": "s3cret", "agents": []}}`:                        "non-empty agents",
		`{"k1": {"secret": "s3cret", "agents": ["two words"]}}`:             "not an agent ID",
		`{"k1": {"secret": "s3cret", "agents": ["a"], "tenants": "acme"}}`:  "tenants must be",
		`{"k1": {"secret": "s3cret", "agents": ["a"], "tenants": []}}`:      "tenants must be",
		`{"k1": {"secret": "s3cret", "agents": ["a"], "tenants": [1]}}`:     "tenants must be",
		`{"k1": {"secret": "s3cret", "agents": ["a"], "tenant": ["acme"]}}`: "must be an object",
		`{"k1": {"secret": "s3cret", "agents": "a"}}`:                       "must be an object",
		`null`: "must be a JSON object",
	} {
		_, err := LoadConfig(func(k string) string {
			return map[string]string{"AGENT_CONTEXT_A2A_HMAC_KEYS": keys}[k]
		})
		require.ErrorContains(t, err, "AGENT_CONTEXT_A2A_HMAC_KEYS", keys)
		require.ErrorContains(t, err, says, keys)
		require.NotContains(t, err.Error(), "\n", keys)
		require.NotContains(t, err.Error(), "s3cret")
	}
	for _, public := range []string{"ftp://host", "https://", "https://host/?q=1", "https://host/#top"} {
		_, err := LoadConfig(func(k string) string { return map[string]string{"AGENT_CONTEXT_PUBLIC_URL": public}[k] })
		require.ErrorContains(t, err, "AGENT_CONTEXT_PUBLIC_URL", public)
	}
	cfg, err := LoadConfig(func(k string) string {
		return map[string]string{"AGENT_CONTEXT_PUBLIC_URL": "https://ctx.example.invalid/base/", "AGENT_CONTEXT_A2A_HMAC_KEYS": `{"h1": {"secret": "s", "agents": ["agent-a"], "tenants": ["acme"]}, "h2": {"secret": "t", "agents": ["agent-b"], "tenants": null}}`}[k]
	})
	require.NoError(t, err)
	require.Equal(t, "https://ctx.example.invalid/base", cfg.PublicURL)
	require.Equal(t, map[string]a2a.HMACKey{
		"h1": {Secret: []byte("s"), Agents: []string{"agent-a"}, Tenants: []string{"acme"}},
		"h2": {Secret: []byte("t"), Agents: []string{"agent-b"}},
	}, cfg.A2AHMACKeys)
}

func TestCommandLine(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"version"}, func(string) string { return "" }, &out))
	require.Contains(t, out.String(), "schema ")
	var usage usageError
	require.ErrorAs(t, run(context.Background(), nil, func(string) string { return "" }, &out), &usage)
	require.ErrorAs(t, run(context.Background(), []string{"bogus"}, func(string) string { return "" }, &out), &usage)
	require.ErrorAs(t, run(context.Background(), []string{"migrate"}, func(string) string { return "" }, &out), &usage)

	for _, args := range [][]string{{"serve", "--bind", "0.0.0.0:80"}, {"version", "extra"}} {
		require.ErrorAs(t, run(context.Background(), args, func(string) string { return "" }, &out), &usage, "%v", args)
	}

	// An unknown migrate action is a usage error before the embedded cluster starts.
	dataDir := t.TempDir()
	err := run(context.Background(), []string{"migrate", "sideways"}, func(k string) string {
		return map[string]string{"AGENT_CONTEXT_DATA_DIR": dataDir}[k]
	}, &out)
	require.ErrorAs(t, err, &usage)
	require.ErrorContains(t, err, "sideways")
	entries, err := os.ReadDir(dataDir)
	require.NoError(t, err)
	require.Empty(t, entries, "no cluster may be created for a typo")
}
