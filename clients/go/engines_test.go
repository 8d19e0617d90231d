package worq

import (
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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
}
