package session

import (
	"context"
	"crypto/hmac"
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

// MaxSessionsPerPrincipal bounds the live sessions of one principal (tenant, project,
// subject): a sign-in beyond it ends the oldest.
const MaxSessionsPerPrincipal = 20

// purgeBatch bounds how many expired sessions one sign-in deletes, so that the
// clean-up a sign-in does stays small however many sessions expired meanwhile;
// sweepBatch bounds one statement of the background sweep.
const (
	purgeBatch = 100
	sweepBatch = 1000
)

// Record is a session as stored: the hash of its ID, never the ID.
type Record struct {
	IDHash       []byte
	Scope        runtime.Scope
	Subject      string
	Capabilities []string
	CSRFToken    string
	CreatedAt    time.Time
	ExpiresAt    time.Time
	// TokenFingerprint is the fingerprint of the static token a session of the static
	// token (or of open mode) came from; nil for a runtime token's.
	TokenFingerprint []byte
}

// Store keeps the sessions.
type Store interface {
	// CreateSession stores rec and ends the oldest sessions of its principal live at
	// rec.CreatedAt beyond keep, rec included, atomically with concurrent sign-ins of
	// the same principal.
	CreateSession(ctx context.Context, rec Record, keep int) error
	// SessionByHash returns the session whose ID hashes to idHash and that has not
	// expired at now; NOT_FOUND otherwise.
	SessionByHash(ctx context.Context, idHash []byte, now time.Time) (Record, error)
	// DeleteSession deletes the session whose ID hashes to idHash, if any.
	DeleteSession(ctx context.Context, idHash []byte) error
	// PurgeExpiredSessions deletes up to limit sessions expired at now and returns how
	// many it deleted.
	PurgeExpiredSessions(ctx context.Context, now time.Time, limit int) (int, error)
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
	// fingerprint is the current static token's (empty in open mode and with runtime
	// tokens only, which is a fingerprint too: a token set later ends open mode's
	// sessions).
	fingerprint []byte
}

// NewSessions returns the use cases over store. staticToken is the service's current
// static token (AGENT_CONTEXT_SERVICE_TOKEN, empty without one): the sessions another
// one started end.
func NewSessions(store Store, clock runtime.Clock, staticToken string) *Sessions {
	return &Sessions{store: store, clock: clock, fingerprint: tokenFingerprint(staticToken)}
}

// tokenFingerprint is HMAC-SHA256 keyed with the static token over a fixed label: it
// tells two tokens apart and does not reveal either. The token is the key because it
// is the one secret every replica shares before reading the database (a key kept in
// the database would sit beside the fingerprints it protects), and the label keeps the
// value from matching any other digest of the token. A reader of the table can still
// test guesses of the token offline: the fingerprint is as hard to reverse as the
// token is to guess.
func tokenFingerprint(token string) []byte {
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write([]byte("agent-context console session static token v1"))
	return mac.Sum(nil)
}

// Start keeps p as a new session that ends at tokenExpiry (zero: none) or after
// MaxLifetime, whichever is first. A principal of the static token or of open mode
// (TrustedHeaders) records the current static token's fingerprint; one of a runtime
// token records none. The principal's oldest live sessions beyond
// MaxSessionsPerPrincipal end.
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
	if _, err := s.store.PurgeExpiredSessions(ctx, now, purgeBatch); err != nil {
		return Session{}, err
	}
	rec := Record{IDHash: hashID(id), Scope: p.Scope, Subject: p.Subject, Capabilities: caps,
		CSRFToken: csrf, CreatedAt: now, ExpiresAt: expires}
	if p.TrustedHeaders {
		rec.TokenFingerprint = s.fingerprint
	}
	if err := s.store.CreateSession(ctx, rec, MaxSessionsPerPrincipal); err != nil {
		return Session{}, err
	}
	return Session{ID: id, Principal: principalOf(rec), CSRFToken: csrf, ExpiresAt: expires}, nil
}

// Resume returns the live session of id; NOT_FOUND for an unknown, forged or expired
// one, and for one of a static token the service no longer has, which it deletes.
func (s *Sessions) Resume(ctx context.Context, id string) (Session, error) {
	if id == "" || len(id) > 128 {
		return Session{}, runtime.NotFound("session", "session")
	}
	rec, err := s.store.SessionByHash(ctx, hashID(id), s.clock.Now())
	if err != nil {
		return Session{}, err
	}
	if rec.TokenFingerprint != nil && !hmac.Equal(rec.TokenFingerprint, s.fingerprint) {
		if err := s.store.DeleteSession(ctx, rec.IDHash); err != nil {
			return Session{}, err
		}
		return Session{}, runtime.NotFound("session", "session")
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

// Sweep deletes the sessions expired now, in batches until none is left, and returns
// how many it deleted. A periodic caller keeps the table to the live sessions between
// sign-ins, which delete a bounded batch only.
func (s *Sessions) Sweep(ctx context.Context) (int, error) {
	now := s.clock.Now()
	deleted := 0
	for {
		n, err := s.store.PurgeExpiredSessions(ctx, now, sweepBatch)
		deleted += n
		if err != nil || n < sweepBatch {
			return deleted, err
		}
	}
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
