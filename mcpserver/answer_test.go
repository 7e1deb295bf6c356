package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/gate"
	"github.com/agent-context/agent-context/runtime"
)

// records are messages whose JSON needs escaping: HTML characters, quotes, a
// backslash, a newline, non-ASCII text, and metadata with insignificant whitespace.
var records = &contract.MessagesResponse{Messages: []contract.ConversationRecord{
	{ID: "m-1", Scope: contract.ConversationScope{ConversationID: "c-1"}, Role: "user",
		Content: "<b>\"deploy\" & roll back</b>\\ now\nplease — ünïcødé ✓", Sequence: 1, CreatedAtMs: 1_700_000_000_000,
		Metadata: json.RawMessage(`{ "k" : [1, 2, "<x>"] }`)},
	{ID: "m-2", Scope: contract.ConversationScope{ConversationID: "c-1"}, Role: "assistant", Content: "", Sequence: 2},
}}

// TestEncodeToolResultIsTheSDKsJSON holds the door's one-pass encoding of a tool result
// to the JSON value the SDK's own encoding gives, for the results the door makes and
// for every shape it must not lose (another content type, annotations, _meta, a
// structuredContent that is not raw JSON).
func TestEncodeToolResultIsTheSDKsJSON(t *testing.T) {
	recent, err := answer(records)
	require.NoError(t, err)
	generic, err := answer(map[string]any{"entry": map[string]any{"id": "e-1", "tags": []string{"a<b"}}, "score": 0.5})
	require.NoError(t, err)
	refusalBody := `{"error":{"code":"NOT_FOUND","message":"no entry \"e-9\"","details":{}}}`
	cases := map[string]*mcp.CallToolResult{
		"a message read":     recent,
		"a reflected answer": generic,
		"a refusal": {IsError: true, StructuredContent: json.RawMessage(refusalBody),
			Content: []mcp.Content{&mcp.TextContent{Text: "NOT_FOUND: no entry \"e-9\"\n" + refusalBody}}},
		"_meta": {Meta: mcp.Meta{"trace": "t-1"}, StructuredContent: json.RawMessage(`{"a":1}`),
			Content: []mcp.Content{&mcp.TextContent{Text: `{"a":1}`}}},
		"other content": {Content: []mcp.Content{
			&mcp.ImageContent{Data: []byte{1, 2, 3}, MIMEType: "image/png"},
			&mcp.TextContent{Text: "annotated", Annotations: &mcp.Annotations{Priority: 0.5}},
			&mcp.TextContent{Text: "plain"},
		}},
		"structured value": {StructuredContent: map[string]int{"n": 1}, Content: []mcp.Content{&mcp.TextContent{Text: `{"n":1}`}}},
		"empty":            {Content: []mcp.Content{}},
	}
	for name, r := range cases {
		t.Run(name, func(t *testing.T) {
			want, err := r.MarshalJSON()
			require.NoError(t, err)
			got, err := encodeToolResult(r)
			require.NoError(t, err)
			require.True(t, json.Valid(got), "%s", got)
			require.JSONEq(t, string(want), string(got))
		})
	}
}

// TestAnswerIsTheRoutesJSON: a tool's structuredContent is the bytes the route answers
// (the contract's own encoder where it has one), and its one text item holds the same
// JSON.
func TestAnswerIsTheRoutesJSON(t *testing.T) {
	var route bytes.Buffer
	require.NoError(t, json.NewEncoder(&route).Encode(records))
	res, err := answer(records)
	require.NoError(t, err)
	require.Equal(t, strings.TrimSuffix(route.String(), "\n"), string(res.StructuredContent.(json.RawMessage)))
	require.Len(t, res.Content, 1)
	require.Equal(t, string(res.StructuredContent.(json.RawMessage)), res.Content[0].(*mcp.TextContent).Text)
	require.False(t, res.IsError)
}

// TestEncodeResultsLeavesTheRestToTheSDK: results of other methods, errors, and a tool
// result the door cannot encode pass through as they came.
func TestEncodeResultsLeavesTheRestToTheSDK(t *testing.T) {
	unencodable := &mcp.CallToolResult{StructuredContent: func() {}, Content: []mcp.Content{}}
	_, err := encodeToolResult(unencodable)
	require.Error(t, err)
	list := &mcp.ListToolsResult{}
	failure := errors.New("boom")
	for _, c := range []struct {
		res mcp.Result
		err error
	}{{unencodable, nil}, {list, nil}, {nil, failure}} {
		res, err := encodeResults(func(context.Context, string, mcp.Request) (mcp.Result, error) { return c.res, c.err })(
			t.Context(), "tools/call", nil)
		require.Equal(t, c.err, err)
		require.True(t, res == c.res, "%#v came back as %#v", c.res, res)
	}
	res, err := encodeResults(func(context.Context, string, mcp.Request) (mcp.Result, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "x"}}}, nil
	})(t.Context(), "tools/call", nil)
	require.NoError(t, err)
	raw, err := json.Marshal(res)
	require.NoError(t, err)
	require.JSONEq(t, `{"content":[{"type":"text","text":"x"}]}`, string(raw))
}

// noCapabilities verifies every token as a caller holding no capability.
type noCapabilities struct{}

func (noCapabilities) Verify(context.Context, string) (runtime.TokenClaims, error) {
	return runtime.TokenClaims{Subject: "agent", TenantID: "t", ProjectID: "p"}, nil
}

// recorder keeps the bodies of the answers an HTTP client received.
type recorder struct {
	mu     sync.Mutex
	bodies []string
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer any")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.bodies = append(r.bodies, string(body))
	r.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// TestDoorThroughTheSDKClient calls the door with the SDK's own client, which speaks
// the newest protocol version: a refused call (the caller lacks the capability, so no
// use case is reached) is a tool error with the contract's error object and a text
// item starting with the code, the members the SDK adds to a result for that version
// (resultType) are on the wire, and the SDK's per-session lines stay out of the log.
func TestDoorThroughTheSDKClient(t *testing.T) {
	var logs bytes.Buffer
	door := New(Config{Gate: gate.New(gate.Config{Auth: gate.Auth{Verifier: noCapabilities{}}}), Version: "test",
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	srv := httptest.NewServer(door)
	defer srv.Close()
	rec := &recorder{}
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	session, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL,
		HTTPClient: &http.Client{Transport: rec}, DisableStandaloneSSE: true}, nil)
	require.NoError(t, err)
	defer func() { _ = session.Close() }()

	res, err := session.CallTool(t.Context(), &mcp.CallToolParams{Name: contract.ToolConversationRecent,
		Arguments: map[string]any{"conversation_id": "c-1"}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	text := res.Content[0].(*mcp.TextContent).Text
	require.True(t, strings.HasPrefix(text, contract.CodeTokenForbidden+": "), text)
	var body contract.MCPToolError
	raw, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &body))
	require.Equal(t, contract.CodeTokenForbidden, body.Error.Code)
	require.Equal(t, contract.CapMessagesRead, body.Error.Details["requiredCapability"])

	rec.mu.Lock()
	last := rec.bodies[len(rec.bodies)-1]
	rec.mu.Unlock()
	var wire struct {
		Result map[string]json.RawMessage `json:"result"`
	}
	require.NoError(t, json.Unmarshal([]byte(last), &wire), last)
	require.JSONEq(t, `"complete"`, string(wire.Result["resultType"]), last)
	require.NotContains(t, logs.String(), "session")
}
