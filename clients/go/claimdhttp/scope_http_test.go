package claimdhttp_test

// Whose key it is, through real HTTP on every router: without a client function, two
// credentials (Authorization values, session cookies) never share a key space, so one
// caller never receives another's stored response; a stored response never carries
// Set-Cookie or hop-by-hop headers.

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"claimd.dev/go/claimd"
	"claimd.dev/go/claimd/claimdhttp"
)

// ordering returns a handler that creates an order per run: 201 {"order":"o_<n>"}.
func ordering() http.HandlerFunc {
	var orders atomic.Int64
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"order":"o_%d"}`, orders.Add(1))
	}
}

// lines is a header of these lines (name, value, …) and the Idempotency-Key key.
func lines(key string, nameValues ...string) http.Header {
	h := http.Header{"Idempotency-Key": {key}}
	for i := 0; i < len(nameValues); i += 2 {
		h.Add(nameValues[i], nameValues[i+1])
	}
	return h
}

// expectOwnOrders sends a's request, then b's (the same key and body, another
// credential), then each again: each ran the handler itself once, and its retry replays
// its own order.
func expectOwnOrders(t *testing.T, url string, h *counted, a, b http.Header) {
	t.Helper()
	const body = `{"item":"cup","n":1}`
	first := postWith(t, url+"/orders", body, a)
	second := postWith(t, url+"/orders", body, b)
	for _, got := range []answer{first, second} {
		if got.status != 201 || got.header.Get(claimdhttp.Replayed) != "" {
			t.Fatalf("a caller's first request did not run the handler: %+v", got)
		}
	}
	if first.body == second.body || h.runs.Load() != 2 {
		t.Fatalf("the second caller got %s, the first %s; runs %d", second.body, first.body, h.runs.Load())
	}
	// Scoped, not unkeyed: each caller's retry is a replay of its own order.
	for _, c := range []struct {
		header http.Header
		want   answer
	}{{a, first}, {b, second}} {
		again := postWith(t, url+"/orders", body, c.header)
		if again.body != c.want.body || again.header.Get(claimdhttp.Replayed) != "true" {
			t.Fatalf("a retry got %+v, want a replay of %s", again, c.want.body)
		}
	}
	if h.runs.Load() != 2 {
		t.Fatalf("the handler ran %d times", h.runs.Load())
	}
}

func TestTwoUsersWithTheSameKeyAndBodyEachRunTheHandlerAndNeverGetTheOthersResponse(t *testing.T) {
	onRoutersAndStores(t, allRouters, func(t *testing.T, rt router, c *claimd.Client) {
		url, h := serveOn(t, rt, c, slowRetries, ordering())
		key := newKey()
		expectOwnOrders(t, url, h,
			lines(key, "Authorization", "Bearer token-A"), lines(key, "Authorization", "Bearer token-B"))
	})
}

func TestTwoSessionCookiesWithTheSameKeyAndBodyEachRunTheHandlerAndNeverGetTheOthersResponse(t *testing.T) {
	onRoutersAndStores(t, allRouters, func(t *testing.T, rt router, c *claimd.Client) {
		url, h := serveOn(t, rt, c, slowRetries, ordering(), claimdhttp.WithSessionCookie("sid"))
		key := newKey()
		expectOwnOrders(t, url, h,
			lines(key, "Cookie", "theme=dark; sid=s%3Aalice.sig"), lines(key, "Cookie", "sid=s%3Abob.sig; theme=dark"))
		// Other cookies are not the session: alice with another theme is still alice.
		again := postWith(t, url+"/orders", `{"item":"cup","n":1}`, lines(key, "Cookie", "sid=s%3Aalice.sig; theme=light"))
		if again.body != `{"order":"o_1"}` || again.header.Get(claimdhttp.Replayed) != "true" {
			t.Fatalf("alice with another theme: %+v", again)
		}
	})
}

func TestASetCookieGoesToItsCallerOnlyAndNoHopByHopHeaderIsReplayed(t *testing.T) {
	onRoutersAndStores(t, allRouters, func(t *testing.T, rt router, c *claimd.Client) {
		url, h := serveOn(t, rt, c, slowRetries, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Set-Cookie", "sid=fresh-session; Path=/; HttpOnly")
			w.Header().Set("Connection", "X-Hop")
			w.Header().Set("X-Hop", "1")
			w.Header().Set("Keep-Alive", "timeout=5")
			w.Header().Set("Proxy-Status", "app")
			created(w, r)
		})
		key := newKey()
		first := postWith(t, url+"/orders", `{}`, lines(key, "Authorization", "Bearer token-A"))
		if first.status != 201 || first.header.Get("Set-Cookie") == "" {
			t.Fatalf("the caller whose request ran did not get its cookie: %+v", first)
		}
		again := postWith(t, url+"/orders", `{}`, lines(key, "Authorization", "Bearer token-A"))
		if again.status != 201 || again.header.Get(claimdhttp.Replayed) != "true" || again.header.Get("X-Order") != "7" {
			t.Fatalf("the replay: %+v", again)
		}
		for _, name := range []string{"Set-Cookie", "X-Hop", "Keep-Alive", "Proxy-Status"} {
			if v := again.header.Values(name); len(v) > 0 {
				t.Errorf("the replay carries %s: %q", name, v)
			}
		}
		if h.runs.Load() != 1 {
			t.Fatalf("the handler ran %d times", h.runs.Load())
		}
	})
}
