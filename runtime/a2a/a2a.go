package a2a

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// Stores are the stores of agent-to-agent coordination.
type Stores struct {
	Agents        AgentStore
	AgentMessages AgentMessageStore
	Tasks         TaskStore
	Events        runtime.EventStore
	// Envelopes are the idempotency records of POST /handoff.
	Envelopes EnvelopeStore
	// Push keeps push notification configs; Jobs enqueues their deliveries.
	Push PushStore
	Jobs runtime.JobQueue
}

// Config configures the agent-to-agent use cases.
type Config struct {
	DB runtime.UnitOfWork[Stores]
	// Cursors signs list and poll cursors.
	Cursors *runtime.CursorCodec
	// Notifier wakes long polls when events commit; nil turns waitMs into no wait.
	Notifier runtime.EventNotifier
	Clock    runtime.Clock
	// MaxMessages bounds the live messages of a scope (default
	// contract.DefaultA2AMaxMessages); the oldest go first when it is full.
	MaxMessages int
	// MaxEnvelopes bounds the stored handoff_bundle and context_package payloads of a
	// scope (default contract.DefaultA2AMaxEnvelopes), and MaxEnvelopeBytes their
	// bytes (default contract.DefaultA2AMaxEnvelopeBytes); the oldest go first.
	MaxEnvelopes     int
	MaxEnvelopeBytes int64
	// TaskRetention is how long terminal tasks are kept (default 72 h).
	TaskRetention time.Duration
	// EventRetention is how long events are kept (default 7 days).
	EventRetention time.Duration
	// SweepBatch bounds the rows one purge statement of the sweeper deletes (default
	// 1000).
	SweepBatch int
	// Peers holds the pinned Ed25519 keys of peers that sign envelopes; nil has none.
	Peers PeerKeys
	// HMACKeys are the HMAC-SHA256 envelope keys by key ID
	// (AGENT_CONTEXT_A2A_HMAC_KEYS), each bound to agents and maybe tenants.
	HMACKeys map[string]HMACKey
	// RequireSigned refuses unsigned envelopes even from their own sender.
	RequireSigned bool
	// DefaultAgent receives tasks created through POST /a2a without
	// metadata.toAgent (AGENT_CONTEXT_A2A_DEFAULT_AGENT); empty has none.
	DefaultAgent string
	// Artifacts stores snapshots requested with write: true as export artifacts
	// (nil: such a request is refused); Exports does.
	Artifacts SnapshotArtifacts
	// Webhooks reach push notification URLs (nil: configs are refused);
	// PushBody shapes what they receive.
	Webhooks Webhooks
	PushBody PushBody
	// MaxWaitersPerTenant bounds a tenant's open streams and long polls on this
	// replica (AGENT_CONTEXT_MAX_WAITERS_PER_TENANT; default
	// runtime.DefaultMaxWaitersPerTenant).
	MaxWaitersPerTenant int
}

// SnapshotArtifacts stores an A2A snapshot document as an export artifact and returns
// its ID; request is echoed by the artifact's operation.
type SnapshotArtifacts interface {
	StoreSnapshot(ctx context.Context, scope runtime.Scope, data []byte, request any) (string, error)
}

// Defaults of Config.
const (
	DefaultA2ATaskRetention  = 72 * time.Hour
	DefaultA2AEventRetention = 7 * 24 * time.Hour
	DefaultA2ASweepBatch     = 1000
)

// service is what every use case of agent-to-agent coordination works with: the
// stores, the settings and the helpers the concepts share. Every change commits
// together with the event that announces it.
type service struct {
	db             runtime.UnitOfWork[Stores]
	stores         Stores
	cursors        *runtime.CursorCodec
	notifier       runtime.EventNotifier
	waiters        *runtime.Waiters
	feeds          scopeFeeds
	clock          runtime.Clock
	maxMessages    int
	envelopeBounds EnvelopeBounds
	taskRetention  time.Duration
	eventRetention time.Duration
	sweepBatch     int
	peers          PeerKeys
	hmacKeys       map[string]HMACKey
	requireSigned  bool
	defaultAgent   string
	artifacts      SnapshotArtifacts
	webhooks       Webhooks
	pushBody       PushBody
}

func newService(cfg Config) *service {
	a := &service{db: cfg.DB, stores: cfg.DB.Stores(), cursors: cfg.Cursors, notifier: cfg.Notifier,
		waiters: runtime.NewWaiters(cfg.MaxWaitersPerTenant), clock: cfg.Clock,
		maxMessages: cfg.MaxMessages, taskRetention: cfg.TaskRetention, eventRetention: cfg.EventRetention,
		sweepBatch: cfg.SweepBatch, peers: cfg.Peers, hmacKeys: cfg.HMACKeys, requireSigned: cfg.RequireSigned,
		defaultAgent: cfg.DefaultAgent, artifacts: cfg.Artifacts, webhooks: cfg.Webhooks, pushBody: cfg.PushBody}
	if a.clock == nil {
		a.clock = runtime.SystemClock{}
	}
	a.envelopeBounds = EnvelopeBounds{MaxPayloads: cfg.MaxEnvelopes, MaxBytes: cfg.MaxEnvelopeBytes}
	if a.envelopeBounds.MaxPayloads <= 0 {
		a.envelopeBounds.MaxPayloads = contract.DefaultA2AMaxEnvelopes
	}
	if a.envelopeBounds.MaxBytes <= 0 {
		a.envelopeBounds.MaxBytes = contract.DefaultA2AMaxEnvelopeBytes
	}
	if a.maxMessages <= 0 {
		a.maxMessages = contract.DefaultA2AMaxMessages
	}
	if a.taskRetention <= 0 {
		a.taskRetention = DefaultA2ATaskRetention
	}
	if a.eventRetention <= 0 {
		a.eventRetention = DefaultA2AEventRetention
	}
	if a.sweepBatch <= 0 {
		a.sweepBatch = DefaultA2ASweepBatch
	}
	return a
}

// Coordination is agent-to-agent coordination (docs/a2a.md), by concept: each door
// takes the concepts it serves.
type Coordination struct {
	Agents    *Agents
	Messages  *Messages
	Tasks     *Tasks
	Events    *Events
	Envelopes *Envelopes
	Protocol  *Protocol
	Push      *PushDeliveries
	Snapshots *Snapshots
	Sweeper   *Sweeper
}

// NewCoordination returns the A2A use cases of cfg, by concept.
func NewCoordination(cfg Config) *Coordination {
	s := newService(cfg)
	tasks := &Tasks{s}
	return &Coordination{Agents: &Agents{s}, Messages: &Messages{s}, Tasks: tasks, Events: &Events{s},
		Envelopes: &Envelopes{s}, Protocol: &Protocol{service: s, tasks: tasks}, Push: &PushDeliveries{s},
		Snapshots: &Snapshots{s}, Sweeper: &Sweeper{s}}
}

// Agents registers and lists the agents of a scope.
type Agents struct{ *service }

// Messages posts and reads the messages agents send each other.
type Messages struct{ *service }

// Tasks creates, reads, changes and lists the tasks agents give each other.
type Tasks struct{ *service }

// Events serves the event log: long polls and the following of one task.
type Events struct{ *service }

// Envelopes takes signed cross-boundary envelopes (POST /handoff).
type Envelopes struct{ *service }

// Protocol serves Google A2A: a message that starts or continues a task, and the
// push notification configs of a task.
type Protocol struct {
	*service
	tasks *Tasks
}

// PushDeliveries delivers push notifications (the job queue's push worker).
type PushDeliveries struct{ *service }

// Snapshots exports a scope's coordination state.
type Snapshots struct{ *service }

// Sweeper purges messages, events and tasks that outlived their retention.
type Sweeper struct{ *service }

func (a *service) nowMs() int64 { return a.clock.Now().UnixMilli() }

// sender returns who sends a message or creates a task: the caller's subject, or, for
// a caller admitted by trusted headers (static token, open mode), the agent fromAgent
// names. A runtime token's caller naming anyone else is SCOPE_FORBIDDEN.
func sender(p runtime.Principal, fromAgent *string) (string, error) {
	if fromAgent == nil {
		return p.Subject, nil
	}
	if err := runtime.ValidateID("fromAgent", *fromAgent); err != nil {
		return "", err
	}
	if *fromAgent != p.Subject && !p.TrustedHeaders {
		return "", runtime.Errorf(contract.CodeScopeForbidden, "fromAgent must be the caller's own identity").
			With("field", "fromAgent")
	}
	return *fromAgent, nil
}

// requireAdmin refuses a caller without a2a:admin, naming it, as the capability check
// of a route does.
func requireAdmin(p runtime.Principal) error {
	if p.Can(contract.CapA2AAdmin) {
		return nil
	}
	return runtime.Forbidden(contract.CapA2AAdmin)
}

// optionalID validates an optional ID member; nil is absent.
func optionalID(field string, id *string) error {
	if id == nil {
		return nil
	}
	return runtime.ValidateID(field, *id)
}

// enumOr returns v, or def when v is nil; a value outside values is 400 (no silent
// fallback).
func enumOr(field string, v *string, def string, values []string) (string, error) {
	if v == nil {
		return def, nil
	}
	if !slices.Contains(values, *v) {
		return "", runtime.OneOf(field, values)
	}
	return *v, nil
}

// validateText checks a free text member: at most maxBytes bytes (413), no NUL (which
// Postgres text cannot hold), and, when required, at least one byte.
func validateText(field, v string, maxBytes int, required bool) error {
	if required && v == "" {
		return runtime.Invalid(field, "%s must not be empty", field)
	}
	if len(v) > maxBytes {
		return runtime.TooLarge(field, int64(maxBytes))
	}
	if strings.IndexByte(v, 0) >= 0 {
		return runtime.Invalid(field, "%s must not contain NUL characters", field)
	}
	return nil
}

// validateLabels checks a list of short labels (capabilities, versions): at most
// contract.MaxAgentLabels, each a label of at most MaxIDChars characters.
func validateLabels(field string, labels []string) ([]string, error) {
	if len(labels) > contract.MaxAgentLabels {
		return nil, runtime.TooMany(field, contract.MaxAgentLabels, "%s holds at most %d entries", field, contract.MaxAgentLabels)
	}
	for i, l := range labels {
		if err := runtime.ValidateLabel(field+"["+strconv.Itoa(i)+"]", l, contract.MaxIDChars); err != nil {
			return nil, err
		}
		if strings.IndexFunc(l, unicode.IsSpace) >= 0 {
			return nil, runtime.Invalid(field+"["+strconv.Itoa(i)+"]", "%s entries must not contain whitespace", field)
		}
	}
	if labels == nil {
		return []string{}, nil
	}
	return slices.Clone(labels), nil
}
