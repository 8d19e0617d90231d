package worq_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	worq "github.com/worq-dev/worq/clients/go"
)

// The README's quickstart: a producer and a worker on one client.
func Example() {
	ctx := context.Background()
	client, _ := worq.Dial(ctx, "127.0.0.1:7419")
	jid, _ := client.Submit(ctx, "example.greet", worq.Args("ada"), worq.Queue("greetings"))
	job, _ := client.WaitResult(ctx, jid, 30*time.Second)
	fmt.Println(job.State, string(job.Result))

	w := worq.NewWorker(client, worq.WorkerOptions{Queues: []string{"greetings"}, Concurrency: 10})
	w.Handle("example.greet", func(ctx context.Context, job *worq.Job) (any, error) {
		return "hello, " + job.Args[0].(string), nil
	})
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

func ExampleClient_Submit() {
	ctx := context.Background()
	client, err := worq.Dial(ctx, "127.0.0.1:7419")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	jid, err := client.Submit(ctx, "email.send",
		worq.Args("ada@example.com", map[string]any{"template": "welcome"}),
		worq.Queue("mail"),
		worq.Priority(worq.PriorityHigh),
		worq.Delay(time.Minute),
		worq.Retry(worq.RetryPolicy{MaxAttempts: 5, InitialDelay: 10 * time.Second}),
		worq.ReserveFor(30*time.Second),
	)
	switch {
	case worq.IsInvalidArgument(err):
		log.Fatalf("bad job: %v", err) // the message names the field, e.g. job.queue
	case worq.IsUnavailable(err):
		log.Fatalf("server down, try again: %v", err)
	case err != nil:
		log.Fatal(err)
	}
	fmt.Println("submitted", jid)
}

func ExampleWorker_Handle() {
	client, _ := worq.Dial(context.Background(), "127.0.0.1:7419")
	w := worq.NewWorker(client, worq.WorkerOptions{Queues: []string{"mail"}})
	w.Handle("email.send", func(ctx context.Context, job *worq.Job) (any, error) {
		to, ok := job.Args[0].(string)
		if !ok {
			// Retrying will not help: FAILED at once.
			return nil, worq.Permanent(fmt.Errorf("args[0] is %T, want an address", job.Args[0]))
		}
		if err := send(ctx, to); errors.Is(err, errRateLimited) {
			// Run again in a minute, without spending an attempt.
			return nil, worq.RateLimited(time.Minute)
		} else if err != nil {
			return nil, err // TEMPORARY: retried per the job's retry policy
		}
		return map[string]any{"sent_to": to}, nil // stored as JSON
	})
}

var errRateLimited = errors.New("rate limited")

func send(ctx context.Context, to string) error { return ctx.Err() }
