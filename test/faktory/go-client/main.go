// A program on Faktory's own Go client (github.com/contribsys/faktory/client), unchanged,
// against Worq's Faktory port: the test runs one step per invocation and reads its JSON line.
//
//	go-client push <queue> <jid>...      PUSH each jid (jobtype GoJob, args [jid])
//	go-client pushbulk <queue> <jid>...  PUSHB them (a jid shorter than 8 is refused)
//	go-client work <queues> <n> <fail>   FETCH n jobs of the queues (a,b,…); FAIL those whose jid is <fail>, ACK the rest
//	go-client beat                        BEAT once; prints the state the server answers
//	go-client info                        INFO
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	faktory "github.com/contribsys/faktory/client"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "go-client:", err)
		os.Exit(1)
	}
}

func emit(value any) error {
	line, err := json.Marshal(value)
	if err != nil {
		return err
	}
	fmt.Println(string(line))
	return nil
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: go-client push|pushbulk|work|beat|info ...")
	}
	// The process's worker id: HELLO carries it, BEAT names it.
	if wid := os.Getenv("GO_CLIENT_WID"); wid != "" {
		faktory.RandomProcessWid = wid
	}
	client, err := faktory.Open()
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer client.Close()
	switch args[0] {
	case "push":
		for _, jid := range args[2:] {
			job := faktory.NewJob("GoJob", jid)
			job.Jid = jid
			job.Queue = args[1]
			if err := client.Push(job); err != nil {
				return emit(map[string]any{"error": err.Error()})
			}
		}
		return emit(map[string]any{"pushed": len(args) - 2})
	case "pushbulk":
		jobs := []*faktory.Job{}
		for _, jid := range args[2:] {
			job := faktory.NewJob("GoJob", jid)
			job.Jid = jid
			job.Queue = args[1]
			jobs = append(jobs, job)
		}
		refused, err := client.PushBulk(jobs)
		if err != nil {
			return err
		}
		return emit(map[string]any{"refused": refused})
	case "work":
		n, _ := strconv.Atoi(args[2])
		handled := []map[string]any{}
		for len(handled) < n {
			job, err := client.Fetch(strings.Split(args[1], ",")...)
			if err != nil {
				return fmt.Errorf("fetch: %w", err)
			}
			if job == nil {
				continue
			}
			entry := map[string]any{"jid": job.Jid, "jobtype": job.Type, "args": job.Args, "retry": job.Retry}
			if job.Failure != nil {
				entry["retry_count"] = job.Failure.RetryCount
				entry["error_message"] = job.Failure.ErrorMessage
			}
			if job.Jid == args[3] {
				// Shaped like runtime/debug.Stack(): the client drops its first three lines.
				stack := []byte("goroutine 1 [running]:\nruntime/debug.Stack()\n\tstack.go:26\nmain.go:1\nmain.go:2")
				if err := client.Fail(job.Jid, errors.New("go says no"), stack); err != nil {
					return fmt.Errorf("fail: %w", err)
				}
				entry["reported"] = "FAIL"
			} else {
				if err := client.Ack(job.Jid); err != nil {
					return fmt.Errorf("ack: %w", err)
				}
				entry["reported"] = "ACK"
			}
			handled = append(handled, entry)
		}
		return emit(map[string]any{"handled": handled})
	case "beat":
		state, err := client.Beat()
		if err != nil {
			return fmt.Errorf("beat: %w", err)
		}
		return emit(map[string]any{"state": state})
	case "info":
		info, err := client.Info()
		if err != nil {
			return fmt.Errorf("info: %w", err)
		}
		return emit(info)
	}
	return fmt.Errorf("unknown step %q", args[0])
}
