package a2a

import (
	"context"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// AgentMessageQuery selects messages for Agent as of NowMs (expired ones are
// invisible). A read (Snapshot false) returns messages addressed to the agent or
// broadcast, never its own, oldest first, only unread ones unless IncludeRead, and
// marks what it returns read when MarkRead. A snapshot returns the newest Limit
// messages the agent may see at all: sent by it, addressed to it, or broadcast, read or
// not, newest first. Private messages always have a recipient, so they reach only
// their sender and recipient either way.
type AgentMessageQuery struct {
	Agent       string
	NowMs       int64
	Limit       int
	Category    string
	TaskID      string
	IncludeRead bool
	MarkRead    bool
	Snapshot    bool
}

// AgentMessageStore keeps the messages agents post to each other.
type AgentMessageStore interface {
	// PostMessage purges the scope's messages expired at nowMs, then stores m unless
	// a message with m.ID exists (then it stores nothing and returns that one), and
	// evicts the oldest messages beyond maxLive. When it stores m it appends announce
	// to the scope's event log in the same statement, as EventStore.AppendEvents
	// would: outside a unit of work a post is then one round trip and one
	// transaction, so the scope's lock is held from the server's first statement to
	// the commit without waiting for the client in between. It reports whether m was
	// stored now. Errors: SERVICE_UNAVAILABLE.
	PostMessage(ctx context.Context, scope runtime.Scope, m *contract.AgentMessage, maxLive int, nowMs int64, announce runtime.NewEvent) (stored contract.AgentMessage, created bool, err error)
	// ReadMessages purges the scope's expired messages and returns those q selects.
	// Concurrent reads of one agent that mark messages read never return the same
	// unread message twice. It runs on its own, never inside a unit of work (its
	// purge takes the scope's lock after the read). Errors: SERVICE_UNAVAILABLE.
	ReadMessages(ctx context.Context, scope runtime.Scope, q AgentMessageQuery) ([]contract.AgentMessage, error)
	// PurgeExpiredMessages deletes up to limit messages expired at nowMs and reports
	// how many it deleted. Errors: SERVICE_UNAVAILABLE.
	PurgeExpiredMessages(ctx context.Context, scope runtime.Scope, nowMs int64, limit int) (int, error)
	// PurgeOrphanMarks deletes up to limit read marks whose message is gone (a read
	// that marked a message while it was being deleted leaves one) and reports how
	// many. Errors: SERVICE_UNAVAILABLE.
	PurgeOrphanMarks(ctx context.Context, scope runtime.Scope, limit int) (int, error)
}

const hourMs = int64(3600 * 1000)

// PostMessage validates and stores a message and appends its message_posted event in
// the same transaction. It answers with a receipt only: a re-post of the same
// messageId and content is a duplicate with no effect; the same messageId with other
// content is IDEMPOTENCY_CONFLICT. A taskId must name a task the sender takes part in
// (NOT_FOUND otherwise, a2a:admin included, as for a change of the task).
func (a *Messages) PostMessage(ctx context.Context, p runtime.Principal, req *contract.PostMessageRequest) (*contract.MessageAck, error) {
	m, err := validateAgentMessage(p, req)
	if err != nil {
		return nil, err
	}
	var ack contract.MessageAck
	if m.TaskID == nil {
		// No unit of work: the store writes the message and its event in one
		// transaction of its own.
		ack, err = a.postMessage(ctx, a.stores, p.Scope, &m, a.nowMs())
	} else {
		// A message of a task is a change of it: its lock and push jobs need a
		// transaction around the post.
		err = a.db.WithinTx(ctx, func(ctx context.Context, tx Stores) error {
			ack, err = a.postMessage(ctx, tx, p.Scope, &m, a.nowMs())
			return err
		})
	}
	if err != nil {
		return nil, err
	}
	return &ack, nil
}

// postMessage stores the validated message m (whose ExpiresAtMs still holds its time to
// live) through stores (a unit of work's, or the pool's), with its message_posted
// event. A message naming a task goes through a unit of work: it locks the task
// (before the scope's head, in the lock order), is refused unless its sender takes
// part in the task, and enqueues the task's push deliveries.
func (a *service) postMessage(ctx context.Context, stores Stores, scope runtime.Scope, m *contract.AgentMessage, now int64) (contract.MessageAck, error) {
	if m.TaskID != nil {
		lt, err := stores.Tasks.LockTask(ctx, scope, *m.TaskID)
		if err != nil {
			return contract.MessageAck{}, err
		}
		if !participant(&lt.Task, m.FromAgent) {
			return contract.MessageAck{}, taskNotFound()
		}
		if err := enqueuePush(ctx, stores, scope, *m.TaskID); err != nil {
			return contract.MessageAck{}, err
		}
	}
	m.CreatedAtMs, m.ExpiresAtMs = now, now+m.ExpiresAtMs
	stored, created, err := stores.AgentMessages.PostMessage(ctx, scope, m, a.maxMessages, now, messagePostedEvent(m))
	if err != nil {
		return contract.MessageAck{}, err
	}
	if !created {
		if !sameAgentMessage(m, &stored) {
			return contract.MessageAck{}, runtime.IdempotencyConflict(m.ID)
		}
		return contract.MessageAck{MessageID: m.ID, Status: contract.AckDuplicate, Ts: stored.CreatedAtMs}, nil
	}
	return contract.MessageAck{MessageID: m.ID, Status: contract.AckAccepted, Ts: now}, nil
}

// validateAgentMessage checks a post and returns the message with its defaults filled
// in; ExpiresAtMs holds the time to live until the caller adds the creation time.
func validateAgentMessage(p runtime.Principal, req *contract.PostMessageRequest) (contract.AgentMessage, error) {
	var m contract.AgentMessage
	var err error
	if m.ID, err = runtime.IDOrNew("messageId", req.MessageID); err != nil {
		return m, err
	}
	m.CorrelationID = m.ID
	if req.CorrelationID != nil {
		if err := runtime.ValidateID("correlationId", *req.CorrelationID); err != nil {
			return m, err
		}
		m.CorrelationID = *req.CorrelationID
	}
	if m.FromAgent, err = sender(p, req.FromAgent); err != nil {
		return m, err
	}
	if err := optionalID("toAgent", req.ToAgent); err != nil {
		return m, err
	}
	if req.ToAgent != nil && *req.ToAgent == m.FromAgent {
		return m, runtime.Invalid("toAgent", "toAgent must be another agent: an agent never reads its own messages")
	}
	m.ToAgent = req.ToAgent
	if err := optionalID("taskId", req.TaskID); err != nil {
		return m, err
	}
	m.TaskID = req.TaskID
	if m.Category, err = enumOr("category", req.Category, contract.CategoryNotification, contract.MessageCategories); err != nil {
		return m, err
	}
	if m.Priority, err = enumOr("priority", req.Priority, contract.PriorityNormal, contract.MessagePriorities); err != nil {
		return m, err
	}
	if m.Privacy, err = enumOr("privacy", req.Privacy, contract.PrivacyTeam, contract.PrivacyLevels); err != nil {
		return m, err
	}
	if m.Privacy == contract.PrivacyPrivate && m.ToAgent == nil {
		return m, runtime.Invalid("toAgent", "a private message needs toAgent: there are no private broadcasts")
	}
	if req.Content == nil {
		return m, runtime.Invalid("content", "content is required")
	}
	if err := validateText("content", *req.Content, contract.MaxAgentMessageContentBytes, true); err != nil {
		return m, err
	}
	m.Content = *req.Content
	ttlHours := int64(contract.DefaultTTLHours)
	if req.TTLHours != nil {
		if *req.TTLHours < 1 || *req.TTLHours > contract.MaxTTLHours {
			return m, runtime.TooMany("ttlHours", contract.MaxTTLHours, "ttlHours must be between 1 and %d", contract.MaxTTLHours).
				With("minimum", 1)
		}
		ttlHours = *req.TTLHours
	}
	m.ExpiresAtMs = ttlHours * hourMs
	if m.Metadata, err = runtime.NormalizeMetadata("metadata", req.Metadata); err != nil {
		return m, err
	}
	return m, nil
}

// sameAgentMessage reports whether a post repeats a stored message: every client field
// equal after normalization, the time to live included.
func sameAgentMessage(m, stored *contract.AgentMessage) bool {
	return m.CorrelationID == stored.CorrelationID && m.FromAgent == stored.FromAgent &&
		runtime.SameOptional(m.ToAgent, stored.ToAgent) && runtime.SameOptional(m.TaskID, stored.TaskID) &&
		m.Category == stored.Category && m.Priority == stored.Priority && m.Privacy == stored.Privacy &&
		m.Content == stored.Content && runtime.SameJSON(m.Metadata, stored.Metadata) &&
		m.ExpiresAtMs-m.CreatedAtMs == stored.ExpiresAtMs-stored.CreatedAtMs
}

// messagePostedEvent announces a message: to its sender and recipient only when it has
// a recipient (as read shows it), to everyone when it is a broadcast.
func messagePostedEvent(m *contract.AgentMessage) runtime.NewEvent {
	var targets []string
	if m.ToAgent != nil {
		targets = runtime.Participants(m.FromAgent, *m.ToAgent)
	}
	e := runtime.EventOf(contract.EventMessagePosted, m.FromAgent, m.CorrelationID, contract.ConsistencyStrong, targets,
		struct {
			MessageID   string  `json:"messageId"`
			FromAgent   string  `json:"fromAgent"`
			ToAgent     *string `json:"toAgent"`
			TaskID      *string `json:"taskId"`
			Category    string  `json:"category"`
			Priority    string  `json:"priority"`
			Privacy     string  `json:"privacy"`
			ExpiresAtMs int64   `json:"expiresAtMs"`
		}{m.ID, m.FromAgent, m.ToAgent, m.TaskID, m.Category, m.Priority, m.Privacy, m.ExpiresAtMs}, m.CreatedAtMs)
	if m.TaskID != nil {
		e.TaskID = *m.TaskID
	}
	return e
}

// ReadMessages returns the caller's messages: addressed to it or broadcast, not its
// own, not expired, by default only unread ones, and marks them read unless markRead
// is false.
func (a *Messages) ReadMessages(ctx context.Context, p runtime.Principal, req *contract.ReadMessagesRequest) (*contract.AgentMessages, error) {
	q := AgentMessageQuery{Agent: p.Subject, NowMs: a.nowMs(), IncludeRead: req.IncludeRead, MarkRead: true}
	var err error
	if q.Limit, err = runtime.OptionalCount("limit", req.Limit, contract.DefaultA2ALimit, contract.MaxA2ALimit); err != nil {
		return nil, err
	}
	if req.MarkRead != nil {
		q.MarkRead = *req.MarkRead
	}
	if req.Category != nil {
		if q.Category, err = enumOr("category", req.Category, "", contract.MessageCategories); err != nil {
			return nil, err
		}
	}
	if req.TaskID != nil {
		if err := runtime.ValidateID("taskId", *req.TaskID); err != nil {
			return nil, err
		}
		q.TaskID = *req.TaskID
	}
	msgs, err := a.stores.AgentMessages.ReadMessages(ctx, p.Scope, q)
	if err != nil {
		return nil, err
	}
	if msgs == nil {
		msgs = []contract.AgentMessage{}
	}
	return &contract.AgentMessages{Messages: msgs}, nil
}
