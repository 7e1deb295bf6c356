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

// The conversation both tests hold: alice sends bob a task, reads it, bob moves it to
// working through the REST route, alice continues it and sees bob's update, cancels
// it, and an unknown task is not found.

func TestSDKv03(t *testing.T) {
	t.Parallel()
	svc := startService(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	card, err := cardv03.DefaultResolver.Resolve(ctx, svc.base)
	require.NoError(t, err)
	require.Equal(t, svc.base+"/a2a", card.URL)
	creds := clientv03.NewInMemoryCredentialsStore()
	client, err := clientv03.NewFromCard(ctx, card,
		clientv03.WithInterceptors(&clientv03.AuthInterceptor{Service: creds}))
	require.NoError(t, err)
	defer client.Destroy()
	ctx = clientv03.WithSessionID(ctx, "alice")
	creds.Set("alice", "bearer", clientv03.AuthCredential(svc.token("alice")))

	res, err := client.SendMessage(ctx, &a2av03.MessageSendParams{
		Message:  a2av03.NewMessage(a2av03.MessageRoleUser, a2av03.TextPart{Text: "summarize the design"}),
		Metadata: map[string]any{"toAgent": "bob"},
	})
	require.NoError(t, err)
	task, ok := res.(*a2av03.Task)
	require.True(t, ok, "the answer is a task: %#v", res)
	require.Equal(t, a2av03.TaskStateSubmitted, task.Status.State)
	require.Len(t, task.History, 1)
	require.Equal(t, a2av03.MessageRoleUser, task.History[0].Role)

	got, err := client.GetTask(ctx, &a2av03.TaskQueryParams{ID: task.ID})
	require.NoError(t, err)
	require.Equal(t, task.ID, got.ID)
	require.Equal(t, task.ContextID, got.ContextID)

	svc.restUpdate(svc.token("bob"), string(task.ID), "working")
	more := a2av03.NewMessage(a2av03.MessageRoleUser, a2av03.TextPart{Text: "and the risks"})
	more.TaskID = task.ID
	res, err = client.SendMessage(ctx, &a2av03.MessageSendParams{Message: more})
	require.NoError(t, err)
	continued := res.(*a2av03.Task)
	require.Equal(t, a2av03.TaskStateWorking, continued.Status.State)
	require.Len(t, continued.History, 2)
	require.Equal(t, a2av03.TextPart{Text: "and the risks"}, continued.History[1].Parts[0])

	canceled, err := client.CancelTask(ctx, &a2av03.TaskIDParams{ID: task.ID})
	require.NoError(t, err)
	require.Equal(t, a2av03.TaskStateCanceled, canceled.Status.State)

	_, err = client.GetTask(ctx, &a2av03.TaskQueryParams{ID: "no-such-task"})
	require.ErrorIs(t, err, a2av03.ErrTaskNotFound)
}

func TestSDKv2(t *testing.T) {
	t.Parallel()
	svc := startService(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	card, err := agentcard.DefaultResolver.Resolve(ctx, svc.base)
	require.NoError(t, err)
	require.Equal(t, svc.base+"/a2a", card.SupportedInterfaces[0].URL)
	creds := a2aclient.NewInMemoryCredentialsStore()
	client, err := a2aclient.NewFromCard(ctx, card,
		a2aclient.WithCallInterceptors(&a2aclient.AuthInterceptor{Service: creds}))
	require.NoError(t, err)
	defer client.Destroy()
	ctx = a2aclient.AttachSessionID(ctx, "alice")
	creds.Set("alice", "bearer", a2aclient.AuthCredential(svc.token("alice")))

	res, err := client.SendMessage(ctx, &a2a.SendMessageRequest{
		Message:  a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("summarize the design")),
		Metadata: map[string]any{"toAgent": "bob"},
	})
	require.NoError(t, err)
	task, ok := res.(*a2a.Task)
	require.True(t, ok, "the answer is a task: %#v", res)
	require.Equal(t, a2a.TaskStateSubmitted, task.Status.State)
	require.Len(t, task.History, 1)
	require.Equal(t, a2a.MessageRoleUser, task.History[0].Role)

	got, err := client.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
	require.NoError(t, err)
	require.Equal(t, task.ID, got.ID)

	svc.restUpdate(svc.token("bob"), string(task.ID), "working")
	more := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("and the risks"))
	more.TaskID = task.ID
	res, err = client.SendMessage(ctx, &a2a.SendMessageRequest{Message: more})
	require.NoError(t, err)
	continued := res.(*a2a.Task)
	require.Equal(t, a2a.TaskStateWorking, continued.Status.State)
	require.Len(t, continued.History, 2)
	require.Equal(t, "and the risks", continued.History[1].Parts[0].Text())

	canceled, err := client.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateCanceled, canceled.Status.State)

	_, err = client.GetTask(ctx, &a2a.GetTaskRequest{ID: "no-such-task"})
	require.ErrorIs(t, err, a2a.ErrTaskNotFound)
}
