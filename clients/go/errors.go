package claimd

import (
	"errors"
	"fmt"

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

// wrapError turns an RPC error into an *Error; nil stays nil.
func wrapError(op string, err error) error {
	if err == nil {
		return nil
	}
	s, ok := status.FromError(err)
	if !ok {
		s = status.FromContextError(err)
	}
	e := &Error{Op: op, Code: s.Code(), Message: s.Message(), status: s.Err()}
	for _, d := range s.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && e.Field == "" {
			for _, v := range br.GetFieldViolations() {
				e.Field = v.GetField()
				break
			}
		}
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
