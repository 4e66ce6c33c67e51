package claimdhttp_test

import (
	"encoding/hex"
	"net/http"
	"testing"

	"claimd.dev/go/claimd"
	"claimd.dev/go/claimd/claimdhttp"
)

// outer is middleware around the guard that sets headers before it, as a CORS or
// security-headers middleware would.
func outer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("X-Order", "outer")
		next.ServeHTTP(w, r)
	})
}

// expectOneValue fails unless the response has exactly one name header line, want.
func expectOneValue(t *testing.T, a answer, name, want string) {
	t.Helper()
	if got := a.header[name]; len(got) != 1 || got[0] != want {
		t.Fatalf("%s lines %q, want exactly [%q]; response %+v", name, got, want, a)
	}
}

func TestAReplayHasExactlyOneContentTypeAndReplacesHeadersSetBeforeIt(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		url, h := serveWrapped(t, c, slowRetries, outer, created)
		key := newKey()
		first := post(t, url+"/orders", `{"n":1}`, key)
		again := post(t, url+"/orders", `{"n":1}`, key)
		for _, a := range []answer{first, again} {
			expectOneValue(t, a, "Content-Type", "application/json")
			expectOneValue(t, a, "X-Order", "7")
		}
		if again.status != 201 || again.header.Get(claimdhttp.Replayed) != "true" || h.runs.Load() != 1 {
			t.Fatalf("again %+v, runs %d", again, h.runs.Load())
		}
	})
}

func TestAReplayOfANodeStoredResponseHasExactlyOneContentType(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		url, h := serveWrapped(t, c, slowRetries, outer, created)
		key := newKey()
		stored, _ := hex.DecodeString(nodeStored)
		settleDirectly(t, c, key, `{}`, func(l *claimd.Lease) error {
			_, err := l.Complete(t.Context(), stored)
			return err
		})
		a := post(t, url+"/orders", `{}`, key)
		expectOneValue(t, a, "Content-Type", "application/json")
		expectOneValue(t, a, "X-Order", "7")
		if a.status != 201 || a.body != `{"id":7}` || h.runs.Load() != 0 {
			t.Fatalf("%+v, runs %d", a, h.runs.Load())
		}
	})
}
