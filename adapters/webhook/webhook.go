// Package webhook delivers A2A push notifications under the outbound rules: https
// only, unless the host is allow-listed; no address in a special-purpose range
// (loopback, private, link-local, multicast, reserved, the IPv6 forms that carry an
// IPv4 address), checked on the address actually dialled (after DNS, so a name that
// rebinds to such an address between the check and the delivery is still refused); no
// redirects; a 10 s timeout; answers read at most 64 KiB.
package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
)

// Bounds of one delivery.
const (
	Timeout       = 10 * time.Second
	MaxAnswerRead = 64 << 10
	// resolveTimeout bounds the name lookup of a check at set time.
	resolveTimeout = 5 * time.Second
)

// Options configure the webhooks.
type Options struct {
	// AllowHosts are the hosts (names or IPs, lower case) that may be reached over
	// plain http and at any address.
	AllowHosts []string
	// Registerer receives the delivery counters; nil registers none.
	Registerer prometheus.Registerer
	// Resolver resolves names at set time (nil: net.DefaultResolver).
	Resolver *net.Resolver
}

// Webhooks implements a2a.Webhooks.
type Webhooks struct {
	allow                          map[string]bool
	resolver                       *net.Resolver
	client                         *http.Client
	sent, failed, retried, dropped prometheus.Counter
}

var _ a2a.Webhooks = (*Webhooks)(nil)

// New returns the webhooks.
func New(opts Options) (*Webhooks, error) {
	w := &Webhooks{allow: map[string]bool{}, resolver: opts.Resolver}
	for _, h := range opts.AllowHosts {
		w.allow[strings.ToLower(h)] = true
	}
	if w.resolver == nil {
		w.resolver = net.DefaultResolver
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "agent_context", Subsystem: "a2a_push", Name: name, Help: help})
	}
	w.sent = counter("sent_total", "Push notifications delivered (a 2xx answer).")
	w.failed = counter("failed_total", "Push notification attempts that failed (refused address, no answer, or not 2xx).")
	w.retried = counter("retried_total", "Push notification attempts that retried a failed one.")
	w.dropped = counter("dropped_total", "Changes given up after 24 h of failed push notifications.")
	if opts.Registerer != nil {
		for _, c := range []prometheus.Collector{w.sent, w.failed, w.retried, w.dropped} {
			if err := opts.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("register the push metrics: %w", err)
			}
		}
	}
	transport := &http.Transport{
		// No proxy: the address dialled is the webhook's own, so the guard sees it.
		Proxy:                 nil,
		DialContext:           w.dial,
		TLSHandshakeTimeout:   Timeout,
		ResponseHeaderTimeout: Timeout,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       time.Minute,
		ForceAttemptHTTP2:     true,
	}
	w.client = &http.Client{Transport: transport, Timeout: Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return w, nil
}

// errRefused is a delivery to an address the rules forbid.
var errRefused = errors.New("the webhook's address is in a special-purpose range (loopback, private, link-local, multicast, reserved)")

// dial connects to addr; unless its host is allow-listed, the address actually
// dialled (each one DNS gave) is checked before the connection is made.
func (w *Webhooks) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	allowed := w.allow[strings.ToLower(host)]
	d := &net.Dialer{Timeout: Timeout, Control: func(_, address string, _ syscall.RawConn) error {
		if allowed {
			return nil
		}
		ap, err := netip.ParseAddrPort(address)
		if err != nil || forbidden(ap.Addr()) {
			return errRefused
		}
		return nil
	}}
	return d.DialContext(ctx, network, addr)
}

// special are the special-purpose ranges of the IANA registries no webhook may reach
// unless allowed: "this network", private, shared (RFC 6598), loopback, link-local,
// IETF protocol assignments, benchmarking, multicast and reserved IPv4; loopback,
// unique-local, link-local and multicast IPv6. The IPv6 forms that carry an IPv4
// address (IPv4-compatible, NAT64, 6to4, Teredo) are refused whole, whatever address
// they carry: decoding each form to check the address inside is more code to get
// wrong, and a webhook has no need of them. An IPv4-mapped address is checked as the
// IPv4 address it is.
var special = func() []netip.Prefix {
	var out []netip.Prefix
	for _, p := range []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
		"192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15", "224.0.0.0/4", "240.0.0.0/4",
		"::1/128", "fc00::/7", "fe80::/10", "ff00::/8",
		"::/96", "64:ff9b::/96", "64:ff9b:1::/48", "2002::/16", "2001::/32",
	} {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}()

// forbidden reports whether a is an address no webhook may have unless allowed.
func forbidden(a netip.Addr) bool {
	// Without its zone: a prefix never contains a zoned address.
	a = a.Unmap().WithZone("")
	for _, p := range special {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Check implements a2a.Webhooks: the scheme, the host and, for a host not
// allow-listed, every address its name resolves to now.
func (w *Webhooks) Check(ctx context.Context, field, rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil || !u.IsAbs() || u.Host == "" || u.User != nil {
		return runtime.Invalid(field, "%s must be an absolute https URL without credentials", field)
	}
	host := strings.ToLower(u.Hostname())
	allowed := w.allow[host]
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && allowed:
	default:
		return runtime.Invalid(field, "%s must be an https URL (http only to an allow-listed host)", field)
	}
	if allowed {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if forbidden(ip) {
			return runtime.Invalid(field, "%s must not point at a special-purpose address (loopback, private, link-local, multicast, reserved)", field)
		}
		return nil
	}
	lookup, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	addrs, err := w.resolver.LookupNetIP(lookup, "ip", host)
	if err != nil || len(addrs) == 0 {
		return runtime.Invalid(field, "%s names a host that does not resolve", field)
	}
	for _, a := range addrs {
		if forbidden(a) {
			return runtime.Invalid(field, "%s resolves to a special-purpose address (loopback, private, link-local, multicast, reserved)", field)
		}
	}
	return nil
}

// Post implements a2a.Webhooks: one POST of body; a 2xx answer is a delivery.
func (w *Webhooks) Post(ctx context.Context, hook a2a.Webhook, body []byte, retry bool) error {
	if retry {
		w.retried.Inc()
	}
	err := w.post(ctx, hook, body)
	if err != nil {
		w.failed.Inc()
		return err
	}
	w.sent.Inc()
	return nil
}

func (w *Webhooks) post(ctx context.Context, hook a2a.Webhook, body []byte) error {
	// The rules again: the allow-list may have changed since the config was set.
	u, err := url.Parse(hook.URL)
	if err != nil || (u.Scheme != "https" && !(u.Scheme == "http" && w.allow[strings.ToLower(u.Hostname())])) {
		return errRefused
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook.URL, strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if hook.Token != nil {
		req.Header.Set("X-A2A-Notification-Token", *hook.Token)
	}
	if auth := bearer(hook.Authentication); auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxAnswerRead))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("the webhook answered %d", resp.StatusCode)
	}
	return nil
}

// Dropped implements a2a.Webhooks.
func (w *Webhooks) Dropped() { w.dropped.Inc() }

// bearer returns the credentials of a config's authentication object when it names
// the Bearer scheme (0.3: "schemes": [...], 1.0: "scheme"), else "".
func bearer(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	var auth struct {
		Scheme      string   `json:"scheme"`
		Schemes     []string `json:"schemes"`
		Credentials string   `json:"credentials"`
	}
	if json.Unmarshal(raw, &auth) != nil || auth.Credentials == "" {
		return ""
	}
	for _, s := range append(auth.Schemes, auth.Scheme) {
		if strings.EqualFold(s, "bearer") {
			return auth.Credentials
		}
	}
	return ""
}
