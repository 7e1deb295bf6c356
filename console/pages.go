package console

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/gate"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/operation"
)

// pageSize is the rows of one page of every list.
const pageSize = 50

// routes registers the pages; each names the routes it reads, whose capabilities the
// viewer needs.
func (c *Console) routes() {
	c.handle("/{$}", nil, c.overview)
	c.handle("/conversations", []contract.Route{contract.RouteConversationsList}, c.conversations)
	c.handle("/conversations/{id}", []contract.Route{contract.RouteMessages}, c.conversation)
	c.handle("/windows/{id}", []contract.Route{contract.RouteWindowsGet, contract.RouteWindowsLineage, contract.RouteModelInvocationsList}, c.window)
	c.handle("/invocations", []contract.Route{contract.RouteModelInvocationsList}, c.invocations)
	c.handle("/invocations/{id}", []contract.Route{contract.RouteModelInvocationsGet}, c.invocation)
	c.handle("/entries", []contract.Route{contract.RouteEntriesList}, c.entries)
	c.handle("/entries/{id}", []contract.Route{contract.RouteEntriesHistory}, c.entry)
	c.handle("/recall", []contract.Route{contract.RouteRecall}, c.recall)
	c.handle("/a2a", []contract.Route{contract.RouteA2AAgentsList, contract.RouteA2ATasksList, contract.RouteA2AMessagesRead}, c.a2a)
	c.handle("/a2a/tasks/{id}", []contract.Route{contract.RouteA2ATasksGet}, c.task)
	c.handle("/events", []contract.Route{contract.RouteA2AEventsPoll}, c.events)
	c.mux.HandleFunc("GET "+Prefix+"/events/tail", c.signedIn(nil, c.eventsTail))
	c.handle("/costs", []contract.Route{contract.RouteCosts}, c.costs)
}

// recentOperations is how many operations the overview lists.
const recentOperations = 10

// overview shows what the viewer's capabilities let it read: the record counts, the
// maintenance and projection status with the recent operations, the tasks by state,
// and the cost of the last 24 hours and 7 days.
type overviewPage struct {
	Counts     *operation.RecordCounts
	Status     *contract.MaintenanceStatus
	Operations []contract.Operation
	Tasks      *contract.TaskInfo
	Day        *contract.CostTotals
	Week       *contract.CostTotals
	Scope      runtime.Scope
	Subject    string
	NeedsCap   []string
	Statuses   []string
}

func (c *Console) overview(ctx context.Context, _ *http.Request, v *viewer) (string, any, error) {
	p := v.Principal
	out := overviewPage{Scope: p.Scope, Subject: p.Subject, Statuses: contract.EntryStatuses}
	// The parts are independent reads: they run side by side, so the page takes as
	// long as the slowest of them.
	g, ctx := errgroup.WithContext(ctx)
	if p.Can(contract.CapMessagesRead) {
		g.Go(func() (err error) {
			out.Status, err = c.cfg.Operations.Status(ctx, p.Scope)
			return err
		})
		g.Go(func() (err error) {
			out.Operations, err = c.cfg.Operations.RecentOperations(ctx, p.Scope, recentOperations)
			return err
		})
	} else {
		out.NeedsCap = append(out.NeedsCap, contract.CapMessagesRead)
	}
	// The counts cover messages and context records alike.
	if p.Can(contract.CapMessagesRead) && p.Can(contract.CapContextRead) {
		g.Go(func() error {
			counts, err := c.cfg.Operations.RecordCounts(ctx, p.Scope)
			out.Counts = &counts
			return err
		})
	} else if !p.Can(contract.CapContextRead) {
		out.NeedsCap = append(out.NeedsCap, contract.CapContextRead)
	}
	if p.Can(contract.CapA2ATasks) {
		g.Go(func() (err error) {
			out.Tasks, err = c.cfg.Tasks.TaskInfo(ctx, p, &contract.TaskInfoRequest{})
			return err
		})
	} else {
		out.NeedsCap = append(out.NeedsCap, contract.CapA2ATasks)
	}
	if p.Can(contract.CapCostsRead) {
		now := c.cfg.Clock.Now().UnixMilli()
		for _, span := range []struct {
			d   time.Duration
			dst **contract.CostTotals
		}{{24 * time.Hour, &out.Day}, {7 * 24 * time.Hour, &out.Week}} {
			g.Go(func() error {
				from, topN := now-span.d.Milliseconds(), 1
				rep, err := c.cfg.Costs.Report(ctx, p.Scope, &contract.CostsRequest{FromMs: &from, GroupBy: contract.CostsByModel, TopN: &topN})
				*span.dst = &rep.Totals
				return err
			})
		}
	} else {
		out.NeedsCap = append(out.NeedsCap, contract.CapCostsRead)
	}
	if err := g.Wait(); err != nil {
		return "", nil, err
	}
	return "overview", out, nil
}

type conversationsPage struct {
	Conversations []contract.ConversationSummary
	Prefix        string
	Next          string
}

// conversations lists the scope's conversations, most recently active first, filtered
// by an ID prefix.
func (c *Console) conversations(ctx context.Context, r *http.Request, v *viewer) (string, any, error) {
	limit := pageSize
	out := conversationsPage{Prefix: trimmed(r, "prefix")}
	list, err := c.cfg.Messages.ListConversations(ctx, v.Principal.Scope, &contract.ListConversationsRequest{
		Cursor: optional(trimmed(r, "cursor")), Limit: &limit, Prefix: optional(out.Prefix)})
	if err != nil {
		return "", nil, err
	}
	out.Conversations, out.Next = list.Conversations, derefOr(list.NextCursor, "")
	return "conversations", out, nil
}

type conversationPage struct {
	ID       string
	Messages []contract.ConversationRecord
	Next     string
	Query    string
	Hits     []contract.SearchHit
	Searched bool
	Role     string
	Roles    []string
	// Windows and Invocations are the conversation's newest, shown to a viewer with
	// context:read.
	Windows     []contract.Window
	Invocations []contract.ModelInvocation
}

// conversation shows a conversation's messages in order, a page at a time, or the
// hits of a search within it.
func (c *Console) conversation(ctx context.Context, r *http.Request, v *viewer) (string, any, error) {
	id, err := pathID(r, "conversationId")
	if err != nil {
		return "", nil, err
	}
	out := conversationPage{ID: id, Query: trimmed(r, "q"), Role: trimmed(r, "role"), Roles: contract.Roles}
	var roles []string
	if out.Role != "" {
		roles = []string{out.Role}
	}
	scope := contract.ConversationScope{ConversationID: id}
	if out.Query != "" {
		if err := gate.Permit(v.Principal, contract.RouteMessagesSearch); err != nil {
			return "", nil, err
		}
		limit := contract.DefaultSearchLimit
		res, err := c.cfg.Messages.Search(ctx, v.Principal.Scope, &contract.SearchMessagesRequest{Query: out.Query,
			Scope: &scope, Limit: &limit, Roles: roles})
		if err != nil {
			return "", nil, err
		}
		out.Hits, out.Searched = res.Hits, true
		return "conversation", out, nil
	}
	limit := pageSize
	page, err := c.cfg.Messages.Page(ctx, v.Principal.Scope, &contract.PageMessagesRequest{Scope: scope, Limit: &limit,
		Cursor: optional(trimmed(r, "cursor")), Order: contract.OrderAsc, Roles: roles})
	if err != nil {
		return "", nil, err
	}
	if len(page.Messages) == 0 && trimmed(r, "cursor") == "" {
		return "", nil, runtime.NotFound("conversationId", "conversation")
	}
	out.Messages, out.Next = page.Messages, derefOr(page.NextCursor, "")
	if v.Principal.Can(contract.CapContextRead) {
		related := 20
		list := &contract.ListByConversationRequest{ConversationID: &id, Limit: &related}
		windows, err := c.cfg.Windows.ListWindows(ctx, v.Principal, list)
		if err != nil {
			return "", nil, err
		}
		invocations, err := c.cfg.Windows.ListInvocations(ctx, v.Principal, list)
		if err != nil {
			return "", nil, err
		}
		out.Windows, out.Invocations = windows.Windows, invocations.Invocations
	}
	return "conversation", out, nil
}

type windowPage struct {
	Window  contract.Window
	Lineage contract.Lineage
	Graph   lineageGraph
	// SentBy is a page of the invocations that sent the window, the latest first;
	// SentByNext the cursor of the next.
	SentBy     []contract.ModelInvocation
	SentByNext string
}

// window shows a window's items, hash and lineage, and the invocations that sent it
// (paged with the query parameter sentBy).
func (c *Console) window(ctx context.Context, r *http.Request, v *viewer) (string, any, error) {
	id, err := pathID(r, "windowId")
	if err != nil {
		return "", nil, err
	}
	w, err := c.cfg.Windows.GetWindow(ctx, v.Principal, &contract.GetWindowRequest{WindowID: id})
	if err != nil {
		return "", nil, err
	}
	l, err := c.cfg.Windows.Lineage(ctx, v.Principal, &contract.LineageRequest{WindowID: id})
	if err != nil {
		return "", nil, err
	}
	limit := pageSize
	sentBy, err := c.cfg.Windows.WindowInvocations(ctx, v.Principal, id, optional(trimmed(r, "sentBy")), &limit)
	if err != nil {
		return "", nil, err
	}
	return "window", windowPage{Window: w, Lineage: l, Graph: layoutLineage(l, id), SentBy: sentBy.Invocations,
		SentByNext: derefOr(sentBy.NextCursor, "")}, nil
}

// pricedInvocation is an invocation with its cost.
type pricedInvocation struct {
	contract.ModelInvocation
	CostUSD      contract.Decimal
	PricingMatch string
}

type invocationsPage struct {
	Invocations    []pricedInvocation
	ConversationID string
	Next           string
}

// invocations lists model calls, newest first, of the scope or of one conversation.
func (c *Console) invocations(ctx context.Context, r *http.Request, v *viewer) (string, any, error) {
	out := invocationsPage{ConversationID: trimmed(r, "conversationId")}
	limit := pageSize
	list, err := c.cfg.Windows.ListInvocations(ctx, v.Principal, &contract.ListByConversationRequest{
		ConversationID: optional(out.ConversationID), Cursor: optional(trimmed(r, "cursor")), Limit: &limit})
	if err != nil {
		return "", nil, err
	}
	for _, m := range list.Invocations {
		out.Invocations = append(out.Invocations, c.priced(m))
	}
	out.Next = derefOr(list.NextCursor, "")
	return "invocations", out, nil
}

func (c *Console) priced(m contract.ModelInvocation) pricedInvocation {
	cost, match := c.cfg.Costs.InvocationCost(m)
	return pricedInvocation{ModelInvocation: m, CostUSD: cost, PricingMatch: match}
}

// invocation shows one model call.
func (c *Console) invocation(ctx context.Context, r *http.Request, v *viewer) (string, any, error) {
	id, err := pathID(r, "invocationId")
	if err != nil {
		return "", nil, err
	}
	m, err := c.cfg.Windows.GetInvocation(ctx, v.Principal, &contract.GetModelInvocationRequest{InvocationID: id})
	if err != nil {
		return "", nil, err
	}
	return "invocation", c.priced(m), nil
}

type entriesPage struct {
	Entries                           []contract.ContextEntry
	Status, Kind, Tag, ConversationID string
	Statuses                          []string
	Next                              string
}

// entries lists memories, newest first, by status, kind, tag and conversation.
func (c *Console) entries(ctx context.Context, r *http.Request, v *viewer) (string, any, error) {
	out := entriesPage{Status: trimmed(r, "status"), Kind: trimmed(r, "kind"), Tag: trimmed(r, "tag"),
		ConversationID: trimmed(r, "conversationId"), Statuses: contract.EntryStatuses}
	limit := pageSize
	req := &contract.ListEntriesRequest{Status: optional(out.Status), ConversationID: optional(out.ConversationID),
		Cursor: optional(trimmed(r, "cursor")), Limit: &limit}
	if out.Kind != "" {
		req.Kinds = []string{out.Kind}
	}
	if out.Tag != "" {
		req.Tags = []string{out.Tag}
	}
	list, err := c.cfg.Entries.List(ctx, v.Principal, req)
	if err != nil {
		return "", nil, err
	}
	out.Entries, out.Next = list.Entries, derefOr(list.NextCursor, "")
	return "entries", out, nil
}

type entryPage struct {
	Entry    contract.ContextEntry
	Versions []contract.ContextEntry
}

// entry shows one memory and its version history.
func (c *Console) entry(ctx context.Context, r *http.Request, v *viewer) (string, any, error) {
	id, err := pathID(r, "entryId")
	if err != nil {
		return "", nil, err
	}
	e, err := c.cfg.Entries.Get(ctx, v.Principal, &contract.GetEntryRequest{EntryID: id})
	if err != nil {
		return "", nil, err
	}
	h, err := c.cfg.Entries.History(ctx, v.Principal, &contract.EntryHistoryRequest{EntryID: id})
	if err != nil {
		return "", nil, err
	}
	return "entry", entryPage{Entry: e, Versions: h.Versions}, nil
}

type recallPage struct {
	Query, Mode, Kind, Tag, ConversationID string
	TopK, AsOfMs                           string
	Modes                                  []string
	Result                                 *contract.RecallResponse
}

// recall runs a recall from the query string and shows each result's ranks.
func (c *Console) recall(ctx context.Context, r *http.Request, v *viewer) (string, any, error) {
	out := recallPage{Query: trimmed(r, "q"), Mode: trimmed(r, "mode"), Kind: trimmed(r, "kind"), Tag: trimmed(r, "tag"),
		ConversationID: trimmed(r, "conversationId"), TopK: trimmed(r, "topK"), AsOfMs: trimmed(r, "asOfMs"),
		Modes: contract.RecallModes}
	if out.Query == "" {
		return "recall", out, nil
	}
	topK, err := queryInt(r, "topK", 1, 100)
	if err != nil {
		return "", nil, err
	}
	req := &contract.RecallRequest{Query: out.Query, TopK: topK, Mode: out.Mode}
	if out.AsOfMs != "" {
		asOf, err := strconv.ParseInt(out.AsOfMs, 10, 64)
		if err != nil || asOf < 0 || asOf > runtime.MaxSequence {
			return "", nil, runtime.Invalid("asOfMs", "asOfMs must be a time in ms since the epoch")
		}
		req.AsOfMs = &asOf
	}
	if out.Kind != "" || out.Tag != "" || out.ConversationID != "" {
		req.Filter = &contract.RecallFilter{ConversationID: optional(out.ConversationID)}
		if out.Kind != "" {
			req.Filter.Kinds = []string{out.Kind}
		}
		if out.Tag != "" {
			req.Filter.Tags = []string{out.Tag}
		}
	}
	res, err := c.cfg.Recall.Recall(ctx, v.Principal, req)
	if err != nil {
		return "", nil, err
	}
	out.Result = res
	return "recall", out, nil
}

type a2aPage struct {
	Agents      []contract.Agent
	AgentsNext  string
	Columns     []taskColumn
	TasksNext   string
	Pending     int64
	Messages    []contract.AgentMessage
	TasksCursor string
}

type taskColumn struct {
	State string
	Tasks []contract.Task
}

// a2a shows the agents, the task board (a column per state) and the messages the
// viewer may read, without marking them read.
func (c *Console) a2a(ctx context.Context, r *http.Request, v *viewer) (string, any, error) {
	p := v.Principal
	limit := pageSize
	agents, err := c.cfg.Agents.ListAgents(ctx, p, &contract.ListAgentsRequest{Cursor: optional(trimmed(r, "agents")), Limit: &limit})
	if err != nil {
		return "", nil, err
	}
	taskLimit := 100
	tasks, err := c.cfg.Tasks.ListTasks(ctx, p, &contract.ListTasksRequest{Cursor: optional(trimmed(r, "tasks")), Limit: &taskLimit})
	if err != nil {
		return "", nil, err
	}
	markRead := false
	msgs, err := c.cfg.AgentMessages.ReadMessages(ctx, p, &contract.ReadMessagesRequest{Limit: &limit, IncludeRead: true, MarkRead: &markRead})
	if err != nil {
		return "", nil, err
	}
	out := a2aPage{Agents: agents.Agents, AgentsNext: derefOr(agents.NextCursor, ""), TasksNext: derefOr(tasks.NextCursor, ""),
		Pending: tasks.PendingCount, Messages: msgs.Messages, TasksCursor: trimmed(r, "tasks")}
	for _, state := range contract.TaskStates {
		col := taskColumn{State: state}
		for _, t := range tasks.Tasks {
			if t.State == state {
				col.Tasks = append(col.Tasks, t)
			}
		}
		out.Columns = append(out.Columns, col)
	}
	return "a2a", out, nil
}

// task shows a task's history, messages and artifacts.
func (c *Console) task(ctx context.Context, r *http.Request, v *viewer) (string, any, error) {
	id, err := pathID(r, "taskId")
	if err != nil {
		return "", nil, err
	}
	t, err := c.cfg.Tasks.GetTask(ctx, v.Principal, &contract.TaskRequest{TaskID: id})
	if err != nil {
		return "", nil, err
	}
	return "task", t, nil
}

type eventsPage struct {
	Events []contract.Event
	Cursor string
	Next   string
	Kind   string
}

// events shows the event log from the cursor, oldest first; the page's script tails
// it from the last cursor.
func (c *Console) events(ctx context.Context, r *http.Request, v *viewer) (string, any, error) {
	page, kind, err := c.pollEvents(ctx, r, v, 0)
	if err != nil {
		return "", nil, err
	}
	return "events", eventsPage{Events: page.Events, Cursor: trimmed(r, "cursor"), Next: page.NextCursor, Kind: kind}, nil
}

// tailWaitMs is how long one request of the live tail waits for an event.
const tailWaitMs = 25_000

// eventsTail answers the live tail's long poll with JSON: the events after the
// cursor, waiting for one to commit.
func (c *Console) eventsTail(w http.ResponseWriter, r *http.Request, v *viewer) {
	if err := gate.Permit(v.Principal, contract.RouteA2AEventsPoll); err != nil {
		jsonAnswer(w, http.StatusForbidden, map[string]string{"error": "this page needs the capability " + contract.CapA2ARead})
		return
	}
	page, _, err := c.pollEvents(r.Context(), r, v, tailWaitMs)
	if err != nil {
		status := http.StatusInternalServerError
		if info, ok := contract.Codes[runtime.ErrorCode(err)]; ok {
			status = info.Status
		}
		jsonAnswer(w, status, map[string]string{"error": http.StatusText(status)})
		return
	}
	jsonAnswer(w, http.StatusOK, page)
}

func (c *Console) pollEvents(ctx context.Context, r *http.Request, v *viewer, waitMs int64) (*contract.EventPage, string, error) {
	limit := pageSize
	req := &contract.PollEventsRequest{Cursor: optional(trimmed(r, "cursor")), Limit: &limit, WaitMs: &waitMs}
	kind := trimmed(r, "kind")
	if kind != "" {
		req.Filter = &contract.EventFilter{Kinds: []string{kind}}
	}
	page, err := c.cfg.Events.PollEvents(ctx, v.Principal, req)
	return page, kind, err
}

type costsPage struct {
	GroupBy   string
	Groupings []string
	Range     string
	Ranges    []string
	Report    contract.CostsResponse
	Chart     barChart
}

// costRanges are the ranges the costs page offers, ending now.
var costRanges = map[string]time.Duration{"24h": 24 * time.Hour, "7d": 7 * 24 * time.Hour, "30d": 30 * 24 * time.Hour}

// costs shows the totals and a bar chart of the top groups over a range.
func (c *Console) costs(ctx context.Context, r *http.Request, v *viewer) (string, any, error) {
	out := costsPage{GroupBy: trimmed(r, "groupBy"), Range: trimmed(r, "range"), Groupings: contract.CostGroupings,
		Ranges: []string{"24h", "7d", "30d", "all"}}
	if out.GroupBy == "" {
		out.GroupBy = contract.CostsByAgent
	}
	if out.Range == "" {
		out.Range = "7d"
	}
	req := &contract.CostsRequest{GroupBy: out.GroupBy}
	topN := 20
	req.TopN = &topN
	if out.Range != "all" {
		d, ok := costRanges[out.Range]
		if !ok {
			return "", nil, runtime.Invalid("range", "range must be one of %s", strings.Join(out.Ranges, ", "))
		}
		from := c.cfg.Clock.Now().Add(-d).UnixMilli()
		req.FromMs = &from
	}
	rep, err := c.cfg.Costs.Report(ctx, v.Principal.Scope, req)
	if err != nil {
		return "", nil, err
	}
	out.Report, out.Chart = rep, costChart(rep.Groups)
	return "costs", out, nil
}

// redirectError sends the browser to another page (a form that opens a record).
type redirectError struct{ to string }

func (e redirectError) Error() string { return "see " + e.to }
