package claimdhttp_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"claimd.dev/go/claimd"
	"claimd.dev/go/claimd/claimdhttp"
)

func TestAClientThatDisconnectsDoesNotCancelTheHandlerAndItsRetryGetsTheRealAnswer(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		started, finished := make(chan struct{}), make(chan struct{})
		var once sync.Once
		url, h := serve(t, c, slowRetries, func(w http.ResponseWriter, r *http.Request) {
			once.Do(func() { close(started) })
			defer func() { close(finished) }()
			select {
			case <-r.Context().Done(): // what a handler passing its context on would see
				http.Error(w, "canceled: "+context.Cause(r.Context()).Error(), http.StatusInternalServerError)
			case <-time.After(700 * time.Millisecond):
				created(w, r)
			}
		})
		key := newKey()
		ctx, disconnect := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/orders", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		gone := make(chan error, 1)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			gone <- err
		}()
		<-started
		disconnect()
		if err := <-gone; err == nil {
			t.Fatal("the disconnected request got an answer")
		}
		<-finished
		again := post(t, url+"/orders", `{}`, key)
		if again.status != 201 || again.header.Get(claimdhttp.Replayed) != "true" || h.runs.Load() != 1 {
			t.Fatalf("the retry after a disconnect: %+v, runs %d", again, h.runs.Load())
		}
	})
}

func TestARequestWhoseContextEndsWhileWaitingForADueRetryIs503WithRetryAfter(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		deadline := func(next http.Handler) http.Handler { // a server-side request deadline
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ctx, cancel := context.WithTimeout(r.Context(), 400*time.Millisecond)
				defer cancel()
				next.ServeHTTP(w, r.WithContext(ctx))
			})
		}
		url, h := serveWrapped(t, c, slowRetries, deadline, created)
		key := newKey()
		settleDirectly(t, c, key, `{}`, func(l *claimd.Lease) error {
			_, err := l.Retry(t.Context(), errors.New("x"), claimd.RetryAfter(3*time.Second))
			return err
		})
		// The retry is due within the wait (10 s): the middleware waits, past the deadline.
		a := post(t, url+"/orders", `{}`, key)
		expectProblem(t, a, 503, "idempotency-retry-scheduled")
		if a.header.Get("Retry-After") == "" || h.runs.Load() != 0 {
			t.Fatalf("%+v, runs %d", a, h.runs.Load())
		}
	})
}

func TestABodyCutByAnOuterMaxBytesReaderIs413(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		limit := func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				r.Body = http.MaxBytesReader(w, r.Body, 5)
				next.ServeHTTP(w, r)
			})
		}
		url, h := serveWrapped(t, c, slowRetries, limit, created)
		expectProblem(t, post(t, url+"/orders", `{"item":"a long one"}`, newKey()), 413, "idempotency-body-too-large")
		if h.runs.Load() != 0 {
			t.Fatal("the handler ran")
		}
	})
}

func TestHeadersChangedAfterWriteHeaderAreNeitherSentNorStored(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		url, _ := serve(t, c, slowRetries, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Order", "7")
			w.WriteHeader(http.StatusAccepted)
			w.Header().Set("X-Late", "yes")
			w.Header().Set("X-Order", "8")
			_, _ = w.Write([]byte("ok"))
		})
		key := newKey()
		for _, a := range []answer{post(t, url+"/orders", `{}`, key), post(t, url+"/orders", `{}`, key)} {
			if a.status != 202 || a.header.Get("X-Late") != "" || a.header.Get("X-Order") != "7" {
				t.Fatalf("%+v", a)
			}
		}
	})
}

func TestAnInvalidStatusCodeIsStoredAndReplayedAs500WithoutPanicking(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		for _, code := range []int{42, 1000} {
			url, h := serve(t, c, slowRetries, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(code)
				_, _ = w.Write([]byte("odd"))
			})
			key := newKey()
			first := post(t, url+"/orders", `{}`, key)
			again := post(t, url+"/orders", `{}`, key)
			if first.status != 500 || again.status != 500 || again.body != "odd" ||
				again.header.Get(claimdhttp.Replayed) != "true" || h.runs.Load() != 1 {
				t.Fatalf("WriteHeader(%d): first %+v, again %+v, runs %d", code, first, again, h.runs.Load())
			}
		}
	})
}

func TestAHandlerCanSetItsDeadlinesThroughAResponseController(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		url, _ := serve(t, c, slowRetries, func(w http.ResponseWriter, r *http.Request) {
			rc := http.NewResponseController(w)
			if err := rc.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			if err := rc.Flush(); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			created(w, r)
		})
		if a := post(t, url+"/orders", `{}`, newKey()); a.status != 201 {
			t.Fatalf("%+v", a)
		}
	})
}
