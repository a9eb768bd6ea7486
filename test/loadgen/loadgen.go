// Package loadgen drives an API server with concurrent writers and watchers and measures it: mutating
// latency percentiles, errors, whether every watch saw every write, and the server process' memory. The
// load test (test/e2e) and the load benchmark (bench, suite load) share it.
package loadgen

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Clients is the number of concurrent writers; Watchers the number of watchers per kind.
const (
	Clients  = 50
	Watchers = 5
)

// Result is what one run measured.
type Result struct {
	// Duration is how long the writers ran; Ops how many mutating requests they made.
	Duration time.Duration
	Ops      int64
	// Errors counts failed requests and watch errors; FirstErr is the first of them.
	Errors   int64
	FirstErr error
	// P50, P99 and Max are mutating request latencies.
	P50, P99, Max time.Duration
	// EventsGot and EventsWant are watch events received and expected; Resumes counts watches the server
	// ended and the watcher resumed.
	EventsGot, EventsWant, Resumes int64
	// Watchers has one entry per watcher.
	Watchers []WatcherResult
	// RSSBefore, RSSPeak and RSSAfter are the server process' resident memory in MB.
	RSSBefore, RSSPeak, RSSAfter float64
}

// WatcherResult is one watcher's count.
type WatcherResult struct {
	Name      string
	Got, Want int64
}

// OpsPerSec is the writers' throughput.
func (r Result) OpsPerSec() float64 { return float64(r.Ops) / r.Duration.Seconds() }

// SLOVerdict says whether mutating p99 met the Kubernetes SLO of one second.
func (r Result) SLOVerdict() string {
	if r.P99 <= time.Second {
		return "met"
	}
	return "missed"
}

// Run runs the writers and watchers against cfg for d, measuring the server process pid.
func Run(ctx context.Context, cfg *rest.Config, pid int, d time.Duration, logf func(string, ...any)) (Result, error) {
	r, err := runLoadPhase(ctx, cfg, pid, d, logf)
	out := Result{Duration: r.duration, Ops: r.ops, Errors: r.errors, FirstErr: r.firstErr, P50: r.p50, P99: r.p99, Max: r.max,
		EventsGot: r.eventsGot, EventsWant: r.eventsWant, Resumes: r.resumes, RSSBefore: r.rssBefore, RSSPeak: r.rssPeak, RSSAfter: r.rssAfter}
	for _, w := range r.watchers {
		out.Watchers = append(out.Watchers, WatcherResult{Name: w.name, Got: w.got, Want: w.want})
	}
	return out, err
}

// RSSMB is process pid's resident memory in MB (0 when unknown).
func RSSMB(pid int) float64 { return procRSSMB(pid) }

type loadResult struct {
	duration                     time.Duration
	ops                          int64
	errors                       int64
	firstErr                     error
	p50, p99, max                time.Duration
	eventsGot, eventsWant        int64
	resumes                      int64 // watches the server ended and the watcher resumed
	watchers                     []loadWatcherResult
	rssBefore, rssPeak, rssAfter float64
}

type loadWatcherResult struct {
	name      string
	got, want int64
}

// runLoadPhase runs the clients and watchers against cfg for d and measures the process pid.
func runLoadPhase(ctx context.Context, base *rest.Config, pid int, d time.Duration, logf func(string, ...any)) (loadResult, error) {
	var r loadResult
	cfg := rest.CopyConfig(base)
	cfg.QPS, cfg.Burst = -1, 0 // no client-side rate limit: the server is what is measured
	cfg.WarningHandler = rest.NoWarnings{}
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return r, err
	}
	ns, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "load-"}}, metav1.CreateOptions{})
	if err != nil {
		return r, fmt.Errorf("creating the namespace: %w", err)
	}
	// One Pod per client, whose status it patches.
	for i := range Clients {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("load-%02d", i)},
			Spec:       corev1.PodSpec{NodeName: "load-node", Containers: []corev1.Container{{Name: "main", Image: "busybox:1.36"}}},
		}
		if _, err := admin.CoreV1().Pods(ns.Name).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return r, fmt.Errorf("creating pod %s: %w", p.Name, err)
		}
	}
	cms, err := admin.CoreV1().ConfigMaps(ns.Name).List(ctx, metav1.ListOptions{})
	if err != nil {
		return r, err
	}
	pods, err := admin.CoreV1().Pods(ns.Name).List(ctx, metav1.ListOptions{})
	if err != nil {
		return r, err
	}

	// Watchers, from the lists' resourceVersions, so that each sees exactly the writes that follow.
	type watcher struct {
		name string
		got  atomic.Int64
		done chan struct{}
	}
	var watchers []*watcher
	watchCtx, stopWatches := context.WithCancel(ctx)
	defer stopWatches()
	var watchErrs atomic.Int64
	var watchErrOnce sync.Once
	var watchErr error
	// A watch the server ends (the watch cache closes watchers it cannot feed fast enough, as
	// kube-apiserver does) is resumed from the last resourceVersion seen, as client-go's reflector does;
	// a resume the server refuses (410 Gone) is an error.
	var resumes atomic.Int64
	startWatch := func(name string, open func(rv string) (watch.Interface, error), rv string) error {
		w, err := open(rv)
		if err != nil {
			return fmt.Errorf("watch %s: %w", name, err)
		}
		wt := &watcher{name: name, done: make(chan struct{})}
		watchers = append(watchers, wt)
		fail := func(err error) {
			watchErrs.Add(1)
			watchErrOnce.Do(func() { watchErr = fmt.Errorf("watch %s: %w", name, err) })
		}
		go func() {
			defer close(wt.done)
			defer func() { w.Stop() }()
			for {
				select {
				case <-watchCtx.Done():
					return
				case ev, ok := <-w.ResultChan():
					if !ok {
						if watchCtx.Err() != nil {
							return
						}
						resumes.Add(1)
						if w, err = open(rv); err != nil {
							if watchCtx.Err() == nil {
								fail(fmt.Errorf("resuming at resourceVersion %s: %w", rv, err))
							}
							return
						}
						continue
					}
					if ev.Type == watch.Error {
						fail(fmt.Errorf("error event: %v", ev.Object))
						return
					}
					if m, err := meta.Accessor(ev.Object); err == nil {
						rv = m.GetResourceVersion()
					}
					if ev.Type != watch.Bookmark {
						wt.got.Add(1)
					}
				}
			}
		}()
		return nil
	}
	for i := range Watchers {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return r, err
		}
		if err := startWatch(fmt.Sprintf("configmaps-%d", i), func(rv string) (watch.Interface, error) {
			return cs.CoreV1().ConfigMaps(ns.Name).Watch(watchCtx, metav1.ListOptions{ResourceVersion: rv})
		}, cms.ResourceVersion); err != nil {
			return r, err
		}
		if err := startWatch(fmt.Sprintf("pods-%d", i), func(rv string) (watch.Interface, error) {
			return cs.CoreV1().Pods(ns.Name).Watch(watchCtx, metav1.ListOptions{ResourceVersion: rv})
		}, pods.ResourceVersion); err != nil {
			return r, err
		}
	}

	// RSS sampler.
	r.rssBefore = procRSSMB(pid)
	var peakMu sync.Mutex
	peak := r.rssBefore
	sampleCtx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-sampleCtx.Done():
				return
			case <-tick.C:
				v := procRSSMB(pid)
				peakMu.Lock()
				peak = max(peak, v)
				peakMu.Unlock()
			}
		}
	}()

	// Writers.
	var cmWrites, podWrites, errs atomic.Int64
	var errOnce sync.Once
	lat := make([][]time.Duration, Clients)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for i := range Clients {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return r, err
		}
		wg.Go(func() {
			fail := func(what string, err error) {
				errs.Add(1)
				errOnce.Do(func() { r.firstErr = fmt.Errorf("client %d: %s: %w", i, what, err) })
			}
			timed := func(f func() error) error {
				t0 := time.Now()
				err := f()
				lat[i] = append(lat[i], time.Since(t0))
				return err
			}
			cmClient, podClient := cs.CoreV1().ConfigMaps(ns.Name), cs.CoreV1().Pods(ns.Name)
			podName := fmt.Sprintf("load-%02d", i)
			for n := 0; time.Now().Before(deadline) && ctx.Err() == nil; n++ {
				name := fmt.Sprintf("load-%02d-%d", i, n)
				var cm *corev1.ConfigMap
				if err := timed(func() (err error) {
					cm, err = cmClient.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"n": "0"}}, metav1.CreateOptions{})
					return err
				}); err != nil {
					fail("create "+name, err)
					continue
				}
				cmWrites.Add(1)
				cm.Data["n"] = "1"
				if err := timed(func() error { _, err := cmClient.Update(ctx, cm, metav1.UpdateOptions{}); return err }); err != nil {
					fail("update "+name, err)
				} else {
					cmWrites.Add(1)
				}
				patch := fmt.Sprintf(`{"status":{"message":"iteration %d","reason":"Load"}}`, n)
				if err := timed(func() error {
					_, err := podClient.Patch(ctx, podName, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
					return err
				}); err != nil {
					fail("patch status of "+podName, err)
				} else {
					podWrites.Add(1)
				}
				if err := timed(func() error { return cmClient.Delete(ctx, name, metav1.DeleteOptions{}) }); err != nil {
					fail("delete "+name, err)
				} else {
					cmWrites.Add(1)
				}
			}
		})
	}
	wg.Wait()
	r.duration = time.Since(start)

	// Every watcher must see every write; give them time to drain.
	want := map[string]int64{"configmaps": cmWrites.Load(), "pods": podWrites.Load()}
	drainBy := time.Now().Add(30 * time.Second)
	for time.Now().Before(drainBy) {
		all := true
		for _, w := range watchers {
			if w.got.Load() < want[strings.Split(w.name, "-")[0]] {
				all = false
			}
		}
		if all {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // extra events, if any, would show up now
	stopWatches()
	for _, w := range watchers {
		<-w.done
		kind := strings.Split(w.name, "-")[0]
		r.watchers = append(r.watchers, loadWatcherResult{name: w.name, got: w.got.Load(), want: want[kind]})
		r.eventsGot += w.got.Load()
		r.eventsWant += want[kind]
	}
	stopSampling()
	<-sampled
	r.rssAfter = procRSSMB(pid)
	r.rssPeak = max(peak, r.rssAfter)

	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	r.ops = int64(len(all))
	if len(all) > 0 {
		r.p50, r.p99, r.max = loadPercentile(all, 0.50), loadPercentile(all, 0.99), all[len(all)-1]
	}
	r.errors = errs.Load() + watchErrs.Load()
	r.resumes = resumes.Load()
	if r.firstErr == nil && watchErr != nil {
		r.firstErr = watchErr
	}
	if logf != nil {
		logf("load: %d ConfigMap writes, %d Pod status patches", want["configmaps"], want["pods"])
	}
	_ = admin.CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), ns.Name, metav1.DeleteOptions{})
	return r, nil
}

// loadPercentile is the q-quantile of sorted durations (nearest rank).
func loadPercentile(sorted []time.Duration, q float64) time.Duration {
	i := int(float64(len(sorted))*q+0.5) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}

// procRSSMB is a process' resident set size from /proc, in MB (0 when unreadable).
func procRSSMB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			return float64(kb) / 1024
		}
	}
	return 0
}
