package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/labstack/echo/v4"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/mcpserver"
	"github.com/agent-context/agent-context/runtime"
)

// This file mounts the MCP door (package mcpserver, docs/mcp.md) at POST
// /internal/v1/mcp behind the same authentication, body bounds and rate limits as every
// route, and serves its protected resource metadata (RFC 9728).

// mcpMethodCallTool is the JSON-RPC method of a tool call.
const mcpMethodCallTool = "tools/call"

// mcpEchoKey carries the echo context of an MCP request to the door's host callbacks.
type mcpEchoKey struct{}

// mcpHost is the server as the door's host: its rate limits and its error envelope.
type mcpHost struct{ s *Server }

// Admit rate-limits one tool call under the tool's own name (mcp:<tool>).
func (h mcpHost) Admit(ctx context.Context, p runtime.Principal, tool string) error {
	return h.s.rateLimiter.Admit(ctx, tool, p)
}

// Refusal is the envelope's error object for err, as the route would answer it.
func (h mcpHost) Refusal(ctx context.Context, err error) contract.ErrorBody {
	c, ok := ctx.Value(mcpEchoKey{}).(echo.Context)
	if !ok {
		// Only a call that did not come through serveMCP lands here; it gets the
		// code table's answer without the request's log.
		re := toError(err)
		info := contract.Codes[re.Code]
		return contract.ErrorBody{Code: re.Code, Message: re.Message, Category: info.Category, Retryable: info.Retryable,
			Details: map[string]any{}}
	}
	return h.s.errorBody(c, err)
}

// mcpRoutes builds the door over the server's use cases and registers its routes.
func (s *Server) mcpRoutes(authorizationServers []string) {
	s.mcpAuthServers = append([]string{}, authorizationServers...)
	s.mcp = mcpserver.New(mcpserver.Config{
		Host: mcpHost{s}, Logger: s.log, Version: s.version,
		Messages: s.messages, Windows: s.windows, Entries: s.entries, Recall: s.recall,
		Knowledge: s.knowledge, A2A: s.a2a, MaxBodyBytes: s.maxBody.maxBytes,
	})
	s.handle(contract.RouteMCP, s.serveMCP)
	s.handle(contract.RouteOAuthProtectedResource, s.protectedResource)
}

// serveMCP hands an authenticated request to the door. The body is read here under the
// route's bounds (413 and the in-flight budget, as for every route) and looked at once:
// a body that is not one JSON-RPC message (invalid JSON, a batch array, no method) is
// answered 400 with a JSON-RPC error; a tool call of a known tool is logged, counted
// and traced as mcp:<tool> and rate-limited by the door; anything else is rate-limited
// here as a request of the route.
func (s *Server) serveMCP(c echo.Context) error {
	req := c.Request()
	if err := checkJSONContentType(req.Header.Get(echo.HeaderContentType)); err != nil {
		return err
	}
	if err := checkContentEncoding(req.Header.Values(headerContentEncoding)); err != nil {
		return err
	}
	hold := &bodyHold{budget: s.maxBody.budget}
	defer hold.release()
	body, err := s.maxBody.readBody(req, hold)
	if err != nil {
		return err
	}
	p, _ := c.Get(ctxKeyPrincipal).(runtime.Principal)
	msg, fail := peekMCPMessage(body)
	if fail != nil {
		return writeJSON(c, http.StatusBadRequest, fail)
	}
	if msg.Method == mcpMethodCallTool && s.mcp.Known(msg.Params.Name) {
		c.Set(ctxKeyRouteLabel, "mcp:"+msg.Params.Name)
	} else if err := s.rateLimiter.Admit(req.Context(), contract.RouteMCP.Method+" "+contract.RouteMCP.Path, p); err != nil {
		return err
	}
	ctx := context.WithValue(mcpserver.WithPrincipal(req.Context(), p), mcpEchoKey{}, c)
	forward := req.WithContext(ctx)
	forward.Body = io.NopCloser(bytes.NewReader(body))
	forward.ContentLength = int64(len(body))
	forward.Header = req.Header.Clone()
	// The SDK wants both media types in Accept. A client that accepts only the event
	// stream gets one; any other (JSON, */*, none) gets application/json.
	handler := s.mcp.Handler()
	if acceptsOnlyEventStream(req.Header.Values("Accept")) {
		handler = s.mcp.StreamHandler()
	}
	forward.Header.Set("Accept", "application/json, text/event-stream")
	handler.ServeHTTP(c.Response(), forward)
	return nil
}

// mcpMessage is what the mount reads of a JSON-RPC message: the method, and the tool
// name of a tool call.
type mcpMessage struct {
	Method string `json:"method"`
	Params struct {
		Name string `json:"name"`
	} `json:"params"`
}

// mcpRefusal is a JSON-RPC error response with a null id: the request's could not be
// read.
func mcpRefusal(code int, message string) *contract.RPCResponse {
	return &contract.RPCResponse{JSONRPC: "2.0", ID: json.RawMessage("null"), Error: &contract.RPCError{Code: code, Message: message}}
}

// peekMCPMessage reads body as one JSON-RPC message, or returns the error to answer.
// The SDK checks the rest (jsonrpc version, id, params) and answers in JSON-RPC too.
func peekMCPMessage(body []byte) (mcpMessage, *contract.RPCResponse) {
	var msg mcpMessage
	body = bytes.TrimSpace(bytes.TrimPrefix(body, utf8BOM))
	if !jsontext.Value(body).IsValid() {
		return msg, mcpRefusal(contract.RPCParseError, "the request is not valid JSON")
	}
	switch body[0] {
	case '[':
		return msg, mcpRefusal(contract.RPCInvalidRequest, "batch requests are not supported: send one JSON-RPC message per request")
	case '{':
	default:
		return msg, mcpRefusal(contract.RPCInvalidRequest, "the request must be a JSON-RPC message (a JSON object)")
	}
	var head struct {
		Method json.RawMessage `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(body, &head) != nil || len(head.Method) == 0 || json.Unmarshal(head.Method, &msg.Method) != nil {
		return msg, mcpRefusal(contract.RPCInvalidRequest, "the request has no method")
	}
	if msg.Method == mcpMethodCallTool && len(head.Params) > 0 {
		// A malformed params is the SDK's to refuse; the name only labels the request.
		_ = json.Unmarshal(head.Params, &msg.Params)
	}
	return msg, nil
}

// acceptsOnlyEventStream reports whether an Accept header admits text/event-stream
// but not application/json.
func acceptsOnlyEventStream(values []string) bool {
	stream, plain := false, false
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			media, _, _ := strings.Cut(strings.TrimSpace(part), ";")
			switch strings.ToLower(strings.TrimSpace(media)) {
			case "text/event-stream":
				stream = true
			case "application/json", "application/*", "*/*":
				plain = true
			}
		}
	}
	return stream && !plain
}

// protectedResource serves the RFC 9728 metadata of the MCP endpoint: no credential,
// the resource's URL, the configured authorization servers ([] when none) and the
// header as the one way to present a token.
func (s *Server) protectedResource(c echo.Context) error {
	return writeJSON(c, http.StatusOK, contract.ProtectedResourceMetadata{
		Resource:               s.baseURL(c) + contract.PathMCP,
		AuthorizationServers:   s.mcpAuthServers,
		BearerMethodsSupported: []string{"header"},
	})
}
