package worq

import (
	"context"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	worqv1 "github.com/worq-dev/worq/gen/go/worq/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const (
	// mapReadTimeout bounds one GetServerInfo read of the partition map. The read runs on
	// its own context, so that a caller with a short deadline does not cut it for the others
	// waiting on it.
	mapReadTimeout = 10 * time.Second
	// formerServerGrace is how long the connection to an address that left the map stays
	// open: calls and streams on it may still be answered, and the partition may come back.
	formerServerGrace = 30 * time.Second
)

// route is the stubs of one server: the node at the address given to Dial, or the own
// server of a partition.
type route struct {
	conn     *grpc.ClientConn
	producer worqv1.ProducerServiceClient
	worker   worqv1.WorkerServiceClient
	admin    worqv1.AdminServiceClient
}

func newRoute(conn *grpc.ClientConn) *route {
	return &route{
		conn:     conn,
		producer: worqv1.NewProducerServiceClient(conn),
		worker:   worqv1.NewWorkerServiceClient(conn),
		admin:    worqv1.NewAdminServiceClient(conn),
	}
}

// partitionRoutes knows which server takes each partition's calls on a partitioned cluster:
// the partition map the cluster publishes in GetServerInfo (partition_count, partitions,
// spread_queues), read once before the first routed call and again whenever a call finds a
// partition gone (refresh). A partition without a known owner, and everything on a server
// that is not partitioned, goes to the node at the address given to Dial, which routes it
// (one hop more).
type partitionRoutes struct {
	node   *route
	dial   func(address string) (*grpc.ClientConn, error) // with the options of the node's connection
	logger *slog.Logger

	mu        sync.Mutex
	loaded    bool              // the map was read, or the server will never give one
	count     int               // partitions; 0 or 1 when the server is not partitioned
	addresses []string          // host:port by partition; "" while the partition has no owner
	spread    map[string]int    // the partitions of each spread queue (≥ 2); a queue not in it lives in its home only
	servers   map[string]*route // by address, dialled at first use
	reading   chan struct{}     // closed when the read in flight ends; nil when none is
	closed    bool
	// turns is the next turn of each spread queue, for its jobs without a placement key (see
	// jobPartition). One counter per queue: with one for all, a producer alternating between
	// two queues spread over 2 partitions would put all of each queue's jobs in one of them.
	turns map[string]uint64
}

func newPartitionRoutes(node *route, dial func(string) (*grpc.ClientConn, error), logger *slog.Logger) *partitionRoutes {
	return &partitionRoutes{node: node, dial: dial, logger: logger, servers: map[string]*route{}, turns: map[string]uint64{}}
}

// load reads the map unless it was read already, and reports whether it now is. False means
// the server could not be reached (or ctx ended first): route to the node, and try again later.
func (p *partitionRoutes) load(ctx context.Context) bool {
	p.mu.Lock()
	loaded := p.loaded
	p.mu.Unlock()
	if loaded {
		return true
	}
	select {
	case <-p.refresh():
	case <-ctx.Done():
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.loaded
}

// refresh reads the map again and returns a channel closed when that read ends. One read
// runs at a time: callers meanwhile share it.
func (p *partitionRoutes) refresh() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reading == nil {
		p.reading = make(chan struct{})
		go p.read(p.reading)
	}
	return p.reading
}

// read asks the node for the map. A failed read keeps the map as it was: the last one known
// is the best guess until a read succeeds.
func (p *partitionRoutes) read(done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), mapReadTimeout)
	info, err := p.node.admin.GetServerInfo(ctx, &worqv1.GetServerInfoRequest{})
	cancel()
	p.mu.Lock()
	defer func() {
		p.reading = nil
		p.mu.Unlock()
		close(done)
	}()
	if err != nil {
		switch status.Code(err) {
		case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Aborted, codes.ResourceExhausted:
			p.logger.Debug("partition map not read; the server is unreachable", "error", err)
		default:
			// A server too old to publish a map, or a token without the right to read it: the
			// node routes everything, as on a server that is not partitioned.
			if !p.loaded {
				p.logger.Debug("no partition map; every call goes to the address given", "error", err)
			}
			p.loaded = true
		}
		return
	}
	addresses := make([]string, info.GetPartitionCount())
	for _, owner := range info.GetPartitions() {
		if i := int(owner.GetIndex()); i < len(addresses) {
			addresses[i] = owner.GetGrpcAddress()
		}
	}
	spread := spreadQueues(info.GetSpreadQueues())
	for address, server := range p.servers {
		if slices.Contains(p.addresses, address) && !slices.Contains(addresses, address) {
			p.retireLater(address, server)
		}
	}
	if !p.loaded || !slices.Equal(addresses, p.addresses) || !maps.Equal(spread, p.spread) {
		p.logger.Debug("partition map read", "partitions", len(addresses), "addresses", addresses, "spread_queues", spread)
	}
	p.loaded, p.count, p.addresses, p.spread = true, len(addresses), addresses, spread
}

// spreadQueues is the partition count of each queue spread over two partitions or more, by
// name as the server reads it. The server sends only those; a smaller value would mean the
// queue's home partition alone, which is what a queue left out of the map gets.
func spreadQueues(list []*worqv1.SpreadQueue) map[string]int {
	spread := map[string]int{}
	for _, q := range list {
		if q.GetPartitions() >= 2 {
			spread[queueName(q.GetQueue())] = int(q.GetPartitions())
		}
	}
	return spread
}

// retireLater closes the connection to a server that left the map, unless it is back by then.
// Called with p.mu held.
func (p *partitionRoutes) retireLater(address string, server *route) {
	time.AfterFunc(formerServerGrace, func() {
		p.mu.Lock()
		gone := p.servers[address] == server && !slices.Contains(p.addresses, address)
		if gone {
			delete(p.servers, address)
		}
		p.mu.Unlock()
		if gone {
			server.conn.Close()
		}
	})
}

// partitionCount is the number of partitions, 0 while the server is not known to be partitioned.
func (p *partitionRoutes) partitionCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.count <= 1 {
		return 0
	}
	return p.count
}

// partitionsOf is the partitions queue lives in (its home, and the ones after it for a spread
// queue), nil while the server is not known to be partitioned.
func (p *partitionRoutes) partitionsOf(queue string) []int {
	p.mu.Lock()
	count, spread := p.count, p.spread[queueName(queue)]
	p.mu.Unlock()
	if count <= 1 {
		return nil
	}
	return queuePartitions(queue, count, spread)
}

// ofNewJob is the partition a new job goes to (see jobPartition), noPartition while the
// server is not known to be partitioned. For a job of a spread queue without a placement key
// each call takes the queue's next turn.
func (p *partitionRoutes) ofNewJob(job *worqv1.JobSpec) int {
	queue := queueName(job.GetQueue())
	partitions := p.partitionsOf(queue)
	if len(partitions) == 0 {
		return noPartition
	}
	return jobPartition(partitions, placementKey(job), func() uint64 { return p.nextTurn(queue) })
}

// nextTurn is the client's next round-robin turn over the partitions of spread queue queue.
// A queue's first turn is random: short-lived clients that submit a job or two each would
// otherwise all put their first job in the queue's home partition.
func (p *partitionRoutes) nextTurn(queue string) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	turn, ok := p.turns[queue]
	if !ok {
		turn = rand.Uint64()
	}
	p.turns[queue] = turn + 1
	return turn
}

// ofID is the partition a job or batch id names, noPartition while the server is not known
// to be partitioned, or when the id names none.
func (p *partitionRoutes) ofID(id string) int {
	if count := p.partitionCount(); count > 1 {
		return partitionOfID(id, count)
	}
	return noPartition
}

// routeOf is the route to partition's own server, as the map says now: the node when the
// partition is noPartition or has no known owner.
func (p *partitionRoutes) routeOf(partition int) *route {
	p.mu.Lock()
	defer p.mu.Unlock()
	if partition < 0 || partition >= len(p.addresses) || p.addresses[partition] == "" || p.closed {
		return p.node
	}
	address := p.addresses[partition]
	if server := p.servers[address]; server != nil {
		return server
	}
	conn, err := p.dial(address)
	if err != nil {
		p.logger.Warn("cannot dial a partition's server; its calls go to the address given", "address", address, "error", err)
		return p.node
	}
	server := newRoute(conn)
	p.servers[address] = server
	return server
}

// resetConnectBackoff makes every connection that is waiting to reconnect try at once.
func (p *partitionRoutes) resetConnectBackoff() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, server := range p.servers {
		server.conn.ResetConnectBackoff()
	}
}

// close closes the connections to the partitions' servers (not the node's).
func (p *partitionRoutes) close() {
	p.mu.Lock()
	servers := p.servers
	p.servers, p.closed = map[string]*route{}, true
	p.mu.Unlock()
	for _, server := range servers {
		server.conn.Close()
	}
}

// partitionMayHaveMoved tells whether an error may mean the map is stale: the partition's
// server is gone (UNAVAILABLE), or a job went to a partition that is not its queue's.
// neverSent reports whether a failed call never reached a server: its connection could not
// be made (the server died, or its partition moved), so sending it again elsewhere does
// nothing twice.
func neverSent(err error) bool {
	s := status.Convert(err)
	return s.Code() == codes.Unavailable && strings.Contains(s.Message(), "connection refused")
}

func partitionMayHaveMoved(err error) bool {
	s := status.Convert(err)
	return s.Code() == codes.Unavailable || (s.Code() == codes.FailedPrecondition && strings.Contains(s.Message(), "lives in partition"))
}
