package transfer

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// Import reads an agent-context-ndjson/v1 stream (inline base64 data or an export
// artifact of the caller's scope) and writes its records into the caller's scope, in
// one transaction, line by line: a record is decoded, checked as its original write
// checks it, and written, before the next line is read, so an artifact far larger
// than memory imports in bounded memory (only the messages of one append batch, or one
// window, are held at once). Identical records are skipped; conflicting ones are
// collected, and then nothing is written: the answer is 409 IDEMPOTENCY_CONFLICT
// listing every one in details.ids.
func (x *Exports) Import(ctx context.Context, p runtime.Principal, req *contract.ImportRequest) (*contract.ImportResponse, error) {
	src, field, err := importSource(req)
	if err != nil {
		return nil, err
	}
	var res *contract.ImportResponse
	err = x.db.WithinTx(ctx, func(ctx context.Context, tx Stores) error {
		stream := src
		if stream == nil {
			a, err := x.readable(ctx, tx.Artifacts, p.Scope, field, *req.ArtifactID)
			if err != nil {
				return err
			}
			if a.Format != contract.FormatNDJSON {
				return runtime.Invalid(field, "the artifact is an %s document, not an %s export", a.Format, contract.FormatNDJSON)
			}
			stream = newArtifactReader(ctx, tx.Artifacts, p.Scope, a)
		}
		im := &importer{tx: tx, p: p, model: x.model, nowMs: x.clock.Now().UnixMilli()}
		res, err = im.run(ctx, newNDJSONReader(stream, field))
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// importSource checks an import request and returns the reader of its inline data
// (nil for an artifact) and the request field the stream's errors name.
func importSource(req *contract.ImportRequest) (io.Reader, string, error) {
	switch {
	case req.Data != nil && req.ArtifactID != nil:
		return nil, "", runtime.Invalid("artifactId", "give either data or artifactId, not both")
	case req.Data == nil && req.ArtifactID == nil:
		return nil, "", runtime.Invalid("data", "data (with format) or artifactId is required")
	}
	if req.Format != nil && *req.Format != contract.FormatNDJSON {
		return nil, "", runtime.Invalid("format", "format must be %q", contract.FormatNDJSON)
	}
	if req.ArtifactID != nil {
		return nil, "artifactId", runtime.ValidateID("artifactId", *req.ArtifactID)
	}
	if req.Format == nil {
		return nil, "", runtime.Invalid("format", "format is required with data: %q", contract.FormatNDJSON)
	}
	data := *req.Data
	// RFC 4648 §4 with padding: whole quanta, no line breaks (which Go's decoder
	// would skip).
	if len(data)%4 != 0 || strings.ContainsAny(data, "\r\n") {
		return nil, "", runtime.Invalid("data", "data must be standard base64 with padding (RFC 4648 §4)")
	}
	decoded := int64(len(data)) / 4 * 3
	if strings.HasSuffix(data, "==") {
		decoded -= 2
	} else if strings.HasSuffix(data, "=") {
		decoded--
	}
	if decoded > contract.MaxImportDataBytes {
		return nil, "", runtime.TooLarge("data", contract.MaxImportDataBytes)
	}
	return base64Reader{base64.NewDecoder(base64.StdEncoding.Strict(), strings.NewReader(data))}, "data", nil
}

// base64Reader turns the decoder's failures into the contract's error.
type base64Reader struct{ r io.Reader }

func (b base64Reader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		return n, runtime.Invalid("data", "data must be standard base64 with padding (RFC 4648 §4)")
	}
	return n, err
}

// artifactReader reads an artifact's chunks one at a time, checking each chunk's
// SHA-256 and, at the end, the whole artifact's.
type artifactReader struct {
	ctx   context.Context
	store ArtifactStore
	scope runtime.Scope
	art   Artifact
	next  int
	buf   []byte
	whole hash.Hash
}

func newArtifactReader(ctx context.Context, store ArtifactStore, scope runtime.Scope, a Artifact) *artifactReader {
	return &artifactReader{ctx: ctx, store: store, scope: scope, art: a, whole: sha256.New()}
}

func (r *artifactReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.next == r.art.ChunkCount {
			if r.art.SHA256 == nil || hex.EncodeToString(r.whole.Sum(nil)) != *r.art.SHA256 {
				return 0, corruptArtifact("the artifact does not match its SHA-256")
			}
			return 0, io.EOF
		}
		var got bool
		err := r.store.Chunks(r.ctx, r.scope, r.art.ID, r.next, 1, func(c ArtifactChunk) error {
			got = c.Index == r.next
			sum := sha256.Sum256(c.Data)
			if hex.EncodeToString(sum[:]) != c.SHA256 {
				return corruptArtifact(fmt.Sprintf("chunk %d does not match its SHA-256", c.Index))
			}
			r.buf = c.Data
			return nil
		})
		if err != nil {
			var re *runtime.Error
			if !errors.As(err, &re) {
				err = (&runtime.Error{Code: contract.CodeInternal, Message: "the artifact could not be read"}).Wrap(err)
			}
			return 0, err
		}
		if !got {
			return 0, corruptArtifact(fmt.Sprintf("chunk %d is missing", r.next))
		}
		r.whole.Write(r.buf)
		r.next++
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func corruptArtifact(msg string) error {
	return runtime.Errorf(contract.CodeConflict, "the export artifact is corrupt: %s", msg).
		With("reason", "artifact_corrupt").With("field", "artifactId")
}

// ndjsonReader reads an agent-context-ndjson/v1 stream line by line. Each line is
// decoded as a stream of tokens by one reused decoder (whose buffer grows to the
// largest token, not to the line), as strictly as a request body.
type ndjsonReader struct {
	br    *bufio.Reader
	lr    lineReader
	dec   *jsontext.Decoder
	field string
	line  int
}

func newNDJSONReader(r io.Reader, field string) *ndjsonReader {
	n := &ndjsonReader{br: bufio.NewReaderSize(r, 64<<10), field: field}
	n.lr.br = n.br
	n.dec = jsontext.NewDecoder(&n.lr)
	return n
}

// lineReader reads one line of br, without its newline, then reports io.EOF.
type lineReader struct {
	br   *bufio.Reader
	done bool
}

func (l *lineReader) Read(p []byte) (int, error) {
	if l.done || len(p) == 0 {
		return 0, io.EOF
	}
	if _, err := l.br.Peek(1); err != nil {
		l.done = true
		return 0, err
	}
	buf, _ := l.br.Peek(min(l.br.Buffered(), len(p)))
	if i := bytes.IndexByte(buf, '\n'); i >= 0 {
		copy(p, buf[:i])
		_, _ = l.br.Discard(i + 1)
		l.done = true
		return i, nil
	}
	n := copy(p, buf)
	_, _ = l.br.Discard(n)
	return n, nil
}

// startLine begins the next line; it reports false at the end of the stream.
func (r *ndjsonReader) startLine() (bool, error) {
	if _, err := r.br.Peek(1); err != nil {
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		return false, r.fail(runtime.DecodeFailure(err, "line"))
	}
	r.line++
	r.lr.done = false
	r.dec.Reset(&r.lr)
	return true, nil
}

// endLine checks that nothing follows the line's value.
func (r *ndjsonReader) endLine() error {
	if _, err := r.dec.ReadToken(); !errors.Is(err, io.EOF) {
		if err == nil {
			return r.fail(runtime.Invalid("line", "a line holds one JSON value"))
		}
		return r.fail(runtime.DecodeFailure(err, "line"))
	}
	return nil
}

// fail places err at the current line: details.field names the request field
// (data or artifactId), details.line the line (from 1) and details.path the member
// of the line when the error names one.
func (r *ndjsonReader) fail(err error) error {
	var re *runtime.Error
	if !errors.As(err, &re) || re.Code == contract.CodeInternal || re.Code == contract.CodeServiceUnavailable || reason(re) == "artifact_corrupt" {
		return err
	}
	out := &runtime.Error{Code: re.Code, Message: fmt.Sprintf("line %d: %s", r.line, re.Message), Details: maps.Clone(re.Details), Err: re.Err}
	if out.Details == nil {
		out.Details = map[string]any{}
	}
	if f, ok := out.Details["field"].(string); ok && f != "line" && f != r.field {
		out.Details["path"] = f
	}
	out.Details["field"], out.Details["line"] = r.field, r.line
	return out
}

// header reads the first line, which must be the header.
func (r *ndjsonReader) header() (contract.ExportHeader, error) {
	var h contract.ExportHeader
	ok, err := r.startLine()
	if err != nil {
		return h, err
	}
	if !ok {
		return h, runtime.Invalid(r.field, "the stream is empty: it must start with the header line")
	}
	var raw struct {
		Type          *string                `json:"type"`
		FormatVersion *int                   `json:"formatVersion"`
		ExportedAtMs  *int64                 `json:"exportedAtMs"`
		Counts        *contract.RecordCounts `json:"counts"`
	}
	if err := runtime.DecodeNext(r.dec, &raw, "line"); err != nil {
		return h, r.fail(err)
	}
	switch {
	case raw.Type == nil || *raw.Type != contract.RecordHeader:
		return h, r.fail(runtime.Invalid("type", "the first line must be the header (type %q)", contract.RecordHeader))
	case raw.FormatVersion == nil || *raw.FormatVersion != contract.NDJSONFormatVersion:
		return h, r.fail(runtime.Invalid("formatVersion", "formatVersion must be %d", contract.NDJSONFormatVersion))
	case raw.ExportedAtMs == nil || *raw.ExportedAtMs < 0 || *raw.ExportedAtMs > runtime.MaxSequence:
		return h, r.fail(runtime.Invalid("exportedAtMs", "exportedAtMs must be a time in milliseconds"))
	case raw.Counts == nil:
		return h, r.fail(runtime.Invalid("counts", "counts is required"))
	}
	c := *raw.Counts
	for _, n := range []int64{c.Messages, c.Windows, c.Derivations, c.Invocations, c.Entries} {
		if n < 0 || n > runtime.MaxSequence {
			return h, r.fail(runtime.Invalid("counts", "counts must be non-negative integers"))
		}
	}
	h = contract.ExportHeader{Type: contract.RecordHeader, FormatVersion: *raw.FormatVersion, ExportedAtMs: *raw.ExportedAtMs, Counts: c}
	return h, r.endLine()
}

// importRecord is one decoded record line; exactly one of the pointers is set.
type importRecord struct {
	message    *contract.ConversationRecord
	window     *contract.Window
	derivation *contract.Derivation
	invocation *contract.ModelInvocation
	entry      *contract.ContextEntry
}

// next reads the next record line; ok is false at the end of the stream.
func (r *ndjsonReader) next() (rec importRecord, ok bool, err error) {
	if ok, err = r.startLine(); err != nil || !ok {
		return rec, ok, err
	}
	if err := r.recordLine(&rec); err != nil {
		return rec, false, r.fail(err)
	}
	return rec, true, r.endLine()
}

// recordLine decodes {"type": ..., "record": {...}}, the record straight into the
// type's struct when type comes first (as an export writes it), else through its raw
// text.
func (r *ndjsonReader) recordLine(rec *importRecord) error {
	tok, err := r.dec.ReadToken()
	if err != nil {
		return runtime.DecodeFailure(err, "line")
	}
	if tok.Kind() != '{' {
		return runtime.Invalid("line", "a line must be a JSON object")
	}
	typ := ""
	var raw jsontext.Value
	seenRecord := false
	for r.dec.PeekKind() != '}' {
		name, err := r.dec.ReadToken()
		if err != nil {
			return runtime.DecodeFailure(err, "line")
		}
		switch name.String() {
		case "type":
			var t string
			if err := runtime.DecodeNext(r.dec, &t, "type"); err != nil {
				return err
			}
			switch {
			case t == contract.RecordHeader:
				return runtime.Invalid("type", "only the first line is the header")
			case !slices.Contains(recordTypes, t):
				return runtime.Invalid("type", "unknown record type %q", t)
			}
			typ = t
		case "record":
			seenRecord = true
			if typ != "" {
				if err := runtime.DecodeNext(r.dec, recordDest(typ, rec), "record"); err != nil {
					return err
				}
				continue
			}
			v, err := r.dec.ReadValue()
			if err != nil {
				return runtime.DecodeFailure(err, "record")
			}
			raw = v.Clone()
		default:
			return runtime.Invalid(name.String(), "unknown field %q", name.String())
		}
	}
	if _, err := r.dec.ReadToken(); err != nil {
		return runtime.DecodeFailure(err, "line")
	}
	switch {
	case typ == "":
		return runtime.Invalid("type", "type is required")
	case !seenRecord:
		return runtime.Invalid("record", "record is required")
	case raw != nil:
		return prefixField("record", runtime.DecodeJSON(raw, recordDest(typ, rec)))
	}
	return nil
}

// recordTypes are the types of record lines.
var recordTypes = []string{contract.RecordMessage, contract.RecordWindow, contract.RecordDerivation,
	contract.RecordInvocation, contract.RecordEntry}

// recordDest allocates rec's record of type typ and returns it; nil for an unknown
// type (the header has none).
func recordDest(typ string, rec *importRecord) any {
	switch typ {
	case contract.RecordMessage:
		rec.message = new(contract.ConversationRecord)
		return rec.message
	case contract.RecordWindow:
		rec.window = new(contract.Window)
		return rec.window
	case contract.RecordDerivation:
		rec.derivation = new(contract.Derivation)
		return rec.derivation
	case contract.RecordInvocation:
		rec.invocation = new(contract.ModelInvocation)
		return rec.invocation
	case contract.RecordEntry:
		rec.entry = new(contract.ContextEntry)
		return rec.entry
	}
	return nil
}

// prefixField prefixes the field an error names with prefix (record.content).
func prefixField(prefix string, err error) error {
	var re *runtime.Error
	if errors.As(err, &re) {
		if f, ok := re.Details["field"].(string); ok && f != "body" {
			re.Details["field"] = prefix + "." + f
		} else if ok {
			re.Details["field"] = prefix
		}
	}
	return err
}
