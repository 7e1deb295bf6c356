package a2a

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// PeerKeys is the pinned registry of peers' Ed25519 public keys
// (AGENT_CONTEXT_A2A_PEERS_FILE), read locally, never fetched per request.
type PeerKeys interface {
	// Ed25519Key returns agent's public key keyID; false when agent has no such key
	// (a key of another agent included).
	Ed25519Key(agent, keyID string) (PeerKey, bool)
}

// PeerKey is a peer's Ed25519 public key and the tenants it may be used in.
type PeerKey struct {
	Public ed25519.PublicKey
	// Tenants lists the tenants an envelope signed with the key may land in; nil is
	// any tenant.
	Tenants []string
}

// HMACKey is an HMAC-SHA256 envelope key (AGENT_CONTEXT_A2A_HMAC_KEYS): the UTF-8
// bytes of its secret and where it may be used. Unlike a peer key, which belongs to
// one agent, a shared secret names the agents whose envelopes it may sign, so a holder
// cannot sign as anyone else.
type HMACKey struct {
	Secret []byte
	// Agents are the envelope senders (from) the key may sign for; never empty.
	Agents []string
	// Tenants lists the tenants an envelope signed with the key may land in; nil is
	// any tenant.
	Tenants []string
}

// allows reports whether tenants (nil: any) admits tenant.
func allows(tenants []string, tenant string) bool {
	return tenants == nil || slices.Contains(tenants, tenant)
}

// EnvelopeRecord is an accepted envelope as the idempotency record keeps it: its
// digest (so a replay is told from a different envelope of the same message_id), the
// first ack's time, and, for opaque content types, the payload.
type EnvelopeRecord struct {
	MessageID     string
	CorrelationID string
	From          string
	To            string
	ContentType   string
	Digest        string
	// Payload is stored for handoff_bundle and context_package only.
	Payload      json.RawMessage
	AcceptedAtMs int64
	// ExpiresAtMs is ts + ttl_ms: after it a replay executes nothing anyway.
	ExpiresAtMs int64
}

// EnvelopeBounds bound the handoff_bundle and context_package payloads a scope keeps
// (docs/a2a-protocol.md): their number and their bytes (compact JSON); the oldest go
// first.
type EnvelopeBounds struct {
	MaxPayloads int
	MaxBytes    int64
}

// EnvelopeStore keeps the envelopes POST /handoff accepted.
type EnvelopeStore interface {
	// CreateEnvelope stores e unless an envelope with its message ID exists; then it
	// stores nothing and returns that one. A concurrent create of the same ID waits
	// for the first to commit. Errors: SERVICE_UNAVAILABLE.
	// A stored payload counts against bounds: while the scope holds more payloads or
	// bytes of them, the oldest payloads are dropped (their records stay).
	CreateEnvelope(ctx context.Context, scope runtime.Scope, e *EnvelopeRecord, bounds EnvelopeBounds) (stored EnvelopeRecord, created bool, err error)
	// GetEnvelope returns the envelope with messageID. Errors: NOT_FOUND,
	// SERVICE_UNAVAILABLE.
	GetEnvelope(ctx context.Context, scope runtime.Scope, messageID string) (EnvelopeRecord, error)
	// PurgeEnvelopes deletes up to limit envelopes that expired before expiredBeforeMs
	// and were accepted before acceptedBeforeMs, and reports how many. Errors:
	// SERVICE_UNAVAILABLE.
	PurgeEnvelopes(ctx context.Context, scope runtime.Scope, expiredBeforeMs, acceptedBeforeMs int64, limit int) (int, error)
}

// Handoff is one envelope to accept: the body it came in, a JSON object whose syntax
// the transport checked (the signature covers its canonical form), and the
// transport's strict decoder, for the envelope and then its payload.
type Handoff struct {
	Raw []byte
	// Decode decodes data into v, refusing what a REST route would refuse (unknown,
	// duplicate or miscased members); its errors name the offending field.
	Decode func(data []byte, v any) error
}

// Handoff verifies and accepts an envelope (docs/a2a-protocol.md): the signature (or,
// unsigned, that the caller is its sender) over the bytes received, before anything
// else is read from them; then the envelope's members, the version, the times, and, in
// one unit of work, the idempotency record, what the content type asks for (a message,
// a task, or the opaque payload stored) and the envelope_received event. A replay of
// an accepted message_id returns the first ack as a duplicate and executes nothing; an
// expired envelope executes nothing.
func (a *Envelopes) Handoff(ctx context.Context, p runtime.Principal, h *Handoff) (*contract.MessageAck, error) {
	claims, err := readEnvelopeClaims(h.Raw)
	if err != nil {
		return nil, runtime.Invalid("body", "the envelope has no canonical JSON form")
	}
	if err := a.verifyEnvelope(p, claims); err != nil {
		return nil, err
	}
	env := new(contract.Envelope)
	if err := h.Decode(h.Raw, env); err != nil {
		return nil, err
	}
	// A signed envelope is bound to the scope it names, so one captured in a tenant
	// cannot be replayed into another (idempotency is per scope).
	if (env.Tenant != nil && *env.Tenant != p.TenantID) || (env.Project != nil && *env.Project != p.ProjectID) {
		return nil, signatureInvalid("the envelope is bound to another tenant or project")
	}
	rec, tsMs, err := validateEnvelope(env, claims.input, a.nowMs())
	if err != nil {
		return nil, err
	}
	now := a.nowMs()
	if now > rec.ExpiresAtMs {
		// Only a replay of what was accepted in time has an answer other than 410.
		stored, err := a.stores.Envelopes.GetEnvelope(ctx, p.Scope, rec.MessageID)
		if runtime.ErrorCode(err) == contract.CodeNotFound {
			return nil, runtime.Errorf(contract.CodeEnvelopeExpired, "the envelope expired: ts + ttl_ms has passed").
				With("field", "ttl_ms").With("expiredAtMs", tsMs+env.TTLMs)
		}
		if err != nil {
			return nil, err
		}
		return duplicateAck(&rec, &stored)
	}
	// The sender of what the envelope carries is its from, proven by the signature
	// or by being the caller.
	from := runtime.Principal{Scope: p.Scope, Subject: rec.From, Capabilities: p.Capabilities}
	var msg *contract.AgentMessage
	var task *NewTask
	switch rec.ContentType {
	case contract.ContentA2AMessage:
		if msg, err = envelopeMessage(from, &rec, env.Payload, h.Decode); err != nil {
			return nil, err
		}
	case contract.ContentA2ATask:
		if task, err = envelopeTask(from, &rec, env.Payload, h.Decode); err != nil {
			return nil, err
		}
		stampTask(&task.Task, now)
	default:
		rec.Payload = env.Payload
	}
	rec.AcceptedAtMs = now
	var ack *contract.MessageAck
	err = a.db.WithinTx(ctx, func(ctx context.Context, tx Stores) error {
		stored, created, err := tx.Envelopes.CreateEnvelope(ctx, p.Scope, &rec, a.envelopeBounds)
		if err != nil {
			return err
		}
		if !created {
			ack, err = duplicateAck(&rec, &stored)
			return err
		}
		result := envelopeResult{MessageID: rec.MessageID, ContentType: rec.ContentType, From: rec.From, To: rec.To}
		switch {
		case msg != nil:
			if _, err := a.postMessage(ctx, tx, p.Scope, msg, now); err != nil {
				return err
			}
			result.AgentMessageID = &msg.ID
		case task != nil:
			if _, _, err := createTask(ctx, tx, p.Scope, rec.From, task); err != nil {
				if errors.Is(err, errTaskExists) {
					return runtime.Errorf(contract.CodeConflict, "a task with this ID exists").
						With("field", "payload.id").With("reason", "task_exists")
				}
				return err
			}
			result.TaskID = &task.Task.ID
		}
		e := runtime.EventOf(contract.EventEnvelopeReceived, rec.From, rec.CorrelationID, contract.ConsistencyStrong,
			runtime.Participants(rec.From, rec.To), result, now)
		if task != nil {
			e.TaskID = task.Task.ID
		}
		if _, err := tx.Events.AppendEvents(ctx, p.Scope, []runtime.NewEvent{e}); err != nil {
			return err
		}
		ack = &contract.MessageAck{MessageID: rec.MessageID, Status: contract.AckAccepted, Ts: now}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ack, nil
}

// envelopeResult is the payload of an envelope_received event: IDs, never content.
type envelopeResult struct {
	MessageID      string  `json:"messageId"`
	ContentType    string  `json:"contentType"`
	From           string  `json:"from"`
	To             string  `json:"to"`
	AgentMessageID *string `json:"agentMessageId,omitempty"`
	TaskID         *string `json:"taskId,omitempty"`
}

// duplicateAck answers a replay: the first ack as a duplicate when the envelope is the
// same (its signature aside), IDEMPOTENCY_CONFLICT when it differs.
func duplicateAck(rec, stored *EnvelopeRecord) (*contract.MessageAck, error) {
	if rec.Digest != stored.Digest {
		return nil, runtime.IdempotencyConflict(rec.MessageID)
	}
	return &contract.MessageAck{MessageID: stored.MessageID, Status: contract.AckDuplicate, Ts: stored.AcceptedAtMs}, nil
}

// SupportedVersions answers GET /versions.
func (a *Envelopes) SupportedVersions() *contract.A2AVersions {
	return &contract.A2AVersions{SupportedVersions: slices.Clone(contract.SupportedA2AVersions)}
}

func signatureInvalid(msg string) error {
	return runtime.Errorf(contract.CodeSignatureInvalid, "%s", msg)
}

// verifyEnvelope checks the signature: Ed25519 with a pinned key of the agent the
// envelope names in from, or HMAC-SHA256 with a configured key bound to that agent;
// either key must admit the caller's tenant. An unsigned envelope passes only when the
// caller is its sender and signatures are not required. Every failure is the same
// SIGNATURE_INVALID, naming no key.
func (a *service) verifyEnvelope(p runtime.Principal, c envelopeClaims) error {
	if c.signature == nil {
		if a.requireSigned || c.from != p.Subject {
			return signatureInvalid("the envelope must be signed")
		}
		return nil
	}
	alg, keyID, value, ok := ParseSignature(*c.signature)
	if !ok {
		return signatureInvalid("the signature is malformed")
	}
	sig, err := base64.RawURLEncoding.Strict().DecodeString(value)
	if err != nil {
		return signatureInvalid("the signature is malformed")
	}
	switch alg {
	case contract.SignatureEd25519:
		if a.peers == nil {
			return signatureInvalid("the signature does not verify")
		}
		key, found := a.peers.Ed25519Key(c.from, keyID)
		if !found || len(sig) != ed25519.SignatureSize || !ed25519.Verify(key.Public, c.input, sig) {
			return signatureInvalid("the signature does not verify")
		}
		if !allows(key.Tenants, p.TenantID) {
			return signatureInvalid("the key is not bound to this tenant")
		}
	case contract.SignatureHMACSHA256:
		key, found := a.hmacKeys[keyID]
		if !found || !hmac.Equal(sig, hmacSHA256(key.Secret, c.input)) {
			return signatureInvalid("the signature does not verify")
		}
		if !slices.Contains(key.Agents, c.from) || !allows(key.Tenants, p.TenantID) {
			return signatureInvalid("the key is not bound to this sender or tenant")
		}
	default:
		return signatureInvalid("the signature algorithm is not supported")
	}
	return nil
}

func hmacSHA256(secret, msg []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write(msg)
	return m.Sum(nil)
}

// ParseSignature splits "<alg>:<keyId>:<value>".
func ParseSignature(s string) (alg, keyID, value string, ok bool) {
	alg, rest, ok1 := strings.Cut(s, ":")
	keyID, value, ok2 := strings.Cut(rest, ":")
	return alg, keyID, value, ok1 && ok2 && alg != "" && keyID != "" && value != ""
}

// EnvelopeSigningInput returns what an envelope's signature covers: the RFC 8785
// canonical JSON of the envelope object raw with its signature member removed.
func EnvelopeSigningInput(raw []byte) ([]byte, error) {
	c, err := readEnvelopeClaims(raw)
	return c.input, err
}

// envelopeClaims is what the signature check reads from an envelope before it is
// decoded: the signing input, the sender it claims and its signature (nil when the
// member is absent or null; a signature that is not a string reads as "", malformed).
type envelopeClaims struct {
	input     []byte
	from      string
	signature *string
}

func readEnvelopeClaims(raw []byte) (envelopeClaims, error) {
	var c envelopeClaims
	var members map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&members); err != nil || members == nil {
		return c, errors.New("the envelope is not a JSON object")
	}
	if sig, ok := members["signature"]; ok && string(sig) != "null" {
		c.signature = new(string)
		_ = json.Unmarshal(sig, c.signature)
	}
	_ = json.Unmarshal(members["from"], &c.from)
	delete(members, "signature")
	unsigned, err := json.Marshal(members)
	if err != nil {
		return c, err
	}
	c.input, err = runtime.CanonicalJSON(unsigned)
	return c, err
}

// SignEnvelope returns the envelope object raw signed, in canonical form: its members
// without any old signature, plus signature "<alg>:<keyID>:<value>", where value is
// what sign returns for the signing input, base64url without padding.
func SignEnvelope(raw []byte, alg, keyID string, sign func(msg []byte) []byte) ([]byte, error) {
	msg, err := EnvelopeSigningInput(raw)
	if err != nil {
		return nil, err
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(msg, &members); err != nil {
		return nil, err
	}
	if members["signature"], err = json.Marshal(alg + ":" + keyID + ":" + base64.RawURLEncoding.EncodeToString(sign(msg))); err != nil {
		return nil, err
	}
	signed, err := json.Marshal(members)
	if err != nil {
		return nil, err
	}
	return runtime.CanonicalJSON(signed)
}

// HMACSigner signs with HMAC-SHA256 under secret, for SignEnvelope.
func HMACSigner(secret []byte) func(msg []byte) []byte {
	return func(msg []byte) []byte { return hmacSHA256(secret, msg) }
}

// validateEnvelope checks an envelope's members and returns its idempotency record
// (times unset but ExpiresAtMs) and ts in milliseconds. input is its signing input.
func validateEnvelope(env *contract.Envelope, input []byte, now int64) (EnvelopeRecord, int64, error) {
	var rec EnvelopeRecord
	if !supportedVersion(env.Version) {
		return rec, 0, runtime.Errorf(contract.CodeVersionNotSupported, "envelope version %q is not supported", env.Version).
			With("field", "version").With("supportedVersions", slices.Clone(contract.SupportedA2AVersions))
	}
	for _, f := range []struct{ name, v string }{{"message_id", env.MessageID}, {"from", env.From}, {"to", env.To}} {
		if err := runtime.ValidateID(f.name, f.v); err != nil {
			return rec, 0, err
		}
	}
	rec.MessageID, rec.From, rec.To, rec.CorrelationID = env.MessageID, env.From, env.To, env.MessageID
	if env.CorrelationID != nil {
		if err := runtime.ValidateID("correlation_id", *env.CorrelationID); err != nil {
			return rec, 0, err
		}
		rec.CorrelationID = *env.CorrelationID
	}
	ts, err := time.Parse(time.RFC3339Nano, env.Ts)
	if _, offset := ts.Zone(); err != nil || offset != 0 {
		return rec, 0, runtime.Invalid("ts", "ts must be an RFC 3339 time in UTC")
	}
	tsMs := ts.UnixMilli()
	if tsMs > now+contract.MaxEnvelopeFutureMs {
		return rec, 0, runtime.Invalid("ts", "ts lies more than %d ms in the future", contract.MaxEnvelopeFutureMs).
			With("limit", contract.MaxEnvelopeFutureMs)
	}
	if env.TTLMs < 1 || env.TTLMs > contract.MaxEnvelopeTTLMs {
		return rec, 0, runtime.TooMany("ttl_ms", contract.MaxEnvelopeTTLMs, "ttl_ms must be between 1 and %d", contract.MaxEnvelopeTTLMs).
			With("minimum", 1)
	}
	rec.ExpiresAtMs = tsMs + env.TTLMs
	if !slices.Contains(contract.EnvelopeContentTypes, env.ContentType) {
		return rec, 0, runtime.OneOf("content_type", contract.EnvelopeContentTypes)
	}
	rec.ContentType = env.ContentType
	if len(env.Payload) == 0 || string(env.Payload) == "null" {
		return rec, 0, runtime.Invalid("payload", "payload is required")
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, env.Payload); err != nil {
		return rec, 0, runtime.Invalid("payload", "payload is not valid JSON")
	}
	if compact.Len() > contract.MaxEnvelopePayloadBytes {
		return rec, 0, runtime.TooLarge("payload", contract.MaxEnvelopePayloadBytes)
	}
	if !runtime.FiniteNumbers(compact.Bytes()) {
		return rec, 0, runtime.Invalid("payload", "payload holds a number beyond the range of a double")
	}
	env.Payload = compact.Bytes()
	sum := sha256.Sum256(input)
	rec.Digest = hex.EncodeToString(sum[:])
	return rec, tsMs, nil
}

// supportedVersion reports whether v is a version this service speaks: one of
// contract.SupportedA2AVersions, or a patch of one ("1.0.2" of "1.0").
func supportedVersion(v string) bool {
	for _, s := range contract.SupportedA2AVersions {
		if v == s {
			return true
		}
		if patch, ok := strings.CutPrefix(v, s+"."); ok && patch != "" && strings.Trim(patch, "0123456789") == "" {
			return true
		}
	}
	return false
}

// envelopeMessage decodes and validates an a2a_message payload: a message post body
// sent by the envelope's from, addressed to its to, whose messageId and correlationId
// default to the envelope's.
func envelopeMessage(from runtime.Principal, rec *EnvelopeRecord, payload []byte, decode func([]byte, any) error) (*contract.AgentMessage, error) {
	var req contract.PostMessageRequest
	if err := decode(payload, &req); err != nil {
		return nil, payloadError(err)
	}
	if req.ToAgent != nil && *req.ToAgent != rec.To {
		return nil, runtime.Invalid("payload.toAgent", "payload.toAgent must equal the envelope's to")
	}
	req.ToAgent = &rec.To
	if req.MessageID == nil {
		req.MessageID = &rec.MessageID
	}
	if req.CorrelationID == nil {
		req.CorrelationID = &rec.CorrelationID
	}
	m, err := validateAgentMessage(from, &req)
	if err != nil {
		return nil, payloadError(err)
	}
	return &m, nil
}

// envelopeTask decodes and validates an a2a_task payload: a task create body by the
// envelope's from for its to.
func envelopeTask(from runtime.Principal, rec *EnvelopeRecord, payload []byte, decode func([]byte, any) error) (*NewTask, error) {
	var req contract.CreateTaskRequest
	if err := decode(payload, &req); err != nil {
		return nil, payloadError(err)
	}
	if req.ToAgent != "" && req.ToAgent != rec.To {
		return nil, runtime.Invalid("payload.toAgent", "payload.toAgent must equal the envelope's to")
	}
	req.ToAgent = rec.To
	t, digest, size, err := validateTask(from, &req)
	if err != nil {
		return nil, payloadError(err)
	}
	return &NewTask{Task: t, CreateDigest: digest, PartsBytes: size}, nil
}

// payloadError moves the field a validation error names under payload; "body" (the
// payload as a whole, to the decoder) becomes "payload".
func payloadError(err error) error {
	var e *runtime.Error
	if errors.As(err, &e) {
		switch field, _ := e.Details["field"].(string); {
		case field == "body":
			e.Details["field"] = "payload"
		case field != "" && !strings.HasPrefix(field, "payload."):
			e.Details["field"] = "payload." + field
		}
	}
	return err
}
