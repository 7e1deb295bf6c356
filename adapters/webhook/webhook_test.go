package webhook

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
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

// specialRanges are the special-purpose ranges of the outbound rules (docs/a2a-protocol.md).
var specialRanges = []string{
	"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.0.0.0/24",
	"192.168.0.0/16", "198.18.0.0/15", "224.0.0.0/4", "240.0.0.0/4",
	"::1/128", "fc00::/7", "fe80::/10", "ff00::/8", "::/96", "64:ff9b::/96", "64:ff9b:1::/48", "2002::/16", "2001::/32",
}

// lastAddr is the highest address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// TestEverySpecialRangeRefused: the first and last address of every range, and for an
// IPv4 range its IPv4-mapped and IPv4-compatible forms too, are refused at set time (an
// IP literal) and at delivery (the address dialled), with no connection made.
func TestEverySpecialRangeRefused(t *testing.T) {
	w, err := New(Options{})
	require.NoError(t, err)
	ctx := context.Background()
	for _, r := range specialRanges {
		p := netip.MustParsePrefix(r)
		addrs := []netip.Addr{p.Masked().Addr(), lastAddr(p)}
		if p.Addr().Is4() {
			for _, a := range addrs[:2] {
				b4 := a.As4()
				addrs = append(addrs, netip.AddrFrom16([16]byte{10: 0xff, 11: 0xff, 12: b4[0], 13: b4[1], 14: b4[2], 15: b4[3]}),
					netip.AddrFrom16([16]byte{12: b4[0], 13: b4[1], 14: b4[2], 15: b4[3]}))
			}
		}
		for _, a := range addrs {
			host := net.JoinHostPort(a.String(), "9")
			err := w.Check(ctx, "url", "https://"+host+"/hook")
			require.Equal(t, contract.CodeValidationFailed, runtime.ErrorCode(err), "%s in %s at set time", a, r)
			_, err = w.dial(ctx, "tcp", host)
			require.ErrorIs(t, err, errRefused, "%s in %s at delivery", a, r)
		}
	}
	for _, ok := range []string{"8.8.8.8", "100.128.0.1", "172.32.0.1", "192.0.1.1", "198.20.0.1", "223.255.255.255",
		"::ffff:8.8.8.8", "2001:4860:4860::8888", "2003::1", "64:ff9b:2::1"} {
		a := netip.MustParseAddr(ok)
		require.False(t, forbidden(a), ok)
		require.NoError(t, w.Check(ctx, "url", "https://"+net.JoinHostPort(a.String(), "443")+"/hook"), ok)
	}
	require.True(t, forbidden(netip.MustParseAddr("fe80::1%eth0")), "a zone does not hide a link-local address")
}
