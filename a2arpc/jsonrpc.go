package a2arpc

import (
	"context"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/gate"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
)

// This file is POST /a2a: Google A2A JSON-RPC 2.0 in both protocol generations
// (docs/a2a-protocol.md). The route middleware has authenticated the caller and checked a2a:tasks;
// from here on every answer is HTTP 200 with a JSON-RPC body. The body is read
// leniently (unknown members ignored), as the A2A schema does, unlike the REST API.

// generation is a protocol generation: it shapes results and errors.
type generation int

const (
	gen03 generation = iota
	gen10
)

// rpcOp is what a method does.
type rpcOp int

const (
	opSend rpcOp = iota
	opGet
	opCancel
	opUnsupported
	opPush
	// opStream sends like opSend, then streams the task; opSubscribe streams an
	// existing task.
	opStream
	opSubscribe
)

type rpcMethod struct {
	gen generation
	op  rpcOp
}

// rpcMethods is the method table of docs/a2a-protocol.md; any other name is -32601.
var rpcMethods = map[string]rpcMethod{
	contract.MethodV03MessageSend: {gen03, opSend}, contract.MethodV03TasksSend: {gen03, opSend},
	contract.MethodV03TasksGet: {gen03, opGet}, contract.MethodV03TasksCancel: {gen03, opCancel},
	contract.MethodV03MessageStream: {gen03, opStream}, contract.MethodV03Resubscribe: {gen03, opSubscribe},
	contract.MethodV03PushSet: {gen03, opPush}, contract.MethodV03PushGet: {gen03, opPush},
	contract.MethodV03PushList: {gen03, opPush}, contract.MethodV03PushDelete: {gen03, opPush},
	contract.MethodV03ExtendedCard: {gen03, opUnsupported}, contract.MethodV03TasksList: {gen03, opUnsupported},
	contract.MethodV1SendMessage: {gen10, opSend}, contract.MethodV1GetTask: {gen10, opGet},
	contract.MethodV1CancelTask:    {gen10, opCancel},
	contract.MethodV1SendStreaming: {gen10, opStream}, contract.MethodV1SubscribeToTask: {gen10, opSubscribe},
	contract.MethodV1CreatePushConfig: {gen10, opPush}, contract.MethodV1GetPushConfig: {gen10, opPush},
	contract.MethodV1DeletePushConfig: {gen10, opPush}, contract.MethodV1ListPushConfigs: {gen10, opPush},
	contract.MethodV1ExtendedCard: {gen10, opUnsupported}, contract.MethodV1ListTasks: {gen10, opUnsupported},
}

var (
	version03 = regexp.MustCompile(`^0\.3(\.[0-9]+)?$`)
	version10 = regexp.MustCompile(`^1(\.[0-9]+){0,2}$`)
)

// headerGeneration reads A2A-Version: absent, 0.3[.x] or 1[.x]; ok is false for any
// other value.
func headerGeneration(v string) (gen generation, ok bool) {
	switch {
	case v == "" || version03.MatchString(v):
		return gen03, true
	case version10.MatchString(v):
		return gen10, true
	}
	return gen03, false
}

// rpcFailure is a JSON-RPC error before it is shaped for a generation.
type rpcFailure struct {
	code    int
	message string
}

func rpcFail(code int, format string, args ...any) *rpcFailure {
	return &rpcFailure{code: code, message: fmt.Sprintf(format, args...)}
}

var nullID = jsontext.Value("null")

// jsonRPC serves POST /a2a: the gate authenticates the caller and admits the request
// (the rate limits, a2a:tasks), then every answer is HTTP 200 with a JSON-RPC body.
func (d *Door) jsonRPC(w http.ResponseWriter, r *http.Request) {
	p, err := d.gate.Authenticate(r)
	if err == nil {
		err = d.gate.Admit(r.Context(), p, gate.RateName(contract.RouteA2AJSONRPC), contract.RouteA2AJSONRPC)
	}
	if err != nil {
		d.gate.WriteError(w, r, err)
		return
	}
	headerGen, headerOK := headerGeneration(r.Header.Get(contract.HeaderA2AVersion))
	notification := false
	answer := func(id jsontext.Value, gen generation, result any, fail *rpcFailure) {
		if fail != nil {
			gate.RecordOf(r.Context()).Code = contract.RPCReasons[fail.code]
		}
		if notification {
			// JSON-RPC 2.0: a notification (a request without an id) gets no reply,
			// not even an error.
			w.WriteHeader(http.StatusAccepted)
			return
		}
		resp, err := rpcResponse(id, gen, result, fail)
		if err == nil {
			err = gate.WriteJSON(w, r, http.StatusOK, resp)
		}
		if err != nil {
			d.gate.WriteError(w, r, err)
		}
	}
	body, release, fail := d.readBody(r)
	defer release()
	if fail == errGone {
		return
	}
	id, method, params := nullID, "", jsontext.Value(nil)
	if fail == nil {
		id, method, params, notification, fail = parseRPCRequest(body)
	}
	m, known := rpcMethods[method]
	gen := headerGen
	if known {
		gen = m.gen
	}
	switch {
	case fail != nil:
		answer(id, gen, nil, fail)
		return
	case !headerOK:
		answer(id, gen, nil, rpcFail(contract.RPCVersionNotSupported, "A2A-Version %q is not supported; send 0.3 or 1.0",
			r.Header.Get(contract.HeaderA2AVersion)))
		return
	case !known:
		answer(id, gen, nil, rpcFail(contract.RPCMethodNotFound, "method %q not found", method))
		return
	}
	if m.op == opStream || m.op == opSubscribe {
		// A stream may last long: it gives its body's share of the budget back now.
		release()
		d.rpcStream(w, r, p, id, m, params)
		return
	}
	ctx := r.Context()
	var result any
	switch m.op {
	case opPush:
		result, fail, err = d.rpcPush(ctx, p, method, params, gen)
	case opUnsupported:
		fail = rpcFail(contract.RPCUnsupportedOperation, "method %q is not supported", method)
	case opSend:
		result, fail, err = d.rpcSend(ctx, p, params, gen)
	case opGet:
		result, fail, err = d.rpcGet(ctx, p, params, gen)
	case opCancel:
		result, fail, err = d.rpcCancel(ctx, p, params, gen)
	}
	if err != nil {
		fail = d.rpcFailureOf(ctx, err, m.op)
	}
	answer(id, gen, result, fail)
}

// rpcResponse is the JSON-RPC answer to the request id: result, or fail shaped for gen.
func rpcResponse(id jsontext.Value, gen generation, result any, fail *rpcFailure) (contract.RPCResponse, error) {
	resp := contract.RPCResponse{JSONRPC: "2.0", ID: []byte(id)}
	if fail == nil {
		raw, err := stdjson.Marshal(result)
		if err != nil {
			return resp, err
		}
		resp.Result = raw
		return resp, nil
	}
	resp.Error = &contract.RPCError{Code: fail.code, Message: fail.message}
	if gen == gen10 {
		resp.Error.Data = []contract.RPCErrorInfo{{Type: contract.RPCErrorInfoType,
			Reason: contract.RPCReasons[fail.code], Domain: contract.RPCErrorInfoDomain}}
	}
	return resp, nil
}

// errGone marks a request whose client went away before its body arrived: there is
// no one to answer.
var errGone = &rpcFailure{}

// readBody buffers the body through the gate like every other request body. A body
// over the limit, or one the in-flight budget cannot hold, is a JSON-RPC failure.
func (d *Door) readBody(r *http.Request) (body []byte, release func(), fail *rpcFailure) {
	body, release, err := d.gate.ReadBody(r, 0)
	var e *runtime.Error
	switch {
	case err == nil:
		return body, release, nil
	case errors.Is(err, gate.ErrClientClosed):
		gate.RecordOf(r.Context()).ClientGone = true
		return nil, release, errGone
	case errors.As(err, &e) && e.Code == contract.CodeServiceUnavailable:
		return nil, release, rpcFail(contract.RPCInternalError, "%s", e.Message)
	}
	return nil, release, rpcFail(contract.RPCInvalidRequest, "the request is larger than %d bytes", d.gate.MaxBodyBytes())
}

// parseRPCRequest reads body as a JSON-RPC request: the id to echo (null when it cannot
// be read), the method and the raw params, whether it is a notification (a valid
// request without an id member, which gets no reply), or the failure of an invalid
// request (answered with id null however it reads: it was not understood).
func parseRPCRequest(body []byte) (id jsontext.Value, method string, params jsontext.Value, notification bool, fail *rpcFailure) {
	id = nullID
	body = gate.TrimJSON(body)
	if !jsontext.Value(body).IsValid() {
		return id, "", nil, false, rpcFail(contract.RPCParseError, "the request is not valid JSON")
	}
	if body[0] != '{' {
		return id, "", nil, false, rpcFail(contract.RPCInvalidRequest, "the request must be a JSON object")
	}
	var req struct {
		JSONRPC jsontext.Value `json:"jsonrpc"`
		ID      jsontext.Value `json:"id"`
		Method  jsontext.Value `json:"method"`
		Params  jsontext.Value `json:"params"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return id, "", nil, false, rpcFail(contract.RPCInvalidRequest, "the request has duplicate members")
	}
	switch kind := req.ID.Kind(); {
	case len(req.ID) == 0:
	case kind == '"' || kind == '0' || kind == 'n':
		id = req.ID
	default:
		return id, "", nil, false, rpcFail(contract.RPCInvalidRequest, "id must be a string, a number or null")
	}
	var version string
	if req.JSONRPC.Kind() != '"' || json.Unmarshal(req.JSONRPC, &version) != nil || version != "2.0" {
		return id, "", nil, false, rpcFail(contract.RPCInvalidRequest, `jsonrpc must be "2.0"`)
	}
	if req.Method.Kind() != '"' || json.Unmarshal(req.Method, &method) != nil {
		return id, "", nil, false, rpcFail(contract.RPCInvalidRequest, "method must be a string")
	}
	return id, method, req.Params, len(req.ID) == 0, nil
}

// decodeParams decodes params leniently into v: an object, unknown members ignored.
func decodeParams(params jsontext.Value, v any) *rpcFailure {
	if params.Kind() != '{' {
		return rpcFail(contract.RPCInvalidParams, "params must be an object")
	}
	if err := json.Unmarshal(params, v); err != nil {
		var semantic *json.SemanticError
		if errors.As(err, &semantic) && semantic.JSONPointer != "" {
			return rpcFail(contract.RPCInvalidParams, "params.%s has the wrong type", runtime.FieldPath(semantic.JSONPointer))
		}
		return rpcFail(contract.RPCInvalidParams, "params are invalid")
	}
	return nil
}

// rpcFailureOf maps a use case's error onto the JSON-RPC codes: a task the caller may
// not see is not found; a continuation of a terminal task is unsupported; a cancel the
// caller may not make, or of a terminal task, is not cancelable; bad values are
// invalid params; anything else is internal and logged, its text never sent.
func (d *Door) rpcFailureOf(ctx context.Context, err error, op rpcOp) *rpcFailure {
	var e *runtime.Error
	if !errors.As(err, &e) {
		e = &runtime.Error{Code: contract.CodeInternal}
	}
	switch e.Code {
	case contract.CodeNotFound:
		if e.Details["field"] == "configId" {
			return rpcFail(contract.RPCTaskNotFound, "push notification config not found")
		}
		return rpcFail(contract.RPCTaskNotFound, "task not found")
	case contract.CodeScopeForbidden, contract.CodeInvalidTransition:
		if op == opCancel {
			return rpcFail(contract.RPCTaskNotCancelable, "the task cannot be canceled: %s", e.Message)
		}
	case contract.CodeConflict:
		if e.Details["reason"] == "task_terminal" {
			return rpcFail(contract.RPCUnsupportedOperation, "%s", e.Message)
		}
		return rpcFail(contract.RPCInvalidParams, "%s", e.Message)
	case contract.CodeValidationFailed, contract.CodePayloadTooLarge, contract.CodeIdempotencyConflict:
		msg := e.Message
		if field, ok := e.Details["field"].(string); ok {
			msg = field + ": " + msg
		}
		return rpcFail(contract.RPCInvalidParams, "%s", msg)
	}
	d.gate.Refuse(ctx, err)
	return rpcFail(contract.RPCInternalError, "internal error")
}

// rpcSend serves message/send, tasks/send and SendMessage.
func (d *Door) rpcSend(ctx context.Context, p runtime.Principal, params jsontext.Value, gen generation) (any, *rpcFailure, error) {
	t, fail, err := d.rpcSendTask(ctx, p, params, gen)
	if fail != nil || err != nil {
		return nil, fail, err
	}
	task := rpcTask(t, gen, nil)
	if gen == gen10 {
		return contract.RPCSendResult{Task: task}, nil, nil
	}
	return task, nil, nil
}

// rpcSendTask starts or continues the task a send names and returns it.
func (d *Door) rpcSendTask(ctx context.Context, p runtime.Principal, params jsontext.Value, gen generation) (*contract.Task, *rpcFailure, error) {
	var req struct {
		Message *struct {
			TaskID    *string          `json:"taskId"`
			ContextID *string          `json:"contextId"`
			Parts     []jsontext.Value `json:"parts"`
		} `json:"message"`
		Metadata jsontext.Value `json:"metadata"`
	}
	if fail := decodeParams(params, &req); fail != nil {
		return nil, fail, nil
	}
	if req.Message == nil {
		return nil, rpcFail(contract.RPCInvalidParams, "params.message is required"), nil
	}
	if len(req.Message.Parts) == 0 {
		return nil, rpcFail(contract.RPCInvalidParams, "params.message.parts must hold at least one part"), nil
	}
	send := a2a.ProtocolSend{TaskID: req.Message.TaskID, ContextID: req.Message.ContextID}
	if req.Message.TaskID != nil && *req.Message.TaskID == "" {
		send.TaskID = nil
	}
	if req.Message.ContextID != nil && *req.Message.ContextID == "" {
		send.ContextID = nil
	}
	switch req.Metadata.Kind() {
	case 0, 'n':
	case '{':
		var meta struct {
			ToAgent jsontext.Value `json:"toAgent"`
		}
		if err := json.Unmarshal(req.Metadata, &meta); err != nil {
			return nil, rpcFail(contract.RPCInvalidParams, "params.metadata is invalid"), nil
		}
		if len(meta.ToAgent) > 0 && meta.ToAgent.Kind() != 'n' {
			var to string
			if json.Unmarshal(meta.ToAgent, &to) != nil {
				return nil, rpcFail(contract.RPCInvalidParams, "params.metadata.toAgent must be a string"), nil
			}
			send.ToAgent = &to
		}
		send.Metadata = []byte(req.Metadata)
	default:
		return nil, rpcFail(contract.RPCInvalidParams, "params.metadata must be an object"), nil
	}
	for i, raw := range req.Message.Parts {
		part, fail := inboundPart(raw, gen, i)
		if fail != nil {
			return nil, fail, nil
		}
		send.Parts = append(send.Parts, part)
	}
	t, err := d.protocol.SendProtocolMessage(ctx, p, &send)
	return t, nil, err
}

// rpcGet serves tasks/get and GetTask.
func (d *Door) rpcGet(ctx context.Context, p runtime.Principal, params jsontext.Value, gen generation) (any, *rpcFailure, error) {
	var req struct {
		ID            *string `json:"id"`
		HistoryLength *int    `json:"historyLength"`
	}
	if fail := decodeParams(params, &req); fail != nil {
		return nil, fail, nil
	}
	if req.ID == nil {
		return nil, rpcFail(contract.RPCInvalidParams, "params.id is required"), nil
	}
	if req.HistoryLength != nil && *req.HistoryLength < 0 {
		return nil, rpcFail(contract.RPCInvalidParams, "params.historyLength must not be negative"), nil
	}
	t, err := d.tasks.GetTask(ctx, p, &contract.TaskRequest{TaskID: *req.ID})
	if err != nil {
		return nil, nil, err
	}
	return rpcTask(t, gen, req.HistoryLength), nil, nil
}

// rpcCancel serves tasks/cancel and CancelTask.
func (d *Door) rpcCancel(ctx context.Context, p runtime.Principal, params jsontext.Value, gen generation) (any, *rpcFailure, error) {
	var req struct {
		ID *string `json:"id"`
	}
	if fail := decodeParams(params, &req); fail != nil {
		return nil, fail, nil
	}
	if req.ID == nil {
		return nil, rpcFail(contract.RPCInvalidParams, "params.id is required"), nil
	}
	t, err := d.tasks.CancelTask(ctx, p, &contract.CancelTaskRequest{TaskID: *req.ID})
	if err != nil {
		return nil, nil, err
	}
	return rpcTask(t, gen, nil), nil, nil
}

// inboundPart turns an A2A part into the internal form: 0.3 parts name their kind
// (text, data or file); 1.0 parts hold exactly one of text, raw, url and data.
func inboundPart(raw jsontext.Value, gen generation, i int) (contract.Part, *rpcFailure) {
	var in struct {
		Kind      *string        `json:"kind"`
		Text      jsontext.Value `json:"text"`
		Data      jsontext.Value `json:"data"`
		Raw       *string        `json:"raw"`
		URL       *string        `json:"url"`
		Filename  *string        `json:"filename"`
		MediaType *string        `json:"mediaType"`
		File      *struct {
			Name     *string `json:"name"`
			MimeType *string `json:"mimeType"`
			Bytes    *string `json:"bytes"`
			URI      *string `json:"uri"`
		} `json:"file"`
		Metadata *struct {
			MimeType *string `json:"mimeType"`
		} `json:"metadata"`
	}
	bad := func(format string, args ...any) (contract.Part, *rpcFailure) {
		return contract.Part{}, rpcFail(contract.RPCInvalidParams, "params.message.parts[%d]: %s", i, fmt.Sprintf(format, args...))
	}
	if raw.Kind() != '{' {
		return bad("a part must be an object")
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return bad("the part has a member of the wrong type")
	}
	present := func(v jsontext.Value) bool { return len(v) > 0 && v.Kind() != 'n' }
	text := func() (contract.Part, *rpcFailure) {
		var t string
		if in.Text.Kind() != '"' || json.Unmarshal(in.Text, &t) != nil {
			return bad("text must be a string")
		}
		return contract.Part{Type: contract.PartText, Text: &t}, nil
	}
	if gen == gen03 {
		if in.Kind == nil {
			return bad("kind must be text, data or file")
		}
		switch *in.Kind {
		case contract.PartText:
			return text()
		case contract.PartData:
			if !present(in.Data) {
				return bad("a data part needs data")
			}
			var mimeType *string
			if in.Metadata != nil {
				mimeType = in.Metadata.MimeType
			}
			return dataPart(in.Data, mimeType), nil
		case contract.PartFile:
			if in.File == nil {
				return bad("a file part needs file")
			}
			return contract.Part{Type: contract.PartFile, Name: in.File.Name, MimeType: in.File.MimeType,
				Bytes: in.File.Bytes, URI: in.File.URI}, nil
		}
		return bad("kind must be text, data or file")
	}
	n := 0
	for _, ok := range []bool{present(in.Text), in.Raw != nil, in.URL != nil, present(in.Data)} {
		if ok {
			n++
		}
	}
	if n != 1 {
		return bad("a part holds exactly one of text, raw, url and data")
	}
	switch {
	case present(in.Text):
		return text()
	case in.Raw != nil:
		return contract.Part{Type: contract.PartFile, Name: in.Filename, MimeType: in.MediaType, Bytes: in.Raw}, nil
	case in.URL != nil:
		return contract.Part{Type: contract.PartFile, Name: in.Filename, MimeType: in.MediaType, URI: in.URL}, nil
	}
	return dataPart(in.Data, in.MediaType), nil
}

// dataPart is an inbound data part; one without a type is application/json.
func dataPart(data jsontext.Value, mimeType *string) contract.Part {
	if mimeType == nil {
		json := "application/json"
		mimeType = &json
	}
	return contract.Part{Type: contract.PartData, Data: []byte(data), MimeType: mimeType}
}

// The state and role names of each generation.
var (
	rpcStates = map[string][2]string{
		contract.TaskCreated:       {"submitted", "TASK_STATE_SUBMITTED"},
		contract.TaskWorking:       {"working", "TASK_STATE_WORKING"},
		contract.TaskInputRequired: {"input-required", "TASK_STATE_INPUT_REQUIRED"},
		contract.TaskCompleted:     {"completed", "TASK_STATE_COMPLETED"},
		contract.TaskFailed:        {"failed", "TASK_STATE_FAILED"},
		contract.TaskCanceled:      {"canceled", "TASK_STATE_CANCELED"},
	}
	rpcRoles = map[string][2]string{
		contract.TaskRoleUser:  {"user", "ROLE_USER"},
		contract.TaskRoleAgent: {"agent", "ROLE_AGENT"},
	}
)

// rpcTask writes a task for gen. historyLength, when set, keeps the last N messages;
// message IDs are <taskId>-m<n> by position in the whole list, so they stay stable.
func rpcTask(t *contract.Task, gen generation, historyLength *int) contract.RPCTask {
	out := contract.RPCTask{ID: t.ID, ContextID: t.ContextID,
		Status:  contract.RPCTaskStatus{State: rpcStates[t.State][gen], Timestamp: rpcTimestamp(t.UpdatedAtMs)},
		History: []contract.RPCMessage{}, Artifacts: []contract.RPCArtifact{}, Metadata: t.Metadata}
	if gen == gen03 {
		out.Kind = "task"
	}
	if len(out.Metadata) == 0 || string(out.Metadata) == "null" {
		out.Metadata = []byte("{}")
	}
	first := 0
	if historyLength != nil && *historyLength < len(t.Messages) {
		first = len(t.Messages) - *historyLength
	}
	for i := first; i < len(t.Messages); i++ {
		out.History = append(out.History, rpcMessage(t, i, gen))
	}
	for _, a := range t.Artifacts {
		out.Artifacts = append(out.Artifacts, contract.RPCArtifact{ArtifactID: a.ArtifactID, Name: a.Name,
			Parts: outboundParts(a.Parts, gen)})
	}
	return out
}

// rpcMessage writes the task's message at index i for gen.
func rpcMessage(t *contract.Task, i int, gen generation) contract.RPCMessage {
	return rpcTaskMessage(t, i, &t.Messages[i], gen)
}

// rpcTaskMessage writes m, the message at index i of t, for gen.
func rpcTaskMessage(t *contract.Task, i int, m *contract.TaskMessage, gen generation) contract.RPCMessage {
	msg := contract.RPCMessage{MessageID: fmt.Sprintf("%s-m%d", t.ID, i+1), ContextID: t.ContextID, TaskID: t.ID,
		Role: rpcRoles[m.Role][gen], Parts: outboundParts(m.Parts, gen)}
	if gen == gen03 {
		msg.Kind = "message"
	}
	return msg
}

// rpcTimestamp writes a time in ms as RFC 3339 UTC with milliseconds.
func rpcTimestamp(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

const defaultDataType = "application/json"

// outboundParts writes internal parts for gen (the table in docs/a2a-protocol.md).
func outboundParts(parts []contract.Part, gen generation) []map[string]any {
	out := make([]map[string]any, 0, len(parts))
	for _, part := range parts {
		m := map[string]any{}
		switch part.Type {
		case contract.PartText:
			m["text"] = deref(part.Text)
		case contract.PartData:
			mime := defaultDataType
			if part.MimeType != nil {
				mime = *part.MimeType
			}
			// The response is written by encoding/json, which writes a RawMessage as is.
			data := stdjson.RawMessage(part.Data)
			if gen == gen03 {
				if jsontext.Value(data).Kind() != '{' {
					data = stdjson.RawMessage(`{"value":` + string(data) + `}`)
				}
				m["data"], m["metadata"] = data, map[string]any{"mimeType": mime}
			} else {
				m["data"], m["mediaType"] = data, mime
			}
		case contract.PartFile:
			m = filePart(part, gen)
		}
		if gen == gen03 {
			m["kind"] = part.Type
		}
		out = append(out, m)
	}
	return out
}

func filePart(part contract.Part, gen generation) map[string]any {
	if gen == gen03 {
		file := map[string]any{}
		for k, v := range map[string]*string{"name": part.Name, "mimeType": part.MimeType, "bytes": part.Bytes, "uri": part.URI} {
			if v != nil {
				file[k] = *v
			}
		}
		return map[string]any{"file": file}
	}
	m := map[string]any{}
	for k, v := range map[string]*string{"filename": part.Name, "mediaType": part.MimeType, "raw": part.Bytes, "url": part.URI} {
		if v != nil {
			m[k] = *v
		}
	}
	return m
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
