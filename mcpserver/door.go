package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/gate"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
	"github.com/agent-context/agent-context/runtime/conversation"
	"github.com/agent-context/agent-context/runtime/knowledge"
	"github.com/agent-context/agent-context/runtime/memory"
)

// Config holds the gate, the door's settings and the use cases the tools call.
type Config struct {
	// Gate authenticates, admits and answers every request, as for every door.
	Gate      *gate.Gate
	Logger    *slog.Logger
	Version   string
	Messages  *conversation.Messages
	Windows   *conversation.Windows
	Entries   *memory.Entries
	Recall    *memory.Recall
	Knowledge *knowledge.Service
	A2A       A2A
	// MaxBodyBytes bounds a request body (AGENT_CONTEXT_MCP_MAX_BODY; default
	// DefaultMaxBodyBytes): a larger one is refused with 413 before it is parsed.
	MaxBodyBytes int64
	// PublicURL is the base URL the protected resource metadata names; empty derives
	// it from each request.
	PublicURL string
	// AuthorizationServers are the OAuth authorization servers the protected resource
	// metadata names (may be none).
	AuthorizationServers []string
}

// A2A are the agent-to-agent concepts ctx_agent and ctx_task serve.
type A2A struct {
	Agents    *a2a.Agents
	Messages  *a2a.Messages
	Tasks     *a2a.Tasks
	Events    *a2a.Events
	Snapshots *a2a.Snapshots
}

// Door is the MCP endpoint: an SDK server with every tool, and its stateless
// streamable HTTP handler.
type Door struct {
	gate          *gate.Gate
	maxBody       int64
	publicURL     string
	authServers   []string
	server        *mcp.Server
	handler       http.Handler
	streamHandler http.Handler
	tools         map[string]*tool
}

// tool is what the door knows of a registered tool beyond the SDK: how to check its
// arguments and which arguments each of its actions takes.
type tool struct {
	name string
	// actions maps each action to the arguments it takes besides action itself; nil
	// for a tool without actions.
	actions map[string][]string
	// required names the arguments a call must carry.
	required []string
	schema   *jsonschema.Resolved
	// anyValue names the arguments that take any JSON value (json.RawMessage).
	anyValue map[string]bool
}

type principalKey struct{}

// WithPrincipal returns ctx carrying the authenticated caller of the HTTP request; the
// host sets it before the request reaches Handler.
func WithPrincipal(ctx context.Context, p runtime.Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

func principalFrom(ctx context.Context) (runtime.Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(runtime.Principal)
	return p, ok
}

// New builds the door with every tool of contract.MCPToolRoutes.
func New(cfg Config) *Door {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	// The SDK logs at Info the connection and disconnection of the one-request
	// session every stateless request opens: three lines a call that the request log
	// already covers. Its warnings and errors pass.
	sdkLog := slog.New(minLevel{Handler: log.Handler(), min: slog.LevelWarn})
	d := &Door{gate: cfg.Gate, maxBody: cfg.MaxBodyBytes, publicURL: cfg.PublicURL,
		authServers: append([]string{}, cfg.AuthorizationServers...), tools: map[string]*tool{}}
	if d.maxBody <= 0 {
		d.maxBody = DefaultMaxBodyBytes
	}
	d.server = mcp.NewServer(&mcp.Implementation{Name: contract.MCPServerName, Title: "agent-context", Version: cfg.Version},
		&mcp.ServerOptions{
			Logger: sdkLog,
			Instructions: "agent-context is the system of record for what agents said, saw and remembered. " +
				"Use memory_remember / memory_recall for durable facts, conversation_* for the message history, " +
				"and ctx_agent / ctx_task to coordinate with other agents.",
		})
	d.server.AddReceivingMiddleware(encodeResults)
	d.memoryTools(cfg.Entries, cfg.Recall)
	d.conversationTools(cfg.Messages, cfg.Windows)
	d.knowledgeTools(cfg.Knowledge)
	d.agentTools(cfg.A2A)
	for _, tr := range contract.MCPToolRoutes() {
		if d.tools[tr.Tool] == nil {
			panic(fmt.Sprintf("mcpserver: tool %s of contract.MCPToolRoutes is not registered", tr.Tool))
		}
	}
	transport := func(jsonResponse bool) http.Handler {
		return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return d.server },
			&mcp.StreamableHTTPOptions{
				Stateless:           true,
				JSONResponse:        jsonResponse,
				Logger:              sdkLog,
				MaxRequestBodyBytes: d.maxBody,
				// Replicas sit behind a gateway that sets its own Host header, and the
				// gate authenticates every request: the credential, not the Host
				// header, guards the tools.
				DisableLocalhostProtection: true,
			})
	}
	d.handler, d.streamHandler = transport(true), transport(false)
	return d
}

// minLevel is a log handler that drops records below min.
type minLevel struct {
	slog.Handler
	min slog.Level
}

// Enabled reports whether the handler takes records of level l.
func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

// WithAttrs is the handler with attrs added.
func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{Handler: h.Handler.WithAttrs(attrs), min: h.min}
}

// WithGroup is the handler with a group opened.
func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{Handler: h.Handler.WithGroup(name), min: h.min}
}

// Known reports whether name is a tool of the door.
func (d *Door) Known(name string) bool { return d.tools[name] != nil }

// Tools lists the tools' names, sorted.
func (d *Door) Tools() []string {
	names := make([]string, 0, len(d.tools))
	for n := range d.tools {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// toolSpec describes a tool to add: its name, what it says to an agent, and whether
// it only reads (an MCP annotation clients use to decide on confirmation).
type toolSpec struct {
	name        string
	description string
	readOnly    bool
	idempotent  bool
	// actions maps each action to the arguments it takes (ctx_agent and ctx_task).
	actions map[string][]string
}

// addTool registers a tool with the SDK's low-level handler: the door checks and
// decodes the arguments itself (admit, into a fresh In), calls the use case and
// answers with its result encoded once (answer); the SDK neither re-validates nor
// re-decodes the arguments, nor re-encodes the result through reflection.
func addTool[In any](d *Door, spec toolSpec, call func(ctx context.Context, p runtime.Principal, in *In) (any, error)) {
	schema := inputSchema[In](spec)
	resolved, err := schema.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: tool %s: %v", spec.name, err))
	}
	t := &tool{name: spec.name, actions: spec.actions, required: schema.Required, schema: resolved, anyValue: anyValueArgs[In]()}
	d.tools[spec.name] = t
	annotations := &mcp.ToolAnnotations{ReadOnlyHint: spec.readOnly, IdempotentHint: spec.idempotent,
		DestructiveHint: new(false), OpenWorldHint: new(false)}
	d.server.AddTool(&mcp.Tool{Name: spec.name, Description: spec.description, InputSchema: schema, Annotations: annotations},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			in := new(In)
			p, route, err := d.admit(ctx, t, req.Params.Arguments, in)
			if err != nil {
				return d.refusal(ctx, err), nil
			}
			out, err := call(ctx, p, in)
			if err != nil {
				return d.refusal(ctx, gate.Bound(route, err)), nil
			}
			res, err := answer(out)
			if err != nil {
				return d.refusal(ctx, fmt.Errorf("mcpserver: encoding the answer of %s: %w", t.name, err)), nil
			}
			return res, nil
		})
}

// anyValueArgs names the members of In that take any JSON value.
func anyValueArgs[In any]() map[string]bool {
	names := map[string]bool{}
	in := reflect.TypeFor[In]()
	for i := range in.NumField() {
		f := in.Field(i)
		if f.Type == reflect.TypeFor[json.RawMessage]() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			names[name] = true
		}
	}
	return names
}

// inputSchema is the JSON Schema of In as the SDK would infer it (every property
// described by its jsonschema tag; additionalProperties false), with the actions of
// spec as the enum of action and json.RawMessage members taking any JSON value.
func inputSchema[In any](spec toolSpec) *jsonschema.Schema {
	schema, err := jsonschema.For[In](&jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[json.RawMessage](): {Description: "any JSON value"},
	}})
	if err != nil {
		panic(fmt.Sprintf("mcpserver: tool %s: %v", spec.name, err))
	}
	for name, prop := range schema.Properties {
		if prop.Description == "" {
			panic(fmt.Sprintf("mcpserver: tool %s: argument %s has no description", spec.name, name))
		}
	}
	if spec.actions != nil {
		action := schema.Properties["action"]
		for _, a := range contract.MCPToolActions(spec.name) {
			action.Enum = append(action.Enum, a)
		}
	}
	return schema
}

// admit checks one call of t with raw arguments in the order the HTTP routes check a
// request — the rate limit, the capability of the wrapped route (of the call's action,
// for ctx_agent and ctx_task), then the arguments, strictly (unknown, duplicate or
// mistyped members name the offending argument), against the tool's input schema last
// — and decodes them into in. It returns the caller and the route the call serves
// (whose bounds its refusals carry). Every refusal becomes a tool
// result with isError, as the contract asks; an unknown tool never gets here (the SDK
// answers it with JSON-RPC -32602).
func (d *Door) admit(ctx context.Context, t *tool, raw json.RawMessage, in any) (runtime.Principal, contract.Route, error) {
	var route contract.Route
	p, ok := principalFrom(ctx)
	if !ok {
		return p, route, fmt.Errorf("mcpserver: a call of %s arrived without a principal", t.name)
	}
	if err := d.gate.Admit(ctx, p, "mcp:"+t.name); err != nil {
		return p, route, err
	}
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	members, err := topMembers(raw)
	if err != nil {
		return p, route, err
	}
	action := ""
	if t.actions != nil {
		if action, err = actionOf(t, members); err != nil {
			return p, route, err
		}
	}
	route, ok = contract.MCPToolRouteOf(t.name, action)
	if !ok {
		return p, route, fmt.Errorf("mcpserver: %s %q has no route in contract.MCPToolRoutes", t.name, action)
	}
	if err := gate.Permit(p, route); err != nil {
		return p, route, err
	}
	if err := decodeArguments(raw, in); err != nil {
		return p, route, err
	}
	for _, name := range t.required {
		if v, ok := members[name]; !ok || v.Kind() == 'n' {
			return p, route, runtime.Invalid(name, "%s is required", name)
		}
	}
	if t.actions != nil {
		takes := t.actions[action]
		for name, v := range members {
			if name != "action" && v.Kind() != 'n' && !slices.Contains(takes, name) {
				return p, route, runtime.Invalid(name, "%s is not an argument of action %s (it takes %s)", name, action, orNone(takes))
			}
		}
	}
	// The schema is checked on a tree of the arguments but those that take any JSON
	// value (metadata): the strict decoding above has read those as bytes, the schema
	// says nothing of them, and a tree of a large one would cost many times its size.
	tree := make(map[string]any, len(members))
	for name, v := range members {
		if t.anyValue[name] {
			continue
		}
		var x any
		if err := json.Unmarshal(v, &x); err != nil {
			return p, route, runtime.Invalid(name, "malformed JSON")
		}
		tree[name] = x
	}
	if err := t.schema.Validate(tree); err != nil {
		return p, route, runtime.Invalid("arguments", "the arguments do not match the tool's input schema: %v", err)
	}
	return p, route, nil
}

// actionOf reads the action of a call: present, a string and one of t's actions.
func actionOf(t *tool, members map[string]jsontext.Value) (string, error) {
	raw, ok := members["action"]
	if !ok || raw.Kind() == 'n' {
		return "", runtime.Invalid("action", "action is required: one of %s", strings.Join(contract.MCPToolActions(t.name), ", "))
	}
	var action string
	if raw.Kind() != '"' || json.Unmarshal(raw, &action) != nil {
		return "", runtime.Invalid("action", "action must be a string")
	}
	if _, ok := t.actions[action]; !ok {
		return "", runtime.Invalid("action", "unknown action %q: one of %s", action, strings.Join(contract.MCPToolActions(t.name), ", ")).
			With("allowed", contract.MCPToolActions(t.name))
	}
	return action, nil
}

// topMembers splits a JSON object into its members; anything but an object, or a
// duplicate member, is refused.
func topMembers(raw []byte) (map[string]jsontext.Value, error) {
	if k := jsontext.Value(raw).Kind(); k != '{' {
		return nil, runtime.Invalid("arguments", "the arguments must be a JSON object")
	}
	members := map[string]jsontext.Value{}
	if err := decodeArguments(raw, &members); err != nil {
		return nil, err
	}
	return members, nil
}

// decodeArguments decodes raw into v with the routes' strict decoder; a failure that
// names no argument names the arguments as a whole.
func decodeArguments(raw []byte, v any) error {
	err := runtime.DecodeJSON(raw, v)
	var e *runtime.Error
	if errors.As(err, &e) && e.Details["field"] == "body" {
		e.With("field", "arguments")
	}
	return err
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "no other argument"
	}
	return strings.Join(names, ", ")
}

// refusal is the tool result of a refused call: isError, the contract's error object
// as structuredContent, and a text item starting with the code (then the same JSON, for
// clients that read text only).
func (d *Door) refusal(ctx context.Context, err error) *mcp.CallToolResult {
	_, refused := d.gate.Refuse(ctx, err)
	body := contract.MCPToolError{Error: refused}
	raw, merr := json.Marshal(body)
	if merr != nil {
		raw = []byte(`{"error":{"code":"` + contract.CodeInternal + `"}}`)
	}
	return &mcp.CallToolResult{
		IsError:           true,
		StructuredContent: json.RawMessage(raw),
		Content:           []mcp.Content{&mcp.TextContent{Text: body.Error.Code + ": " + body.Error.Message + "\n" + string(raw)}},
	}
}
