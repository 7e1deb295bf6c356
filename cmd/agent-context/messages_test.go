package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/ratelimit"
)

var (
	pathBatch  = contract.RouteMessagesBatch.Path
	pathRecent = contract.RouteMessagesRecent.Path
	pathPage   = contract.RouteMessages.Path
	pathSearch = contract.RouteMessagesSearch.Path
)

// rec is a record for an append body.
func rec(conversation, id, role, content string) map[string]any {
	return map[string]any{"id": id, "scope": map[string]any{"conversationId": conversation}, "role": role, "content": content}
}

func batchOf(records ...map[string]any) map[string]any {
	return map[string]any{"messages": records}
}

func (a *testApp) appendOK(t *testing.T, body any, headers ...string) contract.AppendMessagesResponse {
	t.Helper()
	var res contract.AppendMessagesResponse
	a.post(t, pathBatch, body, headers...).requireOK(t, http.StatusOK, &res)
	return res
}

func (a *testApp) recent(t *testing.T, body any, headers ...string) []contract.ConversationRecord {
	t.Helper()
	var res contract.MessagesResponse
	a.post(t, pathRecent, body, headers...).requireOK(t, http.StatusOK, &res)
	require.NotNil(t, res.Messages)
	return res.Messages
}

func (a *testApp) page(t *testing.T, body any, headers ...string) contract.MessagePage {
	t.Helper()
	var res contract.MessagePage
	a.post(t, pathPage, body, headers...).requireOK(t, http.StatusOK, &res)
	require.NotNil(t, res.Messages)
	return res
}

func (a *testApp) searchIDs(t *testing.T, body any, headers ...string) []string {
	t.Helper()
	var res contract.SearchMessagesResponse
	a.post(t, pathSearch, body, headers...).requireOK(t, http.StatusOK, &res)
	require.NotNil(t, res.Hits)
	out := []string{}
	for _, h := range res.Hits {
		out = append(out, h.Message.ID)
	}
	return out
}

func recordIDs(recs []contract.ConversationRecord) []string {
	out := []string{}
	for _, r := range recs {
		out = append(out, r.ID)
	}
	return out
}

func TestMessagesEndToEnd(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	withMeta := rec("conv-1", "m2", "assistant", "the deployment policy is strict")
	withMeta["metadata"] = map[string]any{"model": "m", "tokens": 12}
	withMeta["createdAtMs"] = 1_700_000_000_000
	resp := app.post(t, pathBatch, batchOf(
		rec("conv-1", "m1", "user", "hello"), withMeta, rec("conv-2", "x1", "user", "other"),
		map[string]any{"id": "m3", "scope": map[string]any{"conversationId": "conv-1"}, "role": "tool",
			"content": "done", "sequence": 0, "createdAtMs": 0, "metadata": nil},
	))
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	require.JSONEq(t, `{"appended":4,"skipped":0,"skippedIds":[]}`, string(resp.Body))

	recent := app.recent(t, map[string]any{"scope": map[string]any{"conversationId": "conv-1"}})
	require.Equal(t, []string{"m1", "m2", "m3"}, recordIDs(recent))
	for i, r := range recent {
		require.Equal(t, int64(i+1), r.Sequence)
		require.Positive(t, r.CreatedAtMs)
		require.Equal(t, "conv-1", r.Scope.ConversationID)
	}
	require.Equal(t, int64(1_700_000_000_000), recent[1].CreatedAtMs)
	require.JSONEq(t, `{"model":"m","tokens":12}`, string(recent[1].Metadata))

	// Records come back with every field, metadata null where there is none.
	raw := app.post(t, pathRecent, map[string]any{"scope": map[string]any{"conversationId": "conv-2"}})
	var shape struct {
		Messages []map[string]json.RawMessage `json:"messages"`
	}
	raw.requireOK(t, http.StatusOK, &shape)
	require.Len(t, shape.Messages, 1)
	for _, field := range []string{"id", "scope", "role", "content", "sequence", "createdAtMs", "metadata"} {
		require.Contains(t, shape.Messages[0], field)
	}
	require.Equal(t, "null", string(shape.Messages[0]["metadata"]))

	page := app.page(t, map[string]any{"scope": map[string]any{"conversationId": "conv-1"}, "limit": 2, "cursor": nil, "order": "asc", "roles": nil})
	require.Equal(t, []string{"m1", "m2"}, recordIDs(page.Messages))
	require.NotNil(t, page.NextCursor)
	page = app.page(t, map[string]any{"scope": map[string]any{"conversationId": "conv-1"}, "limit": 2, "cursor": *page.NextCursor})
	require.Equal(t, []string{"m3"}, recordIDs(page.Messages))
	require.Nil(t, page.NextCursor)

	var hits contract.SearchMessagesResponse
	app.post(t, pathSearch, map[string]any{"query": "Deployment POLICY"}).requireOK(t, http.StatusOK, &hits)
	require.Len(t, hits.Hits, 1)
	require.Equal(t, "m2", hits.Hits[0].Message.ID)
	require.Equal(t, "the deployment policy is strict", hits.Hits[0].Message.Content)
	require.Positive(t, hits.Hits[0].Score)

	// A conversation that never existed reads as empty, not 404.
	require.Empty(t, app.recent(t, map[string]any{"scope": map[string]any{"conversationId": "nobody"}}))
	require.Empty(t, app.page(t, map[string]any{"scope": map[string]any{"conversationId": "nobody"}}).Messages)
}

func TestMessagesAppendLimits(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	many := func(n int, conversation string) map[string]any {
		recs := make([]map[string]any, n)
		for i := range recs {
			recs[i] = rec(conversation, fmt.Sprintf("m%d", i), "user", "x")
		}
		return batchOf(recs...)
	}
	e := app.post(t, pathBatch, many(501, "big")).requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
	require.Equal(t, "messages", e.Details["field"])
	require.EqualValues(t, 500, e.Details["limit"])
	require.Empty(t, app.recent(t, map[string]any{"scope": map[string]any{"conversationId": "big"}}))
	require.Equal(t, 500, app.appendOK(t, many(500, "big")).Appended)
	require.Len(t, app.recent(t, map[string]any{"scope": map[string]any{"conversationId": "big"}, "limit": 500}), 500)

	e = app.post(t, pathBatch, batchOf()).requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
	require.Equal(t, "messages", e.Details["field"])

	mib := strings.Repeat("a", contract.MaxMessageContentBytes)
	require.Equal(t, 1, app.appendOK(t, batchOf(rec("c", "full", "user", mib))).Appended)
	e = app.post(t, pathBatch, batchOf(rec("c", "ok", "user", "x"), rec("c", "over", "user", mib+"a"))).
		requireError(t, http.StatusRequestEntityTooLarge, contract.CodePayloadTooLarge)
	require.Equal(t, "messages[1].content", e.Details["field"])
	require.EqualValues(t, contract.MaxMessageContentBytes, e.Details["limit"])
	// 1 MiB counts bytes: 524,288 two-byte characters fit, one more byte does not.
	twoByte := strings.Repeat("é", contract.MaxMessageContentBytes/2)
	require.Equal(t, 1, app.appendOK(t, batchOf(rec("c", "full2", "user", twoByte))).Appended)
	e = app.post(t, pathBatch, batchOf(rec("c", "over2", "user", twoByte+"a"))).
		requireError(t, http.StatusRequestEntityTooLarge, contract.CodePayloadTooLarge)
	require.Equal(t, "messages[0].content", e.Details["field"])
	require.Equal(t, []string{"full", "full2"}, recordIDs(app.recent(t, map[string]any{"scope": map[string]any{"conversationId": "c"}})))

	meta := func(n int) map[string]any {
		r := rec("c", fmt.Sprintf("meta%d", n), "user", "x")
		r["metadata"] = strings.Repeat("m", n-2) // a JSON string of n bytes
		return r
	}
	require.Equal(t, 1, app.appendOK(t, batchOf(meta(contract.MaxMetadataBytes))).Appended)
	e = app.post(t, pathBatch, batchOf(meta(contract.MaxMetadataBytes+1))).requireError(t, http.StatusRequestEntityTooLarge, contract.CodePayloadTooLarge)
	require.Equal(t, "messages[0].metadata", e.Details["field"])
	require.EqualValues(t, contract.MaxMetadataBytes, e.Details["limit"])

	// Every malformed record is refused with the envelope naming it, and nothing of its
	// batch is stored: each body below starts with a valid record of conversation
	// "partial".
	const valid = `{"id":"ok","scope":{"conversationId":"partial"},"role":"user","content":"x"}`
	for body, field := range map[string]string{
		`{"messages":[` + valid + `,{"id":"a","scope":{"conversationId":"c"},"role":"robot","content":"x"}]}`:                                                 "messages[1].role",
		`{"messages":[` + valid + `,{"id":"a","scope":{"conversationId":"c"},"role":"USER","content":"x"}]}`:                                                  "messages[1].role",
		`{"messages":[` + valid + `,{"id":"a","scope":{"conversationId":"c"},"role":null,"content":"x"}]}`:                                                    "messages[1].role",
		`{"messages":[` + valid + `,{"id":"a","scope":{"conversationId":"c"},"role":"user","content":5}]}`:                                                    "messages[1].content",
		`{"messages":[` + valid + `,{"id":"a","scope":{"conversationId":"c"},"role":"user","content":"\ud800"}]}`:                                             "messages[1].content",
		`{"messages":[` + valid + `,{"id":"a","scope":{"conversationId":"c"},"role":"user","content":"x","sequence":"1"}]}`:                                   "messages[1].sequence",
		`{"messages":[` + valid + `,{"id":"a","scope":{"conversationId":"c"},"role":"user","content":"x","role":"user"}]}`:                                    "messages[1].role",
		`{"messages":[` + valid + `,{"id":"a","scope":{"conversationId":"c"},"role":"user","content":"x","metadata":{"k":1,"k":2}}]}`:                         "messages[1].metadata.k",
		`{"messages":[` + valid + `,{"id":"` + strings.Repeat("i", contract.MaxIDChars+1) + `","scope":{"conversationId":"c"},"role":"user","content":"x"}]}`: "messages[1].id",
		`{"messages":[` + valid + `,null]}`: "messages[1].id",
		`{"messages":[` + valid + `,`:       "messages",
		`{"messages":[{"id":"a","scope":{"conversationId":"c"},"role":"robot","content":"x"}]}`:                   "messages[0].role",
		`{"messages":[{"id":"","scope":{"conversationId":"c"},"role":"user","content":"x"}]}`:                     "messages[0].id",
		`{"messages":[{"id":"a b","scope":{"conversationId":"c"},"role":"user","content":"x"}]}`:                  "messages[0].id",
		`{"messages":[{"id":"a","scope":{},"role":"user","content":"x"}]}`:                                        "messages[0].scope.conversationId",
		`{"messages":[{"id":"a","role":"user","content":"x"}]}`:                                                   "messages[0].scope.conversationId",
		`{"messages":[{"id":"a","scope":{"conversationId":"c"},"role":"user","content":"x","sequence":-1}]}`:      "messages[0].sequence",
		`{"messages":[{"id":"a","scope":{"conversationId":"c"},"role":"user","content":"x","createdAtMs":-1}]}`:   "messages[0].createdAtMs",
		`{"messages":[{"id":"a","scope":{"conversationId":"c"},"role":"user","content":"\u0000"}]}`:               "messages[0].content",
		`{"messages":[{"id":"a","scope":{"conversationId":"c"},"role":"user","content":"x","tenantId":"other"}]}`: "messages[0].tenantId",
		`{"messages":[{"id":"a","scope":{"conversationId":"c","tenantId":"t"},"role":"user","content":"x"}]}`:     "messages[0].scope.tenantId",
		`{"messages":[{"Id":"a","scope":{"conversationId":"c"},"role":"user","content":"x"}]}`:                    "messages[0].Id",
	} {
		e := app.post(t, pathBatch, body).requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
		require.Equal(t, field, e.Details["field"], body)
	}
	require.Empty(t, app.recent(t, map[string]any{"scope": map[string]any{"conversationId": "partial"}}))
	// A 191-character ID is the longest allowed, counted in characters, not bytes.
	id191 := strings.Repeat("é", contract.MaxIDChars)
	require.Equal(t, 1, app.appendOK(t, batchOf(rec(id191, id191, "user", "x"))).Appended)
	require.Len(t, app.recent(t, map[string]any{"scope": map[string]any{"conversationId": id191}}), 1)
}

// Numbers the decoder cannot hold (beyond int64, fractional, exponent spelling) are
// answered like any other out-of-range number: 400 with details.field and the bound in
// details.limit, on every route, and nothing is written.
func TestMessagesAbsurdNumbers(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	for _, n := range []string{"1e100", "99999999999999999999", "-99999999999999999999", "2.5", "1e3", "-1", "0", "501"} {
		for path, bound := range map[string]float64{pathRecent: 500, pathPage: 500, pathSearch: 100} {
			body := `{"scope":{"conversationId":"c"},"limit":` + n + `}`
			if path == pathSearch {
				body = `{"query":"q","limit":` + n + `}`
			}
			if path == pathSearch && n == "501" {
				continue
			}
			e := app.post(t, path, body).requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
			require.Equal(t, "limit", e.Details["field"], "%s %s", path, n)
			require.Equal(t, bound, e.Details["limit"], "%s %s", path, n)
		}
		if n == "0" || n == "501" {
			continue
		}
		for _, field := range []string{"sequence", "createdAtMs"} {
			body := `{"messages":[{"id":"ok","scope":{"conversationId":"c"},"role":"user","content":"x"},` +
				`{"id":"a","scope":{"conversationId":"c"},"role":"user","content":"x","` + field + `":` + n + `}]}`
			e := app.post(t, pathBatch, body).requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
			require.Equal(t, "messages[1]."+field, e.Details["field"], n)
			require.Equal(t, float64(runtime.MaxSequence), e.Details["limit"], n)
		}
	}
	// 2^53 is one above the largest sequence.
	e := app.post(t, pathBatch, `{"messages":[{"id":"a","scope":{"conversationId":"c"},"role":"user","content":"x","sequence":9007199254740992}]}`).
		requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
	require.Equal(t, float64(runtime.MaxSequence), e.Details["limit"])
	require.Empty(t, app.recent(t, map[string]any{"scope": map[string]any{"conversationId": "c"}}))
	// Other fields keep the decoder's answer: a wrong type has no bound to report.
	e = app.post(t, pathRecent, `{"scope":{"conversationId":5}}`).requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
	require.Equal(t, "scope.conversationId", e.Details["field"])
	require.NotContains(t, e.Details, "limit")
}

func TestMessagesIdempotentAppend(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	first := batchOf(rec("c", "m1", "user", "one"), rec("c", "m2", "assistant", "two"))
	require.Equal(t, contract.AppendMessagesResponse{Appended: 2, Skipped: 0, SkippedIDs: []string{}}, app.appendOK(t, first))

	// A retry, also one that echoes the server-filled sequence and time, is a visible no-op.
	require.Equal(t, contract.AppendMessagesResponse{Appended: 0, Skipped: 2, SkippedIDs: []string{"m1", "m2"}}, app.appendOK(t, first))
	stored := app.recent(t, map[string]any{"scope": map[string]any{"conversationId": "c"}})
	echo := map[string]any{"messages": stored}
	require.Equal(t, contract.AppendMessagesResponse{Appended: 0, Skipped: 2, SkippedIDs: []string{"m1", "m2"}}, app.appendOK(t, echo))

	// Within one batch a repeat counts once.
	res := app.appendOK(t, batchOf(rec("c", "m3", "user", "three"), rec("c", "m3", "user", "three")))
	require.Equal(t, contract.AppendMessagesResponse{Appended: 1, Skipped: 1, SkippedIDs: []string{"m3"}}, res)

	// Same ID, different content: 409 naming the IDs, and nothing of the batch written.
	e := app.post(t, pathBatch, batchOf(rec("c", "m4", "user", "four"), rec("c", "m1", "user", "ONE"), rec("d", "d1", "user", "x"))).
		requireError(t, http.StatusConflict, contract.CodeIdempotencyConflict)
	require.Equal(t, []any{"m1"}, e.Details["ids"])
	e = app.post(t, pathBatch, batchOf(rec("c", "m5", "user", "five"), rec("c", "m5", "user", "FIVE"))).
		requireError(t, http.StatusConflict, contract.CodeIdempotencyConflict)
	require.Equal(t, []any{"m5"}, e.Details["ids"])
	require.Equal(t, []string{"m1", "m2", "m3"}, recordIDs(app.recent(t, map[string]any{"scope": map[string]any{"conversationId": "c"}})))
	require.Empty(t, app.recent(t, map[string]any{"scope": map[string]any{"conversationId": "d"}}))

	// The same ID in another conversation is another record.
	require.Equal(t, 1, app.appendOK(t, batchOf(rec("d", "m1", "user", "ONE"))).Appended)
}

func TestMessagesClientSequences(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	at := func(id string, seq int) map[string]any {
		r := rec("c", id, "user", id)
		r["sequence"] = seq
		return r
	}
	app.appendOK(t, batchOf(at("a", 5), at("b", 0), at("c", 9)))
	for _, bad := range []map[string]any{batchOf(at("d", 9)), batchOf(at("d", 2)), batchOf(at("d", 20), at("e", 15))} {
		e := app.post(t, pathBatch, bad).requireError(t, http.StatusConflict, contract.CodeConflict)
		require.Equal(t, "sequence_conflict", e.Details["reason"])
	}
	app.appendOK(t, batchOf(at("f", 0)))
	var seqs []int64
	for _, r := range app.recent(t, map[string]any{"scope": map[string]any{"conversationId": "c"}}) {
		seqs = append(seqs, r.Sequence)
	}
	require.Equal(t, []int64{5, 6, 9, 10}, seqs)
}

// The server never assigns a sequence past the contract's integer bound: once a
// conversation holds 2^53 − 1, an append that would need the next one is 409 CONFLICT
// (reason sequence_exhausted) and stores nothing, not even the batch's other records.
func TestMessagesSequenceBound(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	last := rec("c", "last", "user", "the last sequence")
	last["sequence"] = runtime.MaxSequence
	app.appendOK(t, batchOf(last))
	e := app.post(t, pathBatch, batchOf(rec("other", "o1", "user", "fine"), rec("c", "next", "user", "no room"))).
		requireError(t, http.StatusConflict, contract.CodeConflict)
	require.Equal(t, "sequence_exhausted", e.Details["reason"])
	require.Equal(t, []any{"next"}, e.Details["ids"])
	require.Equal(t, float64(runtime.MaxSequence), e.Details["limit"])
	past := rec("c", "past", "user", "given past the bound")
	past["sequence"] = runtime.MaxSequence + 1
	e = app.post(t, pathBatch, batchOf(past)).requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
	require.Equal(t, "messages[0].sequence", e.Details["field"])
	require.Equal(t, []string{"last"}, recordIDs(app.recent(t, map[string]any{"scope": map[string]any{"conversationId": "c"}})))
	require.Empty(t, app.recent(t, map[string]any{"scope": map[string]any{"conversationId": "other"}}), "the batch was refused whole")
	// A retry of the stored record is still a retry.
	require.Equal(t, 1, app.appendOK(t, batchOf(last)).Skipped)
}

func TestMessagesReads(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	roles := []string{"user", "assistant", "tool", "system"}
	var recs []map[string]any
	for i := range 120 {
		recs = append(recs, rec("c", fmt.Sprintf("m%03d", i+1), roles[i%4], "x"))
	}
	app.appendOK(t, batchOf(recs...))
	scope := map[string]any{"conversationId": "c"}

	// recent: the newest limit (default 50), oldest first.
	recent := app.recent(t, map[string]any{"scope": scope})
	require.Len(t, recent, 50)
	require.Equal(t, "m071", recent[0].ID)
	require.Equal(t, "m120", recent[49].ID)
	recent = app.recent(t, map[string]any{"scope": scope, "limit": 3, "roles": []string{"user", "assistant"}})
	require.Equal(t, []string{"m114", "m117", "m118"}, recordIDs(recent))

	// Pages in both directions, with and without a roles filter, cover everything once.
	for _, tc := range []struct {
		order string
		roles []string
		want  int
	}{{"asc", nil, 120}, {"desc", nil, 120}, {"asc", []string{"tool"}, 30}, {"", []string{"system", "user"}, 60}} {
		var got []int64
		var cursor any
		pages := 0
		for {
			p := app.page(t, map[string]any{"scope": scope, "limit": 7, "cursor": cursor, "order": tc.order, "roles": tc.roles})
			pages++
			for _, m := range p.Messages {
				got = append(got, m.Sequence)
			}
			if p.NextCursor == nil {
				break
			}
			require.Len(t, p.Messages, 7, "only the last page may be short")
			cursor = *p.NextCursor
		}
		require.Len(t, got, tc.want)
		require.Equal(t, (tc.want+6)/7, pages)
		for i := 1; i < len(got); i++ {
			if tc.order == "desc" {
				require.Less(t, got[i], got[i-1])
			} else {
				require.Greater(t, got[i], got[i-1])
			}
		}
	}
	// An exactly full last page has no next cursor.
	p := app.page(t, map[string]any{"scope": scope, "limit": 60})
	p = app.page(t, map[string]any{"scope": scope, "limit": 60, "cursor": *p.NextCursor})
	require.Len(t, p.Messages, 60)
	require.Nil(t, p.NextCursor)
	require.Len(t, app.page(t, map[string]any{"scope": scope}).Messages, 50)

	for path, body := range map[string]map[string]any{
		pathRecent + " limit 0":   {"scope": scope, "limit": 0},
		pathRecent + " limit 501": {"scope": scope, "limit": 501},
		pathPage + " limit 0":     {"scope": scope, "limit": 0},
		pathPage + " limit 501":   {"scope": scope, "limit": 501},
	} {
		e := app.post(t, strings.Fields(path)[0], body).requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
		require.Equal(t, "limit", e.Details["field"])
		require.EqualValues(t, 500, e.Details["limit"])
	}
	require.Len(t, app.recent(t, map[string]any{"scope": scope, "limit": 500}), 120)
	e := app.post(t, pathPage, map[string]any{"scope": scope, "order": "sideways"}).requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
	require.Equal(t, "order", e.Details["field"])
	e = app.post(t, pathRecent, map[string]any{"scope": scope, "roles": []string{"user", "bot"}}).requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
	require.Equal(t, "roles[1]", e.Details["field"])
	e = app.post(t, pathRecent, map[string]any{}).requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
	require.Equal(t, "scope.conversationId", e.Details["field"])
}

func TestMessagesCursorIsBound(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	for _, tenant := range []string{"t1", "t2"} {
		app.appendOK(t, batchOf(rec("c", "m1", "user", "a"), rec("c", "m2", "user", "b"), rec("d", "m1", "user", "c")),
			"x-infra-tenant-id", tenant)
	}
	scope := map[string]any{"conversationId": "c"}
	p := app.page(t, map[string]any{"scope": scope, "limit": 1}, "x-infra-tenant-id", "t1")
	require.NotNil(t, p.NextCursor)
	cursor := *p.NextCursor
	// The same request with the cursor works, and works again (cursors are not one-shot).
	for range 2 {
		p = app.page(t, map[string]any{"scope": scope, "limit": 1, "cursor": cursor}, "x-infra-tenant-id", "t1")
		require.Equal(t, []string{"m2"}, recordIDs(p.Messages))
	}

	invalid := func(body map[string]any, headers ...string) {
		t.Helper()
		e := app.post(t, pathPage, body, headers...).requireError(t, http.StatusBadRequest, contract.CodeInvalidCursor)
		require.Equal(t, "cursor", e.Details["field"])
	}
	tampered := []byte(cursor)
	for i := range tampered {
		c := append([]byte(nil), tampered...)
		c[i] = map[bool]byte{true: 'B', false: 'A'}[c[i] == 'A']
		invalid(map[string]any{"scope": scope, "limit": 1, "cursor": string(c)}, "x-infra-tenant-id", "t1")
	}
	for _, bad := range []string{cursor + "A", cursor[1:], cursor + "=", "not a cursor", "eyJwb3MiOjF9"} {
		invalid(map[string]any{"scope": scope, "limit": 1, "cursor": bad}, "x-infra-tenant-id", "t1")
	}
	invalid(map[string]any{"scope": scope, "limit": 1, "cursor": cursor}, "x-infra-tenant-id", "t2")
	invalid(map[string]any{"scope": scope, "limit": 1, "cursor": cursor}, "x-infra-tenant-id", "t1", "x-infra-project-id", "other")
	invalid(map[string]any{"scope": map[string]any{"conversationId": "d"}, "limit": 1, "cursor": cursor}, "x-infra-tenant-id", "t1")
	invalid(map[string]any{"scope": scope, "limit": 1, "cursor": cursor, "order": "desc"}, "x-infra-tenant-id", "t1")
	invalid(map[string]any{"scope": scope, "limit": 1, "cursor": cursor, "roles": []string{"user"}}, "x-infra-tenant-id", "t1")
	// A different page size is not a different filter.
	p = app.page(t, map[string]any{"scope": scope, "limit": 10, "cursor": cursor, "order": "asc"}, "x-infra-tenant-id", "t1")
	require.Equal(t, []string{"m2"}, recordIDs(p.Messages))
}

// Pages read while another client appends return no row twice and skip none: in
// ascending order every sequence from 1 up to where the reader stopped, in descending
// order every one from where it started down to 1.
func TestMessagesPagesUnderConcurrentAppends(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	scope := map[string]any{"conversationId": "live"}
	// appendBatch runs on another goroutine too, so it reports instead of failing t.
	appendBatch := func(prefix string) int {
		var recs []map[string]any
		for j := range 5 {
			recs = append(recs, rec("live", fmt.Sprintf("%s-%d", prefix, j), "user", "x"))
		}
		body, err := json.Marshal(batchOf(recs...))
		if err != nil {
			return 0
		}
		resp, err := app.client.Post(app.base+pathBatch, "application/json", bytes.NewReader(body))
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	for i := range 20 {
		require.Equal(t, http.StatusOK, appendBatch(fmt.Sprintf("seed%d", i)))
	}
	statuses := make(chan int, 40)
	go func() {
		defer close(statuses)
		for i := range 40 {
			statuses <- appendBatch(fmt.Sprintf("live%d", i))
		}
	}()
	for _, order := range []string{"asc", "desc"} {
		var seqs []int64
		var cursor any
		for {
			p := app.page(t, map[string]any{"scope": scope, "limit": 3, "cursor": cursor, "order": order})
			for _, m := range p.Messages {
				seqs = append(seqs, m.Sequence)
			}
			if p.NextCursor == nil {
				break
			}
			cursor = *p.NextCursor
		}
		require.GreaterOrEqual(t, len(seqs), 100)
		for i, s := range seqs {
			if order == "asc" {
				require.Equal(t, int64(i+1), s)
			} else {
				require.Equal(t, seqs[0]-int64(i), s)
			}
		}
		if order == "desc" {
			require.Equal(t, int64(1), seqs[len(seqs)-1])
		}
	}
	for s := range statuses {
		require.Equal(t, http.StatusOK, s)
	}
	// Once the writer is done, one page holds all 300 records, in order.
	all := app.page(t, map[string]any{"scope": scope, "limit": 500})
	require.Len(t, all.Messages, 300)
	require.Nil(t, all.NextCursor)
	for i, m := range all.Messages {
		require.Equal(t, int64(i+1), m.Sequence)
	}
}

func TestMessagesSearchEndToEnd(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	app.appendOK(t, batchOf(
		rec("c1", "both", "user", "deployment policy deployment policy"),
		rec("c1", "long", "assistant", "The deployment went out before anyone read the policy, which was long and detailed and dull."),
		rec("c1", "one", "user", "deployment only"),
		rec("c2", "ja", "user", "東京タワーに行きました"),
		rec("c2", "zh", "assistant", "我们讨论部署策略"),
		rec("c2", "ko", "tool", "학교에서 공부했습니다"),
		rec("c2", "ops", "user", "a & !b | c:* <-> '; DROP TABLE messages; --"),
	))
	require.Equal(t, []string{"both", "long"}, app.searchIDs(t, map[string]any{"query": "deployment policy"}))
	require.Equal(t, []string{"both", "long"}, app.searchIDs(t, map[string]any{"query": "policy DEPLOYMENT", "scope": map[string]any{"conversationId": "c1"}}))
	require.Empty(t, app.searchIDs(t, map[string]any{"query": "deployment policy", "scope": map[string]any{"conversationId": "c2"}}))
	require.Equal(t, []string{"long"}, app.searchIDs(t, map[string]any{"query": "deployment", "roles": []string{"assistant"}}))
	require.Len(t, app.searchIDs(t, map[string]any{"query": "deployment", "limit": 1}), 1)
	for q, want := range map[string]string{"京タ": "ja", "タワー": "ja", "策略": "zh", "讨论部署": "zh", "교에서": "ko", "공부했": "ko"} {
		require.Equal(t, []string{want}, app.searchIDs(t, map[string]any{"query": q}), q)
	}
	for _, q := range []string{"'; DROP TABLE messages; --", "a & !b | c:*", "<->", "!(", `\`, "'"} {
		got := app.searchIDs(t, map[string]any{"query": q})
		if strings.ContainsAny(q, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") {
			require.Equal(t, []string{"ops"}, got, q)
		} else {
			require.Empty(t, got, q)
		}
	}

	for _, tc := range []struct {
		body   map[string]any
		status int
		code   string
		field  string
		limit  any
	}{
		{map[string]any{"query": ""}, 400, contract.CodeValidationFailed, "query", nil},
		{map[string]any{}, 400, contract.CodeValidationFailed, "query", nil},
		{map[string]any{"query": strings.Repeat("q", contract.MaxSearchQueryBytes+1)}, 413, contract.CodePayloadTooLarge, "query", float64(4096)},
		{map[string]any{"query": "q", "limit": 0}, 400, contract.CodeValidationFailed, "limit", float64(100)},
		{map[string]any{"query": "q", "limit": 101}, 400, contract.CodeValidationFailed, "limit", float64(100)},
		{map[string]any{"query": "q", "scope": map[string]any{"conversationId": ""}}, 400, contract.CodeValidationFailed, "scope.conversationId", nil},
		{map[string]any{"query": "q", "roles": []string{"x"}}, 400, contract.CodeValidationFailed, "roles[0]", nil},
	} {
		e := app.post(t, pathSearch, tc.body).requireError(t, tc.status, tc.code)
		require.Equal(t, tc.field, e.Details["field"])
		if tc.limit != nil {
			require.Equal(t, tc.limit, e.Details["limit"])
		}
	}
	app.searchIDs(t, map[string]any{"query": strings.Repeat("q", contract.MaxSearchQueryBytes), "limit": 100})
	app.searchIDs(t, map[string]any{"query": "x"})
}

// Two tenants and two projects writing the same conversation and message IDs never
// see each other's messages on any message route.
func TestMessagesScopeIsolation(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	scopes := [][]string{
		{"x-infra-tenant-id", "acme", "x-infra-project-id", "alpha"},
		{"x-infra-tenant-id", "globex", "x-infra-project-id", "alpha"},
		{"x-infra-tenant-id", "acme", "x-infra-project-id", "beta"},
	}
	for i, h := range scopes {
		res := app.appendOK(t, batchOf(rec("c", "m1", "user", fmt.Sprintf("walrus secret %d", i))), h...)
		require.Equal(t, 1, res.Appended, "the same IDs in another scope are new records")
	}
	for i, h := range scopes {
		want := fmt.Sprintf("walrus secret %d", i)
		recent := app.recent(t, map[string]any{"scope": map[string]any{"conversationId": "c"}}, h...)
		require.Len(t, recent, 1)
		require.Equal(t, want, recent[0].Content)
		page := app.page(t, map[string]any{"scope": map[string]any{"conversationId": "c"}}, h...)
		require.Len(t, page.Messages, 1)
		require.Equal(t, want, page.Messages[0].Content)
		var hits contract.SearchMessagesResponse
		app.post(t, pathSearch, map[string]any{"query": "walrus"}, h...).requireOK(t, http.StatusOK, &hits)
		require.Len(t, hits.Hits, 1)
		require.Equal(t, want, hits.Hits[0].Message.Content)
	}
	// The default scope (local/local) holds none of it.
	require.Empty(t, app.recent(t, map[string]any{"scope": map[string]any{"conversationId": "c"}}))
	require.Empty(t, app.searchIDs(t, map[string]any{"query": "walrus"}))
}

// Each message route demands its capability of a runtime token.
func TestMessagesCapabilities(t *testing.T) {
	t.Parallel()
	app, minter := startSecuredApp(t)
	mint := minter.bearer
	routes := []struct {
		route contract.Route
		body  any
	}{
		{contract.RouteMessagesBatch, batchOf(rec("c", "m1", "user", "hello"))},
		{contract.RouteMessagesRecent, map[string]any{"scope": map[string]any{"conversationId": "c"}}},
		{contract.RouteMessages, map[string]any{"scope": map[string]any{"conversationId": "c"}}},
		{contract.RouteMessagesSearch, map[string]any{"query": "hello"}},
	}
	for _, r := range routes {
		required := r.route.Capabilities[0]
		other := contract.CapMessagesRead
		if required == contract.CapMessagesRead {
			other = contract.CapMessagesSearch
		}
		e := app.post(t, r.route.Path, r.body, "Authorization", mint(other)).requireError(t, http.StatusForbidden, contract.CodeTokenForbidden)
		require.Equal(t, required, e.Details["requiredCapability"])
		app.post(t, r.route.Path, r.body, "Authorization", mint(required)).requireOK(t, http.StatusOK, nil)
	}
	require.Equal(t, []string{"m1"}, app.searchIDs(t, map[string]any{"query": "hello"}, "Authorization", mint(contract.CapMessagesSearch)))
}

// msgBenchApp is Main serving on a fresh database for a benchmark, with a pool of its own
// for loading data behind the API's back.
type msgBenchApp struct {
	base   string
	client *http.Client
	pool   *pgxpool.Pool
	dsn    string
	// maxConns is the size of the server's pool.
	maxConns int32
}

// msgBenchMaxConns sizes the server's pool in benchmarks: one connection per client of
// the concurrent ones.
const msgBenchMaxConns = 8

// startMsgBenchApp starts a msgBenchApp; opts may change the configuration first.
func startMsgBenchApp(b *testing.B, opts ...func(*Config)) *msgBenchApp {
	b.Helper()
	ctx := context.Background()
	dsn := pgtest.NewDSN(b)
	m := startBenchMain(b, dsn, append([]func(*Config){func(c *Config) { c.MaxConns = msgBenchMaxConns }}, opts...)...)
	pool, err := postgres.NewPool(ctx, dsn, postgres.PoolOptions{MaxConns: 4, ApplicationName: "bench-loader"})
	require.NoError(b, err)
	b.Cleanup(pool.Close)
	// Connect before the clock starts, so that no timed operation pays for it.
	require.NoError(b, pool.Ping(ctx))
	return &msgBenchApp{base: "http://" + m.Addr(), client: &http.Client{Timeout: time.Minute}, pool: pool,
		dsn: dsn, maxConns: msgBenchMaxConns}
}

// startBenchMain starts Main in open mode on dsn, quiet, with every rate limit off (as
// docs/a2a.md runs benchmarks) and the hash embedder (no model files needed; the recall
// benchmarks choose theirs), for a benchmark; opts may change the configuration first.
func startBenchMain(b *testing.B, dsn string, opts ...func(*Config)) *Main {
	b.Helper()
	cfg, err := LoadConfig(func(string) string { return "" })
	require.NoError(b, err)
	cfg.Bind, cfg.DatabaseURL, cfg.AutoMigrate = "127.0.0.1:0", dsn, false
	cfg.LogLevel, cfg.DrainTimeout, cfg.DrainDelay = 8, 5*time.Second, 0
	cfg.RateLimits, cfg.Embedder = ratelimit.RateLimits{}, EmbedderHash
	for _, o := range opts {
		o(&cfg)
	}
	m := NewMain(cfg)
	require.NoError(b, m.Run(context.Background()))
	b.Cleanup(func() { require.NoError(b, m.Close()) })
	return m
}

// post sends a JSON body (headers are name, value pairs) and fails the benchmark
// unless it answers 200 (or, for an A2A task create, 201).
func (a *msgBenchApp) post(b *testing.B, path string, body []byte, out any, headers ...string) {
	req, err := http.NewRequest(http.MethodPost, a.base+path, bytes.NewReader(body))
	require.NoError(b, err)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := a.client.Do(req)
	require.NoError(b, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(b, err)
	if resp.StatusCode != http.StatusCreated || path != contract.RouteA2ATasksCreate.Path {
		require.Equal(b, http.StatusOK, resp.StatusCode, "%s", data)
	}
	if out != nil {
		require.NoError(b, json.Unmarshal(data, out))
	}
}

// msgBenchWords is the vocabulary of generated messages.
var msgBenchWords = strings.Fields(`the a to of and in is it you that for on with as this was be are have not
	deploy deployment policy release rollback cluster node pod service gateway token tenant project window
	context message search index query cursor page latency budget tool call result error retry timeout model
	prompt answer summary question plan step agent user assistant system memory recall entry vector embedding
	東京 部署 策略 検索 학교 공부`)

// msgBenchContent returns a message of about words words.
func msgBenchContent(rng *rand.Rand, words int) string {
	var sb strings.Builder
	for i := range words {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(msgBenchWords[rng.IntN(len(msgBenchWords))])
	}
	return sb.String()
}

// BenchmarkMessagesAppend compares appending 500-message batches over HTTP (decode,
// validation, search document, locking, dedupe, COPY) with a raw pgx CopyFrom of the
// same rows, search document precomputed, into the same table. Both run interleaved in
// the same database, so they meet the same table and index sizes.
//
//	go test -run '^$' -bench BenchmarkMessagesAppend -benchtime 200x ./cmd/agent-context
func BenchmarkMessagesAppend(b *testing.B) {
	app := startMsgBenchApp(b)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 11))
	const batchSize, conversations = 500, 16
	records := func(prefix string, n int) []contract.ConversationRecord {
		out := make([]contract.ConversationRecord, batchSize)
		for i := range out {
			out[i] = contract.ConversationRecord{
				ID: fmt.Sprintf("%s-%d-%d", prefix, n, i), Scope: contract.ConversationScope{ConversationID: fmt.Sprintf("%s-%d", prefix, n%conversations)},
				Role: contract.Roles[i%4], Content: msgBenchContent(rng, 20+rng.IntN(40)),
			}
			if i%5 == 0 {
				out[i].Metadata = json.RawMessage(`{"model":"bench-1","tokens":123}`)
			}
		}
		return out
	}
	scope := runtime.Scope{TenantID: "local", ProjectID: "local"}
	// One untimed request opens the client's connection and the server's pool.
	app.post(b, pathBatch, []byte(`{"messages":[{"id":"warm-up","scope":{"conversationId":"warm-up"},"role":"user","content":"x"}]}`), nil)
	next := map[string]int64{}
	var httpTime, copyTime time.Duration
	rows := 0
	n := 0
	for b.Loop() {
		body, err := json.Marshal(contract.AppendMessagesRequest{Messages: records("http", n)})
		require.NoError(b, err)
		start := time.Now()
		var res contract.AppendMessagesResponse
		app.post(b, pathBatch, body, &res)
		httpTime += time.Since(start)
		require.Equal(b, batchSize, res.Appended)

		raw := make([][]any, 0, batchSize)
		for _, r := range records("copy", n) {
			next[r.Scope.ConversationID]++
			r.Sequence, r.CreatedAtMs = next[r.Scope.ConversationID], time.Now().UnixMilli()
			raw = append(raw, postgres.MessageRow(scope, r))
		}
		start = time.Now()
		copied, err := app.pool.CopyFrom(ctx, pgx.Identifier{"messages"}, postgres.MessageColumns, pgx.CopyFromRows(raw))
		copyTime += time.Since(start)
		require.NoError(b, err)
		require.EqualValues(b, batchSize, copied)
		rows += batchSize
		n++
	}
	httpRate := float64(rows) / httpTime.Seconds()
	copyRate := float64(rows) / copyTime.Seconds()
	b.ReportMetric(httpRate, "http-rows/s")
	b.ReportMetric(copyRate, "copy-rows/s")
	b.ReportMetric(httpRate/copyRate, "http/copy")
}

// BenchmarkMessagesReadLatency measures recent-50 and page reads over HTTP with
// 1,000,000 messages in 10,000 conversations. The rows are loaded with CopyFrom in
// arrival order (each conversation's messages spread over the whole table, as live
// appends leave them), with the secondary indexes built after the load. Each iteration
// reads one random conversation three ways; the p50/p95/p99 of each are reported.
//
//	go test -run '^$' -bench BenchmarkMessagesReadLatency -benchtime 3000x -timeout 30m ./cmd/agent-context
func BenchmarkMessagesReadLatency(b *testing.B) {
	app := startMsgBenchApp(b)
	const conversations, perConversation = 10_000, 100
	loadMessages(b, app.pool, conversations, perConversation)

	rng := rand.New(rand.NewPCG(3, 5))
	// One untimed request opens the client's connection and the server's pool.
	app.post(b, pathRecent, []byte(`{"scope":{"conversationId":"conv-0"}}`), nil)
	var recent, first, next []time.Duration
	timed := func(into *[]time.Duration, path string, body any, out any) {
		data, err := json.Marshal(body)
		require.NoError(b, err)
		start := time.Now()
		app.post(b, path, data, out)
		*into = append(*into, time.Since(start))
	}
	for b.Loop() {
		scope := map[string]any{"conversationId": fmt.Sprintf("conv-%d", rng.IntN(conversations))}
		var msgs contract.MessagesResponse
		timed(&recent, pathRecent, map[string]any{"scope": scope, "limit": 50}, &msgs)
		require.Len(b, msgs.Messages, 50)
		var page contract.MessagePage
		timed(&first, pathPage, map[string]any{"scope": scope, "limit": 50}, &page)
		require.NotNil(b, page.NextCursor)
		timed(&next, pathPage, map[string]any{"scope": scope, "limit": 50, "cursor": *page.NextCursor}, &page)
		require.Len(b, page.Messages, 50)
	}
	for name, d := range map[string][]time.Duration{"recent50": recent, "page-first": first, "page-next": next} {
		slices.Sort(d)
		for _, q := range []float64{0.50, 0.95, 0.99} {
			b.ReportMetric(float64(d[int(q*float64(len(d)-1))].Microseconds())/1000, fmt.Sprintf("%s-p%d-ms", name, int(q*100)))
		}
	}
}

// loadMessages copies conversations × perConversation messages (about 120 bytes each)
// into the messages table and sets the conversation heads (loadMessagesWith).
func loadMessages(b *testing.B, pool *pgxpool.Pool, conversations, perConversation int) {
	loadMessagesWith(b, pool, conversations, perConversation, func(rng *rand.Rand, _ int) string { return msgBenchContent(rng, 20) })
}

// loadMessagesWith copies conversations × perConversation messages into the messages
// table, the i-th (from 0, in arrival order) with content(rng, i), and sets the
// conversation heads, with the secondary indexes built after the load
// (loadWithoutIndexes).
func loadMessagesWith(b *testing.B, pool *pgxpool.Pool, conversations, perConversation int, content func(rng *rand.Rand, i int) string) {
	b.Helper()
	ctx := context.Background()
	scope := runtime.Scope{TenantID: "local", ProjectID: "local"}
	rng := rand.New(rand.NewPCG(1, 2))
	total, i := conversations*perConversation, 0
	copyTime, indexTime := loadWithoutIndexes(b, pool, "messages", func() {
		copied, err := pool.CopyFrom(ctx, pgx.Identifier{"messages"}, postgres.MessageColumns, pgx.CopyFromFunc(func() ([]any, error) {
			if i == total {
				return nil, nil
			}
			seq, conv := i/conversations+1, i%conversations
			text := content(rng, i)
			i++
			return postgres.MessageRow(scope, contract.ConversationRecord{
				Scope: contract.ConversationScope{ConversationID: fmt.Sprintf("conv-%d", conv)}, ID: fmt.Sprintf("m-%d", seq), Role: contract.Roles[seq%4],
				Content: text, Sequence: int64(seq), CreatedAtMs: int64(1_700_000_000_000 + i),
			}), nil
		}))
		require.NoError(b, err)
		require.EqualValues(b, total, copied)
		_, err = pool.Exec(ctx, `
			INSERT INTO conversations (tenant_id, project_id, conversation_id, last_sequence, message_count, created_at_ms)
			SELECT 'local', 'local', 'conv-' || g, $1, $1, 0 FROM generate_series(0, $2 - 1) AS g`, perConversation, conversations)
		require.NoError(b, err)
	})
	_, err := pool.Exec(ctx, "VACUUM ANALYZE conversations")
	require.NoError(b, err)
	b.Logf("loaded %d messages in %d conversations: copy %s, indexes %s", total, conversations,
		copyTime.Round(time.Millisecond), indexTime.Round(time.Millisecond))
}

// loadWithoutIndexes runs load with table's secondary indexes dropped, then rebuilds
// them from their own definitions and vacuums and analyzes the table (as autovacuum
// would, every page marked all-visible): much faster than maintaining the indexes row
// by row. It returns how long the load and the rebuild took.
func loadWithoutIndexes(tb testing.TB, pool *pgxpool.Pool, table string, load func()) (loadTime, indexTime time.Duration) {
	tb.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT indexname, indexdef FROM pg_indexes
		WHERE tablename = $1 AND indexname <> $1 || '_pkey'`, table)
	require.NoError(tb, err)
	defs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Name, Def string }])
	require.NoError(tb, err)
	for _, d := range defs {
		_, err := pool.Exec(ctx, "DROP INDEX "+pgx.Identifier{d.Name}.Sanitize())
		require.NoError(tb, err)
	}
	start := time.Now()
	load()
	loadTime = time.Since(start)
	conn, err := pool.Acquire(ctx)
	require.NoError(tb, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, "SET maintenance_work_mem = '512MB'")
	require.NoError(tb, err)
	for _, d := range defs {
		_, err := conn.Exec(ctx, d.Def)
		require.NoError(tb, err)
	}
	// VACUUM marks a page all-visible only if no snapshot that is still running could
	// miss its rows, and a statement of the service running beside the load can hold
	// one back: half the pages stayed unmarked, and the index-only scans read the
	// table. So it vacuums until every page is marked, as autovacuum leaves it.
	for attempt := 1; ; attempt++ {
		_, err = conn.Exec(ctx, "VACUUM ANALYZE "+pgx.Identifier{table}.Sanitize())
		require.NoError(tb, err)
		var pages, visible int64
		require.NoError(tb, conn.QueryRow(ctx, `SELECT relpages, relallvisible FROM pg_class WHERE oid = $1::regclass`,
			table).Scan(&pages, &visible))
		if visible >= pages {
			break
		}
		require.Less(tb, attempt, 20, "%s: %d of %d pages all-visible", table, visible, pages)
		time.Sleep(100 * time.Millisecond)
	}
	return loadTime, time.Since(start) - loadTime
}

// TestConversationsList: conversations/list answers from the heads, the most recently
// active first, with the prefix filter, cursors bound to it, and no deleted
// conversation.
func TestConversationsList(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	path := contract.RouteConversationsList.Path
	app.appendOK(t, batchOf(rec("team-a", "m1", "user", "one"), rec("team-a", "m2", "user", "two"), rec("solo", "m1", "user", "x")))
	app.createWindow(t, winBody("w1", "team-w", "original", winItems(1, winSmall)))
	app.appendOK(t, batchOf(rec("team-b", "m1", "user", "one")))
	before := time.Now().UnixMilli()
	app.appendOK(t, batchOf(rec("team-a", "m3", "user", "three")))

	list := func(body map[string]any) []contract.ConversationSummary {
		var all []contract.ConversationSummary
		for _, id := range listAll(t, app, path, body, "conversations") {
			var page contract.ConversationList
			app.post(t, path, map[string]any{"limit": 500}).requireOK(t, http.StatusOK, &page)
			i := slices.IndexFunc(page.Conversations, func(c contract.ConversationSummary) bool { return c.ConversationID == id })
			require.GreaterOrEqual(t, i, 0)
			all = append(all, page.Conversations[i])
		}
		require.True(t, slices.IsSortedFunc(all, func(x, y contract.ConversationSummary) int {
			if c := cmp.Compare(y.LastAtMs, x.LastAtMs); c != 0 {
				return c
			}
			return strings.Compare(x.ConversationID, y.ConversationID)
		}), "most recently active first: %v", all)
		return all
	}
	all := list(nil)
	require.Len(t, all, 4)
	require.Equal(t, "team-a", all[0].ConversationID, "the latest append")
	require.EqualValues(t, 3, all[0].MessageCount)
	require.EqualValues(t, 3, all[0].LastSequence)
	require.GreaterOrEqual(t, all[0].LastAtMs, before)
	require.Less(t, all[0].FirstAtMs, all[0].LastAtMs+1)
	w := all[slices.IndexFunc(all, func(c contract.ConversationSummary) bool { return c.ConversationID == "team-w" })]
	require.Equal(t, contract.ConversationSummary{ConversationID: "team-w", FirstAtMs: w.FirstAtMs, LastAtMs: w.FirstAtMs}, w,
		"a conversation a window named, without messages")

	teams := list(map[string]any{"prefix": "team-"})
	require.Len(t, teams, 3)
	for _, c := range teams {
		require.True(t, strings.HasPrefix(c.ConversationID, "team-"))
	}

	var page contract.ConversationList
	app.post(t, path, map[string]any{"prefix": "team-", "limit": 1}).requireOK(t, http.StatusOK, &page)
	require.NotNil(t, page.NextCursor)
	for _, body := range []map[string]any{{"cursor": *page.NextCursor}, {"prefix": "team-a", "cursor": *page.NextCursor}} {
		e := app.post(t, path, body).requireError(t, http.StatusBadRequest, contract.CodeInvalidCursor)
		require.Equal(t, "cursor", e.Details["field"])
	}
	for _, body := range []map[string]any{{"limit": 0}, {"limit": 501}} {
		e := app.post(t, path, body).requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
		require.Equal(t, "limit", e.Details["field"])
	}
	e := app.post(t, path, map[string]any{"prefix": "a b"}).requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)
	require.Equal(t, "prefix", e.Details["field"])

	app.post(t, contract.RouteConversationsDelete.Path, map[string]any{"conversationId": "team-b"}).requireOK(t, http.StatusAccepted, nil)
	require.Len(t, list(map[string]any{"prefix": "team-"}), 2, "a deleted conversation is not listed")
}
