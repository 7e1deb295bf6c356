package a2asdk

import (
	"context"
	"testing"
	"time"

	a2av03 "github.com/a2aproject/a2a-go/a2a"
	clientv03 "github.com/a2aproject/a2a-go/a2aclient"
	cardv03 "github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/stretchr/testify/require"
)

// Each stream follows a task of alice's on the first replica while bob changes it
// through the REST routes on a second replica: the stream shows each change in order
// and ends at the terminal state.

// bobWorks makes bob's changes on the replica: working, a message, then completed
// with an artifact.
func bobWorks(svc, replica *service, taskID string) {
	bob := svc.token("bob")
	replica.restUpdate(bob, taskID, "working")
	replica.rest(bob, "/internal/v1/a2a/tasks/message", map[string]any{"taskId": taskID,
		"parts": []map[string]any{{"type": "text", "text": "on it"}}})
	replica.rest(bob, "/internal/v1/a2a/tasks/update", map[string]any{"taskId": taskID, "state": "completed",
		"artifacts": []map[string]any{{"artifactId": "summary", "parts": []map[string]any{{"type": "text", "text": "done"}}}}})
}

func v2Client(ctx context.Context, t *testing.T, svc *service) (context.Context, *a2aclient.Client) {
	card, err := agentcard.DefaultResolver.Resolve(ctx, svc.base)
	require.NoError(t, err)
	require.True(t, card.Capabilities.Streaming)
	require.True(t, card.Capabilities.PushNotifications)
	creds := a2aclient.NewInMemoryCredentialsStore()
	client, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithCallInterceptors(&a2aclient.AuthInterceptor{Service: creds}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Destroy() })
	creds.Set("alice", "bearer", a2aclient.AuthCredential(svc.token("alice")))
	return a2aclient.AttachSessionID(ctx, "alice"), client
}

// v2Steps describes v2 stream events: "task:STATE", "status:STATE", "message:TEXT",
// "artifact:ID".
func v2Step(t *testing.T, e a2a.Event) string {
	switch e := e.(type) {
	case *a2a.Task:
		return "task:" + string(e.Status.State)
	case *a2a.TaskStatusUpdateEvent:
		if e.Status.Message != nil {
			return "message:" + e.Status.Message.Parts[0].Text()
		}
		return "status:" + string(e.Status.State)
	case *a2a.TaskArtifactUpdateEvent:
		return "artifact:" + string(e.Artifact.ID)
	}
	t.Fatalf("unexpected event %T", e)
	return ""
}

func TestSDKv2SendStreamingMessage(t *testing.T) {
	t.Parallel()
	svc := startService(t)
	replica := svc.replica()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ctx, client := v2Client(ctx, t, svc)

	var steps []string
	for event, err := range client.SendStreamingMessage(ctx, &a2a.SendMessageRequest{
		Message:  a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("summarize the design")),
		Metadata: map[string]any{"toAgent": "bob"},
	}) {
		require.NoError(t, err)
		steps = append(steps, v2Step(t, event))
		if task, ok := event.(*a2a.Task); ok {
			bobWorks(svc, replica, string(task.ID))
		}
	}
	require.Equal(t, []string{"task:TASK_STATE_SUBMITTED", "status:TASK_STATE_WORKING", "message:on it",
		"artifact:summary", "status:TASK_STATE_COMPLETED"}, steps)
}

func TestSDKv2SubscribeToTask(t *testing.T) {
	t.Parallel()
	svc := startService(t)
	replica := svc.replica()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ctx, client := v2Client(ctx, t, svc)
	res, err := client.SendMessage(ctx, &a2a.SendMessageRequest{
		Message:  a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("review")),
		Metadata: map[string]any{"toAgent": "bob"},
	})
	require.NoError(t, err)
	task := res.(*a2a.Task)

	var steps []string
	for event, err := range client.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: task.ID}) {
		require.NoError(t, err)
		steps = append(steps, v2Step(t, event))
		if _, ok := event.(*a2a.Task); ok {
			bobWorks(svc, replica, string(task.ID))
		}
	}
	require.Equal(t, []string{"task:TASK_STATE_SUBMITTED", "status:TASK_STATE_WORKING", "message:on it",
		"artifact:summary", "status:TASK_STATE_COMPLETED"}, steps)

	// The task is terminal now: its final state, then the end.
	steps = nil
	for event, err := range client.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: task.ID}) {
		require.NoError(t, err)
		steps = append(steps, v2Step(t, event))
	}
	require.Equal(t, []string{"task:TASK_STATE_COMPLETED"}, steps)

	for _, err := range client.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: "no-such-task"}) {
		require.ErrorIs(t, err, a2a.ErrTaskNotFound)
	}
}

// v03Step describes 0.3 stream events as v2Step does, with the final flag.
func v03Step(t *testing.T, e a2av03.Event) string {
	switch e := e.(type) {
	case *a2av03.Task:
		return "task:" + string(e.Status.State)
	case *a2av03.TaskStatusUpdateEvent:
		final := ""
		if e.Final {
			final = " final"
		}
		if e.Status.Message != nil {
			return "message:" + e.Status.Message.Parts[0].(a2av03.TextPart).Text + final
		}
		return "status:" + string(e.Status.State) + final
	case *a2av03.TaskArtifactUpdateEvent:
		return "artifact:" + string(e.Artifact.ID)
	}
	t.Fatalf("unexpected event %T", e)
	return ""
}

func TestSDKv03Streams(t *testing.T) {
	t.Parallel()
	svc := startService(t)
	replica := svc.replica()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	card, err := cardv03.DefaultResolver.Resolve(ctx, svc.base)
	require.NoError(t, err)
	require.True(t, card.Capabilities.Streaming)
	creds := clientv03.NewInMemoryCredentialsStore()
	client, err := clientv03.NewFromCard(ctx, card, clientv03.WithInterceptors(&clientv03.AuthInterceptor{Service: creds}))
	require.NoError(t, err)
	defer client.Destroy()
	ctx = clientv03.WithSessionID(ctx, "alice")
	creds.Set("alice", "bearer", clientv03.AuthCredential(svc.token("alice")))

	var steps []string
	var taskID a2av03.TaskID
	for event, err := range client.SendStreamingMessage(ctx, &a2av03.MessageSendParams{
		Message:  a2av03.NewMessage(a2av03.MessageRoleUser, a2av03.TextPart{Text: "summarize the design"}),
		Metadata: map[string]any{"toAgent": "bob"},
	}) {
		require.NoError(t, err)
		steps = append(steps, v03Step(t, event))
		if task, ok := event.(*a2av03.Task); ok {
			taskID = task.ID
			bobWorks(svc, replica, string(task.ID))
		}
	}
	require.Equal(t, []string{"task:submitted", "status:working", "message:on it", "artifact:summary",
		"status:completed final"}, steps)

	steps = nil
	for event, err := range client.ResubscribeToTask(ctx, &a2av03.TaskIDParams{ID: taskID}) {
		require.NoError(t, err)
		steps = append(steps, v03Step(t, event))
	}
	require.Equal(t, []string{"task:completed"}, steps, "a terminal task: its final state, then the end")
}
