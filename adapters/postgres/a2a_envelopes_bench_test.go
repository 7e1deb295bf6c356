package postgres_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
)

// benchPeers pins one Ed25519 key of agent-a.
type benchPeers struct{ key ed25519.PublicKey }

func (p benchPeers) Ed25519Key(agent, keyID string) (a2a.PeerKey, bool) {
	return a2a.PeerKey{Public: p.key}, agent == "agent-a" && keyID == "k1"
}

// signedEnvelopes returns n distinct envelopes from agent-a to bob signed with priv.
func signedEnvelopes(b *testing.B, priv ed25519.PrivateKey, n int) [][]byte {
	out := make([][]byte, n)
	ts := time.Now().UTC().Format(time.RFC3339Nano)
	for i := range out {
		raw, err := json.Marshal(map[string]any{"message_id": fmt.Sprintf("m-%d", i), "from": "agent-a", "to": "bob",
			"ts": ts, "ttl_ms": contract.MaxEnvelopeTTLMs, "version": "1.0", "content_type": contract.ContentA2AMessage,
			"payload": map[string]any{"content": "please review the design of the envelope path", "category": "handoff"}})
		require.NoError(b, err)
		out[i], err = a2a.SignEnvelope(raw, contract.SignatureEd25519, "k1", func(m []byte) []byte { return ed25519.Sign(priv, m) })
		require.NoError(b, err)
	}
	return out
}

// BenchmarkHandoffSigned accepts Ed25519-signed a2a_message envelopes through the use
// case over Postgres: canonical JSON, the signature, the checks, and one unit of work
// with the idempotency record, the message and two events. BenchmarkEd25519Verify is
// the baseline: the bare ed25519.Verify of the same signing input.
func BenchmarkHandoffSigned(b *testing.B) {
	seed := sha256.Sum256([]byte("bench"))
	priv := ed25519.NewKeyFromSeed(seed[:])
	db := newDB(b, pgtest.NewDB(b))
	coord := a2a.NewCoordination(a2a.Config{DB: db.A2A(), Cursors: runtime.NewCursorCodec(make([]byte, 32)),
		Peers: benchPeers{key: priv.Public().(ed25519.PublicKey)}})
	p := runtime.Principal{Scope: runtime.Scope{TenantID: "t", ProjectID: "p"}, Subject: "gateway",
		Capabilities: map[string]bool{contract.CapA2ASend: true}}
	envs := signedEnvelopes(b, priv, b.N)
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		ack, err := coord.Envelopes.Handoff(ctx, p, &a2a.Handoff{Raw: envs[i], Decode: json.Unmarshal})
		if err != nil || ack.Status != contract.AckAccepted {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "envelopes/s")
}

func BenchmarkEd25519Verify(b *testing.B) {
	seed := sha256.Sum256([]byte("bench"))
	priv := ed25519.NewKeyFromSeed(seed[:])
	env := signedEnvelopes(b, priv, 1)[0]
	input, err := a2a.EnvelopeSigningInput(env)
	require.NoError(b, err)
	sig := ed25519.Sign(priv, input)
	pub := priv.Public().(ed25519.PublicKey)
	b.ResetTimer()
	for range b.N {
		if !ed25519.Verify(pub, input, sig) {
			b.Fatal("does not verify")
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "envelopes/s")
}
