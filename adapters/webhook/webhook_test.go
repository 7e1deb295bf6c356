package webhook

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
)

func TestDeliveryRefusesLoopbackUnlessAllowed(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	w, err := New(Options{})
	require.NoError(t, err)
	// Even https, even past the check at set time (as a name that rebinds would be):
	// the dialled address is loopback.
	err = w.Post(context.Background(), a2a.Webhook{URL: srv.URL}, []byte(`{}`), false)
	require.ErrorIs(t, err, errRefused)
	require.Zero(t, hits.Load(), "a refused address is never contacted")
	require.Equal(t, 1.0, testutil.ToFloat64(w.failed))
}

func TestDeliveryToAnAllowedHost(t *testing.T) {
	var token, auth atomic.Value
	redirected := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("a redirect was followed") }))
	defer redirected.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(rw, r, redirected.URL, http.StatusFound)
		case "/large":
			_, _ = rw.Write([]byte(strings.Repeat("x", 1<<20)))
		default:
			token.Store(r.Header.Get("X-A2A-Notification-Token"))
			auth.Store(r.Header.Get("Authorization"))
		}
	}))
	defer srv.Close()
	reg := prometheus.NewRegistry()
	w, err := New(Options{AllowHosts: []string{"127.0.0.1"}, Registerer: reg})
	require.NoError(t, err)
	tok := "secret"
	require.NoError(t, w.Post(context.Background(), a2a.Webhook{URL: srv.URL + "/hook", Token: &tok,
		Authentication: []byte(`{"schemes": ["Bearer"], "credentials": "cred"}`)}, []byte(`{}`), false))
	require.Equal(t, "secret", token.Load())
	require.Equal(t, "Bearer cred", auth.Load())
	require.Error(t, w.Post(context.Background(), a2a.Webhook{URL: srv.URL + "/redirect"}, []byte(`{}`), true), "a 302 is not a delivery")
	require.NoError(t, w.Post(context.Background(), a2a.Webhook{URL: srv.URL + "/large"}, []byte(`{}`), false))
	w.Dropped()
	require.Equal(t, 2.0, testutil.ToFloat64(w.sent))
	require.Equal(t, 1.0, testutil.ToFloat64(w.failed))
	require.Equal(t, 1.0, testutil.ToFloat64(w.retried))
	require.Equal(t, 1.0, testutil.ToFloat64(w.dropped))
}

func TestCheck(t *testing.T) {
	w, err := New(Options{AllowHosts: []string{"127.0.0.1"}})
	require.NoError(t, err)
	ctx := context.Background()
	for _, ok := range []string{"http://127.0.0.1:9/hook", "https://127.0.0.1/hook", "https://93.184.215.14/hook"} {
		require.NoError(t, w.Check(ctx, "url", ok), ok)
	}
	for _, bad := range []string{
		"http://127.0.0.2/hook", "https://127.0.0.2/hook", "https://localhost/hook", "ftp://127.0.0.1/hook",
		"https://10.1.2.3/hook", "https://192.168.0.1/hook", "https://169.254.169.254/latest", "https://[::1]/hook",
		"https://[fe80::1]/hook", "https://224.0.0.1/hook", "https://0.0.0.0/hook", "https://[::ffff:127.0.0.1]/hook",
		"http://93.184.215.14/hook", "hook", "https://u:p@127.0.0.1/hook",
	} {
		err := w.Check(ctx, "url", bad)
		require.Equal(t, contract.CodeValidationFailed, runtime.ErrorCode(err), bad)
	}
}
