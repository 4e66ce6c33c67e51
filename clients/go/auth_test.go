package claimd_test

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"claimd.dev/go/claimd"
)

func TestErrorsNameTheInvalidField(t *testing.T) {
	onBothStores(t, func(t *testing.T, c *claimd.Client) {
		fp := claimd.Fingerprint([]byte("b"))
		for _, tc := range []struct {
			field, namespace, key string
			fp                    []byte
		}{
			{"namespace", "", uniqueKey(t), fp},
			{"key", namespace, "", fp},
			{"fingerprint", namespace, uniqueKey(t), make([]byte, 65)},
		} {
			_, err := c.Claim(ctxOf(t), tc.namespace, tc.key, tc.fp)
			var e *claimd.Error
			if !errors.As(err, &e) {
				t.Fatalf("%s: not a *claimd.Error: %v", tc.field, err)
			}
			if e.Code != codes.InvalidArgument || e.Field != tc.field || e.Op != "Claim" {
				t.Fatalf("%s: got code %v field %q op %q", tc.field, e.Code, e.Field, e.Op)
			}
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("%s: status.Code %v, text %q", tc.field, status.Code(err), err.Error())
			}
		}
	})
}

func TestAWrongAPIKeyIsUnauthenticated(t *testing.T) {
	c := dial(t, envOf(t, "CLAIMD_KEYED_ADDR"), claimd.WithAPIKey("not-the-key"))
	_, err := c.Claim(ctxOf(t), namespace, uniqueKey(t), claimd.Fingerprint([]byte("b")))
	var e *claimd.Error
	if !errors.As(err, &e) || e.Code != codes.Unauthenticated {
		t.Fatalf("Claim with a wrong key: %v", err)
	}
	if strings.Contains(err.Error(), "not-the-key") {
		t.Fatal("the error carries the API key")
	}
	none := dial(t, envOf(t, "CLAIMD_KEYED_ADDR"))
	if _, err := none.Claim(ctxOf(t), namespace, uniqueKey(t), claimd.Fingerprint([]byte("b"))); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("Claim without a key: %v", err)
	}
}

func TestAnAPIKeyIsSentWithEveryCall(t *testing.T) {
	key := envOf(t, "CLAIMD_API_KEY")
	c := dial(t, envOf(t, "CLAIMD_KEYED_ADDR"), claimd.WithAPIKey(key))
	k, fp := uniqueKey(t), claimd.Fingerprint([]byte("b"))
	won := mustClaim(t, c, k, fp, claimd.DecisionClaimed)
	if err := won.Lease.Checkpoint(ctxOf(t), []byte("half")); err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	if _, err := won.Lease.Complete(ctxOf(t), []byte("keyed")); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if out := mustClaim(t, c, k, fp, claimd.DecisionCompleted); string(out.Receipt.GetResponse()) != "keyed" {
		t.Fatalf("response %q", out.Receipt.GetResponse())
	}
}

func TestMutualTLSWithAnAPIKeyWorks(t *testing.T) {
	c := dial(t, envOf(t, "CLAIMD_TLS_ADDR"), claimd.WithAPIKey(envOf(t, "CLAIMD_TLS_API_KEY")),
		claimd.WithTLSFiles(envOf(t, "CLAIMD_CA_FILE"), envOf(t, "CLAIMD_CLIENT_CERT"), envOf(t, "CLAIMD_CLIENT_KEY")))
	k, fp := uniqueKey(t), claimd.Fingerprint([]byte("b"))
	won := mustClaim(t, c, k, fp, claimd.DecisionClaimed)
	if _, err := won.Lease.Complete(ctxOf(t), []byte("over tls")); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	mustClaim(t, c, k, fp, claimd.DecisionCompleted)

	plain := dial(t, envOf(t, "CLAIMD_TLS_ADDR"), claimd.WithAPIKey(envOf(t, "CLAIMD_TLS_API_KEY")))
	if _, err := plain.Claim(ctxOf(t), namespace, uniqueKey(t), fp); err == nil {
		t.Fatal("a plaintext Claim to the TLS claimd succeeded")
	}
}
