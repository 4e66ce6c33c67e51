package claimdhttp

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"

	"claimd.dev/go/claimd"
)

// run runs the handler for a claimed request, stores what it answered and sends it.
func (m *middleware) run(w http.ResponseWriter, r *http.Request, next http.Handler, lease *claimd.Lease) {
	defer func() { _ = lease.Close() }() // gives the key back when it was not settled
	settleCtx := context.WithoutCancel(r.Context())
	before := w.Header().Clone()
	rec := &recorder{w: w, header: w.Header().Clone()}
	// The client going away does not cancel the handler: its answer is stored for the
	// client's retry (a failure it caused would be stored and replayed for good). A lost
	// lease does: somebody else took the request over.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	go func() {
		select {
		case <-lease.Lost():
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
	status, header, body := rec.result()
	if m.retryServerErrors && status >= 500 {
		_, _ = lease.Retry(settleCtx, errors.New("HTTP "+strconv.Itoa(status)), m.retryOptions()...)
	} else {
		headers := storedHeaders(header, before)
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
	for name, values := range header {
		name = http.CanonicalHeaderKey(name) // net/http knows a header by its canonical key only
		dst[name] = append(dst[name], values...)
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// bodyHeaders are not replayed with a response whose body was not stored.
var bodyHeaders = map[string]bool{"content-type": true, "content-length": true, "content-encoding": true}

// replay sends a stored response, marked as a replay.
func (m *middleware) replay(w http.ResponseWriter, rec record) {
	notStored := rec.body == nil
	var connection []string
	for _, h := range rec.headers {
		if h.name == "connection" {
			connection = append(connection, h.value)
		}
	}
	hop := connectionNamed(connection)
	values := http.Header{}
	for _, h := range rec.headers {
		// What this package never stores is not replayed either, whoever stored it.
		if !dropped(h.name, hop) && (!notStored || !bodyHeaders[h.name]) {
			// Stored names are lowercase; net/http knows a header by its canonical key only.
			name := http.CanonicalHeaderKey(h.name)
			values[name] = append(values[name], h.value)
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

// recorder holds back everything a handler writes. The headers are those at WriteHeader
// (later changes are ignored, as net/http ignores them); a status outside 100 to 999
// (which net/http panics on) is a 500; informational (1xx) statuses are not kept.
type recorder struct {
	w      http.ResponseWriter // the real writer, for http.ResponseController
	header http.Header
	sent   http.Header // header as of WriteHeader
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status != 0 || (status >= 100 && status < 200) {
		return
	}
	if status < 100 || status > 999 {
		status = http.StatusInternalServerError
	}
	r.status = status
	r.sent = r.header.Clone()
}

func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(p)
}

// Flush does nothing: the response is sent once it is stored.
func (r *recorder) Flush() {}

// Unwrap returns the real ResponseWriter, so that http.ResponseController reaches it (to
// set deadlines, say).
func (r *recorder) Unwrap() http.ResponseWriter { return r.w }

// result is the status (200 when none was written), headers and body.
func (r *recorder) result() (int, http.Header, []byte) {
	if r.status == 0 {
		return http.StatusOK, r.header, r.body.Bytes()
	}
	return r.status, r.sent, r.body.Bytes()
}
