package main

// The load suite: 50 concurrent clients write (create, update and delete ConfigMaps; patch Pods' status)
// for 60 s against a bare control plane (`rayctl up --controllers=none --kube-controllers=none
// --kubelet=false`) while 10 watchers follow both kinds, resuming from the last resourceVersion when the
// server closes a watch. It reports ops/s, the p50/p99 latency of mutating calls against Kubernetes' SLO
// (p99 ≤ 1 s), whether every watcher saw every write, and the process' RSS before, at peak and after.
// The same load runs for 15 s in the end-to-end suite (test/e2e/load_test.go, TestLoad).

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	loadClients  = 50
	loadWatchers = 5  // per kind
	loadSeconds  = 60 // RAYCTL_LOAD_SECONDS overrides it
)

// runLoad runs the load suite against a fresh `rayctl up` and writes out/load.md.
func runLoad(rayctl, out string) error {
	dir, err := os.MkdirTemp("", "rayctl-bench-load-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cmd := exec.Command(rayctl, "up", "--data-dir", dir, "--port", "0",
		"--controllers=none", "--kube-controllers=none", "--kubelet=false",
		"--pod-cidr", fmt.Sprintf("10.%d.%d.0/24", 200+rand.IntN(50), rand.IntN(256)), "--bridge", fmt.Sprintf("rtl%05d", rand.IntN(100000)))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}()
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			if !sent && strings.HasPrefix(sc.Text(), "ready in ") {
				ready <- true
				sent = true
			}
		}
		if !sent {
			ready <- false
		}
		cmd.Wait()
		close(done)
	}()
	select {
	case ok := <-ready:
		if !ok {
			return fmt.Errorf("rayctl up exited before ready; see %s", filepath.Join(dir, "rayctl.log"))
		}
	case <-time.After(3 * time.Minute):
		return fmt.Errorf("rayctl up not ready after 3m")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	if err != nil {
		return err
	}
	seconds := loadSeconds
	if v, err := strconv.Atoi(os.Getenv("RAYCTL_LOAD_SECONDS")); err == nil && v > 0 {
		seconds = v
	}
	d := time.Duration(seconds) * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), d+3*time.Minute)
	defer cancel()
	fmt.Fprintf(os.Stderr, "load: %d clients for %d s...\n", loadClients, seconds)
	r, err := loadPhase(ctx, cfg, cmd.Process.Pid, d, nil)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	cores := 0
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		cores = strings.Count(string(b), "processor\t:")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# API server under load (`make bench`, suite load)\n\n")
	fmt.Fprintf(&b, "Measured %s on a bare control plane (no controllers, no kubelet). Machine: %d cores.\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), cores)
	fmt.Fprintf(&b, "%d clients, each looping for %s: create a ConfigMap, update it, merge-patch its own Pod's status, delete the ConfigMap. ", loadClients, r.duration.Round(time.Second))
	fmt.Fprintf(&b, "%d watchers (%d on ConfigMaps, %d on Pods) follow from the start, resuming from the last resourceVersion when the server ends a watch.\n\n", 2*loadWatchers, loadWatchers, loadWatchers)
	fmt.Fprintf(&b, "| measurement | value | goal |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| mutating requests | %d (%.0f ops/s) | — |\n", r.ops, r.opsPerSec())
	fmt.Fprintf(&b, "| mutating latency p50 | %d ms | — |\n", r.p50.Milliseconds())
	fmt.Fprintf(&b, "| mutating latency p99 | %d ms | ≤ 1000 ms (Kubernetes SLO): %s |\n", r.p99.Milliseconds(), r.sloVerdict())
	fmt.Fprintf(&b, "| mutating latency max | %d ms | — |\n", r.max.Milliseconds())
	fmt.Fprintf(&b, "| failed requests | %d | 0 |\n", r.errors)
	fmt.Fprintf(&b, "| watch events received / expected | %d / %d | equal |\n", r.eventsGot, r.eventsWant)
	fmt.Fprintf(&b, "| watches ended by the server and resumed | %d | — |\n", r.resumes)
	fmt.Fprintf(&b, "| rayctl RSS before / peak / after | %.0f / %.0f / %.0f MB | bounded |\n", r.rssBefore, r.rssPeak, r.rssAfter)
	if r.firstErr != nil {
		fmt.Fprintf(&b, "\nFirst error: `%v`\n", r.firstErr)
	}
	path := filepath.Join(out, "load.md")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return err
	}
	fmt.Print(b.String())
	fmt.Fprintf(os.Stderr, "wrote %s\n", path)
	if r.errors > 0 || r.eventsGot != r.eventsWant {
		return fmt.Errorf("load: %d failed requests, %d of %d watch events", r.errors, r.eventsGot, r.eventsWant)
	}
	return nil
}

// loadResult is what one load phase measured.
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

func (r loadResult) opsPerSec() float64 { return float64(r.ops) / r.duration.Seconds() }

func (r loadResult) sloVerdict() string {
	if r.p99 <= time.Second {
		return "met"
	}
	return "missed"
}

// runLoadPhase runs the clients and watchers against cfg for d and measures the process pid.
func loadPhase(ctx context.Context, base *rest.Config, pid int, d time.Duration, logf func(string, ...any)) (loadResult, error) {
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
	for i := range loadClients {
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
	for i := range loadWatchers {
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
	r.rssBefore = loadRSSMB(pid)
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
				v := loadRSSMB(pid)
				peakMu.Lock()
				peak = max(peak, v)
				peakMu.Unlock()
			}
		}
	}()

	// Writers.
	var cmWrites, podWrites, errs atomic.Int64
	var errOnce sync.Once
	lat := make([][]time.Duration, loadClients)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for i := range loadClients {
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
	r.rssAfter = loadRSSMB(pid)
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
func loadRSSMB(pid int) float64 {
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
