package main

// Memory after work (issue 15 §1): what rayctl's RSS comes back to once the work is gone, beside its
// idle RSS on the same instance (3 s after ready, as suite startup reads it).
//
//   - Suite startup, rssAfterRayJob: a fresh `rayctl up --runtime=containerd` runs one RayJob (the raysim
//     sample with the entrypoint `echo hello` and shutdownAfterJobFinishes, so the RayJob controller deletes
//     its RayCluster once the job is done); the RSS is read rayjobSettle after the cluster's pods are gone.
//   - Suite pods, podCycles: on the fake runtime's instance, pods are created and deleted (podCycleWorkers
//     at a time, each one created, Ready, deleted, gone); the RSS is read podCyclesSettle after the last.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/rayctl/rayctl/test/loadgen"
)

const (
	// rayjobSettle is how long after the RayJob's cluster is gone its RSS is read.
	rayjobSettle = 30 * time.Second
	// rayjobRSSGoalMB is issue 15's goal for it.
	rayjobRSSGoalMB = 180
	// podCyclesDefault is how many pod create/delete cycles suite pods runs (-pod-cycles).
	podCyclesDefault = 1000
	// podCycleWorkers run the cycles, each one pod at a time.
	podCycleWorkers = 10
	// podCyclesSettle is how long after the last cycle the RSS is read.
	podCyclesSettle = 60 * time.Second
	// podCyclesGoal is issue 15's goal: that RSS within 20% of idle.
	podCyclesGoal = 1.2
)

// memAfter is rayctl's RSS idle and after some work (MB), and where it lay each time (nil when it could
// not be read).
type memAfter struct {
	idleMB, afterMB       float64
	took                  time.Duration // the work, settle time not counted
	idleParts, afterParts *memParts
}

// settledRSS waits d and reads pid's RSS.
func settledRSS(pid int, d time.Duration) float64 {
	time.Sleep(d)
	return loadgen.RSSMB(pid)
}

// rssAfterRayJob measures rayctl's RSS after one RayJob ran and its cluster was deleted, on a fresh
// `rayctl up --runtime=containerd` (see the file comment).
func rssAfterRayJob(rayctl, samples string) (memAfter, error) {
	var m memAfter
	dir, err := os.MkdirTemp("", "rayctl-bench-mem-")
	if err != nil {
		return m, err
	}
	defer removeInstance(rayctl, dir)
	up, err := startUp(rayctl, dir, "--runtime=containerd")
	if err != nil {
		return m, err
	}
	defer up.Stop(time.Minute)
	m.idleMB = settledRSS(up.Pid(), 3*time.Second)
	kube, ray, err := clients(up, 100, 200)
	if err != nil {
		return m, err
	}
	m.idleParts = memPartsOrNil(context.Background(), kube, up.Pid(), "idle", "startup-idle")
	job, _, err := sampleRayJob(samples, "rayjob-k8sjob.yaml")
	if err != nil {
		return m, err
	}
	job.Name = "bench-mem"
	job.APIVersion, job.Kind = rayv1.GroupVersion.String(), "RayJob"
	job.Spec.Entrypoint = "echo hello"
	job.Spec.ShutdownAfterJobFinishes = true
	job.Spec.TTLSecondsAfterFinished = 0
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	const ns = "bench-mem"
	if err := podNamespace(ctx, kube, ns); err != nil {
		return m, err
	}
	t0 := time.Now()
	// Applied as a user applies it: kubectl's validation reads the OpenAPI documents, which the API
	// server builds on their first request (see pkg/apiserver/lazyopenapi), so the reading after counts them.
	if err := kubectlApply(ctx, rayctl, up.Kubeconfig(), ns, job); err != nil {
		return m, err
	}
	// Complete, then the cluster and its pods gone (the controller deletes the cluster after the job).
	complete, cluster := false, false
	var last rayv1.JobDeploymentStatus
	err = poll(ctx, 5*time.Minute, func() bool {
		j, err := ray.RayV1().RayJobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		last = j.Status.JobDeploymentStatus
		complete = complete || last == rayv1.JobDeploymentStatusComplete
		cluster = cluster || j.Status.RayClusterName != ""
		if !complete || !cluster {
			return false
		}
		clusters, cerr := ray.RayV1().RayClusters(ns).List(ctx, metav1.ListOptions{})
		pods, perr := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/cluster"})
		return cerr == nil && len(clusters.Items) == 0 && perr == nil && len(pods.Items) == 0
	})
	if err != nil {
		return m, fmt.Errorf("RayJob %s (shutdownAfterJobFinishes): not Complete with its cluster gone (last status %q, Complete seen %v): %w\nrayctl.log tail:\n%s",
			job.Name, last, complete, err, logTail(dir))
	}
	m.took = time.Since(t0)
	m.afterMB = settledRSS(up.Pid(), rayjobSettle)
	m.afterParts = memPartsOrNil(ctx, kube, up.Pid(), "after the RayJob", "startup-after-rayjob")
	fmt.Fprintf(os.Stderr, "memory: RayJob ran and its cluster went in %v; RSS %.0f MB idle, %.0f MB %v after\n", m.took.Round(time.Millisecond), m.idleMB, m.afterMB, rayjobSettle)
	// The submitter's pod remains; delete the RayJob and wait for it, so no container outlives the instance.
	bg := metav1.DeletePropagationBackground
	if err := ray.RayV1().RayJobs(ns).Delete(ctx, job.Name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		return m, err
	}
	if err := poll(ctx, 2*time.Minute, func() bool {
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0
	}); err != nil {
		return m, fmt.Errorf("the RayJob's pods not gone after it was deleted: %w", err)
	}
	return m, nil
}

// podCycles creates and deletes n pods in ns, podCycleWorkers at a time: each pod is created, waited
// for until Running and Ready, deleted, and waited for until gone.
func podCycles(ctx context.Context, kube kubernetes.Interface, ns string, n int) error {
	t := &podStates{pods: map[string]*podState{}}
	l, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	t.rv = l.ResourceVersion
	w, err := kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: t.rv})
	if err != nil {
		return err
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go follow(wctx, w, func(rv string) (watch.Interface, error) {
		return kube.CoreV1().Pods(ns).Watch(wctx, metav1.ListOptions{ResourceVersion: rv})
	}, t.lastRV, func() {
		t.mu.Lock()
		t.rv = ""
		t.mu.Unlock()
	}, func(ev watch.Event) {
		if p, isPod := ev.Object.(*corev1.Pod); isPod {
			t.event(ev.Type, p)
		}
	})
	wait := func(name string, ch <-chan struct{}, what string) error {
		select {
		case <-ch:
			return nil
		case <-time.After(2 * time.Minute):
			return fmt.Errorf("pod %s not %s within 2m", name, what)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	next := make(chan int)
	errs := make(chan error, podCycleWorkers)
	var wg sync.WaitGroup
	for range podCycleWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				name := fmt.Sprintf("cycle-%04d", i)
				st := t.state(name)
				if _, err := kube.CoreV1().Pods(ns).Create(ctx, podsPod(name), metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
				if err := wait(name, st.ready, "Ready"); err != nil {
					errs <- err
					return
				}
				if err := kube.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
					errs <- err
					return
				}
				if err := wait(name, st.gone, "gone"); err != nil {
					errs <- err
					return
				}
				t.forget(name)
			}
		}()
	}
	t0 := time.Now()
	var first error
	for i := 0; i < n && first == nil; i++ {
		select {
		case next <- i:
		case first = <-errs:
		}
		if (i+1)%200 == 0 {
			fmt.Fprintf(os.Stderr, "pods: %d/%d create/delete cycles (%s)\n", i+1, n, time.Since(t0).Round(time.Second))
		}
	}
	close(next)
	wg.Wait()
	if first == nil && len(errs) > 0 {
		first = <-errs
	}
	return first
}

// podStates follows the pods of podCycles: a channel closed when each is Ready, one when it is gone.
type podStates struct {
	mu   sync.Mutex
	pods map[string]*podState
	rv   string // the last resourceVersion seen, for a rewatch
}

type podState struct {
	ready, gone           chan struct{}
	readySeen, deleteSeen bool
}

func (t *podStates) lastRV() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rv
}

// state is name's state, made on first use (by the worker or by the watch, whichever comes first).
func (t *podStates) state(name string) *podState {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stateLocked(name)
}

func (t *podStates) stateLocked(name string) *podState {
	st := t.pods[name]
	if st == nil {
		st = &podState{ready: make(chan struct{}), gone: make(chan struct{})}
		t.pods[name] = st
	}
	return st
}

func (t *podStates) forget(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pods, name)
}

func (t *podStates) event(typ watch.EventType, p *corev1.Pod) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rv = p.ResourceVersion
	st := t.stateLocked(p.Name)
	if !st.readySeen && typ != watch.Deleted && runningReady(p) {
		st.readySeen = true
		close(st.ready)
	}
	if !st.deleteSeen && typ == watch.Deleted {
		st.deleteSeen = true
		close(st.gone)
	}
}

// kubectlApply applies obj in namespace ns with `rayctl kubectl apply` on kubeconfig.
func kubectlApply(ctx context.Context, rayctl, kubeconfig, ns string, obj runtime.Object) error {
	manifest, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, rayctl, "kubectl", "--kubeconfig", kubeconfig, "-n", ns, "apply", "-f", "-")
	cmd.Stdin = bytes.NewReader(manifest)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl apply: %v: %s", err, out)
	}
	return nil
}
