// Command producer is an example Worq producer: it submits three `example.greet` jobs
// (names "ada", "grace", "linus"), waits up to 30 s for each result, prints one line per
// result and exits 0, or 1 if any job failed or did not finish in time.
//
//	cd examples/go && go run ./producer --addr 127.0.0.1:PORT --queue examples-go
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	worq "github.com/worq-dev/worq/clients/go"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:7419", "Worq server address, host:port")
	queue := flag.String("queue", "examples-go", "queue to submit to")
	flag.Parse()
	if err := run(*addr, *queue); err != nil {
		fmt.Fprintln(os.Stderr, "producer:", err)
		os.Exit(1)
	}
}

func run(addr, queue string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, err := worq.Dial(ctx, addr)
	if err != nil {
		return err
	}
	defer client.Close()

	names := []string{"ada", "grace", "linus"}
	jids := make([]string, len(names))
	for i, name := range names {
		if jids[i], err = client.Submit(ctx, "example.greet", worq.Args(name), worq.Queue(queue)); err != nil {
			return fmt.Errorf("submit %s: %w", name, err)
		}
	}
	for i, jid := range jids {
		job, err := client.WaitResult(ctx, jid, 30*time.Second)
		if err != nil {
			return fmt.Errorf("wait for %s (%s): %w", names[i], jid, err)
		}
		if job.State != worq.StateCompleted {
			return fmt.Errorf("job %s (%s) ended %s: %+v", jid, names[i], job.State, job.Failure)
		}
		fmt.Println(string(job.Result))
	}
	return nil
}
