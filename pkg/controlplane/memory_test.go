package controlplane

import (
	"runtime"
	"runtime/debug"
	"testing"
)

// TestReadHeapSeesGarbage: what is allocated counts, garbage left on the heap shows as reclaimable
// until a collection, and a collection counts as a cycle.
func TestReadHeapSeesGarbage(t *testing.T) {
	// Start with no free heap pages held: garbage made of pages already free (left by the package's
	// other tests) moves bytes from free to dead and leaves the reclaimable sum as it was.
	debug.FreeOSMemory()
	before := readHeap()
	var keep [][]byte
	for range 64 {
		keep = append(keep, make([]byte, 1<<20))
	}
	keep = nil
	_ = keep
	after := readHeap()
	if after.allocated < before.allocated+64<<20 {
		t.Fatalf("64 MiB allocated: allocated %d → %d bytes", before.allocated, after.allocated)
	}
	if after.cycles == before.cycles && after.reclaimable < before.reclaimable+quietReclaimMin {
		t.Fatalf("64 MiB of garbage: reclaimable %d → %d bytes, want at least %d more", before.reclaimable, after.reclaimable, quietReclaimMin)
	}
	runtime.GC()
	if got := readHeap(); got.cycles <= before.cycles {
		t.Fatalf("collections %d → %d after runtime.GC", before.cycles, got.cycles)
	}
}

// TestQuietEnough: memory goes back only when no collection ran since the last check and little was
// allocated (busy processes collect on their own), and enough would come back: quietReclaimMin, and half
// the live heap.
func TestQuietEnough(t *testing.T) {
	for _, c := range []struct {
		name      string
		prev, now heapSample
		want      bool
	}{
		{"quiet, much to give back", heapSample{cycles: 5}, heapSample{cycles: 5, reclaimable: quietReclaimMin}, true},
		{"quiet, little to give back", heapSample{cycles: 5}, heapSample{cycles: 5, reclaimable: quietReclaimMin - 1}, false},
		{"busy: collected since", heapSample{cycles: 5}, heapSample{cycles: 6, reclaimable: 4 * quietReclaimMin}, false},
		{"quiet, allocating a little", heapSample{cycles: 5, allocated: 100}, heapSample{cycles: 5, allocated: 100 + quietAllocMax - 1, reclaimable: quietReclaimMin}, true},
		{"quiet, a large live heap, less than half of it to give back", heapSample{cycles: 5}, heapSample{cycles: 5, live: 4 * quietReclaimMin, reclaimable: 2*quietReclaimMin - 1}, false},
		{"quiet, a large live heap, half of it to give back", heapSample{cycles: 5}, heapSample{cycles: 5, live: 4 * quietReclaimMin, reclaimable: 2 * quietReclaimMin}, true},
		{"busy: allocating, not yet collected", heapSample{cycles: 5, allocated: 100}, heapSample{cycles: 5, allocated: 100 + quietAllocMax, reclaimable: 4 * quietReclaimMin}, false},
	} {
		if got := quietEnough(c.prev, c.now); got != c.want {
			t.Errorf("%s: quietEnough = %v, want %v", c.name, got, c.want)
		}
	}
}
