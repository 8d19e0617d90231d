package worq

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
)

// callers returns the program counters of the calling goroutine, skipping `skip` frames
// (0 is runtime.Callers itself).
func callers(skip int) []uintptr {
	pcs := make([]uintptr, 64)
	return pcs[:runtime.Callers(skip, pcs)]
}

// formatFrames turns program counters into "function (file:line)" lines, innermost first,
// without runtime frames. With afterPanic, frames up to runtime.gopanic are dropped first,
// so that a stack taken in a deferred recover starts at the panicking function.
func formatFrames(pcs []uintptr, afterPanic bool) []string {
	var out []string
	frames := runtime.CallersFrames(pcs)
	seenPanic := !afterPanic
	for {
		f, more := frames.Next()
		if f.Function != "" {
			switch {
			case !seenPanic:
				seenPanic = f.Function == "runtime.gopanic"
			case strings.HasPrefix(f.Function, "runtime."):
			default:
				out = append(out, fmt.Sprintf("%s (%s:%d)", f.Function, f.File, f.Line))
			}
		}
		if !more {
			break
		}
	}
	if afterPanic && !seenPanic { // no gopanic frame found: keep everything but runtime frames
		return formatFrames(pcs, false)
	}
	return out
}

// backtraceOf returns the frames to report for a handler error: the error's own
// (Backtracer, PanicError, or where Permanent/RetryAfter was called), else `fallback`.
func backtraceOf(err error, fallback []uintptr) []string {
	var bt Backtracer
	if errors.As(err, &bt) {
		return bt.Backtrace()
	}
	var p *PanicError
	if errors.As(err, &p) {
		return p.Frames
	}
	var pe *permanentError
	if errors.As(err, &pe) {
		return formatFrames(pe.frames, false)
	}
	var ra *retryAfterError
	if errors.As(err, &ra) {
		return formatFrames(ra.frames, false)
	}
	return formatFrames(fallback, false)
}

// errTypeOf names a handler error's dynamic type, e.g. "*errors.errorString" or
// "*myapp.ValidationError", looking through Permanent and RetryAfter. A panic is named after
// its value's type when that is an error, else "panic".
func errTypeOf(err error) string {
	for {
		switch e := err.(type) {
		case *permanentError:
			err = e.err
			continue
		case *retryAfterError:
			err = e.err
			continue
		case *PanicError:
			if inner, ok := e.Value.(error); ok {
				return reflect.TypeOf(inner).String()
			}
			return "panic"
		}
		return reflect.TypeOf(err).String()
	}
}

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
