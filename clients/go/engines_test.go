package worq

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	worqv1 "github.com/worq-dev/worq/gen/go/worq/v1"
)

// `worq serve --engines 2`: the client routes to each engine itself; SIGKILL the engine of a
// queue and the next calls, whose connection is refused, go through the parent, which waits
// for the engine started again, instead of failing UNAVAILABLE.
func TestCallToAnEngineJustKilledGoesThroughTheNode(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--engines", "2")
	c := dial(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	queue := ""
	for i := 0; queueHome(queue, 2) != 1 || queue == ""; i++ {
		queue = fmt.Sprintf("kq-%d", i)
	}
	killEngine := func() {
		out, err := exec.Command("pgrep", "-P", strconv.Itoa(srv.cmd.Process.Pid)).Output()
		if err != nil {
			t.Fatalf("pgrep: %v", err)
		}
		var pids []int
		for _, field := range strings.Fields(string(out)) {
			pid, _ := strconv.Atoi(field)
			pids = append(pids, pid)
		}
		sort.Ints(pids)
		if len(pids) != 2 {
			t.Fatalf("engines: %v", pids)
		}
		// The later one: engine 1, or its process started again.
		if err := syscall.Kill(pids[1], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	first, err := c.Submit(ctx, "t", Queue(queue))
	if err != nil {
		t.Fatal(err)
	}
	killEngine()
	second, err := c.Submit(ctx, "t", Queue(queue))
	if err != nil {
		t.Fatalf("submit after the engine was killed: %v", err)
	}
	if job, err := c.GetJob(ctx, second); err != nil || job.Queue != queue {
		t.Fatalf("GetJob(%s) = %v, %v", second, job, err)
	}
	time.Sleep(2 * time.Second)
	killEngine()
	if job, err := c.GetJob(ctx, first); err != nil || job.JID != first {
		t.Fatalf("GetJob(%s) after the second kill = %v, %v", first, job, err)
	}
	// The other calls that name a job, a new job or a batch of that engine, all sent at once
	// just after a third kill: each one's connection is refused, and each goes through the node.
	// A batch without a parent is placed by the node (on engine 0 here): made on engine 1 itself,
	// once it serves again and the map names it.
	time.Sleep(2 * time.Second)
	<-c.routes.refresh()
	created, err := c.routes.routeOf(1).producer.CreateBatch(ctx, &worqv1.CreateBatchRequest{Batch: &worqv1.BatchSpec{Description: "killed"}})
	if err != nil {
		t.Fatal(err)
	}
	batch := batchFromProto(created.GetBatch())
	if c.routes.ofID(batch.ID) != 1 {
		t.Fatalf("batch %s is not of engine 1", batch.ID)
	}
	killEngine()
	errStop := errors.New("seen")
	calls := map[string]func() error{
		"WaitResult": func() error {
			if _, err := c.WaitResult(ctx, first, 0); !IsDeadlineExceeded(err) {
				return fmt.Errorf("%v, want DEADLINE_EXCEEDED (the job has not run)", err)
			}
			return nil
		},
		"Run": func() error {
			if _, err := c.Run(ctx, "t", 0, Queue(queue)); !IsDeadlineExceeded(err) {
				return fmt.Errorf("%v, want DEADLINE_EXCEEDED (no worker)", err)
			}
			return nil
		},
		"CollectChildren": func() error {
			if children, finished, err := c.CollectChildren(ctx, first, 0); err != nil || len(children) != 0 || !finished {
				return fmt.Errorf("%v, %v, %v", children, finished, err)
			}
			return nil
		},
		"WatchJob": func() error {
			if err := c.WatchJob(ctx, first, func(job *Job) error { return errStop }); !errors.Is(err, errStop) {
				return fmt.Errorf("%v, want the job seen", err)
			}
			return nil
		},
		"GetBatch": func() error {
			if got, err := c.GetBatch(ctx, batch.ID); err != nil || got.ID != batch.ID {
				return fmt.Errorf("%v, %v", got, err)
			}
			return nil
		},
	}
	failed := make(chan string, len(calls))
	for name, call := range calls {
		go func() {
			if err := call(); err != nil {
				failed <- fmt.Sprintf("%s after the third kill: %v", name, err)
			} else {
				failed <- ""
			}
		}()
	}
	for range calls {
		if message := <-failed; message != "" {
			t.Error(message)
		}
	}
}

// `worq serve --engines 2`: a batch without a parent lives with its callback job (its engine
// stores it), so a callback of either engine's queue is taken, and that queue's jobs join it;
// a job of the other engine's queue is refused by name.
func TestBatchLivesWithItsCallbackJob(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--engines", "2")
	c := dial(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	queueIn := func(partition int) string { return queueOfEngine("cbq-", partition) }
	for partition := 0; partition < 2; partition++ {
		queue, other := queueIn(partition), queueIn(1-partition)
		batch, err := c.CreateBatch(ctx, BatchSpec{OnSuccess: &JobSpec{Type: "done", Queue: queue}})
		if err != nil {
			t.Fatalf("CreateBatch with a callback in %s (partition %d): %v", queue, partition, err)
		}
		if got := partitionOfID(batch.ID, 2); got != partition {
			t.Fatalf("batch %s lives in partition %d, its callback's queue in %d", batch.ID, got, partition)
		}
		if _, err := c.Submit(ctx, "t", Queue(queue), InBatch(batch.ID)); err != nil {
			t.Fatalf("a job of %s joining: %v", queue, err)
		}
		_, err = c.Submit(ctx, "t", Queue(other), InBatch(batch.ID))
		if err == nil || !strings.Contains(err.Error(), "batch_id: batch "+batch.ID+" lives in partition") {
			t.Fatalf("a job of the other engine's queue joining: %v", err)
		}
		if got, err := c.GetBatch(ctx, batch.ID); err != nil || got.Total != 1 {
			t.Fatalf("GetBatch = %+v, %v; want one job", got, err)
		}
	}
}

func TestChainOverBothEngines(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--engines", "2")
	c := dial(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	queueIn := func(partition int) string { return queueOfEngine("chq-", partition) }
	// One batch, all or none, over both engines: the first job's engine stores it and leaves
	// the other its part; the chain's links wait across them.
	order := []int{1, 0, 1}
	specs := make([]JobSpec, len(order))
	for i, partition := range order {
		specs[i] = JobSpec{Type: "t", Queue: queueIn(partition)}
	}
	jids, err := c.SubmitBatch(ctx, specs, Shape(ShapeChain))
	if err != nil {
		t.Fatalf("SubmitBatch over both engines: %v", err)
	}
	for i, jid := range jids {
		if got := partitionOfID(jid, 2); got != order[i] {
			t.Fatalf("job %d (%s) lives in partition %d, its queue in %d", i, jid, got, order[i])
		}
		job, err := c.GetJob(ctx, jid)
		if err != nil {
			t.Fatalf("GetJob %s: %v", jid, err)
		}
		want := StatePending
		if i == 0 {
			want = StateScheduled
		}
		if job.State != want {
			t.Fatalf("job %d is %v, want %v", i, job.State, want)
		}
	}
	// What the other engine's job may not carry is refused by name.
	_, err = c.SubmitBatch(ctx, []JobSpec{{Type: "t", Queue: queueIn(0)}, {Type: "t", Queue: queueIn(1), IdempotencyKey: "k"}})
	if err == nil || !strings.Contains(err.Error(), "jobs[1].idempotency_key") {
		t.Fatalf("a keyed job of the other engine: %v", err)
	}
}

// queueOfEngine is the first queue named prefix plus a number that lives in engine partition of two.
func queueOfEngine(prefix string, partition int) string {
	for i := 0; ; i++ {
		if queue := fmt.Sprintf("%s%d", prefix, i); queueHome(queue, 2) == partition {
			return queue
		}
	}
}
