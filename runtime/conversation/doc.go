// Package conversation holds the conversation facts: messages (append, recent, pages,
// search), context windows, their derivations and lineage, and model invocations.
package conversation
