package main

// The pods suite: how long a pod takes from create to Running and Ready on this machine's kubelet, and
// how long its `rayctl up` took to be ready (cold), in each way rayctl runs pods: the containerd runtime
// as root (the local raysim image, a netns and an IP per pod), the process runtime as root, the process
// runtime as an ordinary user (uid 4242, rayctl-laptop: a user namespace of rayctl's own, its node
// network namespace in it, a netns per pod) and, for comparison, the fake runtime (no processes: what the
// API server, binder, kubelet and status writes cost alone).
//
// Each runtime gets its own fresh `rayctl up` (free API port, own data dir, pod CIDR and bridge). One
// warm-up pod runs first (it waits for the raysim image to be loaded) and is not counted. Then the pods
// are created one after another: each is created only once the one before is Ready, so every figure is
// one pod's latency on an otherwise idle node (the earlier pods keep running). A pod's time runs from just
// before the create call to the watch event that first shows its Ready condition True (the condition's
// lastTransitionTime has whole-second precision only, so the client's clock is used).

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/kubectl/pkg/util/podutils"
)

const (
	// podsCount is how many pods are measured per runtime.
	podsCount = 50
	// podsGoal is the goal for create → Ready on containerd, printed in the table.
	podsGoal = "p50 ≤ 300 ms on containerd"
	// podsImage is the image `rayctl up` preloads.
	podsImage = "rayctl.local/raysim:latest"
)

// podsModes are the modes suite pods measures, the fake runtime (which also runs the pod cycles) last.
var podsModes = []upMode{
	{name: "containerd", args: []string{"--runtime", "containerd"}},
	processRoot,
	processRootless,
	{name: "fake", args: []string{"--runtime", "fake"}},
}

// podsResult is one runtime's figures.
type podsResult struct {
	runtime string
	chosen  string        // what `rayctl up` said it runs
	startup time.Duration // its cold `rayctl up`, exec → ready
	warmup  time.Duration
	samples []time.Duration
	// cycles is the memory after the pod create/delete cycles (fake runtime only).
	cycles     *memAfter
	cyclesDone int
}

func runPods(rayctl, out string, cycles int) error {
	load := loadAverage()
	var results []podsResult
	for _, m := range podsModes {
		n := 0
		if m.name == "fake" {
			n = cycles
		}
		r, err := podsRuntime(rayctl, m, n)
		if err != nil {
			return fmt.Errorf("pods on %s: %w", m.name, err)
		}
		results = append(results, r)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Pod create → Running and Ready (`make bench`, suite pods)\n\n")
	fmt.Fprintf(&b, "Measured %s, %d pods per runtime after one warm-up pod. Machine: %s; load average %s when the suite started.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), podsCount, machine(), load)
	fmt.Fprintf(&b, "Each mode has its own fresh `rayctl up` (default controllers; as root, or as the ordinary user rayctl-laptop, uid 4242, for the rootless mode), whose cold start (exec → ready) the table shows too. The pods (one container, `%s`, `sleep`) are created one after another: ", podsImage)
	fmt.Fprintf(&b, "each once the one before is Ready, the earlier ones left running. A pod's time runs from just before the create call to the watch event that first shows it Ready ")
	fmt.Fprintf(&b, "(API write, binder, kubelet: sandbox with netns and IP, container create and start, status write, watch fan-out).\n\n")
	fmt.Fprintf(&b, "| mode | cold `rayctl up` → ready | pods | p50 | p90 | p99 | min | max | warm-up pod | goal |\n|---|---|---|---|---|---|---|---|---|---|\n")
	res := suiteResult{Suite: "pods", Title: "Pod create → Running and Ready", Machine: machine() + "; load average " + load}
	dist := plotSpec{File: "pods-start.png", Title: "Pod create → Running and Ready, one pod at a time", Kind: "cdf", XLabel: "ms"}
	for _, r := range results {
		goal := "–"
		p50 := percentile(r.samples, 0.50)
		name := fmt.Sprintf("pod create → Ready p50, %s", r.runtime)
		if r.runtime == "containerd" {
			met := p50 <= 300*time.Millisecond
			goal = podsGoal + " " + mark(met)
			res.Figures = append(res.Figures, goalFigure(name, podsMS(p50), "≤ 300 ms", met))
		} else {
			res.Figures = append(res.Figures, figure{Name: name, Value: podsMS(p50)})
		}
		dist.Series = append(dist.Series, series{Name: r.runtime, Values: msValues(r.samples)})
		res.Figures = append(res.Figures, figure{Name: "cold `rayctl up` → ready, " + r.runtime, Value: podsMS(r.startup)})
		fmt.Fprintf(&b, "| %s (%s) | %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", r.runtime, r.chosen, podsMS(r.startup), len(r.samples),
			podsMS(percentile(r.samples, 0.50)), podsMS(percentile(r.samples, 0.90)), podsMS(percentile(r.samples, 0.99)),
			podsMS(percentile(r.samples, 0)), podsMS(percentile(r.samples, 1)), podsMS(r.warmup), goal)
	}
	fmt.Fprintf(&b, "\nPercentiles are nearest-rank over the %d samples (with %d samples p99 is the slowest pod). The warm-up pod includes waiting for the raysim image to be loaded into the runtime. The load average says how busy the machine was.\n", podsCount, podsCount)
	for _, r := range results {
		if m := r.cycles; m != nil {
			met := m.afterMB <= podCyclesGoal*m.idleMB
			fmt.Fprintf(&b, "\nMemory after pod churn (%s runtime): %d pods created and deleted after the measured ones, %d at a time (each created, Ready, deleted, gone), in %s; "+
				"rayctl's RSS %.0f s after the last: %.0f MB, idle (3 s after ready, before any pod) %.0f MB, %+.0f%%. Goal: within %.0f%% of idle %s.\n",
				r.runtime, r.cyclesDone, podCycleWorkers, m.took.Round(time.Second), podCyclesSettle.Seconds(), m.afterMB, m.idleMB, 100*(m.afterMB/m.idleMB-1), 100*(podCyclesGoal-1), mark(met))
			res.Figures = append(res.Figures, goalFigure(fmt.Sprintf("RSS %.0f s after %d pod create/delete cycles (%s runtime)", podCyclesSettle.Seconds(), r.cyclesDone, r.runtime),
				fmt.Sprintf("%.0f MB (idle %.0f MB, %+.0f%%)", m.afterMB, m.idleMB, 100*(m.afterMB/m.idleMB-1)), fmt.Sprintf("within %.0f%% of idle", 100*(podCyclesGoal-1)), met))
			if m.idleParts != nil && m.afterParts != nil {
				fmt.Fprintf(&b, "\nWhere that memory lies (`/proc/PID/smaps` and the Go runtime's memory classes from `/metrics`; bench/memparts.go):\n\n- idle: %s\n- after the cycles: %s\n",
					m.idleParts, m.afterParts)
				res.Plots = append(res.Plots, memPartsPlot("pods-memory.png", fmt.Sprintf("rayctl's RSS by part, idle and after %d pod cycles (%s runtime)", r.cyclesDone, r.runtime),
					[]string{"idle", "after the cycles"}, []*memParts{m.idleParts, m.afterParts}))
			}
		}
	}
	res.Plots = append([]plotSpec{dist}, res.Plots...)
	return writeSuite(out, res, b.String())
}

// podsRuntime measures one runtime on a fresh `rayctl up`, then runs cycles pod create/delete cycles
// and reads the memory after them (see memory.go).
func podsRuntime(rayctl string, mode upMode, cycles int) (podsResult, error) {
	rt := mode.name
	res := podsResult{runtime: rt}
	up, dir, done, err := startMode(rayctl, "pods", mode)
	defer done()
	if err != nil {
		return res, err
	}
	res.startup = up.Wall
	res.chosen = podsRuntimeName(strings.TrimPrefix(runtimeLine(up), "runtime"))
	client, _, err := clients(up, 200, 400)
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	var idleMB float64
	var idleParts *memParts
	if cycles > 0 {
		idleMB = settledRSS(up.Pid(), 3*time.Second)
		idleParts = memPartsOrNil(ctx, client, up.Pid(), "idle", "pods-idle")
	}
	const ns = "bench-pods"
	if err := podNamespace(ctx, client, ns); err != nil {
		return res, err
	}
	w, err := client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return res, err
	}
	// An open watch holds up `rayctl up`'s clean stop; close it first.
	defer w.Stop()
	ready := map[string]bool{}
	waitReady := func(name string, timeout time.Duration) error {
		deadline := time.After(timeout)
		for !ready[name] {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					return fmt.Errorf("the watch ended")
				}
				if ev.Type == watch.Error {
					return fmt.Errorf("watch error: %v", ev.Object)
				}
				if p, ok := ev.Object.(*corev1.Pod); ok && runningReady(p) {
					ready[p.Name] = true
				}
			case <-deadline:
				return fmt.Errorf("pod %s not Ready within %s (see %s)", name, timeout, filepath.Join(dir, "rayctl.log"))
			}
		}
		return nil
	}
	one := func(name string, timeout time.Duration) (time.Duration, error) {
		t0 := time.Now()
		if _, err := client.CoreV1().Pods(ns).Create(ctx, podsPod(name), metav1.CreateOptions{}); err != nil {
			return 0, err
		}
		if err := waitReady(name, timeout); err != nil {
			return 0, err
		}
		return time.Since(t0), nil
	}
	if res.warmup, err = one("warmup", 5*time.Minute); err != nil {
		return res, err
	}
	fmt.Fprintf(os.Stderr, "%s: warm-up pod Ready in %s\n", rt, podsMS(res.warmup))
	for i := range podsCount {
		d, err := one(fmt.Sprintf("pod-%02d", i), 2*time.Minute)
		if err != nil {
			return res, err
		}
		res.samples = append(res.samples, d)
	}
	fmt.Fprintf(os.Stderr, "%s: p50 %s, p99 %s over %d pods\n", rt, podsMS(percentile(res.samples, 0.5)), podsMS(percentile(res.samples, 0.99)), podsCount)
	w.Stop()
	// Delete the pods while the kubelet runs, so their containers go the normal way.
	zero := int64(0)
	_ = client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	_ = poll(ctx, 2*time.Minute, func() bool {
		l, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0
	})
	if cycles > 0 {
		t0 := time.Now()
		if err := podCycles(ctx, client, ns, cycles); err != nil {
			return res, fmt.Errorf("pod create/delete cycles: %w (see %s)", err, filepath.Join(dir, "rayctl.log"))
		}
		res.cycles = &memAfter{idleMB: idleMB, took: time.Since(t0), idleParts: idleParts}
		res.cycles.afterMB = settledRSS(up.Pid(), podCyclesSettle)
		res.cycles.afterParts = memPartsOrNil(ctx, client, up.Pid(), "after the pod cycles", "pods-after-cycles")
		res.cyclesDone = cycles
		fmt.Fprintf(os.Stderr, "%s: %d pod create/delete cycles in %s; RSS %.0f MB idle, %.0f MB %s after\n", rt, cycles, res.cycles.took.Round(time.Second),
			idleMB, res.cycles.afterMB, podCyclesSettle)
	}
	return res, nil
}

func podsPod(name string) *corev1.Pod {
	grace := int64(1)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name: "main", Image: podsImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"sleep", "3600"},
			}},
		},
	}
}

// runningReady reports whether a pod is Running with its Ready condition True.
func runningReady(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning && podutils.IsPodReady(p)
}

// percentile is the nearest-rank percentile q (0 the minimum, 1 the maximum) of v.
func percentile(v []time.Duration, q float64) time.Duration {
	if len(v) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// podsRuntimeName shortens the runtime line's detail ("   123 ms  containerd: private …") to its first words.
func podsRuntimeName(rest string) string {
	f := strings.Fields(rest)
	if len(f) > 2 && f[1] == "ms" {
		f = f[2:]
	}
	s := strings.Join(f, " ")
	if i := strings.IndexAny(s, "(,;"); i > 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// podsMS formats d in milliseconds.
func podsMS(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }
