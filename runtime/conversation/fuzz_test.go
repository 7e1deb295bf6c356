package conversation_test

// Fuzz targets for every request validator, called through the use cases' public
// entry points with bodies decoded as the server decodes them. Each asserts what the
// contract promises of any input: a refusal is a *runtime.Error with a 4xx code of
// the contract's table naming the offending field, nothing reaches the store then,
// and whatever is runtimetest.Accepted reaches the store within every limit. Seed corpora are in
// testdata/fuzz/<target>/.

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/conversation"
	"github.com/agent-context/agent-context/runtime/runtimetest"
)

func FuzzAppendMessages(f *testing.F) {
	runtimetest.FuzzBody(f, func(t *testing.T, req *contract.AppendMessagesRequest) {
		b := setupConversations(t)
		res, err := b.conv.Append(context.Background(), b.scope, req)
		if !runtimetest.Accepted(t, err, b.store.calls) {
			return
		}
		batch := b.store.appended
		require.Len(t, batch, len(req.Messages))
		require.GreaterOrEqual(t, len(batch), 1)
		require.LessOrEqual(t, len(batch), contract.MaxAppendMessages)
		require.Equal(t, len(batch), res.Appended)
		for i, m := range batch {
			sent := req.Messages[i]
			runtimetest.RequireID(t, "id", m.ID)
			runtimetest.RequireID(t, "conversationId", m.Scope.ConversationID)
			require.Equal(t, sent.ID, m.ID)
			require.Equal(t, sent.Scope.ConversationID, m.Scope.ConversationID)
			require.Contains(t, contract.Roles, m.Role)
			require.Equal(t, sent.Content, m.Content, "content is stored as sent")
			require.LessOrEqual(t, len(m.Content), contract.MaxMessageContentBytes)
			require.NotContains(t, m.Content, "\x00")
			require.True(t, utf8.ValidString(m.Content))
			require.GreaterOrEqual(t, m.Sequence, int64(0))
			require.LessOrEqual(t, m.Sequence, int64(runtime.MaxSequence))
			require.GreaterOrEqual(t, m.CreatedAtMs, int64(0))
			require.LessOrEqual(t, m.CreatedAtMs, int64(runtime.MaxSequence))
			runtimetest.RequireStoredJSON(t, m.Metadata, contract.MaxMetadataBytes)
		}
	})
}

func FuzzRecentMessages(f *testing.F) {
	runtimetest.FuzzBody(f, func(t *testing.T, req *contract.RecentMessagesRequest) {
		b := setupConversations(t)
		if _, err := b.conv.Recent(context.Background(), b.scope, req); !runtimetest.Accepted(t, err, b.store.calls) {
			return
		}
		q := b.store.list
		require.Equal(t, req.Scope.ConversationID, q.ConversationID)
		runtimetest.RequireID(t, "conversationId", q.ConversationID)
		runtimetest.RequireLimit(t, q.Limit, req.Limit, contract.DefaultMessagesLimit, contract.MaxMessagesLimit)
		runtimetest.RequireRoleFilter(t, q.Roles)
		require.True(t, q.Descending, "recent reads newest first")
		require.Zero(t, q.After)
		require.Positive(t, q.MaxBytes)
	})
}

// FuzzPageMessages also checks the cursor round trip: the nextCursor of a page
// resumes, with the same request, right after the page's last message.
func FuzzPageMessages(f *testing.F) {
	runtimetest.FuzzBody(f, func(t *testing.T, req *contract.PageMessagesRequest) {
		b := setupConversations(t)
		b.store.listed = []contract.ConversationRecord{{ID: "m", Scope: req.Scope, Role: contract.RoleUser, Sequence: 41}}
		b.store.more = true
		page, err := b.conv.Page(context.Background(), b.scope, req)
		if !runtimetest.Accepted(t, err, b.store.calls) {
			return
		}
		q := b.store.list
		require.Equal(t, req.Scope.ConversationID, q.ConversationID)
		runtimetest.RequireID(t, "conversationId", q.ConversationID)
		runtimetest.RequireLimit(t, q.Limit, req.Limit, contract.DefaultMessagesLimit, contract.MaxMessagesLimit)
		runtimetest.RequireRoleFilter(t, q.Roles)
		require.Equal(t, req.Order == contract.OrderDesc, q.Descending)
		require.Contains(t, []string{"", contract.OrderAsc, contract.OrderDesc}, req.Order)
		require.GreaterOrEqual(t, q.After, int64(0))
		if req.Cursor == nil || *req.Cursor == "" {
			require.Zero(t, q.After)
		}
		require.NotNil(t, page.NextCursor)

		next := *req
		next.Cursor = page.NextCursor
		_, err = b.conv.Page(context.Background(), b.scope, &next)
		require.NoError(t, err)
		require.Equal(t, int64(41), b.store.list.After)
		// The cursor is bound to the request: another conversation refuses it.
		next.Scope.ConversationID += "x"
		_, err = b.conv.Page(context.Background(), b.scope, &next)
		if runtime.ValidateID("scope.conversationId", next.Scope.ConversationID) == nil {
			require.Equal(t, contract.CodeInvalidCursor, runtime.ErrorCode(err), "%v", err)
		}
	})
}

func FuzzSearchMessages(f *testing.F) {
	runtimetest.FuzzBody(f, func(t *testing.T, req *contract.SearchMessagesRequest) {
		b := setupConversations(t)
		if _, err := b.conv.Search(context.Background(), b.scope, req); !runtimetest.Accepted(t, err, b.store.calls) {
			return
		}
		q := b.store.search
		require.Equal(t, req.Query, q.Text)
		require.NotEmpty(t, strings.TrimSpace(q.Text))
		require.LessOrEqual(t, len(q.Text), contract.MaxSearchQueryBytes)
		runtimetest.RequireLimit(t, q.Limit, req.Limit, contract.DefaultSearchLimit, contract.MaxSearchLimit)
		runtimetest.RequireRoleFilter(t, q.Roles)
		if req.Scope == nil {
			require.Empty(t, q.ConversationID)
		} else {
			runtimetest.RequireID(t, "conversationId", q.ConversationID)
		}
	})
}

// FuzzCreateWindow checks the use case and the window it stores: at most 2,000 items
// with unique valid IDs and ordinals 0..n-1, each within 4 MiB and all within 16 MiB,
// evidence exactly on knowledge_evidence items, and a digest that depends on the
// request only.
func FuzzCreateWindow(f *testing.F) {
	runtimetest.FuzzBody(f, func(t *testing.T, req *contract.CreateWindowRequest) {
		uc, store, p := setupWindowUseCases()
		created, _, err := uc.CreateWindow(context.Background(), p, req)
		w, verr := conversation.ValidateWindow(req)
		if err != nil {
			runtimetest.RequireRefusal(t, err)
			require.Zero(t, store.calls)
			require.Equal(t, runtime.ErrorCode(err), runtime.ErrorCode(verr), "the use case validates with ValidateWindow")
			return
		}
		require.NoError(t, verr)
		if req.ID != nil {
			require.Equal(t, *req.ID, w.ID)
			require.Equal(t, w.ID, created.ID)
		}
		runtimetest.RequireID(t, "id", w.ID)
		runtimetest.RequireID(t, "conversationId", w.Conversation.ConversationID)
		require.Contains(t, contract.Stages, w.Stage)
		require.GreaterOrEqual(t, w.TokenCount, int64(0))
		require.LessOrEqual(t, utf8.RuneCountInString(w.Purpose), contract.MaxPurposeChars)
		runtimetest.RequireStoredJSON(t, w.Metadata, contract.MaxMetadataBytes)
		require.Len(t, w.Items, len(req.Items))
		require.LessOrEqual(t, len(w.Items), contract.MaxWindowItems)
		require.Equal(t, len(w.Items), w.ItemCount)
		ids := map[string]bool{}
		var total int64
		for i, item := range w.Items {
			runtimetest.RequireID(t, "items.id", item.ID)
			require.False(t, ids[item.ID], "item IDs are unique")
			ids[item.ID] = true
			require.Equal(t, i, item.Ordinal)
			require.Contains(t, contract.ItemKinds, item.Kind)
			require.LessOrEqual(t, len(item.Content), contract.MaxWindowItemContentBytes)
			require.Equal(t, item.Kind == contract.ItemKindKnowledgeEvidence, item.KnowledgeEvidence != nil)
			if item.Role != nil {
				require.Contains(t, contract.Roles, *item.Role)
			}
			runtimetest.RequireStoredJSON(t, item.Metadata, contract.MaxMetadataBytes)
			total += int64(len(item.Content))
		}
		require.LessOrEqual(t, total, int64(contract.MaxWindowContentBytes))
		require.Equal(t, total, w.ContentBytes)
		require.Len(t, w.ContentSHA256, 64)
		again, err := conversation.ValidateWindow(req)
		require.NoError(t, err)
		require.Equal(t, w.ContentSHA256, again.ContentSHA256)
		require.Equal(t, w.ContentSHA256, created.ContentSHA256)
	})
}

func FuzzCreateDerivation(f *testing.F) {
	runtimetest.FuzzBody(f, func(t *testing.T, req *contract.CreateDerivationRequest) {
		uc, store, p := setupWindowUseCases()
		d, _, err := uc.CreateDerivation(context.Background(), p, req)
		if !runtimetest.Accepted(t, err, store.calls) {
			return
		}
		runtimetest.RequireID(t, "id", d.ID)
		runtimetest.RequireID(t, "sourceWindowId", d.SourceWindowID)
		runtimetest.RequireID(t, "targetWindowId", d.TargetWindowID)
		require.NotEqual(t, d.SourceWindowID, d.TargetWindowID)
		require.Contains(t, contract.DerivationKinds, d.Kind)
		for _, n := range []*int64{d.InputTokenCount, d.OutputTokenCount, d.InputItemCount, d.OutputItemCount} {
			if n != nil {
				require.GreaterOrEqual(t, *n, int64(0))
			}
		}
		runtimetest.RequireStoredJSON(t, d.Metadata, contract.MaxMetadataBytes)
	})
}

func FuzzSaveInvocation(f *testing.F) {
	runtimetest.FuzzBody(f, func(t *testing.T, req *contract.CreateModelInvocationRequest) {
		uc, store, p := setupWindowUseCases()
		inv, err := uc.SaveInvocation(context.Background(), p, req)
		if !runtimetest.Accepted(t, err, store.calls) {
			return
		}
		runtimetest.RequireID(t, "id", inv.ID)
		runtimetest.RequireID(t, "conversationId", inv.Conversation.ConversationID)
		runtimetest.RequireID(t, "requestWindowId", inv.RequestWindowID)
		runtimetest.RequireID(t, "agentId", inv.AgentID)
		if req.AgentID == nil {
			require.Equal(t, p.Subject, inv.AgentID, "the caller is the default agent")
		}
		runtimetest.RequireID(t, "provider", inv.Provider)
		runtimetest.RequireID(t, "model", inv.Model)
		require.Contains(t, contract.InvocationStates, inv.State)
		for _, n := range []int64{inv.InputTokens, inv.OutputTokens, inv.CachedTokens, inv.StartedAtMs, inv.CompletedAtMs, inv.LatencyMs} {
			require.GreaterOrEqual(t, n, int64(0))
		}
		require.LessOrEqual(t, inv.CachedTokens, inv.InputTokens)
		require.Positive(t, inv.StartedAtMs, "a missing start time is the server's clock")
		require.Equal(t, inv.State == contract.InvocationFailed, inv.Error != nil)
		if inv.Error != nil {
			require.NotEmpty(t, inv.Error.Message)
			require.LessOrEqual(t, len(inv.Error.Message), contract.MaxInvocationErrorMsgBytes)
		}
		if inv.ResponseContent != nil {
			require.LessOrEqual(t, len(*inv.ResponseContent), contract.MaxResponseContentBytes)
		}
		runtimetest.RequireStoredJSON(t, inv.Metadata, contract.MaxMetadataBytes)
	})
}

// FuzzWindowLookups covers the reads by ID: windows/get, windows/lineage (and its
// depth bound) and model-invocations/get, decoding the same body for each.
func FuzzWindowLookups(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		ctx := context.Background()
		var get contract.GetWindowRequest
		if runtimetest.DecodeRequest(body, &get) {
			uc, store, p := setupWindowUseCases()
			if _, err := uc.GetWindow(ctx, p, &get); runtimetest.Accepted(t, err, store.calls) {
				runtimetest.RequireID(t, "windowId", get.WindowID)
			}
		}
		var lineage contract.LineageRequest
		if runtimetest.DecodeRequest(body, &lineage) {
			uc, store, p := setupWindowUseCases()
			if _, err := uc.Lineage(ctx, p, &lineage); runtimetest.Accepted(t, err, store.calls) {
				require.Equal(t, lineage.WindowID, store.lineage.id)
				runtimetest.RequireID(t, "windowId", store.lineage.id)
				runtimetest.RequireLimit(t, store.lineage.depth, lineage.MaxDepth, contract.DefaultLineageDepth, contract.MaxLineageDepth)
			}
		}
		var inv contract.GetModelInvocationRequest
		if runtimetest.DecodeRequest(body, &inv) {
			uc, store, p := setupWindowUseCases()
			if _, err := uc.GetInvocation(ctx, p, &inv); runtimetest.Accepted(t, err, store.calls) {
				runtimetest.RequireID(t, "invocationId", inv.InvocationID)
			}
		}
	})
}
