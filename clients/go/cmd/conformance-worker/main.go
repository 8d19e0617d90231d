// Command conformance-worker is the Go library's conformance worker (clients/CONFORMANCE.md):
// a worker built only on the public API of package worq that prints one JSON line per
// event on stdout, for test/conformance to follow.
//
//	cd clients/go && go build -o ../../.tools/bin/go-conformance-worker ./cmd/conformance-worker
//	.tools/bin/go-conformance-worker --addr 127.0.0.1:PORT --queue q --lang go
//
// --queue may list several queues, comma-separated (--queue a,b): one worker leases them
// all, in that order (on a partitioned cluster, one stream per partition of theirs).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	worq "github.com/worq-dev/worq/clients/go"
)

// events writes JSON lines to stdout, one write per event (stdout is unbuffered in Go).
type events struct{ mu sync.Mutex }

func (e *events) emit(fields map[string]any) {
	line, err := json.Marshal(fields)
	if err != nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	os.Stdout.Write(append(line, '\n'))
}

func main() {
	addr := flag.String("addr", "", "server address, host:port (required)")
	queue := flag.String("queue", "", "the queue to lease from, or several comma-separated, in order (required)")
	lang := flag.String("lang", "", "language tag used in results (required; go)")
	workerID := flag.String("worker-id", "", "worker id (default: the library's generated id)")
	concurrency := flag.Int("concurrency", 5, "handlers at once (Lease credits)")
	shutdownMs := flag.Int("shutdown-timeout-ms", 5000, "graceful-shutdown deadline in ms")
	flag.Parse()
	queues := strings.Split(*queue, ",")
	if *addr == "" || slices.Contains(queues, "") || *lang == "" {
		fmt.Fprintln(os.Stderr, "conformance-worker: --addr, --queue and --lang are required")
		flag.Usage()
		os.Exit(2)
	}

	level := slog.LevelInfo
	if os.Getenv("WORQ_LOG_LEVEL") == "debug" {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	client, err := worq.Dial(ctx, *addr, worq.WithLogger(logger))
	if err != nil {
		logger.Error("dial failed", "error", err)
		os.Exit(1)
	}
	defer client.Close()

	out := &events{}
	var readyOnce sync.Once
	w := worq.NewWorker(client, worq.WorkerOptions{
		Queues:          queues,
		Concurrency:     *concurrency,
		WorkerID:        *workerID,
		ShutdownTimeout: time.Duration(*shutdownMs) * time.Millisecond,
		Logger:          logger,
		Hooks: worq.Hooks{
			OnReady: func(id string) {
				readyOnce.Do(func() { out.emit(map[string]any{"event": "ready", "lang": *lang, "worker_id": id}) })
			},
			OnStart: func(job *worq.Job) {
				out.emit(map[string]any{"event": "start", "jid": job.JID, "attempt": job.Attempt, "type": job.Type})
			},
			OnDone: func(job *worq.Job, outcome worq.Outcome, _ error) {
				out.emit(map[string]any{"event": "done", "jid": job.JID, "outcome": string(outcome)})
			},
			OnReconnecting: func(delay time.Duration, reason error) {
				msg := ""
				if reason != nil {
					msg = reason.Error()
				}
				out.emit(map[string]any{"event": "reconnecting", "delay_ms": delay.Milliseconds(), "reason": msg})
			},
		},
	})
	w.Handle("scenario", scenario)
	w.Handle(*lang+".double", func(_ context.Context, job *worq.Job) (any, error) {
		if len(job.Args) < 1 {
			return nil, worq.Permanent(errors.New("args[0] is required"))
		}
		n, ok := job.Args[0].(float64)
		if !ok {
			return nil, worq.Permanent(fmt.Errorf("args[0] is %T, want a number", job.Args[0]))
		}
		return *lang + ":" + strconv.FormatFloat(n*2, 'f', -1, 64), nil
	})

	if err := w.Run(ctx); err != nil {
		logger.Error("worker failed", "error", err)
		out.emit(map[string]any{"event": "stopped", "code": 1})
		os.Exit(1)
	}
	out.emit(map[string]any{"event": "stopped", "code": 0})
}

// scenario does what the job's kwargs.action says (clients/CONFORMANCE.md).
// rateLimitedOnce holds the jobs this process answered rate-limited (the attempt is not
// spent, so job.Attempt cannot tell).
var rateLimitedOnce sync.Map

func scenario(ctx context.Context, job *worq.Job) (any, error) {
	action, _ := job.Kwargs["action"].(string)
	result, _ := job.Kwargs["result"].(string)
	number := func(key string) int {
		n, _ := job.Kwargs[key].(float64)
		return int(n)
	}
	switch action {
	case "succeed":
		return result, nil
	case "fail_times":
		if job.Attempt <= number("times") {
			return nil, fmt.Errorf("planned failure %d", job.Attempt)
		}
		return result, nil
	case "permanent":
		message, _ := job.Kwargs["message"].(string)
		return nil, worq.Permanent(errors.New(message))
	case "sleep":
		timer := time.NewTimer(time.Duration(number("ms")) * time.Millisecond)
		defer timer.Stop()
		select {
		case <-timer.C:
			return result, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("sleep interrupted: %w", context.Cause(ctx))
		}
	case "checkpoint_resume":
		if len(job.Checkpoint) == 0 {
			saved, _ := job.Kwargs["checkpoint"].(string)
			if err := worq.Checkpoint(ctx, []byte(saved)); err != nil {
				return nil, err
			}
			return nil, errors.New("planned failure after a checkpoint")
		}
		return "resumed from " + string(job.Checkpoint), nil
	case "progress":
		message, _ := job.Kwargs["message"].(string)
		if err := worq.ReportProgress(ctx, number("percent"), message); err != nil {
			return nil, err
		}
		timer := time.NewTimer(time.Duration(number("ms")) * time.Millisecond)
		defer timer.Stop()
		select {
		case <-timer.C:
			return result, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("sleep interrupted: %w", context.Cause(ctx))
		}
	case "retry_after":
		if job.Attempt <= 1 {
			return nil, worq.RetryAfter(errors.New("retry later"), time.Duration(number("ms"))*time.Millisecond)
		}
		return "retried", nil
	case "permanent_code":
		message, _ := job.Kwargs["message"].(string)
		code, _ := job.Kwargs["code"].(string)
		cause, _ := job.Kwargs["cause"].(string)
		return nil, &worq.PermanentError{Message: message, Code: code, Cause: errors.New(cause)}
	case "temporary_cause":
		if job.Attempt <= 1 {
			message, _ := job.Kwargs["message"].(string)
			cause, _ := job.Kwargs["cause"].(string)
			return nil, &worq.TemporaryError{Message: message, Cause: errors.New(cause), RetryAfter: time.Duration(number("ms")) * time.Millisecond}
		}
		return "retried", nil
	case "rate_limited":
		if _, seen := rateLimitedOnce.LoadOrStore(job.JID, true); !seen {
			return nil, &worq.RateLimitedError{Message: "turned away", RetryAfter: time.Duration(number("ms")) * time.Millisecond}
		}
		return "after the limit", nil
	default:
		return nil, worq.Permanent(fmt.Errorf("unknown scenario action %q", action))
	}
}
