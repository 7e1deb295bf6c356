package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
)

// Untrusted strings an agent might write: each must show as text and run nothing.
const (
	xssScript = "<script>alert(1)</script>"
	xssImage  = "<img src=x onerror=alert(1)>"
	xssURI    = "javascript:alert(1)"
)

// chromiumPath is Debian's headless Chromium (make setup installs it), or the
// browser AGENT_CONTEXT_CHROMIUM names.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("AGENT_CONTEXT_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no Chromium found: run `make setup` (it installs Debian's chromium) or set AGENT_CONTEXT_CHROMIUM")
	return ""
}

// pageWatch records every dialog a page opens and every console error or uncaught
// exception it logs (a blocked script or style is logged as an error too).
type pageWatch struct {
	mu       sync.Mutex
	dialogs  []string
	problems []string
}

func (w *pageWatch) report() (dialogs, problems []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.dialogs...), append([]string(nil), w.problems...)
}

func watchPage(ctx context.Context) *pageWatch {
	w := &pageWatch{}
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			w.mu.Lock()
			w.dialogs = append(w.dialogs, ev.Message)
			w.mu.Unlock()
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			// A page the test opens on purpose answers 401 or 404, which the browser
			// logs; an asset or the live tail failing to load is a problem.
			deliberate := strings.HasPrefix(m.Text, "Failed to load resource") &&
				!strings.Contains(m.URL, "/console/assets/") && !strings.Contains(m.URL, "/console/events/tail")
			if (m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException) && !deliberate {
				w.mu.Lock()
				w.problems = append(w.problems, string(m.Type)+": "+m.Text+" at "+m.URL)
				w.mu.Unlock()
			}
		}
	}()
	return w
}

// seedConsole writes, through the API, what every page of the console shows: a
// conversation with hostile content, a window lineage, invocations, entries with a
// history, agents, a task in every state, A2A messages and a retention dry run.
func seedConsole(t *testing.T, app *testApp, m minter) (correctedID string, correctedAt int64, operationID string) {
	t.Helper()
	all := m.subjectBearer("alice", "acme", "alpha", contract.AllCapabilities...)
	bob := m.subjectBearer("bob", "acme", "alpha", contract.AllCapabilities...)
	post := func(bearer string, route contract.Route, status int, body any) map[string]any {
		var out map[string]any
		app.post(t, route.Path, body, "Authorization", bearer).requireOK(t, status, &out)
		return out
	}
	conv := map[string]any{"conversationId": "conv-ui"}
	msgs := []any{
		map[string]any{"id": "m-1", "scope": conv, "role": "user", "content": "Plan the release of the billing service"},
		map[string]any{"id": "m-2", "scope": conv, "role": "assistant", "content": "Here is a trap: " + xssScript + " and " + xssImage},
		map[string]any{"id": "m-3", "scope": conv, "role": "tool", "content": "fetched " + xssURI},
	}
	post(all, contract.RouteMessagesBatch, http.StatusOK, map[string]any{"messages": msgs})
	for _, w := range []struct{ id, stage string }{{"w-orig", "original"}, {"w-asm", "assembled"}, {"w-cmp", "compressed"}, {"w-trim", "compressed"}} {
		post(all, contract.RouteWindowsCreate, http.StatusCreated, map[string]any{"id": w.id, "conversation": conv,
			"stage": w.stage, "purpose": "chat", "tokenCount": 1200,
			"items": []any{
				map[string]any{"id": "i-0", "ordinal": 0, "kind": "message", "role": "system", "content": "You are the release planner."},
				map[string]any{"id": "i-1", "ordinal": 1, "kind": "message", "role": "assistant", "content": "item " + xssScript, "sourceRecordId": "m-2"},
			}})
	}
	for _, d := range []struct{ id, from, to, kind string }{{"d-1", "w-orig", "w-asm", "assemble"}, {"d-2", "w-asm", "w-cmp", "compress"}, {"d-3", "w-cmp", "w-trim", "trim"}} {
		post(all, contract.RouteDerivationsCreate, http.StatusCreated, map[string]any{"id": d.id, "sourceWindowId": d.from,
			"targetWindowId": d.to, "kind": d.kind})
	}
	now := time.Now().UnixMilli()
	for i, inv := range []struct{ agent, tool, model string }{
		{"planner", "search", "gpt-4.1-mini"}, {"planner", "write", "gpt-4.1"}, {"coder", "edit", "gpt-4.1"}, {"reviewer", "", "gpt-4.1-mini"},
	} {
		body := map[string]any{"id": fmt.Sprintf("inv-%d", i+1), "conversation": conv, "requestWindowId": "w-trim",
			"agentId": inv.agent, "provider": "openai", "model": inv.model, "state": "succeeded",
			"inputTokens": 12000 * (i + 1), "cachedTokens": 1000, "outputTokens": 800 * (i + 1),
			"startedAtMs": now - int64(i+1)*60_000, "completedAtMs": now - int64(i+1)*60_000 + 900, "latencyMs": 900,
			"finishReason": "stop", "responseContent": "done " + xssImage}
		if inv.tool != "" {
			body["toolName"] = inv.tool
		}
		post(all, contract.RouteModelInvocationsCreate, http.StatusOK, body)
	}
	post(all, contract.RouteEntriesCreate, http.StatusCreated, map[string]any{"id": "e-1", "kind": "fact",
		"content": "The billing service deploys on Tuesdays", "tags": []string{"release"}, "conversationId": "conv-ui"})
	corrected := post(all, contract.RouteEntriesCorrect, http.StatusCreated, map[string]any{"entryId": "e-1",
		"content": "The billing service deploys on Thursdays"})
	correctedID = corrected["entry"].(map[string]any)["id"].(string)
	correctedAt = int64(corrected["entry"].(map[string]any)["createdAtMs"].(float64))
	post(all, contract.RouteA2AAgentsRegister, http.StatusOK, map[string]any{"agentType": "planner", "capabilities": []string{"plan"}})
	post(bob, contract.RouteA2AAgentsRegister, http.StatusOK, map[string]any{"agentType": "coder", "role": "worker"})
	post(bob, contract.RouteA2AMessagesPost, http.StatusOK, map[string]any{"messageId": "am-1", "toAgent": "alice",
		"content": "please look at " + xssScript})
	task := func(id, description string, states ...string) {
		post(all, contract.RouteA2ATasksCreate, http.StatusCreated, map[string]any{"id": id, "toAgent": "bob",
			"description": description, "parts": []any{map[string]any{"type": "text", "text": "details " + xssImage}}})
		for _, s := range states {
			if s == contract.TaskCanceled {
				post(all, contract.RouteA2ATasksCancel, http.StatusOK, map[string]any{"taskId": id, "reason": "not needed"})
				continue
			}
			post(bob, contract.RouteA2ATasksUpdate, http.StatusOK, map[string]any{"taskId": id, "state": s, "message": "moving to " + s})
		}
	}
	task("t-new", "Draft the release notes")
	task("t-work", "Run the migrations on staging", contract.TaskWorking)
	task("t-input", "Pick the release window", contract.TaskWorking, contract.TaskInputRequired)
	task("t-done", "Tag the release", contract.TaskWorking, contract.TaskCompleted)
	task("t-fail", "Deploy to the canary", contract.TaskWorking, contract.TaskFailed)
	task("t-cancel", "Rewrite the billing service", contract.TaskCanceled)
	dry := post(all, contract.RouteConversationsRetention, http.StatusAccepted, map[string]any{
		"policy": map[string]any{"keepLastMessages": 1}, "dryRun": true})
	return correctedID, correctedAt, dry["operation"].(map[string]any)["id"].(string)
}

// TestConsoleInABrowser drives the console with headless Chromium against the real
// Main: sign-in, every page with the data written through the API, hostile content
// shown as text with no script run, another tenant's window answering 404, the live
// tail, and sign-out. With AGENT_CONTEXT_CONSOLE_SCREENSHOTS set to a directory it
// saves the screenshots the README shows.
func TestConsoleInABrowser(t *testing.T) {
	t.Parallel()
	browser := chromiumPath(t)
	app, m := startSecuredApp(t, writePricing(t, `{"models": {"gpt-4.1-mini": {"inputPerMTok": 0.4, "outputPerMTok": 1.6, "cachedInputPerMTok": 0.1},
		"gpt-4.1": {"inputPerMTok": 2, "outputPerMTok": 8}}}`))
	corrected, correctedAt, operationID := seedConsole(t, app, m)
	app.post(t, contract.RouteWindowsCreate.Path, consoleWindow("w-other", "another tenant's window"),
		"Authorization", m.subjectBearer("eve", "other", "alpha", contract.AllCapabilities...)).requireOK(t, http.StatusCreated, nil)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.WindowSize(1400, 1000))...)
	defer cancelAlloc()
	ctx, cancelTab := chromedp.NewContext(alloc)
	defer cancelTab()
	base := app.base + "/console"
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/")))
	watch := watchPage(ctx)

	text := func(path string, sel chromedp.CSS) string {
		t.Helper()
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+path), chromedp.WaitReady(sel)), path)
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main")))
		require.NoError(t, err, path)
		return s
	}
	count := func(expr string) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](expr))
		require.NoError(t, err, expr)
		return n
	}
	shots := os.Getenv("AGENT_CONTEXT_CONSOLE_SCREENSHOTS")
	screenshot := func(name string, sel chromedp.CSS) {
		t.Helper()
		if shots == "" {
			return
		}
		png, err := chromedp.Run(ctx, chromedp.Screenshot(sel))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(shots, name), png, 0o644))
	}

	// Signed out, every page is the sign-in form.
	require.Contains(t, text("/windows/w-trim", "#login-form"), "Sign in")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS("#token"), bare(m.subjectBearer("alice", "acme", "alpha", contract.AllCapabilities...))),
		chromedp.Click(chromedp.CSS("#sign-in")),
		chromedp.WaitVisible(chromedp.CSS("#scope"))))

	overview := text("/", "#tasks")
	require.Contains(t, overview, "Overview of acme/alpha")
	require.Contains(t, overview, "Vector projection")
	// The record counts of the scope (the correction superseded e-1), and the
	// retention dry run among the recent operations.
	counts, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`Object.fromEntries(
		[...document.querySelectorAll("#counts [data-count]")].map(c => [c.dataset.count, c.querySelector(".n").textContent]))`))
	require.NoError(t, err)
	require.Equal(t, map[string]string{"conversations": "1", "messages": "3", "windows": "4", "invocations": "4",
		"entries-active": "1", "entries-superseded": "1", "entries-merged": "0", "entries-expired": "0"}, counts)
	operations := text("/", "#operations")
	require.Contains(t, operations, operationID)
	require.Contains(t, operations, "retention")

	convs := text("/conversations", "#conversations")
	require.Contains(t, convs, "conv-ui")

	conv := text("/conversations/conv-ui", "#messages")
	require.Contains(t, conv, "Plan the release of the billing service")
	require.Contains(t, conv, xssScript, "hostile content shows as text")
	require.Contains(t, conv, xssImage)
	require.Contains(t, conv, xssURI)
	require.Contains(t, conv, "w-trim")
	require.Contains(t, conv, "inv-1")
	require.Zero(t, count(`document.querySelectorAll("main img, main script").length`), "no element came from the content")
	require.Zero(t, count(`document.querySelectorAll('a[href^="javascript:"]').length`))
	search := text("/conversations/conv-ui?q=billing", "#hits")
	require.Contains(t, search, "Plan the release of the billing service")

	win := text("/windows/w-trim", "#lineage")
	for _, want := range []string{"w-orig", "w-asm", "w-cmp", "assemble", "compress", "trim", "You are the release planner.", "inv-1", xssScript} {
		require.Contains(t, win, want)
	}
	require.Equal(t, 4, count(`document.querySelectorAll("#lineage .node").length`))
	require.Equal(t, 3, count(`document.querySelectorAll("#lineage .edge").length`))
	// Sent by: the four invocations that name w-trim, the latest first.
	sentBy, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("#sent-by tbody tr td:first-child")].map(td => td.textContent)`))
	require.NoError(t, err)
	require.Equal(t, []string{"inv-1", "inv-2", "inv-3", "inv-4"}, sentBy)
	require.Contains(t, text("/windows/w-cmp", "#items"), "No invocation sent this window.")
	hash := text("/windows/w-trim", "#hash")
	require.Regexp(t, `[0-9a-f]{64}`, hash)
	screenshot("window-lineage.png", "main")

	invs := text("/invocations", "#invocations")
	require.Contains(t, invs, "inv-4")
	require.Contains(t, invs, "gpt-4.1-mini")
	inv := text("/invocations/inv-1", "#invocation")
	require.Contains(t, inv, "12000 · 1000 · 800")
	// (12000 − 1000) × 0.4 + 1000 × 0.1 + 800 × 1.6 per million tokens.
	require.Contains(t, inv, "0.00578")
	require.Contains(t, inv, "done "+xssImage)
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#window-link")), chromedp.WaitReady(chromedp.CSS("#lineage"))))

	entries := text("/entries?status=active", "#entries")
	require.Contains(t, entries, "Thursdays")
	require.NotContains(t, entries, "Tuesdays")
	history := text("/entries/"+corrected, "#versions")
	require.Contains(t, history, "Tuesdays")
	require.Contains(t, history, "superseded")

	recall := text("/recall?q=billing+deploys&mode=text", "#results")
	require.Contains(t, recall, corrected)
	// As of before the correction, the first version answers.
	recall = text(fmt.Sprintf("/recall?q=billing+deploys&mode=text&asOfMs=%d", correctedAt-1), "#results")
	require.Contains(t, recall, "Tuesdays")
	require.NotContains(t, recall, "Thursdays")

	board := text("/a2a", "#board")
	for _, want := range []string{"Draft the release notes", "Run the migrations on staging", "Pick the release window",
		"Tag the release", "Deploy to the canary", "Rewrite the billing service", "please look at " + xssScript, "planner"} {
		require.Contains(t, board, want)
	}
	for _, state := range contract.TaskStates {
		require.Equal(t, 1, count(fmt.Sprintf(`document.querySelectorAll('.column[data-state=%q] .task').length`, state)), state)
	}
	screenshot("task-board.png", "#board")
	taskPage := text("/a2a/tasks/t-input", "#history")
	require.Contains(t, taskPage, "input-required")
	require.Contains(t, taskPage, "details "+xssImage)

	costs := text("/costs?groupBy=agent&range=24h", "#chart")
	for _, want := range []string{"planner", "coder", "reviewer"} {
		require.Contains(t, costs, want)
	}
	require.Equal(t, 3, count(`document.querySelectorAll("#chart .bar").length`))
	screenshot("costs-chart.png", "main")

	// Another tenant's window is not found, exactly as one that does not exist.
	require.Contains(t, text("/windows/w-other", "#error-status"), "404")
	require.Contains(t, text("/windows/w-nobody", "#error-status"), "404")

	// The live tail appends an event committed after the page opened.
	events := text("/events", "#events")
	require.Contains(t, events, "alice")
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitReady(chromedp.CSS("#tail-status"))))
	before := count(`document.querySelectorAll("#events-body tr").length`)
	// The tail's first long poll is under way once the status says so.
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("tail-status").textContent.startsWith("live")`))
	require.NoError(t, err)
	app.post(t, contract.RouteA2AMessagesPost.Path, map[string]any{"messageId": "am-tail", "content": "after the page opened"},
		"Authorization", m.subjectBearer("alice", "acme", "alpha", contract.AllCapabilities...)).requireOK(t, http.StatusOK, nil)
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS("#events-body tr.tailed"))))
	require.Greater(t, count(`document.querySelectorAll("#events-body tr").length`), before)

	// A POST without its CSRF token (the sign-out form, its token field removed) is
	// refused with 403 and changes nothing: the session still serves pages.
	text("/", "#tasks")
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('#logout').form.querySelector('input[name="csrf"]').remove() || true`))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#logout")), chromedp.WaitVisible(chromedp.CSS("#error-status"))))
	refused, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#error-status")))
	require.NoError(t, err)
	require.Contains(t, refused, "403")
	require.Contains(t, text("/", "#tasks"), "Overview of acme/alpha")

	// Sign-out ends the session: the next page is the sign-in form.
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#logout")), chromedp.WaitVisible(chromedp.CSS("#login-form"))))
	require.Contains(t, text("/", "#login-form"), "Sign in")

	dialogs, problems := watch.report()
	require.Empty(t, dialogs, "no page may open a dialog")
	require.Empty(t, problems, "no page may log an error or run a blocked script")
}
