// Command bench measures rayctl and writes readable tables to bench/results/.
//
//	go run ./bench -rayctl _output/bin/rayctl -out bench/results [-suite startup|pods|rayjob|load|chain|peers|scale|egress|all]
//
// Suite startup measures start-up and memory, idle and after a RayJob (startup.md, memory.go); suite pods
// measures pod create -> Ready and the memory after pod churn on the fake runtime (pods.md, see pods.go); suite load drives the API server with 50 clients (load.md, see load.go);
// suite rayjob measures a RayJob
// from apply to Complete on the containerd and the process runtimes (rayjob.md, see rayjob.go); suite rayvsplain
// runs the real-Ray RayJob beside the same cluster and job started by hand, interleaved (rayvsplain.go); suite chain
// measures kubelet status write → RayCluster Reconcile start and the chain recorder's overhead (chain.md,
// see chain.go); suite peers runs an envtest-style etcd + kube-apiserver beside rayctl (peers.md, see
// peers.go); suite scale creates 10, 30 and 100 RayClusters at once on the fake runtime, the largest again on 100
// simulated nodes (or the sizes -scale-simulated-sizes names: 1000 is 10,000 pods) (scale.md, see
// scale.go); suite egress measures pods' way out of the node (egress.md, see egress.go); suite services measures a connection to a pod IP against one through a ClusterIP, and the
// Service proxy's table rewrites (services.md, see services.go; needs root); all (the default) runs them all. Every suite also writes <suite>.json (bench/benchjson),
// from which bench/report draws their plots and writes bench/results/README.md.
//
// Cold start: a new data dir (CA, etcd and CRDs made from nothing). Warm restart: the same data dir again.
// Each is timed from exec to the "ready in" line, five times, and the median reported; RSS is read from
// /proc 3 s after ready.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/rayctl/rayctl/pkg/instance"
	"github.com/rayctl/rayctl/test/loadgen"
)

func main() {
	rayctl := flag.String("rayctl", "_output/bin/rayctl", "the rayctl binary")
	out := flag.String("out", "bench/results", "where to write results")
	runs := flag.Int("runs", 5, "runs per measurement (suite startup)")
	suite := flag.String("suite", "all", "what to measure: startup, pods, rayjob, rayvsplain, load, chain, peers, scale, egress, services or all")
	rayjobRuns := flag.Int("rayjob-runs", 10, "measured RayJobs per raysim configuration (suite rayjob)")
	rayjobRealRuns := flag.Int("rayjob-real-runs", 5, "measured RayJobs on real Ray (suite rayjob; needs `make ray`)")
	rvpRuns := flag.Int("rayvsplain-runs", 3, "measured runs of each side, interleaved (suite rayvsplain; needs `make ray`)")
	rvpLevers := flag.Bool("rayvsplain-levers", true, "suite rayvsplain also runs plain Ray under the pods' CPU limits (CFS quotas: root, cgroup v1; else that side is dropped), "+
		"the RayJob with KubeRay's light-weight submitter (quay.io/kuberay/submitter), without the pods' CPU limits, "+
		"and both submitters and all three levers together on a second `rayctl up` with ENABLE_INIT_CONTAINER_INJECTION=false (no wait-gcs-ready init container)")
	flag.StringVar(&rvpNote, "rayvsplain-note", "", "a markdown file added to suite rayvsplain's levers (what an earlier run, before a change, measured)")
	rayBin := flag.String("ray-bin", "", "the bin dir of the Ray venv (suite rayvsplain); empty: ray/bin beside the rayctl binary's dir (_output/ray/bin)")
	samples := flag.String("samples", "configs/samples", "the sample manifests (suites rayjob and startup)")
	podCycles := flag.Int("pod-cycles", podCyclesDefault, "pod create/delete cycles on the fake runtime before its memory is read (suite pods; 0: none)")
	chainRuns := flag.Int("chain-cycles", chainCycles, "measured cycles per instance (suite chain)")
	sizes := flag.String("scale-sizes", "10,30,100", "RayClusters (1 head + 9 workers each) per run of suite scale, comma-separated")
	profileDir := flag.String("scale-cpuprofile", "", "a directory for a CPU profile of the largest run of suite scale (15 s, from 2 s after the first create; scale-<pods>.pprof)")
	flag.StringVar(&startupProfileDir, "startup-cpuprofile", "", "a directory that keeps the CPU profiles of suite startup's profiled cold start and warm restart, from exec to ready (startup-cold.pprof, startup-warm.pprof)")
	flag.StringVar(&heapProfileDir, "heap-profiles", "", "a directory for heap profiles of rayctl taken with each memory reading of suites startup, pods and load (<suite>-<when>.pprof)")
	simulatedNodes := flag.Int("scale-simulated-nodes", 100, "suite scale also runs its largest size on this many simulated nodes (0: not)")
	simulatedSizes := flag.String("scale-simulated-sizes", "", "RayClusters per run on the simulated nodes, comma-separated (default: the largest of -scale-sizes; 1000 is 10,000 pods, several minutes)")
	scaleUpArgs := flag.String("scale-up-args", "", "more `rayctl up` flags for suite scale, space-separated (e.g. --reconcile-concurrency=4)")
	peers := peerPaths{}
	flag.StringVar(&peers.etcd, "etcd", "etcd", "the peer's etcd (suite peers; Debian: apt-get install etcd-server)")
	flag.StringVar(&peers.kubeAPIServer, "kube-apiserver", "_output/tools/kube-apiserver-v1.37.2", "the peer's kube-apiserver (suite peers; make peer-apiserver)")
	flag.Parse()
	scaleSizes, err := parseSizes(*sizes)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: -scale-sizes:", err)
		os.Exit(2)
	}
	scale := scaleOptions{sizes: scaleSizes, profileDir: *profileDir, upArgs: strings.Fields(*scaleUpArgs), simulatedNodes: *simulatedNodes}
	if *simulatedSizes != "" {
		if scale.simulatedSizes, err = parseSizes(*simulatedSizes); err != nil {
			fmt.Fprintln(os.Stderr, "bench: -scale-simulated-sizes:", err)
			os.Exit(2)
		}
	}
	switch *suite {
	case "startup":
		err = run(*rayctl, *out, *samples, *runs)
	case "pods":
		err = runPods(*rayctl, *out, *podCycles)
	case "rayjob":
		err = runRayJob(*rayctl, *out, *samples, *rayjobRuns, *rayjobRealRuns)
	case "rayvsplain":
		err = runRayVsPlain(*rayctl, *out, *samples, *rayBin, *rvpRuns, *rvpLevers)
	case "load":
		err = runLoad(*rayctl, *out)
	case "chain":
		err = runChain(*rayctl, *out, *chainRuns)
	case "peers":
		err = runPeers(*rayctl, *out, *runs, peers)
	case "scale":
		err = runScale(*rayctl, *out, scale)
	case "egress":
		err = runEgress(*rayctl, *out)
	case "services":
		err = runServices(*rayctl, *out)
	case "all":
		err = errors.Join(run(*rayctl, *out, *samples, *runs), runPods(*rayctl, *out, *podCycles), runRayJob(*rayctl, *out, *samples, *rayjobRuns, *rayjobRealRuns),
			runRayVsPlain(*rayctl, *out, *samples, *rayBin, *rvpRuns, *rvpLevers), runLoad(*rayctl, *out),
			runChain(*rayctl, *out, *chainRuns), runPeers(*rayctl, *out, *runs, peers), runScale(*rayctl, *out, scale), runEgress(*rayctl, *out), runServices(*rayctl, *out))
	default:
		err = fmt.Errorf("unknown -suite %q: want startup, pods, rayjob, rayvsplain, load, chain, peers, scale, egress, services or all", *suite)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// startupProfileDir, when set (-startup-cpuprofile), keeps the CPU profiles of suite startup's profiled
// start-ups (startup-cold.pprof, startup-warm.pprof); otherwise they go to a temporary directory.
var startupProfileDir string

// profiledStartups starts rayctl once more cold and warm, each with --startup-cpuprofile, after the
// measured runs (profiling costs a little CPU, so those stay unprofiled), and sums the profiles up.
func profiledStartups(rayctl string) (cold, warm cpuSummary, err error) {
	profDir := startupProfileDir
	if profDir == "" {
		if profDir, err = os.MkdirTemp("", "rayctl-bench-prof-"); err != nil {
			return cold, warm, err
		}
		defer os.RemoveAll(profDir)
	} else if err := os.MkdirAll(profDir, 0o755); err != nil {
		return cold, warm, err
	}
	dir, err := os.MkdirTemp("", "rayctl-bench-")
	if err != nil {
		return cold, warm, err
	}
	defer os.RemoveAll(dir)
	args := instance.OwnNetwork([]string{"--port", "0"})
	summaries := make([]cpuSummary, 2)
	for i, name := range []string{"startup-cold", "startup-warm"} {
		path := filepath.Join(profDir, name+".pprof")
		if _, err := startOnce(rayctl, dir, append(append([]string(nil), args...), "--startup-cpuprofile", path), false, i == 0); err != nil {
			return cold, warm, fmt.Errorf("%s: %w", name, err)
		}
		if summaries[i], err = summarizeCPUProfile(path); err != nil {
			return cold, warm, err
		}
		fmt.Fprintf(os.Stderr, "%s, profiled: %s\n", name, summaries[i])
	}
	return summaries[0], summaries[1], nil
}

type sample struct {
	wall     time.Duration // exec → ready line
	reported time.Duration // what rayctl printed
	rssMB    float64       // 3 s after ready
	steps    string        // rayctl's per-component lines, condensed
}

func run(rayctl, out, samples string, runs int) error {
	loadBefore := loadAverage()
	var cold, warm []sample
	for i := 0; i < runs; i++ {
		dir, err := os.MkdirTemp("", "rayctl-bench-")
		if err != nil {
			return err
		}
		// A pod network of the run's own, the same for its restart: the default one may be taken.
		args := instance.OwnNetwork([]string{"--port", "0"})
		s, err := startOnce(rayctl, dir, args, i == 0, true)
		if err != nil {
			return fmt.Errorf("cold start: %w", err)
		}
		cold = append(cold, s)
		s, err = startOnce(rayctl, dir, args, true, false)
		if err != nil {
			return fmt.Errorf("warm restart: %w", err)
		}
		warm = append(warm, s)
		os.RemoveAll(dir)
		fmt.Fprintf(os.Stderr, "run %d: cold %v, warm %v\n", i+1, cold[i].wall.Round(time.Millisecond), warm[i].wall.Round(time.Millisecond))
	}
	profCold, profWarm, err := profiledStartups(rayctl)
	if err != nil {
		return fmt.Errorf("profiled start-up: %w", err)
	}
	mem, err := rssAfterRayJob(rayctl, samples)
	if err != nil {
		return fmt.Errorf("RSS after a RayJob: %w", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# rayctl start-up (`make bench`)\n\n")
	fmt.Fprintf(&b, "Measured %s on %d runs each; median shown, min–max in brackets. Machine: %s; load average %s when the suite started, %s when it ended "+
		"(on a machine busy with other work the wall times stretch; the CPU times of the profiled runs below do not).\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), runs, machine(), loadBefore, loadAverage())
	fmt.Fprintf(&b, "| measurement | wall (exec → ready) | reported by rayctl | RSS 3 s after ready | goal |\n|---|---|---|---|---|\n")
	row := func(name string, s []sample, goal string) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", name, durStats(s, func(x sample) time.Duration { return x.wall }),
			durStats(s, func(x sample) time.Duration { return x.reported }), rssStats(s), goal)
	}
	row("cold start (new data dir)", cold, "≤ 1.0 s, RSS ≤ 150 MB")
	row("warm restart (same data dir)", warm, "≤ 0.5 s")
	fmt.Fprintf(&b, "\nBoth include installing the four ray.io/v1 CRDs and waiting until they are Established. A warm restart follows\n"+
		"a stop once the raysim image, which rayctl loads after ready, is in (a stop in the middle of the import makes containerd's\n"+
		"next start slower by about a second).\n")
	memMet := mem.afterMB <= rayjobRSSGoalMB
	fmt.Fprintf(&b, "\nMemory after a RayJob: on another fresh `rayctl up --runtime=containerd`, RSS %.0f MB idle (3 s after ready); one RayJob "+
		"(configs/samples/rayjob-k8sjob.yaml with the entrypoint `echo hello` and shutdownAfterJobFinishes, so the controller deletes its RayCluster), "+
		"applied with `rayctl kubectl apply` (whose validation has the API server build its OpenAPI documents), ran to Complete and its cluster's pods were gone %s after the apply; RSS %.0f s later: **%.0f MB** (goal ≤ %d MB %s).\n",
		mem.idleMB, mem.took.Round(100*time.Millisecond), rayjobSettle.Seconds(), mem.afterMB, rayjobRSSGoalMB, mark(memMet))
	var plots []plotSpec
	if mem.idleParts != nil && mem.afterParts != nil {
		fmt.Fprintf(&b, "\nWhere that memory lies (`/proc/PID/smaps` and the Go runtime's memory classes from `/metrics`; bench/memparts.go):\n\n- idle: %s\n- after the RayJob: %s\n",
			mem.idleParts, mem.afterParts)
		plots = append(plots, memPartsPlot("startup-memory.png", "rayctl's RSS by part, idle and after a RayJob (containerd, raysim)",
			[]string{"idle", "after the RayJob"}, []*memParts{mem.idleParts, mem.afterParts}))
	}
	fmt.Fprintf(&b, "\nWhere the CPU went: one more cold start and warm restart, each with `rayctl up --startup-cpuprofile` "+
		"(a CPU profile from exec to ready; bench/cpuprofile.go sums it up: a sample counts for every part its stack passes through, so parts overlap). "+
		"With 2 cores, a start-up cannot end before half its CPU time.\n\n- cold: %s\n- warm: %s\n", profCold, profWarm)
	cores := float64(runtime.NumCPU())
	coldLeast, warmLeast := profCold.cpu.Seconds()/cores, profWarm.cpu.Seconds()/cores
	fmt.Fprintf(&b, "\nThe least wall time that CPU allows on %.0f cores (all of them busy all along, nothing else running): cold %.2f s (goal ≤ 1.0 s %s), warm %.2f s (goal ≤ 0.5 s %s).\n",
		cores, coldLeast, mark(coldLeast <= 1.0), warmLeast, mark(warmLeast <= 0.5))
	fmt.Fprintf(&b, "\nWhere the time went (ms per component, as rayctl printed it), median and slowest run:\n\n")
	for _, set := range []struct {
		name string
		s    []sample
	}{{"cold", cold}, {"warm", warm}} {
		v := append([]sample(nil), set.s...)
		sort.Slice(v, func(i, j int) bool { return v[i].wall < v[j].wall })
		fmt.Fprintf(&b, "- %s, median:%s\n- %s, slowest:%s\n", set.name, v[len(v)/2].steps, set.name, v[len(v)-1].steps)
	}
	coldWall, warmWall, rss := median(cold, func(s sample) float64 { return s.wall.Seconds() }),
		median(warm, func(s sample) float64 { return s.wall.Seconds() }), measuredRSS(append(cold, warm...))
	res := suiteResult{Suite: "startup", Title: "rayctl start-up", Machine: machine() + "; load average " + loadAverage(), Figures: []figure{
		goalFigure("cold `rayctl up` → ready, median", fmt.Sprintf("%.2f s", coldWall), "≤ 1.0 s", coldWall <= 1.0),
		goalFigure("warm restart → ready, median", fmt.Sprintf("%.2f s", warmWall), "≤ 0.5 s", warmWall <= 0.5),
		{Name: "cold start, profiled: CPU in the CRDs' machinery / all CPU / wall", Value: fmt.Sprintf("%.2f s / %.2f s / %.2f s", profCold.parts[0].Seconds(), profCold.cpu.Seconds(), profCold.wall.Seconds())},
		{Name: "warm restart, profiled: CPU in the CRDs' machinery / all CPU / wall", Value: fmt.Sprintf("%.2f s / %.2f s / %.2f s", profWarm.parts[0].Seconds(), profWarm.cpu.Seconds(), profWarm.wall.Seconds())},
		goalFigure("cold start, profiled: least wall its CPU allows (CPU ÷ cores)", fmt.Sprintf("%.2f s", coldLeast), "≤ 1.0 s", coldLeast <= 1.0),
		goalFigure("warm restart, profiled: least wall its CPU allows (CPU ÷ cores)", fmt.Sprintf("%.2f s", warmLeast), "≤ 0.5 s", warmLeast <= 0.5),
		goalFigure("RSS 3 s after ready, idle, median", fmt.Sprintf("%.0f MB", rss[len(rss)/2]), "≤ 150 MB", rss[len(rss)/2] <= 150),
		goalFigure(fmt.Sprintf("RSS %.0f s after a RayJob ran and its cluster was deleted (containerd, raysim)", rayjobSettle.Seconds()),
			fmt.Sprintf("%.0f MB (idle %.0f MB)", mem.afterMB, mem.idleMB), fmt.Sprintf("≤ %d MB", rayjobRSSGoalMB), memMet),
	}, Plots: plots}
	return writeSuite(out, res, b.String())
}

// median is the median of get over s.
func median(s []sample, get func(sample) float64) float64 {
	var v []float64
	for _, x := range s {
		v = append(v, get(x))
	}
	sort.Float64s(v)
	return v[len(v)/2]
}

// startOnce runs `rayctl up args...` on dir, waits for ready, samples RSS when asked, and stops it. With settle
// it first waits until rayctl has loaded the raysim image it loads after ready, so that the next start
// on dir is a restart of a settled instance, not of one stopped in the middle of an image import.
func startOnce(rayctl, dir string, args []string, measureRSS, settle bool) (sample, error) {
	up, err := instance.Start(context.Background(), instance.Options{Binary: rayctl, DataDir: dir, Args: args})
	if err != nil {
		return sample{}, err
	}
	defer up.Stop(time.Minute)
	s := sample{wall: up.Wall, reported: up.Reported}
	for _, line := range up.Startup {
		if f := strings.Fields(line); strings.HasPrefix(line, "  ") && len(f) >= 3 && f[2] == "ms" {
			s.steps += fmt.Sprintf(" %s %s", f[0], f[1])
		}
	}
	if measureRSS {
		time.Sleep(3 * time.Second)
		s.rssMB = loadgen.RSSMB(up.Pid())
	}
	for deadline := time.Now().Add(time.Minute); settle && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "raysim-image")); err == nil {
			break
		}
	}
	return s, nil
}

func durStats(s []sample, get func(sample) time.Duration) string {
	var v []time.Duration
	for _, x := range s {
		v = append(v, get(x))
	}
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	return fmt.Sprintf("%d ms [%d–%d]", v[len(v)/2].Milliseconds(), v[0].Milliseconds(), v[len(v)-1].Milliseconds())
}

func rssStats(s []sample) string {
	v := measuredRSS(s)
	if len(v) == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f MB [%.0f–%.0f]", v[len(v)/2], v[0], v[len(v)-1])
}

// measuredRSS is the RSS of the samples that read it (startOnce reads it only when asked), sorted.
func measuredRSS(s []sample) []float64 {
	var v []float64
	for _, x := range s {
		if x.rssMB > 0 {
			v = append(v, x.rssMB)
		}
	}
	sort.Float64s(v)
	return v
}

func machine() string {
	cores := 0
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		cores = strings.Count(string(b), "processor\t:")
	}
	return fmt.Sprintf("%d cores", cores)
}
