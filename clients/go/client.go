package claimd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	"claimd.dev/go/claimd/claimdv1"
)

// DefaultCallTimeout is the deadline of each call unless WithCallTimeout says otherwise.
const DefaultCallTimeout = 5 * time.Second

// MaxWait is the longest wait claimd allows a Claim.
const MaxWait = 60 * time.Second

// Client is a connection to claimd. It is safe for concurrent use; Close it when done.
type Client struct {
	conn        *grpc.ClientConn
	raw         claimdv1.ClaimServiceClient
	callTimeout time.Duration

	closeOnce sync.Once
	closed    chan struct{} // closed by Close: every lease's heartbeats stop
}

type config struct {
	apiKey      string
	tls         *tls.Config
	callTimeout time.Duration
	err         error
}

// Option configures New.
type Option func(*config)

// WithAPIKey sends key as `authorization: Bearer <key>` metadata with every call.
func WithAPIKey(key string) Option { return func(c *config) { c.apiKey = key } }

// WithTLS connects with TLS configured by cfg (plaintext is the default).
func WithTLS(cfg *tls.Config) Option { return func(c *config) { c.tls = cfg } }

// WithTLSFiles connects with TLS trusting the PEM CA certificates in caFile and, when
// certFile and keyFile are not empty, presenting that client certificate (mutual TLS).
// An empty caFile trusts the system's roots.
func WithTLSFiles(caFile, certFile, keyFile string) Option {
	return func(c *config) {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if caFile != "" {
			pem, err := os.ReadFile(caFile)
			if err != nil {
				c.err = fmt.Errorf("claimd: reading the CA file: %w", err)
				return
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				c.err = errors.New("claimd: the CA file holds no PEM certificate")
				return
			}
			cfg.RootCAs = pool
		}
		if certFile != "" || keyFile != "" {
			cert, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				c.err = fmt.Errorf("claimd: loading the client certificate: %w", err)
				return
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		c.tls = cfg
	}
}

// WithCallTimeout sets the deadline of each call (DefaultCallTimeout unless set). A Claim
// with a wait gets the wait on top of it.
func WithCallTimeout(d time.Duration) Option { return func(c *config) { c.callTimeout = d } }

// New returns a client of the claimd at target ("host:port", or any grpc.NewClient
// target). It does not connect until the first call.
func New(target string, opts ...Option) (*Client, error) {
	cfg := config{callTimeout: DefaultCallTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.err != nil {
		return nil, cfg.err
	}
	if cfg.callTimeout <= 0 {
		return nil, errors.New("claimd: the call timeout must be positive")
	}
	creds := insecure.NewCredentials()
	if cfg.tls != nil {
		creds = credentials.NewTLS(cfg.tls)
	}
	dial := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if cfg.apiKey != "" {
		bearer := "Bearer " + cfg.apiKey
		dial = append(dial, grpc.WithUnaryInterceptor(func(ctx context.Context, method string,
			req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, o ...grpc.CallOption,
		) error {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", bearer)
			return invoker(ctx, method, req, reply, cc, o...)
		}))
	}
	conn, err := grpc.NewClient(target, dial...)
	if err != nil {
		return nil, fmt.Errorf("claimd: %w", err)
	}
	return &Client{conn: conn, raw: claimdv1.NewClaimServiceClient(conn), callTimeout: cfg.callTimeout,
		closed: make(chan struct{})}, nil
}

// Close closes the connection. Leases of this client stop working: their heartbeat
// goroutines end (their Lost channels stay open: nobody took the work over). Closing
// again returns the connection's error and does nothing else.
func (c *Client) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.conn.Close()
}

// Raw returns the generated gRPC client on this client's connection (with its API key),
// for the RPCs this package does not wrap (Get, List, ListOrphaned, Redrive). Its errors
// are plain gRPC status errors.
func (c *Client) Raw() claimdv1.ClaimServiceClient { return c.raw }

// isClosed reports whether Close was called.
func (c *Client) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// call runs f with the call timeout (plus extra) and wraps its error.
func (c *Client) call(ctx context.Context, op string, extra time.Duration, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout+extra)
	defer cancel()
	return wrapError(op, f(ctx))
}

type claimConfig struct {
	lease     time.Duration
	wait      time.Duration
	payload   []byte
	delivery  uint32
	heartbeat time.Duration
}

// ClaimOption configures a Claim.
type ClaimOption func(*claimConfig)

// WithLease asks for a lease of d (1 s to 24 h) instead of the namespace's default; the
// heartbeats ask for it again.
func WithLease(d time.Duration) ClaimOption { return func(c *claimConfig) { c.lease = d } }

// WithWait makes an IN_FLIGHT answer wait up to d (at most MaxWait) in claimd for the
// holder to settle; the call's deadline gets d on top of the call timeout.
func WithWait(d time.Duration) ClaimOption { return func(c *claimConfig) { c.wait = d } }

// WithRecoveryPayload keeps payload (at most 64 KiB) with the receipt for whoever takes
// the work over.
func WithRecoveryPayload(payload []byte) ClaimOption {
	return func(c *claimConfig) { c.payload = payload }
}

// WithDeliveryAttempt passes the platform's own retry number (a hint for metrics only).
func WithDeliveryAttempt(n uint32) ClaimOption { return func(c *claimConfig) { c.delivery = n } }

// WithHeartbeatInterval sets how often the lease heartbeats (default: a third of the lease).
func WithHeartbeatInterval(d time.Duration) ClaimOption {
	return func(c *claimConfig) { c.heartbeat = d }
}

// Claim asks whether the caller may do the work for the event key in namespace. When the
// decision is DecisionClaimed, the Outcome's Lease is heartbeating: settle it, and Close it
// (defer lease.Close()).
func (c *Client) Claim(ctx context.Context, namespace, key string, fingerprint []byte,
	opts ...ClaimOption,
) (*Outcome, error) {
	var cfg claimConfig
	for _, o := range opts {
		o(&cfg)
	}
	req := &claimdv1.ClaimRequest{
		Namespace:       namespace,
		Key:             key,
		Fingerprint:     fingerprint,
		RecoveryPayload: cfg.payload,
		DeliveryAttempt: cfg.delivery,
	}
	if cfg.lease > 0 {
		req.LeaseTtl = durationpb.New(cfg.lease)
	}
	if cfg.wait > 0 {
		req.Wait = durationpb.New(cfg.wait)
	}
	var resp *claimdv1.ClaimResponse
	err := c.call(ctx, "Claim", max(cfg.wait, 0), func(ctx context.Context) (err error) {
		resp, err = c.raw.Claim(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := &Outcome{Decision: Decision(resp.GetDecision()), Receipt: resp.GetReceipt()}
	if out.Decision == DecisionClaimed {
		lease := cfg.lease
		if lease <= 0 {
			lease = leaseOf(out.Receipt)
		}
		interval := cfg.heartbeat
		if interval <= 0 {
			interval = max(lease/3, 10*time.Millisecond)
		}
		out.Lease = newLease(c, namespace, key, resp.GetClaimToken(), cfg.lease, interval, out.Receipt)
	}
	return out, nil
}

// leaseOf is the lease a claim granted on claimd's clock; 30 s if it cannot tell.
func leaseOf(r *claimdv1.Receipt) time.Duration {
	if r.GetLeaseExpiresAt() == nil || r.GetUpdatedAt() == nil {
		return 30 * time.Second
	}
	d := r.GetLeaseExpiresAt().AsTime().Sub(r.GetUpdatedAt().AsTime())
	if d <= 0 {
		return 30 * time.Second
	}
	return d
}
