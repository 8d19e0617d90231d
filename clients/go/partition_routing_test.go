package worq

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	worqv1 "github.com/worq-dev/worq/gen/go/worq/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// fakeProducer records the producer calls one fake server got.
type fakeProducer struct {
	worqv1.UnimplementedProducerServiceServer
	partition int // the partition of the jids it makes

	mu    sync.Mutex
	calls []string // "Submit <queue>", "Cancel <jid>", …
}

func (f *fakeProducer) record(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
}

func (f *fakeProducer) recorded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fakeProducer) Submit(_ context.Context, req *worqv1.SubmitRequest) (*worqv1.SubmitResponse, error) {
	f.record("Submit " + req.GetJob().GetQueue())
	return &worqv1.SubmitResponse{Jid: jidIn(max(f.partition, 0))}, nil
}

func (f *fakeProducer) SubmitBatch(_ context.Context, req *worqv1.SubmitBatchRequest) (*worqv1.SubmitBatchResponse, error) {
	f.record("SubmitBatch " + req.GetJobs()[0].GetQueue())
	resp := &worqv1.SubmitBatchResponse{}
	for range req.GetJobs() {
		resp.Jobs = append(resp.Jobs, &worqv1.SubmitResponse{Jid: jidIn(max(f.partition, 0))})
	}
	return resp, nil
}

func (f *fakeProducer) Cancel(_ context.Context, req *worqv1.CancelRequest) (*worqv1.CancelResponse, error) {
	f.record("Cancel " + req.GetJid())
	return &worqv1.CancelResponse{Job: &worqv1.Job{Jid: req.GetJid()}}, nil
}

// fakeAdmin answers GetServerInfo with the partition map it is given (nil: UNIMPLEMENTED, as
// an old server), and records GetJob.
type fakeAdmin struct {
	worqv1.UnimplementedAdminServiceServer

	mu     sync.Mutex
	info   *worqv1.GetServerInfoResponse
	reads  int
	getJob []string
}

func (f *fakeAdmin) GetServerInfo(context.Context, *worqv1.GetServerInfoRequest) (*worqv1.GetServerInfoResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.info == nil {
		return nil, status.Error(codes.Unimplemented, "no GetServerInfo")
	}
	return f.info, nil
}

func (f *fakeAdmin) GetJob(_ context.Context, req *worqv1.GetJobRequest) (*worqv1.GetJobResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.getJob = append(f.getJob, req.GetJid())
	return &worqv1.GetJobResponse{Job: &worqv1.Job{Jid: req.GetJid()}}, nil
}

// setMap makes the node publish a map of len(addresses) partitions ("" leaves one out).
func (f *fakeAdmin) setMap(addresses ...string) {
	info := &worqv1.GetServerInfoResponse{PartitionCount: uint32(len(addresses))}
	for i, address := range addresses {
		if address != "" {
			info.Partitions = append(info.Partitions, &worqv1.PartitionOwner{Index: uint32(i), NodeId: "n", GrpcAddress: address})
		}
	}
	f.mu.Lock()
	f.info = info
	f.mu.Unlock()
}

// setSpread makes the node's map (set by setMap first) list queue as spread over k partitions.
func (f *fakeAdmin) setSpread(queue string, k int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	info := proto.CloneOf(f.info) // the one a GetServerInfo in flight answers stays as it is
	info.SpreadQueues = append(info.SpreadQueues, &worqv1.SpreadQueue{Queue: queue, Partitions: uint32(k)})
	f.info = info
}

func (f *fakeAdmin) counts() (reads, getJobs int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads, len(f.getJob)
}

// fakeServer is a node (partition -1) or a partition's own server.
type fakeServer struct {
	addr     string
	srv      *grpc.Server
	producer *fakeProducer
	worker   *fakeWorkerService
	admin    *fakeAdmin
}

func startFakeServer(t *testing.T, partition int, worker *fakeWorkerService) *fakeServer {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if worker == nil {
		worker = &fakeWorkerService{}
	}
	s := &fakeServer{addr: lis.Addr().String(), srv: grpc.NewServer(), producer: &fakeProducer{partition: partition}, worker: worker, admin: &fakeAdmin{}}
	worqv1.RegisterProducerServiceServer(s.srv, s.producer)
	worqv1.RegisterWorkerServiceServer(s.srv, s.worker)
	worqv1.RegisterAdminServiceServer(s.srv, s.admin)
	go func() { _ = s.srv.Serve(lis) }()
	t.Cleanup(s.srv.Stop)
	return s
}

func dialFake(t *testing.T, s *fakeServer, opts ...DialOption) *Client {
	t.Helper()
	c, err := Dial(context.Background(), s.addr, append([]DialOption{WithLogger(testLogger(t))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// jidIn is a jid whose partition bits name partition.
func jidIn(partition int) string {
	return fmt.Sprintf("7c9e6679-7425-40de-944b-e07fc1f90%03x", 0xc00|partition)
}

// queueIn is a queue whose home is partition out of count.
func queueIn(prefix string, partition, count int) string {
	for i := 0; ; i++ {
		if q := fmt.Sprintf("%s-%d", prefix, i); queueHome(q, count) == partition {
			return q
		}
	}
}

func TestPartitionRoutingSendsProducerCallsToTheirPartition(t *testing.T) {
	t.Parallel()
	p0, p1 := startFakeServer(t, 0, nil), startFakeServer(t, 1, nil)
	node := startFakeServer(t, -1, nil)
	node.admin.setMap(p0.addr, p1.addr)
	c := dialFake(t, node)
	ctx := context.Background()
	q0, q1 := queueIn("q", 0, 2), queueIn("q", 1, 2)

	for _, queue := range []string{q0, q1, ""} { // "" is "default", whose home of 2 is 0
		if _, err := c.Submit(ctx, "x", Queue(queue)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.SubmitBatch(ctx, []JobSpec{{Type: "x", Queue: q1}, {Type: "y", Queue: q1}}); err != nil {
		t.Fatal(err)
	}
	for _, jid := range []string{jidIn(1), jidIn(0), jidIn(5)} { // partition 5 of 2: no such job, the node answers
		if _, err := c.Cancel(ctx, jid); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.GetJob(ctx, jidIn(1)); err != nil {
		t.Fatal(err)
	}

	want := map[*fakeServer][]string{
		p0:   {"Submit " + q0, "Submit ", "Cancel " + jidIn(0)},
		p1:   {"Submit " + q1, "SubmitBatch " + q1, "Cancel " + jidIn(1)},
		node: {"Cancel " + jidIn(5)},
	}
	for s, calls := range want {
		if got := s.producer.recorded(); !slices.Equal(got, calls) {
			t.Errorf("partition %d got %q, want %q", s.producer.partition, got, calls)
		}
	}
	if _, getJobs := p1.admin.counts(); getJobs != 1 {
		t.Errorf("GetJob of a job of partition 1 did not go to its server")
	}
	if reads, _ := node.admin.counts(); reads != 1 {
		t.Errorf("the map was read %d times, want once", reads)
	}
}

func TestPartitionRoutingOffOrUnpartitionedGoesToTheAddressGiven(t *testing.T) {
	t.Parallel()
	p1 := startFakeServer(t, 1, nil)
	q1 := queueIn("q", 1, 2)
	for _, v := range []struct {
		name  string
		map_  []string
		opts  []DialOption
		reads int
	}{
		{"routing off", []string{"", p1.addr}, []DialOption{WithPartitionRouting(false)}, 0},
		{"not partitioned", []string{}, nil, 1},
		{"one partition", []string{p1.addr}, nil, 1},
		{"no map (an old server)", nil, nil, 1},
	} {
		node := startFakeServer(t, -1, nil)
		if v.map_ != nil {
			node.admin.setMap(v.map_...)
		}
		c := dialFake(t, node, v.opts...)
		for range 2 {
			if _, err := c.Submit(context.Background(), "x", Queue(q1)); err != nil {
				t.Fatal(err)
			}
		}
		if got := node.producer.recorded(); len(got) != 2 {
			t.Errorf("%s: the node got %q, want both submits", v.name, got)
		}
		if reads, _ := node.admin.counts(); reads != v.reads {
			t.Errorf("%s: the map was read %d times, want %d", v.name, reads, v.reads)
		}
	}
	if got := p1.producer.recorded(); len(got) != 0 {
		t.Errorf("the partition's server got %q", got)
	}
}

// leaseAndPush answers each Lease with a keepalive, then (on the first one) job jid unless
// it is "", then holds the stream.
func leaseAndPush(jid string) func(int, *worqv1.LeaseRequest, func(*worqv1.LeaseResponse) error, context.Context) error {
	return func(n int, _ *worqv1.LeaseRequest, send func(*worqv1.LeaseResponse) error, ctx context.Context) error {
		_ = send(&worqv1.LeaseResponse{Kind: &worqv1.LeaseResponse_Keepalive{Keepalive: &worqv1.Keepalive{}}})
		if n == 1 && jid != "" {
			_ = send(fakeJob(jid, time.Minute))
		}
		<-ctx.Done()
		return nil
	}
}

func TestPartitionRoutingWorkerLeasesFromEachPartitionsServer(t *testing.T) {
	t.Parallel()
	p0 := startFakeServer(t, 0, &fakeWorkerService{lease: leaseAndPush(jidIn(0))})
	p1 := startFakeServer(t, 1, &fakeWorkerService{lease: leaseAndPush(jidIn(1))})
	node := startFakeServer(t, -1, nil)
	node.admin.setMap(p0.addr, p1.addr, "") // partition 2 has no owner right now: the node serves it
	c := dialFake(t, node)
	a0, b0, a1, a2 := queueIn("a", 0, 3), queueIn("b", 0, 3), queueIn("a", 1, 3), queueIn("a", 2, 3)
	done := newDoneEvents()
	w := NewWorker(c, WorkerOptions{Queues: []string{a0, a1, b0, a2}, Concurrency: 5, Logger: testLogger(t), Hooks: Hooks{OnDone: done.hook}})
	w.Handle("fake", func(context.Context, *Job) (any, error) { return "ok", nil })
	stop := runWorker(t, w)
	for _, jid := range []string{jidIn(0), jidIn(1)} {
		if o := done.wait(t, jid); o != OutcomeAck {
			t.Fatalf("%s: outcome %s", jid, o)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	for _, v := range []struct {
		server  *fakeServer
		queues  []string
		credits uint32
		acked   []string
	}{
		{p0, []string{a0, b0}, 2, []string{jidIn(0)}},
		{p1, []string{a1}, 2, []string{jidIn(1)}},
		{node, []string{a2}, 1, nil},
	} {
		f := v.server.worker
		f.mu.Lock()
		var acked []string
		for _, ack := range f.acks {
			acked = append(acked, ack.GetJid())
		}
		if len(f.leases) == 0 || !slices.Equal(f.leases[0].GetQueues(), v.queues) || f.leases[0].GetCredits() != v.credits || f.leases[0].GetWorkerId() != w.ID() {
			t.Errorf("partition %d: Lease %v, want queues %v with %d credits", v.server.producer.partition, f.leases, v.queues, v.credits)
		}
		if !slices.Equal(acked, v.acked) {
			t.Errorf("partition %d: acks %v, want %v", v.server.producer.partition, acked, v.acked)
		}
		f.mu.Unlock()
	}
}

func TestPartitionRoutingWorkerFollowsAMovedPartition(t *testing.T) {
	t.Parallel()
	moved := startFakeServer(t, 1, &fakeWorkerService{lease: leaseAndPush(jidIn(1))})
	first := startFakeServer(t, 1, nil)
	node := startFakeServer(t, -1, nil)
	node.admin.setMap("", first.addr)
	c := dialFake(t, node)
	done := newDoneEvents()
	w := NewWorker(c, WorkerOptions{Queues: []string{queueIn("q", 1, 2)}, Logger: testLogger(t), Hooks: Hooks{OnDone: done.hook}})
	w.Handle("fake", func(context.Context, *Job) (any, error) { return "ok", nil })
	runWorker(t, w)
	deadline := time.Now().Add(5 * time.Second)
	for leases, _, _, _ := first.worker.counts(); leases == 0; leases, _, _, _ = first.worker.counts() {
		if time.Now().After(deadline) {
			t.Fatal("no Lease stream to the partition's first server")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// The partition moves: its first server goes, the map names its new one.
	node.admin.setMap("", moved.addr)
	first.srv.Stop()
	if o := done.wait(t, jidIn(1)); o != OutcomeAck {
		t.Fatalf("outcome %s", o)
	}
	if leases, acks, _, _ := moved.worker.counts(); leases != 1 || acks != 1 {
		t.Errorf("the partition's new server got %d Lease streams and %d acks, want 1 and 1", leases, acks)
	}
	if leases, _, _, _ := node.worker.counts(); leases != 0 {
		t.Errorf("the node got %d Lease streams", leases)
	}
}

func TestPartitionRoutingWorkerMovesOffTheNodeOnceThePartitionHasAServer(t *testing.T) {
	t.Parallel()
	own := startFakeServer(t, 1, &fakeWorkerService{lease: leaseAndPush(jidIn(1))})
	node := startFakeServer(t, -1, &fakeWorkerService{lease: leaseAndPush("")})
	node.admin.setMap("", "") // a takeover under way: no partition has an owner
	c := dialFake(t, node)
	ready := make(chan struct{}, 4)
	done := newDoneEvents()
	w := NewWorker(c, WorkerOptions{Queues: []string{queueIn("q", 1, 2)}, Logger: testLogger(t),
		Hooks: Hooks{OnDone: done.hook, OnReady: func(string) { ready <- struct{}{} }}})
	w.Handle("fake", func(context.Context, *Job) (any, error) { return "ok", nil })
	runWorker(t, w)
	select {
	case <-ready: // through the node
	case <-time.After(5 * time.Second):
		t.Fatal("no Lease stream through the node")
	}
	node.admin.setMap("", own.addr)
	if o := done.wait(t, jidIn(1)); o != OutcomeAck {
		t.Fatalf("outcome %s", o)
	}
	if leases, acks, _, _ := own.worker.counts(); leases != 1 || acks != 1 {
		t.Errorf("the partition's server got %d Lease streams and %d acks, want 1 and 1", leases, acks)
	}
	if leases, _, _, _ := node.worker.counts(); leases != 1 {
		t.Errorf("the node got %d Lease streams, want 1", leases)
	}
}

// startPartitions starts the own servers of count partitions (each leasing with lease(i),
// when given) and a node whose map names them.
func startPartitions(t *testing.T, count int, lease func(partition int) *fakeWorkerService) (node *fakeServer, servers []*fakeServer) {
	t.Helper()
	addresses := make([]string, count)
	for i := range count {
		var worker *fakeWorkerService
		if lease != nil {
			worker = lease(i)
		}
		servers = append(servers, startFakeServer(t, i, worker))
		addresses[i] = servers[i].addr
	}
	node = startFakeServer(t, -1, nil)
	node.admin.setMap(addresses...)
	return node, servers
}

// submitsBy counts the producer calls each partition's server got.
func submitsBy(servers []*fakeServer) []int {
	counts := make([]int, len(servers))
	for i, s := range servers {
		counts[i] = len(s.producer.recorded())
	}
	return counts
}

func TestPartitionRoutingSpreadsSubmitsOfASpreadQueue(t *testing.T) {
	t.Parallel()
	node, servers := startPartitions(t, 4, nil)
	spread, other := queueIn("s", 1, 4), queueIn("o", 0, 4)
	node.admin.setSpread(spread, 3) // partitions 1, 2, 3
	c := dialFake(t, node)
	ctx := context.Background()

	// Without a key: each of its partitions in turn, whatever the turn starts at.
	for range 6 {
		if _, err := c.Submit(ctx, "x", Queue(spread)); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := submitsBy(servers), []int{0, 2, 2, 2}; !slices.Equal(got, want) {
		t.Errorf("submits without a key per partition %v, want %v", got, want)
	}

	// With a key: always the one partition the key names, whichever kind of key it is.
	for _, v := range []struct {
		name string
		opt  SubmitOption
		key  string
	}{
		{"idempotency key", IdempotencyKey("order-7"), "order-7"},
		{"group", Group("customer:9"), "customer:9"},
		{"unique key", Unique(Uniqueness{Key: "u-1"}), "u-1"},
		{"debounce key", Debounce("d-1", time.Second), "d-1"},
	} {
		want := queuePartitions(spread, 4, 3)[fnv1a32(v.key)%3]
		before := submitsBy(servers)
		for range 3 {
			if _, err := c.Submit(ctx, "x", Queue(spread), v.opt); err != nil {
				t.Fatal(err)
			}
		}
		after := submitsBy(servers)
		for i := range after {
			wanted := 0
			if i == want {
				wanted = 3
			}
			if got := after[i] - before[i]; got != wanted {
				t.Errorf("%s %q: partition %d got %d of 3 submits, want all on partition %d", v.name, v.key, i, got, want)
			}
		}
	}

	// A queue that is not spread stays in its home partition.
	before := submitsBy(servers)
	for range 3 {
		if _, err := c.Submit(ctx, "x", Queue(other)); err != nil {
			t.Fatal(err)
		}
	}
	if got := submitsBy(servers)[0] - before[0]; got != 3 {
		t.Errorf("a queue that is not spread: %d of 3 submits on its home partition", got)
	}

	// A batch goes whole where its first job goes: a keyed one to its key's partition.
	keyed := queuePartitions(spread, 4, 3)[fnv1a32("customer:9")%3]
	before = submitsBy(servers)
	if _, err := c.SubmitBatch(ctx, []JobSpec{{Type: "x", Queue: spread, Group: "customer:9"}, {Type: "y", Queue: spread, Group: "customer:9"}}); err != nil {
		t.Fatal(err)
	}
	if got := submitsBy(servers)[keyed] - before[keyed]; got != 1 {
		t.Errorf("a batch keyed by group %q did not go to partition %d", "customer:9", keyed)
	}
	if got := node.producer.recorded(); len(got) != 0 {
		t.Errorf("the node got %q", got)
	}
}

// submitsOf counts the submits of queue each partition's server got.
func submitsOf(servers []*fakeServer, queue string) []int {
	counts := make([]int, len(servers))
	for i, s := range servers {
		for _, call := range s.producer.recorded() {
			if call == "Submit "+queue {
				counts[i]++
			}
		}
	}
	return counts
}

// Each spread queue takes its own turns: with one counter for all, a producer alternating
// between two queues spread over two partitions would put each queue's jobs in one of them.
func TestPartitionRoutingTakesTurnsPerSpreadQueue(t *testing.T) {
	t.Parallel()
	node, servers := startPartitions(t, 4, nil)
	a, b := queueIn("a", 0, 4), queueIn("b", 2, 4)
	node.admin.setSpread(a, 2) // partitions 0, 1
	node.admin.setSpread(b, 2) // partitions 2, 3
	c := dialFake(t, node)
	for range 6 {
		for _, queue := range []string{a, b} {
			if _, err := c.Submit(context.Background(), "x", Queue(queue)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got, want := submitsOf(servers, a), []int{3, 3, 0, 0}; !slices.Equal(got, want) {
		t.Errorf("queue a: submits per partition %v, want %v", got, want)
	}
	if got, want := submitsOf(servers, b), []int{0, 0, 3, 3}; !slices.Equal(got, want) {
		t.Errorf("queue b: submits per partition %v, want %v", got, want)
	}
}

func TestPartitionRoutingWorkerLeasesASpreadQueueFromEachOfItsPartitions(t *testing.T) {
	t.Parallel()
	node, servers := startPartitions(t, 4, func(partition int) *fakeWorkerService {
		return &fakeWorkerService{lease: leaseAndPush(jidIn(partition))}
	})
	spread, a0, b2 := queueIn("s", 1, 4), queueIn("a", 0, 4), queueIn("b", 2, 4)
	node.admin.setSpread(spread, 3) // partitions 1, 2, 3
	c := dialFake(t, node)
	done := newDoneEvents()
	w := NewWorker(c, WorkerOptions{Queues: []string{b2, spread, a0}, Concurrency: 8, Logger: testLogger(t), Hooks: Hooks{OnDone: done.hook}})
	w.Handle("fake", func(context.Context, *Job) (any, error) { return "ok", nil })
	stop := runWorker(t, w)
	for i := range servers {
		if o := done.wait(t, jidIn(i)); o != OutcomeAck {
			t.Fatalf("%s: outcome %s", jidIn(i), o)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	for i, queues := range [][]string{{a0}, {spread}, {b2, spread}, {spread}} {
		f := servers[i].worker
		f.mu.Lock()
		if len(f.leases) == 0 || !slices.Equal(f.leases[0].GetQueues(), queues) || f.leases[0].GetCredits() != 2 {
			t.Errorf("partition %d: Lease %v, want queues %v with 2 credits", i, f.leases, queues)
		}
		if len(f.acks) != 1 || f.acks[0].GetJid() != jidIn(i) {
			t.Errorf("partition %d: acks %v, want its own job's", i, f.acks)
		}
		f.mu.Unlock()
	}
	if leases, _, _, _ := node.worker.counts(); leases != 0 {
		t.Errorf("the node got %d Lease streams", leases)
	}
}
