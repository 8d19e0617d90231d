package worq

import (
	"hash/fnv"
	"strconv"
)

// Where a job lives on a partitioned cluster (worq serve --cluster --partitions, the
// server's docs/scale-out.md): a queue's home partition comes from a hash of its name, and
// a job id or batch id carries its partition in its last ten bits. The server places jobs
// with these same rules, in every language, so a library can send a call straight to the
// partition's own server. With one partition everything is in partition 0.

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

// queueHome is the home partition of queue out of count (count ≥ 1); an empty queue is
// "default", as the server reads it.
func queueHome(queue string, count int) int {
	if queue == "" {
		queue = defaultQueue
	}
	return int(fnv1a32(queue) % uint32(count))
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
