package claimd_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"claimd.dev/go/claimd"
	"claimd.dev/go/claimd/claimdv1"
)

func TestTheHeartbeatKeepsAShortLeaseAlivePastItsLength(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		key, fp := uniqueKey(t), claimd.Fingerprint([]byte("body"))
		won := mustClaim(t, c, key, fp, claimd.DecisionClaimed, claimd.WithLease(time.Second),
			claimd.WithHeartbeatInterval(250*time.Millisecond))
		time.Sleep(2500 * time.Millisecond)
		mustClaim(t, c, key, fp, claimd.DecisionInFlight)
		select {
		case <-won.Lease.Lost():
			t.Fatal("the heartbeating lease was lost")
		default:
		}
		if _, err := won.Lease.Complete(ctxOf(t), nil); err != nil {
			t.Fatalf("Complete: %v", err)
		}
	})
}

func TestATakeoverIsReportedThroughLost(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		key, fp := uniqueKey(t), claimd.Fingerprint([]byte("body"))
		first := mustClaim(t, c, key, fp, claimd.DecisionClaimed, claimd.WithLease(time.Second),
			claimd.WithHeartbeatInterval(2*time.Second))
		time.Sleep(1300 * time.Millisecond)
		second := mustClaim(t, c, key, fp, claimd.DecisionClaimed, claimd.WithLease(30*time.Second))
		if second.Lease.Attempt() != 2 {
			t.Fatalf("takeover attempt %d", second.Lease.Attempt())
		}
		select {
		case <-first.Lease.Lost():
		case <-time.After(10 * time.Second):
			t.Fatal("Lost() did not close after the takeover")
		}
		if _, err := first.Lease.Complete(ctxOf(t), []byte("late")); !errors.Is(err, claimd.ErrLost) {
			t.Fatalf("Complete after Lost: %v", err)
		}
		if _, err := second.Lease.Complete(ctxOf(t), []byte("mine")); err != nil {
			t.Fatalf("the new holder's Complete: %v", err)
		}
	})
}

func TestASettleOfALeaseTakenOverFailsAndReportsLost(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		key, fp := uniqueKey(t), claimd.Fingerprint([]byte("body"))
		first := mustClaim(t, c, key, fp, claimd.DecisionClaimed, claimd.WithLease(time.Second),
			claimd.WithHeartbeatInterval(time.Minute))
		time.Sleep(1300 * time.Millisecond)
		mustClaim(t, c, key, fp, claimd.DecisionClaimed)
		_, err := first.Lease.Complete(ctxOf(t), []byte("late"))
		var e *claimd.Error
		if !errors.As(err, &e) || (e.Code != codes.Aborted && e.Code != codes.FailedPrecondition &&
			e.Code != codes.NotFound) {
			t.Fatalf("Complete of a lease taken over: %v, want ABORTED, FAILED_PRECONDITION or NOT_FOUND", err)
		}
		if strings.Contains(err.Error(), claimd.TokenOf(first.Lease)) {
			t.Fatal("the error carries the token")
		}
		select {
		case <-first.Lease.Lost():
		default:
			t.Fatalf("Lost() is open after Complete answered %v", e.Code)
		}
	})
}

func TestALeaseSettlesOnlyOnce(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		key, fp := uniqueKey(t), claimd.Fingerprint([]byte("body"))
		won := mustClaim(t, c, key, fp, claimd.DecisionClaimed)
		if _, err := won.Lease.Complete(ctxOf(t), []byte("once")); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		// The client is closed: a second settle that called claimd would fail otherwise.
		_ = c.Close()
		if _, err := won.Lease.Complete(ctxOf(t), []byte("twice")); !errors.Is(err, claimd.ErrSettled) {
			t.Fatalf("second Complete: %v", err)
		}
		if _, err := won.Lease.Retry(ctxOf(t), errors.New("x")); !errors.Is(err, claimd.ErrSettled) {
			t.Fatalf("Retry after Complete: %v", err)
		}
		if _, err := won.Lease.Quarantine(ctxOf(t), errors.New("x")); !errors.Is(err, claimd.ErrSettled) {
			t.Fatalf("Quarantine after Complete: %v", err)
		}
		if err := won.Lease.Close(); err != nil {
			t.Fatalf("Close after Complete: %v", err)
		}
	})
}

func TestClosingAnUnsettledLeaseGivesTheClaimBack(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		key, fp := uniqueKey(t), claimd.Fingerprint([]byte("body"))
		won := mustClaim(t, c, key, fp, claimd.DecisionClaimed, claimd.WithLease(30*time.Second))
		if err := won.Lease.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		got, err := c.Raw().Get(ctxOf(t), &claimdv1.GetRequest{Namespace: namespace, Key: key})
		if err != nil || got.GetReceipt().GetState() != claimdv1.State_STATE_RETRY_WAIT {
			t.Fatalf("after Close: %v %v", got, err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			out, err := c.Claim(ctxOf(t), namespace, key, fp)
			if err != nil {
				t.Fatalf("Claim: %v", err)
			}
			if out.Decision == claimd.DecisionClaimed {
				if out.Lease.Attempt() != 2 {
					t.Fatalf("attempt %d after the give-back", out.Lease.Attempt())
				}
				_, _ = out.Lease.Complete(ctxOf(t), nil)
				return
			}
			if out.Decision != claimd.DecisionRetryScheduled || time.Now().After(deadline) {
				t.Fatalf("after the backoff: %v", out.Decision)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
}

func TestALeasePrintsWithoutItsToken(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		key := uniqueKey(t)
		won := mustClaim(t, c, key, claimd.Fingerprint([]byte("b")), claimd.DecisionClaimed)
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
			text := fmt.Sprintf(verb, won.Lease)
			if !strings.Contains(text, "claimd.Lease{") {
				t.Fatalf("%s printed %q", verb, text)
			}
		}
		text := fmt.Sprintf("%v %+v %#v", won, *won, won.Lease)
		if token := claimd.TokenOf(won.Lease); token == "" || strings.Contains(text, token) {
			t.Fatal("the token printed")
		}
	})
}
