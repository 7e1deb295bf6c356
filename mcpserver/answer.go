package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A tool's answer crosses three encoders on its way out: the door's, the SDK's
// CallToolResult, and the SDK's JSON-RPC envelope. Left to the SDK, the route's answer
// went through reflection, then was escaped into the text item and validated and
// compacted once per level (about seven passes over it, docs/benchmarks.md). Here it is
// encoded once (by the contract's own encoder where it has one, as the route does),
// quoted once into the text item, and the whole result handed to the SDK as bytes, so
// that only the JSON-RPC layer's two unavoidable compaction passes remain.

// jsonWriter is an answer that encodes itself (contract/wirejson.go), as the route
// writes it.
type jsonWriter interface {
	WriteJSON(buf *bytes.Buffer) error
}

// answer is the tool result of a use case's answer out: out's JSON as
// structuredContent and the same JSON as the one text item.
func answer(out any) (*mcp.CallToolResult, error) {
	var raw []byte
	if w, ok := out.(jsonWriter); ok {
		var buf bytes.Buffer
		if err := w.WriteJSON(&buf); err != nil {
			return nil, err
		}
		raw = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	} else {
		var err error
		if raw, err = json.Marshal(out); err != nil {
			return nil, err
		}
	}
	return &mcp.CallToolResult{
		StructuredContent: json.RawMessage(raw),
		Content:           []mcp.Content{&mcp.TextContent{Text: string(raw)}},
	}, nil
}

// encodeResults is the door's outermost receiving middleware: it replaces every tool
// result by its JSON, encoded once (encodeToolResult). A result it cannot encode is
// left to the SDK, which then answers as it would have.
func encodeResults(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if r, ok := res.(*mcp.CallToolResult); ok && err == nil {
			if raw, eerr := encodeToolResult(r); eerr == nil {
				return &encodedResult{raw: raw}, nil
			}
		}
		return res, err
	}
}

// encodedResult is a result already encoded as JSON.
type encodedResult struct {
	mcp.ResultBase
	raw json.RawMessage
}

// MarshalJSON returns the result's JSON as it is.
func (r *encodedResult) MarshalJSON() ([]byte, error) { return r.raw, nil }

// encodeToolResult encodes r as the SDK would (the same JSON value, not necessarily
// the same bytes): its content items and structuredContent by the door, a
// json.RawMessage structuredContent as it is and a plain text item's text quoted
// once; every other member (isError, _meta, and whatever the SDK adds for the
// session's protocol version) exactly as the SDK encodes r without them.
func encodeToolResult(r *mcp.CallToolResult) ([]byte, error) {
	shell := *r
	shell.Content, shell.StructuredContent = []mcp.Content{}, nil
	rest, err := shell.MarshalJSON()
	if err != nil {
		return nil, err
	}
	size := len(rest) + 64
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok && t != nil {
			size += len(t.Text) + len(t.Text)/8
		}
	}
	structured, _ := r.StructuredContent.(json.RawMessage)
	if structured == nil && r.StructuredContent != nil {
		if structured, err = json.Marshal(r.StructuredContent); err != nil {
			return nil, err
		}
	}
	buf := make([]byte, 0, size+len(structured))
	buf = append(buf, `{"content":[`...)
	for i, c := range r.Content {
		if i > 0 {
			buf = append(buf, ',')
		}
		if t, ok := c.(*mcp.TextContent); ok && t != nil && t.Meta == nil && t.Annotations == nil {
			buf = append(buf, `{"type":"text","text":`...)
			if buf, err = jsontext.AppendQuote(buf, t.Text); err != nil {
				return nil, err
			}
			buf = append(buf, '}')
			continue
		}
		item, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		buf = append(buf, item...)
	}
	buf = append(buf, ']')
	if structured != nil {
		buf = append(buf, `,"structuredContent":`...)
		buf = append(buf, structured...)
	}
	dec := jsontext.NewDecoder(bytes.NewReader(rest))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, fmt.Errorf("mcpserver: the SDK encodes a tool result as %.40s", rest)
	}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		name := tok.String() // before ReadValue, which voids tok
		value, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		if name == "content" {
			continue
		}
		buf = append(buf, ',')
		if buf, err = jsontext.AppendQuote(buf, name); err != nil {
			return nil, err
		}
		buf = append(buf, ':')
		buf = append(buf, value...)
	}
	return append(buf, '}'), nil
}
