// Command worq-raw-go is the bench's raw-stub peer in Go: the generated grpc-go stubs, no
// library. One Submit RPC per job (50 in flight), one Lease stream with credits =
// concurrency, one Ack RPC per job. It speaks the harness's child protocol
// (bench/lib/child.mjs): config as JSON in the last argument, JSON lines on stdout, one-word
// commands ("go", "stop", "exit") on stdin; stdin closing counts as "exit".
//
//	go build -o worq-raw-go . && ./worq-raw-go producer|worker '{"address":"127.0.0.1:7419",...}'
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	worqv1 "github.com/worq-dev/worq/gen/go/worq/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"
)

// The job type and arguments every peer submits (bench/peers/payload.mjs).
const jobType = "bench.noop"

type config struct {
	Address     string `json:"address"`
	Queue       string `json:"queue"`
	N           int    `json:"n"`
	Mode        string `json:"mode"`
	Concurrency int    `json:"concurrency"`
	FirstSeq    int    `json:"firstSeq"`
	Expect      int    `json:"expect"`
}

var (
	out      = json.NewEncoder(os.Stdout)
	outMu    sync.Mutex
	commands = map[string]chan struct{}{"go": make(chan struct{}), "stop": make(chan struct{})}
)

func send(message map[string]any) {
	outMu.Lock()
	defer outMu.Unlock()
	if err := out.Encode(message); err != nil {
		os.Exit(1)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, err)
	send(map[string]any{"type": "error", "message": err.Error()})
	os.Exit(1)
}

// readCommands closes the channel of each command as it arrives; "exit" or EOF exits.
func readCommands() {
	scanner := bufio.NewScanner(os.Stdin)
	for scanner.Scan() {
		name := strings.TrimSpace(scanner.Text())
		if name == "exit" {
			os.Exit(0)
		}
		if ch, ok := commands[name]; ok {
			select {
			case <-ch:
			default:
				close(ch)
			}
		}
	}
	os.Exit(0)
}

func nowMs() float64 { return float64(time.Now().UnixNano()) / 1e6 }

var hwmPattern = regexp.MustCompile(`(?m)^VmHWM:\s+(\d+) kB`)

// selfStats is this process's CPU seconds (utime + stime, all threads) and peak RSS in MiB, from /proc/self.
func selfStats() (cpuSec float64, hwmMiB float64) {
	stat, err := os.ReadFile("/proc/self/stat")
	if err == nil {
		text := string(stat)
		fields := strings.Fields(text[strings.LastIndexByte(text, ')')+2:])
		utime, _ := strconv.ParseFloat(fields[11], 64)
		stime, _ := strconv.ParseFloat(fields[12], 64)
		cpuSec = (utime + stime) / 100 // CLK_TCK
	}
	status, err := os.ReadFile("/proc/self/status")
	if err == nil {
		if m := hwmPattern.FindSubmatch(status); m != nil {
			kib, _ := strconv.ParseFloat(string(m[1]), 64)
			hwmMiB = kib / 1024
		}
	}
	return
}

func jobArgs(seq int) *structpb.ListValue {
	id := fmt.Sprintf("%06d", seq%1_000_000)
	list, err := structpb.NewList([]any{map[string]any{
		"seq": seq, "user": "user-" + id, "email": "user" + id + "@example.com", "plan": "pro", "ts": 1_763_780_000_000 + seq,
	}})
	if err != nil {
		fatal(err)
	}
	return list
}

func summary(values []float64) map[string]any {
	if len(values) == 0 {
		return nil
	}
	sort.Float64s(values)
	at := func(p float64) float64 { return values[min(len(values)-1, int(p*float64(len(values))))] }
	return map[string]any{"n": len(values), "p50": at(0.5), "p99": at(0.99), "max": values[len(values)-1]}
}

func connect(cfg config) *grpc.ClientConn {
	conn, err := grpc.NewClient(cfg.Address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fatal(err)
	}
	if _, err := worqv1.NewAdminServiceClient(conn).GetServerInfo(context.Background(), &worqv1.GetServerInfoRequest{}); err != nil {
		fatal(err)
	}
	return conn
}

func runProducer(cfg config) {
	if cfg.Mode != "single" {
		fatal(fmt.Errorf("the Go raw-stub peer runs the single-submit scenario only, not %q", cfg.Mode))
	}
	producer := worqv1.NewProducerServiceClient(connect(cfg))
	send(map[string]any{"type": "ready", "pid": os.Getpid()})
	<-commands["go"]
	cpu0, _ := selfStats()
	startedAt := nowMs()
	var next atomic.Int64
	var mu sync.Mutex
	callMs := make([]float64, 0, cfg.N)
	var wg sync.WaitGroup
	for range min(cfg.Concurrency, cfg.N) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= cfg.N {
					return
				}
				t0 := time.Now()
				_, err := producer.Submit(context.Background(), &worqv1.SubmitRequest{Job: &worqv1.JobSpec{
					Type: jobType, Queue: cfg.Queue, Args: jobArgs(cfg.FirstSeq + i),
				}})
				if err != nil {
					fatal(err)
				}
				ms := float64(time.Since(t0).Nanoseconds()) / 1e6
				mu.Lock()
				callMs = append(callMs, ms)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	endedAt := nowMs()
	cpu1, hwm := selfStats()
	send(map[string]any{"type": "result", "n": cfg.N, "startedAt": startedAt, "endedAt": endedAt, "callMs": summary(callMs), "cpuSec": cpu1 - cpu0, "hwmMiB": hwm})
	select {} // until "exit"
}

func runWorker(cfg config) {
	worker := worqv1.NewWorkerServiceClient(connect(cfg))
	send(map[string]any{"type": "ready", "pid": os.Getpid()})
	<-commands["go"]
	cpu0, _ := selfStats()
	goAt := nowMs()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := worker.Lease(ctx, &worqv1.LeaseRequest{Queues: []string{cfg.Queue}, WorkerId: fmt.Sprintf("bench-raw-go-%d", os.Getpid()), Credits: uint32(cfg.Concurrency)})
	if err != nil {
		fatal(err)
	}
	var count atomic.Int64
	var firstAt atomic.Value
	done := func() {
		c := count.Add(1)
		if c == 1 {
			firstAt.Store(nowMs())
		}
		if c == int64(cfg.Expect) {
			lastAt := nowMs()
			cpu1, hwm := selfStats()
			send(map[string]any{"type": "done", "count": c, "goAt": goAt, "firstAt": firstAt.Load(), "lastAt": lastAt, "cpuSec": cpu1 - cpu0, "hwmMiB": hwm})
		}
	}
	var inFlight sync.WaitGroup
	reading := make(chan struct{})
	go func() {
		defer close(reading)
		for {
			response, err := stream.Recv()
			if err != nil {
				if ctx.Err() == nil {
					fatal(err)
				}
				return
			}
			jobs := response.GetJobs()
			if jobs == nil {
				continue
			}
			for _, leased := range jobs.GetJobs() {
				inFlight.Add(1)
				go func(leased *worqv1.LeasedJob) {
					defer inFlight.Done()
					if _, err := worker.Ack(context.Background(), &worqv1.AckRequest{Jid: leased.GetJob().GetJid(), LeaseId: leased.GetLeaseId()}); err != nil {
						fatal(err)
					}
					done()
				}(leased)
			}
		}
	}()
	<-commands["stop"]
	cancel()
	<-reading
	inFlight.Wait()
	_, hwm := selfStats()
	send(map[string]any{"type": "stopped", "count": count.Load(), "hwmMiB": hwm})
	select {} // until "exit"
}

func main() {
	if len(os.Args) != 3 || (os.Args[1] != "producer" && os.Args[1] != "worker") {
		fmt.Fprintln(os.Stderr, "usage: worq-raw-go producer|worker CONFIG_JSON")
		os.Exit(2)
	}
	var cfg config
	if err := json.Unmarshal([]byte(os.Args[2]), &cfg); err != nil {
		fatal(err)
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 50
	}
	go readCommands()
	if os.Args[1] == "producer" {
		runProducer(cfg)
	} else {
		runWorker(cfg)
	}
}
