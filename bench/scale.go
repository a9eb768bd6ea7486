package main

// Suite scale: how the control plane copes with many Ray clusters at once. For each size N, a fresh
// `rayctl up --runtime=fake` (no processes: what the API server, etcd, controllers, binder and kubelet
// cost alone) gets N RayClusters of one head and nine workers, all created at once; the suite times
// them from the first create to every RayCluster `ready`, and reads:
//   - API latency by verb, p50 and p99, from the API server's own apiserver_request_duration_seconds
//     histogram (the difference across the run; quantiles interpolated within the histogram's buckets,
//     so they are as fine as its buckets), every client's requests included (controllers, kubelet, this
//     suite);
//   - peak RSS (sampled every 100 ms) and RSS once every cluster is ready;
//   - etcd's database file size at the end;
//   - RayCluster reconciles per cluster (controller-runtime's reconcile_total for controller raycluster),
//     and the work queues of the RayCluster controller and the binder (what the pods wait on).
// The Node advertises pods=2000 (and cpu and memory to match): a scale run is about the control plane, not
// about fitting pods on this machine.

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/rayctl/rayctl/pkg/runtime/fake"
	"github.com/rayctl/rayctl/test/loadgen"
)

// scaleWorkers is the workers per RayCluster (one head besides).
const scaleWorkers = 9

// scaleResult is one size's figures.
type scaleResult struct {
	clusters, pods    int
	wall              time.Duration
	rssReady, rssPeak float64
	etcdMB            float64
	reconciles        float64
	statusWrites      float64               // RayCluster status writes the API server accepted, per cluster
	cpuSeconds        float64               // rayctl's CPU time (user+system) from the first create to all ready
	queues            map[string]queueStats // by controller
	verbs             []verbLatency
	// failed counts the API server's answers other than 2xx over the run, by "code verb resource".
	failed map[string]float64
	// nodesUsed is how many nodes the pods were bound to, maxPerNode the most pods on one of them.
	nodesUsed, maxPerNode int
}

// verbLatency is one verb's request count and latency quantiles over a run.
type verbLatency struct {
	verb     string
	count    float64
	p50, p99 time.Duration
}

// scaleOptions are suite scale's knobs.
type scaleOptions struct {
	// sizes are the runs' RayClusters.
	sizes []int
	// profileDir, when set, receives the largest run's CPU profile.
	profileDir string
	// simulatedSizes are the RayClusters of the runs on simulated nodes (default: the largest of sizes).
	simulatedSizes []int
	// upArgs are more `rayctl up` flags (e.g. --reconcile-concurrency=4), said in the table.
	upArgs []string
	// simulatedNodes, when above 0, adds runs (of simulatedSizes) on that many simulated nodes
	// (rayctl up --simulated-nodes), the first node tainted so that every pod is placed among them.
	simulatedNodes int
}

// simulatedNodeCapacity is what each simulated node of suite scale advertises.
const simulatedNodeCapacity = "cpu=32,memory=128Gi"

// simulatedArgs are the `rayctl up` flags of suite scale's run on n simulated nodes.
func simulatedArgs(n int) []string {
	return []string{"--node-name", "bench-main", "--node-taints", "bench-main:bench.rayctl.io/real=true:NoSchedule",
		"--simulated-nodes", fmt.Sprintf("%d:%s", n, simulatedNodeCapacity)}
}

// runScale runs suite scale for each size and writes out/scale.md and scale.json.
func runScale(rayctl, out string, o scaleOptions) error {
	sizes := o.sizes
	load := loadAverage()
	var results []scaleResult
	for _, n := range sizes {
		profile := ""
		if o.profileDir != "" && n == slices.Max(sizes) {
			profile = filepath.Join(o.profileDir, fmt.Sprintf("scale-%d.pprof", n*(1+scaleWorkers)))
		}
		r, err := scaleOnce(rayctl, n, profile, o.upArgs)
		if err != nil {
			return fmt.Errorf("scale %d: %w", n, err)
		}
		fmt.Fprintf(os.Stderr, "scale %d clusters (%d pods): ready in %s, rayctl CPU %.1f s, peak RSS %.0f MB\n", n, r.pods, r.wall.Round(time.Millisecond), r.cpuSeconds, r.rssPeak)
		results = append(results, r)
	}
	var sims []scaleResult
	if o.simulatedNodes > 0 {
		simSizes := o.simulatedSizes
		if len(simSizes) == 0 {
			simSizes = []int{slices.Max(sizes)}
		}
		for _, n := range simSizes {
			profile := ""
			if o.profileDir != "" && n == slices.Max(simSizes) {
				profile = filepath.Join(o.profileDir, fmt.Sprintf("scale-%d-simulated.pprof", n*(1+scaleWorkers)))
			}
			r, err := scaleOnce(rayctl, n, profile, append(slices.Clone(o.upArgs), simulatedArgs(o.simulatedNodes)...))
			if err != nil {
				return fmt.Errorf("scale %d on %d simulated nodes: %w", n, o.simulatedNodes, err)
			}
			fmt.Fprintf(os.Stderr, "scale %d clusters (%d pods) on %d simulated nodes: ready in %s, rayctl CPU %.1f s, peak RSS %.0f MB, %d nodes used\n",
				n, r.pods, o.simulatedNodes, r.wall.Round(time.Millisecond), r.cpuSeconds, r.rssPeak, r.nodesUsed)
			sims = append(sims, r)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Many RayClusters at once (`make bench`, suite scale)\n\n")
	fmt.Fprintf(&b, "Measured %s on the fake runtime (no processes: API server, etcd, controllers, binder and kubelet alone). Machine: %s; load average %s when the suite started, %s when it ended.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), machine(), load, loadAverage())
	fmt.Fprintf(&b, "Each size has its own fresh `rayctl up --runtime=fake --node-capacity pods=2000,…%s`; N RayClusters of 1 head + %d workers (each worker with KubeRay's `wait-gcs-ready` init container, which the fake runtime ends with exit 0 after %s) "+
		"are created at once and timed from the first create to every RayCluster `ready`. "+
		"API latency is the API server's own histogram over the run (all clients), interpolated within its buckets; the etcd db is its file's size (bbolt grows it in steps). Goal (issue 15 §2): 1,000 pods ready ≤ 15 s with API p99 ≤ 100 ms.\n\n", strings.Join(append([]string{""}, o.upArgs...), " "), scaleWorkers, fake.InitRunFor)
	fmt.Fprintf(&b, "| RayClusters | pods | all ready | per 100 pods | rayctl CPU | API p50 / p99 (all verbs) | peak RSS | RSS when ready | etcd db | reconciles per cluster | status writes per cluster | goal |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	res := suiteResult{Suite: "scale", Title: "Many RayClusters at once (fake runtime)", Machine: machine() + "; load average " + load}
	wall := series{Name: "all RayClusters ready (s)"}
	rssPeak, rssReady := series{Name: "peak RSS"}, series{Name: "RSS when all ready"}
	p99 := map[string]*series{}
	for _, r := range results {
		all := r.verb("all")
		goal := "–"
		if r.pods >= 1000 {
			met := r.wall <= 15*time.Second && all.p99 <= 100*time.Millisecond
			goal = "≤ 15 s, p99 ≤ 100 ms " + mark(met)
			res.Figures = append(res.Figures,
				goalFigure(fmt.Sprintf("%d pods (%d RayClusters) → all ready", r.pods, r.clusters), fmt.Sprintf("%.1f s", r.wall.Seconds()), "≤ 15 s", r.wall <= 15*time.Second),
				goalFigure(fmt.Sprintf("API p99, all verbs, during the %d-pod run", r.pods), latencyMS(all.p99), "≤ 100 ms", all.p99 <= 100*time.Millisecond))
		} else {
			res.Figures = append(res.Figures, figure{Name: fmt.Sprintf("%d pods (%d RayClusters) → all ready", r.pods, r.clusters), Value: fmt.Sprintf("%.1f s", r.wall.Seconds())})
		}
		res.Figures = append(res.Figures, figure{Name: fmt.Sprintf("peak RSS, %d pods", r.pods), Value: fmt.Sprintf("%.0f MB", r.rssPeak)})
		fmt.Fprintf(&b, "| %d | %d | %.1f s | %.2f s | %.1f s | %s / %s | %.0f MB | %.0f MB | %.1f MB | %.1f | %.1f | %s |\n", r.clusters, r.pods, r.wall.Seconds(),
			r.wall.Seconds()*100/float64(r.pods), r.cpuSeconds, latencyMS(all.p50), latencyMS(all.p99), r.rssPeak, r.rssReady, r.etcdMB, r.reconciles, r.statusWrites, goal)
		x := float64(r.pods)
		wall.Points = append(wall.Points, [2]float64{x, r.wall.Seconds()})
		rssPeak.Points = append(rssPeak.Points, [2]float64{x, r.rssPeak})
		rssReady.Points = append(rssReady.Points, [2]float64{x, r.rssReady})
		for _, verb := range append([]string{"all"}, scaleVerbs...) {
			if v := r.verb(verb); v.count > 0 && verb != "WATCH" {
				if p99[verb] == nil {
					p99[verb] = &series{Name: verb}
				}
				p99[verb].Points = append(p99[verb].Points, [2]float64{x, float64(v.p99) / float64(time.Millisecond)})
			}
		}
	}
	fmt.Fprintf(&b, "\nAPI latency by verb (requests during the run: count, p50 / p99; POST creates, PUT updates; WATCH is how long watches stayed open, not a latency, and is left out of “all verbs”):\n\n| RayClusters | %s |\n|---|%s\n",
		strings.Join(scaleVerbs, " | "), strings.Repeat("---|", len(scaleVerbs)))
	for _, r := range results {
		cells := make([]string, len(scaleVerbs))
		for i, verb := range scaleVerbs {
			cells[i] = "–"
			if v := r.verb(verb); v.count > 0 {
				cells[i] = fmt.Sprintf("%.0f: %s / %s", v.count, latencyMS(v.p50), latencyMS(v.p99))
			}
		}
		fmt.Fprintf(&b, "| %d | %s |\n", r.clusters, strings.Join(cells, " | "))
	}
	fmt.Fprintf(&b, "\nAnswers other than 2xx during the run (the API server's apiserver_request_total; 5xx would be a server bug or an overload to explain, 409s are optimistic concurrency, 404s raced deletes):\n\n| RayClusters | answers |\n|---|---|\n")
	for _, r := range results {
		keys := slices.Sorted(maps.Keys(r.failed))
		cells := make([]string, len(keys))
		for i, k := range keys {
			cells[i] = fmt.Sprintf("%s: %.0f", k, r.failed[k])
		}
		if len(cells) == 0 {
			cells = []string{"none"}
		}
		fmt.Fprintf(&b, "| %d | %s |\n", r.clusters, strings.Join(cells, ", "))
	}
	fmt.Fprintf(&b, "\nWhere the pods wait: the controllers that create and place them (controller-runtime's work queues over the run; "+
		"an item's wait is its time in the queue before a worker took it, its work the reconcile):\n\n"+
		"| RayClusters | controller | workers | reconciles | mean work | work total | mean wait in queue |\n|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		for _, c := range scaleControllers {
			q := r.queues[c]
			if q.adds == 0 || q.reconciles == 0 {
				continue
			}
			fmt.Fprintf(&b, "| %d | %s | %.0f | %.0f | %s | %.1f s | %s |\n", r.clusters, c, q.workers, q.reconciles,
				latencyMS(time.Duration(q.workSeconds/q.reconciles*float64(time.Second))), q.workSeconds,
				latencyMS(time.Duration(q.queueSeconds/q.adds*float64(time.Second))))
		}
	}
	if last := results[len(results)-1]; len(last.queues) > 0 {
		var parts []string
		for _, c := range scaleControllers {
			if q := last.queues[c]; q.workers > 0 {
				parts = append(parts, fmt.Sprintf("%s %.0f%% (%.0f worker(s))", c, 100*q.workSeconds/q.workers/last.wall.Seconds(), q.workers))
			}
		}
		fmt.Fprintf(&b, "\nHow busy each controller's workers were in the largest run (%.0f s): %s.", last.wall.Seconds(), strings.Join(parts, ", "))
		b.WriteString(" A worker near 100% is what the pods queue behind.\n")
	}
	if len(results) >= 2 {
		first, last := results[0], results[len(results)-1]
		// wall ∝ pods^k between the smallest and the largest run: k ≈ 1 is linear, k > 1 worse.
		k := math.Log(last.wall.Seconds()/first.wall.Seconds()) / math.Log(float64(last.pods)/float64(first.pods))
		shape := "linear or better"
		if k > 1.15 {
			shape = "worse than linear"
		}
		curve := fmt.Sprintf("wall time grows as pods^%.2f from %d to %d pods (%.1f → %.1f ms per pod): %s", k, first.pods, last.pods,
			first.wall.Seconds()*1000/float64(first.pods), last.wall.Seconds()*1000/float64(last.pods), shape)
		fmt.Fprintf(&b, "\nCost curve: %s.\n", curve)
		res.Figures = append(res.Figures, goalFigure("cost curve (wall time per pod, smallest to largest run)", curve, "no worse than linear", shape != "worse than linear"))
	}
	if len(sims) > 0 {
		fmt.Fprintf(&b, "\n## On %d simulated nodes\n\n`rayctl up --runtime=fake %s`: RayClusters as above, the first node tainted so that the binder places every pod among %d simulated nodes "+
			"(each `%s`; their pods Running and Ready without a process, docs/nodes.md), filtering and scoring each node for each pod.\n\n"+
			"| nodes | RayClusters | pods | all ready | per 100 pods | rayctl CPU | API p50 / p99 (all verbs) | peak RSS | RSS when ready | etcd db | nodes used | most pods on one node |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n",
			o.simulatedNodes, strings.Join(simulatedArgs(o.simulatedNodes), " "), o.simulatedNodes, simulatedNodeCapacity)
		for _, sim := range sims {
			all := sim.verb("all")
			fmt.Fprintf(&b, "| %d | %d | %d | %.1f s | %.2f s | %.1f s | %s / %s | %.0f MB | %.0f MB | %.1f MB | %d | %d |\n",
				o.simulatedNodes+1, sim.clusters, sim.pods, sim.wall.Seconds(), sim.wall.Seconds()*100/float64(sim.pods), sim.cpuSeconds, latencyMS(all.p50), latencyMS(all.p99),
				sim.rssPeak, sim.rssReady, sim.etcdMB, sim.nodesUsed, sim.maxPerNode)
			res.Figures = append(res.Figures,
				figure{Name: fmt.Sprintf("%d pods (%d RayClusters) on %d simulated nodes → all ready", sim.pods, sim.clusters, o.simulatedNodes), Value: fmt.Sprintf("%.1f s", sim.wall.Seconds())},
				figure{Name: fmt.Sprintf("API p99, all verbs, %d pods on %d simulated nodes", sim.pods, o.simulatedNodes), Value: latencyMS(all.p99)},
				figure{Name: fmt.Sprintf("peak RSS, %d pods on %d simulated nodes", sim.pods, o.simulatedNodes), Value: fmt.Sprintf("%.0f MB", sim.rssPeak)},
				figure{Name: fmt.Sprintf("nodes used by %d pods on %d simulated nodes (most pods on one)", sim.pods, o.simulatedNodes), Value: fmt.Sprintf("%d (%d)", sim.nodesUsed, sim.maxPerNode)})
		}
		if sims[len(sims)-1].pods < 10000 {
			b.WriteString("\n10,000 pods (1,000 RayClusters) on the same nodes: `make bench SUITE=scale BENCH_ARGS=\"-scale-simulated-sizes 100,1000\"` (several minutes).\n")
		}
	}
	var verbs []series
	for _, verb := range append([]string{"all"}, scaleVerbs...) {
		if s := p99[verb]; s != nil {
			verbs = append(verbs, *s)
		}
	}
	walls := []series{wall}
	if len(results) >= 2 {
		first, linear := results[0], series{Name: "linear from the smallest run"}
		for _, r := range results {
			linear.Points = append(linear.Points, [2]float64{float64(r.pods), first.wall.Seconds() * float64(r.pods) / float64(first.pods)})
		}
		walls = append(walls, linear)
	}
	wallGoal, p99Goal := 15.0, 100.0
	res.Plots = []plotSpec{
		{File: "scale-wall.png", Title: "Pods created at once → every RayCluster ready", Kind: "line", XLabel: "pods (RayClusters × 10)", YLabel: "seconds",
			Series: walls, Goal: &wallGoal, GoalLabel: "goal at 1,000 pods: 15 s"},
		{File: "scale-api-p99.png", Title: "API p99 latency by verb during the run", Kind: "line", XLabel: "pods (RayClusters × 10)", YLabel: "ms",
			Series: verbs, Goal: &p99Goal, GoalLabel: "goal: p99 ≤ 100 ms"},
		{File: "scale-rss.png", Title: "rayctl's memory", Kind: "line", XLabel: "pods (RayClusters × 10)", YLabel: "RSS (MB)", Series: []series{rssPeak, rssReady}},
	}
	return writeSuite(out, res, b.String())
}

// verb is r's figures for verb (zero when it had no requests).
func (r scaleResult) verb(verb string) verbLatency {
	for _, v := range r.verbs {
		if v.verb == verb {
			return v
		}
	}
	return verbLatency{verb: verb}
}

// parseSizes reads "10,30,100".
func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive number of RayClusters", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// scaleVerbs are the verbs the by-verb table shows, in order, as the API server's metrics name them
// (POST creates, PUT updates).
var scaleVerbs = []string{"POST", "GET", "LIST", "PATCH", "PUT", "DELETE", "WATCH"}

// longRunning are the verbs whose duration is how long a stream stayed open; "all" leaves them out.
var longRunning = map[string]bool{"WATCH": true, "WATCHLIST": true, "CONNECT": true}

// scaleOnce runs one size on a fresh instance.
// profile, when set, is where the run's CPU profile goes.
func scaleOnce(rayctl string, n int, profile string, upArgs []string) (scaleResult, error) {
	res := scaleResult{clusters: n, pods: n * (1 + scaleWorkers)}
	dir, err := os.MkdirTemp("", "rayctl-bench-scale-")
	if err != nil {
		return res, err
	}
	defer removeInstance(rayctl, dir)
	metricsPort, err := freePorts(1)
	if err != nil {
		return res, err
	}
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", metricsPort[0])
	up, err := startUp(rayctl, dir, append([]string{"--runtime", "fake", "--node-capacity", "pods=2000,cpu=4000,memory=8000Gi",
		"--metrics-bind-address", metricsAddr}, upArgs...)...)
	if err != nil {
		return res, err
	}
	defer up.Stop(time.Minute)
	kube, ray, err := clients(up, 1000, 2000)
	if err != nil {
		return res, err
	}
	// A run is given 15 minutes, and a second more per RayCluster (10,000 pods on a loaded 2-core
	// machine take tens of minutes).
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute+time.Duration(n)*time.Second)
	defer cancel()
	const ns = "bench-scale"
	if err := podNamespace(ctx, kube, ns); err != nil {
		return res, err
	}
	before, err := apiMetrics(ctx, kube)
	if err != nil {
		return res, err
	}
	queuesBefore, err := controllerQueues(metricsAddr)
	if err != nil {
		return res, err
	}

	list, err := ray.RayV1().RayClusters(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return res, err
	}
	var peak float64
	stopSampling := make(chan struct{})
	var sampling sync.WaitGroup
	stop := sync.OnceFunc(func() { close(stopSampling); sampling.Wait() })
	defer stop()
	sampling.Go(func() {
		for {
			peak = max(peak, loadgen.RSSMB(up.Pid()))
			select {
			case <-stopSampling:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	if profile != "" {
		// The API server serves Go's pprof to the admin; a CPU profile of the middle of the run shows
		// what bounds it.
		sampling.Go(func() {
			select {
			case <-time.After(scaleProfileAfter):
			case <-stopSampling:
				return
			}
			if err := cpuProfile(ctx, kube, profile); err != nil {
				fmt.Fprintf(os.Stderr, "scale %d: CPU profile: %v\n", n, err)
			}
		})
	}
	t0, cpu0 := time.Now(), procCPUSeconds(up.Pid())
	var creating sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		creating.Go(func() {
			if _, err := ray.RayV1().RayClusters(ns).Create(ctx, scaleCluster(fmt.Sprintf("c%03d", i)), metav1.CreateOptions{}); err != nil {
				errs <- err
			}
		})
	}
	creating.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return res, err
	}
	if err := waitAllReady(ctx, ray, ns, n, list.ResourceVersion); err != nil {
		return res, fmt.Errorf("%w after %s (see %s)", err, time.Since(t0).Round(time.Second), filepath.Join(dir, "rayctl.log"))
	}
	res.wall = time.Since(t0)
	res.cpuSeconds = procCPUSeconds(up.Pid()) - cpu0
	stop()
	pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return res, err
	}
	perNode := map[string]int{}
	for _, p := range pods.Items {
		perNode[p.Spec.NodeName]++
	}
	res.nodesUsed = len(perNode)
	for _, c := range perNode {
		res.maxPerNode = max(res.maxPerNode, c)
	}
	res.rssPeak, res.rssReady = peak, loadgen.RSSMB(up.Pid())
	after, err := apiMetrics(ctx, kube)
	if err != nil {
		return res, err
	}
	latencyBefore, err := apiLatency(before)
	if err != nil {
		return res, err
	}
	latencyAfter, err := apiLatency(after)
	if err != nil {
		return res, err
	}
	res.verbs = latencyDiff(latencyBefore, latencyAfter)
	res.failed = failedAnswers(before, after)
	res.statusWrites = statusWrites(before, after) / float64(n)
	queuesAfter, err := controllerQueues(metricsAddr)
	if err != nil {
		return res, err
	}
	res.queues = map[string]queueStats{}
	for c, q := range queuesAfter {
		res.queues[c] = q.sub(queuesBefore[c])
	}
	res.reconciles = res.queues["raycluster"].reconciles / float64(n)
	if st, err := os.Stat(filepath.Join(dir, "etcd", "member", "snap", "db")); err == nil {
		res.etcdMB = float64(st.Size()) / (1 << 20)
	}
	return res, nil
}

// waitAllReady follows the RayClusters of ns from resourceVersion rv until n of them have been ready. A
// watch the server ends is resumed from the last resourceVersion seen; one too old to resume from (410
// Gone) starts again from a list.
func waitAllReady(ctx context.Context, ray rayclient.Interface, ns string, n int, rv string) error {
	ready := map[string]bool{}
	note := func(c *rayv1.RayCluster) {
		if c.Status.State == rayv1.Ready {
			ready[c.Name] = true
		}
	}
	for len(ready) < n {
		if rv == "" {
			list, err := ray.RayV1().RayClusters(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for i := range list.Items {
				note(&list.Items[i])
			}
			rv = list.ResourceVersion
			continue
		}
		w, err := ray.RayV1().RayClusters(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%d of %d RayClusters ready", len(ready), n)
			}
			rv = ""
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				rv = "" // most likely 410 Gone: list again
				break
			}
			if c, ok := ev.Object.(*rayv1.RayCluster); ok {
				rv = c.ResourceVersion
				if ev.Type != watch.Deleted && ev.Type != watch.Bookmark {
					note(c)
				}
			}
			if len(ready) == n {
				break
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return fmt.Errorf("%d of %d RayClusters ready", len(ready), n)
		}
		if len(ready) < n {
			fmt.Fprintf(os.Stderr, "scale: the RayCluster watch ended with %d of %d ready; resuming\n", len(ready), n)
		}
	}
	return nil
}

// procCPUSeconds is the user+system CPU time process pid has used so far (0 if unknown).
func procCPUSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name (which may hold spaces) start at its closing parenthesis;
	// utime and stime are the 14th and 15th fields, in clock ticks (100 per second on Linux).
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100
}

// scaleProfileSeconds is how long the CPU profile of a run lasts, from scaleProfileAfter after the first
// create (a run that ends sooner is not profiled).
const (
	scaleProfileSeconds = 15
	scaleProfileAfter   = 2 * time.Second
)

// cpuProfile writes a CPU profile of the next scaleProfileSeconds of the instance to path.
func cpuProfile(ctx context.Context, kube kubernetes.Interface, path string) error {
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", strconv.Itoa(scaleProfileSeconds)).
		Timeout(2 * scaleProfileSeconds * time.Second).DoRaw(ctx)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s (go tool pprof -top %s)\n", path, path)
	return os.WriteFile(path, raw, 0o644)
}

// scaleCluster is a RayCluster of one head and scaleWorkers workers, asking for little (the fake runtime
// runs nothing).
func scaleCluster(name string) *rayv1.RayCluster {
	small := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}}
	container := func(n string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: n, Image: "rayproject/ray:2.60.0", Resources: small}}}}
	}
	return &rayv1.RayCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: rayv1.RayClusterSpec{
			HeadGroupSpec: rayv1.HeadGroupSpec{RayStartParams: map[string]string{}, Template: container("ray-head")},
			WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{
				GroupName: "workers", Replicas: ptr.To[int32](scaleWorkers), MinReplicas: ptr.To[int32](scaleWorkers), MaxReplicas: ptr.To[int32](scaleWorkers),
				RayStartParams: map[string]string{}, Template: container("ray-worker"),
			}},
		},
	}
}

// histogram is one verb's cumulative bucket counts (upper bound in seconds → count) and total count.
type histogram struct {
	buckets map[float64]float64
	count   float64
}

// apiMetrics reads the API server's /metrics.
func apiMetrics(ctx context.Context, kube kubernetes.Interface) (map[string]*dto.MetricFamily, error) {
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's /metrics: %w", err)
	}
	return parseMetrics(raw)
}

// statusWrites counts the RayCluster status writes (PUT or PATCH of rayclusters/status) the API server
// accepted between before and after (its apiserver_request_total).
func statusWrites(before, after map[string]*dto.MetricFamily) float64 {
	count := func(families map[string]*dto.MetricFamily) float64 {
		var n float64
		for _, m := range families["apiserver_request_total"].GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["resource"] == "rayclusters" && l["subresource"] == "status" && (l["verb"] == "PUT" || l["verb"] == "PATCH") && strings.HasPrefix(l["code"], "2") {
				n += m.GetCounter().GetValue()
			}
		}
		return n
	}
	return count(after) - count(before)
}

// failedAnswers counts the API server's answers other than 2xx between before and after (its
// apiserver_request_total), by "code verb resource[/subresource]". A 5xx here is a server bug or an
// overload to explain; 409s are optimistic concurrency at work, 404s deletes that raced.
func failedAnswers(before, after map[string]*dto.MetricFamily) map[string]float64 {
	count := func(families map[string]*dto.MetricFamily) map[string]float64 {
		out := map[string]float64{}
		for _, m := range families["apiserver_request_total"].GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if strings.HasPrefix(l["code"], "2") {
				continue
			}
			resource := l["resource"]
			if l["subresource"] != "" {
				resource += "/" + strings.TrimPrefix(l["subresource"], "/")
			}
			out[l["code"]+" "+l["verb"]+" "+resource] += m.GetCounter().GetValue()
		}
		return out
	}
	b, out := count(before), count(after)
	for k, v := range out {
		if out[k] = v - b[k]; out[k] <= 0 {
			delete(out, k)
		}
	}
	return out
}

// apiLatency is the API server's apiserver_request_duration_seconds in families, summed by verb (and "all").
func apiLatency(families map[string]*dto.MetricFamily) (map[string]*histogram, error) {
	out := map[string]*histogram{}
	f := families["apiserver_request_duration_seconds"]
	if f == nil {
		return nil, fmt.Errorf("the API server's /metrics has no apiserver_request_duration_seconds")
	}
	for _, m := range f.GetMetric() {
		verb := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == "verb" {
				verb = l.GetValue()
			}
		}
		keys := []string{verb, "all"}
		if longRunning[verb] {
			keys = keys[:1]
		}
		for _, key := range keys {
			h := out[key]
			if h == nil {
				h = &histogram{buckets: map[float64]float64{}}
				out[key] = h
			}
			h.count += float64(m.GetHistogram().GetSampleCount())
			for _, bk := range m.GetHistogram().GetBucket() {
				h.buckets[bk.GetUpperBound()] += float64(bk.GetCumulativeCount())
			}
		}
	}
	return out, nil
}

// latencyDiff is each verb's count and quantiles over what happened between before and after.
func latencyDiff(before, after map[string]*histogram) []verbLatency {
	var out []verbLatency
	for verb, a := range after {
		b := before[verb]
		d := &histogram{buckets: map[float64]float64{}, count: a.count}
		for ub, c := range a.buckets {
			d.buckets[ub] = c
		}
		if b != nil {
			d.count -= b.count
			for ub, c := range b.buckets {
				d.buckets[ub] -= c
			}
		}
		if d.count <= 0 {
			continue
		}
		out = append(out, verbLatency{verb: verb, count: d.count, p50: d.quantile(0.5), p99: d.quantile(0.99)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].verb < out[j].verb })
	return out
}

// quantile interpolates quantile q linearly within the bucket that holds it, as Prometheus'
// histogram_quantile does; past the last finite bucket it is that bucket's bound.
func (h *histogram) quantile(q float64) time.Duration {
	bounds := make([]float64, 0, len(h.buckets))
	for ub := range h.buckets {
		bounds = append(bounds, ub)
	}
	sort.Float64s(bounds)
	rank := q * h.count
	prevBound, prevCount := 0.0, 0.0
	for _, ub := range bounds {
		c := h.buckets[ub]
		if c >= rank {
			if math.IsInf(ub, 1) {
				return time.Duration(prevBound * float64(time.Second))
			}
			frac := 0.0
			if c > prevCount {
				frac = (rank - prevCount) / (c - prevCount)
			}
			return time.Duration((prevBound + (ub-prevBound)*frac) * float64(time.Second))
		}
		prevBound, prevCount = ub, c
	}
	return time.Duration(prevBound * float64(time.Second))
}

// queueStats is what controller-runtime's metrics say of one controller: reconciles, and its work
// queue's adds and the seconds its items spent waiting and being worked on (sums), and its workers.
type queueStats struct {
	reconciles, adds, queueSeconds, workSeconds float64
	workers                                     float64
}

// scaleControllers are the controllers whose queues the suite reports: the RayCluster controller, which
// creates the pods, and the binder, which places them on the node.
var scaleControllers = []string{"raycluster", "binder"}

// controllerQueues reads controller-runtime's reconcile and workqueue metrics for scaleControllers from
// the controllers' metrics server at addr.
func controllerQueues(addr string) (map[string]queueStats, error) {
	res, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, fmt.Errorf("reading the controllers' metrics: %w", err)
	}
	defer res.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(res.Body); err != nil {
		return nil, err
	}
	families, err := parseMetrics(buf.Bytes())
	if err != nil {
		return nil, err
	}
	out := map[string]queueStats{}
	for _, c := range scaleControllers {
		out[c] = queueStats{
			reconciles:   metricSum(families["controller_runtime_reconcile_total"], c),
			adds:         metricSum(families["workqueue_adds_total"], c),
			queueSeconds: metricSum(families["workqueue_queue_duration_seconds"], c),
			workSeconds:  metricSum(families["workqueue_work_duration_seconds"], c),
			workers:      metricSum(families["controller_runtime_max_concurrent_reconciles"], c),
		}
	}
	return out, nil
}

// metricSum adds up f's counters, gauges and histogram sums labelled controller=c.
func metricSum(f *dto.MetricFamily, c string) float64 {
	var total float64
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "controller" && l.GetValue() == c {
				total += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetHistogram().GetSampleSum()
			}
		}
	}
	return total
}

// sub is what happened between before and q (workers are a setting, kept).
func (q queueStats) sub(before queueStats) queueStats {
	return queueStats{reconciles: q.reconciles - before.reconciles, adds: q.adds - before.adds,
		queueSeconds: q.queueSeconds - before.queueSeconds, workSeconds: q.workSeconds - before.workSeconds, workers: q.workers}
}

// parseMetrics reads Prometheus' text format.
func parseMetrics(raw []byte) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(bytes.NewReader(raw))
}

// latencyMS formats a latency with a precision that suits it.
func latencyMS(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	if ms < 10 {
		return strconv.FormatFloat(ms, 'f', 1, 64) + " ms"
	}
	return strconv.FormatFloat(ms, 'f', 0, 64) + " ms"
}
