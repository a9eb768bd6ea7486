package controlplane

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/rayctl/rayctl/pkg/selfpages"
)

// Once ready, memory the heap no longer needs goes back to the system when the process is quiet. The
// garbage collector alone keeps what a burst of work (a RayJob, a thousand pods, fifty clients) grew
// the heap to: it collects only when the heap has doubled since the last collection, which an idle
// control plane takes minutes to do, and the runtime's scavenger returns only what lies beyond that
// goal. So every quietCheckEvery, if the process was quiet since the last check (no collection ran,
// and it allocated less than quietAllocMax: an idle control plane allocated 6.4 MB in 10 s, measured)
// and at least quietReclaimMin bytes, and half the live heap, would come back (dead objects not yet
// collected, free heap pages not yet returned), the heap is collected and its free pages returned.
// Busy, the process collects on its own and this does nothing; idle, it costs two collections of the
// live heap (returnHeap) every minute or so (tens of milliseconds of CPU). A process allocating just
// under quietAllocMax gives memory back at most twice as often as the collector would collect on its own
// (which waits for the live heap's size again), two collections each time. The check is short so that
// memory comes back seconds after work ends.
const (
	quietCheckEvery = 5 * time.Second
	quietAllocMax   = 8 << 20
	quietReclaimMin = 32 << 20
)

// dropBinaryPagesWhenQuiet: every binaryDropEvery checks, the pages of rayctl's binary that the process
// is not using are unmapped (see selfpages.Drop): start-up touches most of its 118 MB, idle it runs a few
// MB of it. What it runs faults back in a page-cache folio at a time (Linux maps the whole large folio a
// fault lands in, 64 KB to 2 MB of the binary), so about 50 MB are mapped again within a second or two.
var dropBinaryPagesWhenQuiet = os.Getenv("RAYCTL_KEEP_BINARY_PAGES") == ""

// binaryDropEvery: the binary's pages are dropped on every binaryDropEvery-th check, quiet or not (every
// 15 s); what the process runs faults back in after each.
const binaryDropEvery = 3

// heapSample is what returnMemoryWhenQuiet reads of the runtime's metrics.
type heapSample struct {
	cycles      uint64 // garbage collections completed
	allocated   uint64 // bytes allocated since the process started
	live        uint64 // bytes reachable at the last collection
	reclaimable uint64 // bytes a collection and scavenge would give back
}

// readHeap reads a heapSample from runtime/metrics.
func readHeap() heapSample {
	s := []metrics.Sample{
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/gc/heap/allocs:bytes"},              // allocated, cumulative
		{Name: "/memory/classes/heap/objects:bytes"}, // allocated, reachable or not
		{Name: "/gc/heap/live:bytes"},                // reachable at the last collection
		{Name: "/memory/classes/heap/free:bytes"},    // free pages still held
	}
	metrics.Read(s)
	var values [5]uint64
	for i := range s {
		if s[i].Value.Kind() == metrics.KindUint64 {
			values[i] = s[i].Value.Uint64()
		}
	}
	dead := uint64(0)
	if values[2] > values[3] {
		dead = values[2] - values[3]
	}
	return heapSample{cycles: values[0], allocated: values[1], live: values[3], reclaimable: dead + values[4]}
}

// quietEnough says whether, between prev and now, the process was quiet and has enough to give back.
func quietEnough(prev, now heapSample) bool {
	return now.cycles == prev.cycles && now.allocated-prev.allocated < quietAllocMax &&
		now.reclaimable >= max(quietReclaimMin, now.live/2)
}

// returnHeap collects the heap twice and returns its free pages to the system. sync.Pool keeps what a
// collection takes from it for one more collection (its victim cache), so the pools' buffers idle since
// the last collection (gRPC's and containerd's buffers, 5.7 MB in a heap profile 8 s after ready) go
// only in the second; FreeOSMemory is that second collection and the scavenge.
func returnHeap() {
	runtime.GC()
	debug.FreeOSMemory()
}

// returnMemoryWhenQuiet returns the heap's spare memory to the system when quiet (see above), until
// ctx ends.
func returnMemoryWhenQuiet(ctx context.Context) {
	t := time.NewTicker(quietCheckEvery)
	defer t.Stop()
	prev := readHeap()
	for checks := 1; ; checks++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := readHeap()
		if quietEnough(prev, now) {
			returnHeap()
			now = readHeap()
		}
		if dropBinaryPagesWhenQuiet && checks%binaryDropEvery == 0 {
			_, _ = selfpages.Drop()
		}
		prev = now
	}
}
