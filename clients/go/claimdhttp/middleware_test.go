package claimdhttp_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"claimd.dev/go/claimd"
	"claimd.dev/go/claimd/claimdhttp"
)

func TestAHandlerThatAnsweredNeverRunsAgainAndItsResponseIsReplayed(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		url, h := serve(t, c, slowRetries, created)
		key := newKey()
		first := post(t, url+"/orders", `{"item":"cup","n":1}`, key)
		if first.status != 201 || first.header.Get(claimdhttp.Replayed) != "" ||
			!strings.Contains(first.body, `\"item\":\"cup\"`) {
			t.Fatalf("first (the handler reads the body): %+v", first)
		}
		// The same JSON, other whitespace and member order: the same request.
		again := post(t, url+"/orders", `{ "n":1, "item":"cup" }`, key)
		if again.status != 201 || again.body != first.body || again.header.Get("X-Order") != "7" ||
			again.header.Get("Content-Type") != "application/json" || again.header.Get(claimdhttp.Replayed) != "true" {
			t.Fatalf("replay: %+v, first %+v", again, first)
		}
		if h.runs.Load() != 1 {
			t.Fatalf("the handler ran %d times", h.runs.Load())
		}
	})
}

func TestTwentyConcurrentIdenticalRequestsRunTheHandlerOnceAndAllGetItsAnswer(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		url, h := serve(t, c, slowRetries, func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(300 * time.Millisecond)
			created(w, r)
		})
		key := newKey()
		answers := make([]answer, 20)
		var wg sync.WaitGroup
		for i := range answers {
			wg.Go(func() {
				var err error
				if answers[i], err = send(url+"/orders", `{"item":"cup"}`, key); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		for _, a := range answers {
			if a.status != 201 || a.body != answers[0].body {
				t.Fatalf("an answer differs: %+v vs %+v", a, answers[0])
			}
		}
		if h.runs.Load() != 1 {
			t.Fatalf("the handler ran %d times", h.runs.Load())
		}
	})
}

func TestServerErrorsAreReplayedLikeAnyResponse(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		url, h := serve(t, c, slowRetries, func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "the warehouse is down", http.StatusBadGateway)
		})
		key := newKey()
		first := post(t, url+"/orders", `{}`, key)
		again := post(t, url+"/orders", `{}`, key)
		if first.status != 502 || again.status != 502 || again.body != first.body ||
			again.header.Get(claimdhttp.Replayed) != "true" || h.runs.Load() != 1 {
			t.Fatalf("first %+v, again %+v, runs %d", first, again, h.runs.Load())
		}
	})
}

func TestWithRetryServerErrorsAServerErrorGivesTheKeyBack(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		url, h := serve(t, c, slowRetries, func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "busy", http.StatusServiceUnavailable)
		}, claimdhttp.WithRetryServerErrors(true), claimdhttp.WithWait(200*time.Millisecond),
			claimdhttp.WithRetryAfter(time.Minute))
		key := newKey()
		if first := post(t, url+"/orders", `{}`, key); first.status != 503 || first.problemCode() != "" {
			t.Fatalf("first: %+v", first)
		}
		// The retry is due in a minute (WithRetryAfter): past the wait.
		again := post(t, url+"/orders", `{}`, key)
		expectProblem(t, again, 503, "idempotency-retry-scheduled")
		if again.header.Get("Retry-After") == "" || h.runs.Load() != 1 {
			t.Fatalf("again %+v, runs %d", again, h.runs.Load())
		}
	})
}

func TestTheSameKeyWithAnotherBodyOrOnAnotherRouteIs422(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		url, h := serve(t, c, slowRetries, created)
		key := newKey()
		if a := post(t, url+"/orders", `{"amount":1}`, key); a.status != 201 {
			t.Fatalf("first: %+v", a)
		}
		expectProblem(t, post(t, url+"/orders", `{"amount":5}`, key), 422, "idempotency-key-reused")
		expectProblem(t, post(t, url+"/payments", `{"amount":1}`, key), 422, "idempotency-key-reused")
		if h.runs.Load() != 1 {
			t.Fatalf("the handler ran %d times", h.runs.Load())
		}
	})
}

func TestARequestWithoutAKeyOrWithAnInvalidKeyIs400(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		url, h := serve(t, c, slowRetries, created)
		missing := post(t, url+"/orders", `{}`)
		expectProblem(t, missing, 400, "idempotency-key-missing")
		// The Node package's problem, member for member.
		if want := `{"type":"about:blank","title":"Idempotency-Key is missing","status":400,` +
			`"detail":"This operation is idempotent and requires an Idempotency-Key header.",` +
			`"code":"idempotency-key-missing"}`; missing.body != want {
			t.Fatalf("problem body %s", missing.body)
		}
		for _, bad := range []string{`"unterminated`, `"a"b`, strings.Repeat("x", 256), `""`} {
			expectProblem(t, post(t, url+"/orders", `{}`, bad), 400, "idempotency-key-invalid")
		}
		expectProblem(t, post(t, url+"/orders", `{}`, "one", "two"), 400, "idempotency-key-invalid")
		if h.runs.Load() != 0 {
			t.Fatalf("the handler ran %d times", h.runs.Load())
		}
		optional, h2 := serve(t, c, slowRetries, created, claimdhttp.WithRequired(false))
		if a := post(t, optional+"/orders", `{}`); a.status != 201 || h2.runs.Load() != 1 {
			t.Fatalf("without a key, not required: %+v", a)
		}
	})
}

func TestFreeFormKeysWithSpacesAndQuotedStringsAreOneKey(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		url, h := serve(t, c, slowRetries, created)
		spaced := "order 42 / " + newKey()
		post(t, url+"/orders", `{}`, spaced)
		// The sf-string form of the same key, with an escaped quote and backslash.
		quoted := `say "hi" \ ` + newKey()
		post(t, url+"/orders", `{}`, quoted)
		sf := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(quoted) + `"`
		if a := post(t, url+"/orders", `{}`, `"`+spaced+`"`); a.header.Get(claimdhttp.Replayed) != "true" {
			t.Fatalf("quoted spaced key: %+v", a)
		}
		if a := post(t, url+"/orders", `{}`, sf); a.header.Get(claimdhttp.Replayed) != "true" {
			t.Fatalf("sf-string key: %+v", a)
		}
		if h.runs.Load() != 2 {
			t.Fatalf("the handler ran %d times", h.runs.Load())
		}
	})
}

func TestARequestStillInFlightPastTheWaitIs409WithRetryAfter(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		started, release := make(chan struct{}), make(chan struct{})
		url, _ := serve(t, c, slowRetries, func(w http.ResponseWriter, r *http.Request) {
			close(started)
			<-release
			created(w, r)
		}, claimdhttp.WithWait(300*time.Millisecond))
		key := newKey()
		done := make(chan answer, 1)
		go func() {
			a, err := send(url+"/orders", `{}`, key)
			if err != nil {
				t.Error(err)
			}
			done <- a
		}()
		<-started // the first request holds the claim
		busy := post(t, url+"/orders", `{}`, key)
		close(release)
		expectProblem(t, busy, 409, "idempotency-request-in-progress")
		if busy.header.Get("Retry-After") == "" {
			t.Fatal("409 without Retry-After")
		}
		if first := <-done; first.status != 201 {
			t.Fatalf("first: %+v", first)
		}
	})
}

func TestAnUnreachableClaimdIs503WithRetryAfter(t *testing.T) {
	c, err := claimd.New("127.0.0.1:1", claimd.WithCallTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	url, h := serve(t, c, slowRetries, created)
	a := post(t, url+"/orders", `{}`, newKey())
	expectProblem(t, a, 503, "idempotency-store-unavailable")
	if a.header.Get("Retry-After") != "1" || h.runs.Load() != 0 {
		t.Fatalf("%+v, runs %d", a, h.runs.Load())
	}
}

func TestAPanickingHandlerGivesTheKeyBackSoTheNextRequestRunsIt(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		var rv recovered
		// The namespace's own backoff (0.5 to 1 s), not the middleware's default.
		url, h := serveWrapped(t, c, fastRetries, rv.wrap, panicsOnce("the handler broke"),
			claimdhttp.WithRetryAfter(0))
		key := newKey()
		sendPanicking(t, url, key)
		rv.mu.Lock()
		got := rv.values
		rv.mu.Unlock()
		if len(got) != 1 || got[0] != "the handler broke" {
			t.Fatalf("the panic reached outer middleware as %#v", got)
		}
		// The key was given back: the retry waits for the backoff, then runs the handler.
		if a := post(t, url+"/orders", `{}`, key); a.status != 201 || a.header.Get(claimdhttp.Replayed) != "" {
			t.Fatalf("the retry: %+v", a)
		}
		if h.runs.Load() != 2 {
			t.Fatalf("the handler ran %d times", h.runs.Load())
		}
	})
}

func TestAResponseTooLargeToStoreStillSettlesTheKey(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		big := strings.Repeat("x", 5000)
		url, h := serve(t, c, slowRetries, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("X-Order", "9")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(big))
		}, claimdhttp.WithMaxResponseBytes(1024))
		key := newKey()
		if first := post(t, url+"/orders", `{}`, key); first.status != 201 || first.body != big {
			t.Fatalf("first: %d, %d bytes", first.status, len(first.body))
		}
		again := post(t, url+"/orders", `{}`, key)
		expectProblem(t, again, 201, "idempotency-response-not-stored")
		if again.header.Get("X-Order") != "9" || again.header.Get(claimdhttp.Replayed) != "true" || h.runs.Load() != 1 {
			t.Fatalf("again %+v, runs %d", again, h.runs.Load())
		}
	})
}

func TestABodyLargerThanTheLimitIs413(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		url, h := serve(t, c, slowRetries, created, claimdhttp.WithMaxBodyBytes(10))
		expectProblem(t, post(t, url+"/orders", `{"item":"a long one"}`, newKey()), 413, "idempotency-body-too-large")
		if h.runs.Load() != 0 {
			t.Fatal("the handler ran")
		}
	})
}
