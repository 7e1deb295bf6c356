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

// Bounds of the stdio bridge: a message is one line, at most the service's body bound;
// at most mcpBridgeInFlight messages are forwarded at once (a long poll_events must not
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
		line, err := readMessageLine(lines, contract.MaxRequestBodyBytes)
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
		case errors.Is(err, io.EOF):
			return nil
		case errors.Is(err, errLineTooLong):
			b.answer(nil, mcpBridgeErrorCode, fmt.Sprintf("the message is larger than %d bytes", contract.MaxRequestBodyBytes), nil)
		case err != nil:
			return fmt.Errorf("mcp stdio: reading standard input: %w", err)
		}
	}
}

var errLineTooLong = errors.New("line too long")

// readMessageLine reads one line of at most limit bytes; a longer one is skipped to its end
// and reported as errLineTooLong.
func readMessageLine(r *bufio.Reader, limit int64) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if int64(len(line)+len(chunk)) > limit {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n')
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			return nil, errLineTooLong
		}
		line = append(line, chunk...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}

// forward posts one message and writes its answer. A notification has none; a request
// the service refused before JSON-RPC is answered with a JSON-RPC error carrying the
// service's error object.
func (b *mcpBridge) forward(ctx context.Context, msg []byte) {
	var head struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	_ = json.Unmarshal(msg, &head)
	token, err := b.token()
	if err != nil {
		b.answer(head.ID, mcpBridgeErrorCode, err.Error(), nil)
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.endpoint, bytes.NewReader(msg))
	if err != nil {
		b.answer(head.ID, mcpBridgeErrorCode, err.Error(), nil)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := b.http.Do(req)
	if err != nil {
		b.answer(head.ID, mcpBridgeErrorCode, "the service could not be reached: "+err.Error(), nil)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, contract.MaxRequestBodyBytes+1))
	if err != nil {
		b.answer(head.ID, mcpBridgeErrorCode, "reading the service's answer: "+err.Error(), nil)
		return
	}
	body = bytes.TrimSpace(body)
	var envelope contract.ErrorResponse
	switch {
	case resp.StatusCode == http.StatusAccepted || len(body) == 0 && resp.StatusCode < 300:
	case bytes.HasPrefix(body, []byte(`{"jsonrpc"`)):
		b.write(body)
	case json.Unmarshal(body, &envelope) == nil && envelope.Error.Code != "":
		b.answer(head.ID, mcpBridgeErrorCode, envelope.Error.Code+": "+envelope.Error.Message, &envelope.Error)
	default:
		b.answer(head.ID, mcpBridgeErrorCode, fmt.Sprintf("the service answered HTTP %d", resp.StatusCode), nil)
	}
}

// answer writes a JSON-RPC error for the request id; a notification (no id) gets none,
// its failure goes to standard error.
func (b *mcpBridge) answer(id json.RawMessage, code int, message string, data *contract.ErrorBody) {
	if len(id) == 0 {
		_, _ = fmt.Fprintln(b.log, "agent-context mcp stdio:", message)
		return
	}
	type rpcError struct {
		Code    int                 `json:"code"`
		Message string              `json:"message"`
		Data    *contract.ErrorBody `json:"data,omitempty"`
	}
	line, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcError        `json:"error"`
	}{"2.0", id, rpcError{code, message, data}})
	if err != nil {
		_, _ = fmt.Fprintln(b.log, "agent-context mcp stdio:", err)
		return
	}
	b.write(line)
}

// write writes one message as one line.
func (b *mcpBridge) write(msg []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, err := b.out.Write(append(bytes.TrimSpace(msg), '\n')); err != nil {
		_, _ = fmt.Fprintln(b.log, "agent-context mcp stdio: writing standard output:", err)
	}
}
