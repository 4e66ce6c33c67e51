package claimdhttp_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"claimd.dev/go/claimd"
	"claimd.dev/go/claimd/claimdhttp"
	"claimd.dev/go/claimd/internal/testenv"
)

// quotaClient is a client of CLAIMD_QUOTA_ADDR, whose anonymous tenant gets one Claim, then
// one per thousand seconds, with that Claim spent: every Claim through it is refused by the
// quota, whatever ran before.
func quotaClient(t *testing.T) *claimd.Client {
	t.Helper()
	c := testenv.Dial(t, envOf(t, "CLAIMD_QUOTA_ADDR"))
	for n := range 3 {
		key := fmt.Sprintf("spent-%d-%d", time.Now().UnixNano(), n)
		_, err := c.Claim(context.Background(), slowRetries, key, []byte("fp"))
		var quota *claimd.QuotaError
		if errors.As(err, &quota) {
			return c
		}
		if err != nil {
			t.Fatalf("Claim: %v", err)
		}
	}
	t.Fatal("the claimd of CLAIMD_QUOTA_ADDR refused no Claim by its quota")
	return nil
}

// expectQuotaRefusal checks the quota's 503: the problem and Retry-After in whole seconds.
func expectQuotaRefusal(t *testing.T, a answer) {
	t.Helper()
	expectProblem(t, a, 503, "idempotency-quota-exceeded")
	seconds, err := strconv.Atoi(a.header.Get("Retry-After"))
	if err != nil || seconds < 1 {
		t.Fatalf("Retry-After %q", a.header.Get("Retry-After"))
	}
}

func TestAClaimRefusedByTheTenantQuotaIs503WithRetryAfterAndTheHandlerDoesNotRun(t *testing.T) {
	url, h := serve(t, quotaClient(t), slowRetries, created)
	expectQuotaRefusal(t, post(t, url+"/orders", `{"item":"lamp"}`, newKey()))
	if runs := h.runs.Load(); runs != 0 {
		t.Fatalf("the handler ran %d times", runs)
	}
}

func TestWrappingTheWholeMuxAClaimRefusedByTheTenantQuotaIs503AndNoHandlerRuns(t *testing.T) {
	handler := &counted{h: created}
	mux := http.NewServeMux()
	mux.Handle("POST /orders", handler)
	srv := httptest.NewServer(claimdhttp.Idempotency(quotaClient(t), slowRetries)(mux))
	t.Cleanup(srv.Close)
	expectQuotaRefusal(t, post(t, srv.URL+"/orders", `{"item":"rug"}`, newKey()))
	if runs := handler.runs.Load(); runs != 0 {
		t.Fatalf("the handler ran %d times", runs)
	}
}
