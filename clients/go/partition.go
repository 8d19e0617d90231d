package worq

import (
	"hash/fnv"
	"strconv"

	worqv1 "github.com/worq-dev/worq/gen/go/worq/v1"
)

// Where a job lives on a partitioned cluster (worq serve --cluster --partitions, the
// server's docs/scale-out.md): a queue's home partition comes from a hash of its name, and
// a job id or batch id carries its partition in its last ten bits. A hot queue may be
// spread over several partitions (GetServerInfo's spread_queues): a new job of it goes to
// one of them, by its key or in turn. The server places jobs with these same rules, in
// every language, so a library can send a call straight to the partition's own server.
// With one partition everything is in partition 0.

// partitionBits masks the bits of an id's last hex digits that name its partition: ten
// bits, so at most 1,024 partitions.
const partitionBits = 1023

// defaultQueue is the queue of a job submitted without one (the server's default).
const defaultQueue = "default"

// noPartition stands for "no partition's own server": the call goes to the address given
// to Dial, whose node routes it (the server is not partitioned, the map is not known, or
// the id names no partition).
const noPartition = -1

// fnv1a32 is 32-bit FNV-1a over the UTF-8 bytes of text: the hash the server places queues
// with, chosen because it is the same in every language.
func fnv1a32(text string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(text)) // a hash.Hash never fails a Write
	return h.Sum32()
}

// queueName is queue as the server reads it: an empty queue is "default".
func queueName(queue string) string {
	if queue == "" {
		return defaultQueue
	}
	return queue
}

// queueHome is the home partition of queue out of count (count ≥ 1); an empty queue is
// "default", as the server reads it.
func queueHome(queue string, count int) int {
	return int(fnv1a32(queueName(queue)) % uint32(count))
}

// queuePartitions is the partitions queue lives in out of count (count ≥ 1): its home
// partition, and for a queue spread over spread partitions the ones after it, wrapping
// ((home + i) mod count for i < spread). Starting at the home partition rather than at 0
// keeps queues spread by the same amount from all piling onto the same partitions. spread is
// capped at count; below 2 the queue is not spread.
func queuePartitions(queue string, count, spread int) []int {
	home := queueHome(queue, count)
	partitions := make([]int, min(max(spread, 1), count))
	for i := range partitions {
		partitions[i] = (home + i) % count
	}
	return partitions
}

// placementKey is the key a new job of a spread queue is placed by: the first set of its
// unique key, debounce key, group key and idempotency key, so that the jobs sharing one meet
// in one partition (a unique or debounce key is held, a group's limits counted and an
// idempotency claim kept within a partition). "" when it has none.
func placementKey(job *worqv1.JobSpec) string {
	for _, key := range []string{job.GetUnique().GetKey(), job.GetDebounce().GetKey(), job.GetGroupKey(), job.GetIdempotencyKey()} {
		if key != "" {
			return key
		}
	}
	return ""
}

// jobPartition is the partition out of partitions (its queue's, see queuePartitions) that a
// new job with placement key goes to: the only one for a queue that is not spread; else the
// one at index fnv1a32(key) mod len(partitions), or for a job without a key the one nextTurn
// points at (any would do: taking them in turn spreads the load evenly).
func jobPartition(partitions []int, key string, nextTurn func() uint64) int {
	switch {
	case len(partitions) == 1:
		return partitions[0] // no turn taken: a queue that is not spread leaves the turns alone
	case key != "":
		return partitions[fnv1a32(key)%uint32(len(partitions))]
	default:
		return partitions[nextTurn()%uint64(len(partitions))]
	}
}

// partitionOfID is the partition a job id (or batch id) names out of count, or noPartition
// when it names none: its bits point past count (no such job can exist), or it is not a
// 36-character UUID. The server answers those itself (NOT_FOUND, INVALID_ARGUMENT). With
// one partition every id is in partition 0, ids made before partitioning included.
func partitionOfID(id string, count int) int {
	if count == 1 {
		return 0
	}
	if count < 1 || len(id) != 36 {
		return noPartition
	}
	bits, err := strconv.ParseUint(id[33:], 16, 16)
	if err != nil {
		return noPartition
	}
	if p := int(bits & partitionBits); p < count {
		return p
	}
	return noPartition
}

// evenShares splits total over parts as evenly as it goes, the first ones taking the
// remainder, at least one each: how a worker shares its concurrency among its Lease
// streams to several partitions (the server's node splits a merged Lease the same way).
func evenShares(total, parts int) []int {
	shares := make([]int, parts)
	for i := range shares {
		shares[i] = total / parts
		if i < total%parts {
			shares[i]++
		}
		shares[i] = max(shares[i], 1)
	}
	return shares
}
