package claimdhttp_test

import (
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"claimd.dev/go/claimd"
	"claimd.dev/go/claimd/claimdhttp"
)

// settleDirectly settles the claim the middleware makes for a POST /orders of body with
// key: through the client, as another package's middleware would.
func settleDirectly(t *testing.T, c *claimd.Client, key, body string, settle func(*claimd.Lease) error) {
	t.Helper()
	fp := claimdhttp.Fingerprint("POST", "/orders", []byte(body), "application/json", true)
	out, err := c.Claim(t.Context(), slowRetries, claimdhttp.ClaimKey(claimdhttp.Anonymous, key), fp,
		claimd.WithLease(30*time.Second))
	if err != nil || out.Decision != claimd.DecisionClaimed {
		t.Fatalf("Claim: %v %v", out, err)
	}
	defer out.Lease.Close()
	if err := settle(out.Lease); err != nil {
		t.Fatalf("settle: %v", err)
	}
}

func TestAResponseTheNodeOrPythonPackageStoredIsReplayed(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		url, h := serve(t, c, slowRetries, created)
		key := newKey()
		// The bytes the Node and Python packages' tests store (201, x-order: 7, {"id":7}).
		stored, _ := hex.DecodeString("49444b3200c90000020c636f6e74656e742d7479706500106170706c69636174696f6e2f6a736f6e07782d6f726465720001377b226964223a377d")
		settleDirectly(t, c, key, `{"b":1,"a":2}`, func(l *claimd.Lease) error {
			_, err := l.Complete(t.Context(), stored)
			return err
		})
		a := post(t, url+"/orders", `{"a":2, "b":1}`, key)
		if a.status != 201 || a.body != `{"id":7}` || a.header.Get("X-Order") != "7" ||
			a.header.Get(claimdhttp.Replayed) != "true" || h.runs.Load() != 0 {
			t.Fatalf("%+v, runs %d", a, h.runs.Load())
		}
	})
}

func TestAUsedUpKeyIs422(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		url, h := serve(t, c, slowRetries, created)
		quarantined, empty := newKey(), newKey()
		settleDirectly(t, c, quarantined, `{}`, func(l *claimd.Lease) error {
			_, err := l.Quarantine(t.Context(), errors.New("poison"))
			return err
		})
		settleDirectly(t, c, empty, `{}`, func(l *claimd.Lease) error {
			_, err := l.Complete(t.Context(), nil)
			return err
		})
		expectProblem(t, post(t, url+"/orders", `{}`, quarantined), 422, "idempotency-key-expired")
		expectProblem(t, post(t, url+"/orders", `{}`, empty), 422, "idempotency-key-expired")
		if h.runs.Load() != 0 {
			t.Fatal("the handler ran")
		}
	})
}
