package main

// Where a start-up's CPU goes (issue 15 §1: a missed goal names what bounds it, with the profile that
// shows it). rayctl up --startup-cpuprofile writes a CPU profile from exec to ready; cpuSummary reads
// it back: the CPU time beside the wall time says whether the start-up waits or computes (on 2 cores, a
// start-up that keeps both busy cannot end before half its CPU time), and the share of the samples in
// named code says what computes.

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// cpuPart names code by the prefixes of its functions' names (package paths or functions).
type cpuPart struct {
	name     string
	prefixes []string
}

// startupParts are the parts a start-up's CPU is split into. A sample counts for every part one of its
// stack's functions belongs to, so the parts overlap: garbage collection assisted by an allocation in
// the CRD code counts for both.
var startupParts = []cpuPart{
	{"the CRDs' machinery (k8s.io/apiextensions-apiserver)", []string{"k8s.io/apiextensions-apiserver/"}},
	{"OpenAPI (kube-openapi)", []string{"k8s.io/kube-openapi/"}},
	{"garbage collection", []string{"runtime.gcBgMarkWorker", "runtime.gcAssistAlloc", "runtime.bgsweep", "runtime.bgscavenge"}},
	{"etcd", []string{"go.etcd.io/"}},
}

// cpuSummary is one CPU profile summed up.
type cpuSummary struct {
	wall, cpu time.Duration
	parts     []time.Duration // by startupParts
}

// String says it on one line.
func (s cpuSummary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "CPU %.2f s in %.2f s (%.2f cores busy)", s.cpu.Seconds(), s.wall.Seconds(), s.cpu.Seconds()/max(s.wall.Seconds(), 1e-9))
	for i, p := range startupParts {
		fmt.Fprintf(&b, "; %s %.2f s (%.0f%%)", p.name, s.parts[i].Seconds(), 100*s.parts[i].Seconds()/max(s.cpu.Seconds(), 1e-9))
	}
	return b.String()
}

// summarizeCPUProfile reads the CPU profile at path and sums its samples by startupParts.
func summarizeCPUProfile(path string) (cpuSummary, error) {
	f, err := os.Open(path)
	if err != nil {
		return cpuSummary{}, err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return cpuSummary{}, fmt.Errorf("%s: %w", path, err)
	}
	cpuIndex := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			cpuIndex = i
		}
	}
	if cpuIndex < 0 {
		return cpuSummary{}, fmt.Errorf("%s: not a CPU profile", path)
	}
	s := cpuSummary{wall: time.Duration(p.DurationNanos), parts: make([]time.Duration, len(startupParts))}
	for _, sample := range p.Sample {
		d := time.Duration(sample.Value[cpuIndex])
		s.cpu += d
		for i, part := range startupParts {
			if stackHas(sample, part.prefixes) {
				s.parts[i] += d
			}
		}
	}
	return s, nil
}

// stackHas says whether a function of sample's stack has a name with one of prefixes.
func stackHas(sample *profile.Sample, prefixes []string) bool {
	for _, loc := range sample.Location {
		for _, line := range loc.Line {
			if line.Function == nil {
				continue
			}
			for _, prefix := range prefixes {
				if strings.HasPrefix(line.Function.Name, prefix) {
					return true
				}
			}
		}
	}
	return false
}
