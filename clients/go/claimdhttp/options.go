package claimdhttp

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"claimd.dev/go/claimd"
)

// DefaultMaxResponseBytes is claimd's limit for a stored response: the default and
// maximum of WithMaxResponseBytes.
const DefaultMaxResponseBytes = 65536

// DefaultMaxBodyBytes is the default of WithMaxBodyBytes.
const DefaultMaxBodyBytes = 1 << 20

// MaxWait is the longest wait claimd allows a Claim.
const MaxWait = 60 * time.Second

// DefaultRetryAfter is the default of WithRetryAfter, as the Node package's retryAfterMs.
const DefaultRetryAfter = time.Second

// The bounds claimd sets on a lease and on a retry delay.
const (
	minDelay = time.Second
	maxDelay = 24 * time.Hour
)

type config struct {
	methods           map[string]bool
	required          bool
	wait              time.Duration
	lease             time.Duration
	clientOf          func(*http.Request) string // nil: DefaultClient
	clientOfGiven     bool
	sessionCookie     string
	sessionCookieSet  bool
	maxBodyBytes      int64
	maxResponseBytes  int
	retryAfter        time.Duration
	retryServerErrors bool
	canonicalJSON     bool
	docsURL           string
}

func defaults() config {
	return config{
		methods:          map[string]bool{http.MethodPost: true, http.MethodPatch: true},
		required:         true,
		wait:             10 * time.Second,
		lease:            30 * time.Second,
		maxBodyBytes:     DefaultMaxBodyBytes,
		maxResponseBytes: DefaultMaxResponseBytes,
		retryAfter:       DefaultRetryAfter,
		canonicalJSON:    true,
	}
}

// validate panics naming the first invalid option: a programmer error, found when the
// middleware is built rather than at the first request (as the Node package throws).
func (c *config) validate(client *claimd.Client, namespace string) {
	fail := func(format string, args ...any) { panic(fmt.Sprintf("claimdhttp.Idempotency: "+format, args...)) }
	switch {
	case client == nil:
		fail("client must not be nil")
	case namespace == "":
		fail("namespace must not be empty")
	case c.wait < 0 || c.wait > MaxWait:
		fail("WithWait(%v) must be 0 to %v", c.wait, MaxWait)
	case c.lease < minDelay || c.lease > maxDelay:
		fail("WithLease(%v) must be %v to %v", c.lease, minDelay, maxDelay)
	case c.maxBodyBytes < 0:
		fail("WithMaxBodyBytes(%d) must not be negative", c.maxBodyBytes)
	case c.maxResponseBytes < 1 || c.maxResponseBytes > DefaultMaxResponseBytes:
		fail("WithMaxResponseBytes(%d) must be 1 to %d", c.maxResponseBytes, DefaultMaxResponseBytes)
	case c.retryAfter != 0 && (c.retryAfter < minDelay || c.retryAfter > maxDelay):
		fail("WithRetryAfter(%v) must be %v to %v (or 0: the namespace's backoff)", c.retryAfter, minDelay, maxDelay)
	case c.clientOfGiven && c.clientOf == nil:
		fail("WithClientOf must not be given nil")
	case c.sessionCookieSet && !validCookieName(c.sessionCookie):
		fail("WithSessionCookie(%q) must be a cookie name (a token: letters, digits, !#$%%&'*+-.^_`|~)", c.sessionCookie)
	case c.sessionCookieSet && c.clientOfGiven:
		fail("WithSessionCookie(%q) is not used with WithClientOf (the client function may call DefaultClient(r, %q))",
			c.sessionCookie, c.sessionCookie)
	}
}

// clientOfRequest is the client of a request: WithClientOf's, else DefaultClient's.
func (c *config) clientOfRequest(r *http.Request) string {
	if c.clientOfGiven {
		return c.clientOf(r)
	}
	return DefaultClient(r, c.sessionCookie)
}

// Option configures Idempotency. Idempotency panics, naming the option, when one is out
// of range.
type Option func(*config)

// WithMethods sets the methods the middleware applies to (default POST and PATCH);
// requests with other methods go straight to the handler.
func WithMethods(methods ...string) Option {
	return func(c *config) {
		c.methods = map[string]bool{}
		for _, m := range methods {
			c.methods[strings.ToUpper(m)] = true
		}
	}
}

// WithRequired(false) lets requests without an Idempotency-Key through to the handler
// (default: they get a 400).
func WithRequired(required bool) Option { return func(c *config) { c.required = required } }

// WithWait sets how long a request waits for another one with the same key to finish
// (default 10 s, 0 to MaxWait): used as the Claim's wait, and for a retry that comes due.
func WithWait(d time.Duration) Option { return func(c *config) { c.wait = d } }

// WithLease sets the lease of a claimed request (default 30 s, 1 s to 24 h); it is kept
// alive by heartbeats while the handler runs.
func WithLease(d time.Duration) Option { return func(c *config) { c.lease = d } }

// WithClientOf sets how the client of a request is told: keys are per client, and a
// stored response is replayed only to its own client. Return the authenticated identity
// (the user id your authentication middleware put in the request's context, a verified
// token's subject), never a header or field the caller chooses (X-Tenant): a caller who
// copies another's header and key would be handed the other's stored response. An empty
// client is "-". Without WithClientOf the client is DefaultClient's: a digest of the
// Authorization header, else of the WithSessionCookie cookie, else Anonymous.
func WithClientOf(f func(*http.Request) string) Option {
	return func(c *config) { c.clientOf, c.clientOfGiven = f, true }
}

// WithSessionCookie names the session cookie that scopes a request without an
// Authorization header (see DefaultClient): "cookie:" and the SHA-256 of its value. It
// must be a cookie name, and it is not used with WithClientOf (Idempotency panics).
func WithSessionCookie(name string) Option {
	return func(c *config) { c.sessionCookie, c.sessionCookieSet = name, true }
}

// WithMaxBodyBytes sets the largest request body read (default 1 MiB, not negative); a
// larger one gets a 413 problem.
func WithMaxBodyBytes(n int64) Option { return func(c *config) { c.maxBodyBytes = n } }

// WithMaxResponseBytes sets the largest stored response (1 to 65536, the default); a
// larger one settles the key with its status and headers only.
func WithMaxResponseBytes(n int) Option { return func(c *config) { c.maxResponseBytes = n } }

// WithRetryAfter sets when a key given back (a panicking handler, or a 5xx with
// WithRetryServerErrors) may run again: 1 s to 24 h (DefaultRetryAfter, 1 s, unless set),
// or 0 for the namespace's exponential backoff.
func WithRetryAfter(d time.Duration) Option { return func(c *config) { c.retryAfter = d } }

// WithRetryServerErrors(true) gives the key back when the handler answers 5xx, so a retry
// runs the handler again (default: a 5xx is stored and replayed like any response).
func WithRetryServerErrors(retry bool) Option {
	return func(c *config) { c.retryServerErrors = retry }
}

// WithCanonicalJSON(false) fingerprints JSON bodies by their raw bytes (default: by their
// canonical JSON, so whitespace and key order do not matter).
func WithCanonicalJSON(canonical bool) Option {
	return func(c *config) { c.canonicalJSON = canonical }
}

// WithDocsURL makes problem types `<url>#<code>` and adds a Link header to the page.
func WithDocsURL(url string) Option { return func(c *config) { c.docsURL = url } }
