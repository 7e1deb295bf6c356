package contract

import "encoding/json"

// Routes of cross-boundary envelopes (docs/a2a-protocol.md).
var (
	RouteA2AHandoff  = Route{MethodPost, PrefixA2A + "/handoff", []string{CapA2ASend}}
	RouteA2AVersions = Route{MethodGet, PrefixA2A + "/versions", []string{CapA2ARead}}
)

// Envelope content types.
const (
	ContentA2AMessage     = "a2a_message"
	ContentA2ATask        = "a2a_task"
	ContentHandoffBundle  = "handoff_bundle"
	ContentContextPackage = "context_package"
)

// EnvelopeContentTypes are the content types an envelope may carry.
var EnvelopeContentTypes = []string{ContentA2AMessage, ContentA2ATask, ContentHandoffBundle, ContentContextPackage}

// Envelope signature algorithms: the first part of Envelope.Signature.
const (
	SignatureEd25519    = "ed25519"
	SignatureHMACSHA256 = "hmac-sha256"
)

// Limits of envelopes.
const (
	// MaxEnvelopePayloadBytes bounds an envelope's payload, as compact JSON (413).
	MaxEnvelopePayloadBytes = 1 << 20
	// MaxEnvelopeTTLMs is the largest ttl_ms (a day); the smallest is 1.
	MaxEnvelopeTTLMs = 86_400_000
	// MaxEnvelopeFutureMs is how far ts may lie in the future (clock skew).
	MaxEnvelopeFutureMs = 60_000
)

// Envelope is the stable cross-boundary envelope of POST /handoff. Unlike the rest of
// the API its members are snake_case: peers outside this service produce it, in the
// seed's shape. Ts is RFC 3339 UTC. Signature is "<alg>:<keyId>:<base64url value>"
// over the RFC 8785 canonical JSON of the envelope without its signature member.
// CorrelationID defaults to MessageID.
type Envelope struct {
	MessageID     string          `json:"message_id"`
	CorrelationID *string         `json:"correlation_id,omitempty"`
	From          string          `json:"from"`
	To            string          `json:"to"`
	Ts            string          `json:"ts"`
	TTLMs         int64           `json:"ttl_ms"`
	Version       string          `json:"version"`
	ContentType   string          `json:"content_type"`
	Payload       json.RawMessage `json:"payload"`
	// Tenant and Project, when present, must equal the receiving caller's scope:
	// they bind a signed envelope to where it may land.
	Tenant    *string `json:"tenant,omitempty"`
	Project   *string `json:"project,omitempty"`
	Signature *string `json:"signature,omitempty"`
}

// A2AVersions is the answer of GET /versions.
type A2AVersions struct {
	SupportedVersions []string `json:"supportedVersions"`
}
