// Package client is the typed Go client of agent-context: one method per route of
// contract.Routes(), the contract's DTOs in and out, and every error answer as an
// *Error carrying the envelope.
//
// Adding a route's method is one pattern: a method that names the route and its
// request and response types and calls do (see messages.go).
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agent-context/agent-context/contract"
)

// DefaultBaseURL is where `agent-context serve` listens by default.
const DefaultBaseURL = "http://127.0.0.1:5120"

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 1 << 20

// Client calls one agent-context server. It is safe for concurrent use.
type Client struct {
	base     string
	http     *http.Client
	token    string
	userAuth string
	header   http.Header
}

// Option configures a Client.
type Option func(*Client)

// WithBaseURL sets the server's base URL (default DefaultBaseURL), e.g.
// http://agent-context:5120. A trailing slash is ignored.
func WithBaseURL(u string) Option { return func(c *Client) { c.base = strings.TrimRight(u, "/") } }

// WithBearerToken sends Authorization: Bearer token (a runtime token or the static
// service token).
func WithBearerToken(token string) Option { return func(c *Client) { c.token = token } }

// WithUserAuthorization sends the end user's credential in x-infra-user-authorization,
// as the gateway does (value as it goes on the wire, e.g. "Bearer <user token>").
func WithUserAuthorization(value string) Option { return func(c *Client) { c.userAuth = value } }

// WithHTTPClient sets the HTTP client (default: one with a 60 s timeout).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithHeader adds a header to every request, e.g. the x-infra-tenant-id scope headers
// of static-token mode.
func WithHeader(name, value string) Option { return func(c *Client) { c.header.Add(name, value) } }

// New returns a client.
func New(opts ...Option) *Client {
	c := &Client{base: DefaultBaseURL, http: &http.Client{Timeout: time.Minute}, header: http.Header{}}
	for _, o := range opts {
		o(c)
	}
	return c
}

type requestIDKey struct{}

// WithRequestID returns a context whose requests carry X-Request-Id: id, so the
// server's log lines and the error's RequestID match the caller's.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// Error is an error answer of the server. Code, Category, Retryable, RequestID and
// Details are the envelope's (docs/api.md); an answer that is not an envelope
// (a proxy's page, say) has an empty Code and the start of the body in Message.
type Error struct {
	StatusCode int
	Code       string
	Message    string
	Category   string
	Retryable  bool
	RequestID  string
	Details    map[string]any
	// RetryAfterMs is details.retryAfterMs, else the Retry-After header in
	// milliseconds, else 0.
	RetryAfterMs int64
}

// Error implements error.
func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("agent-context: HTTP %d: %s", e.StatusCode, e.Message)
	}
	return fmt.Sprintf("agent-context: %s (HTTP %d, request %s): %s", e.Code, e.StatusCode, e.RequestID, e.Message)
}

// Field is details.field: the member or header the error is about, or "".
func (e *Error) Field() string {
	f, _ := e.Details["field"].(string)
	return f
}

// ErrorCode returns the contract code of err when it is (or wraps) an *Error, else "".
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// do sends route with body (nil for a GET) and decodes a 2xx answer into out (nil
// ignores the body). It returns the status. header holds name, value pairs set on
// this request only.
func (c *Client) do(ctx context.Context, route contract.Route, body, out any, header ...string) (int, error) {
	var reader io.Reader
	if body != nil {
		buf, err := json.Marshal(body)
		if err != nil {
			return 0, fmt.Errorf("agent-context: encode %s request: %w", route.Path, err)
		}
		reader = bytes.NewReader(buf)
	}
	req, err := http.NewRequestWithContext(ctx, route.Method, c.base+route.Path, reader)
	if err != nil {
		return 0, err
	}
	for name, values := range c.header {
		req.Header[name] = append([]string(nil), values...)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.userAuth != "" {
		req.Header.Set("x-infra-user-authorization", c.userAuth)
	}
	if id, ok := ctx.Value(requestIDKey{}).(string); ok {
		req.Header.Set("X-Request-Id", id)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, decodeError(resp)
	}
	switch v := out.(type) {
	case nil:
		_, err = io.Copy(io.Discard, resp.Body)
	case *[]byte:
		*v, err = io.ReadAll(resp.Body)
	default:
		err = json.NewDecoder(resp.Body).Decode(out)
	}
	if err != nil {
		return resp.StatusCode, fmt.Errorf("agent-context: read %s answer: %w", route.Path, err)
	}
	return resp.StatusCode, nil
}

// call is do for the routes whose success status says nothing more.
func call[Resp any](ctx context.Context, c *Client, route contract.Route, body any) (*Resp, error) {
	out := new(Resp)
	if _, err := c.do(ctx, route, body, out); err != nil {
		return nil, err
	}
	return out, nil
}

// callCreated is do for idempotent creates: created is true for 201 (written now),
// false for 200 (an identical record was already stored).
func callCreated[Resp any](ctx context.Context, c *Client, route contract.Route, body any) (*Resp, bool, error) {
	out := new(Resp)
	status, err := c.do(ctx, route, body, out)
	if err != nil {
		return nil, false, err
	}
	return out, status == http.StatusCreated || status == http.StatusAccepted, nil
}

func decodeError(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &Error{StatusCode: resp.StatusCode, RequestID: resp.Header.Get("X-Request-Id")}
	var env contract.ErrorResponse
	if json.Unmarshal(raw, &env) != nil || env.Error.Code == "" {
		e.Message = strings.TrimSpace(string(raw[:min(len(raw), 512)]))
		if e.Message == "" {
			e.Message = http.StatusText(resp.StatusCode)
		}
		return e
	}
	b := env.Error
	e.Code, e.Message, e.Category, e.Retryable, e.Details = b.Code, b.Message, b.Category, b.Retryable, b.Details
	if b.RequestID != "" {
		e.RequestID = b.RequestID
	}
	if ms, ok := b.Details["retryAfterMs"].(float64); ok {
		e.RetryAfterMs = int64(ms)
	} else if secs, err := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64); err == nil {
		e.RetryAfterMs = secs * 1000
	}
	return e
}
