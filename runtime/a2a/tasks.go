package a2a

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// NewTask is a task to create: its first state (with the creation in its history and
// its first message, if any), the position it lists at and the digest of its create
// request.
type NewTask struct {
	Task    contract.Task
	ListSeq int64
	// CreateDigest identifies the normalized create request, so a retry is told
	// from a different create without reading the task back.
	CreateDigest string
	// PartsBytes is the size of the first message's parts.
	PartsBytes int64
}

// LockedTask is a task's header as read under its row lock, with what the bounds of a
// change need.
type LockedTask struct {
	Task        contract.Task
	Messages    int
	Transitions int
	PartsBytes  int64
	// ArtifactBytes is the size of each stored artifact's parts, by artifact ID.
	ArtifactBytes map[string]int64
}

// TaskChange is one change of a locked task: its new header fields, and the history
// entry, message and artifacts it adds (artifacts with a stored ID replace it).
type TaskChange struct {
	TaskID      string
	State       string
	Version     int64
	UpdatedAtMs int64
	// TerminalAtMs is set when State is terminal: the time the task became so.
	TerminalAtMs *int64
	// Transition, when set, is appended to the history at position Transitions-1.
	Transition *contract.TaskTransition
	// Message, when set, is appended at position Messages-1.
	Message   *contract.TaskMessage
	Artifacts []contract.TaskArtifact
	// ArtifactBytes is the size of each artifact of Artifacts.
	ArtifactBytes []int64
	// The task's counts and stored parts bytes after the change.
	Messages, Transitions, ArtifactCount int
	PartsBytes                           int64
}

// TaskQuery selects tasks in list order (creation commit order): those Agent created
// (role from), receives (to) or either (any), optionally only in States, after the
// position After. All ignores Role and selects every task of the scope. Newest returns
// the newest Limit instead, newest first.
type TaskQuery struct {
	Agent  string
	Role   string
	States []string
	After  int64
	Limit  int
	All    bool
	Newest bool
}

// TaskCounts counts an agent's tasks by state, and Pending the non-terminal ones
// addressed to it.
type TaskCounts struct {
	ByState map[string]int64
	Pending int64
}

// TaskStore keeps tasks with their messages, artifacts and history.
type TaskStore interface {
	// CreateTask stores t unless a task with its ID exists: then it writes nothing
	// and returns the stored task (with messages, artifacts and history) and its
	// create digest. Errors: SERVICE_UNAVAILABLE.
	CreateTask(ctx context.Context, scope runtime.Scope, t *NewTask) (stored contract.Task, storedDigest string, created bool, err error)
	// LockTask returns the task's header and holds its row locked until the
	// transaction ends, so changes of one task are serialized. Errors: NOT_FOUND,
	// SERVICE_UNAVAILABLE.
	LockTask(ctx context.Context, scope runtime.Scope, taskID string) (LockedTask, error)
	// UpdateTask writes c to a task locked by LockTask. Errors: SERVICE_UNAVAILABLE.
	UpdateTask(ctx context.Context, scope runtime.Scope, c *TaskChange) error
	// GetTask returns a task with its messages, artifacts and history. Errors:
	// NOT_FOUND, SERVICE_UNAVAILABLE.
	GetTask(ctx context.Context, scope runtime.Scope, taskID string) (contract.Task, error)
	// ListTasks returns the task headers q selects, the position of the last one and
	// whether more follow. Errors: SERVICE_UNAVAILABLE.
	ListTasks(ctx context.Context, scope runtime.Scope, q TaskQuery) (tasks []contract.Task, last int64, more bool, err error)
	// CountTasks counts the tasks agent created or receives. Errors:
	// SERVICE_UNAVAILABLE.
	CountTasks(ctx context.Context, scope runtime.Scope, agent string) (TaskCounts, error)
	// TaskMessage returns the task's message at index (0-based). Errors: NOT_FOUND,
	// SERVICE_UNAVAILABLE.
	TaskMessage(ctx context.Context, scope runtime.Scope, taskID string, index int) (contract.TaskMessage, error)
	// LastTaskEvent returns the sequence of the task's newest event in the scope's
	// log, 0 when it has none. Errors: SERVICE_UNAVAILABLE.
	LastTaskEvent(ctx context.Context, scope runtime.Scope, taskID string) (int64, error)
	// TaskEvents returns up to limit of the task's events after the sequence after,
	// in sequence (commit) order. Errors: SERVICE_UNAVAILABLE.
	TaskEvents(ctx context.Context, scope runtime.Scope, taskID string, after int64, limit int) ([]contract.Event, error)
	// PurgeTerminalTasks deletes up to limit tasks that became terminal before
	// beforeMs, with everything they hold, and reports how many. Errors:
	// SERVICE_UNAVAILABLE.
	PurgeTerminalTasks(ctx context.Context, scope runtime.Scope, beforeMs int64, limit int) (int, error)
}

// taskTransitions is the state machine of docs/a2a.md; terminal states have no entry.
var taskTransitions = map[string][]string{
	contract.TaskCreated:       {contract.TaskWorking, contract.TaskCanceled, contract.TaskFailed},
	contract.TaskWorking:       {contract.TaskInputRequired, contract.TaskCompleted, contract.TaskFailed, contract.TaskCanceled},
	contract.TaskInputRequired: {contract.TaskWorking, contract.TaskCanceled, contract.TaskFailed},
}

// TaskTerminal reports whether state is terminal (completed, failed, canceled).
func TaskTerminal(state string) bool {
	_, open := taskTransitions[state]
	return !open
}

// TransitionAllowed reports whether the state machine allows from → to.
func TransitionAllowed(from, to string) bool { return slices.Contains(taskTransitions[from], to) }

// errTaskExists ends a create's unit of work when the ID is taken, rolling back the
// event it appended first.
var errTaskExists = errors.New("a task with this ID exists")

// CreateTask validates and creates a task in state created, sent by the caller (or,
// with trusted headers, fromAgent), and appends its task_created event in the same
// transaction. A retry with the same ID and content returns the stored task and
// created false; the same ID with other content is IDEMPOTENCY_CONFLICT.
func (a *Tasks) CreateTask(ctx context.Context, p runtime.Principal, req *contract.CreateTaskRequest) (*contract.Task, bool, error) {
	t, digest, size, err := validateTask(p, req)
	if err != nil {
		return nil, false, err
	}
	stampTask(&t, a.nowMs())
	var stored contract.Task
	var storedDigest string
	err = a.db.WithinTx(ctx, func(ctx context.Context, tx Stores) error {
		stored, storedDigest, err = createTask(ctx, tx, p.Scope, p.Subject, &NewTask{Task: t, CreateDigest: digest, PartsBytes: size})
		return err
	})
	switch {
	case errors.Is(err, errTaskExists):
		if storedDigest != digest {
			return nil, false, runtime.IdempotencyConflict(t.ID)
		}
		return &stored, false, nil
	case err != nil:
		return nil, false, err
	}
	return &t, true, nil
}

// stampTask sets the creation time of a validated task.
func stampTask(t *contract.Task, now int64) {
	t.CreatedAtMs, t.UpdatedAtMs = now, now
	t.History[0].AtMs = now
	if len(t.Messages) > 0 {
		t.Messages[0].CreatedAtMs = now
	}
}

// createTask stores nt through the unit of work's stores tx with its task_created
// event by actor. When the ID is taken it returns errTaskExists with the stored task
// and its digest: the caller must roll the unit of work back, since the event was
// appended first.
func createTask(ctx context.Context, tx Stores, scope runtime.Scope, actor string, nt *NewTask) (contract.Task, string, error) {
	// The event first: its append takes the scope's lock, so no other create of this
	// ID runs between the lookup inside CreateTask and the insert, and its sequence is
	// the task's list position. The store never waits on an existing task's row
	// while this holds the head (a change holds the row and then waits for the head:
	// docs/a2a.md, lock order).
	seq, err := tx.Events.AppendEvents(ctx, scope, []runtime.NewEvent{taskCreatedEvent(actor, &nt.Task)})
	if err != nil {
		return contract.Task{}, "", err
	}
	nt.ListSeq = seq
	stored, storedDigest, created, err := tx.Tasks.CreateTask(ctx, scope, nt)
	if err != nil {
		return contract.Task{}, "", err
	}
	if !created {
		return stored, storedDigest, errTaskExists
	}
	return stored, storedDigest, nil
}

// validateTask checks a create request and returns the task's first state, the
// digest of the normalized request and the size of its parts.
func validateTask(p runtime.Principal, req *contract.CreateTaskRequest) (t contract.Task, digest string, size int64, err error) {
	if t.ID, err = runtime.IDOrNew("id", req.ID); err != nil {
		return t, "", 0, err
	}
	t.ContextID = t.ID
	if req.ContextID != nil {
		if err := runtime.ValidateID("contextId", *req.ContextID); err != nil {
			return t, "", 0, err
		}
		t.ContextID = *req.ContextID
	}
	if t.FromAgent, err = sender(p, req.FromAgent); err != nil {
		return t, "", 0, err
	}
	if err := runtime.ValidateID("toAgent", req.ToAgent); err != nil {
		return t, "", 0, err
	}
	if req.ToAgent == t.FromAgent {
		return t, "", 0, runtime.Invalid("toAgent", "toAgent must be another agent than the task's creator")
	}
	t.ToAgent = req.ToAgent
	if req.Description == nil {
		return t, "", 0, runtime.Invalid("description", "description is required")
	}
	if err := validateText("description", *req.Description, contract.MaxTaskDescriptionBytes, true); err != nil {
		return t, "", 0, err
	}
	t.Description = *req.Description
	parts, size, err := validateParts("parts", req.Parts, false)
	if err != nil {
		return t, "", 0, err
	}
	if size > contract.MaxTaskPartsBytes {
		return t, "", 0, runtime.TooLarge("parts", contract.MaxTaskPartsBytes)
	}
	if t.Metadata, err = runtime.NormalizeJSON("metadata", req.Metadata); err != nil {
		return t, "", 0, err
	}
	t.State, t.Version = contract.TaskCreated, 1
	t.History = []contract.TaskTransition{{To: contract.TaskCreated, Actor: t.FromAgent}}
	t.Messages, t.Artifacts = []contract.TaskMessage{}, []contract.TaskArtifact{}
	if len(parts) > 0 {
		t.Messages = append(t.Messages, contract.TaskMessage{Role: contract.TaskRoleUser, FromAgent: t.FromAgent, Parts: parts})
	}
	if digest, err = createDigest(&t, parts); err != nil {
		return t, "", 0, err
	}
	return t, digest, size, nil
}

// createDigest is the SHA-256 (hex) of the canonical JSON of what a create request
// said, after normalization.
func createDigest(t *contract.Task, parts []contract.Part) (string, error) {
	raw, err := json.Marshal(struct {
		ContextID   string          `json:"contextId"`
		FromAgent   string          `json:"fromAgent"`
		ToAgent     string          `json:"toAgent"`
		Description string          `json:"description"`
		Parts       []contract.Part `json:"parts"`
		Metadata    json.RawMessage `json:"metadata"`
	}{t.ContextID, t.FromAgent, t.ToAgent, t.Description, parts, t.Metadata})
	if err != nil {
		return "", runtime.Invalid("parts", "the task has no canonical JSON form")
	}
	canonical, err := runtime.CanonicalJSON(raw)
	if err != nil {
		return "", runtime.Invalid("parts", "the task has no canonical JSON form")
	}
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:]), nil
}

// validateParts checks the parts of a message or artifact (at most MaxTaskParts, at
// least one when required) and returns them normalized with their total size.
func validateParts(field string, parts []contract.Part, required bool) ([]contract.Part, int64, error) {
	if len(parts) == 0 {
		if required {
			return nil, 0, runtime.Invalid(field, "%s must hold at least one part", field)
		}
		return nil, 0, nil
	}
	if len(parts) > contract.MaxTaskParts {
		return nil, 0, runtime.TooMany(field, contract.MaxTaskParts, "%s holds at most %d parts", field, contract.MaxTaskParts)
	}
	out := make([]contract.Part, len(parts))
	var total int64
	for i := range parts {
		size, err := validatePart(fmt.Sprintf("%s[%d]", field, i), &parts[i], &out[i])
		if err != nil {
			return nil, 0, err
		}
		total += size
	}
	return out, total, nil
}

// validatePart checks one part, writes its normalized form to out and returns its
// size: the bytes of its text, data (compact JSON), bytes (base64 text) or uri, plus
// its name and mimeType.
func validatePart(prefix string, in, out *contract.Part) (int64, error) {
	forbid := func(members map[string]bool) error {
		for name, present := range members {
			if present {
				return runtime.Invalid(prefix+"."+name, "%s is not a member of a %s part", name, in.Type)
			}
		}
		return nil
	}
	*out = contract.Part{Type: in.Type}
	var size int64
	switch in.Type {
	case contract.PartText:
		if err := forbid(map[string]bool{"mimeType": in.MimeType != nil, "data": in.Data != nil, "name": in.Name != nil,
			"bytes": in.Bytes != nil, "uri": in.URI != nil}); err != nil {
			return 0, err
		}
		if in.Text == nil {
			return 0, runtime.Invalid(prefix+".text", "a text part needs text")
		}
		out.Text = in.Text
		size = int64(len(*in.Text))
	case contract.PartData:
		if err := forbid(map[string]bool{"text": in.Text != nil, "name": in.Name != nil, "bytes": in.Bytes != nil,
			"uri": in.URI != nil}); err != nil {
			return 0, err
		}
		data := jsontext.Value(bytes.TrimSpace(in.Data)).Clone()
		if len(data) == 0 || string(data) == "null" {
			return 0, runtime.Invalid(prefix+".data", "a data part needs data")
		}
		if err := data.Compact(); err != nil {
			return 0, runtime.Invalid(prefix+".data", "data is not valid JSON")
		}
		out.Data = json.RawMessage(data)
		size = int64(len(data))
	case contract.PartFile:
		if err := forbid(map[string]bool{"text": in.Text != nil, "data": in.Data != nil}); err != nil {
			return 0, err
		}
		switch {
		case (in.Bytes == nil) == (in.URI == nil):
			return 0, runtime.Invalid(prefix+".bytes", "a file part needs exactly one of bytes and uri")
		case in.Bytes != nil:
			if _, err := base64.StdEncoding.Strict().DecodeString(*in.Bytes); err != nil {
				return 0, runtime.Invalid(prefix+".bytes", "bytes must be standard base64 (RFC 4648 section 4)")
			}
			out.Bytes = in.Bytes
			size = int64(len(*in.Bytes))
		default:
			if err := runtime.ValidateLabel(prefix+".uri", *in.URI, contract.MaxEvidenceRefChars); err != nil {
				return 0, err
			}
			out.URI = in.URI
			size = int64(len(*in.URI))
		}
		if in.Name != nil {
			if err := runtime.ValidateLabel(prefix+".name", *in.Name, contract.MaxPurposeChars); err != nil {
				return 0, err
			}
			out.Name = in.Name
			size += int64(len(*in.Name))
		}
	default:
		return 0, runtime.OneOf(prefix+".type", contract.PartTypes)
	}
	if in.MimeType != nil {
		if err := runtime.ValidateLabel(prefix+".mimeType", *in.MimeType, contract.MaxPurposeChars); err != nil {
			return 0, err
		}
		out.MimeType = in.MimeType
		size += int64(len(*in.MimeType))
	}
	if size > contract.MaxTaskPartBytes {
		return 0, runtime.TooLarge(prefix, contract.MaxTaskPartBytes)
	}
	return size, nil
}

// taskEvent is an event about a task: directed to its two participants, strong,
// correlated by the task's context.
func taskEvent(kind, actor string, t *contract.Task, payload any, nowMs int64) runtime.NewEvent {
	e := runtime.EventOf(kind, actor, t.ContextID, contract.ConsistencyStrong, runtime.Participants(t.FromAgent, t.ToAgent), payload, nowMs)
	e.TaskID = t.ID
	return e
}

func taskCreatedEvent(actor string, t *contract.Task) runtime.NewEvent {
	return taskEvent(contract.EventTaskCreated, actor, t, struct {
		TaskID    string `json:"taskId"`
		ContextID string `json:"contextId"`
		FromAgent string `json:"fromAgent"`
		ToAgent   string `json:"toAgent"`
		State     string `json:"state"`
		Version   int64  `json:"version"`
	}{t.ID, t.ContextID, t.FromAgent, t.ToAgent, t.State, t.Version}, t.CreatedAtMs)
}

// participant reports whether agent created or receives t.
func participant(t *contract.Task, agent string) bool {
	return t.FromAgent == agent || t.ToAgent == agent
}

// GetTask returns a task to one of its participants, or to a caller with a2a:admin;
// anyone else gets NOT_FOUND, as for a task that does not exist.
func (a *Tasks) GetTask(ctx context.Context, p runtime.Principal, req *contract.TaskRequest) (*contract.Task, error) {
	if err := runtime.ValidateID("taskId", req.TaskID); err != nil {
		return nil, err
	}
	t, err := a.stores.Tasks.GetTask(ctx, p.Scope, req.TaskID)
	if err != nil {
		return nil, err
	}
	if !participant(&t, p.Subject) && !p.Can(contract.CapA2AAdmin) {
		return nil, taskNotFound()
	}
	return &t, nil
}

func taskNotFound() error { return runtime.NotFound("taskId", "task") }

// changeTask runs one change of a task the caller participates in: it locks the task,
// lets plan decide the change and its event from what is stored, writes both in one
// transaction, and returns the task as it is afterwards.
func (a *service) changeTask(ctx context.Context, p runtime.Principal, taskID string, plan func(lt *LockedTask, nowMs int64) (*TaskChange, runtime.NewEvent, error)) (*contract.Task, error) {
	var out contract.Task
	err := a.db.WithinTx(ctx, func(ctx context.Context, tx Stores) error {
		lt, err := tx.Tasks.LockTask(ctx, p.Scope, taskID)
		if err != nil {
			return err
		}
		if !participant(&lt.Task, p.Subject) {
			return taskNotFound()
		}
		change, event, err := plan(&lt, a.nowMs())
		if err != nil {
			return err
		}
		if err := tx.Tasks.UpdateTask(ctx, p.Scope, change); err != nil {
			return err
		}
		if out, err = tx.Tasks.GetTask(ctx, p.Scope, taskID); err != nil {
			return err
		}
		if err := enqueuePush(ctx, tx, p.Scope, taskID); err != nil {
			return err
		}
		// Last: the append holds the scope's lock until the commit.
		_, err = tx.Events.AppendEvents(ctx, p.Scope, []runtime.NewEvent{event})
		return err
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// nextChange returns the change of lt that bumps its version at nowMs.
func nextChange(lt *LockedTask, nowMs int64) *TaskChange {
	return &TaskChange{
		TaskID: lt.Task.ID, State: lt.Task.State, Version: lt.Task.Version + 1, UpdatedAtMs: nowMs,
		Messages: lt.Messages, Transitions: lt.Transitions, ArtifactCount: len(lt.ArtifactBytes), PartsBytes: lt.PartsBytes,
	}
}

// transition adds the move of c's task to state to c, made by actor for reason, after
// checking the state machine and the history bound.
func (c *TaskChange) transition(from, to, actor string, reason *string) error {
	if !TransitionAllowed(from, to) {
		return runtime.Errorf(contract.CodeInvalidTransition, "a task in state %s cannot move to %s", from, to).
			With("from", from).With("to", to)
	}
	if c.Transitions >= contract.MaxTaskTransitions {
		return taskLimit("state", contract.MaxTaskTransitions, "a task records at most %d transitions", contract.MaxTaskTransitions)
	}
	c.Transitions++
	c.State = to
	if TaskTerminal(to) {
		c.TerminalAtMs = &c.UpdatedAtMs
	}
	c.Transition = &contract.TaskTransition{From: &from, To: to, AtMs: c.UpdatedAtMs, Reason: reason, Actor: actor}
	return nil
}

// taskLimit is the CONFLICT of a change that would pass one of a task's bounds.
func taskLimit(field string, limit int64, format string, args ...any) error {
	return runtime.Errorf(contract.CodeConflict, format, args...).With("reason", "task_limit").
		With("field", field).With("limit", limit)
}

// addParts accounts for size more bytes of parts in c.
func (c *TaskChange) addParts(field string, size int64) error {
	if c.PartsBytes+size > contract.MaxTaskPartsBytes {
		return taskLimit(field, contract.MaxTaskPartsBytes, "a task holds at most %d bytes of parts", contract.MaxTaskPartsBytes)
	}
	c.PartsBytes += size
	return nil
}

// checkVersion refuses a change made against another version than the stored one.
func checkVersion(t *contract.Task, expected *int64) error {
	if expected == nil || *expected == t.Version {
		return nil
	}
	return runtime.Errorf(contract.CodeConflict, "the task changed: it is at version %d, not %d", t.Version, *expected).
		With("reason", "version_mismatch").With("currentVersion", t.Version).With("expectedVersion", *expected)
}

// UpdateTask moves a task to another state as one of its participants, optionally
// adding artifacts and a reason to its history. Only the creator may cancel.
// expectedVersion, when given, must be the stored version (else CONFLICT).
func (a *Tasks) UpdateTask(ctx context.Context, p runtime.Principal, req *contract.UpdateTaskRequest) (*contract.Task, error) {
	if err := runtime.ValidateID("taskId", req.TaskID); err != nil {
		return nil, err
	}
	if !slices.Contains(contract.TaskStates, req.State) {
		return nil, runtime.OneOf("state", contract.TaskStates)
	}
	if err := validateReason("message", req.Message); err != nil {
		return nil, err
	}
	if v := req.ExpectedVersion; v != nil && (*v < 1 || *v > runtime.MaxSequence) {
		return nil, runtime.TooMany("expectedVersion", runtime.MaxSequence, "expectedVersion must be between 1 and %d", int64(runtime.MaxSequence))
	}
	artifacts, sizes, err := validateArtifacts(req.Artifacts)
	if err != nil {
		return nil, err
	}
	return a.changeTask(ctx, p, req.TaskID, func(lt *LockedTask, nowMs int64) (*TaskChange, runtime.NewEvent, error) {
		if req.State == contract.TaskCanceled && p.Subject != lt.Task.FromAgent {
			return nil, runtime.NewEvent{}, creatorOnly()
		}
		if err := checkVersion(&lt.Task, req.ExpectedVersion); err != nil {
			return nil, runtime.NewEvent{}, err
		}
		c := nextChange(lt, nowMs)
		if err := c.transition(lt.Task.State, req.State, p.Subject, req.Message); err != nil {
			return nil, runtime.NewEvent{}, err
		}
		if err := c.putArtifacts(lt, artifacts, sizes); err != nil {
			return nil, runtime.NewEvent{}, err
		}
		return c, taskUpdatedEvent(p.Subject, &lt.Task, c), nil
	})
}

func creatorOnly() error {
	return runtime.Errorf(contract.CodeScopeForbidden, "only the task's creator may cancel it").With("field", "taskId")
}

func validateReason(field string, reason *string) error {
	if reason == nil {
		return nil
	}
	return validateText(field, *reason, contract.MaxTaskReasonBytes, false)
}

// validateArtifacts checks the artifacts of an update (at most MaxTaskArtifacts,
// distinct IDs, generated where absent) and returns them with their sizes.
func validateArtifacts(in []contract.TaskArtifactInput) ([]contract.TaskArtifact, []int64, error) {
	if len(in) > contract.MaxTaskArtifacts {
		return nil, nil, runtime.TooMany("artifacts", contract.MaxTaskArtifacts, "artifacts holds at most %d artifacts", contract.MaxTaskArtifacts)
	}
	out := make([]contract.TaskArtifact, len(in))
	sizes := make([]int64, len(in))
	seen := map[string]bool{}
	for i, art := range in {
		prefix := fmt.Sprintf("artifacts[%d]", i)
		id, err := runtime.IDOrNew(prefix+".artifactId", art.ArtifactID)
		if err != nil {
			return nil, nil, err
		}
		if seen[id] {
			return nil, nil, runtime.Invalid(prefix+".artifactId", "artifact IDs must be unique within an update")
		}
		seen[id] = true
		if art.Name != nil {
			if err := runtime.ValidateLabel(prefix+".name", *art.Name, contract.MaxPurposeChars); err != nil {
				return nil, nil, err
			}
		}
		parts, size, err := validateParts(prefix+".parts", art.Parts, true)
		if err != nil {
			return nil, nil, err
		}
		out[i], sizes[i] = contract.TaskArtifact{ArtifactID: id, Name: art.Name, Parts: parts}, size
	}
	return out, sizes, nil
}

// putArtifacts adds artifacts to c: an ID the task holds replaces that artifact.
func (c *TaskChange) putArtifacts(lt *LockedTask, artifacts []contract.TaskArtifact, sizes []int64) error {
	for i, art := range artifacts {
		old, replaced := lt.ArtifactBytes[art.ArtifactID]
		if !replaced {
			if c.ArtifactCount >= contract.MaxTaskArtifacts {
				return taskLimit("artifacts", contract.MaxTaskArtifacts, "a task holds at most %d artifacts", contract.MaxTaskArtifacts)
			}
			c.ArtifactCount++
		}
		if err := c.addParts("artifacts", sizes[i]-old); err != nil {
			return err
		}
	}
	c.Artifacts, c.ArtifactBytes = artifacts, sizes
	return nil
}

func taskUpdatedEvent(actor string, t *contract.Task, c *TaskChange) runtime.NewEvent {
	artifactIDs := make([]string, len(c.Artifacts))
	for i, art := range c.Artifacts {
		artifactIDs[i] = art.ArtifactID
	}
	return taskEvent(contract.EventTaskUpdated, actor, t, struct {
		TaskID      string   `json:"taskId"`
		From        string   `json:"from"`
		To          string   `json:"to"`
		Version     int64    `json:"version"`
		ArtifactIDs []string `json:"artifactIds"`
	}{t.ID, t.State, c.State, c.Version, artifactIDs}, c.UpdatedAtMs)
}

// CancelTask cancels a task. Only its creator may; anyone else of its participants
// gets SCOPE_FORBIDDEN. A terminal task is INVALID_TRANSITION.
func (a *Tasks) CancelTask(ctx context.Context, p runtime.Principal, req *contract.CancelTaskRequest) (*contract.Task, error) {
	if err := runtime.ValidateID("taskId", req.TaskID); err != nil {
		return nil, err
	}
	if err := validateReason("reason", req.Reason); err != nil {
		return nil, err
	}
	return a.changeTask(ctx, p, req.TaskID, func(lt *LockedTask, nowMs int64) (*TaskChange, runtime.NewEvent, error) {
		if p.Subject != lt.Task.FromAgent {
			return nil, runtime.NewEvent{}, creatorOnly()
		}
		c := nextChange(lt, nowMs)
		if err := c.transition(lt.Task.State, contract.TaskCanceled, p.Subject, req.Reason); err != nil {
			return nil, runtime.NewEvent{}, err
		}
		return c, taskUpdatedEvent(p.Subject, &lt.Task, c), nil
	})
}

// MessageTask adds a message to a task that is not terminal; its role is user when the
// creator sends it and agent when the recipient does.
func (a *Tasks) MessageTask(ctx context.Context, p runtime.Principal, req *contract.TaskMessageRequest) (*contract.Task, error) {
	if err := runtime.ValidateID("taskId", req.TaskID); err != nil {
		return nil, err
	}
	parts, size, err := validateParts("parts", req.Parts, true)
	if err != nil {
		return nil, err
	}
	return a.changeTask(ctx, p, req.TaskID, func(lt *LockedTask, nowMs int64) (*TaskChange, runtime.NewEvent, error) {
		if TaskTerminal(lt.Task.State) {
			return nil, runtime.NewEvent{}, runtime.Errorf(contract.CodeConflict, "the task is %s: it takes no more messages", lt.Task.State).
				With("reason", "task_terminal").With("state", lt.Task.State)
		}
		c := nextChange(lt, nowMs)
		if c.Messages >= contract.MaxTaskMessages {
			return nil, runtime.NewEvent{}, taskLimit("parts", contract.MaxTaskMessages, "a task holds at most %d messages", contract.MaxTaskMessages)
		}
		if err := c.addParts("parts", size); err != nil {
			return nil, runtime.NewEvent{}, err
		}
		role := contract.TaskRoleAgent
		if p.Subject == lt.Task.FromAgent {
			role = contract.TaskRoleUser
		}
		c.Messages++
		c.Message = &contract.TaskMessage{Role: role, FromAgent: p.Subject, Parts: parts, CreatedAtMs: nowMs}
		return c, taskEvent(contract.EventTaskMessage, p.Subject, &lt.Task, struct {
			TaskID       string `json:"taskId"`
			MessageIndex int    `json:"messageIndex"`
			Role         string `json:"role"`
			Version      int64  `json:"version"`
		}{lt.Task.ID, c.Messages - 1, role, c.Version}, nowMs), nil
	})
}

func tasksBinding(p runtime.Principal, role string, states []string) runtime.CursorBinding {
	return runtime.CursorBinding{Kind: "a2a-tasks", Scope: p.Scope, Order: role, Roles: states, Subject: p.Subject}
}

// ListTasks returns one page of the tasks the caller created, receives or either, in
// creation order, and how many non-terminal tasks are addressed to it.
func (a *Tasks) ListTasks(ctx context.Context, p runtime.Principal, req *contract.ListTasksRequest) (*contract.TaskList, error) {
	q := TaskQuery{Agent: p.Subject}
	var err error
	if q.Role, err = enumOr("role", req.Role, contract.TaskListAny, contract.TaskListRoles); err != nil {
		return nil, err
	}
	for i, s := range req.States {
		if !slices.Contains(contract.TaskStates, s) {
			return nil, runtime.OneOf(fmt.Sprintf("states[%d]", i), contract.TaskStates)
		}
	}
	q.States = slices.Compact(slices.Sorted(slices.Values(req.States)))
	if q.Limit, err = runtime.OptionalCount("limit", req.Limit, contract.DefaultA2ALimit, contract.MaxA2ALimit); err != nil {
		return nil, err
	}
	binding := tasksBinding(p, q.Role, q.States)
	if req.Cursor != nil {
		if q.After, err = a.cursors.Decode(binding, *req.Cursor); err != nil {
			return nil, err
		}
	}
	tasks, last, more, err := a.stores.Tasks.ListTasks(ctx, p.Scope, q)
	if err != nil {
		return nil, err
	}
	counts, err := a.stores.Tasks.CountTasks(ctx, p.Scope, p.Subject)
	if err != nil {
		return nil, err
	}
	out := &contract.TaskList{Tasks: tasks, PendingCount: counts.Pending}
	if out.Tasks == nil {
		out.Tasks = []contract.Task{}
	}
	if more {
		next := a.cursors.Encode(binding, last)
		out.NextCursor = &next
	}
	return out, nil
}

// TaskInfo counts the tasks the caller created or receives.
func (a *Tasks) TaskInfo(ctx context.Context, p runtime.Principal, _ *contract.TaskInfoRequest) (*contract.TaskInfo, error) {
	counts, err := a.stores.Tasks.CountTasks(ctx, p.Scope, p.Subject)
	if err != nil {
		return nil, err
	}
	info := &contract.TaskInfo{
		Completed: counts.ByState[contract.TaskCompleted],
		Failed:    counts.ByState[contract.TaskFailed],
		Canceled:  counts.ByState[contract.TaskCanceled],
	}
	for state, n := range counts.ByState {
		info.Total += n
		if !TaskTerminal(state) {
			info.Active += n
		}
	}
	return info, nil
}
