// Package worq is the Go client and worker library for Worq, a durable polyglot
// background-job server.
//
// A producer submits jobs and, if it wants, waits for their results:
//
//	client, err := worq.Dial(ctx, "127.0.0.1:7419")
//	jid, err := client.Submit(ctx, "email.send", worq.Args("ada@example.com"), worq.Queue("mail"))
//	job, err := client.WaitResult(ctx, jid, 30*time.Second)
//
// A worker registers handlers by job type and runs until its context is cancelled (or the
// server tells it to terminate), then shuts down gracefully:
//
//	w := worq.NewWorker(client, worq.WorkerOptions{Queues: []string{"mail"}, Concurrency: 10})
//	w.Handle("email.send", func(ctx context.Context, job *worq.Job) (any, error) {
//		return nil, send(ctx, job.Args[0].(string))
//	})
//	err = w.Run(ctx)
//
// The worker holds one Lease stream per process, with Concurrency as its credits (on a
// partitioned cluster, one stream per partition its queues live in, each to that
// partition's own server, a queue spread over several partitions in the stream to each,
// sharing Concurrency: moved to the streams whose partitions have jobs waiting; see
// WithPartitionRouting). It renews
// each running job's lease automatically (every reserve_for / 3), cancels the handler's
// context at the job's execution deadline, reconnects with jittered exponential backoff
// when the stream drops, and reports outcomes with Ack and Fail, retrying them while the
// server is unreachable. A handler's return value becomes the job's result; an error fails
// the attempt (see Permanent and RetryAfter), RateLimited gives the job back for later
// without spending an attempt, and a panic is recovered and failed.
//
// Every call to the server returns a *Error carrying the gRPC code; IsNotFound,
// IsInvalidArgument, IsLeaseLost and IsUnavailable branch on it.
package worq
