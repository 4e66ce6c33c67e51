package claimdhttp_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"claimd.dev/go/claimd"
	"claimd.dev/go/claimd/claimdhttp"
)

// recovered is outer middleware that records the value a handler panicked with and
// panics on with it.
type recovered struct {
	mu     sync.Mutex
	values []any
}

func (rv *recovered) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				rv.mu.Lock()
				rv.values = append(rv.values, v)
				rv.mu.Unlock()
				panic(v)
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// panicsOnce is a handler panicking with value on its first run, then answering created.
func panicsOnce(value any) http.HandlerFunc {
	var once sync.Once
	return func(w http.ResponseWriter, r *http.Request) {
		first := false
		once.Do(func() { first = true })
		if first {
			panic(value)
		}
		created(w, r)
	}
}

// sendPanicking sends a request whose handler panics: the connection is aborted.
func sendPanicking(t *testing.T, url, key string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/orders", strings.NewReader(`{}`))
	req.Header.Set("Idempotency-Key", key)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the panicking request got %d", resp.StatusCode)
	}
}

func TestAPanicValueReachesOuterMiddlewareUnchangedErrAbortHandlerToo(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		type custom struct{ n int }
		for _, value := range []any{http.ErrAbortHandler, custom{7}} {
			var rv recovered
			url, _ := serveWrapped(t, c, slowRetries, rv.wrap, panicsOnce(value))
			sendPanicking(t, url, newKey())
			rv.mu.Lock()
			got := rv.values
			rv.mu.Unlock()
			if len(got) != 1 || got[0] != value {
				t.Fatalf("outer middleware recovered %#v, want %#v", got, value)
			}
		}
	})
}

func TestAKeyGivenBackRunsAgainAfterOneSecondByDefault(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		// slowRetries' own backoff is a minute: past the wait, the retry would be 503.
		url, h := serve(t, c, slowRetries, panicsOnce("the handler broke"))
		key := newKey()
		sendPanicking(t, url, key)
		begun := time.Now()
		a := post(t, url+"/orders", `{}`, key)
		if a.status != 201 || a.header.Get(claimdhttp.Replayed) != "" || h.runs.Load() != 2 {
			t.Fatalf("the retry: %+v, runs %d", a, h.runs.Load())
		}
		if waited := time.Since(begun); waited > 5*time.Second {
			t.Fatalf("the retry waited %v", waited)
		}
	})
}

func TestInvalidOptionsPanicAtConstructionNamingTheOption(t *testing.T) {
	c, err := claimd.New("127.0.0.1:1") // never dialled
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tc := range []struct {
		name      string
		client    *claimd.Client
		namespace string
		opt       claimdhttp.Option
	}{
		{"client", nil, "ns", nil},
		{"namespace", c, "", nil},
		{"WithWait", c, "ns", claimdhttp.WithWait(-time.Second)},
		{"WithWait", c, "ns", claimdhttp.WithWait(61 * time.Second)},
		{"WithLease", c, "ns", claimdhttp.WithLease(500 * time.Millisecond)},
		{"WithMaxResponseBytes", c, "ns", claimdhttp.WithMaxResponseBytes(0)},
		{"WithMaxResponseBytes", c, "ns", claimdhttp.WithMaxResponseBytes(65537)},
		{"WithMaxBodyBytes", c, "ns", claimdhttp.WithMaxBodyBytes(-1)},
		{"WithRetryAfter", c, "ns", claimdhttp.WithRetryAfter(500 * time.Millisecond)},
		{"WithRetryAfter", c, "ns", claimdhttp.WithRetryAfter(-time.Second)},
		{"WithRetryAfter", c, "ns", claimdhttp.WithRetryAfter(25 * time.Hour)},
		{"WithClientOf", c, "ns", claimdhttp.WithClientOf(nil)},
		{"WithSessionCookie", c, "ns", claimdhttp.WithSessionCookie("")},
		{"WithSessionCookie", c, "ns", claimdhttp.WithSessionCookie("my session")},
		{"WithSessionCookie", c, "ns", claimdhttp.WithSessionCookie("sid=")},
	} {
		var opts []claimdhttp.Option
		if tc.opt != nil {
			opts = append(opts, tc.opt)
		}
		expectPanicNaming(t, tc.name, func() { claimdhttp.Idempotency(tc.client, tc.namespace, opts...) })
	}
	// A cookie the client function would never look at: a mistake, not a choice.
	expectPanicNaming(t, "WithSessionCookie", func() {
		claimdhttp.Idempotency(c, "ns", claimdhttp.WithSessionCookie("sid"),
			claimdhttp.WithClientOf(func(*http.Request) string { return "" }))
	})
	// The bounds themselves, and 0 (the namespace's backoff), are accepted.
	claimdhttp.Idempotency(c, "ns", claimdhttp.WithWait(0), claimdhttp.WithWait(claimdhttp.MaxWait),
		claimdhttp.WithMaxResponseBytes(1), claimdhttp.WithMaxBodyBytes(0),
		claimdhttp.WithRetryAfter(0), claimdhttp.WithRetryAfter(time.Second), claimdhttp.WithLease(time.Second),
		claimdhttp.WithSessionCookie("__Host-session.id"))
}

// expectPanicNaming fails unless build panics with a message naming name.
func expectPanicNaming(t *testing.T, name string, build func()) {
	t.Helper()
	defer func() {
		msg, _ := recover().(string)
		if !strings.Contains(msg, name) {
			t.Fatalf("%s: panicked with %q, want a message naming it", name, msg)
		}
	}()
	build()
}
