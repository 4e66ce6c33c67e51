package claimd_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"claimd.dev/go/claimd"
)

// harness names what sets the environment the tests need.
const harness = "set by `cargo test --test it polyglot::clients_go`, which starts claimd"

// envOf returns an environment variable, failing the test when it is missing.
func envOf(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set: it is %s", name, harness)
	}
	return v
}

// onBothStores runs f against the embedded store's claimd and the PostgreSQL one.
func onBothStores(t *testing.T, f func(t *testing.T, c *claimd.Client)) {
	for _, store := range []struct{ name, env string }{
		{"embedded", "CLAIMD_EMBEDDED_ADDR"},
		{"postgres", "CLAIMD_POSTGRES_ADDR"},
	} {
		t.Run(store.name, func(t *testing.T) {
			t.Parallel()
			f(t, dial(t, envOf(t, store.env)))
		})
	}
}

// dial returns a client closed at the end of the test.
func dial(t *testing.T, addr string, opts ...claimd.Option) *claimd.Client {
	t.Helper()
	c, err := claimd.New(addr, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

var keys atomic.Int64

// uniqueKey returns a key no earlier run used.
func uniqueKey(t *testing.T) string {
	return fmt.Sprintf("%s-%d-%d", t.Name(), time.Now().UnixNano(), keys.Add(1))
}

// ctxOf returns a context ending with the test.
func ctxOf(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// mustClaim claims and fails the test on an error or another decision than want.
func mustClaim(t *testing.T, c *claimd.Client, key string, fp []byte, want claimd.Decision,
	opts ...claimd.ClaimOption,
) *claimd.Outcome {
	t.Helper()
	out, err := c.Claim(ctxOf(t), namespace, key, fp, opts...)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if out.Decision != want {
		t.Fatalf("Claim decided %v, want %v", out.Decision, want)
	}
	if (out.Lease != nil) != (want == claimd.DecisionClaimed) {
		t.Fatalf("Claim decided %v with lease %v", out.Decision, out.Lease)
	}
	if out.Lease != nil {
		t.Cleanup(func() { _ = out.Lease.Close() })
	}
	return out
}

// namespace is where the client tests claim (the default backoff, 0.5 to 1 s).
const namespace = "go-client-tests"
