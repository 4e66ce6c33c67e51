package claimdhttp_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"claimd.dev/go/claimd"
	"claimd.dev/go/claimd/claimdhttp"
	"claimd.dev/go/claimd/internal/testenv"
)

// slowRetries has a 1-minute retry backoff on every test server: a key given back there
// does not come due during a test.
const slowRetries = "go-http-tests"

// fastRetries has the default backoff (0.5 to 1 s).
const fastRetries = "go-http-tests-fast"

// envOf and onBothStores are the shared test environment's (internal/testenv).
var (
	envOf        = testenv.Env
	onBothStores = testenv.OnBothStores
)

// counted is a handler that counts its runs.
type counted struct {
	runs atomic.Int64
	h    http.HandlerFunc
}

func (c *counted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.runs.Add(1)
	c.h(w, r)
}

// serve starts a real HTTP server with the middleware on POST /orders and POST /payments.
func serve(t *testing.T, c *claimd.Client, ns string, h http.HandlerFunc, opts ...claimdhttp.Option) (string, *counted) {
	return serveWrapped(t, c, ns, func(h http.Handler) http.Handler { return h }, h, opts...)
}

// serveWrapped is serve with wrap (outer middleware) around the middleware.
func serveWrapped(t *testing.T, c *claimd.Client, ns string, wrap func(http.Handler) http.Handler,
	h http.HandlerFunc, opts ...claimdhttp.Option,
) (string, *counted) {
	handler := &counted{h: h}
	guard := claimdhttp.Idempotency(c, ns, opts...)
	mux := http.NewServeMux()
	mux.Handle("POST /orders", wrap(guard(handler)))
	mux.Handle("POST /payments", wrap(guard(handler)))
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the panicking handler's stack
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL, handler
}

// answer is a response as the client saw it.
type answer struct {
	status int
	header http.Header
	body   string
}

// problemCode is the code member of a problem body.
func (a answer) problemCode() string {
	var p struct{ Code string }
	_ = json.Unmarshal([]byte(a.body), &p)
	return p.Code
}

// post sends a request; keys holds the Idempotency-Key header lines as sent.
func post(t *testing.T, url, body string, keys ...string) answer {
	t.Helper()
	a, err := send(url, body, keys...)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	return a
}

// send is post for other goroutines than the test's: it returns the error.
func send(url, body string, keys ...string) (answer, error) {
	header := http.Header{}
	for _, k := range keys {
		header.Add("Idempotency-Key", k)
	}
	return sendWith(url, body, header)
}

// postWith sends a request with these header lines (Idempotency-Key, Authorization,
// Cookie, …) and Content-Type application/json.
func postWith(t *testing.T, url, body string, header http.Header) answer {
	t.Helper()
	a, err := sendWith(url, body, header)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	return a
}

// sendWith is postWith for other goroutines than the test's: it returns the error.
func sendWith(url, body string, header http.Header) (answer, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header = header.Clone()
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	return answer{resp.StatusCode, resp.Header, string(raw)}, nil
}

// expectProblem fails unless a is a problem with this status and code.
func expectProblem(t *testing.T, a answer, status int, code string) {
	t.Helper()
	if a.status != status || a.problemCode() != code ||
		a.header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("got %d %s %q, want problem %d %s", a.status, a.header.Get("Content-Type"), a.body, status, code)
	}
}

var keys atomic.Int64

// newKey returns an Idempotency-Key no earlier run used.
func newKey() string {
	return fmt.Sprintf("k-%d-%d", time.Now().UnixNano(), keys.Add(1))
}

// nodeStored is what the Node and Python packages' tests store: 201, content-type
// application/json, x-order 7, {"id":7}.
const nodeStored = "49444b3200c90000020c636f6e74656e742d7479706500106170706c69636174696f6e2f6a736f6e07782d6f726465720001377b226964223a377d"

// created answers 201 with a JSON body naming the order.
func created(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Order", "7")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"id":7,"got":%q}`, body)
}
