package main

// Where rayctl's resident memory lies (issue 15 §1: "where a goal is missed, name what bounds it"). An
// RSS figure alone cannot say whether memory is held by objects the control plane keeps, by garbage
// not yet collected, by holes in the Go heap, or by file pages the kernel may drop at will. memParts
// splits one reading two ways:
//
//   - /proc/PID/smaps: the resident pages of mapped files (rayctl's own binary; etcd's bbolt database,
//     which etcd maps whole and whose touched pages count as RSS) apart from anonymous memory;
//   - the Go runtime's memory classes, as the API server's /metrics exports them (the same process):
//     heap objects split into live (as of the last collection) and dead, the unused space in heap spans
//     that hold objects (fragmentation: the heap does not move objects, so one survivor keeps its span),
//     free heap pages not yet returned, goroutine stacks, and the runtime's own bookkeeping.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
)

// memParts is one reading of where a process's RSS lies, in MB.
type memParts struct {
	RSS float64
	// Binary, EtcdDB and OtherFiles are resident pages of mapped files.
	Binary     float64
	EtcdDB     float64
	OtherFiles float64
	// Live and Dead are the Go heap's objects: reachable at the last collection, and allocated since
	// or unreachable and not yet swept.
	Live float64
	Dead float64
	// Fragmentation is the unused space in heap spans that hold objects; Free the free heap pages not
	// yet returned to the system.
	Fragmentation float64
	Free          float64
	// Stacks are goroutine stacks; Runtime the runtime's metadata, profiling buckets and the rest it
	// accounts for.
	Stacks  float64
	Runtime float64
	// Goroutines is how many goroutines ran.
	Goroutines float64
	// heapProfile is the API server's /debug/pprof/heap at the reading, when heapProfileDir is set.
	heapProfile []byte
}

// heapProfileDir, when set (-heap-profiles), receives a heap profile with each reading that is kept
// (go tool pprof -sample_index=inuse_space shows what holds the live heap).
var heapProfileDir string

// String is the reading on one line, largest parts named.
func (m memParts) String() string {
	return fmt.Sprintf("RSS %.0f MB = mapped files %.0f (rayctl's binary %.0f, etcd's database %.0f, other %.0f) + Go heap: live objects %.0f, dead not yet collected %.0f, fragmentation %.0f, free not returned %.0f + goroutine stacks %.0f (%.0f goroutines) + runtime %.0f + not accounted %.0f",
		m.RSS, m.Binary+m.EtcdDB+m.OtherFiles, m.Binary, m.EtcdDB, m.OtherFiles, m.Live, m.Dead, m.Fragmentation, m.Free, m.Stacks, m.Goroutines, m.Runtime, m.unaccounted())
}

// unaccounted is the anonymous RSS the runtime's classes do not explain (never below zero: the
// runtime counts some reserved memory that was never touched).
func (m memParts) unaccounted() float64 {
	return max(0, m.RSS-m.Binary-m.EtcdDB-m.OtherFiles-m.Live-m.Dead-m.Fragmentation-m.Free-m.Stacks-m.Runtime)
}

// readMemParts reads pid's smaps and the Go memory classes that kube's API server (the same process)
// exports.
func readMemParts(ctx context.Context, kube kubernetes.Interface, pid int) (memParts, error) {
	var m memParts
	if err := m.readSmaps(pid); err != nil {
		return m, err
	}
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return m, fmt.Errorf("reading /metrics: %w", err)
	}
	v, err := goMetrics(raw)
	if err != nil {
		return m, err
	}
	const mb = 1 << 20
	objects, live := v["go_memory_classes_heap_objects_bytes"], v["go_gc_heap_live_bytes"]
	m.Live, m.Dead = min(live, objects)/mb, max(0, objects-live)/mb
	m.Fragmentation = v["go_memory_classes_heap_unused_bytes"] / mb
	m.Free = v["go_memory_classes_heap_free_bytes"] / mb
	m.Stacks = (v["go_memory_classes_heap_stacks_bytes"] + v["go_memory_classes_os_stacks_bytes"]) / mb
	m.Runtime = (v["go_memory_classes_metadata_mcache_inuse_bytes"] + v["go_memory_classes_metadata_mspan_inuse_bytes"] +
		v["go_memory_classes_metadata_other_bytes"] + v["go_memory_classes_profiling_buckets_bytes"] + v["go_memory_classes_other_bytes"]) / mb
	m.Goroutines = v["go_sched_goroutines_goroutines"]
	return m, nil
}

// takeHeapProfile fetches the API server's heap profile into the reading, when heapProfileDir asks
// for one; only a reading that is kept takes it.
func (m *memParts) takeHeapProfile(ctx context.Context, kube kubernetes.Interface) error {
	if heapProfileDir == "" {
		return nil
	}
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/heap").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("reading /debug/pprof/heap: %w", err)
	}
	m.heapProfile = raw
	return nil
}

// saveHeapProfile writes the reading's heap profile, if it has one, as heapProfileDir/name.pprof.
func (m *memParts) saveHeapProfile(name string) {
	if m == nil || m.heapProfile == nil {
		return
	}
	path := filepath.Join(heapProfileDir, name+".pprof")
	if err := os.MkdirAll(heapProfileDir, 0o755); err == nil {
		if err := os.WriteFile(path, m.heapProfile, 0o644); err == nil {
			fmt.Fprintf(os.Stderr, "wrote %s (go tool pprof -sample_index=inuse_space -top %s)\n", path, path)
			return
		}
	}
	fmt.Fprintf(os.Stderr, "could not write %s\n", path)
}

// goMetrics are the go_* gauges and counters of a Prometheus text exposition, by name.
func goMetrics(raw []byte) (map[string]float64, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parsing /metrics: %w", err)
	}
	out := map[string]float64{}
	for name, f := range families {
		if !strings.HasPrefix(name, "go_") || len(f.GetMetric()) != 1 {
			continue
		}
		mt := f.GetMetric()[0]
		switch {
		case mt.GetGauge() != nil:
			out[name] = mt.GetGauge().GetValue()
		case mt.GetCounter() != nil:
			out[name] = mt.GetCounter().GetValue()
		}
	}
	return out, nil
}

// readSmaps fills RSS and the file parts from /proc/pid/smaps: a mapping's file pages are its Rss less
// its Anonymous (a file's private pages once written are anonymous).
func (m *memParts) readSmaps(pid int) error {
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return err
	}
	defer f.Close()
	const kbPerMB = 1024
	var path string
	var rss float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		switch {
		case !strings.HasSuffix(fields[0], ":"): // a mapping's header: address perms offset dev inode [path]
			path = ""
			if len(fields) >= 6 {
				path = fields[5]
			}
		case fields[0] == "Rss:" && len(fields) >= 2:
			rss, _ = strconv.ParseFloat(fields[1], 64)
			m.RSS += rss / kbPerMB
		case fields[0] == "Anonymous:" && len(fields) >= 2 && strings.HasPrefix(path, "/"):
			anon, _ := strconv.ParseFloat(fields[1], 64)
			file := (rss - anon) / kbPerMB
			switch {
			case path == exe:
				m.Binary += file
			case filepath.Base(path) == "db" && filepath.Base(filepath.Dir(path)) == "snap":
				m.EtcdDB += file
			default:
				m.OtherFiles += file
			}
		}
	}
	return sc.Err()
}

// memPartsOrNil reads memParts, or says on stderr why it could not (a benchmark still has its RSS);
// the heap profile, if taken, is saved under name.
func memPartsOrNil(ctx context.Context, kube kubernetes.Interface, pid int, when, name string) *memParts {
	m, err := readMemParts(ctx, kube, pid)
	if err == nil {
		err = m.takeHeapProfile(ctx, kube)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "memory %s: where the RSS lies: %v\n", when, err)
		return nil
	}
	fmt.Fprintf(os.Stderr, "memory %s: %s\n", when, m)
	m.saveHeapProfile(name)
	return &m
}

// memPartsPlot draws readings side by side, one bar per part and reading.
func memPartsPlot(file, title string, names []string, readings []*memParts) plotSpec {
	p := plotSpec{File: file, Title: title, Kind: "bar", YLabel: "MB",
		Categories: []string{"binary", "etcd db", "other\nfiles", "heap\nlive", "heap\ndead", "heap\nfragments", "heap\nfree", "stacks", "runtime", "not\naccounted"}}
	for i, m := range readings {
		if m == nil {
			continue
		}
		p.Series = append(p.Series, series{Name: fmt.Sprintf("%s (RSS %.0f MB)", names[i], m.RSS),
			Values: []float64{m.Binary, m.EtcdDB, m.OtherFiles, m.Live, m.Dead, m.Fragmentation, m.Free, m.Stacks, m.Runtime, m.unaccounted()}})
	}
	return p
}

// memPartsEvery is how often watchMemParts reads.
const memPartsEvery = 10 * time.Second

// watchMemParts reads memParts every memPartsEvery until the function it returns is called, which
// gives the reading of the largest RSS (nil if none could be read), its heap profile saved under name.
func watchMemParts(ctx context.Context, kube kubernetes.Interface, pid int, name string) func() *memParts {
	stop, done := make(chan struct{}), make(chan *memParts, 1)
	go func() {
		var largest *memParts
		t := time.NewTicker(memPartsEvery)
		defer t.Stop()
		for {
			select {
			case <-stop:
				done <- largest
				return
			case <-ctx.Done():
				done <- largest
				return
			case <-t.C:
			}
			if m, err := readMemParts(ctx, kube, pid); err == nil && (largest == nil || m.RSS > largest.RSS) && m.takeHeapProfile(ctx, kube) == nil {
				largest = &m
			}
		}
	}()
	return func() *memParts {
		close(stop)
		m := <-done
		if m != nil {
			fmt.Fprintf(os.Stderr, "memory, largest reading: %s\n", m)
			m.saveHeapProfile(name)
		}
		return m
	}
}
