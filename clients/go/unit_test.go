package worq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	worqv1 "github.com/worq-dev/worq/gen/go/worq/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestBackoffDelays(t *testing.T) {
	b := reconnectBackoff()
	for n, want := range []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000} {
		want *= time.Millisecond
		if got := b.delay(n, 0.5); got != want {
			t.Errorf("delay(%d) without jitter = %s, want %s", n, got, want)
		}
		lo, hi := b.delay(n, 0), b.delay(n, 0.999999)
		if lo < want*8/10-time.Millisecond || hi > min(want*12/10, b.max) || (want < b.max && lo >= hi) {
			t.Errorf("delay(%d) jitter range [%s, %s] around %s", n, lo, hi, want)
		}
	}
	if got := b.delay(1000, 0.999); got > 5*time.Second {
		t.Errorf("delay is not capped: %s", got)
	}
	r := retrier{b: b}
	first := r.next()
	for range 10 {
		r.next()
	}
	if capped := r.next(); capped < 4*time.Second || capped > 5*time.Second {
		t.Errorf("after 12 failures the delay is %s, want 4-5 s", capped)
	}
	r.reset()
	if again := r.next(); again > 120*time.Millisecond || first > 120*time.Millisecond {
		t.Errorf("first delays %s and %s after reset, want about 100 ms", first, again)
	}
	if d := renewRetryBackoff().delay(100, 0.99); d > 250*time.Millisecond {
		t.Errorf("renew retry delay %s exceeds 250 ms", d)
	}
}

func TestEncodeResult(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want string
	}{
		{nil, ""},
		{"hello, ada", "hello, ada"},
		{"héllo", "héllo"},
		{[]byte{0xff, 0}, "\xff\x00"},
		{json.RawMessage(`{"a": 1}`), `{"a": 1}`},
		{42, "42"},
		{map[string]any{"ok": true}, `{"ok":true}`},
		{struct {
			N int `json:"n"`
		}{7}, `{"n":7}`},
		{[]string{"a", "b"}, `["a","b"]`},
	} {
		got, err := EncodeResult(tc.in)
		if err != nil || string(got) != tc.want {
			t.Errorf("EncodeResult(%#v) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := EncodeResult(make(chan int)); err == nil {
		t.Error("EncodeResult(chan) did not fail")
	}
}

type customErr struct{}

func (customErr) Error() string { return "custom" }

func TestErrTypeAndFailRequest(t *testing.T) {
	plain := errors.New("plain")
	for _, tc := range []struct {
		err  error
		want string
	}{
		{plain, "*errors.errorString"},
		{fmt.Errorf("wrapped: %w", plain), "*fmt.wrapError"},
		{customErr{}, "worq.customErr"},
		{Permanent(&testError{"x"}), "*worq.testError"},
		{RetryAfter(Permanent(io.EOF), time.Second), "*errors.errorString"},
		{&PanicError{Value: "boom"}, "panic"},
		{&PanicError{Value: io.ErrUnexpectedEOF}, "*errors.errorString"},
	} {
		if got := errTypeOf(tc.err); got != tc.want {
			t.Errorf("errTypeOf(%#v) = %q, want %q", tc.err, got, tc.want)
		}
	}

	job := &Job{JID: "j", LeaseID: "l", Backtrace: 2}
	req := failRequest(job, RetryAfter(Permanent(errors.New("nope")), 1500*time.Millisecond), callers(1))
	switch {
	case req.GetCategory() != worqv1.FailureCategory_FAILURE_CATEGORY_PERMANENT:
		t.Errorf("category %s", req.GetCategory())
	case req.GetRetryAfter().AsDuration() != 1500*time.Millisecond:
		t.Errorf("retry_after %v", req.GetRetryAfter())
	case req.GetMessage() != "nope" || req.GetJid() != "j" || req.GetLeaseId() != "l":
		t.Errorf("request %v", req)
	case len(req.GetBacktrace()) != 2 || !strings.Contains(req.GetBacktrace()[0], "TestErrTypeAndFailRequest"):
		t.Errorf("backtrace %q, want 2 frames starting in the test", req.GetBacktrace())
	}
	req = failRequest(&Job{}, errors.New(strings.Repeat("é", 40_000)), callers(1))
	if len(req.GetMessage()) > failMessageMaxBytes || !strings.HasSuffix(req.GetMessage(), "é") ||
		req.GetCategory() != worqv1.FailureCategory_FAILURE_CATEGORY_TEMPORARY || req.GetRetryAfter() != nil || req.GetBacktrace() != nil {
		t.Errorf("long temporary failure: %d bytes, %s, %v, %d frames", len(req.GetMessage()), req.GetCategory(), req.GetRetryAfter(), len(req.GetBacktrace()))
	}
	if Permanent(nil) != nil || RetryAfter(nil, time.Second) != nil {
		t.Error("wrapping nil is not nil")
	}
}

func TestFailRequestCodeAndCause(t *testing.T) {
	job := &Job{JID: "j", LeaseID: "l"}
	disk := errors.New("disk full")
	req := failRequest(job, &PermanentError{Message: "cannot store", Code: "E_DISK", Cause: disk}, callers(1))
	if req.GetCategory() != worqv1.FailureCategory_FAILURE_CATEGORY_PERMANENT || req.GetMessage() != "cannot store" ||
		req.GetCode() != "E_DISK" || req.GetCause() != "disk full" {
		t.Errorf("permanent error with code and cause: %v", req)
	}
	if err := (&PermanentError{Message: "cannot store", Cause: disk}); err.Error() != "cannot store: disk full" || !errors.Is(err, disk) {
		t.Errorf("PermanentError reads %q and unwraps to its cause", err.Error())
	}
	req = failRequest(job, &TemporaryError{Message: "busy", Cause: errors.New("upstream 503"), RetryAfter: 2 * time.Second}, callers(1))
	if req.GetCategory() != worqv1.FailureCategory_FAILURE_CATEGORY_TEMPORARY || req.GetMessage() != "busy" || req.GetCode() != "" ||
		req.GetCause() != "upstream 503" || req.GetRetryAfter().AsDuration() != 2*time.Second {
		t.Errorf("temporary error with retry_after and cause: %v", req)
	}
	if req = failRequest(job, &TemporaryError{Message: "busy"}, callers(1)); req.GetRetryAfter() != nil || req.GetCause() != "" {
		t.Errorf("a TemporaryError without RetryAfter leaves the backoff: %v", req)
	}
	// Any wrapped error: its own text, and the wrapped one's as the cause.
	req = failRequest(job, Permanent(fmt.Errorf("reading config: %w", io.EOF)), callers(1))
	if req.GetMessage() != "reading config: EOF" || req.GetCause() != "EOF" || req.GetCode() != "" {
		t.Errorf("wrapped error: %v", req)
	}
	if req = failRequest(job, errors.New("plain"), callers(1)); req.GetCause() != "" {
		t.Errorf("an error wrapping none has no cause: %v", req)
	}
	// A PermanentError wrapped by fmt.Errorf is still permanent, with its code.
	if req = failRequest(job, fmt.Errorf("charging: %w", &PermanentError{Message: "declined", Code: "402"}), callers(1)); !IsPermanent(fmt.Errorf("x: %w", &PermanentError{})) ||
		req.GetCode() != "402" || req.GetCategory() != worqv1.FailureCategory_FAILURE_CATEGORY_PERMANENT {
		t.Errorf("wrapped PermanentError: %v", req)
	}
}

func TestFailRequestRateLimited(t *testing.T) {
	job := &Job{JID: "j", LeaseID: "l"}
	req := failRequest(job, RateLimited(30*time.Second), callers(1))
	if req.GetCategory() != worqv1.FailureCategory_FAILURE_CATEGORY_RATE_LIMITED || req.GetRetryAfter().AsDuration() != 30*time.Second ||
		req.GetMessage() != "rate limited" || req.GetErrtype() != "*worq.RateLimitedError" || req.GetCode() != "" {
		t.Errorf("RateLimited(30s): %v", req)
	}
	// Zero: no retry_after, the server's 1 s. Wrapped, with a message and a cause: still rate limited.
	quota := errors.New("quota used up")
	wrapped := fmt.Errorf("calling the API: %w", &RateLimitedError{Message: "429", Cause: quota})
	req = failRequest(job, wrapped, callers(1))
	if req.GetCategory() != worqv1.FailureCategory_FAILURE_CATEGORY_RATE_LIMITED || req.GetRetryAfter() != nil || req.GetCause() != "429: quota used up" {
		t.Errorf("wrapped RateLimitedError: %v", req)
	}
	if !IsRateLimited(wrapped) || IsRateLimited(quota) || !errors.Is(wrapped, quota) {
		t.Error("IsRateLimited / errors.Is through a wrapped RateLimitedError")
	}
	if err := (&RateLimitedError{Cause: quota}); err.Error() != "rate limited: quota used up" {
		t.Errorf("RateLimitedError reads %q", err.Error())
	}
	// Marked permanent on top: permanent wins.
	if req = failRequest(job, Permanent(RateLimited(time.Second)), callers(1)); req.GetCategory() != worqv1.FailureCategory_FAILURE_CATEGORY_PERMANENT {
		t.Errorf("Permanent(RateLimited): %v", req.GetCategory())
	}
}

func panicker() { panic("boom") }

func TestPanicFrames(t *testing.T) {
	var frames []string
	func() {
		defer func() {
			recover()
			frames = formatFrames(callers(1), true)
		}()
		panicker()
	}()
	if len(frames) == 0 || !strings.HasPrefix(frames[0], "github.com/worq-dev/worq/clients/go.panicker (") {
		t.Fatalf("panic frames %q, want panicker first", frames)
	}
	for _, f := range frames {
		if strings.HasPrefix(f, "runtime.") {
			t.Errorf("runtime frame kept: %s", f)
		}
	}
}

func TestJobSpecToProto(t *testing.T) {
	type point struct{ X, Y int }
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	spec := NewJobSpec("t", Args(1, "two", point{3, 4}, []string{"x"}), Kwargs(map[string]any{"k": 1.5}),
		Queue("q"), Priority(PriorityBulk), At(at), ReserveFor(2*time.Second), ExecutionTimeout(time.Minute),
		Backtrace(7), Tags(map[string]string{"a": "b"}), CorrelationID("c"),
		Retry(RetryPolicy{MaxAttempts: 1, InitialDelay: time.Second, Multiplier: 3, Backoff: BackoffLinear, OnExhausted: ExhaustedDiscard}))
	p, err := spec.toProto("job")
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case fmt.Sprint(p.GetArgs().AsSlice()) != "[1 two map[X:3 Y:4] [x]]":
		t.Errorf("args %v", p.GetArgs().AsSlice())
	case p.GetKwargs().AsMap()["k"] != 1.5 || p.GetQueue() != "q" || p.GetPriority() != worqv1.Priority_PRIORITY_BULK:
		t.Errorf("kwargs/queue/priority %v", p)
	case !p.GetAt().AsTime().Equal(at) || p.GetDelay() != nil || p.GetReserveFor().AsDuration() != 2*time.Second:
		t.Errorf("times %v", p)
	case p.GetRetry().GetMaxAttempts() != 1 || p.GetRetry().MaxFails != nil || p.GetRetry().GetMultiplier() != 3 ||
		p.GetRetry().GetBackoff() != worqv1.BackoffStrategy_BACKOFF_STRATEGY_LINEAR ||
		p.GetRetry().GetOnExhausted() != worqv1.ExhaustedAction_EXHAUSTED_ACTION_DISCARD:
		t.Errorf("retry %v", p.GetRetry())
	case p.GetBacktrace() != 7 || p.GetTags()["a"] != "b" || p.GetCorrelationId() != "c" || p.GetKwargs() == nil || p.GetCustom() != nil:
		t.Errorf("rest %v", p)
	}
	if p, _ := NewJobSpec("t").toProto("job"); p.GetArgs() != nil || p.GetRetry() != nil || p.GetReserveFor() != nil {
		t.Errorf("empty spec sets fields: %v", p)
	}
	_, err = NewJobSpec("t", Kwargs(map[string]any{"bad": func() {}})).toProto("jobs[3]")
	if !IsInvalidArgument(err) || !strings.Contains(err.Error(), "jobs[3].kwargs") {
		t.Errorf("unencodable kwargs: %v", err)
	}
}

func TestTypedErrorMapping(t *testing.T) {
	for code, is := range map[codes.Code]func(error) bool{
		codes.FailedPrecondition: IsLeaseLost,
		codes.NotFound:           IsNotFound,
		codes.InvalidArgument:    IsInvalidArgument,
		codes.Unavailable:        IsUnavailable,
		codes.DeadlineExceeded:   IsDeadlineExceeded,
	} {
		err := wrapErr(context.Background(), status.Error(code, "msg"))
		var e *Error
		if !errors.As(err, &e) || e.Code != code || e.Message != "msg" || !is(err) || Code(err) != code {
			t.Errorf("%s: %#v", code, err)
		}
		if status.Code(err) != code {
			t.Errorf("status.Code of the wrapped %s: %s", code, status.Code(err))
		}
		if is(errors.New("other")) || is(nil) {
			t.Errorf("%s matches a plain error", code)
		}
	}
	if Code(nil) != codes.OK || wrapErr(context.Background(), nil) != nil {
		t.Error("nil error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := wrapErr(ctx, status.Error(codes.Canceled, "context canceled")); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call does not unwrap to context.Canceled: %v", err)
	}
}

func TestStateNames(t *testing.T) {
	if StateDeadLetter.String() != "DEAD_LETTER" || !StateCancelled.Terminal() || StateRetrying.Terminal() ||
		CategoryPermanent.String() != "PERMANENT" || PriorityHigh.String() != "HIGH" {
		t.Error("enum names")
	}
}

func TestTruncateUTF8(t *testing.T) {
	if got := truncateUTF8("aé", 2); got != "a" {
		t.Errorf("got %q", got)
	}
	if got := truncateUTF8("abc", 5); got != "abc" {
		t.Errorf("got %q", got)
	}
}
