package claimd

import (
	"context"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"claimd.dev/go/claimd/claimdv1"
)

// Complete marks the work done and stores response (at most 64 KiB) for duplicates to
// replay. It is tried again (twice) when claimd is UNAVAILABLE, each try with its own call
// timeout: Complete with the same token is idempotent. A second settle returns ErrSettled,
// one after Lost ErrLost.
func (l *Lease) Complete(ctx context.Context, response []byte) (*claimdv1.Receipt, error) {
	req := &claimdv1.CompleteRequest{Namespace: l.namespace, Key: l.key, ClaimToken: l.token,
		Response: response}
	return l.settle(ctx, func(ctx context.Context) (*claimdv1.Receipt, error) {
		for attempt := 1; ; attempt++ {
			var resp *claimdv1.CompleteResponse
			err := l.client.call(ctx, "Complete", 0, func(ctx context.Context) (err error) {
				resp, err = l.client.raw.Complete(ctx, req)
				return err
			})
			if err == nil || codeOf(err) != codes.Unavailable || attempt >= 3 {
				return resp.GetReceipt(), err
			}
			select {
			case <-ctx.Done():
				return nil, err
			case <-time.After(time.Duration(100<<attempt) * time.Millisecond):
			}
		}
	})
}

type retryConfig struct {
	after   time.Duration
	noCount bool
}

// RetryOption configures Retry.
type RetryOption func(*retryConfig)

// RetryAfter schedules the retry d from now (1 s to 24 h) instead of the namespace's
// exponential backoff.
func RetryAfter(d time.Duration) RetryOption { return func(c *retryConfig) { c.after = d } }

// DontCountAttempt leaves the attempt budget as it is (the platform said "wait", e.g.
// HTTP 429); the attempt number still rises at the next claim.
func DontCountAttempt() RetryOption { return func(c *retryConfig) { c.noCount = true } }

// Retry gives the work back to be claimed again after a backoff. The receipt keeps
// err.Error() (cut to 4 KiB) as its last_error, readable by anyone who can read the
// receipt: pass an error whose text holds no secret (nil sends an empty text).
func (l *Lease) Retry(ctx context.Context, err error, opts ...RetryOption) (*claimdv1.Receipt, error) {
	var cfg retryConfig
	for _, o := range opts {
		o(&cfg)
	}
	req := &claimdv1.RetryRequest{Namespace: l.namespace, Key: l.key, ClaimToken: l.token,
		Error: errorText(err)}
	if cfg.after > 0 {
		req.RetryAfter = durationpb.New(cfg.after)
	}
	if cfg.noCount {
		req.CountAttempt = proto.Bool(false)
	}
	return l.settle(ctx, func(ctx context.Context) (resp *claimdv1.Receipt, err error) {
		err = l.client.call(ctx, "Retry", 0, func(ctx context.Context) error {
			r, err := l.client.raw.Retry(ctx, req)
			resp = r.GetReceipt()
			return err
		})
		return resp, err
	})
}

// Quarantine moves the receipt to the dead letter state at once (a permanent failure),
// keeping err.Error() (cut to 4 KiB) as its last_error: pass an error whose text holds no
// secret.
func (l *Lease) Quarantine(ctx context.Context, err error) (*claimdv1.Receipt, error) {
	req := &claimdv1.QuarantineRequest{Namespace: l.namespace, Key: l.key, ClaimToken: l.token,
		Error: errorText(err)}
	return l.settle(ctx, func(ctx context.Context) (resp *claimdv1.Receipt, err error) {
		err = l.client.call(ctx, "Quarantine", 0, func(ctx context.Context) error {
			r, err := l.client.raw.Quarantine(ctx, req)
			resp = r.GetReceipt()
			return err
		})
		return resp, err
	})
}

// Close stops the heartbeats and, when the lease was neither settled nor lost, gives the
// claim back with Retry (so the next Claim may take it after the backoff). Closing again
// does nothing.
func (l *Lease) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	l.stopBeats()
	_, err := l.Retry(context.Background(), errorString(closedText))
	if err == ErrSettled || err == ErrLost {
		return nil
	}
	return err
}

type errorString string

func (e errorString) Error() string { return string(e) }

// errorText is err's text cut to maxErrorBytes on a character boundary.
func errorText(err error) string {
	if err == nil {
		return ""
	}
	text := err.Error()
	if len(text) <= maxErrorBytes {
		return text
	}
	cut := maxErrorBytes
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut]
}
