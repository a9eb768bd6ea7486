package main

// The chain suite: how long a kubelet's Pod status write takes to start the RayCluster controller's
// Reconcile, and what the chain recorder costs.
//
// Two `rayctl up --runtime fake` run side by side, one with the recorder (the default --chain-buffer) and
// one without (--chain-buffer=0); the fake runtime runs no processes, so what is timed is the control
// plane alone. Each holds one RayCluster with a head only (a readiness probe of its own, every second, that
// the fake runtime answers at once, and no termination grace). One cycle deletes the head Pod: the RayCluster
// controller creates a new one, the binder binds it, and the kubelet writes its status (running, then
// Ready), each write a Pod status change the RayCluster controller reconciles on. Cycles alternate between
// the two instances, one at a time, so both see the same machine.
//
// With the recorder on, the chain gives, for every kubelet status write, the moment the API server received
// it and answered it, the RayCluster controller's informer event for that resourceVersion, the handler's
// mapping to the owning RayCluster, and the first Reconcile of that RayCluster that started after it. With
// the recorder off there is no such record, so the overhead is measured on what a client can see on both:
// the Pod's watch event showing it Ready → the RayCluster's watch event showing HeadPodReady with that Pod
// (the controller's informer, queue, Reconcile, status write and the watch fan-out), and a whole cycle,
// delete → replacement Ready in the RayCluster's status. On a busy machine that difference drowns in noise,
// so the recorder's own work is also timed in this process: the Events its controller hooks record, and its audit backend on
// a Pod status write's event, per call.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/authentication/user"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/rayctl/rayctl/pkg/apiserver/chainaudit"
	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/chain/chainhttp"
	"github.com/rayctl/rayctl/pkg/instance"
	"github.com/rayctl/rayctl/test/loadgen"
)

const (
	// chainCycles is how many measured cycles each instance runs by default (each makes about two
	// kubelet writes); -chain-cycles overrides it.
	chainCycles = 110
	// chainWarmup cycles run first on each instance and are not counted.
	chainWarmup = 5
	chainNS     = "bench-chain"
	chainRC     = "bench"
	// The goal for kubelet status write → RayCluster Reconcile start.
	chainGoalP50 = 2 * time.Millisecond
	chainGoalP99 = 10 * time.Millisecond
)

// chainInstance is one `rayctl up` of the suite.
type chainInstance struct {
	label  string // "on" or "off"
	rayctl string
	dir    string
	up     *instance.Process
	kube   kubernetes.Interface
	ray    rayclient.Interface
	cc     chain.Source // nil with the recorder off
	tr     *chainTracker
	mark   uint64 // the chain's next Seq when the measured cycles began

	watchLat []time.Duration // Pod Ready (watch) → RayCluster HeadPodReady with it (watch)
	cycles   []time.Duration // delete → RayCluster HeadPodReady with the replacement (watch)
	events   []chain.Event
	rssMB    float64
}

// chainSample is one kubelet write as the chain recorded it.
type chainSample struct {
	fromReceived  time.Duration // API received the write → Reconcile start
	fromCommitted time.Duration // the write committed (API answer or informer event, the earlier) → Reconcile start
	apiWrite      time.Duration // received → answered
	queued        time.Duration // informer event → Reconcile start
	// busy: a Reconcile of the same RayCluster was running when the handler mapped the write, so the
	// key waited for it to end (controller-runtime never runs one key twice at once).
	busy bool
}

func runChain(rayctl, out string, cycles int) error {
	loadBefore := loadAverage()
	insts := []*chainInstance{{label: "on"}, {label: "off"}}
	var wg sync.WaitGroup
	errs := make([]error, len(insts))
	for i, in := range insts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = in.start(rayctl)
		}()
	}
	wg.Wait()
	defer func() {
		for _, in := range insts {
			in.stop()
		}
	}()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, in := range insts {
		if err := in.setup(ctx); err != nil {
			return fmt.Errorf("chain (recorder %s): %w\nrayctl.log tail:\n%s", in.label, err, logTail(in.dir))
		}
		for range chainWarmup {
			if _, _, err := in.cycle(ctx); err != nil {
				return fmt.Errorf("chain (recorder %s) warm-up: %w\nrayctl.log tail:\n%s", in.label, err, logTail(in.dir))
			}
		}
	}
	on := insts[0]
	l, err := on.cc.Events(ctx, chain.Filter{Hop: "none"})
	if err != nil {
		return err
	}
	on.mark = l.Next
	t0 := time.Now()
	for i := range cycles {
		// Alternate which instance goes first, so neither always follows the other.
		order := []*chainInstance{insts[i%2], insts[1-i%2]}
		for _, in := range order {
			w, c, err := in.cycle(ctx)
			if err != nil {
				return fmt.Errorf("chain (recorder %s) cycle %d: %w\nrayctl.log tail:\n%s", in.label, i, err, logTail(in.dir))
			}
			in.watchLat = append(in.watchLat, w)
			in.cycles = append(in.cycles, c)
		}
		if (i+1)%20 == 0 {
			fmt.Fprintf(os.Stderr, "chain: %d/%d cycles per instance (%s)\n", i+1, cycles, time.Since(t0).Round(time.Second))
			if err := on.fetch(ctx); err != nil {
				return err
			}
		}
	}
	if err := on.fetch(ctx); err != nil {
		return err
	}
	for _, in := range insts {
		in.rssMB = loadgen.RSSMB(in.up.Pid())
	}
	samples, missing := chainSamples(on.events, on.mark)
	if len(samples) < cycles {
		return fmt.Errorf("chain: only %d kubelet writes measured in %d cycles (%d without a complete chain); want at least one a cycle", len(samples), cycles, missing)
	}
	cost, err := recorderCost()
	if err != nil {
		return err
	}
	return writeChain(out, insts, samples, missing, cost, loadBefore, loadAverage())
}

// start runs `rayctl up --runtime fake` (without the recorder for "off") and connects to it.
func (in *chainInstance) start(rayctl string) error {
	dir, err := os.MkdirTemp("", "rayctl-bench-chain-")
	if err != nil {
		return err
	}
	in.dir, in.rayctl = dir, rayctl
	args := []string{"--runtime", "fake"}
	if in.label == "off" {
		args = append(args, "--chain-buffer=0")
	}
	if in.up, err = startUp(rayctl, dir, args...); err != nil {
		return fmt.Errorf("chain (recorder %s): %w", in.label, err)
	}
	cfg, err := in.up.RESTConfig(200, 400)
	if err != nil {
		return err
	}
	if in.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if in.ray, err = rayclient.NewForConfig(cfg); err != nil {
		return err
	}
	if in.label == "on" {
		if in.cc, err = chainhttp.NewClient(cfg); err != nil {
			return err
		}
	}
	return nil
}

func (in *chainInstance) stop() {
	if in.tr != nil {
		in.tr.stop()
		// Remove the pods while the kubelet runs, so it unmounts their volumes (the head's /dev/shm
		// is a tmpfs) before the data dir goes.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_ = in.ray.RayV1().RayClusters(chainNS).Delete(ctx, chainRC, metav1.DeleteOptions{})
		_ = in.kube.CoreV1().Pods(chainNS).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		if err := poll(ctx, time.Minute, func() bool {
			l, err := in.kube.CoreV1().Pods(chainNS).List(ctx, metav1.ListOptions{})
			return err == nil && len(l.Items) == 0
		}); err != nil {
			fmt.Fprintf(os.Stderr, "chain (recorder %s): pods still there at the end: %v\n", in.label, err)
		}
		cancel()
	}
	if in.up != nil {
		in.up.Stop(time.Minute)
	}
	if in.dir != "" {
		removeInstance(in.rayctl, in.dir)
	}
}

// setup creates the namespace and the RayCluster, starts following them, and waits for the first head.
func (in *chainInstance) setup(ctx context.Context) error {
	if _, err := in.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: chainNS}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := poll(ctx, time.Minute, func() bool {
		_, err := in.kube.CoreV1().ServiceAccounts(chainNS).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}); err != nil {
		return fmt.Errorf("no default service account in %s: %w", chainNS, err)
	}
	tr, err := newChainTracker(ctx, in.kube, in.ray)
	if err != nil {
		return err
	}
	in.tr = tr
	if _, err := in.ray.RayV1().RayClusters(chainNS).Create(ctx, chainCluster(), metav1.CreateOptions{}); err != nil {
		return err
	}
	return tr.wait(ctx, time.Minute, func() bool { return tr.head != "" && !tr.rcReady[tr.head].IsZero() })
}

// chainCluster is a RayCluster with a head only, ready as soon as its container runs.
func chainCluster() *rayv1.RayCluster {
	return &rayv1.RayCluster{
		ObjectMeta: metav1.ObjectMeta{Name: chainRC},
		Spec: rayv1.RayClusterSpec{
			RayVersion: "2.46.0",
			HeadGroupSpec: rayv1.HeadGroupSpec{
				RayStartParams: map[string]string{},
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers: []corev1.Container{{
						Name: "ray-head", Image: podsImage,
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}},
							PeriodSeconds: 1,
						},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi"),
						}},
					}},
				}},
			},
		},
	}
}

// cycle deletes the head Pod and waits until the RayCluster's status shows its replacement ready. It
// returns the replacement's Pod Ready → RayCluster HeadPodReady (both as the watches showed them) and the
// whole cycle.
func (in *chainInstance) cycle(ctx context.Context) (time.Duration, time.Duration, error) {
	tr := in.tr
	tr.mu.Lock()
	old := tr.head
	tr.mu.Unlock()
	t0 := time.Now()
	if err := in.kube.CoreV1().Pods(chainNS).Delete(ctx, old, metav1.DeleteOptions{}); err != nil {
		return 0, 0, err
	}
	var head string
	err := tr.wait(ctx, 30*time.Second, func() bool {
		head = tr.head
		return head != old && !tr.podReady[head].IsZero() && !tr.rcReady[head].IsZero()
	})
	if err != nil {
		return 0, 0, fmt.Errorf("the head Pod %s deleted; no replacement ready in the RayCluster's status within 30s: %w", old, err)
	}
	tr.mu.Lock()
	ready, rc := tr.podReady[head], tr.rcReady[head]
	tr.mu.Unlock()
	// A short pause, so the next cycle does not start inside this one's last reconcile.
	time.Sleep(20 * time.Millisecond)
	return rc.Sub(ready), rc.Sub(t0), nil
}

// fetch appends the recorder's new events in the namespace.
func (in *chainInstance) fetch(ctx context.Context) error {
	after := in.mark - 1
	if n := len(in.events); n > 0 {
		after = in.events[n-1].Seq
	}
	l, err := in.cc.Events(ctx, chain.Filter{Namespace: chainNS, After: after})
	if err != nil {
		return err
	}
	// The ring keeps the newest events only: the fetch must start where the last one ended.
	all, err := in.cc.Events(ctx, chain.Filter{Hop: "none"})
	if err != nil {
		return err
	}
	if first := all.Next - uint64(all.Size); all.Next > uint64(all.Size) && first > after+1 {
		return fmt.Errorf("the recorder's ring (%d events) wrapped between fetches; events %d–%d are lost", all.Size, after+1, first-1)
	}
	in.events = append(in.events, l.Events...)
	return nil
}

// chainSamples reads each kubelet write since mark off the chain: when the API server received and
// answered it, when the RayCluster controller's informer delivered that resourceVersion, which RayCluster
// the handler mapped it to, and when that RayCluster's next Reconcile started. Writes whose chain is not
// complete (a Pod already gone, so the write failed or was not mapped) are counted apart.
func chainSamples(events []chain.Event, mark uint64) ([]chainSample, int) {
	type objRV struct{ name, rv string }
	api := map[objRV]*chain.Event{}
	inf := map[objRV]*chain.Event{}
	mapped := map[objRV]*chain.Event{}
	var starts []*chain.Event
	// The RayCluster controller's passes: when each started and ended (by Seq).
	type pass struct {
		name       string
		start, end uint64
	}
	passes := map[uint64]*pass{}
	for i := range events {
		e := &events[i]
		if e.Component != "raycluster" || e.Reconcile == 0 || (e.Hop != chain.ReconcileStart && e.Hop != chain.ReconcileEnd) {
			continue
		}
		p := passes[e.Reconcile]
		if p == nil {
			p = &pass{name: e.Object.Name}
			passes[e.Reconcile] = p
		}
		if e.Hop == chain.ReconcileStart {
			p.start = e.Seq
		} else {
			p.end = e.Seq
		}
	}
	for i := range events {
		e := &events[i]
		k := objRV{e.Object.Name, e.Object.ResourceVersion}
		switch {
		case e.Hop == chain.APIWrite && e.Object.Kind == "Pod" && e.Object.ResourceVersion != "":
			api[k] = e
		case e.Component != "raycluster":
		case e.Hop == chain.InformerEvent && e.Object.Kind == "Pod":
			if inf[k] == nil {
				inf[k] = e
			}
		case e.Hop == chain.MapHop && e.Object.Kind == "Pod":
			if mapped[k] == nil {
				mapped[k] = e
			}
		case e.Hop == chain.ReconcileStart:
			starts = append(starts, e)
		}
	}
	var out []chainSample
	missing := 0
	for i := range events {
		w := &events[i]
		if w.Seq < mark || w.Hop != chain.KubeletWrite {
			continue
		}
		k := objRV{w.Object.Name, w.Object.ResourceVersion}
		a, ie, m := api[k], inf[k], mapped[k]
		if a == nil || ie == nil || m == nil || m.To == nil {
			missing++
			continue
		}
		j := sort.Search(len(starts), func(j int) bool { return starts[j].Seq > m.Seq })
		for ; j < len(starts) && starts[j].Object.Name != m.To.Name; j++ {
		}
		if j == len(starts) {
			missing++
			continue
		}
		busy := false
		for _, p := range passes {
			if p.name == m.To.Name && p.start != 0 && p.start < m.Seq && (p.end == 0 || p.end > m.Seq) {
				busy = true
			}
		}
		start := starts[j].Mono
		received := a.Mono - int64(a.Duration)
		committed := min(a.Mono, ie.Mono)
		out = append(out, chainSample{
			fromReceived:  time.Duration(start - received),
			fromCommitted: time.Duration(start - committed),
			apiWrite:      a.Duration,
			queued:        time.Duration(start - ie.Mono),
			busy:          busy,
		})
	}
	return out, missing
}

// writeChain writes out/chain.md and chain.json.
func writeChain(out string, insts []*chainInstance, samples []chainSample, missing int, cost recorderCosts, loadBefore, loadAfter string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	on, off := insts[0], insts[1]
	cycles := len(on.cycles)
	get := func(f func(chainSample) time.Duration) []time.Duration {
		v := make([]time.Duration, len(samples))
		for i, s := range samples {
			v[i] = f(s)
		}
		return v
	}
	var idle, busy []time.Duration
	for _, s := range samples {
		if s.busy {
			busy = append(busy, s.fromCommitted)
		} else {
			idle = append(idle, s.fromCommitted)
		}
	}
	committed := get(func(s chainSample) time.Duration { return s.fromCommitted })
	verdict := func(v []time.Duration) string {
		p50, p99 := percentile(v, 0.5), percentile(v, 0.99)
		mark := func(ok bool) string {
			if ok {
				return "✔"
			}
			return "✘"
		}
		return fmt.Sprintf("p50 ≤ 2 ms %s, p99 ≤ 10 ms %s", mark(p50 <= chainGoalP50), mark(p99 <= chainGoalP99))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Trigger chain: kubelet status write → RayCluster Reconcile start (`make bench`, suite chain)\n\n")
	fmt.Fprintf(&b, "Measured %s. Machine: %s; load average %s when the suite started, %s when it ended.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), machine(), loadBefore, loadAfter)
	fmt.Fprintf(&b, "Two `rayctl up --runtime fake` side by side, the recorder on (`--chain-buffer=%d`, the default) and off (`--chain-buffer=0`). ", chain.DefaultSize)
	fmt.Fprintf(&b, "Each holds one RayCluster with a head only; a cycle deletes the head Pod and waits until the RayCluster's status shows the replacement ready "+
		"(the RayCluster controller creates it, the binder binds it, the kubelet writes its status: running, then Ready). "+
		"%d cycles per instance after %d warm-up cycles, alternating between the instances one cycle at a time.\n\n", cycles, chainWarmup)
	fmt.Fprintf(&b, "| measurement | recorder | n | p50 | p90 | p99 | max | goal |\n|---|---|---|---|---|---|---|---|\n")
	row := func(name, rec string, v []time.Duration, goal string) {
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s | %s |\n", name, rec, len(v),
			chainMS(percentile(v, 0.5)), chainMS(percentile(v, 0.9)), chainMS(percentile(v, 0.99)), chainMS(percentile(v, 1)), goal)
	}
	row("**kubelet status write → RayCluster Reconcile start** (from the write committed)", "on", committed, verdict(committed))
	row("… when no Reconcile of that RayCluster was running", "on", idle, verdict(idle))
	row("… when one was running (the key waits for it to end)", "on", busy, "–")
	row("kubelet status write → RayCluster Reconcile start (from the API server receiving it)", "on", get(func(s chainSample) time.Duration { return s.fromReceived }), "–")
	row("… of which the write in the API server (received → answered)", "on", get(func(s chainSample) time.Duration { return s.apiWrite }), "–")
	row("… of which informer event → Reconcile start (handler, queue, worker)", "on", get(func(s chainSample) time.Duration { return s.queued }), "–")
	row("Pod Ready (watch) → RayCluster HeadPodReady (watch)", "on", on.watchLat, "–")
	row("Pod Ready (watch) → RayCluster HeadPodReady (watch)", "off", off.watchLat, "–")
	row("cycle: head Pod deleted → replacement ready in the RayCluster's status", "on", on.cycles, "–")
	row("cycle: head Pod deleted → replacement ready in the RayCluster's status", "off", off.cycles, "–")

	// What the goal rows say, in words.
	apiP50 := percentile(get(func(s chainSample) time.Duration { return s.apiWrite }), 0.5)
	meets := func(v []time.Duration) bool {
		return percentile(v, 0.5) <= chainGoalP50 && percentile(v, 0.99) <= chainGoalP99
	}
	why := ""
	if meets(idle) && !meets(committed) {
		why = "; it is what keeps the overall figures above the goal here, and it shrinks with the disk's fsync latency"
	}
	fmt.Fprintf(&b, "\nReading: a kubelet write that finds the RayCluster controller idle for its RayCluster starts a Reconcile in %s at p50 and %s at p99 (%d of %d writes). "+
		"A write that arrives while the Reconcile started by the write before it is still running — mostly waiting on its own status write, "+
		"an etcd commit (the API server takes %s at p50 for a write here) — waits for that Reconcile to end: %s at p50. "+
		"That wait is by design (one Reconcile per key at a time)%s.\n",
		chainMS(percentile(idle, 0.5)), chainMS(percentile(idle, 0.99)), len(idle), len(samples), chainMS(apiP50), chainMS(percentile(busy, 0.5)), why)

	overhead := func(name string, a, o []time.Duration) {
		pa, po := percentile(a, 0.5), percentile(o, 0.5)
		d, lo, hi := pairedDiff(a, o)
		reading := "no difference beyond this machine's noise"
		switch {
		case hi < 0:
			reading = "the instance with the recorder was the faster one: the two instances differ by more than the recorder costs"
		case lo > 0:
			reading = "the recorder's cost on this path"
		}
		fmt.Fprintf(&b, "  - %s: p50 %s on vs %s off (%+.2f ms); the median of the paired differences (cycle i on − cycle i off) is %+.2f ms, 95%% interval %+.2f … %+.2f ms — %s\n",
			name, chainMS(pa), chainMS(po), float64(pa-po)/float64(time.Millisecond),
			float64(d)/float64(time.Millisecond), float64(lo)/float64(time.Millisecond), float64(hi)/float64(time.Millisecond), reading)
	}
	perCycle := float64(len(on.events)) / float64(cycles)
	audits := 0
	for _, e := range on.events {
		if e.Hop == chain.APIWrite {
			audits++
		}
	}
	auditsPerCycle := float64(audits) / float64(cycles)
	deliveries := 0
	for _, e := range on.events {
		if e.Hop == chain.WatchDelivery {
			deliveries++
		}
	}
	deliveriesPerCycle := float64(deliveries) / float64(cycles)
	cpu := time.Duration((perCycle-auditsPerCycle-deliveriesPerCycle)*float64(cost.hook) + auditsPerCycle*float64(cost.audit) +
		deliveriesPerCycle*float64(cost.deliver))
	fmt.Fprintf(&b, "\nThe recorder's overhead:\n\n")
	fmt.Fprintf(&b, "- its own work, timed in-process (%d calls each): %.2f µs per controller hop (informer, predicate, map, queue, reconcile and status hooks), "+
		"%.2f µs per API write (the audit event: its response parsed for the resourceVersion), %.2f µs per watch event delivered to a watcher "+
		"(the pass-through's hand-off and its record, beyond taking the event straight from the watch). A cycle recorded %.0f events, %.0f of them "+
		"API writes and %.0f watch deliveries: %.0f µs of CPU per cycle, %.2f%% of the cycle's p50, spread over several goroutines and the API server's "+
		"request handlers.\n",
		cost.n, float64(cost.hook)/float64(time.Microsecond), float64(cost.audit)/float64(time.Microsecond), float64(cost.deliver)/float64(time.Microsecond),
		perCycle, auditsPerCycle, deliveriesPerCycle,
		float64(cpu)/float64(time.Microsecond), 100*float64(cpu)/float64(max(percentile(on.cycles, 0.5), 1)))
	fmt.Fprintf(&b, "- end to end, on − off, same workload, the instances interleaved cycle by cycle (the interval is a bootstrap over the pairs; "+
		"when it holds 0 the difference is within this machine's noise):\n")
	overhead("Pod Ready → RayCluster HeadPodReady", on.watchLat, off.watchLat)
	overhead("whole cycle", on.cycles, off.cycles)
	fmt.Fprintf(&b, "- memory: RSS %.0f MB on (a ring of %d events) vs %.0f MB off, after the cycles\n", on.rssMB, chain.DefaultSize, off.rssMB)

	fmt.Fprintf(&b, "\nHow each figure is taken:\n\n")
	fmt.Fprintf(&b, "- **Recorder on, from the chain** (GET /debug/chain/events): for each kubelet Pod status write (%d writes; %d more had no complete chain, "+
		"e.g. a write about a Pod already deleted), the API server's audit event for that resourceVersion gives when it received the write "+
		"(its answer time minus the request's duration) and when it answered; the RayCluster controller's informer event for that resourceVersion, "+
		"and its handler's mapping to the owning RayCluster; then the first Reconcile of that RayCluster that started after the mapping. "+
		"\"Committed\" is the earlier of the API server's answer and the informer's event: the write is in etcd by then (the watch only sends committed "+
		"writes), so this is the propagation the goal is about — the watch, the informer, the handler, the queue and the worker. "+
		"\"From the API server receiving it\" adds the write itself (admission, the etcd commit and its fsync, the audit record).\n", len(samples), missing)
	fmt.Fprintf(&b, "- **Recorder on and off, from the outside**: the bench's own watches on the Pods and the RayCluster timestamp the first event showing "+
		"the replacement Pod Ready and the first showing the RayCluster's `HeadPodReady` condition True with `status.head.podName` that Pod. "+
		"Between them: the RayCluster controller's informer, queue and Reconcile, its status write (an API write, with etcd's fsync) and the watch fan-out; "+
		"both events reach the bench through the same API server, so the fan-out mostly cancels. The recorder's audit backend, controller hooks and ring "+
		"sit on this path, so on − off is their cost. The whole cycle (delete → replacement ready in the status) adds the Pod's deletion, creation, "+
		"binding and the kubelet's writes (each an audited write when the recorder is on).\n")
	fmt.Fprintf(&b, "- A write that arrives while a Reconcile of its RayCluster is running (typically the one the write before it started, "+
		"busy with its own status write) waits for that Reconcile to end: controller-runtime never runs one key twice at once, "+
		"whatever `--reconcile-concurrency` allows for different keys. The two rows split the writes by that, read off the chain "+
		"(a Reconcile of that RayCluster started before the handler's mapping and ended after it).\n")
	fmt.Fprintf(&b, "- Percentiles are nearest-rank: p99 of n samples is the ⌈0.99·n⌉-th smallest (with n = %d, the %s slowest).\n",
		len(samples), ordinal(len(samples)-int(math.Ceil(0.99*float64(len(samples))))+1))
	return writeSuite(out, chainJSON(insts, committed, idle, busy, loadBefore), b.String())
}

// chainJSON is chain.json: the goal's figures (kubelet write → Reconcile start, from the chain with the
// recorder on), what the recorder changes seen from outside, and the distributions as plots.
func chainJSON(insts []*chainInstance, committed, idle, busy []time.Duration, loadBefore string) suiteResult {
	on, off := insts[0], insts[1]
	p50, p99 := percentile(committed, 0.5), percentile(committed, 0.99)
	res := suiteResult{Suite: "chain", Title: "Trigger chain: kubelet status write → RayCluster Reconcile start", Machine: machine() + "; load average " + loadBefore,
		Figures: []figure{
			goalFigure("kubelet status write → RayCluster Reconcile start p50", chainMS(p50), "≤ 2 ms", p50 <= chainGoalP50),
			goalFigure("kubelet status write → RayCluster Reconcile start p99", chainMS(p99), "≤ 10 ms", p99 <= chainGoalP99),
			{Name: "… p50 / p99 when no Reconcile of that RayCluster was running", Value: fmt.Sprintf("%s / %s (%d of %d writes)",
				chainMS(percentile(idle, 0.5)), chainMS(percentile(idle, 0.99)), len(idle), len(committed))},
			{Name: "Pod Ready → RayCluster HeadPodReady (watches) p50, recorder on / off", Value: fmt.Sprintf("%s / %s",
				chainMS(percentile(on.watchLat, 0.5)), chainMS(percentile(off.watchLat, 0.5)))},
			{Name: "head Pod deleted → replacement ready in the status p50, recorder on / off", Value: fmt.Sprintf("%s / %s",
				chainMS(percentile(on.cycles, 0.5)), chainMS(percentile(off.cycles, 0.5)))},
			{Name: "RSS after the cycles, recorder on / off", Value: fmt.Sprintf("%.0f / %.0f MB", on.rssMB, off.rssMB)},
		}}
	res.Plots = []plotSpec{
		{File: "chain-reconcile-start.png", Title: "kubelet status write (committed) → RayCluster Reconcile start", Kind: "cdf", XLabel: "ms",
			Series: []series{{Name: "all writes", Values: msValues(committed)}, {Name: "no Reconcile of it running", Values: msValues(idle)},
				{Name: "one running (the key waits)", Values: msValues(busy)}},
			XMarks: []xMark{{X: msValues([]time.Duration{chainGoalP50})[0], Label: "goal: p50 ≤ 2 ms"},
				{X: msValues([]time.Duration{chainGoalP99})[0], Label: "goal: p99 ≤ 10 ms"}}},
		{File: "chain-watch-on-off.png", Title: "Pod Ready → RayCluster HeadPodReady (watches), recorder on and off", Kind: "cdf", XLabel: "ms",
			Series: []series{{Name: "recorder on", Values: msValues(on.watchLat)}, {Name: "recorder off", Values: msValues(off.watchLat)}}},
		{File: "chain-cycle-on-off.png", Title: "head Pod deleted → replacement ready in the RayCluster's status", Kind: "cdf", XLabel: "ms",
			Series: []series{{Name: "recorder on", Values: msValues(on.cycles)}, {Name: "recorder off", Values: msValues(off.cycles)}}},
	}
	return res
}

// pairedDiff is the median of a[i] − o[i] and a 95% bootstrap interval for it.
func pairedDiff(a, o []time.Duration) (med, lo, hi time.Duration) {
	n := min(len(a), len(o))
	if n == 0 {
		return 0, 0, 0
	}
	d := make([]time.Duration, n)
	for i := range n {
		d[i] = a[i] - o[i]
	}
	rng := rand.New(rand.NewPCG(1, 2))
	meds := make([]time.Duration, 2000)
	r := make([]time.Duration, n)
	for k := range meds {
		for i := range r {
			r[i] = d[rng.IntN(n)]
		}
		meds[k] = percentile(r, 0.5)
	}
	return percentile(d, 0.5), percentile(meds, 0.025), percentile(meds, 0.975)
}

// recorderCosts is what the recorder's own work costs per event.
type recorderCosts struct {
	n     int
	hook  time.Duration // one controller hop (an Event into the ring)
	audit time.Duration // one API write (the audit backend's event)
	// deliver is one watch event delivered through chainaudit.Deliveries (its pass-through and its
	// record) less the same event taken straight from the watch.
	deliver time.Duration
}

// recorderCost times the recorder's work in this process: the Events a controller's hooks record on
// each hop, and the audit backend on a Pod status write's RequestResponse event.
func recorderCost() (recorderCosts, error) {
	const n = 100000
	r := chain.New(chain.DefaultSize)
	pod := chain.Ref{Kind: "Pod", Namespace: chainNS, Name: "bench-head-abcde", UID: "0b6c7a4e-0000-4000-8000-000000000001", ResourceVersion: "12345"}
	key := chain.Ref{Kind: "RayCluster", Namespace: chainNS, Name: chainRC}
	rc := chain.Ref{Kind: "RayCluster", Namespace: chainNS, Name: chainRC, ResourceVersion: "12346"}
	const c = "raycluster"
	t0 := time.Now()
	for i := range uint64(n / 8) {
		from, to := pod, key
		r.Record(chain.Event{Component: c, Hop: chain.InformerEvent, Object: pod, OldResourceVersion: "12344", Outcome: chain.Update})
		r.Record(chain.Event{Component: c, Hop: chain.PredicateHop, Object: pod, Outcome: chain.Passed, Predicate: "generation changed"})
		r.Record(chain.Event{Component: c, Hop: chain.MapHop, Object: pod, To: &to, Reason: "controller owner"})
		r.Record(chain.Event{Component: c, Hop: chain.EnqueueHop, Object: key, From: &from, Outcome: chain.EnqueueNew})
		r.Record(chain.Event{Component: c, Hop: chain.DequeueHop, Object: key, Duration: time.Microsecond, Reconcile: i + 1})
		r.Record(chain.Event{Component: c, Hop: chain.ReconcileStart, Object: key, Reconcile: i + 1})
		r.Record(chain.Event{Component: c, Hop: chain.StatusWrite, Object: rc, Reconcile: i + 1,
			Status: []chain.Field{chain.F("state", "ready"), chain.F("readyWorkers", "0/0")}})
		r.Record(chain.Event{Component: c, Hop: chain.ReconcileEnd, Object: key, Duration: time.Millisecond, Reconcile: i + 1,
			Outcome: chain.RequeueAfter, Result: &chain.Result{RequeueAfter: 2 * time.Second}})
	}
	hook := time.Since(t0) / time.Duration(n/8*8)

	p := &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: chainNS, UID: types.UID(pod.UID), ResourceVersion: pod.ResourceVersion,
			Labels: map[string]string{"ray.io/cluster": chainRC, "ray.io/node-type": "head", "ray.io/group": "headgroup"}},
		Spec: chainCluster().Spec.HeadGroupSpec.Template.Spec,
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.88.0.7", Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.ContainersReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "ray-head", Ready: true, Image: podsImage,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
	}
	raw, err := json.Marshal(p)
	if err != nil {
		return recorderCosts{}, err
	}
	now := metav1.NowMicro()
	ev := &auditinternal.Event{
		Level: auditinternal.LevelRequestResponse, Stage: auditinternal.StageResponseComplete, Verb: "patch",
		User:           authnv1.UserInfo{Username: "system:node:bench"},
		ObjectRef:      &auditinternal.ObjectReference{Resource: "pods", Subresource: "status", Namespace: chainNS, Name: pod.Name},
		ResponseStatus: &metav1.Status{Code: 200}, ResponseObject: &runtime.Unknown{Raw: raw},
		RequestReceivedTimestamp: now, StageTimestamp: now,
	}
	backend := chainaudit.Backend(r)
	t0 = time.Now()
	for range n {
		backend.ProcessEvents(ev)
	}
	audit := time.Since(t0) / n
	return recorderCosts{n: n, hook: hook, audit: audit, deliver: deliveryCost(r, p, n)}, nil
}

// deliveryCost times n watch events of p taken through chainaudit.Deliveries into r, as the API
// server's watch handler takes them, less n taken straight from a watch: the pass-through goroutine's
// hand-off and the record.
func deliveryCost(r *chain.Recorder, p *corev1.Pod, n int) time.Duration {
	ctx := genericrequest.WithUser(context.Background(), &user.DefaultInfo{Name: "kuberay-operator"})
	take := func(through bool) time.Duration {
		fake := watch.NewFakeWithChanSize(n, false)
		for range n {
			fake.Modify(p)
		}
		var w watch.Interface = fake
		if through {
			w = chainaudit.Deliveries(ctx, r, chain.KindPod, fake, storage.ListOptions{})
		}
		defer w.Stop()
		t0 := time.Now()
		for range n {
			<-w.ResultChan()
		}
		return time.Since(t0)
	}
	straight := take(false)
	return max(take(true)-straight, 0) / time.Duration(n)
}

// ordinal writes 1st, 2nd, 3rd, 4th….
func ordinal(n int) string {
	switch {
	case n%100 >= 11 && n%100 <= 13:
		return fmt.Sprintf("%dth", n)
	case n%10 == 1:
		return fmt.Sprintf("%dst", n)
	case n%10 == 2:
		return fmt.Sprintf("%dnd", n)
	case n%10 == 3:
		return fmt.Sprintf("%drd", n)
	}
	return fmt.Sprintf("%dth", n)
}

// chainMS formats a latency in milliseconds with two decimals.
func chainMS(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

// chainTracker follows the namespace's Pods and RayClusters and notes when each head Pod was first seen
// Ready, and when the RayCluster's status first showed it as a ready head.
type chainTracker struct {
	mu       sync.Mutex
	head     string               // the newest head Pod that is not being deleted
	podReady map[string]time.Time // head Pod → its first watch event showing it Ready
	rcReady  map[string]time.Time // head Pod → the RayCluster's first watch event with HeadPodReady True and that head
	// podRV and rcRV are the last resourceVersions seen, for a new watch when the server ends one.
	podRV, rcRV string
	changed     chan struct{}
	cancel      context.CancelFunc
	done        chan struct{}
}

func newChainTracker(ctx context.Context, kube kubernetes.Interface, ray rayclient.Interface) (*chainTracker, error) {
	ctx, cancel := context.WithCancel(ctx)
	t := &chainTracker{podReady: map[string]time.Time{}, rcReady: map[string]time.Time{}, changed: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
	pw, err := kube.CoreV1().Pods(chainNS).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		return nil, err
	}
	cw, err := ray.RayV1().RayClusters(chainNS).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		pw.Stop()
		cancel()
		return nil, err
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		follow(ctx, pw, func(rv string) (watch.Interface, error) {
			return kube.CoreV1().Pods(chainNS).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
		}, t.lastPodRV, func() { t.setRVs(true, false) }, func(ev watch.Event) {
			if p, isPod := ev.Object.(*corev1.Pod); isPod {
				t.pod(ev.Type, p, time.Now())
			}
		})
	}()
	go func() {
		defer wg.Done()
		follow(ctx, cw, func(rv string) (watch.Interface, error) {
			return ray.RayV1().RayClusters(chainNS).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
		}, t.lastRCRV, func() { t.setRVs(false, true) }, func(ev watch.Event) {
			if c, isRC := ev.Object.(*rayv1.RayCluster); isRC {
				t.cluster(c, time.Now())
			}
		})
	}()
	go func() { wg.Wait(); close(t.done) }()
	return t, nil
}

func (t *chainTracker) lastPodRV() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.podRV
}

func (t *chainTracker) lastRCRV() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rcRV
}

// setRVs forgets the last resourceVersion of the Pods, the RayClusters or both, so that their next
// watch starts from now.
func (t *chainTracker) setRVs(pods, clusters bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if pods {
		t.podRV = ""
	}
	if clusters {
		t.rcRV = ""
	}
}

// follow hands w's events to handle until ctx ends. When the server ends the watch (it does now and
// then), open opens it again from last(), retrying until that works; a watch error (most likely a
// version too old) calls reset first, so that the next watch starts from now.
func follow(ctx context.Context, w watch.Interface, open func(rv string) (watch.Interface, error), last func() string, reset func(), handle func(watch.Event)) {
	for {
		stop := context.AfterFunc(ctx, w.Stop)
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				reset()
				continue
			}
			handle(ev)
		}
		stop()
		w.Stop()
		for {
			if ctx.Err() != nil {
				return
			}
			var err error
			if w, err = open(last()); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func (t *chainTracker) pod(typ watch.EventType, p *corev1.Pod, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.podRV = p.ResourceVersion
	if p.Labels["ray.io/node-type"] != "head" {
		return
	}
	switch {
	case typ == watch.Deleted || p.DeletionTimestamp != nil:
		if t.head == p.Name {
			t.head = ""
		}
	case typ == watch.Added:
		t.head = p.Name
	}
	if typ != watch.Deleted && runningReady(p) && t.podReady[p.Name].IsZero() {
		t.podReady[p.Name] = now
	}
	t.notify()
}

func (t *chainTracker) cluster(c *rayv1.RayCluster, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rcRV = c.ResourceVersion
	head := c.Status.Head.PodName
	ready := false
	for _, cond := range c.Status.Conditions {
		if cond.Type == string(rayv1.HeadPodReady) && cond.Status == metav1.ConditionTrue {
			ready = true
		}
	}
	if !ready || head == "" {
		return
	}
	if t.rcReady[head].IsZero() {
		t.rcReady[head] = now
	}
	t.notify()
}

// notify wakes the waiters; t.mu is held.
func (t *chainTracker) notify() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// wait returns once cond (called with t.mu held) is true.
func (t *chainTracker) wait(ctx context.Context, timeout time.Duration, cond func() bool) error {
	deadline := time.After(timeout)
	for {
		t.mu.Lock()
		ok, ch := cond(), t.changed
		t.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-deadline:
			return fmt.Errorf("not within %s", timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (t *chainTracker) stop() {
	t.cancel()
	<-t.done
}
