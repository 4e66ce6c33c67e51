package claimdhttp_test

// The middleware mounted the way chi and gorilla/mux users mount middleware, `r.Use`,
// under the middleware's rules, through real HTTP against a real claimd; and the routers
// (the standard mux too) the scope tests run on.

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/gorilla/mux"

	"claimd.dev/go/claimd"
	"claimd.dev/go/claimd/claimdhttp"
)

// A router is a way to mount the middleware on POST /orders and POST /payments.
type router struct {
	name  string
	mount func(guard func(http.Handler) http.Handler, h http.Handler) http.Handler
}

var (
	// serveMux wraps each route's handler, as the standard mux does not have r.Use.
	serveMux = router{"ServeMux", func(guard func(http.Handler) http.Handler, h http.Handler) http.Handler {
		m := http.NewServeMux()
		m.Handle("POST /orders", guard(h))
		m.Handle("POST /payments", guard(h))
		return m
	}}
	chiRouter = router{"chi", func(guard func(http.Handler) http.Handler, h http.Handler) http.Handler {
		r := chi.NewRouter()
		r.Use(guard)
		r.Method(http.MethodPost, "/orders", h)
		r.Method(http.MethodPost, "/payments", h)
		return r
	}}
	gorillaRouter = router{"gorilla", func(guard func(http.Handler) http.Handler, h http.Handler) http.Handler {
		r := mux.NewRouter()
		r.Use(guard)
		r.Handle("/orders", h).Methods(http.MethodPost)
		r.Handle("/payments", h).Methods(http.MethodPost)
		return r
	}}
	// useRouters mount the middleware with r.Use; allRouters are every way.
	useRouters = []router{chiRouter, gorillaRouter}
	allRouters = []router{serveMux, chiRouter, gorillaRouter}
)

// serveOn starts a real HTTP server with the middleware mounted by rt.
func serveOn(t *testing.T, rt router, c *claimd.Client, ns string, h http.HandlerFunc,
	opts ...claimdhttp.Option,
) (string, *counted) {
	handler := &counted{h: h}
	srv := httptest.NewUnstartedServer(rt.mount(claimdhttp.Idempotency(c, ns, opts...), handler))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL, handler
}

// onRoutersAndStores runs f for each router, on both stores (subtests router/store).
func onRoutersAndStores(t *testing.T, routers []router, f func(t *testing.T, rt router, c *claimd.Client)) {
	for _, rt := range routers {
		t.Run(rt.name, func(t *testing.T) {
			onBothStores(t, func(t *testing.T, c *claimd.Client) { f(t, rt, c) })
		})
	}
}

func TestWithRouterUseTwentyConcurrentRequestsWithOneKeyRunTheHandlerOnceAndAllGetItsAnswer(t *testing.T) {
	onRoutersAndStores(t, useRouters, func(t *testing.T, rt router, c *claimd.Client) {
		url, h := serveOn(t, rt, c, slowRetries, func(w http.ResponseWriter, r *http.Request) {
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

func TestWithRouterUseAServerErrorIsStoredAndReplayed(t *testing.T) {
	onRoutersAndStores(t, useRouters, func(t *testing.T, rt router, c *claimd.Client) {
		url, h := serveOn(t, rt, c, slowRetries, func(w http.ResponseWriter, r *http.Request) {
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

func TestWithRouterUseTheSameKeyWithAnotherBodyOrOnAnotherRouteIs422(t *testing.T) {
	onRoutersAndStores(t, useRouters, func(t *testing.T, rt router, c *claimd.Client) {
		url, h := serveOn(t, rt, c, slowRetries, created)
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

func TestWithRouterUseARequestWithoutAKeyIs400(t *testing.T) {
	onRoutersAndStores(t, useRouters, func(t *testing.T, rt router, c *claimd.Client) {
		url, h := serveOn(t, rt, c, slowRetries, created)
		expectProblem(t, post(t, url+"/orders", `{}`), 400, "idempotency-key-missing")
		if h.runs.Load() != 0 {
			t.Fatalf("the handler ran %d times", h.runs.Load())
		}
	})
}

func TestWithRouterUseAnUnreachableClaimdIs503AndTheHandlerDoesNotRun(t *testing.T) {
	c, err := claimd.New("127.0.0.1:1", claimd.WithCallTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, rt := range useRouters {
		t.Run(rt.name, func(t *testing.T) {
			url, h := serveOn(t, rt, c, slowRetries, created)
			a := post(t, url+"/orders", `{}`, newKey())
			expectProblem(t, a, 503, "idempotency-store-unavailable")
			if a.header.Get("Retry-After") != "1" || h.runs.Load() != 0 {
				t.Fatalf("%+v, runs %d", a, h.runs.Load())
			}
		})
	}
}

func TestTheRoutersAreDependenciesOfTheTestsOnly(t *testing.T) {
	// Every package of the module as its users build it: without its tests.
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "claimd.dev/go/claimd/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for pkg := range strings.Lines(string(out)) {
		if strings.HasPrefix(pkg, "github.com/go-chi/") || strings.HasPrefix(pkg, "github.com/gorilla/") {
			t.Errorf("the library imports %s", strings.TrimSpace(pkg))
		}
	}
}
