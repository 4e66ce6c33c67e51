package claimd

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"claimd.dev/go/claimd/claimdv1"
)

// maxErrorBytes is the longest error text sent to Retry or Quarantine.
const maxErrorBytes = 4096

// closedText is the error text of a lease given back by Close.
const closedText = "claimd: lease closed without being settled"

// Lease is a won claim. It heartbeats in its own goroutine until it is settled (Complete,
// Retry or Quarantine, exactly once), lost, or closed. Close it when done: `defer
// lease.Close()` gives the claim back with Retry unless it was settled or lost.
//
// A Lease prints (String, %v, %#v) without its claim token.
type Lease struct {
	client    *Client
	namespace string
	key       string
	token     string
	ttl       *durationpb.Duration // nil: the namespace's default
	interval  time.Duration

	settleMu sync.Mutex // one settle at a time
	mu       sync.Mutex
	receipt  *claimdv1.Receipt
	settled  bool
	closed   bool
	stop     context.CancelFunc
	beating  chan struct{} // closed when the heartbeat goroutine ends

	lost     chan struct{}
	lostOnce sync.Once
}

func newLease(c *Client, namespace, key, token string, lease, interval time.Duration,
	receipt *claimdv1.Receipt,
) *Lease {
	l := &Lease{client: c, namespace: namespace, key: key, token: token, interval: interval,
		receipt: receipt, lost: make(chan struct{})}
	if lease > 0 {
		l.ttl = durationpb.New(lease)
	}
	l.mu.Lock()
	l.startLocked()
	l.mu.Unlock()
	return l
}

// Lost is closed when claimd answers a Heartbeat, Checkpoint or settle with ABORTED,
// FAILED_PRECONDITION or NOT_FOUND: the claim token is no longer current (somebody took
// the work over). Stop working when it closes. Other heartbeat failures (UNAVAILABLE, a
// deadline) are tried again at the next beat.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Receipt returns the receipt as of the last answer about this lease.
func (l *Lease) Receipt() *claimdv1.Receipt {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.receipt
}

// Attempt returns the attempt number of this claim, a fencing number for downstream
// systems.
func (l *Lease) Attempt() uint32 { return l.Receipt().GetAttempt() }

// Namespace returns the receipt's namespace.
func (l *Lease) Namespace() string { return l.namespace }

// Key returns the receipt's key.
func (l *Lease) Key() string { return l.key }

// String describes the lease without its claim token.
func (l *Lease) String() string {
	return fmt.Sprintf("claimd.Lease{namespace: %q, key: %q, attempt: %d}", l.namespace, l.key, l.Attempt())
}

// GoString is String: the token never prints.
func (l *Lease) GoString() string { return l.String() }

// Format prints String for every verb, so no verb prints the token.
func (l *Lease) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(l.String())) }

func (l *Lease) isLost() bool {
	select {
	case <-l.lost:
		return true
	default:
		return false
	}
}

func (l *Lease) markLost() { l.lostOnce.Do(func() { close(l.lost) }) }

// note records an answer's receipt, or marks the lease lost for a lost code.
func (l *Lease) note(receipt *claimdv1.Receipt, err error) {
	if err != nil {
		if isLostCode(codeOf(err)) {
			l.markLost()
		}
		return
	}
	l.mu.Lock()
	l.receipt = receipt
	l.mu.Unlock()
}

func (l *Lease) startLocked() {
	ctx, cancel := context.WithCancel(context.Background())
	l.stop = cancel
	done := make(chan struct{})
	l.beating = done
	go func() {
		defer close(done)
		ticker := time.NewTicker(l.interval)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-l.lost:
				return
			case <-l.client.closed: // the connection is closing: every beat would fail
				return
			case <-ticker.C:
				receipt, err := l.heartbeat(ctx, nil)
				if ctx.Err() != nil || l.client.isClosed() {
					return
				}
				l.note(receipt, err)
			}
		}
	}()
}

// stopBeats stops the heartbeats and waits for the goroutine to end.
func (l *Lease) stopBeats() {
	l.mu.Lock()
	stop, done := l.stop, l.beating
	l.stop, l.beating = nil, nil
	l.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

func (l *Lease) heartbeat(ctx context.Context, checkpoint []byte) (*claimdv1.Receipt, error) {
	req := &claimdv1.HeartbeatRequest{Namespace: l.namespace, Key: l.key, ClaimToken: l.token,
		LeaseTtl: l.ttl}
	if checkpoint != nil {
		req.Checkpoint = checkpoint
	}
	var resp *claimdv1.HeartbeatResponse
	err := l.client.call(ctx, "Heartbeat", 0, func(ctx context.Context) (err error) {
		resp, err = l.client.raw.Heartbeat(ctx, req)
		return err
	})
	return resp.GetReceipt(), err
}

// Checkpoint stores progress bytes (at most 64 KiB) with a Heartbeat; they survive
// retries and takeovers. It waits for a settle in progress (and a settle for it): after a
// settle it returns ErrSettled without calling claimd.
func (l *Lease) Checkpoint(ctx context.Context, checkpoint []byte) error {
	l.settleMu.Lock()
	defer l.settleMu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	if checkpoint == nil {
		checkpoint = []byte{}
	}
	receipt, err := l.heartbeat(ctx, checkpoint)
	l.note(receipt, err)
	return err
}

func (l *Lease) usable() error {
	l.mu.Lock()
	settled := l.settled
	l.mu.Unlock()
	if settled {
		return ErrSettled
	}
	if l.isLost() {
		return ErrLost
	}
	return nil
}

// settle runs one settling RPC exactly once: heartbeats stop for it and start again
// when it fails for another reason than a lost lease (so the caller may settle again).
// rpc gets ctx itself: it runs each call with the call timeout (l.client.call).
func (l *Lease) settle(ctx context.Context, rpc func(context.Context) (*claimdv1.Receipt, error),
) (*claimdv1.Receipt, error) {
	l.settleMu.Lock()
	defer l.settleMu.Unlock()
	if err := l.usable(); err != nil {
		return nil, err
	}
	l.stopBeats()
	receipt, err := rpc(ctx)
	l.note(receipt, err)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		l.settled = true
		return receipt, nil
	}
	if !l.isLost() && !l.closed {
		l.startLocked()
	}
	return nil, err
}
