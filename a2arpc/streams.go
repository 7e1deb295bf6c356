package a2arpc

import (
	"bytes"
	"context"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
)

// This file is the streaming half of POST /a2a: message/stream and tasks/resubscribe
// (0.3), SendStreamingMessage and SubscribeToTask (1.0). Their answer is always
// text/event-stream, errors included (a client reading a stream reads no JSON body):
// each `data:` line is a JSON-RPC response with the request's id.

// streamWriteWait bounds one write to a stream's client; the server's write timeout
// does not apply to streams.
const streamWriteWait = 30 * time.Second

// sseStream writes server-sent events to one response.
type sseStream struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	id  jsontext.Value
	gen generation
	buf bytes.Buffer
}

// start writes the stream's headers.
func (w *sseStream) start() error {
	h := w.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	// nginx and similar proxies pass the events on as they come.
	h.Set("X-Accel-Buffering", "no")
	if err := w.rc.SetWriteDeadline(time.Now().Add(streamWriteWait)); err != nil {
		return err
	}
	w.w.WriteHeader(http.StatusOK)
	return w.rc.Flush()
}

// send writes one event: the JSON-RPC response of result, or of fail.
func (w *sseStream) send(result any, fail *rpcFailure) error {
	resp, err := rpcResponse(w.id, w.gen, result, fail)
	if err != nil {
		return err
	}
	raw, err := stdjson.Marshal(resp)
	if err != nil {
		return err
	}
	w.buf.Reset()
	w.buf.WriteString("data: ")
	w.buf.Write(raw)
	w.buf.WriteString("\n\n")
	return w.write(w.buf.Bytes())
}

func (w *sseStream) keepAlive() error { return w.write([]byte(": keep-alive\n\n")) }

func (w *sseStream) write(b []byte) error {
	if err := w.rc.SetWriteDeadline(time.Now().Add(streamWriteWait)); err != nil {
		return err
	}
	if _, err := w.w.Write(b); err != nil {
		return err
	}
	return w.rc.Flush()
}

// rpcStream serves the four streaming methods: it sends (opStream) or names
// (opSubscribe) the task, then follows it until it is terminal, the stream's time is
// up, the client leaves or the replica shuts down. A stream is a waiter of its tenant
// from the start: past the tenant's bound it is refused as a rate limit refuses
// POST /a2a, before the message is sent and before the stream's headers.
func (d *Door) rpcStream(rw http.ResponseWriter, r *http.Request, p runtime.Principal, id jsontext.Value, m rpcMethod, params jsontext.Value) {
	release, err := d.events.AdmitWaiter(p)
	if err != nil {
		d.gate.WriteError(rw, r, err)
		return
	}
	defer release()
	ctx, cancel := context.WithTimeout(r.Context(), d.streamMax)
	defer cancel()
	w := &sseStream{w: rw, rc: http.NewResponseController(rw), id: id, gen: m.gen}
	if err := w.start(); err != nil {
		return
	}
	var taskID string
	var fail *rpcFailure
	if m.op == opStream {
		var t *contract.Task
		if t, fail, err = d.rpcSendTask(ctx, p, params, m.gen); t != nil {
			taskID = t.ID
		}
	} else {
		taskID, fail = subscribeTaskID(params)
	}
	if err != nil {
		fail = d.rpcFailureOf(ctx, err, m.op)
	}
	if fail != nil {
		_ = w.send(nil, fail)
		return
	}
	started := false
	err = d.events.FollowTask(ctx, p, taskID, d.streamKeepAlive, func(u *a2a.StreamUpdate) error {
		if u.Kind == a2a.StreamIdle {
			return w.keepAlive()
		}
		started = true
		for _, event := range streamEvents(u, taskID, m.gen) {
			if err := w.send(event, nil); err != nil {
				return err
			}
		}
		return nil
	})
	switch {
	case err == nil, ctx.Err() != nil, errors.Is(err, a2a.ErrFollowStopped):
	case !started:
		_ = w.send(nil, d.rpcFailureOf(ctx, err, m.op))
	default:
		// A client that left, or a failure mid-stream: the stream ends; a client
		// resubscribes and starts again from the task as it stands.
		if runtime.ErrorCode(err) != "" {
			_ = w.send(nil, d.rpcFailureOf(ctx, err, m.op))
		}
	}
	return
}

// subscribeTaskID reads the task ID of tasks/resubscribe and SubscribeToTask.
func subscribeTaskID(params jsontext.Value) (string, *rpcFailure) {
	var req struct {
		ID *string `json:"id"`
	}
	if fail := decodeParams(params, &req); fail != nil {
		return "", fail
	}
	if req.ID == nil {
		return "", rpcFail(contract.RPCInvalidParams, "params.id is required")
	}
	return *req.ID, nil
}

// streamEvents are the results one update of a followed task writes for gen: the
// task; a status update (carrying the message when a message was added); an
// artifact update.
func streamEvents(u *a2a.StreamUpdate, taskID string, gen generation) []any {
	switch u.Kind {
	case a2a.StreamTask:
		task := rpcTask(u.Task, gen, nil)
		if gen == gen10 {
			return []any{contract.RPCStreamResponse{Task: &task}}
		}
		return []any{task}
	case a2a.StreamStatus, a2a.StreamMessage:
		update := contract.RPCStatusUpdate{TaskID: taskID,
			Status: contract.RPCTaskStatus{State: rpcStates[u.State][gen], Timestamp: rpcTimestamp(u.AtMs)}}
		if u.Task != nil {
			update.ContextID = u.Task.ContextID
		}
		if u.Kind == a2a.StreamMessage {
			msg := rpcTaskMessage(u.Task, u.MessageIndex, u.Message, gen)
			update.Status.Message = &msg
		}
		if gen == gen10 {
			return []any{contract.RPCStreamResponse{StatusUpdate: &update}}
		}
		update.Kind, update.Final = "status-update", &u.Final
		return []any{update}
	case a2a.StreamArtifact:
		update := contract.RPCArtifactUpdate{TaskID: taskID, ContextID: u.Task.ContextID,
			Artifact: contract.RPCArtifact{ArtifactID: u.Artifact.ArtifactID, Name: u.Artifact.Name,
				Parts: outboundParts(u.Artifact.Parts, gen)}}
		if gen == gen10 {
			return []any{contract.RPCStreamResponse{ArtifactUpdate: &update}}
		}
		no, yes := false, true
		update.Kind, update.Append, update.LastChunk = "artifact-update", &no, &yes
		return []any{update}
	}
	panic(fmt.Sprintf("a stream update of kind %d", u.Kind))
}
