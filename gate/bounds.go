package gate

import (
	"errors"
	"regexp"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// fieldBound names the upper bound of a request's number field by its path, or 0
// for a field without one.
type fieldBound func(field string) int64

// routeBounds are the numeric bounds of each route's request, by RateName. A door
// that serves a route's use case (REST, an MCP tool, a JSON-RPC method) answers a
// number out of them with the same details.limit (Bound).
var routeBounds = map[string]fieldBound{
	RateName(contract.RouteMessagesBatch):        appendBound,
	RateName(contract.RouteMessagesRecent):       named(map[string]int64{"limit": contract.MaxMessagesLimit}),
	RateName(contract.RouteMessages):             named(map[string]int64{"limit": contract.MaxMessagesLimit}),
	RateName(contract.RouteMessagesSearch):       named(map[string]int64{"limit": contract.MaxSearchLimit}),
	RateName(contract.RouteConversationsList):    named(map[string]int64{"limit": contract.MaxMessagesLimit}),
	RateName(contract.RouteWindowsList):          named(map[string]int64{"limit": contract.MaxListLimit}),
	RateName(contract.RouteModelInvocationsList): named(map[string]int64{"limit": contract.MaxListLimit}),
	RateName(contract.RouteEntriesList):          named(map[string]int64{"limit": contract.MaxListLimit}),
	RateName(contract.RouteKnowledgeQuery):       named(map[string]int64{"topK": contract.MaxKnowledgeTopK}),
	RateName(contract.RouteA2AAgentsList):        named(map[string]int64{"limit": contract.MaxA2ALimit}),
	RateName(contract.RouteA2AMessagesPost):      named(map[string]int64{"ttlHours": contract.MaxTTLHours}),
	RateName(contract.RouteA2AMessagesRead):      named(map[string]int64{"limit": contract.MaxA2ALimit}),
	RateName(contract.RouteA2ATasksList):         named(map[string]int64{"limit": contract.MaxA2ALimit}),
	RateName(contract.RouteA2ATasksUpdate):       named(map[string]int64{"expectedVersion": runtime.MaxSequence}),
	RateName(contract.RouteA2AEventsPoll): named(map[string]int64{
		"limit": contract.MaxPollLimit, "waitMs": contract.MaxPollWaitMs}),
	RateName(contract.RouteA2AHandoff): named(map[string]int64{"ttl_ms": contract.MaxEnvelopeTTLMs}),
}

// Bound completes a refusal of route's request for a number the decoder could not
// hold (1e100, 2^63, 2.5) with details.limit, the field's upper bound, so that such a
// value is answered like any other out-of-range number (docs/api.md). A field's own
// bound is tighter than the decoder's general 2^53 − 1 and replaces it. Any other
// error passes unchanged.
func Bound(route contract.Route, err error) error {
	var e *runtime.Error
	if !errors.As(err, &e) || e.Code != contract.CodeValidationFailed {
		return err
	}
	bound := routeBounds[RateName(route)]
	if bound == nil {
		return err
	}
	field, _ := e.Details["field"].(string)
	b := bound(field)
	if b <= 0 {
		return err
	}
	if limit, ok := e.Details["limit"].(int64); !ok || b < limit {
		e.With("limit", b)
	}
	return err
}

// named bounds the named top-level number fields.
func named(bounds map[string]int64) fieldBound {
	return func(field string) int64 { return bounds[field] }
}

// appendBound bounds the sequence and createdAtMs of each record of an append.
func appendBound(field string) int64 {
	if recordNumberField.MatchString(field) {
		return runtime.MaxSequence
	}
	return 0
}

var recordNumberField = regexp.MustCompile(`^messages\[[0-9]+\]\.(sequence|createdAtMs)$`)
