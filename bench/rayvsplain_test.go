package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayctl/rayctl/pkg/chain"
)

// fakeRayctlRuns are three runs of a rayctl side: every hop 1 s but the worker's (workerHop) and the
// total, and the worker's course beside the head.
func fakeRayctlRuns(total, workerHop time.Duration, worker [2]time.Duration) []rvpRun {
	var runs []rvpRun
	for range 3 {
		phases := make([]time.Duration, len(rayctlPhases))
		for i := range phases {
			phases[i] = time.Second
		}
		phases[3] = workerHop
		runs = append(runs, rvpRun{total: total, phases: phases, rss: 2 << 30, byKind: map[string]int64{"raylet": 60 << 20}, worker: worker})
	}
	return runs
}

// TestRayVsPlainReportsTheNoWaitSides writes the report from made-up runs: the sides without
// wait-gcs-ready get a headline figure each, and the levers' section says what the switch saved.
func TestRayVsPlainReportsTheNoWaitSides(t *testing.T) {
	var plainRuns []rvpRun
	for range 3 {
		plainRuns = append(plainRuns, rvpRun{total: 10 * time.Second, phases: make([]time.Duration, len(plainPhases)), rss: 1 << 30,
			byKind: map[string]int64{"raylet": 59 << 20}})
	}
	var plainLimitedRuns []rvpRun
	for _, r := range plainRuns {
		r.total = 16 * time.Second
		plainLimitedRuns = append(plainLimitedRuns, r)
	}
	sides := []*rvpSide{
		{name: "rayctl", phases: rayctlPhases, spans: rayctlSpans, limited: true, runs: fakeRayctlRuns(18*time.Second, 3*time.Second, [2]time.Duration{5 * time.Second, 8 * time.Second})},
		{name: rvpPlainName, phases: plainPhases, spans: plainSpans, runs: plainRuns},
		{name: rvpPlainLimitsName, phases: plainPhases, spans: plainSpans, lever: true, limited: true, runs: plainLimitedRuns},
		{name: rvpLWName, phases: rayctlPhases, spans: rayctlSpans, lever: true, limited: true, runs: fakeRayctlRuns(16*time.Second, 3*time.Second, [2]time.Duration{5 * time.Second, 8 * time.Second})},
		{name: rvpNoWaitName, phases: noWaitPhases, spans: rayctlSpans, lever: true, limited: true, runs: fakeRayctlRuns(15*time.Second, 0, [2]time.Duration{200 * time.Millisecond, 4 * time.Second})},
		{name: rvpLWNoWaitName, phases: noWaitPhases, spans: rayctlSpans, lever: true, err: os.ErrDeadlineExceeded},
		{name: rvpAllName, phases: noWaitPhases, spans: rayctlSpans, lever: true, runs: fakeRayctlRuns(11*time.Second, 0, [2]time.Duration{200 * time.Millisecond, 4 * time.Second})},
	}
	out := t.TempDir()
	if err := writeRayVsPlain(out, sides, 3, "1.00", "1.00", "runtime process"); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(out, "rayvsplain.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| rayctl, no wait-gcs-ready | 15.0 s |",
		// Beside plain Ray under the same CPU limits, for the sides that keep them only.
		"| rayctl | 18.0 s | 18.0 s, 18.0 s, 18.0 s | 1.80× | ≤ 1.0× ✘ | 1.12× | ≤ 1.0× ✘ |",
		"| rayctl, no wait-gcs-ready | 15.0 s | 15.0 s, 15.0 s, 15.0 s | 1.50× | ≤ 1.0× ✘ | 0.94× | ≤ 1.0× ✔ |",
		"| plain Ray, the pods' CPU limits | 16.0 s | 16.0 s, 16.0 s, 16.0 s | 1.60× |  |  |  |",
		"| rayctl, all three levers | 11.0 s | 11.0 s, 11.0 s, 11.0 s | 1.10× | ≤ 1.0× ✘ |  |  |",
		"| plain Ray | 10.0 s | 10.0 s, 10.0 s, 10.0 s |  |  |  |  |",
		"Plain Ray under the pods' CPU limits, step by step:",
		"Side **rayctl, light-weight submitter, no wait-gcs-ready** failed and was dropped",
		"its `ray start --address` waiting for the GCS",
		"default submitter: nothing → job ended 15.0 s instead of 18.0 s, -3.00 s (1.50× plain Ray instead of 1.80×)",
		"worker Ready first in 3 of 3 runs",
		"| rayctl, no wait-gcs-ready | 0.20 s | 4.00 s | 0 of 3 runs |",
		"| rayctl, all three levers | 11.0 s |",
		"nothing → job ended 11.0 s against plain Ray's 10.0 s, **1.10×**; by stretch: cluster up",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	js, err := os.ReadFile(filepath.Join(out, "rayvsplain.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res suiteResult
	if err := json.Unmarshal(js, &res); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range res.Figures {
		names = append(names, f.Name)
	}
	for _, want := range []string{
		"rayctl, no wait-gcs-ready ÷ plain Ray, nothing → job ended, median of interleaved runs",
		"rayctl, all three levers ÷ plain Ray, nothing → job ended, median of interleaved runs",
		"rayctl, no wait-gcs-ready ÷ plain Ray under the pods' CPU limits, nothing → job ended, median of interleaved runs",
	} {
		if !strings.Contains(strings.Join(names, "\n"), want) {
			t.Errorf("no headline figure %q among %q", want, names)
		}
	}
}

// TestRayjobHopsSeesTheWorkerDown: a worker status write showing its Ray container terminated after the
// Pod ran, before the job ended, marks the run; one after the job's end (the cluster's deletion) does not.
func TestRayjobHopsSeesTheWorkerDown(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := rayjobSample{applied: t0, jobStart: t0.Add(10 * time.Second), jobEnd: t0.Add(12 * time.Second), complete: 15 * time.Second}
	worker := func(at time.Duration, state string) chain.Event {
		ps := &chain.PodStatus{Phase: "Running", Ready: "False"}
		if state != "" {
			ps.Containers = []chain.ContainerState{{Name: "ray-worker", State: state}}
		}
		return chain.Event{Hop: chain.KubeletWrite, Time: t0.Add(at), Object: chain.Ref{Kind: "Pod", Name: "bench-0-abc-small-group-worker-x"}, Pod: ps}
	}
	for _, c := range []struct {
		name string
		evs  []chain.Event
		down bool
	}{
		{"running throughout", []chain.Event{worker(time.Second, chain.Running), worker(2*time.Second, chain.Running)}, false},
		{"terminated before the job ended", []chain.Event{worker(time.Second, chain.Running), worker(3*time.Second, chain.Terminated)}, true},
		{"terminated after the job ended", []chain.Event{worker(time.Second, chain.Running), worker(14*time.Second, chain.Terminated)}, false},
	} {
		if _, _, down := rayjobHops(c.evs, s, "bench-0"); down != c.down {
			t.Errorf("%s: worker down %v, want %v", c.name, down, c.down)
		}
	}
}
