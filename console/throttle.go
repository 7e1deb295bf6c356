package console

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// Sign-in throttling (docs/console.md): after signInFailures failed sign-ins from one
// client address within signInWindow, every further attempt from it is answered 429
// until the window has passed, a correct token included. The count is kept per
// replica, in memory: an attacker spreading attempts over replicas gets each
// replica's allowance, which a load balancer with client affinity keeps at one.
const (
	signInFailures = 10
	signInWindow   = time.Minute
	// maxThrottled bounds the addresses tracked at once: a flood from many addresses
	// cannot grow the map past it (the oldest windows go first when it is full).
	maxThrottled = 10_000
)

// signInThrottle counts failed sign-ins per client address in fixed windows.
type signInThrottle struct {
	mu      sync.Mutex
	clients map[string]*signInWindowCount
}

type signInWindowCount struct {
	start    time.Time
	failures int
}

func newSignInThrottle() *signInThrottle {
	return &signInThrottle{clients: map[string]*signInWindowCount{}}
}

// admit reports whether client may try to sign in at now; when it may not, how long
// it has to wait.
func (t *signInThrottle) admit(client string, now time.Time) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	w, ok := t.clients[client]
	if !ok || now.Sub(w.start) >= signInWindow {
		return 0, true
	}
	if w.failures < signInFailures {
		return 0, true
	}
	return w.start.Add(signInWindow).Sub(now), false
}

// failed counts a failed sign-in of client at now.
func (t *signInThrottle) failed(client string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	w, ok := t.clients[client]
	if ok && now.Sub(w.start) < signInWindow {
		w.failures++
		return
	}
	if !ok && len(t.clients) >= maxThrottled {
		t.evict(now)
	}
	t.clients[client] = &signInWindowCount{start: now, failures: 1}
}

// evict drops every window that has passed; if none has, the oldest one.
func (t *signInThrottle) evict(now time.Time) {
	var oldest string
	for client, w := range t.clients {
		if now.Sub(w.start) >= signInWindow {
			delete(t.clients, client)
			continue
		}
		if oldest == "" || w.start.Before(t.clients[oldest].start) {
			oldest = client
		}
	}
	if len(t.clients) >= maxThrottled {
		delete(t.clients, oldest)
	}
}

// clientAddress is the address a request came from: the console is reached inside
// the mesh, directly, so the connection's peer is the client (a forwarded-for header
// is the client's to set and is not trusted).
func clientAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
