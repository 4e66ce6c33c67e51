// Package claimd is the Go client of claimd, the gRPC service that records durable claims
// on events so that exactly one caller does the work for each of them.
//
//	client, err := claimd.New("127.0.0.1:50051", claimd.WithAPIKey(apiKey))
//	if err != nil { ... }
//	defer client.Close()
//	out, err := client.Claim(ctx, "slack-events", eventID, claimd.Fingerprint(body),
//		claimd.WithLease(30*time.Second))
//	if err != nil { ... }
//	switch out.Decision {
//	case claimd.DecisionClaimed:
//		defer out.Lease.Close() // gives the claim back unless it was settled
//		reply, err := handle(ctx, body)
//		if err != nil {
//			_, _ = out.Lease.Retry(ctx, err)
//			return
//		}
//		_, err = out.Lease.Complete(ctx, reply)
//	case claimd.DecisionCompleted:
//		replay(out.Receipt.GetResponse())
//	}
//
// A won claim comes with a [Lease] that heartbeats in its own goroutine and is settled
// exactly once with Complete, Retry or Quarantine. Every other decision (IN_FLIGHT,
// COMPLETED, RETRY_SCHEDULED, QUARANTINED, CONFLICT) is an answer, not an error; errors are
// [*Error] values carrying the gRPC status code and the field claimd named.
//
// Nothing here logs. No error, String or %v output carries an API key or a claim token.
// The generated gRPC code is in package claimdv1; the Idempotency-Key middleware for
// net/http (the standard mux, chi's and gorilla's r.Use) is in package claimdhttp. It
// scopes keys per client: give it the authenticated identity (claimdhttp.WithClientOf
// returning a verified token's subject), never a header any caller can set (X-Tenant),
// or a caller copying another's header and key would get the other's stored response.
package claimd

// Version is the version of this client: the version of the claimd.v1 proto it was
// generated from (proto/VERSION).
const Version = "1.1.0"
