package client

import (
	"context"

	"github.com/agent-context/agent-context/contract"
)

// AppendMessages calls POST /messages/batch.
func (c *Client) AppendMessages(ctx context.Context, req *contract.AppendMessagesRequest) (*contract.AppendMessagesResponse, error) {
	return call[contract.AppendMessagesResponse](ctx, c, contract.RouteMessagesBatch, req)
}

// RecentMessages calls POST /messages/recent.
func (c *Client) RecentMessages(ctx context.Context, req *contract.RecentMessagesRequest) (*contract.MessagesResponse, error) {
	return call[contract.MessagesResponse](ctx, c, contract.RouteMessagesRecent, req)
}

// PageMessages calls POST /messages.
func (c *Client) PageMessages(ctx context.Context, req *contract.PageMessagesRequest) (*contract.MessagePage, error) {
	return call[contract.MessagePage](ctx, c, contract.RouteMessages, req)
}

// SearchMessages calls POST /messages/search.
func (c *Client) SearchMessages(ctx context.Context, req *contract.SearchMessagesRequest) (*contract.SearchMessagesResponse, error) {
	return call[contract.SearchMessagesResponse](ctx, c, contract.RouteMessagesSearch, req)
}

// ListConversations calls POST /conversations/list.
func (c *Client) ListConversations(ctx context.Context, req *contract.ListConversationsRequest) (*contract.ConversationList, error) {
	return call[contract.ConversationList](ctx, c, contract.RouteConversationsList, req)
}
