package claimd_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"claimd.dev/go/claimd"
	"claimd.dev/go/claimd/claimdv1"
)

func TestVersionFollowsTheProtoVersion(t *testing.T) {
	raw, err := os.ReadFile("../../proto/VERSION")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(raw)); got != claimd.Version {
		t.Fatalf("Version is %q, proto/VERSION is %q", claimd.Version, got)
	}
}

func TestTheCommittedGeneratedCodeMatchesTheProto(t *testing.T) {
	cmd := exec.Command("go", "run", ".", "-check")
	cmd.Dir = "internal/gen"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run . -check in internal/gen: %v\n%s", err, out)
	}
}

func TestAFirstClaimIsClaimedAndADuplicateIsInFlight(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		key, fp := uniqueKey(t), claimd.Fingerprint([]byte("body"))
		won := mustClaim(t, c, key, fp, claimd.DecisionClaimed, claimd.WithLease(30*time.Second))
		if won.Lease.Attempt() != 1 || won.Receipt.GetState() != claimdv1.State_STATE_PROCESSING {
			t.Fatalf("won claim: attempt %d state %v", won.Lease.Attempt(), won.Receipt.GetState())
		}
		dup := mustClaim(t, c, key, fp, claimd.DecisionInFlight)
		if dup.Receipt.GetLeaseExpiresAt() == nil {
			t.Fatal("IN_FLIGHT without lease_expires_at")
		}
		if claimd.DecisionInFlight.String() != "DECISION_IN_FLIGHT" {
			t.Fatalf("Decision.String() = %q", claimd.DecisionInFlight.String())
		}
	})
}

func TestACompletedClaimReplaysItsStoredResponse(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		key, fp := uniqueKey(t), claimd.Fingerprint([]byte("body"))
		won := mustClaim(t, c, key, fp, claimd.DecisionClaimed)
		done, err := won.Lease.Complete(ctxOf(t), []byte("the reply"))
		if err != nil || done.GetState() != claimdv1.State_STATE_COMPLETED {
			t.Fatalf("Complete: %v %v", done, err)
		}
		dup := mustClaim(t, c, key, fp, claimd.DecisionCompleted)
		if !bytes.Equal(dup.Receipt.GetResponse(), []byte("the reply")) {
			t.Fatalf("replayed %q", dup.Receipt.GetResponse())
		}
	})
}

func TestARetriedClaimIsRetryScheduledUntilItIsDue(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		key, fp := uniqueKey(t), claimd.Fingerprint([]byte("body"))
		won := mustClaim(t, c, key, fp, claimd.DecisionClaimed)
		r, err := won.Lease.Retry(ctxOf(t), errors.New("downstream timed out"),
			claimd.RetryAfter(time.Minute), claimd.DontCountAttempt())
		if err != nil || r.GetState() != claimdv1.State_STATE_RETRY_WAIT {
			t.Fatalf("Retry: %v %v", r, err)
		}
		dup := mustClaim(t, c, key, fp, claimd.DecisionRetryScheduled)
		if dup.Receipt.GetLastError() != "downstream timed out" || dup.Receipt.GetNextAttemptAt() == nil {
			t.Fatalf("receipt %v", dup.Receipt)
		}
	})
}

func TestAQuarantinedClaimIsQuarantined(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		key, fp := uniqueKey(t), claimd.Fingerprint([]byte("body"))
		won := mustClaim(t, c, key, fp, claimd.DecisionClaimed)
		if _, err := won.Lease.Quarantine(ctxOf(t), errors.New("poison event")); err != nil {
			t.Fatalf("Quarantine: %v", err)
		}
		dup := mustClaim(t, c, key, fp, claimd.DecisionQuarantined)
		if dup.Receipt.GetLastError() != "poison event" {
			t.Fatalf("last_error %q", dup.Receipt.GetLastError())
		}
	})
}

func TestTheSameKeyWithAnotherFingerprintIsAConflict(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		key := uniqueKey(t)
		mustClaim(t, c, key, claimd.Fingerprint([]byte("one")), claimd.DecisionClaimed)
		mustClaim(t, c, key, claimd.Fingerprint([]byte("two")), claimd.DecisionConflict)
	})
}

func TestAWaitingClaimGetsTheResponseOnceTheHolderCompletes(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		key, fp := uniqueKey(t), claimd.Fingerprint([]byte("body"))
		won := mustClaim(t, c, key, fp, claimd.DecisionClaimed, claimd.WithLease(30*time.Second))
		waited := make(chan *claimd.Outcome, 1)
		go func() {
			out, err := c.Claim(ctxOf(t), namespace, key, fp, claimd.WithWait(20*time.Second))
			if err != nil {
				t.Errorf("waiting Claim: %v", err)
			}
			waited <- out
		}()
		time.Sleep(300 * time.Millisecond)
		if _, err := won.Lease.Complete(ctxOf(t), []byte("done")); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		out := <-waited
		if out == nil || out.Decision != claimd.DecisionCompleted || string(out.Receipt.GetResponse()) != "done" {
			t.Fatalf("the waiting Claim got %v", out)
		}
	})
}
