package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/gate"
)

// This file is the door's HTTP side: POST /internal/v1/mcp behind the gate — the same
// authentication, rate limits and error envelope as every route, its own body bound —
// and the endpoint's protected resource metadata (RFC 9728).

// DefaultMaxBodyBytes bounds an MCP request body when Config.MaxBodyBytes is unset:
// a tool's arguments are bounded by their routes' limits, far below it.
const DefaultMaxBodyBytes = 4 << 20

// Methods the door serves; anything else is -32601 at once (notifications/* too are
// served: the SDK takes them and answers nothing). server/discover is the handshake of
// the newest protocol version (2026-07-28), which replaces initialize there: without it
// the SDK's own client falls back to an older version.
const (
	methodInitialize = "initialize"
	methodDiscover   = "server/discover"
	methodPing       = "ping"
	methodListTools  = "tools/list"
	methodCallTool   = "tools/call"
	notifications    = "notifications/"
)

// protocolKeys are the members of a JSON-RPC message and of the params of the served
// methods. The SDK reads them with encoding/json, which matches names regardless of
// case and keeps the last of duplicates; the door reads them exactly. A member that
// differs from one of them only in case would be read one way by the door and
// another by the SDK, so it is refused.
var protocolKeys = []string{
	"jsonrpc", "id", "method", "params", "result", "error",
	"name", "arguments", "_meta", "progressToken", "cursor", "protocolVersion", "capabilities", "clientInfo",
}

// Routes are the routes the door serves.
func (d *Door) Routes() []contract.Route {
	return []contract.Route{contract.RouteMCP, contract.RouteOAuthProtectedResource}
}

// ServeHTTP serves the door's routes.
func (d *Door) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == contract.PathOAuthProtectedResource {
		d.protectedResource(w, r)
		return
	}
	d.serveMCP(w, r)
}

// serveMCP admits one JSON-RPC message and hands it to the SDK. The gate
// authenticates the caller, then reads the body under the door's bound (413 before a
// byte is parsed, and the in-flight budget). The message is read once, exactly as the
// SDK will read it: a body that is not one JSON-RPC message (invalid JSON, a batch,
// no method, a duplicate or case-variant key) is answered 400 with a JSON-RPC error,
// a method the door does not serve -32601; a tool call of a known tool is logged,
// counted and traced as mcp:<tool> and rate-limited by the tool; anything else is
// rate-limited here as a request of the route.
func (d *Door) serveMCP(w http.ResponseWriter, r *http.Request) {
	p, err := d.gate.Authenticate(r)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+d.baseURL(r)+contract.PathOAuthProtectedResource+
			`", realm="`+contract.Service+`"`)
		d.gate.WriteError(w, r, err)
		return
	}
	if err := gate.CheckJSONRequest(r); err != nil {
		d.gate.WriteError(w, r, err)
		return
	}
	body, release, err := d.gate.ReadBody(r, d.maxBody)
	defer release()
	if errors.Is(err, gate.ErrClientClosed) {
		gate.RecordOf(r.Context()).ClientGone = true
		return
	}
	if err != nil {
		d.gate.WriteError(w, r, err)
		return
	}
	msg, fail := readMessage(body)
	if fail != nil {
		gate.RecordOf(r.Context()).Code = contract.RPCReasons[fail.Error.Code]
		_ = gate.WriteJSON(w, r, http.StatusBadRequest, fail)
		return
	}
	if !served(msg.Method) {
		d.answerRPC(w, r, msg.ID, contract.RPCMethodNotFound, "method "+msg.Method+" is not served")
		return
	}
	if msg.Method == methodCallTool && d.Known(msg.Params.Name) {
		gate.RecordOf(r.Context()).Route = "mcp:" + msg.Params.Name
	} else if err := d.gate.Admit(r.Context(), p, gate.RateName(contract.RouteMCP)); err != nil {
		d.gate.WriteError(w, r, err)
		return
	}
	forward := r.WithContext(WithPrincipal(r.Context(), p))
	forward.Body = io.NopCloser(bytes.NewReader(body))
	forward.ContentLength = int64(len(body))
	forward.Header = r.Header.Clone()
	// The SDK wants both media types in Accept. A client that accepts only the event
	// stream gets one; any other (JSON, */*, none) gets application/json.
	handler := d.handler
	if acceptsOnlyEventStream(r.Header.Values("Accept")) {
		handler = d.streamHandler
	}
	forward.Header.Set("Accept", "application/json, text/event-stream")
	handler.ServeHTTP(w, forward)
}

// served reports whether the door serves method.
func served(method string) bool {
	switch method {
	case methodInitialize, methodDiscover, methodPing, methodListTools, methodCallTool:
		return true
	}
	return strings.HasPrefix(method, notifications)
}

// answerRPC answers the request id with a JSON-RPC error (HTTP 200, as the SDK answers
// its own errors); a notification (no id) gets 202 and no body.
func (d *Door) answerRPC(w http.ResponseWriter, r *http.Request, id jsontext.Value, code int, message string) {
	gate.RecordOf(r.Context()).Code = contract.RPCReasons[code]
	if len(id) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	_ = gate.WriteJSON(w, r, http.StatusOK, &contract.RPCResponse{JSONRPC: "2.0", ID: json.RawMessage(id),
		Error: &contract.RPCError{Code: code, Message: message}})
}

// message is what the door reads of a JSON-RPC message: its id, its method, and the
// tool name of a tool call.
type message struct {
	ID     jsontext.Value
	Method string
	Params struct {
		Name string
	}
}

// refusal is a JSON-RPC error response with a null id: the request could not be read.
func refusal(code int, message string) *contract.RPCResponse {
	return &contract.RPCResponse{JSONRPC: "2.0", ID: json.RawMessage("null"), Error: &contract.RPCError{Code: code, Message: message}}
}

// readMessage reads body as one JSON-RPC message, or returns the error to answer. The
// SDK checks the rest (jsonrpc version, id, params) and answers in JSON-RPC too.
func readMessage(body []byte) (message, *contract.RPCResponse) {
	var msg message
	body = gate.TrimJSON(body)
	if len(body) == 0 || !jsontext.Value(body).IsValid(jsontext.AllowDuplicateNames(true)) {
		return msg, refusal(contract.RPCParseError, "the request is not valid JSON")
	}
	switch body[0] {
	case '[':
		return msg, refusal(contract.RPCInvalidRequest, "batch requests are not supported: send one JSON-RPC message per request")
	case '{':
	default:
		return msg, refusal(contract.RPCInvalidRequest, "the request must be a JSON-RPC message (a JSON object)")
	}
	if !jsontext.Value(body).IsValid() {
		return msg, refusal(contract.RPCInvalidRequest, "the request has a duplicate member")
	}
	head, fail := protocolMembers(body)
	if fail != nil {
		return msg, fail
	}
	if len(head["params"]) > 0 && head["params"].Kind() == '{' {
		params, fail := protocolMembers(head["params"])
		if fail != nil {
			return msg, fail
		}
		if name := params["name"]; name.Kind() == '"' {
			_ = json.Unmarshal(name, &msg.Params.Name)
		}
	}
	msg.ID = head["id"]
	if method := head["method"]; method.Kind() != '"' || json.Unmarshal(method, &msg.Method) != nil {
		return msg, refusal(contract.RPCInvalidRequest, "the request has no method")
	}
	return msg, nil
}

// protocolMembers splits a JSON object, known to be valid and without duplicates,
// into its members, refusing one whose name differs from a protocol key only in case.
func protocolMembers(object []byte) (map[string]jsontext.Value, *contract.RPCResponse) {
	dec := jsontext.NewDecoder(bytes.NewReader(object))
	if _, err := dec.ReadToken(); err != nil {
		return nil, refusal(contract.RPCInvalidRequest, "the request must be a JSON object")
	}
	members := map[string]jsontext.Value{}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, refusal(contract.RPCParseError, "the request is not valid JSON")
		}
		name := tok.String()
		value, err := dec.ReadValue()
		if err != nil {
			return nil, refusal(contract.RPCParseError, "the request is not valid JSON")
		}
		for _, key := range protocolKeys {
			if name != key && strings.EqualFold(name, key) {
				return nil, refusal(contract.RPCInvalidRequest, "member "+name+" differs from "+key+" only in case")
			}
		}
		members[name] = value.Clone()
	}
	return members, nil
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
func (d *Door) protectedResource(w http.ResponseWriter, r *http.Request) {
	if err := gate.WriteJSON(w, r, http.StatusOK, contract.ProtectedResourceMetadata{
		Resource:               d.baseURL(r) + contract.PathMCP,
		AuthorizationServers:   d.authServers,
		BearerMethodsSupported: []string{"header"},
	}); err != nil {
		d.gate.WriteError(w, r, err)
	}
}

// baseURL is the URL the service is reached at.
func (d *Door) baseURL(r *http.Request) string { return gate.BaseURL(r, d.publicURL) }
