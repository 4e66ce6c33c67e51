package claimd_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"claimd.dev/go/claimd"
	"claimd.dev/go/claimd/internal/testenv"
)

// The claimd of CLAIMD_QUOTA_ADDR gives its anonymous tenant one Claim, then one per
// thousand seconds ([tenants.default] claims_per_second = 0.001, burst = 1): once a test
// has spent that Claim every Claim is refused by the quota, whatever ran before.
const quotaNamespace = "go-quota-tests"

// spendTheQuota claims until the quota claimd refuses a Claim by its quota (the second at
// the latest) and returns that error.
func spendTheQuota(t *testing.T, c *claimd.Client) error {
	t.Helper()
	for n := range 3 {
		_, err := c.Claim(context.Background(), quotaNamespace, fmt.Sprintf("spent-%d-%d", time.Now().UnixNano(), n), []byte("fp"))
		if err != nil {
			return err
		}
	}
	t.Fatal("the claimd of CLAIMD_QUOTA_ADDR refused no Claim by its quota")
	return nil
}

func TestAClaimOverTheTenantQuotaIsAQuotaErrorWithTheQuotaAndAPositiveRetryDelay(t *testing.T) {
	c := testenv.Dial(t, testenv.Env(t, "CLAIMD_QUOTA_ADDR"))
	err := spendTheQuota(t, c)
	var quota *claimd.QuotaError
	if !errors.As(err, &quota) {
		t.Fatalf("not a *QuotaError: %v", err)
	}
	if quota.Quota != "claims_per_second" || quota.RetryAfter <= 0 {
		t.Fatalf("quota %q, retry after %s", quota.Quota, quota.RetryAfter)
	}
	// The call's *Error is there too, and the status.
	var e *claimd.Error
	if !errors.As(err, &e) || e.Code != codes.ResourceExhausted || e.Op != "Claim" {
		t.Fatalf("the wrapped *Error: %+v", e)
	}
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("status.Code: %s", status.Code(err))
	}
}

func TestAResourceExhaustedWithoutQuotaDetailsIsAPlainError(t *testing.T) {
	tooLarge := status.Error(codes.ResourceExhausted, "grpc: received message larger than max")
	err := claimd.WrapError("Claim", tooLarge)
	var quota *claimd.QuotaError
	if errors.As(err, &quota) {
		t.Fatalf("a *QuotaError: %v", err)
	}
	var e *claimd.Error
	if !errors.As(err, &e) || e.Code != codes.ResourceExhausted {
		t.Fatalf("not a plain *Error: %v", err)
	}

	// A retry delay alone names no quota: a plain *Error too.
	s, detailErr := status.New(codes.ResourceExhausted, "busy").
		WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Second)})
	if detailErr != nil {
		t.Fatal(detailErr)
	}
	if errors.As(claimd.WrapError("Claim", s.Err()), &quota) {
		t.Fatalf("a *QuotaError without a QuotaFailure")
	}
}
