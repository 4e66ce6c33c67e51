package claimd

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrSettled is returned by a second Complete, Retry or Quarantine of a [Lease] (and by
// Checkpoint after a settle); claimd is not called.
var ErrSettled = errors.New("claimd: the lease was already settled")

// ErrLost is returned by Complete, Retry, Quarantine and Checkpoint of a [Lease] whose
// Lost channel is closed: somebody else holds the claim now; claimd is not called.
var ErrLost = errors.New("claimd: the lease was lost to another caller")

// Error is an error answered by claimd (or by gRPC on the way there): every RPC error of
// this package is one. Use errors.As to get it.
type Error struct {
	// Op is the RPC, e.g. "Claim".
	Op string
	// Code is the gRPC status code, e.g. codes.InvalidArgument.
	Code codes.Code
	// Field is the first field a google.rpc.BadRequest detail names (e.g. "key"), or "".
	Field string
	// Message is claimd's message.
	Message string

	status error
}

// Error returns "claimd <Op>: <Code>: <Message>"; it never carries an API key or a token.
func (e *Error) Error() string {
	text := fmt.Sprintf("claimd %s: %s: %s", e.Op, e.Code, e.Message)
	if e.Field != "" {
		text += " (field " + e.Field + ")"
	}
	return text
}

// Unwrap returns the gRPC status error.
func (e *Error) Unwrap() error { return e.status }

// GRPCStatus returns the gRPC status, so that status.FromError and status.Code work.
func (e *Error) GRPCStatus() *status.Status {
	s, _ := status.FromError(e.status)
	return s
}

// QuotaError is the error of a call claimd refused because the tenant is over one of its
// quotas (docs/DESIGN.md §5.15): codes.ResourceExhausted with a google.rpc.RetryInfo and a
// google.rpc.QuotaFailure. Nothing was written and no attempt was spent. Get it with
// errors.As; it wraps the call's [*Error], which errors.As finds through it too. A
// ResourceExhausted without both details (a message over a size limit) is a plain *Error.
type QuotaError struct {
	// Quota is the quota's key, the QuotaFailure's violation subject: "claims_per_second",
	// "writes_per_second" or "max_waiting".
	Quota string
	// RetryAfter is the RetryInfo's delay: when claimd expects to take the call.
	RetryAfter time.Duration
	// Err is the call's error (Code codes.ResourceExhausted, claimd's message).
	Err *Error
}

// Error returns the wrapped error's text with the quota and the delay.
func (e *QuotaError) Error() string {
	return fmt.Sprintf("%s (quota %s, retry after %s)", e.Err.Error(), e.Quota, e.RetryAfter)
}

// Unwrap returns the call's *Error.
func (e *QuotaError) Unwrap() error { return e.Err }

// GRPCStatus returns the gRPC status, so that status.FromError and status.Code work.
func (e *QuotaError) GRPCStatus() *status.Status { return e.Err.GRPCStatus() }

// wrapError turns an RPC error into an *Error, or a *QuotaError wrapping one; nil stays
// nil.
func wrapError(op string, err error) error {
	if err == nil {
		return nil
	}
	s, ok := status.FromError(err)
	if !ok {
		s = status.FromContextError(err)
	}
	e := &Error{Op: op, Code: s.Code(), Message: s.Message(), status: s.Err()}
	var (
		quota      string
		retryAfter *time.Duration
	)
	for _, d := range s.Details() {
		switch d := d.(type) {
		case *errdetails.BadRequest:
			if e.Field == "" {
				for _, v := range d.GetFieldViolations() {
					e.Field = v.GetField()
					break
				}
			}
		case *errdetails.RetryInfo:
			if delay := d.GetRetryDelay(); delay != nil && delay.IsValid() {
				after := delay.AsDuration()
				retryAfter = &after
			}
		case *errdetails.QuotaFailure:
			for _, v := range d.GetViolations() {
				if quota == "" && v.GetSubject() != "" {
					quota = v.GetSubject()
				}
			}
		}
	}
	if e.Code == codes.ResourceExhausted && quota != "" && retryAfter != nil {
		return &QuotaError{Quota: quota, RetryAfter: *retryAfter, Err: e}
	}
	return e
}

// codeOf returns the gRPC code of an error of this package (codes.Unknown for others).
func codeOf(err error) codes.Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return codes.Unknown
}

// isLostCode reports whether a code means the claim token is no longer current.
func isLostCode(c codes.Code) bool {
	return c == codes.Aborted || c == codes.FailedPrecondition || c == codes.NotFound
}
