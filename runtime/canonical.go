package runtime

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/agent-context/agent-context/contract"
)

// This file computes a window's contentSha256: the SHA-256 of the RFC 8785 (JCS)
// canonical JSON of its items array as stored, every member present and null where
// empty (docs/windows.md spells the form out so a client can recompute it).
//
// Arbitrary JSON (metadata, the evidence object) is canonicalized by jsontext, the json
// v2 prototype's RFC 8785 implementation. The fixed members of an item are written
// directly, so the up to 16 MiB of content is escaped once, streamed into the hash, and
// never parsed again.

// CanonicalJSON returns the RFC 8785 canonical form of the JSON text raw.
func CanonicalJSON(raw []byte) ([]byte, error) {
	v := jsontext.Value(raw).Clone()
	if err := v.Canonicalize(); err != nil {
		return nil, err
	}
	return v, nil
}

// FiniteNumbers reports whether every number in the valid JSON text raw is within the
// range of an IEEE-754 double. RFC 8785 writes numbers as doubles, so 1e400 has no
// canonical form: a client's canonicalizer refuses it (or reads Infinity), while
// jsontext would quietly clamp it to the largest double and hash a value the client
// never sent.
func FiniteNumbers(raw []byte) bool {
	dec := jsontext.NewDecoder(bytes.NewReader(raw))
	for {
		tok, err := dec.ReadToken()
		if err != nil {
			return errors.Is(err, io.EOF)
		}
		if tok.Kind() == '0' {
			if _, err := strconv.ParseFloat(tok.String(), 64); err != nil {
				return false
			}
		}
	}
}

// WindowDigest returns contentBytes (the sum of the UTF-8 byte lengths of the items'
// content) and contentSha256 (lowercase hex) of items. Verification jobs call it to
// recompute a stored window's digest.
func WindowDigest(items []contract.WindowItem) (contentBytes int64, contentSHA256 string, err error) {
	d := NewWindowDigester()
	for i := range items {
		if err := d.Add(&items[i]); err != nil {
			return 0, "", fmt.Errorf("items[%d]: %w", i, err)
		}
	}
	_, contentBytes, contentSHA256 = d.Sum()
	return contentBytes, contentSHA256, nil
}

// WindowDigester computes a window's digest item by item, so that a window read as a
// stream of items (verify_integrity) is never held whole.
type WindowDigester struct {
	h     hash.Hash
	buf   []byte
	items int
	bytes int64
}

func NewWindowDigester() *WindowDigester {
	d := &WindowDigester{h: sha256.New()}
	d.h.Write([]byte{'['})
	return d
}

// Add adds the next item, in ordinal order.
func (d *WindowDigester) Add(it *contract.WindowItem) error {
	if d.items > 0 {
		d.h.Write([]byte{','})
	}
	var err error
	if d.buf, err = appendCanonicalItem(d.buf[:0], it); err != nil {
		return err
	}
	d.h.Write(d.buf)
	d.items++
	d.bytes += int64(len(it.Content))
	return nil
}

// Sum returns the item count, contentBytes and contentSha256 of the items added.
func (d *WindowDigester) Sum() (items int, contentBytes int64, contentSHA256 string) {
	d.h.Write([]byte{']'})
	return d.items, d.bytes, hex.EncodeToString(d.h.Sum(nil))
}

// appendCanonicalItem appends the canonical object of one item. Member names are ASCII,
// so their UTF-16 order (RFC 8785 section 3.2.3) is their byte order, written here.
func appendCanonicalItem(b []byte, it *contract.WindowItem) ([]byte, error) {
	b = append(b, `{"content":`...)
	b = appendCanonicalString(b, it.Content)
	b = append(b, `,"id":`...)
	b = appendCanonicalString(b, it.ID)
	b = append(b, `,"kind":`...)
	b = appendCanonicalString(b, it.Kind)
	b = append(b, `,"knowledgeEvidence":`...)
	if it.KnowledgeEvidence == nil {
		b = append(b, "null"...)
	} else {
		raw, err := json.Marshal(it.KnowledgeEvidence)
		if err != nil {
			return nil, err
		}
		c, err := CanonicalJSON(raw)
		if err != nil {
			return nil, err
		}
		b = append(b, c...)
	}
	b = append(b, `,"metadata":`...)
	if it.Metadata == nil {
		b = append(b, "null"...)
	} else {
		c, err := CanonicalJSON(it.Metadata)
		if err != nil {
			return nil, err
		}
		b = append(b, c...)
	}
	b = append(b, `,"ordinal":`...)
	b = strconv.AppendInt(b, int64(it.Ordinal), 10)
	b = append(b, `,"role":`...)
	b = appendOptionalString(b, it.Role)
	b = append(b, `,"sourceRecordId":`...)
	b = appendOptionalString(b, it.SourceRecordID)
	return append(b, '}'), nil
}

func appendOptionalString(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return appendCanonicalString(b, *s)
}

const hexDigits = "0123456789abcdef"

// needsEscape marks the bytes RFC 8785 escapes: control characters, `"` and `\`.
var needsEscape = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// appendCanonicalString appends s, which must be valid UTF-8, as a JSON string with
// RFC 8785's escaping: `"` and `\`, the short forms \b \t \n \f \r, \u00xx (lowercase
// hex) for the other control characters, and every other character as its UTF-8 bytes.
func appendCanonicalString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !needsEscape[c] {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\t':
			b = append(b, '\\', 't')
		case '\n':
			b = append(b, '\\', 'n')
		case '\f':
			b = append(b, '\\', 'f')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
