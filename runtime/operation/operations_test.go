package operation_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/operation"
	"github.com/agent-context/agent-context/runtime/runtimetest"
)

// opClock is a clock that advances one millisecond each time it is read, so that a
// deadline passes after a known number of steps.
type opClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *opClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Millisecond)
	return c.t
}

// stubOperations is an in-memory OperationStore: a fixed set of operations, steps that
// finish after stepsLeft calls, and a record of what was asked.
type stubOperations struct {
	ops       map[string]contract.Operation
	created   []contract.Operation
	stepsLeft int
	steps     int
	plans     []operation.RetentionPlan
	failed    map[string]contract.OperationError
	counts    contract.OperationCounts
	lastRun   *int64
	failedGE  int64
	stepErr   error
	bounds    []operation.StepBounds
}

func newStubOperations(ops ...contract.Operation) *stubOperations {
	s := &stubOperations{ops: map[string]contract.Operation{}, failed: map[string]contract.OperationError{}}
	for _, op := range ops {
		s.ops[op.ID] = op
	}
	return s
}

func (s *stubOperations) CreateOperations(_ context.Context, ops []operation.NewOperation) error {
	for _, o := range ops {
		s.created = append(s.created, o.Operation)
	}
	return nil
}

func (s *stubOperations) ConversationDeletion(context.Context, runtime.Scope, string) (contract.Operation, error) {
	return contract.Operation{}, runtime.NotFound("conversationId", "operation")
}

func (s *stubOperations) RestartOperation(ctx context.Context, scope runtime.Scope, id string, _ int64) (contract.Operation, error) {
	return s.Operation(ctx, scope, id)
}

func (s *stubOperations) Operation(_ context.Context, _ runtime.Scope, id string) (contract.Operation, error) {
	op, ok := s.ops[id]
	if !ok {
		return contract.Operation{}, runtime.NotFound("operationId", "operation")
	}
	return op, nil
}

func (s *stubOperations) MaintenanceCounts(_ context.Context, _ runtime.Scope, failedSinceMs int64) (contract.OperationCounts, *int64, error) {
	s.failedGE = failedSinceMs
	return s.counts, s.lastRun, nil
}

func (s *stubOperations) RecentOperations(context.Context, runtime.Scope, int) ([]contract.Operation, error) {
	return nil, nil
}

func (s *stubOperations) RecordCounts(_ context.Context, _ runtime.Scope, bound, _ int64) (operation.RecordCounts, error) {
	return operation.RecordCounts{Bound: bound}, nil
}

func (s *stubOperations) StartOperation(ctx context.Context, scope runtime.Scope, id string, _ int64) (contract.Operation, error) {
	op, err := s.Operation(ctx, scope, id)
	if err == nil && op.State == contract.OperationPending {
		op.State = contract.OperationRunning
		s.ops[id] = op
	}
	return op, err
}

func (s *stubOperations) step() (bool, error) {
	if s.stepErr != nil {
		return false, s.stepErr
	}
	s.steps++
	s.stepsLeft--
	return s.stepsLeft <= 0, nil
}

func (s *stubOperations) DeleteConversationStep(_ context.Context, _ runtime.Scope, _, _ string, bounds operation.StepBounds, _ int64) (bool, error) {
	s.bounds = append(s.bounds, bounds)
	return s.step()
}

func (s *stubOperations) RetentionStep(_ context.Context, _ runtime.Scope, _ string, plan operation.RetentionPlan, bounds operation.StepBounds, _ int64) (bool, error) {
	s.plans = append(s.plans, plan)
	s.bounds = append(s.bounds, bounds)
	return s.step()
}

func (s *stubOperations) FailOperation(_ context.Context, _ runtime.Scope, id string, opErr contract.OperationError, _ int64) error {
	s.failed[id] = opErr
	return nil
}

func (s *stubOperations) DueRetentionScopes(context.Context, *runtime.Scope, int64, int) ([]runtime.Scope, *runtime.Scope, error) {
	return nil, nil, nil
}

// stubConversations accepts every tombstone.
type stubConversations struct{}

func (stubConversations) Tombstone(context.Context, runtime.Scope, string, int64) error { return nil }

// opsDB is a unit of work over store.
func opsDB(store *stubOperations) runtimetest.DB[operation.Stores] {
	return runtimetest.DB[operation.Stores]{S: operation.Stores{Operations: store, Conversations: stubConversations{}, Jobs: &runtimetest.Jobs{}}}
}

type stubSchema struct{ current, latest int64 }

func (s stubSchema) Versions(context.Context) (int64, int64, error) { return s.current, s.latest, nil }

var opScope = runtime.Scope{TenantID: "t", ProjectID: "p"}

func newOps(store *stubOperations, defaultMaxAge time.Duration) *operation.Maintenance {
	return operation.NewMaintenance(operation.MaintenanceConfig{
		DB: opsDB(store), Schema: stubSchema{4, 5}, Clock: &opClock{t: time.UnixMilli(10_000)}, DefaultMaxAge: defaultMaxAge,
	})
}

func int64p(v int64) *int64 { return &v }

// A retention request is validated field by field and echoed in normalized form.
func TestRetentionRequestValidation(t *testing.T) {
	t.Parallel()
	bad := []struct {
		name  string
		req   contract.RetentionRequest
		field string
	}{
		{"no policy", contract.RetentionRequest{}, "policy"},
		{"empty policy", contract.RetentionRequest{Policy: &contract.RetentionPolicy{}}, "policy"},
		{"negative age", contract.RetentionRequest{Policy: &contract.RetentionPolicy{MaxAgeMs: int64p(-1)}}, "policy.maxAgeMs"},
		{"age below a minute", contract.RetentionRequest{Policy: &contract.RetentionPolicy{MaxAgeMs: int64p(59_999)}}, "policy.maxAgeMs"},
		{"age past the integer bound", contract.RetentionRequest{Policy: &contract.RetentionPolicy{MaxAgeMs: int64p(runtime.MaxSequence + 1)}}, "policy.maxAgeMs"},
		{"negative keep", contract.RetentionRequest{Policy: &contract.RetentionPolicy{MaxAgeMs: int64p(60_000), KeepLastMessages: int64p(-1)}}, "policy.keepLastMessages"},
		{"keep zero", contract.RetentionRequest{Policy: &contract.RetentionPolicy{KeepLastMessages: int64p(0)}}, "policy.keepLastMessages"},
		{"keep zero beside an age", contract.RetentionRequest{Policy: &contract.RetentionPolicy{MaxAgeMs: int64p(60_000), KeepLastMessages: int64p(0)}}, "policy.keepLastMessages"},
		{"absurd keep", contract.RetentionRequest{Policy: &contract.RetentionPolicy{KeepLastMessages: int64p(1_000_001)}}, "policy.keepLastMessages"},
		{"bad conversation", contract.RetentionRequest{Policy: &contract.RetentionPolicy{MaxAgeMs: int64p(60_000)}, ConversationID: new("a b")}, "conversationId"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := newStubOperations()
			_, err := newOps(store, 0).Retention(context.Background(), opScope, &tc.req)
			var re *runtime.Error
			require.ErrorAs(t, err, &re)
			require.Equal(t, contract.CodeValidationFailed, re.Code)
			require.Equal(t, tc.field, re.Details["field"])
			require.Empty(t, store.created)
		})
	}

	store := newStubOperations()
	res, err := newOps(store, 0).Retention(context.Background(), opScope, &contract.RetentionRequest{
		Policy: &contract.RetentionPolicy{KeepLastMessages: int64p(1)}, DryRun: true,
	})
	require.NoError(t, err)
	op := res.Operation
	require.Equal(t, []contract.Operation{op}, store.created)
	require.Regexp(t, `^op-[0-9a-f-]{36}$`, op.ID)
	require.Equal(t, contract.OperationPending, op.State)
	require.JSONEq(t, `{"policy":{"maxAgeMs":null,"keepLastMessages":1},"conversationId":null,"dryRun":true}`, string(op.Request))
	require.Equal(t, op.CreatedAtMs, op.UpdatedAtMs)
}

// A deletion validates its conversation ID before the store is reached.
func TestDeleteConversationValidation(t *testing.T) {
	t.Parallel()
	store := newStubOperations()
	ops := newOps(store, 0)
	for _, id := range []string{"", "a b", string(make([]byte, 300))} {
		_, _, err := ops.DeleteConversation(context.Background(), opScope, &contract.DeleteConversationRequest{ConversationID: id})
		require.Equal(t, contract.CodeValidationFailed, runtime.ErrorCode(err), "%q", id)
	}
	require.Empty(t, store.created)
	res, created, err := ops.DeleteConversation(context.Background(), opScope, &contract.DeleteConversationRequest{ConversationID: "c"})
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, contract.OperationConversationDelete, res.Operation.Kind)
	require.JSONEq(t, `{"conversationId":"c"}`, string(res.Operation.Request))
}

// messages:delete reads deletion and retention operations; any other kind needs
// context:admin, which reads every kind.
func TestGetOperationCapabilities(t *testing.T) {
	t.Parallel()
	store := newStubOperations(
		contract.Operation{ID: "op-del", Kind: contract.OperationConversationDelete},
		contract.Operation{ID: "op-ret", Kind: contract.OperationRetention},
		contract.Operation{ID: "op-exp", Kind: contract.OperationExport},
		contract.Operation{ID: "op-vec", Kind: contract.OperationVectorRebuild},
	)
	ops := newOps(store, 0)
	deleter := runtime.Principal{Scope: opScope, Capabilities: map[string]bool{contract.CapMessagesDelete: true}}
	admin := runtime.Principal{Scope: opScope, Capabilities: map[string]bool{contract.CapContextAdmin: true}}
	get := func(p runtime.Principal, id string) error {
		res, err := ops.Get(context.Background(), p, &contract.GetOperationRequest{OperationID: id})
		if err == nil {
			require.Equal(t, id, res.Operation.ID)
		}
		return err
	}
	for _, id := range []string{"op-del", "op-ret"} {
		require.NoError(t, get(deleter, id))
		require.NoError(t, get(admin, id))
	}
	for _, id := range []string{"op-exp", "op-vec"} {
		var re *runtime.Error
		require.ErrorAs(t, get(deleter, id), &re)
		require.Equal(t, contract.CodeTokenForbidden, re.Code)
		require.Equal(t, contract.CapContextAdmin, re.Details["requiredCapability"])
		require.NoError(t, get(admin, id))
	}
	require.Equal(t, contract.CodeNotFound, runtime.ErrorCode(get(admin, "op-missing")))
	require.Equal(t, contract.CodeValidationFailed, runtime.ErrorCode(get(admin, "")))
}

// A run does at least one step, stops at its deadline, and reports whether the
// operation is finished.
func TestRunOperationSteps(t *testing.T) {
	t.Parallel()
	store := newStubOperations(contract.Operation{
		ID: "op-1", Kind: contract.OperationConversationDelete, State: contract.OperationPending,
		Request: []byte(`{"conversationId":"c"}`),
	})
	store.stepsLeft = 5
	clock := &opClock{t: time.UnixMilli(10_000)}
	ops := operation.NewMaintenance(operation.MaintenanceConfig{DB: opsDB(store), Clock: clock})

	finished, err := ops.RunOperation(context.Background(), opScope, "op-1", time.UnixMilli(0))
	require.NoError(t, err)
	require.False(t, finished)
	require.Equal(t, 1, store.steps, "a run past its deadline still does one step")

	finished, err = ops.RunOperation(context.Background(), opScope, "op-1", clock.Now().Add(time.Hour))
	require.NoError(t, err)
	require.True(t, finished)
	require.Equal(t, 5, store.steps)
	for _, b := range store.bounds {
		require.Equal(t, operation.StepBounds{Rows: 1000, Bytes: 32 << 20}, b, "every step is bounded by rows and bytes")
	}

	store.stepErr = errors.New("connection reset")
	store.stepsLeft = 5
	_, err = ops.RunOperation(context.Background(), opScope, "op-1", clock.Now().Add(time.Hour))
	require.ErrorIs(t, err, store.stepErr, "a failed step is transient: the job runs again")
	require.Empty(t, store.failed)

	finished, err = ops.RunOperation(context.Background(), opScope, "op-gone", clock.Now())
	require.NoError(t, err)
	require.True(t, finished, "a job whose operation is gone has nothing to do")
}

// A finished operation is never worked again.
func TestRunOperationFinishedIsNoop(t *testing.T) {
	t.Parallel()
	for _, state := range []string{contract.OperationSucceeded, contract.OperationFailed} {
		store := newStubOperations(contract.Operation{ID: "op-1", Kind: contract.OperationRetention, State: state})
		finished, err := newOps(store, 0).RunOperation(context.Background(), opScope, "op-1", time.Now().Add(time.Hour))
		require.NoError(t, err)
		require.True(t, finished)
		require.Zero(t, store.steps)
	}
}

// An operation that cannot run (no job for its kind, an unreadable request) fails at
// once, with an error that names no internals.
func TestRunOperationPermanentFailure(t *testing.T) {
	t.Parallel()
	store := newStubOperations(
		contract.Operation{ID: "op-exp", Kind: contract.OperationExport, State: contract.OperationPending},
		contract.Operation{ID: "op-bad", Kind: contract.OperationRetention, State: contract.OperationRunning, Request: []byte(`{}`)},
	)
	ops := newOps(store, 0)
	for _, id := range []string{"op-exp", "op-bad"} {
		finished, err := ops.RunOperation(context.Background(), opScope, id, time.Now().Add(time.Hour))
		require.NoError(t, err)
		require.True(t, finished)
		require.Equal(t, contract.OperationError{Code: contract.CodeInternal, Message: "the operation failed"}, store.failed[id])
	}
	require.Zero(t, store.steps)
}

// The retention plan fixes the age cutoff at the operation's creation.
func TestRetentionPlan(t *testing.T) {
	t.Parallel()
	store := newStubOperations(contract.Operation{
		ID: "op-1", Kind: contract.OperationRetention, State: contract.OperationPending, CreatedAtMs: 50_000,
		Request: []byte(`{"policy":{"maxAgeMs":20000,"keepLastMessages":3},"conversationId":"c","dryRun":true}`),
	})
	store.stepsLeft = 2
	ops := operation.NewMaintenance(operation.MaintenanceConfig{DB: opsDB(store), BatchSize: 7, BatchBytes: 4096})
	_, err := ops.RunOperation(context.Background(), opScope, "op-1", time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, []operation.StepBounds{{Rows: 7, Bytes: 4096}, {Rows: 7, Bytes: 4096}}, store.bounds)
	want := operation.RetentionPlan{ConversationID: "c", CutoffMs: int64p(30_000), KeepLast: 3, DryRun: true}
	require.Equal(t, []operation.RetentionPlan{want, want}, store.plans)
}

// A failure keeps the code and message of a contract error, and hides any other cause.
func TestFailOperationMapsErrors(t *testing.T) {
	t.Parallel()
	store := newStubOperations()
	ops := newOps(store, 0)
	require.NoError(t, ops.FailOperation(context.Background(), opScope, "a",
		runtime.Errorf(contract.CodeServiceUnavailable, "the database is unavailable")))
	require.NoError(t, ops.FailOperation(context.Background(), opScope, "b",
		errors.New(`pq: relation "secret_table" does not exist`)))
	require.Equal(t, map[string]contract.OperationError{
		"a": {Code: contract.CodeServiceUnavailable, Message: "the database is unavailable"},
		"b": {Code: contract.CodeInternal, Message: "the operation failed"},
	}, store.failed)
}

// stubReporter reports a fixed projection status.
type stubReporter struct {
	st contract.VectorProjectionStatus
}

func (r stubReporter) Status(context.Context, runtime.Scope) (contract.VectorProjectionStatus, error) {
	return r.st, nil
}

// The status assembles the store's counts, the schema, the configured policy and the
// projection's state.
func TestOperationsStatus(t *testing.T) {
	t.Parallel()
	store := newStubOperations()
	store.counts = contract.OperationCounts{Pending: 1, Running: 2, FailedLast24h: 3}
	store.lastRun = int64p(77)
	projection := contract.VectorProjectionStatus{Generation: 2, Model: "m", Dimensions: 8, PendingEntries: 5, IndexedThroughMs: 6}
	ops := operation.NewMaintenance(operation.MaintenanceConfig{
		DB: opsDB(store), Schema: stubSchema{5, 5}, Clock: &opClock{t: time.UnixMilli(100_000_000)}, DefaultMaxAge: 30 * time.Minute,
		Projection: stubReporter{projection},
	})
	st, err := ops.Status(context.Background(), opScope)
	require.NoError(t, err)
	require.Equal(t, &contract.MaintenanceStatus{
		Operations:       store.counts,
		Retention:        contract.RetentionStatus{LastRunAtMs: int64p(77), DefaultMaxAgeMs: int64p(1_800_000)},
		VectorProjection: projection,
		Database:         contract.DatabaseStatus{OK: true, SchemaVersion: 5},
	}, st)
	require.Equal(t, int64(100_000_001-24*3_600_000), store.failedGE)

	st, err = newOps(store, 0).Status(context.Background(), opScope)
	require.NoError(t, err)
	require.Equal(t, contract.DatabaseStatus{OK: false, SchemaVersion: 4}, st.Database, "migrations pending")
	require.Nil(t, st.Retention.DefaultMaxAgeMs)
}
