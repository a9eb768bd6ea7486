package main

// The load suite: 50 concurrent clients write (create, update and delete ConfigMaps; patch Pods' status)
// for 60 s against a bare control plane (`rayctl up --controllers=none --kube-controllers=none
// --kubelet=false`) while 10 watchers follow both kinds, resuming from the last resourceVersion when the
// server closes a watch. It reports ops/s, the p50/p99 latency of mutating calls against Kubernetes' SLO
// (p99 ≤ 1 s), whether every watcher saw every write, and the process' RSS before, at peak and after.
// A second run on another fresh instance started with GOMEMLIMIT=loadMemoryLimit shows what a soft
// memory limit saves at the peak and costs in throughput and latency.
// The same load runs for 15 s in the end-to-end suite (test/e2e/load_test.go, TestLoad).

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/rayctl/rayctl/pkg/instance"
	"github.com/rayctl/rayctl/test/loadgen"
)

// loadSeconds is how long the writers run; RAYCTL_LOAD_SECONDS overrides it.
const loadSeconds = 60

// loadMemoryLimit is the soft memory limit (GOMEMLIMIT) of the load's second run: what a user short of
// memory can give rayctl, and what it costs in throughput and latency.
const loadMemoryLimit = "512MiB"

// loadRun is one run of the load on a fresh instance, and where its memory lay.
type loadRun struct {
	loadgen.Result
	during, after *memParts
}

// runLoadOnce runs the load for d against a fresh bare `rayctl up` with env added to its environment.
func runLoadOnce(rayctl string, d time.Duration, env []string, name string) (loadRun, error) {
	var run loadRun
	dir, err := os.MkdirTemp("", "rayctl-bench-load-")
	if err != nil {
		return run, err
	}
	defer os.RemoveAll(dir)
	up, err := instance.Start(context.Background(), instance.Options{Binary: rayctl, DataDir: dir, Env: env,
		Args: instance.OwnNetwork([]string{"--port", "0", "--controllers=none", "--kube-controllers=none", "--kubelet=false"})})
	if err != nil {
		return run, err
	}
	defer up.Stop(time.Minute)
	cfg, err := up.RESTConfig(0, 0)
	if err != nil {
		return run, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), d+3*time.Minute)
	defer cancel()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return run, err
	}
	fmt.Fprintf(os.Stderr, "load: %d clients for %s %v...\n", loadgen.Clients, d, env)
	peakParts := watchMemParts(ctx, kube, up.Pid(), name+"-largest")
	r, err := loadgen.Run(ctx, cfg, up.Pid(), d, nil)
	if err != nil {
		peakParts()
		return run, err
	}
	run.Result = r
	run.during = peakParts()
	run.after = memPartsOrNil(ctx, kube, up.Pid(), "after the load", name+"-after")
	return run, nil
}

// runLoad runs the load suite, once as rayctl starts by default and once under loadMemoryLimit, and
// writes out/load.md.
func runLoad(rayctl, out string) error {
	seconds := loadSeconds
	if v, err := strconv.Atoi(os.Getenv("RAYCTL_LOAD_SECONDS")); err == nil && v > 0 {
		seconds = v
	}
	d := time.Duration(seconds) * time.Second
	load := loadAverage()
	run, err := runLoadOnce(rayctl, d, nil, "load")
	if err != nil {
		return err
	}
	limited, err := runLoadOnce(rayctl, d, []string{"GOMEMLIMIT=" + loadMemoryLimit}, "load-gomemlimit")
	if err != nil {
		return fmt.Errorf("under GOMEMLIMIT=%s: %w", loadMemoryLimit, err)
	}
	r := run.Result
	cores := 0
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		cores = strings.Count(string(b), "processor\t:")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# API server under load (`make bench`, suite load)\n\n")
	fmt.Fprintf(&b, "Measured %s on a bare control plane (no controllers, no kubelet). Machine: %d cores.\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), cores)
	fmt.Fprintf(&b, "%d clients, each looping for %s: create a ConfigMap, update it, merge-patch its own Pod's status, delete the ConfigMap. ", loadgen.Clients, r.Duration.Round(time.Second))
	fmt.Fprintf(&b, "%d watchers (%d on ConfigMaps, %d on Pods) follow from the start, resuming from the last resourceVersion when the server ends a watch.\n\n", 2*loadgen.Watchers, loadgen.Watchers, loadgen.Watchers)
	fmt.Fprintf(&b, "| measurement | value | goal |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| mutating requests | %d (%.0f ops/s) | — |\n", r.Ops, r.OpsPerSec())
	fmt.Fprintf(&b, "| mutating latency p50 | %d ms | — |\n", r.P50.Milliseconds())
	fmt.Fprintf(&b, "| mutating latency p99 | %d ms | ≤ 1000 ms (Kubernetes SLO): %s |\n", r.P99.Milliseconds(), r.SLOVerdict())
	fmt.Fprintf(&b, "| mutating latency max | %d ms | — |\n", r.Max.Milliseconds())
	fmt.Fprintf(&b, "| failed requests | %d | 0 |\n", r.Errors)
	fmt.Fprintf(&b, "| watch events received / expected | %d / %d | equal |\n", r.EventsGot, r.EventsWant)
	fmt.Fprintf(&b, "| watches ended by the server and resumed | %d | — |\n", r.Resumes)
	fmt.Fprintf(&b, "| rayctl RSS before / peak / after | %.0f / %.0f / %.0f MB | bounded |\n", r.RSSBefore, r.RSSPeak, r.RSSAfter)
	if r.FirstErr != nil {
		fmt.Fprintf(&b, "\nFirst error: `%v`\n", r.FirstErr)
	}
	if run.during != nil && run.after != nil {
		fmt.Fprintf(&b, "\nWhere the memory lay (`/proc/PID/smaps` and the Go runtime's memory classes from `/metrics`, read every %s during the load; bench/memparts.go):\n\n- the largest reading under load: %s\n- after the load: %s\n",
			memPartsEvery, run.during, run.after)
	}
	l := limited.Result
	fmt.Fprintf(&b, "\nThe same load on another fresh instance started with `GOMEMLIMIT=%s` (the Go runtime's soft memory limit: it collects garbage more often as the heap nears it, trading CPU for memory): "+
		"%d mutating requests (%.0f ops/s, %+.0f%%), p50 %d ms, p99 %d ms, %d failed, %d / %d watch events; RSS before / peak / after %.0f / %.0f / %.0f MB.\n",
		loadMemoryLimit, l.Ops, l.OpsPerSec(), 100*(l.OpsPerSec()/r.OpsPerSec()-1), l.P50.Milliseconds(), l.P99.Milliseconds(), l.Errors, l.EventsGot, l.EventsWant, l.RSSBefore, l.RSSPeak, l.RSSAfter)
	if limited.during != nil {
		fmt.Fprintf(&b, "Its largest reading under load: %s\n", limited.during)
	}
	res := suiteResult{Suite: "load", Title: "API server under load", Machine: machine() + "; load average " + load, Figures: []figure{
		goalFigure("peak RSS, 50 clients", fmt.Sprintf("%.0f MB", r.RSSPeak), "≤ 400 MB", r.RSSPeak <= 400),
		goalFigure("mutating latency p99", fmt.Sprintf("%d ms", r.P99.Milliseconds()), "≤ 1 s", r.P99 <= time.Second),
		goalFigure("failed requests", fmt.Sprint(r.Errors), "0", r.Errors == 0),
		goalFigure("watch events received / expected", fmt.Sprintf("%d / %d", r.EventsGot, r.EventsWant), "all", r.EventsGot == r.EventsWant),
	}}
	if run.during != nil && run.after != nil {
		res.Plots = []plotSpec{memPartsPlot("load-memory.png", "rayctl's RSS by part under the load and after it",
			[]string{"under load (largest)", "after", "GOMEMLIMIT=" + loadMemoryLimit + ", under load (largest)"}, []*memParts{run.during, run.after, limited.during})}
	}
	res.Figures = append(res.Figures, figure{Name: "peak RSS, 50 clients, GOMEMLIMIT=" + loadMemoryLimit,
		Value: fmt.Sprintf("%.0f MB at %.0f ops/s (%+.0f%%), p99 %d ms", l.RSSPeak, l.OpsPerSec(), 100*(l.OpsPerSec()/r.OpsPerSec()-1), l.P99.Milliseconds())})
	if l.Errors > 0 || l.EventsGot != l.EventsWant {
		return fmt.Errorf("load under GOMEMLIMIT=%s: %d failed requests, %d of %d watch events", loadMemoryLimit, l.Errors, l.EventsGot, l.EventsWant)
	}
	if err := writeSuite(out, res, b.String()); err != nil {
		return err
	}
	if r.Errors > 0 || r.EventsGot != r.EventsWant {
		return fmt.Errorf("load: %d failed requests, %d of %d watch events", r.Errors, r.EventsGot, r.EventsWant)
	}
	return nil
}

// loadResult is what one load phase measured.
