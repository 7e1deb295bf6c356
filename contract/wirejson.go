package contract

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// The message reads (recent and page) are the service's hottest answers, and
// encoding/json's reflection was their largest server-side cost (docs/benchmarks.md).
// Their bodies encode themselves here instead, into the very bytes encoding/json's
// Encoder writes for the same value (HTML-safe string escaping, compacted metadata,
// a final newline); TestWireJSONMatchesEncodingJSON and FuzzWireJSON hold the two
// to byte equality.

// WriteJSON writes r as encoding/json's Encoder would.
func (r *MessagesResponse) WriteJSON(buf *bytes.Buffer) error {
	buf.WriteString(`{"messages":`)
	if err := writeRecords(buf, r.Messages); err != nil {
		return err
	}
	buf.WriteString("}\n")
	return nil
}

// WriteJSON writes p as encoding/json's Encoder would.
func (p *MessagePage) WriteJSON(buf *bytes.Buffer) error {
	buf.WriteString(`{"messages":`)
	if err := writeRecords(buf, p.Messages); err != nil {
		return err
	}
	buf.WriteString(`,"nextCursor":`)
	if p.NextCursor == nil {
		buf.WriteString("null")
	} else {
		writeString(buf, *p.NextCursor)
	}
	buf.WriteString("}\n")
	return nil
}

func writeRecords(buf *bytes.Buffer, records []ConversationRecord) error {
	if records == nil {
		buf.WriteString("null")
		return nil
	}
	buf.WriteByte('[')
	var scratch bytes.Buffer
	for i := range records {
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := records[i].writeJSON(buf, &scratch); err != nil {
			return err
		}
	}
	buf.WriteByte(']')
	return nil
}

// writeJSON writes m; scratch is reused for compacting metadata.
func (m *ConversationRecord) writeJSON(buf, scratch *bytes.Buffer) error {
	buf.WriteString(`{"id":`)
	writeString(buf, m.ID)
	buf.WriteString(`,"scope":{"conversationId":`)
	writeString(buf, m.Scope.ConversationID)
	buf.WriteString(`},"role":`)
	writeString(buf, m.Role)
	buf.WriteString(`,"content":`)
	writeString(buf, m.Content)
	buf.WriteString(`,"sequence":`)
	buf.Write(strconv.AppendInt(buf.AvailableBuffer(), m.Sequence, 10))
	buf.WriteString(`,"createdAtMs":`)
	buf.Write(strconv.AppendInt(buf.AvailableBuffer(), m.CreatedAtMs, 10))
	buf.WriteString(`,"metadata":`)
	if m.Metadata == nil {
		buf.WriteString("null")
	} else {
		// encoding/json compacts a RawMessage and makes its strings HTML-safe.
		scratch.Reset()
		if err := json.Compact(scratch, m.Metadata); err != nil {
			return err
		}
		json.HTMLEscape(buf, scratch.Bytes())
	}
	buf.WriteByte('}')
	return nil
}

// writeString writes s as a JSON string the way encoding/json does by default: the
// two-character escapes where JSON has them, \u00XX for other control characters and
// for <, > and &, \u2028 and \u2029 (which JavaScript parsers once refused), and
// U+FFFD for each byte of invalid UTF-8.
func writeString(buf *bytes.Buffer, s string) {
	buf.WriteByte('"')
	start := 0
	for i := 0; i < len(s); {
		for i < len(s) && plainByte[s[i]] {
			i++
		}
		if i == len(s) {
			break
		}
		if c := s[i]; c < utf8.RuneSelf {
			buf.WriteString(s[start:i])
			switch c {
			case '"', '\\':
				buf.WriteByte('\\')
				buf.WriteByte(c)
			case '\b':
				buf.WriteString(`\b`)
			case '\f':
				buf.WriteString(`\f`)
			case '\n':
				buf.WriteString(`\n`)
			case '\r':
				buf.WriteString(`\r`)
			case '\t':
				buf.WriteString(`\t`)
			default:
				buf.WriteString(`\u00`)
				buf.WriteByte(hexDigits[c>>4])
				buf.WriteByte(hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			buf.WriteString(s[start:i])
			buf.WriteString(`\ufffd`)
		case r == '\u2028' || r == '\u2029':
			buf.WriteString(s[start:i])
			buf.WriteString(`\u202`)
			buf.WriteByte(hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	buf.WriteString(s[start:])
	buf.WriteByte('"')
}

const hexDigits = "0123456789abcdef"

// plainByte holds the ASCII bytes a JSON string carries as they are.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()
