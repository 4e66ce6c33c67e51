// Package claimdhttp is the Idempotency-Key HTTP header (IETF HTTPAPI draft "The
// Idempotency-Key HTTP Header Field") for net/http, on claimd: a middleware for any
// router built on http.Handler (the standard mux, chi, gorilla).
//
//	mux.Handle("POST /orders", claimdhttp.Idempotency(client, "orders-api",
//		claimdhttp.WithClientOf(tenantOf))(http.HandlerFunc(createOrder)))
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
// back (Retry), then the panic goes on. The handler's request context is canceled when
// claimd reports its lease lost (somebody else took the request over).
//
// Nothing here logs; no problem body carries a key, a token or a body.
package claimdhttp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"

	"claimd.dev/go/claimd"
)

// Idempotency returns the Idempotency-Key middleware claiming requests in namespace.
func Idempotency(client *claimd.Client, namespace string, opts ...Option) func(http.Handler) http.Handler {
	cfg := defaults()
	for _, o := range opts {
		o(&cfg)
	}
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
	if err != nil {
		m.problem(w, 400, "idempotency-body-unreadable", "The request body could not be read",
			"The request body ended early; send the request again.")
		return
	}
	if int64(len(body)) > m.maxBodyBytes {
		m.problem(w, 413, "idempotency-body-too-large", "Request body too large",
			"The request body is larger than this operation accepts.")
		return
	}
	_ = r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	uri := r.RequestURI
	if uri == "" {
		uri = r.URL.RequestURI()
	}
	fingerprint := Fingerprint(r.Method, uri, body, r.Header.Get("Content-Type"), m.canonicalJSON)
	m.decide(w, r, next, ClaimKey(m.clientOf(r), key), fingerprint, body)
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
				case <-r.Context().Done():
					return
				case <-time.After(max(due, 20*time.Millisecond)):
				}
				continue
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

// storeError answers a failed Claim: 503 when claimd is busy or away, else 500.
func (m *middleware) storeError(w http.ResponseWriter, err error) {
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

// retryOptions are the options of a give-back.
func (m *middleware) retryOptions() []claimd.RetryOption {
	if m.retryAfter > 0 {
		return []claimd.RetryOption{claimd.RetryAfter(m.retryAfter)}
	}
	return nil
}

// run runs the handler for a claimed request, stores what it answered and sends it.
func (m *middleware) run(w http.ResponseWriter, r *http.Request, next http.Handler, lease *claimd.Lease) {
	defer func() { _ = lease.Close() }() // gives the key back when it was not settled
	settleCtx := context.WithoutCancel(r.Context())
	before := w.Header().Clone()
	rec := &recorder{header: w.Header().Clone()}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-lease.Lost(): // somebody else took the request over: stop working
			cancel()
		case <-ctx.Done():
		}
	}()
	answered := false
	defer func() {
		if !answered {
			// The handler panicked before answering: give the key back, let the panic go on.
			_, _ = lease.Retry(settleCtx, errors.New("handler panicked"), m.retryOptions()...)
		}
	}()
	next.ServeHTTP(rec, r.WithContext(ctx))
	answered = true
	status, body := rec.result()
	if m.retryServerErrors && status >= 500 {
		_, _ = lease.Retry(settleCtx, errors.New("HTTP "+strconv.Itoa(status)), m.retryOptions()...)
	} else {
		headers := storedHeaders(rec.header, before)
		stored := encodeResponse(status, headers, body, 0)
		if len(stored) > m.maxResponseBytes {
			// Too large to keep: the key is settled all the same, with status and headers.
			stored = encodeResponse(status, headers, nil, uint64(len(body)))
			if len(stored) > m.maxResponseBytes {
				stored = encodeResponse(status, nil, nil, uint64(len(body)))
			}
		}
		// The handler ran: its answer is real, so the client gets it even when settling failed.
		_, _ = lease.Complete(settleCtx, stored)
	}
	dst := w.Header()
	for name := range dst {
		delete(dst, name)
	}
	for name, values := range rec.header {
		dst[name] = values
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// bodyHeaders are not replayed with a response whose body was not stored.
var bodyHeaders = map[string]bool{"content-type": true, "content-length": true, "content-encoding": true}

// replay sends a stored response, marked as a replay.
func (m *middleware) replay(w http.ResponseWriter, rec record) {
	notStored := rec.body == nil
	values := http.Header{}
	for _, h := range rec.headers {
		if !notStored || !bodyHeaders[h.name] {
			values.Add(h.name, h.value)
		}
	}
	for name, list := range values {
		w.Header()[name] = list // replaces what was set before, as Node's setHeader does
	}
	w.Header().Set(Replayed, "true")
	if !notStored {
		w.WriteHeader(rec.status)
		_, _ = w.Write(rec.body)
		return
	}
	m.problem(w, rec.status, "idempotency-response-not-stored", "Response not stored",
		"This request was handled; its response body ("+itoa(rec.bytes)+" bytes) was too large to "+
			"keep, so only its status and headers are replayed.")
}
