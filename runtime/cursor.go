package runtime

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"slices"
	"strings"

	"github.com/agent-context/agent-context/contract"
)

// The first byte of every cursor names its format, so the format can change without
// old cursors being misread: a position cursor holds a number, a key cursor a string
// (an ID to resume after). The version is covered by the MAC, so one kind is never
// read as the other.
const (
	cursorVersion    = 1
	keyCursorVersion = 2
	atCursorVersion  = 3
)

// maxCursorChars bounds what Decode looks at: a version byte, a varint position and a
// 32-byte MAC encode to far fewer characters. maxKeyCursorChars bounds a key cursor:
// an ID of 191 characters is at most 764 bytes of UTF-8.
const (
	maxCursorChars    = 128
	maxKeyCursorChars = 1100
)

// cursorEncoding is base64url without padding, strict about the unused trailing bits so
// that no two strings decode to the same cursor.
var cursorEncoding = base64.RawURLEncoding.Strict()

// CursorBinding is everything a cursor is valid for: the kind of listing, the caller's
// tenant and project, the conversation, the filter and, for listings relative to the
// caller (an agent's tasks), the caller's subject. A cursor minted for one binding is
// refused for any other.
type CursorBinding struct {
	Kind           string
	Scope          Scope
	ConversationID string
	Order          string
	Roles          []string
	Subject        string
}

// CursorCodec mints and verifies opaque pagination cursors. A cursor carries only a
// position; its HMAC-SHA256 covers the position and the binding, so altering a byte or
// presenting it with another scope or filter fails verification. The key is a server
// secret every replica shares, so any replica accepts any replica's cursors.
type CursorCodec struct {
	key []byte
}

// NewCursorCodec returns a codec keyed with secret (at least 32 random bytes).
func NewCursorCodec(secret []byte) *CursorCodec {
	return &CursorCodec{key: slices.Clone(secret)}
}

// Encode returns the cursor that resumes a listing bound to b after position.
func (c *CursorCodec) Encode(b CursorBinding, position int64) string {
	payload := binary.AppendUvarint([]byte{cursorVersion}, uint64(position))
	return cursorEncoding.EncodeToString(append(payload, c.mac(b, payload)...))
}

// Decode verifies cursor against b and returns its position. Any failure is
// INVALID_CURSOR, without saying which check failed.
func (c *CursorCodec) Decode(b CursorBinding, cursor string) (int64, error) {
	payload, err := c.verify(b, cursor, cursorVersion, maxCursorChars)
	if err != nil {
		return 0, err
	}
	position, n := binary.Uvarint(payload)
	if n != len(payload) || position > 1<<62 {
		return 0, invalidCursor()
	}
	return int64(position), nil
}

// EncodeKey returns the cursor that resumes a listing bound to b, ordered by a string
// key, after key.
func (c *CursorCodec) EncodeKey(b CursorBinding, key string) string {
	payload := append([]byte{keyCursorVersion}, key...)
	return cursorEncoding.EncodeToString(append(payload, c.mac(b, payload)...))
}

// DecodeKey verifies a cursor of EncodeKey against b and returns its key. Any failure
// is INVALID_CURSOR.
func (c *CursorCodec) DecodeKey(b CursorBinding, cursor string) (string, error) {
	payload, err := c.verify(b, cursor, keyCursorVersion, maxKeyCursorChars)
	if err != nil {
		return "", err
	}
	return string(payload), nil
}

// Position is a place in a listing ordered newest first by a time and then by ID:
// the rows after it are those with an earlier time, or the same time and a greater
// ID.
type Position struct {
	AtMs int64
	ID   string
}

// EncodeAt returns the cursor that resumes a newest-first listing bound to b after
// position at.
func (c *CursorCodec) EncodeAt(b CursorBinding, at Position) string {
	payload := binary.AppendUvarint([]byte{atCursorVersion}, uint64(at.AtMs))
	payload = append(payload, at.ID...)
	return cursorEncoding.EncodeToString(append(payload, c.mac(b, payload)...))
}

// DecodeAt verifies a cursor of EncodeAt against b and returns its position. Any
// failure is INVALID_CURSOR.
func (c *CursorCodec) DecodeAt(b CursorBinding, cursor string) (Position, error) {
	payload, err := c.verify(b, cursor, atCursorVersion, maxKeyCursorChars)
	if err != nil {
		return Position{}, err
	}
	at, n := binary.Uvarint(payload)
	if n <= 0 || at > MaxSequence {
		return Position{}, invalidCursor()
	}
	return Position{AtMs: int64(at), ID: string(payload[n:])}, nil
}

// verify checks cursor's encoding, MAC and version and returns what follows the
// version byte.
func (c *CursorCodec) verify(b CursorBinding, cursor string, version byte, maxChars int) ([]byte, error) {
	if len(cursor) > maxChars {
		return nil, invalidCursor()
	}
	raw, err := cursorEncoding.DecodeString(cursor)
	// The decoder skips CR and LF; re-encoding rejects every string but the canonical one.
	if err != nil || cursorEncoding.EncodeToString(raw) != cursor || len(raw) < 2+sha256.Size {
		return nil, invalidCursor()
	}
	payload, sum := raw[:len(raw)-sha256.Size], raw[len(raw)-sha256.Size:]
	if !hmac.Equal(sum, c.mac(b, payload)) || payload[0] != version {
		return nil, invalidCursor()
	}
	return payload[1:], nil
}

func invalidCursor() error {
	return Errorf(contract.CodeInvalidCursor, "the cursor is invalid for this request").With("field", "cursor")
}

// mac authenticates payload together with the binding. The fields are separated by NUL,
// which IDs, roles and orders never contain, so distinct bindings never collide.
func (c *CursorCodec) mac(b CursorBinding, payload []byte) []byte {
	roles := slices.Clone(b.Roles)
	slices.Sort(roles)
	roles = slices.Compact(roles)
	h := hmac.New(sha256.New, c.key)
	for _, field := range []string{
		"agent-context cursor", b.Kind, b.Scope.TenantID, b.Scope.ProjectID, b.ConversationID, b.Order,
		strings.Join(roles, ","), b.Subject,
	} {
		h.Write([]byte(field))
		h.Write([]byte{0})
	}
	h.Write(payload)
	return h.Sum(nil)
}

// PageQuery is one page of a newest-first listing: the rows after After (nil: from
// the newest), at most Limit of them.
type PageQuery struct {
	After *Position
	Limit int
}

// OpenPage validates a listing's limit (default def, 1..maxLimit) and its cursor,
// which must have been minted for b.
func (c *CursorCodec) OpenPage(b CursorBinding, cursor *string, limit *int, def, maxLimit int) (PageQuery, error) {
	n, err := OptionalCount("limit", limit, def, maxLimit)
	if err != nil {
		return PageQuery{}, err
	}
	q := PageQuery{Limit: n}
	if cursor != nil {
		at, err := c.DecodeAt(b, *cursor)
		if err != nil {
			return PageQuery{}, err
		}
		q.After = &at
	}
	return q, nil
}

// ClosePage cuts rows, fetched with one row more than q.Limit, to the page and returns
// the cursor of the next page: nil exactly when no row follows.
func ClosePage[T any](c *CursorCodec, b CursorBinding, q PageQuery, rows []T, position func(*T) Position) ([]T, *string) {
	if rows == nil {
		rows = []T{}
	}
	if len(rows) <= q.Limit {
		return rows, nil
	}
	rows = rows[:q.Limit]
	next := c.EncodeAt(b, position(&rows[len(rows)-1]))
	return rows, &next
}
