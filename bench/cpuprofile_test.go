package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// TestSummarizeCPUProfileSumsByPart writes a profile of three samples and reads it back: all CPU, and
// each part the sum of the samples whose stack passes through it.
func TestSummarizeCPUProfileSumsByPart(t *testing.T) {
	fn := func(id uint64, name string) *profile.Function { return &profile.Function{ID: id, Name: name} }
	crd, gc, other := fn(1, "k8s.io/apiextensions-apiserver/pkg/apiserver.(*crdHandler).ServeHTTP"), fn(2, "runtime.gcAssistAlloc"), fn(3, "main.main")
	loc := func(id uint64, f *profile.Function) *profile.Location {
		return &profile.Location{ID: id, Line: []profile.Line{{Function: f}}}
	}
	lCRD, lGC, lOther := loc(1, crd), loc(2, gc), loc(3, other)
	p := &profile.Profile{
		SampleType:    []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		DurationNanos: int64(2 * time.Second),
		Function:      []*profile.Function{crd, gc, other},
		Location:      []*profile.Location{lCRD, lGC, lOther},
		Sample: []*profile.Sample{
			{Location: []*profile.Location{lCRD, lOther}, Value: []int64{1, int64(300 * time.Millisecond)}},
			{Location: []*profile.Location{lGC, lCRD}, Value: []int64{1, int64(100 * time.Millisecond)}},
			{Location: []*profile.Location{lOther}, Value: []int64{1, int64(600 * time.Millisecond)}},
		},
	}
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Write(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s, err := summarizeCPUProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.wall != 2*time.Second || s.cpu != time.Second {
		t.Errorf("wall %v, CPU %v; want 2s, 1s", s.wall, s.cpu)
	}
	want := []time.Duration{400 * time.Millisecond, 0, 100 * time.Millisecond, 0} // CRDs, OpenAPI, GC, etcd
	for i, w := range want {
		if s.parts[i] != w {
			t.Errorf("%s: %v, want %v", startupParts[i].name, s.parts[i], w)
		}
	}
}
