// Package claimdhttp is the Idempotency-Key HTTP header (IETF HTTPAPI draft "The
// Idempotency-Key HTTP Header Field") for net/http, on claimd: a middleware for any
// router built on http.Handler: a wrapped handler on the standard mux, or chi's and
// gorilla/mux's r.Use, after the app's authentication middleware.
//
//	r.Use(authenticate) // the app's: verifies the token, puts its subject in the context
//	r.Use(claimdhttp.Idempotency(client, "orders-api",
//		claimdhttp.WithClientOf(func(r *http.Request) string { return userID(r.Context()) })))
//
// Keys are per client, so a stored response goes back only to the client that made it.
// The client is the authenticated identity (here the verified token's subject), never a
// header such as X-Tenant: any caller can set a header, and one who copied another's
// would be handed the other's stored response. Without WithClientOf it is DefaultClient's:
// a digest of the Authorization header, else of the WithSessionCookie cookie, else one
// shared Anonymous space. Set-Cookie and hop-by-hop headers are never stored.
//
// It follows the Node package's express middleware rule for rule, and stores responses
// in the same format, so the packages replay each other's. A request is claimed under
// its client and key (never its method or path); its fingerprint is its method, path
// with query and body (canonical JSON for JSON bodies), so the same key with another body
// or on another route is 422. The first request runs the handler; whatever response it
// produces (2xx, 4xx or 5xx) is stored with Complete, then sent, and every retry gets it
// replayed with `Idempotent-Replayed: true`: a handler that answered never runs again for
// that key. A response too large to store still settles the key: retries get its status
// and headers with a problem body saying so. Only a handler that panics gives the key
// back (Retry), then the panic goes on, its value unchanged. The handler's request context
// is not canceled when the client goes away (the handler's answer is stored for the
// client's retry); it is canceled when claimd reports the lease lost (somebody else took
// the request over) and when the handler returns. A Claim claimd refuses because the
// tenant is over a quota (a [claimd.QuotaError]) is 503 with Retry-After (the quota's delay
// in whole seconds, rounded up, at least 1), and the handler does not run.
//
// Nothing here logs; no problem body carries a key, a token or a body.
package claimdhttp

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"

	"claimd.dev/go/claimd"
)

// Idempotency returns the Idempotency-Key middleware claiming requests in namespace. It
// panics, naming the option, when client is nil, namespace empty or an option out of
// range: a programmer error, found when the middleware is built.
func Idempotency(client *claimd.Client, namespace string, opts ...Option) func(http.Handler) http.Handler {
	cfg := defaults()
	for _, o := range opts {
		o(&cfg)
	}
	cfg.validate(client, namespace)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			m := &middleware{config: cfg, client: client, namespace: namespace}
			m.serve(w, r, next)
		})
	}
}

type middleware struct {
	config
	client    *claimd.Client
	namespace string
}

func (m *middleware) problem(w http.ResponseWriter, status int, code, title, detail string, extra ...string) {
	sendProblem(w, m.docsURL, status, code, title, detail, extra...)
}

func (m *middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if !m.methods[r.Method] {
		next.ServeHTTP(w, r)
		return
	}
	values := r.Header.Values("Idempotency-Key")
	if len(values) == 0 {
		if !m.required {
			next.ServeHTTP(w, r)
			return
		}
		m.problem(w, 400, "idempotency-key-missing", "Idempotency-Key is missing",
			"This operation is idempotent and requires an Idempotency-Key header.")
		return
	}
	key, ok := "", false
	if len(values) == 1 {
		key, ok = ParseKey(values[0])
	}
	if !ok {
		m.problem(w, 400, "idempotency-key-invalid", "Idempotency-Key is invalid", keyRule)
		return
	}
	if r.Body == nil {
		r.Body = http.NoBody
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, m.maxBodyBytes+1))
	var limited *http.MaxBytesError // an http.MaxBytesReader of an outer middleware
	if errors.As(err, &limited) || int64(len(body)) > m.maxBodyBytes {
		m.problem(w, 413, "idempotency-body-too-large", "Request body too large",
			"The request body is larger than this operation accepts.")
		return
	}
	if err != nil {
		m.problem(w, 400, "idempotency-body-unreadable", "The request body could not be read",
			"The request body ended early; send the request again.")
		return
	}
	_ = r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	uri := r.RequestURI
	if uri == "" {
		uri = r.URL.RequestURI()
	}
	fingerprint := Fingerprint(r.Method, uri, body, r.Header.Get("Content-Type"), m.canonicalJSON)
	m.decide(w, r, next, ClaimKey(m.clientOfRequest(r), key), fingerprint, body)
}

func (m *middleware) decide(w http.ResponseWriter, r *http.Request, next http.Handler,
	claim string, fingerprint, body []byte,
) {
	started := time.Now()
	for {
		left := max(0, m.wait-time.Since(started))
		out, err := m.client.Claim(r.Context(), m.namespace, claim, fingerprint,
			claimd.WithLease(m.lease), claimd.WithWait(left))
		if err != nil {
			m.storeError(w, err)
			return
		}
		receipt := out.Receipt
		switch out.Decision {
		case claimd.DecisionClaimed:
			r.Body = io.NopCloser(bytes.NewReader(body))
			m.run(w, r, next, out.Lease)
			return
		case claimd.DecisionCompleted:
			if receipt.GetResponsePrunedAt() != nil || len(receipt.GetResponse()) == 0 {
				m.problem(w, 422, "idempotency-key-expired", "Idempotency-Key is used up",
					"This key was used and its response is no longer kept; use a new key.")
				return
			}
			rec, ok := decodeResponse(receipt.GetResponse())
			if !ok {
				m.problem(w, 500, "idempotency-response-unreadable", "Stored response cannot be replayed",
					"The stored response of this key is not one this middleware wrote.")
				return
			}
			m.replay(w, rec)
			return
		case claimd.DecisionInFlight:
			m.problem(w, 409, "idempotency-request-in-progress",
				"A request with this Idempotency-Key is still being processed",
				"Retry the request later; it will get the same response.",
				"Retry-After", secondsUntil(receipt.GetLeaseExpiresAt()))
			return
		case claimd.DecisionRetryScheduled:
			// The last attempt failed before answering; the next may start at next_attempt_at.
			due := max(0, time.Until(receipt.GetNextAttemptAt().AsTime()))
			if due <= m.wait-time.Since(started) {
				select {
				case <-r.Context().Done(): // answered below, in case anybody still listens
				case <-time.After(max(due, 20*time.Millisecond)):
					continue
				}
			}
			m.problem(w, 503, "idempotency-retry-scheduled", "The last attempt of this request failed",
				"Retry the request later to run it again.",
				"Retry-After", secondsUntil(receipt.GetNextAttemptAt()))
			return
		case claimd.DecisionQuarantined:
			m.problem(w, 422, "idempotency-key-expired", "Idempotency-Key is used up",
				"Every attempt of this request failed; use a new Idempotency-Key to try again.")
			return
		case claimd.DecisionConflict:
			m.problem(w, 422, "idempotency-key-reused", "Idempotency-Key is already used",
				"This key was used with a different request (another body, method or path); "+
					"use a new key for a new request.")
			return
		default:
			m.problem(w, 500, "idempotency-store-error", "Idempotency store error",
				"The idempotency store answered a decision this middleware does not know.")
			return
		}
	}
}

// storeError answers a failed Claim: 503 with the quota's Retry-After when a tenant quota
// refused it, 503 when claimd is busy or away, else 500. The handler does not run.
func (m *middleware) storeError(w http.ResponseWriter, err error) {
	var quota *claimd.QuotaError
	if errors.As(err, &quota) {
		m.problem(w, 503, "idempotency-quota-exceeded", "Idempotency store quota exceeded",
			"This service is over its quota of the idempotency store; retry after Retry-After seconds.",
			"Retry-After", retryAfterSeconds(quota.RetryAfter))
		return
	}
	code := codes.Unknown
	var e *claimd.Error
	if errors.As(err, &e) {
		code = e.Code
	}
	name := codeName(code.String())
	switch code {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted:
		m.problem(w, 503, "idempotency-store-unavailable", "Idempotency store unavailable",
			"The idempotency store could not be asked ("+name+"); retry later.", "Retry-After", "1")
	default:
		m.problem(w, 500, "idempotency-store-error", "Idempotency store error",
			"The idempotency store refused the request ("+name+").")
	}
}

// retryAfterSeconds is a quota's delay as Retry-After: whole seconds, rounded up, at least 1.
func retryAfterSeconds(d time.Duration) string {
	seconds := max(1, int64((d+time.Second-1)/time.Second))
	return strconv.FormatInt(seconds, 10)
}

// retryOptions are the options of a give-back.
func (m *middleware) retryOptions() []claimd.RetryOption {
	if m.retryAfter > 0 {
		return []claimd.RetryOption{claimd.RetryAfter(m.retryAfter)}
	}
	return nil
}
