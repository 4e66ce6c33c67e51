package claimd_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"claimd.dev/go/claimd"
	"claimd.dev/go/claimd/internal/testenv"
)

// envOf, onBothStores and dial are the shared test environment's (internal/testenv).
var (
	envOf        = testenv.Env
	onBothStores = testenv.OnBothStores
	dial         = testenv.Dial
)

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
