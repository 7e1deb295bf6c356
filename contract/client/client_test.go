package client_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/contract/client"
)

// The answers a gateway in front of the service may give: its own error page, and a
// refusal in the envelope with Retry-After. (The service's own answers are checked
// end to end in cmd/agent-context.)
func TestErrorsFromAGateway(t *testing.T) {
	t.Parallel()
	var seen http.Header
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Clone()
		switch r.URL.Path {
		case contract.RouteHealth.Path:
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte("<html>bad gateway</html>"))
		default:
			w.Header().Set("Retry-After", "3")
			w.Header().Set("X-Request-Id", "req-h")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"status":429,"message":"slow down","error":{"code":"RATE_LIMITED","message":"slow down",` +
				`"category":"rate_limit","retryable":true,"requestId":"req-1","details":{"level":"tenant"}}}`))
		}
	}))
	t.Cleanup(gateway.Close)
	c := client.New(client.WithBaseURL(gateway.URL+"/"), client.WithBearerToken("tok"),
		client.WithUserAuthorization("Bearer user"), client.WithHeader("x-infra-tenant-id", "acme"))

	_, err := c.Health(context.Background())
	var e *client.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, http.StatusBadGateway, e.StatusCode)
	require.Empty(t, e.Code)
	require.Equal(t, "<html>bad gateway</html>", e.Message)
	require.Empty(t, client.ErrorCode(err))

	_, err = c.RecentMessages(client.WithRequestID(context.Background(), "mine"), &contract.RecentMessagesRequest{})
	require.ErrorAs(t, err, &e)
	require.Equal(t, contract.CodeRateLimited, client.ErrorCode(err))
	require.Equal(t, "req-1", e.RequestID, "the envelope's request ID")
	require.True(t, e.Retryable)
	require.EqualValues(t, 3000, e.RetryAfterMs, "from Retry-After when details has none")
	require.Equal(t, "tenant", e.Details["level"])
	require.Contains(t, err.Error(), "RATE_LIMITED")

	require.Equal(t, "Bearer tok", seen.Get("Authorization"))
	require.Equal(t, "Bearer user", seen.Get("x-infra-user-authorization"))
	require.Equal(t, "acme", seen.Get("x-infra-tenant-id"))
	require.Equal(t, "mine", seen.Get("X-Request-Id"))
	require.Equal(t, "application/json", seen.Get("Content-Type"))
}
