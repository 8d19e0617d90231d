package worq

import (
	"slices"
	"testing"
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
