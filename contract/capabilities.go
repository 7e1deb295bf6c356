package contract

// Capabilities a runtime token may carry (docs/api.md). A route requires exactly one;
// a few check a second one after parsing the body.
const (
	CapMessagesAppend  = "messages:append"
	CapMessagesRead    = "messages:read"
	CapMessagesSearch  = "messages:search"
	CapMessagesDelete  = "messages:delete"
	CapContextWrite    = "context:write"
	CapContextRead     = "context:read"
	CapContextRetrieve = "context:retrieve"
	CapContextAdmin    = "context:admin"
	CapKnowledgeRead   = "knowledge:read"
	CapKnowledgeQuery  = "knowledge:query"
	CapA2ASend         = "a2a:send"
	CapA2ARead         = "a2a:read"
	CapA2ATasks        = "a2a:tasks"
	CapA2AAdmin        = "a2a:admin"
	CapCostsRead       = "costs:read"
)

// AllCapabilities lists every capability; the static token and open mode grant them all.
var AllCapabilities = []string{
	CapMessagesAppend, CapMessagesRead, CapMessagesSearch, CapMessagesDelete,
	CapContextWrite, CapContextRead, CapContextRetrieve, CapContextAdmin,
	CapKnowledgeRead, CapKnowledgeQuery,
	CapA2ASend, CapA2ARead, CapA2ATasks, CapA2AAdmin,
	CapCostsRead,
}
