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

// A RESOURCE_EXHAUSTED that is not a quota, answered by a real claimd: a Claim whose request
// is over claimd's request limit (256 KiB, docs/DESIGN.md §2.8; here a 300 KiB recovery
// payload) is refused from its length prefix, before the tenant's quota is looked at, with
// no details. It stays a plain *Error, on both stores and on the quota claimd whose tenant
// is over its Claims quota.
func TestARequestOverClaimdsSizeLimitIsAPlainResourceExhaustedErrorNotAQuotaError(t *testing.T) {
	tooLarge := make([]byte, 300*1024)
	refusedPlain := func(t *testing.T, c *claimd.Client) {
		t.Helper()
		_, err := c.Claim(ctxOf(t), quotaNamespace, uniqueKey(t), claimd.Fingerprint([]byte("b")),
			claimd.WithRecoveryPayload(tooLarge))
		var quota *claimd.QuotaError
		if errors.As(err, &quota) {
			t.Fatalf("a *QuotaError: %v", err)
		}
		var e *claimd.Error
		if !errors.As(err, &e) || e.Code != codes.ResourceExhausted || e.Op != "Claim" {
			t.Fatalf("not a plain *Error with ResourceExhausted: %v", err)
		}
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("status.Code: %s", status.Code(err))
		}
		if details := status.Convert(err).Details(); len(details) != 0 {
			t.Fatalf("claimd sent details with the size refusal: %v", details)
		}
	}
	onBothStores(t, refusedPlain)
	t.Run("quota", func(t *testing.T) {
		c := testenv.Dial(t, testenv.Env(t, "CLAIMD_QUOTA_ADDR"))
		var quota *claimd.QuotaError
		if err := spendTheQuota(t, c); !errors.As(err, &quota) {
			t.Fatalf("the quota claimd's refusal is not a *QuotaError: %v", err)
		}
		refusedPlain(t, c)
	})
}
