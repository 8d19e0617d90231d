package worq

import (
	"slices"
	"sync"
	"testing"

	worqv1 "github.com/worq-dev/worq/gen/go/worq/v1"
)

// The placement vectors every library and the server share (the server's src/model/partition.ts).
func TestFNV1aAndQueueHome(t *testing.T) {
	for _, v := range []struct {
		queue          string
		hash           uint32
		home4, home16  int
		skipHomeChecks bool
	}{
		{queue: "default", hash: 2470140894, home4: 2, home16: 14},
		{queue: "", hash: 2166136261, skipHomeChecks: true}, // the raw hash; an empty queue is placed as "default"
		{queue: "emails", hash: 3339240540, home4: 0, home16: 12},
		{queue: "pf-0", hash: 2324338534, home4: 2, home16: 6},
		{queue: "täsk.😀", hash: 3583069561, home4: 1, home16: 9},
		{queue: "a", hash: 3826002220, home4: 0, home16: 12},
	} {
		if got := fnv1a32(v.queue); got != v.hash {
			t.Errorf("fnv1a32(%q) = %d, want %d", v.queue, got, v.hash)
		}
		if v.skipHomeChecks {
			continue
		}
		if got := queueHome(v.queue, 4); got != v.home4 {
			t.Errorf("queueHome(%q, 4) = %d, want %d", v.queue, got, v.home4)
		}
		if got := queueHome(v.queue, 16); got != v.home16 {
			t.Errorf("queueHome(%q, 16) = %d, want %d", v.queue, got, v.home16)
		}
	}
	if queueHome("", 16) != queueHome("default", 16) || queueHome("", 4) != 2 {
		t.Errorf("an empty queue is not placed as \"default\"")
	}
	if queueHome("anything", 1) != 0 {
		t.Errorf("with one partition a queue is not in partition 0")
	}
}

func TestPartitionOfID(t *testing.T) {
	for _, v := range []struct {
		id    string
		count int
		want  int
	}{
		{"7c9e6679-7425-40de-944b-e07fc1f90000", 4, 0},
		{"7c9e6679-7425-40de-944b-e07fc1f90003", 4, 3},
		{"7c9e6679-7425-40de-944b-e07fc1f90c03", 4, 3},           // the two high bits of the last three digits are random
		{"7c9e6679-7425-40de-944b-e07fc1f9000f", 16, 15},         // lower-case or not, hex
		{"7c9e6679-7425-40de-944b-e07fc1f903FF", 1024, 1023},     // the most partitions ten bits name
		{"7c9e6679-7425-40de-944b-e07fc1f90004", 4, noPartition}, // past the count: no such job
		{"7c9e6679-7425-40de-944b-e07fc1f90004", 1, 0},           // one partition: everything is in 0
		{"not-a-uuid", 1, 0},
		{"not-a-uuid", 4, noPartition},
		{"7c9e6679-7425-40de-944b-e07fc1f90xyz", 4, noPartition},
		{"", 4, noPartition},
	} {
		if got := partitionOfID(v.id, v.count); got != v.want {
			t.Errorf("partitionOfID(%q, %d) = %d, want %d", v.id, v.count, got, v.want)
		}
	}
}

func TestEvenShares(t *testing.T) {
	for _, v := range []struct {
		total, parts int
		want         []int
	}{
		{10, 3, []int{4, 3, 3}},
		{2, 4, []int{1, 1, 1, 1}},
		{10, 1, []int{10}},
		{8, 4, []int{2, 2, 2, 2}},
		{5, 3, []int{2, 2, 1}},
		{1, 2, []int{1, 1}},
	} {
		if got := evenShares(v.total, v.parts); !slices.Equal(got, v.want) {
			t.Errorf("evenShares(%d, %d) = %v, want %v", v.total, v.parts, got, v.want)
		}
	}
}

// The partitions of a queue, spread or not (vectors from the server's queuePartitions,
// src/model/partition.ts).
func TestQueuePartitions(t *testing.T) {
	for _, v := range []struct {
		name          string
		queue         string
		count, spread int
		want          []int
	}{
		{"not spread", "pf-0", 4, 1, []int{2}},
		{"no spread given", "pf-0", 4, 0, []int{2}},
		{"from the home partition on", "default", 4, 3, []int{2, 3, 0}},
		{"wraps past the last partition", "emails", 16, 6, []int{12, 13, 14, 15, 0, 1}},
		{"k over the count is capped", "default", 4, 9, []int{2, 3, 0, 1}},
		{"an empty queue is default", "", 4, 2, []int{2, 3}},
		{"UTF-8 name", "täsk.😀", 16, 3, []int{9, 10, 11}},
		{"one partition", "emails", 1, 3, []int{0}},
	} {
		if got := queuePartitions(v.queue, v.count, v.spread); !slices.Equal(got, v.want) {
			t.Errorf("%s: queuePartitions(%q, %d, %d) = %v, want %v", v.name, v.queue, v.count, v.spread, got, v.want)
		}
	}
}

// A job of a spread queue is placed by the first set of its unique, debounce, group and
// idempotency keys.
func TestPlacementKeyPrecedence(t *testing.T) {
	unique := &worqv1.Uniqueness{Key: "u-1"}
	debounce := &worqv1.Debounce{Key: "d-1"}
	for _, v := range []struct {
		name string
		job  *worqv1.JobSpec
		want string
	}{
		{"unique first", &worqv1.JobSpec{Unique: unique, Debounce: debounce, GroupKey: "customer:42", IdempotencyKey: "idem-9"}, "u-1"},
		{"then debounce", &worqv1.JobSpec{Debounce: debounce, GroupKey: "customer:42", IdempotencyKey: "idem-9"}, "d-1"},
		{"then group", &worqv1.JobSpec{GroupKey: "customer:42", IdempotencyKey: "idem-9"}, "customer:42"},
		{"then idempotency", &worqv1.JobSpec{IdempotencyKey: "idem-9"}, "idem-9"},
		{"an empty unique key (derived by the server) is not set", &worqv1.JobSpec{Unique: &worqv1.Uniqueness{}, GroupKey: "customer:42"}, "customer:42"},
		{"an empty debounce key is not set", &worqv1.JobSpec{Debounce: &worqv1.Debounce{}, IdempotencyKey: "idem-9"}, "idem-9"},
		{"no key", &worqv1.JobSpec{Queue: "q"}, ""},
		{"no job", nil, ""},
	} {
		if got := placementKey(v.job); got != v.want {
			t.Errorf("%s: placementKey = %q, want %q", v.name, got, v.want)
		}
	}
}

func TestJobPartition(t *testing.T) {
	spread := queuePartitions("default", 4, 3) // [2 3 0]
	for _, v := range []struct {
		name       string
		partitions []int
		key        string
		want       int
	}{
		// fnv1a32: u-1 4281602306 (% 3 = 2), d-1 621505681 (1), customer:42 1026226047 (0), idem-9 2449585960 (1)
		{"unique key", spread, "u-1", 0},
		{"debounce key", spread, "d-1", 3},
		{"group key", spread, "customer:42", 2},
		{"idempotency key", spread, "idem-9", 3},
		{"k over the count, capped: by the key mod 4", queuePartitions("default", 4, 9), "customer:42", 1},
		{"not spread: the home partition, key or not", []int{2}, "u-1", 2},
	} {
		turns := 0
		nextTurn := func() uint64 { turns++; return uint64(turns) }
		if got := jobPartition(v.partitions, v.key, nextTurn); got != v.want {
			t.Errorf("%s: jobPartition(%v, %q) = %d, want %d", v.name, v.partitions, v.key, got, v.want)
		}
		if turns != 0 {
			t.Errorf("%s: a job with a key (or of a queue not spread) took a turn", v.name)
		}
	}

	// Without a key: the partitions in turn, wrapping past the last one and past the end of the list.
	var turn uint64
	nextTurn := func() uint64 { turn++; return turn - 1 }
	var got []int
	for range 7 {
		got = append(got, jobPartition(spread, "", nextTurn))
	}
	if want := []int{2, 3, 0, 2, 3, 0, 2}; !slices.Equal(got, want) {
		t.Errorf("jobs without a key went to %v, want %v", got, want)
	}
}

// A spread queue's turns are shared by the client's goroutines, and each queue has its own:
// concurrent submits of jobs without a key, alternating between two spread queues, are
// spread exactly evenly over each queue's partitions.
func TestSpreadTurnsAreSafeForConcurrentUseAndPerQueue(t *testing.T) {
	p := newPartitionRoutes(nil, nil, nil)
	p.loaded, p.count, p.addresses = true, 4, make([]string, 4)
	p.spread = spreadQueues([]*worqv1.SpreadQueue{{Queue: "default", Partitions: 3}, {Queue: "emails", Partitions: 2}, {Queue: "lone", Partitions: 1}})
	if len(p.spread) != 2 {
		t.Errorf("spread queues %v: a queue over one partition is not spread", p.spread)
	}
	const perGoroutine, goroutines = 300, 8
	counts := map[string][]int{"": make([]int, 4), "emails": make([]int, 4)}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for i := range perGoroutine {
				queue := []string{"", "emails"}[i%2] // "" is default, spread over [2 3 0]; emails over [0 1]
				partition := p.ofNewJob(&worqv1.JobSpec{Queue: queue})
				mu.Lock()
				counts[queue][partition]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	const jobs = perGoroutine * goroutines / 2 // of each queue
	if got, want := counts[""], []int{jobs / 3, 0, jobs / 3, jobs / 3}; !slices.Equal(got, want) {
		t.Errorf("default: jobs per partition %v, want %v", got, want)
	}
	if got, want := counts["emails"], []int{jobs / 2, jobs / 2, 0, 0}; !slices.Equal(got, want) {
		t.Errorf("emails: jobs per partition %v, want %v", got, want)
	}
	if got := p.ofNewJob(&worqv1.JobSpec{Queue: "lone"}); got != queueHome("lone", 4) {
		t.Errorf("a queue listed over one partition went to %d, not its home", got)
	}
}

// A worker's queues grouped by partition: a spread queue is in the group of each of its partitions.
func TestGroupByPartition(t *testing.T) {
	partitionsOf := func(queue string) []int {
		return map[string][]int{"a": {0}, "b": {2}, "spread": {1, 2, 3}, "c": {0}}[queue]
	}
	groups := groupByPartition([]string{"b", "spread", "a", "c"}, partitionsOf)
	want := []leaseGroup{
		{partition: 2, queues: []string{"b", "spread"}},
		{partition: 1, queues: []string{"spread"}},
		{partition: 3, queues: []string{"spread"}},
		{partition: 0, queues: []string{"a", "c"}},
	}
	if len(groups) != len(want) {
		t.Fatalf("groups %v, want %v", groups, want)
	}
	for i := range want {
		if groups[i].partition != want[i].partition || !slices.Equal(groups[i].queues, want[i].queues) {
			t.Errorf("group %d: %v, want %v", i, groups[i], want[i])
		}
	}
}
