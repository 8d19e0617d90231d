package worq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Error is an error answered by the server (or by the gRPC layer on its behalf), carrying
// the gRPC status code so that callers can branch on the kind. See docs/errors.md for what
// each code means.
type Error struct {
	// Code is the gRPC status code: InvalidArgument, NotFound, FailedPrecondition (lease
	// lost), Unavailable, DeadlineExceeded, ResourceExhausted, Unimplemented, Internal…
	Code codes.Code
	// Message is the server's message; it starts with the offending request field.
	Message string
	// JID is the job the error is about when the call created it: Run sets it when the
	// job was submitted but its wait ran out (DEADLINE_EXCEEDED), so it can be followed.
	JID string

	cause error // the context's error when the call was cancelled by its context
}

func (e *Error) Error() string {
	return fmt.Sprintf("worq: %s: %s", e.Code, e.Message)
}

// Unwrap returns context.Canceled or context.DeadlineExceeded (or the context's cause) when
// the call ended because its context did, so errors.Is(err, context.Canceled) works.
func (e *Error) Unwrap() error { return e.cause }

// GRPCStatus lets status.FromError and status.Code see through the Error.
func (e *Error) GRPCStatus() *status.Status { return status.New(e.Code, e.Message) }

// Sentinel causes of a handler's context cancellation; read them with context.Cause(ctx).
var (
	// ErrExecutionDeadline: the job's execution deadline (attempt start + execution_timeout) passed.
	ErrExecutionDeadline = errors.New("worq: the job's execution deadline passed")
	// ErrLeaseLost: the server refused to renew the lease; the job may be running elsewhere.
	ErrLeaseLost = errors.New("worq: the job's lease was lost")
	// ErrShutdown: the worker shut down and its shutdown timeout ran out before the handler returned.
	ErrShutdown = errors.New("worq: the worker shut down before the handler finished")
	// ErrRevoked: the server took the job back (cancelled, deleted, or its ttl passed);
	// the cause is a *RevokedError, which matches it with errors.Is.
	ErrRevoked = errors.New("worq: the server revoked the job")
)

// RevokedError is the cause of a handler's context cancellation when the server revoked
// the job.
type RevokedError struct {
	// Reason is the server's word for it, e.g. "cancelled", "deleted", "ttl exceeded".
	Reason string
}

func (e *RevokedError) Error() string { return "worq: the server revoked the job: " + e.Reason }

// Is makes errors.Is(err, ErrRevoked) true.
func (e *RevokedError) Is(target error) bool { return target == ErrRevoked }

// wrapErr turns an error from a generated stub into a *Error. A call cancelled by ctx keeps
// the context's error as its cause.
func wrapErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	s, ok := status.FromError(err)
	if !ok {
		s = status.FromContextError(err)
	}
	out := &Error{Code: s.Code(), Message: s.Message()}
	if ctx != nil && ctx.Err() != nil && (out.Code == codes.Canceled || out.Code == codes.DeadlineExceeded) {
		out.cause = context.Cause(ctx)
	}
	return out
}

func invalidArgument(format string, args ...any) error {
	return &Error{Code: codes.InvalidArgument, Message: fmt.Sprintf(format, args...)}
}

// Code returns the gRPC code carried by err: codes.OK for nil, codes.Unknown for an error
// that carries none.
func Code(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return status.Code(err)
}

// IsLeaseLost reports whether err is FAILED_PRECONDITION: the quoted lease is not the job's
// live lease any more (it lapsed, or the job was already settled). Log it and drop the report.
func IsLeaseLost(err error) bool { return Code(err) == codes.FailedPrecondition }

// IsNotFound reports whether err is NOT_FOUND (an unknown jid).
func IsNotFound(err error) bool { return Code(err) == codes.NotFound }

// IsInvalidArgument reports whether err is INVALID_ARGUMENT: a malformed request, refused
// without any change. Fix the request; retrying will not help.
func IsInvalidArgument(err error) bool { return Code(err) == codes.InvalidArgument }

// IsUnavailable reports whether err is UNAVAILABLE: the server cannot be reached or is
// shutting down. Retry with backoff.
func IsUnavailable(err error) bool { return Code(err) == codes.Unavailable }

// IsDeadlineExceeded reports whether err is DEADLINE_EXCEEDED, for example WaitResult or
// Run giving up before the job finished (the job is left as it is).
func IsDeadlineExceeded(err error) bool { return Code(err) == codes.DeadlineExceeded }

// permanentError marks a handler error as PERMANENT: the job goes to FAILED, never retried.
type permanentError struct {
	err    error
	frames []uintptr
}

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as permanent: returned from a handler, the job fails with category
// PERMANENT and goes to FAILED without retry. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err, frames: callers(3)}
}

// IsPermanent reports whether err (or an error it wraps) was marked with Permanent or is a
// *PermanentError.
func IsPermanent(err error) bool {
	var p *permanentError
	var pe *PermanentError
	return errors.As(err, &p) || errors.As(err, &pe)
}

// PermanentError, returned from a handler (itself or wrapped), fails the job for good:
// category PERMANENT, state FAILED, no retry. Code is stored in the job's failure.code
// (at most 256 bytes), the text of Cause in failure.cause, Message in failure.message.
//
//	return &worq.PermanentError{Message: "card declined", Code: "card_declined", Cause: err}
type PermanentError struct {
	Message string
	// Code is the application's error code, for programs that read the failure.
	Code string
	// Cause is the error this one wraps (errors.Unwrap returns it).
	Cause error
}

// Error is Message, then ": " and the cause's text when there is a cause.
func (e *PermanentError) Error() string { return joinCause(e.Message, e.Cause) }

// Unwrap returns Cause.
func (e *PermanentError) Unwrap() error { return e.Cause }

// TemporaryError, returned from a handler (itself or wrapped), fails this attempt and has
// the job retried per its retry policy (category TEMPORARY), no earlier than RetryAfter from
// now when RetryAfter is positive (zero leaves the job's backoff; RetryAfter(err, 0) retries
// at once). The text of Cause is stored in the job's failure.cause. Any other error a handler
// returns is TEMPORARY too.
type TemporaryError struct {
	Message string
	// Cause is the error this one wraps (errors.Unwrap returns it).
	Cause error
	// RetryAfter, when positive, overrides the job's backoff (Fail.retry_after).
	RetryAfter time.Duration
}

// Error is Message, then ": " and the cause's text when there is a cause.
func (e *TemporaryError) Error() string { return joinCause(e.Message, e.Cause) }

// Unwrap returns Cause.
func (e *TemporaryError) Unwrap() error { return e.Cause }

// RateLimitedError, returned from a handler (itself or wrapped), says that a limit outside
// Worq turned the handler away (an API answering 429, a quota): the job goes back DELAYED for
// RetryAfter (1 s when zero or negative) and then runs again without spending an attempt.
// It is not a failure: the job's Attempt, Fails and last Failure stay as they were, and its
// retry policy is not consulted (category RATE_LIMITED). Message and Cause are sent with the
// report but not stored.
//
//	if resp.StatusCode == http.StatusTooManyRequests {
//		return nil, worq.RateLimited(30 * time.Second)
//	}
type RateLimitedError struct {
	// Message defaults to "rate limited".
	Message string
	// Cause is the error this one wraps (errors.Unwrap returns it).
	Cause error
	// RetryAfter is how long the job waits before it runs again; zero or negative: 1 s.
	RetryAfter time.Duration
}

// Error is Message (or "rate limited"), then ": " and the cause's text when there is a cause.
func (e *RateLimitedError) Error() string { return joinCause(e.message(), e.Cause) }

// Unwrap returns Cause.
func (e *RateLimitedError) Unwrap() error { return e.Cause }

func (e *RateLimitedError) message() string {
	if e.Message == "" {
		return "rate limited"
	}
	return e.Message
}

// RateLimited returns a *RateLimitedError: returned from a handler, the job runs again after d
// (1 s when d <= 0) without spending an attempt.
func RateLimited(d time.Duration) error { return &RateLimitedError{RetryAfter: d} }

// IsRateLimited reports whether err (or an error it wraps) is a *RateLimitedError.
func IsRateLimited(err error) bool {
	var rl *RateLimitedError
	return errors.As(err, &rl)
}

func joinCause(message string, cause error) string {
	switch {
	case cause == nil:
		return message
	case message == "":
		return cause.Error()
	default:
		return message + ": " + cause.Error()
	}
}

// retryAfterError asks the server to retry no earlier than after a delay.
type retryAfterError struct {
	err    error
	after  time.Duration
	frames []uintptr
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// RetryAfter wraps err so that, returned from a handler, the failed attempt is retried no
// earlier than d from now, overriding the job's computed backoff (Fail.retry_after). The
// failure stays TEMPORARY. RetryAfter(nil, d) is nil.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	if d < 0 {
		d = 0
	}
	return &retryAfterError{err: err, after: d, frames: callers(3)}
}

// PanicError is the error a worker reports when a handler panicked.
type PanicError struct {
	// Value is what the handler passed to panic.
	Value any
	// Frames is the panicking goroutine's stack, innermost first.
	Frames []string
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	if err, ok := e.Value.(error); ok {
		return err
	}
	return nil
}

// Backtracer may be implemented by handler errors that carry their own stack; a worker
// then reports Backtrace() as the failure's frames (innermost first).
type Backtracer interface {
	Backtrace() []string
}
