package claimd_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"claimd.dev/go/claimd"
	"claimd.dev/go/claimd/claimdv1"
)

func TestClosingTheClientEndsTheHeartbeatGoroutineOfEveryLease(t *testing.T) {
	for _, env := range []string{"CLAIMD_EMBEDDED_ADDR", "CLAIMD_POSTGRES_ADDR"} {
		t.Run(env, func(t *testing.T) {
			c := dial(t, envOf(t, env))
			fp := claimd.Fingerprint([]byte("body"))
			var leases []*claimd.Lease
			for range 3 {
				won := mustClaim(t, c, uniqueKey(t), fp, claimd.DecisionClaimed,
					claimd.WithLease(30*time.Second), claimd.WithHeartbeatInterval(50*time.Millisecond))
				leases = append(leases, won.Lease)
			}
			time.Sleep(200 * time.Millisecond) // a few beats go through
			var beating []<-chan struct{}
			for _, l := range leases {
				done := claimd.HeartbeatDone(l)
				if done == nil {
					t.Fatal("a claimed lease is not heartbeating")
				}
				beating = append(beating, done)
			}
			if err := c.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			for i, done := range beating {
				select {
				case <-done:
				case <-time.After(3 * time.Second):
					t.Fatalf("lease %d still heartbeats 3 s after the client closed", i)
				}
				select {
				case <-leases[i].Lost():
					t.Fatalf("lease %d reports Lost after its client closed: nobody took it over", i)
				default:
				}
			}
		})
	}
}

func TestACheckpointRacingACompleteNeverReportsTheSettledLeaseLost(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		fp := claimd.Fingerprint([]byte("body"))
		for i := range 15 {
			won := mustClaim(t, c, uniqueKey(t), fp, claimd.DecisionClaimed,
				claimd.WithLease(30*time.Second), claimd.WithHeartbeatInterval(time.Minute))
			var wg sync.WaitGroup
			var checkpointErr, completeErr error
			start := make(chan struct{})
			wg.Go(func() {
				<-start
				checkpointErr = won.Lease.Checkpoint(ctxOf(t), []byte("progress"))
			})
			wg.Go(func() {
				<-start
				_, completeErr = won.Lease.Complete(ctxOf(t), []byte("done"))
			})
			close(start)
			wg.Wait()
			if completeErr != nil {
				t.Fatalf("round %d: Complete: %v", i, completeErr)
			}
			if checkpointErr != nil && !errors.Is(checkpointErr, claimd.ErrSettled) {
				t.Fatalf("round %d: Checkpoint racing Complete: %v, want nil or ErrSettled", i, checkpointErr)
			}
			select {
			case <-won.Lease.Lost():
				t.Fatalf("round %d: Lost() closed on a completed lease", i)
			default:
			}
			if got := won.Lease.Receipt().GetState(); got != claimdv1.State_STATE_COMPLETED {
				t.Fatalf("round %d: the receipt after Complete is %v", i, got)
			}
		}
	})
}

func TestACheckpointAfterASettleIsErrSettledWithoutCallingClaimd(t *testing.T) {
	c := dial(t, envOf(t, "CLAIMD_EMBEDDED_ADDR"))
	won := mustClaim(t, c, uniqueKey(t), claimd.Fingerprint([]byte("body")), claimd.DecisionClaimed)
	if _, err := won.Lease.Complete(ctxOf(t), []byte("done")); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	_ = c.Close() // a Checkpoint that called claimd would fail with CANCELED
	if err := won.Lease.Checkpoint(ctxOf(t), []byte("late")); !errors.Is(err, claimd.ErrSettled) {
		t.Fatalf("Checkpoint after Complete: %v", err)
	}
}
