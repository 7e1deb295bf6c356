package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/peerregistry"
	"github.com/agent-context/agent-context/contract"
)

// peerKit is a peers file with the keys `a2a keygen` wrote for it, and the HMAC keys
// of the configuration.
type peerKit struct {
	t         *testing.T
	dir       string
	peersFile string
	hmacKeys  string
	peers     peerregistry.File
}

func newPeerKit(t *testing.T) *peerKit {
	t.Helper()
	k := &peerKit{t: t, dir: t.TempDir(), peers: peerregistry.File{}, hmacKeys: `{"h1": {"secret": "s3cret-hmac-key", "agents": ["agent-z"]}, ` +
		`"h2": {"secret": "acme-only-key", "agents": ["agent-z", "agent-y"], "tenants": ["acme"]}}`}
	k.peersFile = filepath.Join(k.dir, "peers.json")
	k.keygen("agent-a", "k1")
	k.keygen("agent-b", "kb")
	return k
}

// keygen runs `a2a keygen` for agent and adds its entry to the peers file.
func (k *peerKit) keygen(agent, keyID string) string {
	k.t.Helper()
	keyFile := filepath.Join(k.dir, agent+"-"+keyID+".key")
	var out bytes.Buffer
	require.NoError(k.t, run(context.Background(), []string{"a2a", "keygen", "--agent", agent, "--key-id", keyID,
		"--out", keyFile}, k.getenv, &out))
	var entry peerregistry.File
	require.NoError(k.t, json.Unmarshal(out.Bytes(), &entry), out.String())
	k.peers[agent] = append(k.peers[agent], entry[agent]...)
	k.writePeers()
	return keyFile
}

func (k *peerKit) writePeers() {
	k.t.Helper()
	data, err := json.Marshal(k.peers)
	require.NoError(k.t, err)
	require.NoError(k.t, writeFileAtomic(k.peersFile, data, 0o644))
}

// bindTenants limits agent's keys to tenants in the peers file.
func (k *peerKit) bindTenants(agent string, tenants ...string) {
	k.t.Helper()
	list, err := json.Marshal(tenants)
	require.NoError(k.t, err)
	for i := range k.peers[agent] {
		k.peers[agent][i].Tenants = list
	}
	k.writePeers()
}

func (k *peerKit) getenv(name string) string {
	if name == "AGENT_CONTEXT_A2A_HMAC_KEYS" {
		return k.hmacKeys
	}
	return ""
}

func (k *peerKit) configure(c *Config) {
	c.A2APeersFile = k.peersFile
	keys, err := parseHMACKeys(k.hmacKeys)
	require.NoError(k.t, err)
	c.A2AHMACKeys = keys
}

// sign runs `a2a sign` on env with the given flags.
func (k *peerKit) sign(env map[string]any, flags ...string) []byte {
	k.t.Helper()
	file := filepath.Join(k.t.TempDir(), "envelope.json")
	data, err := json.Marshal(env)
	require.NoError(k.t, err)
	require.NoError(k.t, os.WriteFile(file, data, 0o600))
	var out bytes.Buffer
	require.NoError(k.t, run(context.Background(), append([]string{"a2a", "sign", file}, flags...), k.getenv, &out))
	return bytes.TrimSpace(out.Bytes())
}

func (k *peerKit) key(agent, keyID string) []string {
	return []string{"--key", filepath.Join(k.dir, agent+"-"+keyID+".key")}
}

func envelope(id, from, to, contentType string, payload any) map[string]any {
	return map[string]any{"message_id": id, "correlation_id": "c-" + id, "from": from, "to": to,
		"ts": time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), "ttl_ms": 60_000, "version": "1.0",
		"content_type": contentType, "payload": payload}
}

func envelopeState(t *testing.T, app *testApp) string {
	t.Helper()
	var n int
	require.NoError(t, openPool(t, app.dsn).QueryRow(context.Background(), `SELECT count(*) FROM a2a_envelopes`).Scan(&n))
	return fmt.Sprintf("%s,%d", a2aState(t, app), n)
}

func TestHandoffSignatures(t *testing.T) {
	t.Parallel()
	kit := newPeerKit(t)
	app, m := startSecuredApp(t, kit.configure)
	relay := tokenAgent(app, m, "gateway", a2aCaps...)
	bob := tokenAgent(app, m, "bob", a2aCaps...)
	ack := func(r *testResponse) contract.MessageAck {
		t.Helper()
		var a contract.MessageAck
		r.requireOK(t, http.StatusOK, &a)
		return a
	}

	// Ed25519 with agent-a's pinned key: the message is agent-a's, delivered to bob.
	signed := kit.sign(envelope("m-ed", "agent-a", "bob", contract.ContentA2AMessage,
		map[string]any{"content": "hello from a", "category": "handoff"}), kit.key("agent-a", "k1")...)
	first := ack(relay.post(t, contract.RouteA2AHandoff, signed))
	require.Equal(t, contract.MessageAck{MessageID: "m-ed", Status: contract.AckAccepted, Ts: first.Ts}, first)
	msgs := bob.read(t, map[string]any{})
	require.Len(t, msgs, 1)
	require.Equal(t, "agent-a", msgs[0].FromAgent)
	require.Equal(t, "m-ed", msgs[0].ID)
	require.Equal(t, "c-m-ed", msgs[0].CorrelationID)
	require.Equal(t, "hello from a", msgs[0].Content)

	// HMAC-SHA256 with a configured key.
	hmacSigned := kit.sign(envelope("m-hmac", "agent-z", "bob", contract.ContentA2AMessage,
		map[string]any{"content": "hmac"}), "--hmac", "h1")
	require.Equal(t, contract.AckAccepted, ack(relay.post(t, contract.RouteA2AHandoff, hmacSigned)).Status)
	require.Len(t, bob.read(t, map[string]any{}), 1)

	// A replay is the first ack, a duplicate, with no second effect.
	before := envelopeState(t, app)
	replay := ack(relay.post(t, contract.RouteA2AHandoff, signed))
	require.Equal(t, contract.MessageAck{MessageID: "m-ed", Status: contract.AckDuplicate, Ts: first.Ts}, replay)
	require.Equal(t, before, envelopeState(t, app))
	require.Empty(t, bob.read(t, map[string]any{}))

	// The same message_id with other content is a conflict.
	other := kit.sign(envelope("m-ed", "agent-a", "bob", contract.ContentA2AMessage,
		map[string]any{"content": "something else"}), kit.key("agent-a", "k1")...)
	relay.post(t, contract.RouteA2AHandoff, other).requireError(t, http.StatusConflict, contract.CodeIdempotencyConflict)

	// One flipped bit anywhere in a fresh signed envelope: SIGNATURE_INVALID, in values,
	// member names and the signature alike, since the signature is checked over the
	// bytes received before the envelope is decoded. Only a flip that leaves no JSON
	// to canonicalize is refused by the decoder instead.
	fresh := kit.sign(envelope("m-flip", "agent-a", "bob", contract.ContentA2AMessage,
		map[string]any{"content": "flip me"}), kit.key("agent-a", "k1")...)
	syntax := 0
	for i := range fresh {
		flipped := bytes.Clone(fresh)
		flipped[i] ^= 0x01
		r := relay.post(t, contract.RouteA2AHandoff, flipped)
		if !json.Valid(flipped) {
			r.requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
			syntax++
			continue
		}
		r.requireError(t, http.StatusUnauthorized, contract.CodeSignatureInvalid)
	}
	require.Less(t, syntax, len(fresh)/4, "most flips leave valid JSON, which the signature covers")
	require.Equal(t, before, envelopeState(t, app))

	refused := map[string][]byte{
		"unknown key": kit.sign(envelope("m-u", "agent-a", "bob", contract.ContentA2AMessage,
			map[string]any{"content": "x"}), kit.key("agent-b", "kb")...),
		"unknown hmac key": bytes.Replace(kit.sign(envelope("m-h", "agent-a", "bob", contract.ContentA2AMessage,
			map[string]any{"content": "x"}), "--hmac", "h1"), []byte("hmac-sha256:h1:"), []byte("hmac-sha256:h9:"), 1),
		"unsigned, not the caller": mustMarshal(t, envelope("m-n", "agent-a", "bob", contract.ContentA2AMessage,
			map[string]any{"content": "x"})),
		"malformed signature": bytes.Replace(fresh, []byte(`"ed25519:k1:`), []byte(`"ed25519:k1`), 1),
		"unknown algorithm":   bytes.Replace(fresh, []byte(`"ed25519:k1:`), []byte(`"rsa:k1:`), 1),
	}
	// A key of another agent: agent-b's key ID under agent-a's name.
	refused["key of another agent"] = bytes.Replace(kit.sign(envelope("m-o", "agent-b", "bob",
		contract.ContentA2AMessage, map[string]any{"content": "x"}), kit.key("agent-b", "kb")...),
		[]byte(`"from":"agent-b"`), []byte(`"from":"agent-a"`), 1)
	for name, body := range refused {
		t.Run(name, func(t *testing.T) {
			relay.post(t, contract.RouteA2AHandoff, body).requireError(t, http.StatusUnauthorized, contract.CodeSignatureInvalid)
		})
	}
	require.Equal(t, before, envelopeState(t, app))

	// Unsigned from the sender itself is accepted (signatures not required here).
	self := tokenAgent(app, m, "agent-c", a2aCaps...)
	require.Equal(t, contract.AckAccepted, ack(self.post(t, contract.RouteA2AHandoff,
		envelope("m-self", "agent-c", "bob", contract.ContentA2AMessage, map[string]any{"content": "self"}))).Status)

	// A rotated peers file is read again: a new key of agent-a verifies.
	kit.keygen("agent-a", "k2")
	future := time.Now().Add(2 * time.Second)
	require.NoError(t, os.Chtimes(kit.peersFile, future, future))
	rotated := kit.sign(envelope("m-k2", "agent-a", "bob", contract.ContentA2AMessage,
		map[string]any{"content": "rotated"}), kit.key("agent-a", "k2")...)
	require.Equal(t, contract.AckAccepted, ack(relay.post(t, contract.RouteA2AHandoff, rotated)).Status)
}

// TestHandoffBindings: a key signs only for the senders and tenants it is bound to,
// and an envelope naming its tenant and project lands nowhere else.
func TestHandoffBindings(t *testing.T) {
	t.Parallel()
	kit := newPeerKit(t)
	kit.keygen("agent-t", "kt")
	kit.bindTenants("agent-t", "acme")
	app, m := startSecuredApp(t, kit.configure)
	relay := tokenAgent(app, m, "gateway", a2aCaps...)
	elsewhere := a2aAgent{app: app, headers: []string{"Authorization", m.subjectBearer("gateway", "globex", "alpha", a2aCaps...)}}
	otherProject := a2aAgent{app: app, headers: []string{"Authorization", m.subjectBearer("gateway", "acme", "beta", a2aCaps...)}}
	msg := func(id, from string) map[string]any {
		return envelope(id, from, "bob", contract.ContentA2AMessage, map[string]any{"content": "bound " + id})
	}
	bound := func(env map[string]any, tenant, project any) map[string]any {
		env["tenant"], env["project"] = tenant, project
		return env
	}
	accepted := func(a a2aAgent, body []byte) {
		t.Helper()
		var ack contract.MessageAck
		a.post(t, contract.RouteA2AHandoff, body).requireOK(t, http.StatusOK, &ack)
		require.Equal(t, contract.AckAccepted, ack.Status)
	}
	refused := func(a a2aAgent, body []byte) {
		t.Helper()
		a.post(t, contract.RouteA2AHandoff, body).requireError(t, http.StatusUnauthorized, contract.CodeSignatureInvalid)
	}

	// An HMAC key signs for its agents only: h1 is agent-z's, not agent-a's.
	accepted(relay, kit.sign(msg("m-z", "agent-z"), "--hmac", "h1"))
	refused(relay, kit.sign(msg("m-a", "agent-a"), "--hmac", "h1"))
	// A key bound to tenants is refused elsewhere, HMAC and Ed25519 alike.
	accepted(relay, kit.sign(msg("m-h2", "agent-y"), "--hmac", "h2"))
	refused(elsewhere, kit.sign(msg("m-h2b", "agent-y"), "--hmac", "h2"))
	accepted(relay, kit.sign(msg("m-t", "agent-t"), kit.key("agent-t", "kt")...))
	refused(elsewhere, kit.sign(msg("m-tb", "agent-t"), kit.key("agent-t", "kt")...))
	// An envelope naming its scope, captured and replayed into another tenant or
	// project, is refused there though its key may be used anywhere.
	scoped := kit.sign(bound(msg("m-scoped", "agent-a"), "acme", "alpha"), kit.key("agent-a", "k1")...)
	accepted(relay, scoped)
	before := envelopeState(t, app)
	refused(elsewhere, scoped)
	refused(otherProject, scoped)
	require.Equal(t, before, envelopeState(t, app))
	// Unsigned, the binding holds as well.
	self := tokenAgent(app, m, "agent-c", a2aCaps...)
	self.post(t, contract.RouteA2AHandoff, bound(msg("m-self", "agent-c"), "globex", nil)).
		requireError(t, http.StatusUnauthorized, contract.CodeSignatureInvalid)

	// A tenant or project that is not a string is a validation error naming it.
	for field, value := range map[string]any{"tenant": 7, "project": []string{"alpha"}} {
		env := msg("m-bad-"+field, "agent-a")
		env[field] = value
		r := relay.post(t, contract.RouteA2AHandoff, kit.sign(env, kit.key("agent-a", "k1")...))
		r.requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
		require.Contains(t, string(r.Body), `"field":"`+field+`"`)
	}
	require.Equal(t, before, envelopeState(t, app))
}

func TestHandoffRequireSigned(t *testing.T) {
	t.Parallel()
	kit := newPeerKit(t)
	app, m := startSecuredApp(t, kit.configure, func(c *Config) { c.A2ARequireSigned = true })
	a := tokenAgent(app, m, "agent-a", a2aCaps...)
	a.post(t, contract.RouteA2AHandoff, envelope("m-1", "agent-a", "bob", contract.ContentA2AMessage,
		map[string]any{"content": "x"})).requireError(t, http.StatusUnauthorized, contract.CodeSignatureInvalid)
	signed := kit.sign(envelope("m-1", "agent-a", "bob", contract.ContentA2AMessage,
		map[string]any{"content": "x"}), kit.key("agent-a", "k1")...)
	a.post(t, contract.RouteA2AHandoff, signed).requireOK(t, http.StatusOK, nil)
}

func TestHandoffContentTypes(t *testing.T) {
	t.Parallel()
	app, m := startSecuredApp(t)
	alice, bob := tokenAgent(app, m, "alice", a2aCaps...), tokenAgent(app, m, "bob", a2aCaps...)

	// a2a_task: an ordinary task, created by the envelope's from for its to.
	alice.post(t, contract.RouteA2AHandoff, envelope("e-task", "alice", "bob", contract.ContentA2ATask,
		map[string]any{"id": "t-env", "description": "review", "parts": []any{map[string]any{"type": "text", "text": "pls"}}})).
		requireOK(t, http.StatusOK, nil)
	var task contract.Task
	bob.ok(t, contract.RouteA2ATasksGet, map[string]any{"taskId": "t-env"}, &task)
	require.Equal(t, "alice", task.FromAgent)
	require.Equal(t, "bob", task.ToAgent)
	require.Equal(t, contract.TaskCreated, task.State)
	bob.ok(t, contract.RouteA2ATasksUpdate, map[string]any{"taskId": "t-env", "state": "working"}, nil)

	// context_package: stored, announced to sender and recipient.
	alice.post(t, contract.RouteA2AHandoff, envelope("e-pkg", "alice", "bob", contract.ContentContextPackage,
		map[string]any{"files": []any{"a.go"}, "note": "opaque"})).requireOK(t, http.StatusOK, nil)
	var stored string
	require.NoError(t, openPool(t, app.dsn).QueryRow(context.Background(),
		`SELECT payload::text FROM a2a_envelopes WHERE message_id = 'e-pkg'`).Scan(&stored))
	require.JSONEq(t, `{"files": ["a.go"], "note": "opaque"}`, stored)

	page := bob.poll(t, map[string]any{"filter": map[string]any{"kinds": []string{contract.EventEnvelopeReceived}}})
	require.Len(t, page.Events, 2)
	require.Equal(t, "c-e-task", page.Events[0].CorrelationID)
	require.JSONEq(t, `{"messageId": "e-task", "contentType": "a2a_task", "from": "alice", "to": "bob", "taskId": "t-env"}`,
		string(page.Events[0].Payload))
	require.JSONEq(t, `{"messageId": "e-pkg", "contentType": "context_package", "from": "alice", "to": "bob"}`,
		string(page.Events[1].Payload))
	require.ElementsMatch(t, []string{"alice", "bob"}, page.Events[1].TargetAgents)
	carol := tokenAgent(app, m, "carol", a2aCaps...)
	require.Empty(t, carol.poll(t, map[string]any{"filter": map[string]any{"kinds": []string{contract.EventEnvelopeReceived}}}).Events)

	// Versions.
	var versions contract.A2AVersions
	app.do(t, http.MethodGet, contract.RouteA2AVersions.Path, nil, alice.headers...).requireOK(t, http.StatusOK, &versions)
	require.Equal(t, []string{"1.0"}, versions.SupportedVersions)
}

func TestHandoffBadInput(t *testing.T) {
	t.Parallel()
	app, m := startSecuredApp(t)
	alice := tokenAgent(app, m, "alice", a2aCaps...)
	with := func(change func(env map[string]any)) map[string]any {
		env := envelope("e-bad", "alice", "bob", contract.ContentA2AMessage, map[string]any{"content": "x"})
		change(env)
		return env
	}
	before := envelopeState(t, app)
	big := strings.Repeat("x", contract.MaxEnvelopePayloadBytes)
	cases := []struct {
		name   string
		body   any
		status int
		code   string
		field  string
	}{
		{"version 1.3", with(func(e map[string]any) { e["version"] = "1.3" }), 400, contract.CodeVersionNotSupported, "version"},
		{"version 2.0", with(func(e map[string]any) { e["version"] = "2.0" }), 400, contract.CodeVersionNotSupported, "version"},
		{"ts far in the future", with(func(e map[string]any) {
			e["ts"] = time.Now().Add(5 * time.Minute).UTC().Format(time.RFC3339Nano)
		}), 400, contract.CodeValidationFailed, "ts"},
		{"ts not UTC", with(func(e map[string]any) { e["ts"] = time.Now().Format("2006-01-02T15:04:05+02:00") }), 400, contract.CodeValidationFailed, "ts"},
		{"ts not a time", with(func(e map[string]any) { e["ts"] = "yesterday" }), 400, contract.CodeValidationFailed, "ts"},
		{"ttl_ms 0", with(func(e map[string]any) { e["ttl_ms"] = 0 }), 400, contract.CodeValidationFailed, "ttl_ms"},
		{"ttl_ms over a day", with(func(e map[string]any) { e["ttl_ms"] = contract.MaxEnvelopeTTLMs + 1 }), 400, contract.CodeValidationFailed, "ttl_ms"},
		{"ttl_ms huge", with(func(e map[string]any) { e["ttl_ms"] = 1e300 }), 400, contract.CodeValidationFailed, "ttl_ms"},
		{"payload over 1 MiB", with(func(e map[string]any) {
			e["content_type"] = contract.ContentContextPackage
			e["payload"] = map[string]any{"blob": big}
		}), 413, contract.CodePayloadTooLarge, "payload"},
		{"unknown content type", with(func(e map[string]any) { e["content_type"] = "a2a_poem" }), 400, contract.CodeValidationFailed, "content_type"},
		{"no payload", with(func(e map[string]any) { delete(e, "payload") }), 400, contract.CodeValidationFailed, "payload"},
		{"unknown member", with(func(e map[string]any) { e["tenant_id"] = "other" }), 400, contract.CodeValidationFailed, "tenant_id"},
		{"unknown payload member", with(func(e map[string]any) { e["payload"] = map[string]any{"content": "x", "tenantId": "t"} }), 400, contract.CodeValidationFailed, "payload.tenantId"},
		{"payload fromAgent of another", with(func(e map[string]any) { e["payload"] = map[string]any{"content": "x", "fromAgent": "mallory"} }), 403, contract.CodeScopeForbidden, "payload.fromAgent"},
		{"payload toAgent other than to", with(func(e map[string]any) { e["payload"] = map[string]any{"content": "x", "toAgent": "carol"} }), 400, contract.CodeValidationFailed, "payload.toAgent"},
		{"payload content empty", with(func(e map[string]any) { e["payload"] = map[string]any{"content": ""} }), 400, contract.CodeValidationFailed, "payload.content"},
		{"task without description", with(func(e map[string]any) {
			e["content_type"] = contract.ContentA2ATask
			e["payload"] = map[string]any{"id": "t-x"}
		}), 400, contract.CodeValidationFailed, "payload.description"},
		{"message_id invalid", with(func(e map[string]any) { e["message_id"] = "has space" }), 400, contract.CodeValidationFailed, "message_id"},
		{"expired", with(func(e map[string]any) {
			e["ts"] = time.Now().Add(-2 * time.Second).UTC().Format(time.RFC3339Nano)
			e["ttl_ms"] = 1000
		}), 410, contract.CodeEnvelopeExpired, "ttl_ms"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := alice.post(t, contract.RouteA2AHandoff, tc.body).requireError(t, tc.status, tc.code)
			require.Equal(t, tc.field, e.Details["field"], "%v", e.Details)
			if tc.code == contract.CodeVersionNotSupported {
				require.Equal(t, []any{"1.0"}, e.Details["supportedVersions"])
			}
		})
	}
	require.Equal(t, before, envelopeState(t, app))

	// Without a2a:send the route is closed before the body is read.
	reader := tokenAgent(app, m, "alice", contract.CapA2ARead)
	reader.post(t, contract.RouteA2AHandoff, "not json").requireError(t, http.StatusForbidden, contract.CodeTokenForbidden)
}
