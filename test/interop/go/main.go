// Command smoke is an interop smoke test: it drives a running Worq server through the
// generated Go stubs (Submit -> Lease -> Ack -> GetJob, plus one INVALID_ARGUMENT check),
// prints one JSON line on stdout and exits 0 when every check passed, 1 otherwise.
//
//	cd test/interop/go && go run . --addr 127.0.0.1:PORT
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"time"

	worqv1 "github.com/worq-dev/worq/gen/go/worq/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

const (
	jobType  = "go.smoke"
	queue    = "go-smoke"
	workerID = "go-smoke-1"
	payload  = "hello"
	result   = "go-done"
)

var wantArgs = []any{1.0, "two"} // ListValue numbers are doubles

type report struct {
	Client            string            `json:"client"`
	Addr              string            `json:"addr"`
	OK                bool              `json:"ok"`
	Error             string            `json:"error,omitempty"`
	Jid               string            `json:"jid,omitempty"`
	SubmitState       string            `json:"submit_state,omitempty"`
	LeaseID           string            `json:"lease_id,omitempty"`
	Attempt           uint32            `json:"attempt,omitempty"`
	KeepalivesSkipped int               `json:"keepalives_skipped"`
	State             string            `json:"state,omitempty"`
	Result            string            `json:"result,omitempty"`
	EmptyType         map[string]string `json:"empty_type,omitempty"`
}

func rpcErr(step string, err error) error {
	s := status.Convert(err)
	return fmt.Errorf("%s failed: %s: %s", step, s.Code(), s.Message())
}

func run(addr string, timeout time.Duration, r *report) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("dial %s: %w", addr, err)
	}
	defer conn.Close()
	producer := worqv1.NewProducerServiceClient(conn)
	worker := worqv1.NewWorkerServiceClient(conn)
	admin := worqv1.NewAdminServiceClient(conn)
	step := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), timeout)
	}

	args, err := structpb.NewList([]any{1, "two"})
	if err != nil {
		return err
	}
	ctx, cancel := step()
	submitted, err := producer.Submit(ctx, &worqv1.SubmitRequest{Job: &worqv1.JobSpec{
		Type: jobType, Queue: queue, Args: args, Payload: []byte(payload),
	}})
	cancel()
	if err != nil {
		return rpcErr("Submit", err)
	}
	jid := submitted.GetJid()
	r.Jid, r.SubmitState = jid, submitted.GetState().String()
	if jid == "" {
		return errors.New("Submit returned an empty jid")
	}

	// The stream's deadline bounds the wait for the job; it is cancelled once acked.
	streamCtx, cancelStream := step()
	defer cancelStream()
	stream, err := worker.Lease(streamCtx, &worqv1.LeaseRequest{Queues: []string{queue}, WorkerId: workerID, Credits: 1})
	if err != nil {
		return rpcErr("Lease", err)
	}
	var leased *worqv1.LeasedJob
	for leased == nil {
		msg, err := stream.Recv()
		if err == io.EOF {
			return errors.New("Lease stream ended without a job")
		}
		if err != nil {
			return rpcErr("Lease", err)
		}
		switch kind := msg.GetKind().(type) {
		case *worqv1.LeaseResponse_Keepalive:
			r.KeepalivesSkipped++
		case *worqv1.LeaseResponse_Jobs:
			if n := len(kind.Jobs.GetJobs()); n != 1 {
				return fmt.Errorf("credits=1 but got %d jobs", n)
			}
			leased = kind.Jobs.GetJobs()[0]
		default:
			return fmt.Errorf("unexpected Lease message before the job: %v", msg)
		}
	}
	job := leased.GetJob()
	r.LeaseID, r.Attempt = leased.GetLeaseId(), job.GetAttempt()
	switch {
	case job.GetJid() != jid:
		return fmt.Errorf("leased jid %q, submitted %q", job.GetJid(), jid)
	case leased.GetLeaseId() == "":
		return errors.New("leased job has an empty lease_id")
	case job.GetType() != jobType:
		return fmt.Errorf("leased type %q", job.GetType())
	case job.GetQueue() != queue:
		return fmt.Errorf("leased queue %q", job.GetQueue())
	case string(job.GetPayload()) != payload:
		return fmt.Errorf("leased payload %q", job.GetPayload())
	case !reflect.DeepEqual(job.GetArgs().AsSlice(), wantArgs):
		return fmt.Errorf("leased args %v, want %v", job.GetArgs().AsSlice(), wantArgs)
	}

	// Ack while the stream is still open: the lease belongs to this worker's stream.
	ctx, cancel = step()
	_, err = worker.Ack(ctx, &worqv1.AckRequest{Jid: jid, LeaseId: leased.GetLeaseId(), Result: []byte(result)})
	cancel()
	if err != nil {
		return rpcErr("Ack", err)
	}
	cancelStream()

	ctx, cancel = step()
	got, err := admin.GetJob(ctx, &worqv1.GetJobRequest{Jid: jid})
	cancel()
	if err != nil {
		return rpcErr("GetJob", err)
	}
	r.State, r.Result = got.GetJob().GetState().String(), string(got.GetJob().GetResult())
	if got.GetJob().GetState() != worqv1.JobState_JOB_STATE_COMPLETED {
		return fmt.Errorf("GetJob state %s, want JOB_STATE_COMPLETED", r.State)
	}
	if r.Result != result {
		return fmt.Errorf("GetJob result %q, want %q", r.Result, result)
	}

	ctx, cancel = step()
	bad, err := producer.Submit(ctx, &worqv1.SubmitRequest{Job: &worqv1.JobSpec{Type: "", Queue: queue}})
	cancel()
	if err == nil {
		return fmt.Errorf("Submit with an empty type succeeded (jid %s), want InvalidArgument", bad.GetJid())
	}
	s := status.Convert(err)
	r.EmptyType = map[string]string{"code": s.Code().String(), "details": s.Message()}
	if s.Code() != codes.InvalidArgument {
		return fmt.Errorf("Submit with an empty type: %s, want InvalidArgument", s.Code())
	}
	return nil
}

func main() {
	addr := flag.String("addr", "", "server gRPC address, host:port (required)")
	timeout := flag.Duration("timeout", 10*time.Second, "deadline of each step")
	flag.Parse()
	if *addr == "" {
		fmt.Fprintln(os.Stderr, "go smoke: --addr is required")
		flag.Usage()
		os.Exit(2)
	}

	r := &report{Client: "go", Addr: *addr}
	err := run(*addr, *timeout, r)
	r.OK = err == nil
	if err != nil {
		r.Error = err.Error()
	}
	line, _ := json.Marshal(r)
	fmt.Println(string(line))
	if err != nil {
		fmt.Fprintf(os.Stderr, "go smoke: FAIL: %v\n", err)
		os.Exit(1)
	}
}
