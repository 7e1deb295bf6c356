package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/agent-context/agent-context/contract"
)

const mcpUsage = `usage: agent-context mcp stdio --url BASE [--token-file FILE]

  mcp stdio --url BASE [--token-file FILE]
      speak MCP on standard input and output for clients that only start local
      processes (Claude Desktop, Cursor, IDE agents), forwarding every message to
      BASE/internal/v1/mcp. FILE holds the bearer token (a runtime token or the static
      token); it is read again for every message, so a token refreshed in place is
      picked up. Without it the service must run in open mode. The bridge exits when
      standard input closes.
`

// Bounds of the stdio bridge: a message is one line, at most the service's body bound
// (an answer has none); at most mcpBridgeInFlight messages are forwarded at once (a long poll_events must not
// hold up the others), and one forward waits at most mcpBridgeTimeout.
const (
	mcpBridgeInFlight = 16
	mcpBridgeTimeout  = 2 * time.Minute
)

// mcpBridgeErrorCode is the JSON-RPC error code of a message the service refused
// before JSON-RPC (authentication, body bounds, rate limits) or could not be reached
// for: the implementation-defined server error range of JSON-RPC 2.0.
const mcpBridgeErrorCode = -32000

// mcpCommand runs `agent-context mcp ...`.
func mcpCommand(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{"mcp needs stdio\n" + mcpUsage}
	}
	switch args[0] {
	case "help", "-h", "--help":
		_, err := io.WriteString(stdout, mcpUsage)
		return err
	case "stdio":
	default:
		return usageError{fmt.Sprintf("unknown mcp command %q\n%s", args[0], mcpUsage)}
	}
	fs := flag.NewFlagSet("mcp stdio", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	base := fs.String("url", "", "")
	tokenFile := fs.String("token-file", "", "")
	if err := fs.Parse(args[1:]); err != nil || fs.NArg() != 0 {
		return usageError{"mcp stdio takes --url BASE [--token-file FILE]\n" + mcpUsage}
	}
	u, err := url.Parse(*base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageError{fmt.Sprintf("--url must be an absolute http or https URL, got %q\n%s", *base, mcpUsage)}
	}
	b := &mcpBridge{endpoint: strings.TrimRight(*base, "/") + contract.PathMCP, tokenFile: *tokenFile,
		http: &http.Client{Timeout: mcpBridgeTimeout}, out: stdout, log: stderr}
	if _, err := b.token(); err != nil {
		return err
	}
	// A signal ends the bridge even while it waits for a line; closing stdin ends it
	// after the answers in flight.
	done := make(chan error, 1)
	go func() { done <- b.serve(ctx, stdin) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return nil
	}
}

// mcpBridge forwards newline-delimited JSON-RPC messages (MCP's stdio transport) to the
// streamable HTTP endpoint, one POST each, and writes the answers back as lines.
type mcpBridge struct {
	endpoint  string
	tokenFile string
	http      *http.Client
	log       io.Writer

	mu  sync.Mutex // serializes writes to out
	out io.Writer
}

// token reads the bearer token, or none without a token file.
func (b *mcpBridge) token() (string, error) {
	if b.tokenFile == "" {
		return "", nil
	}
	raw, err := os.ReadFile(b.tokenFile)
	if err != nil {
		return "", fmt.Errorf("mcp stdio: reading the token file: %w", err)
	}
	token := strings.TrimSpace(string(raw))
	if token == "" {
		return "", fmt.Errorf("mcp stdio: the token file %s is empty", b.tokenFile)
	}
	return token, nil
}

// serve forwards every line of in until it ends, then waits for the answers in flight.
func (b *mcpBridge) serve(ctx context.Context, in io.Reader) error {
	lines := bufio.NewReader(in)
	slots := make(chan struct{}, mcpBridgeInFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		line, id, err := readMessageLine(lines, contract.MaxRequestBodyBytes)
		if len(bytes.TrimSpace(line)) > 0 {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return nil
			}
			wg.Go(func() {
				defer func() { <-slots }()
				b.forward(ctx, line)
			})
		}
		switch {
		case errors.Is(err, errLineTooLong):
			b.answer(id, mcpBridgeErrorCode, fmt.Sprintf("the message is larger than %d bytes", contract.MaxRequestBodyBytes), nil)
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return fmt.Errorf("mcp stdio: reading standard input: %w", err)
		}
	}
}

var errLineTooLong = errors.New("line too long")

// readMessageLine reads one line of at most limit bytes (the service refuses a larger
// body, so a longer one is not worth keeping). A longer one is read to its end through
// an rpcIDScanner, and reported as errLineTooLong with the id it carries, so that the
// client waiting on that id gets an answer.
func readMessageLine(r *bufio.Reader, limit int64) (line []byte, id json.RawMessage, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if int64(len(line)+len(chunk)) > limit {
			var scan rpcIDScanner
			scan.feed(line)
			scan.feed(chunk)
			for errors.Is(err, bufio.ErrBufferFull) {
				chunk, err = r.ReadSlice('\n')
				scan.feed(chunk)
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, nil, err
			}
			return nil, scan.id(), errLineTooLong
		}
		line = append(line, chunk...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, nil, err
		}
	}
}

// rpcIDScanner finds the top-level "id" member of a JSON object fed to it in pieces,
// keeping no more than the id: a client may write the id after a params of any size
// (the TypeScript SDK does).
type rpcIDScanner struct {
	depth    int
	inString bool
	escaped  bool
	wantKey  bool   // the next string at depth 1 is a member name
	key      []byte // the member name being read or last read at depth 1, at most 3 bytes
	inKey    bool
	inValue  bool // reading the value of "id"
	value    []byte
	done     bool
}

// rpcIDMaxBytes bounds the id the scanner keeps; a longer one is not an id it answers.
const rpcIDMaxBytes = 1 << 10

func (s *rpcIDScanner) feed(p []byte) {
	for _, c := range p {
		if s.done {
			return
		}
		if s.inValue && (s.depth > 1 || s.inString || (c != ',' && c != '}')) {
			s.value = append(s.value, c)
			if len(s.value) > rpcIDMaxBytes {
				s.value, s.done = nil, true
			}
		}
		if s.inString {
			switch {
			case s.escaped:
				s.escaped = false
			case c == '\\':
				s.escaped = true
			case c == '"':
				s.inString, s.inKey = false, false
			case s.inKey && len(s.key) <= len("id"):
				s.key = append(s.key, c)
			}
			continue
		}
		switch c {
		case '"':
			s.inString = true
			if s.depth == 1 && s.wantKey {
				s.inKey, s.wantKey, s.key = true, false, s.key[:0]
			}
		case '{', '[':
			s.depth++
			if s.depth == 1 {
				s.wantKey = c == '{'
			}
		case '}', ']':
			s.depth--
			if s.depth == 0 {
				s.done = true
			}
		case ':':
			s.inValue = s.depth == 1 && string(s.key) == "id"
		case ',':
			if s.depth == 1 {
				s.wantKey = true
				if s.inValue {
					s.done = true
				}
			}
		}
	}
}

// id returns the id found, or none when the message had no valid one.
func (s *rpcIDScanner) id() json.RawMessage {
	v := bytes.TrimSpace(s.value)
	if !json.Valid(v) || (v[0] != '"' && v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
		return nil
	}
	return v
}

// forward posts one message and writes its answer. A notification and a response of
// the client have none; a request the service refused before JSON-RPC, or whose answer
// could not be had, is answered with a JSON-RPC error, carrying the service's error
// object when it sent one.
func (b *mcpBridge) forward(ctx context.Context, msg []byte) {
	var head struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	_ = json.Unmarshal(msg, &head)
	id := head.ID
	if head.Method == "" {
		id = nil
	}
	token, err := b.token()
	if err != nil {
		b.answer(id, mcpBridgeErrorCode, err.Error(), nil)
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.endpoint, bytes.NewReader(msg))
	if err != nil {
		b.answer(id, mcpBridgeErrorCode, err.Error(), nil)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := b.http.Do(req)
	if err != nil {
		b.answer(id, mcpBridgeErrorCode, "the service could not be reached: "+err.Error(), nil)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	body := bufio.NewReader(resp.Body)
	first, err := firstNonSpace(body)
	switch {
	case err != nil && !errors.Is(err, io.EOF):
		b.answer(id, mcpBridgeErrorCode, "reading the service's answer: "+err.Error(), nil)
	case (resp.StatusCode == http.StatusAccepted || errors.Is(err, io.EOF) && resp.StatusCode < 300) && id == nil:
	case resp.StatusCode < 300 && first == '{':
		b.relay(id, body)
	default:
		b.refused(id, resp.StatusCode, body)
	}
}

// mcpBridgeRefusalBytes bounds what the bridge reads of an answer it does not relay as
// it comes: the service's error envelope, or whatever a proxy on the way answered.
const mcpBridgeRefusalBytes = 1 << 20

// refused answers a request the service did not answer with JSON-RPC: with the
// service's error envelope when the body is one, with the HTTP status otherwise. A
// JSON-RPC error body (the service's 400 for a message it could not read) is relayed,
// with the request's id in place of its null one.
func (b *mcpBridge) refused(id json.RawMessage, status int, body io.Reader) {
	raw, err := io.ReadAll(io.LimitReader(body, mcpBridgeRefusalBytes))
	if err != nil {
		b.answer(id, mcpBridgeErrorCode, "reading the service's answer: "+err.Error(), nil)
		return
	}
	var rpc struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   json.RawMessage `json:"error"`
	}
	var envelope contract.ErrorResponse
	switch {
	case json.Unmarshal(raw, &rpc) == nil && rpc.JSONRPC == "2.0" && len(rpc.Error) > 0:
		if len(id) > 0 && (len(rpc.ID) == 0 || string(rpc.ID) == "null") {
			rpc.ID = id
		}
		line, err := json.Marshal(rpc)
		if err != nil {
			b.answer(id, mcpBridgeErrorCode, err.Error(), nil)
			return
		}
		b.write(line)
	case json.Unmarshal(raw, &envelope) == nil && envelope.Error.Code != "":
		b.answer(id, mcpBridgeErrorCode, envelope.Error.Code+": "+envelope.Error.Message, &envelope.Error)
	default:
		b.answer(id, mcpBridgeErrorCode, fmt.Sprintf("the service answered HTTP %d without a JSON-RPC answer", status), nil)
	}
}

// relay copies the service's JSON-RPC answer, whose first byte is in body, to one line
// of the output as it arrives: an answer of any size passes whole, and is held nowhere
// in full. The output stays locked meanwhile, as the lines must not interleave; the
// client's timeout bounds how long. An answer cut short ends its line (a line the
// client cannot read) and is followed by an error for the request, so that the client
// does not wait for it.
func (b *mcpBridge) relay(id json.RawMessage, body io.Reader) {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, err := io.Copy(oneLineWriter{b.out}, readErrors{body})
	var read *readError
	switch {
	case errors.As(err, &read):
		if _, err := io.WriteString(b.out, "\n"); err != nil {
			b.logWriteError(err)
			return
		}
		line, err := rpcErrorLine(id, mcpBridgeErrorCode, "reading the service's answer: "+read.err.Error(), nil)
		if err == nil {
			_, err = b.out.Write(append(line, '\n'))
		}
		if err != nil {
			b.logWriteError(err)
		}
	case err != nil:
		b.logWriteError(err)
	default:
		if _, err := io.WriteString(b.out, "\n"); err != nil {
			b.logWriteError(err)
		}
	}
}

// answer writes a JSON-RPC error for the request id; a notification (no id) gets none,
// its failure goes to standard error.
func (b *mcpBridge) answer(id json.RawMessage, code int, message string, data *contract.ErrorBody) {
	if len(id) == 0 {
		_, _ = fmt.Fprintln(b.log, "agent-context mcp stdio:", message)
		return
	}
	line, err := rpcErrorLine(id, code, message, data)
	if err != nil {
		_, _ = fmt.Fprintln(b.log, "agent-context mcp stdio:", err)
		return
	}
	b.write(line)
}

// rpcErrorLine is the JSON-RPC error response for id.
func rpcErrorLine(id json.RawMessage, code int, message string, data *contract.ErrorBody) ([]byte, error) {
	type rpcError struct {
		Code    int                 `json:"code"`
		Message string              `json:"message"`
		Data    *contract.ErrorBody `json:"data,omitempty"`
	}
	return json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcError        `json:"error"`
	}{"2.0", id, rpcError{code, message, data}})
}

// write writes one message, which is at most mcpBridgeRefusalBytes long, as one line.
func (b *mcpBridge) write(msg []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, err := b.out.Write(append(bytes.TrimSpace(msg), '\n')); err != nil {
		b.logWriteError(err)
	}
}

func (b *mcpBridge) logWriteError(err error) {
	_, _ = fmt.Fprintln(b.log, "agent-context mcp stdio: writing standard output:", err)
}

// firstNonSpace skips the white space that JSON allows before a value and returns the
// byte after it, left unread; io.EOF when there is none.
func firstNonSpace(r *bufio.Reader) (byte, error) {
	for {
		c, err := r.ReadByte()
		if err != nil {
			return 0, err
		}
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c, r.UnreadByte()
	}
}

// oneLineWriter drops the line breaks of a JSON text, which are only ever white space
// between its tokens (a string holds them escaped), so that it takes one line.
type oneLineWriter struct{ w io.Writer }

func (o oneLineWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		i := bytes.IndexAny(p, "\r\n")
		if i < 0 {
			m, err := o.w.Write(p)
			return n + m, err
		}
		if i > 0 {
			m, err := o.w.Write(p[:i])
			n += m
			if err != nil {
				return n, err
			}
		}
		n++
		p = p[i+1:]
	}
	return n, nil
}

// readError marks an error of the service's answer, as opposed to one of the output.
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }

// readErrors wraps the errors of r but io.EOF in *readError; it has no WriteTo, so
// that io.Copy tells the reading side's errors from the writing side's.
type readErrors struct{ r io.Reader }

func (r readErrors) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = &readError{err}
	}
	return n, err
}
