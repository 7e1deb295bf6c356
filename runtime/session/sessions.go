package session

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"slices"
	"time"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// MaxLifetime bounds every session: it ends at its token's exp or after this long,
// whichever comes first.
const MaxLifetime = 8 * time.Hour

// purgeBatch bounds how many expired sessions one sign-in deletes, so that the
// clean-up a sign-in does stays small however many sessions expired meanwhile.
const purgeBatch = 100

// Record is a session as stored: the hash of its ID, never the ID.
type Record struct {
	IDHash       []byte
	Scope        runtime.Scope
	Subject      string
	Capabilities []string
	CSRFToken    string
	CreatedAt    time.Time
	ExpiresAt    time.Time
}

// Store keeps the sessions.
type Store interface {
	// CreateSession stores rec.
	CreateSession(ctx context.Context, rec Record) error
	// SessionByHash returns the session whose ID hashes to idHash and that has not
	// expired at now; NOT_FOUND otherwise.
	SessionByHash(ctx context.Context, idHash []byte, now time.Time) (Record, error)
	// DeleteSession deletes the session whose ID hashes to idHash, if any.
	DeleteSession(ctx context.Context, idHash []byte) error
	// PurgeExpiredSessions deletes up to limit sessions expired at now.
	PurgeExpiredSessions(ctx context.Context, now time.Time, limit int) error
}

// Session is a signed-in console user.
type Session struct {
	// ID is the secret the cookie holds (256 random bits, base64url).
	ID        string
	Principal runtime.Principal
	// CSRFToken is bound to the session: every POST of the console carries it.
	CSRFToken string
	ExpiresAt time.Time
}

// Sessions starts, resumes and ends sessions.
type Sessions struct {
	store Store
	clock runtime.Clock
}

// NewSessions returns the use cases over store.
func NewSessions(store Store, clock runtime.Clock) *Sessions {
	return &Sessions{store: store, clock: clock}
}

// Start keeps p as a new session that ends at tokenExpiry (zero: none) or after
// MaxLifetime, whichever is first.
func (s *Sessions) Start(ctx context.Context, p runtime.Principal, tokenExpiry time.Time) (Session, error) {
	now := s.clock.Now()
	expires := now.Add(MaxLifetime)
	if !tokenExpiry.IsZero() && tokenExpiry.Before(expires) {
		expires = tokenExpiry
	}
	if !expires.After(now) {
		return Session{}, runtime.Errorf(contract.CodeTokenExpired, "the token has expired")
	}
	id, err := randomToken()
	if err != nil {
		return Session{}, err
	}
	csrf, err := randomToken()
	if err != nil {
		return Session{}, err
	}
	caps := make([]string, 0, len(p.Capabilities))
	for c, ok := range p.Capabilities {
		if ok {
			caps = append(caps, c)
		}
	}
	slices.Sort(caps)
	if err := s.store.PurgeExpiredSessions(ctx, now, purgeBatch); err != nil {
		return Session{}, err
	}
	rec := Record{IDHash: hashID(id), Scope: p.Scope, Subject: p.Subject, Capabilities: caps,
		CSRFToken: csrf, CreatedAt: now, ExpiresAt: expires}
	if err := s.store.CreateSession(ctx, rec); err != nil {
		return Session{}, err
	}
	return Session{ID: id, Principal: principalOf(rec), CSRFToken: csrf, ExpiresAt: expires}, nil
}

// Resume returns the live session of id; NOT_FOUND for an unknown, forged or expired
// one.
func (s *Sessions) Resume(ctx context.Context, id string) (Session, error) {
	if id == "" || len(id) > 128 {
		return Session{}, runtime.NotFound("session", "session")
	}
	rec, err := s.store.SessionByHash(ctx, hashID(id), s.clock.Now())
	if err != nil {
		return Session{}, err
	}
	return Session{ID: id, Principal: principalOf(rec), CSRFToken: rec.CSRFToken, ExpiresAt: rec.ExpiresAt}, nil
}

// End deletes the session of id; an unknown one is already ended.
func (s *Sessions) End(ctx context.Context, id string) error {
	if id == "" || len(id) > 128 {
		return nil
	}
	return s.store.DeleteSession(ctx, hashID(id))
}

func principalOf(rec Record) runtime.Principal {
	caps := make(map[string]bool, len(rec.Capabilities))
	for _, c := range rec.Capabilities {
		caps[c] = true
	}
	return runtime.Principal{Scope: rec.Scope, Subject: rec.Subject, Capabilities: caps}
}

func hashID(id string) []byte {
	sum := sha256.Sum256([]byte(id))
	return sum[:]
}

// randomToken returns 256 random bits, base64url without padding.
func randomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate a session secret: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
