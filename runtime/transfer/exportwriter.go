package transfer

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"

	"github.com/agent-context/agent-context/contract"
)

// chunkWriter writes agent-context-ndjson/v1 lines and cuts them into chunks of at
// most MaxExportChunkBytes, each with its SHA-256, numbered from the index it starts
// at. Lines run across chunks: a chunk is a byte range of the stream, not a set of
// lines. It also collects the conversations of the records it wrote.
type chunkWriter struct {
	next   int
	chunks []ArtifactChunk
	cur    []byte
	size   int64
	convs  map[string]struct{}
	buf    bytes.Buffer
	enc    *json.Encoder
}

func newChunkWriter(first int) *chunkWriter {
	w := &chunkWriter{next: first, convs: map[string]struct{}{}}
	w.enc = json.NewEncoder(&w.buf)
	// Metadata is written exactly as stored (encoding/json would escape <, > and &
	// inside it), so an import stores the very same text.
	w.enc.SetEscapeHTML(false)
	return w
}

// Write appends p to the stream.
func (w *chunkWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if w.cur == nil {
			w.cur = make([]byte, 0, contract.MaxExportChunkBytes)
		}
		k := min(len(p), cap(w.cur)-len(w.cur))
		w.cur = append(w.cur, p[:k]...)
		p = p[k:]
		if len(w.cur) == cap(w.cur) {
			w.cut()
		}
	}
	w.size += int64(n)
	return n, nil
}

func (w *chunkWriter) cut() {
	sum := sha256.Sum256(w.cur)
	w.chunks = append(w.chunks, ArtifactChunk{Index: w.next, Data: w.cur, SHA256: hex.EncodeToString(sum[:])})
	w.next++
	w.cur = nil
}

// finish cuts the last, shorter chunk and returns the chunks written.
func (w *chunkWriter) finish() []ArtifactChunk {
	if len(w.cur) > 0 {
		w.cut()
	}
	return w.chunks
}

// encode encodes v into the writer's buffer, with the newline the encoder adds.
func (w *chunkWriter) encode(v any) ([]byte, error) {
	w.buf.Reset()
	if err := w.enc.Encode(v); err != nil {
		return nil, err
	}
	return w.buf.Bytes(), nil
}

// line writes v as one line.
func (w *chunkWriter) line(v any) error {
	b, err := w.encode(v)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// recordLine is a record line of the stream.
type recordLine struct {
	Type   string `json:"type"`
	Record any    `json:"record"`
}

// record writes one record line of type typ.
func (w *chunkWriter) record(typ string, record any) error {
	return w.line(recordLine{Type: typ, Record: record})
}

// conversation notes that a record of conversation id was written.
func (w *chunkWriter) conversation(id string) { w.convs[id] = struct{}{} }

// conversationIDs returns the conversations noted, sorted.
func (w *chunkWriter) conversationIDs() []string { return slices.Sorted(maps.Keys(w.convs)) }

// windowLines writes windows as they stream in (a WindowSink): the header members,
// then the items one by one, so that a window's items are never held together.
type windowLines struct {
	w       *chunkWriter
	items   int
	counted func(id string)
}

// Window writes a window line up to its items.
func (l *windowLines) Window(win *contract.Window) error {
	head := *win
	head.Items = nil
	b, err := l.w.encode(head)
	if err != nil {
		return err
	}
	// b is {...}\n; the items follow the header's members.
	if _, err := l.w.Write([]byte(`{"type":"window","record":`)); err != nil {
		return err
	}
	if _, err := l.w.Write(b[:len(b)-2]); err != nil {
		return err
	}
	l.items = 0
	l.w.conversation(win.Conversation.ConversationID)
	l.counted(win.ID)
	_, err = l.w.Write([]byte(`,"items":[`))
	return err
}

// Item writes the next item of the window.
func (l *windowLines) Item(it *contract.WindowItem) error {
	b, err := l.w.encode(it)
	if err != nil {
		return err
	}
	if l.items > 0 {
		if _, err := l.w.Write([]byte{','}); err != nil {
			return err
		}
	}
	l.items++
	_, err = l.w.Write(b[:len(b)-1])
	return err
}

// EndWindow ends the window's line.
func (l *windowLines) EndWindow() error {
	_, err := l.w.Write([]byte("]}}\n"))
	return err
}
