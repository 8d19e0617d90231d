// Command worker is an example Worq worker: it handles `example.greet` jobs (args [name])
// by returning "hello, {name}", until SIGTERM or SIGINT, then shuts down gracefully and
// exits 0.
//
//	cd examples/go && go run ./worker --addr 127.0.0.1:PORT --queue examples-go
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	worq "github.com/worq-dev/worq/clients/go"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:7419", "Worq server address, host:port")
	queue := flag.String("queue", "examples-go", "queue to take jobs from")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	client, err := worq.Dial(ctx, *addr, worq.WithLogger(logger))
	if err != nil {
		logger.Error("dial failed", "error", err)
		os.Exit(1)
	}
	defer client.Close()

	w := worq.NewWorker(client, worq.WorkerOptions{Queues: []string{*queue}, Concurrency: 5})
	w.Handle("example.greet", func(ctx context.Context, job *worq.Job) (any, error) {
		if len(job.Args) != 1 {
			return nil, worq.Permanent(fmt.Errorf("want args [name], got %v", job.Args))
		}
		name, ok := job.Args[0].(string)
		if !ok {
			return nil, worq.Permanent(fmt.Errorf("name is %T, want a string", job.Args[0]))
		}
		return "hello, " + name, nil
	})
	if err := w.Run(ctx); err != nil {
		logger.Error("worker failed", "error", err)
		os.Exit(1)
	}
}
