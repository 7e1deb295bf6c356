package client

import (
	"context"

	"github.com/agent-context/agent-context/contract"
)

// CreateEntry calls POST /entries; created is false when an identical entry was
// already stored.
func (c *Client) CreateEntry(ctx context.Context, req *contract.CreateEntryRequest) (e *contract.ContextEntry, created bool, err error) {
	return callCreated[contract.ContextEntry](ctx, c, contract.RouteEntriesCreate, req)
}

// GetEntry calls POST /entries/get.
func (c *Client) GetEntry(ctx context.Context, req *contract.GetEntryRequest) (*contract.ContextEntry, error) {
	return call[contract.ContextEntry](ctx, c, contract.RouteEntriesGet, req)
}

// CorrectEntry calls POST /entries/correct.
func (c *Client) CorrectEntry(ctx context.Context, req *contract.CorrectEntryRequest) (*contract.CorrectEntryResponse, error) {
	return call[contract.CorrectEntryResponse](ctx, c, contract.RouteEntriesCorrect, req)
}

// MergeEntries calls POST /entries/merge; created is false for the replay of a merge
// already done.
func (c *Client) MergeEntries(ctx context.Context, req *contract.MergeEntriesRequest) (res *contract.MergeEntriesResponse, created bool, err error) {
	return callCreated[contract.MergeEntriesResponse](ctx, c, contract.RouteEntriesMerge, req)
}

// ExpireEntry calls POST /entries/expire.
func (c *Client) ExpireEntry(ctx context.Context, req *contract.ExpireEntryRequest) (*contract.ContextEntry, error) {
	return call[contract.ContextEntry](ctx, c, contract.RouteEntriesExpire, req)
}

// ListEntries calls POST /entries/list.
func (c *Client) ListEntries(ctx context.Context, req *contract.ListEntriesRequest) (*contract.EntryList, error) {
	return call[contract.EntryList](ctx, c, contract.RouteEntriesList, req)
}

// EntryHistory calls POST /entries/history.
func (c *Client) EntryHistory(ctx context.Context, req *contract.EntryHistoryRequest) (*contract.EntryHistory, error) {
	return call[contract.EntryHistory](ctx, c, contract.RouteEntriesHistory, req)
}

// Recall calls POST /recall.
func (c *Client) Recall(ctx context.Context, req *contract.RecallRequest) (*contract.RecallResponse, error) {
	return call[contract.RecallResponse](ctx, c, contract.RouteRecall, req)
}

// RebuildVectorProjection calls POST /projections/vector/rebuild; created is false
// when the same rebuild was already in flight (its operation is returned).
func (c *Client) RebuildVectorProjection(ctx context.Context, req *contract.RebuildProjectionRequest) (op *contract.OperationResponse, created bool, err error) {
	return callCreated[contract.OperationResponse](ctx, c, contract.RouteVectorRebuild, req)
}
