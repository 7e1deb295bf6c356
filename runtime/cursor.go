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

// cursorVersion is the first byte of every cursor, so the format can change without
// old cursors being misread.
const cursorVersion = 1

// maxCursorChars bounds what Decode looks at: a version byte, a varint position and a
// 32-byte MAC encode to far fewer characters.
const maxCursorChars = 128

// cursorEncoding is base64url without padding, strict about the unused trailing bits so
// that no two strings decode to the same cursor.
var cursorEncoding = base64.RawURLEncoding.Strict()

// CursorBinding is everything a cursor is valid for: the kind of listing, the caller's
// tenant and project, the conversation and the filter. A cursor minted for one binding
// is refused for any other.
type CursorBinding struct {
	Kind           string
	Scope          Scope
	ConversationID string
	Order          string
	Roles          []string
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
	invalid := Errorf(contract.CodeInvalidCursor, "the cursor is invalid for this request").With("field", "cursor")
	if len(cursor) > maxCursorChars {
		return 0, invalid
	}
	raw, err := cursorEncoding.DecodeString(cursor)
	// The decoder skips CR and LF; re-encoding rejects every string but the canonical one.
	if err != nil || cursorEncoding.EncodeToString(raw) != cursor || len(raw) < 2+sha256.Size {
		return 0, invalid
	}
	payload, sum := raw[:len(raw)-sha256.Size], raw[len(raw)-sha256.Size:]
	if !hmac.Equal(sum, c.mac(b, payload)) || payload[0] != cursorVersion {
		return 0, invalid
	}
	position, n := binary.Uvarint(payload[1:])
	if n != len(payload)-1 || position > 1<<62 {
		return 0, invalid
	}
	return int64(position), nil
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
		strings.Join(roles, ","),
	} {
		h.Write([]byte(field))
		h.Write([]byte{0})
	}
	h.Write(payload)
	return h.Sum(nil)
}
