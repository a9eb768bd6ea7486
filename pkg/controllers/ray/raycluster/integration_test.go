package raycluster_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
	"github.com/rayctl/rayctl/pkg/controllers/ray/raycluster"
	"github.com/rayctl/rayctl/pkg/rayparams"
	"github.com/rayctl/rayctl/test/e2e/framework"
)

// The integration tests share one `rayctl up` (a real API server over HTTPS) and one manager running
// this controller in-process with the admin identity. The tests play the kubelet: they write Pod
// status through the API, as KubeRay's envtest suites do. Each test works in its own namespace.
var (
	inst *framework.Instance
	cl   client.Client
	obs  = &recorder{}
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() || fuzzing() {
		os.Exit(m.Run())
	}
	os.Exit(runWithServer(m))
}

// fuzzing reports whether this process runs a fuzz target (as the coordinator or one of its workers):
// fuzz targets need no API server, and a `rayctl up` in every worker would only slow them down.
func fuzzing() bool {
	for _, name := range []string{"test.fuzz", "test.fuzzworker"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" && f.Value.String() != "false" {
			return true
		}
	}
	return false
}

func runWithServer(m *testing.M) int {
	var err error
	if inst, err = framework.Start("", framework.ControlPlaneOnly()...); err != nil {
		fmt.Fprintln(os.Stderr, "starting rayctl up:", err)
		return 1
	}
	// Stopped before its data dir goes: removed while rayctl still ran, the dir was left half made again.
	defer func() {
		_ = inst.Stop()
		os.RemoveAll(inst.DataDir)
	}()

	reg := &ctrlset.Registry{}
	reg.Register(raycluster.Name, raycluster.Setup)
	opts := ctrlset.DefaultOptions()
	opts.Registry = reg
	opts.Sink = obs
	opts.Logger = logr.Discard()
	// As a node whose pods do not get their volumes at their mountPaths (the host-process runtime
	// without mount namespaces); only clusters with enableK8sTokenAuth see the difference.
	opts.PodMountsUnplaced = true
	if os.Getenv("RAYCTL_TEST_LOG") != "" {
		opts.Logger = funcr.New(func(p, a string) { fmt.Fprintln(os.Stderr, p, a) }, funcr.Options{Verbosity: 1})
	}
	mgr, err := ctrlset.New(inst.Config, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() { cancel(); <-done }()
	if cl, err = client.New(inst.Config, client.Options{Scheme: ctrlset.Scheme()}); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 1
	}
	return m.Run()
}

// recorder is a chain.Sink that keeps the predicate drops and counts the status writes.
type recorder struct {
	mu          sync.Mutex
	dropped     []chain.Ref // RayCluster events the predicate dropped
	statusWrite atomic.Int64
}

func (r *recorder) Record(e chain.Event) {
	switch {
	case e.Hop == chain.PredicateHop && e.Outcome == chain.Dropped:
		r.mu.Lock()
		r.dropped = append(r.dropped, e.Object)
		r.mu.Unlock()
	case e.Hop == chain.StatusWrite:
		r.statusWrite.Add(1)
	}
}

func (r *recorder) droppedAt(name, rv string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.dropped {
		if d.Name == name && d.ResourceVersion == rv {
			return true
		}
	}
	return false
}

var _ chain.Sink = (*recorder)(nil)

func setup(t *testing.T) (context.Context, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: starts rayctl up")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	ns := fmt.Sprintf("rc-%s-%d", strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), time.Now().UnixNano()%100000)
	if len(ns) > 60 {
		ns = ns[len(ns)-60:]
	}
	ns = strings.Trim(ns, "-")
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	return ctx, ns
}

// sample reads configs/samples/raycluster.yaml into namespace ns with `workers` replicas.
func sample(t *testing.T, ns string, workers int32) *rayv1.RayCluster {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "configs", "samples", "raycluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c := &rayv1.RayCluster{}
	if err := yaml.UnmarshalStrict(b, c); err != nil {
		t.Fatal(err)
	}
	c.Namespace = ns
	c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To(workers)
	return c
}

func pods(ctx context.Context, t *testing.T, ns string, extra ...client.ListOption) []corev1.Pod {
	t.Helper()
	var l corev1.PodList
	if err := cl.List(ctx, &l, append(extra, client.InNamespace(ns))...); err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func workers(ctx context.Context, t *testing.T, ns string) []corev1.Pod {
	return pods(ctx, t, ns, client.MatchingLabels{"ray.io/node-type": "worker"})
}

func names(ps []corev1.Pod) []string {
	var n []string
	for _, p := range ps {
		n = append(n, p.Name)
	}
	sort.Strings(n)
	return n
}

// eventually polls cond until it holds or 60 s pass, then fails with what describe says.
func eventually(ctx context.Context, t *testing.T, what string, cond func() bool, describe func() string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("waiting for %s: %v\n%s", what, err, describe())
	}
}

func get(ctx context.Context, t *testing.T, ns, name string) *rayv1.RayCluster {
	t.Helper()
	c := &rayv1.RayCluster{}
	if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, c); err != nil {
		t.Fatal(err)
	}
	return c
}

func describe(ctx context.Context, t *testing.T, ns, name string) func() string {
	return func() string {
		c := &rayv1.RayCluster{}
		_ = cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, c)
		st, _ := yaml.Marshal(c.Status)
		var ev corev1.EventList
		_ = cl.List(ctx, &ev, client.InNamespace(ns))
		var lines []string
		for _, e := range ev.Items {
			lines = append(lines, e.Reason+": "+e.Message)
		}
		return fmt.Sprintf("pods: %v\nstatus:\n%s\nevents:\n%s", names(pods(ctx, t, ns)), st, strings.Join(lines, "\n"))
	}
}

// runPods plays the kubelet: every Pod of ns not yet Running goes Running and Ready, with an IP.
func runPods(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	for i, p := range pods(ctx, t, ns) {
		if p.Status.Phase == corev1.PodRunning || !p.DeletionTimestamp.IsZero() {
			continue
		}
		setPhase(ctx, t, &p, corev1.PodRunning, fmt.Sprintf("10.244.0.%d", 10+i))
	}
}

func setPhase(ctx context.Context, t *testing.T, p *corev1.Pod, phase corev1.PodPhase, ip string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &corev1.Pod{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(p), cur); err != nil {
			return err
		}
		now := metav1.Now()
		ready := corev1.ConditionTrue
		if phase != corev1.PodRunning {
			ready = corev1.ConditionFalse
		}
		cur.Status.Phase, cur.Status.PodIP = phase, ip
		cur.Status.PodIPs = []corev1.PodIP{{IP: ip}}
		cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, LastTransitionTime: now}}
		state := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}
		if phase == corev1.PodFailed {
			state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: now}}
		}
		cur.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: cur.Spec.Containers[0].Name, Image: cur.Spec.Containers[0].Image, Ready: ready == corev1.ConditionTrue, State: state,
		}}
		return cl.Status().Update(ctx, cur)
	})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// touchPod rewrites a Pod's status with a new Ready transition time, as a kubelet's status sync may.
func touchPod(ctx context.Context, p *corev1.Pod) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &corev1.Pod{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(p), cur); err != nil {
			return err
		}
		for i := range cur.Status.Conditions {
			cur.Status.Conditions[i].LastProbeTime = metav1.NewTime(time.Now())
		}
		return cl.Status().Update(ctx, cur)
	})
}

func patchSpec(ctx context.Context, t *testing.T, ns, name string, mutate func(*rayv1.RayCluster)) {
	t.Helper()
	if err := update(ctx, ns, name, mutate); err != nil {
		t.Fatal(err)
	}
}

// update applies mutate to the current RayCluster, retrying on conflicts.
func update(ctx context.Context, ns, name string, mutate func(*rayv1.RayCluster)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c := &rayv1.RayCluster{}
		if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, c); err != nil {
			return err
		}
		mutate(c)
		return cl.Update(ctx, c)
	})
}

func isReady(c *rayv1.RayCluster, workers int32) bool {
	return c.Status.State == rayv1.Ready && c.Status.ReadyWorkerReplicas == workers && c.Status.DesiredWorkerReplicas == workers
}

func TestClusterComesUpAndScales(t *testing.T) {
	ctx, ns := setup(t)
	c := sample(t, ns, 2)
	if err := cl.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	name, desc := c.Name, describe(ctx, t, ns, c.Name)

	eventually(ctx, t, "head pod, head service and 2 workers", func() bool {
		return len(pods(ctx, t, ns)) == 3 && len(workers(ctx, t, ns)) == 2
	}, desc)
	svc := &corev1.Service{}
	if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: "raycluster-sample-head-svc"}, svc); err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("head service not headless: %+v", svc.Spec)
	}
	for _, p := range pods(ctx, t, ns) {
		ref := metav1.GetControllerOf(&p)
		if ref == nil || ref.Kind != "RayCluster" || ref.Name != name || ref.UID != c.UID || !ptr.Deref(ref.BlockOwnerDeletion, false) {
			t.Errorf("pod %s controller ref %+v", p.Name, ref)
		}
		if p.Labels["ray.io/cluster"] != name || p.Labels["app.kubernetes.io/created-by"] != "kuberay-operator" {
			t.Errorf("pod %s labels %v", p.Name, p.Labels)
		}
		switch p.Labels["ray.io/node-type"] {
		case "head":
			if !strings.HasPrefix(p.Name, "raycluster-sample-head-") {
				t.Errorf("head pod name %s", p.Name)
			}
		case "worker":
			if !strings.HasPrefix(p.Name, "raycluster-sample-workergroup-worker-") || p.Labels["ray.io/group"] != "workergroup" {
				t.Errorf("worker pod %s labels %v", p.Name, p.Labels)
			}
		}
	}

	runPods(ctx, t, ns)
	eventually(ctx, t, "state ready with 2 ready workers", func() bool {
		c := get(ctx, t, ns, name)
		return isReady(c, 2) && c.Status.Head.PodIP != "" && c.Status.Head.ServiceName == "raycluster-sample-head-svc" &&
			c.Status.Endpoints["dashboard"] == "8265"
	}, desc)

	// Scale up: one more worker; readiness follows only once it runs.
	patchSpec(ctx, t, ns, name, func(c *rayv1.RayCluster) { c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](3) })
	eventually(ctx, t, "3 workers", func() bool { return len(workers(ctx, t, ns)) == 3 }, desc)
	runPods(ctx, t, ns)
	eventually(ctx, t, "3 ready workers", func() bool { return isReady(get(ctx, t, ns, name), 3) }, desc)

	// Replicas above maxReplicas clamp to it.
	patchSpec(ctx, t, ns, name, func(c *rayv1.RayCluster) { c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](9) })
	eventually(ctx, t, "5 workers (maxReplicas)", func() bool { return len(workers(ctx, t, ns)) == 5 }, desc)
	runPods(ctx, t, ns)

	// Scale down.
	patchSpec(ctx, t, ns, name, func(c *rayv1.RayCluster) { c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](1) })
	eventually(ctx, t, "1 ready worker", func() bool {
		return len(workers(ctx, t, ns)) == 1 && isReady(get(ctx, t, ns, name), 1)
	}, desc)

	// A deleted worker is replaced.
	old := workers(ctx, t, ns)[0]
	if err := cl.Delete(ctx, &old); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "a replacement worker", func() bool {
		w := workers(ctx, t, ns)
		return len(w) == 1 && w[0].Name != old.Name
	}, desc)

	// A deleted head is recreated.
	head := pods(ctx, t, ns, client.MatchingLabels{"ray.io/node-type": "head"})[0]
	if err := cl.Delete(ctx, &head); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "a new head", func() bool {
		h := pods(ctx, t, ns, client.MatchingLabels{"ray.io/node-type": "head"})
		return len(h) == 1 && h[0].Name != head.Name
	}, desc)

	// Scaling up by several workers at once: exactly that many come.
	patchSpec(ctx, t, ns, name, func(c *rayv1.RayCluster) { c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](5) })
	eventually(ctx, t, "5 workers", func() bool { return len(workers(ctx, t, ns)) == 5 }, desc)
	runPods(ctx, t, ns)
	eventually(ctx, t, "5 ready workers, no more", func() bool {
		return isReady(get(ctx, t, ns, name), 5) && len(workers(ctx, t, ns)) == 5
	}, desc)
}

func TestWorkersToDeleteAndFailedPods(t *testing.T) {
	ctx, ns := setup(t)
	c := sample(t, ns, 2)
	if err := cl.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	name, desc := c.Name, describe(ctx, t, ns, c.Name)
	eventually(ctx, t, "2 workers", func() bool { return len(workers(ctx, t, ns)) == 2 }, desc)
	runPods(ctx, t, ns)

	// The autoscaler's way down: replicas 1 and the named Pod to remove.
	w := names(workers(ctx, t, ns))
	patchSpec(ctx, t, ns, name, func(c *rayv1.RayCluster) {
		c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](1)
		c.Spec.WorkerGroupSpecs[0].ScaleStrategy.WorkersToDelete = []string{w[1]}
	})
	eventually(ctx, t, "the named worker gone, the other kept", func() bool {
		got := names(workers(ctx, t, ns))
		return len(got) == 1 && got[0] == w[0]
	}, desc)

	// A worker that failed (phase Failed) is deleted and replaced.
	failed := workers(ctx, t, ns)[0]
	setPhase(ctx, t, &failed, corev1.PodFailed, failed.Status.PodIP)
	eventually(ctx, t, "the failed worker replaced", func() bool {
		got := workers(ctx, t, ns)
		return len(got) == 1 && got[0].Name != failed.Name
	}, desc)
}

func TestSuspendAndResume(t *testing.T) {
	ctx, ns := setup(t)
	c := sample(t, ns, 2)
	if err := cl.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	name, desc := c.Name, describe(ctx, t, ns, c.Name)
	eventually(ctx, t, "3 pods", func() bool { return len(pods(ctx, t, ns)) == 3 }, desc)
	runPods(ctx, t, ns)
	eventually(ctx, t, "ready", func() bool { return isReady(get(ctx, t, ns, name), 2) }, desc)

	patchSpec(ctx, t, ns, name, func(c *rayv1.RayCluster) { c.Spec.Suspend = ptr.To(true) })
	eventually(ctx, t, "suspended with no pods", func() bool {
		return len(pods(ctx, t, ns)) == 0 && get(ctx, t, ns, name).Status.State == rayv1.Suspended
	}, desc)
	// It stays that way.
	time.Sleep(3 * time.Second)
	if n := len(pods(ctx, t, ns)); n != 0 {
		t.Fatalf("%d pods came back while suspended", n)
	}

	patchSpec(ctx, t, ns, name, func(c *rayv1.RayCluster) { c.Spec.Suspend = ptr.To(false) })
	eventually(ctx, t, "pods recreated", func() bool { return len(pods(ctx, t, ns)) == 3 }, desc)
	runPods(ctx, t, ns)
	eventually(ctx, t, "ready again", func() bool { return isReady(get(ctx, t, ns, name), 2) }, desc)

	// A suspended worker group loses its Pods; the head stays.
	patchSpec(ctx, t, ns, name, func(c *rayv1.RayCluster) { c.Spec.WorkerGroupSpecs[0].Suspend = ptr.To(true) })
	eventually(ctx, t, "group suspended", func() bool {
		return len(workers(ctx, t, ns)) == 0 && len(pods(ctx, t, ns)) == 1 && get(ctx, t, ns, name).Status.DesiredWorkerReplicas == 0
	}, desc)
}

func TestStatusOnlyChangeIsIgnoredAndNoDuplicates(t *testing.T) {
	ctx, ns := setup(t)
	c := sample(t, ns, 3)
	if err := cl.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	name, desc := c.Name, describe(ctx, t, ns, c.Name)
	eventually(ctx, t, "4 pods", func() bool { return len(pods(ctx, t, ns)) == 4 }, desc)
	runPods(ctx, t, ns)
	eventually(ctx, t, "ready", func() bool { return isReady(get(ctx, t, ns, name), 3) }, desc)
	before := names(pods(ctx, t, ns))

	// A status-only write (someone else's) is dropped by the predicate and changes no Pod.
	cur := get(ctx, t, ns, name)
	cur.Status.Reason = "written by a test"
	if err := cl.Status().Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "the predicate to drop the status write", func() bool { return obs.droppedAt(name, cur.ResourceVersion) },
		func() string { return "not observed" })
	time.Sleep(time.Second)
	if after := names(pods(ctx, t, ns)); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Fatalf("pods changed after a status-only write: %v -> %v", before, after)
	}

	// A burst of spec-neutral label and annotation changes and Pod status writes: each triggers a
	// reconcile, none may create a duplicate Pod.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 20 {
			err := update(ctx, ns, name, func(c *rayv1.RayCluster) {
				if c.Annotations == nil {
					c.Annotations = map[string]string{}
				}
				c.Annotations["test/burst"] = fmt.Sprint(i)
				if c.Labels == nil {
					c.Labels = map[string]string{}
				}
				c.Labels["test-burst"] = fmt.Sprint(i)
			})
			if err != nil {
				t.Error(err)
			}
		}
	}()
	for _, p := range pods(ctx, t, ns) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				if err := touchPod(ctx, &p); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	for range 20 { // watch the count for 2 s after the burst
		if n := len(pods(ctx, t, ns)); n != 4 {
			t.Fatalf("%d pods after the burst, want 4: %v", n, names(pods(ctx, t, ns)))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if after := names(pods(ctx, t, ns)); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Fatalf("pods changed during the burst: %v -> %v", before, after)
	}

	// Scaling up in the middle of a burst: the cache lags behind the creates, expectations hold.
	for i := range 10 {
		if err := update(ctx, ns, name, func(c *rayv1.RayCluster) {
			c.Annotations["test/burst"] = fmt.Sprint("up", i)
			if i == 0 {
				c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](5)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(ctx, t, "6 pods", func() bool { return len(pods(ctx, t, ns)) == 6 }, desc)
	for range 20 {
		if n := len(pods(ctx, t, ns)); n != 6 {
			t.Fatalf("%d pods after scaling up in a burst, want 6: %v", n, names(pods(ctx, t, ns)))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if obs.statusWrite.Load() == 0 {
		t.Error("no status write was observed")
	}
}

// TestInTreeAutoscaling: with enableInTreeAutoscaling the controller creates the autoscaler's
// ServiceAccount, Role and RoleBinding (owned by the cluster) and a head Pod with the sidecar running
// as that ServiceAccount; lowering replicas alone removes no worker (only the autoscaler picks, through
// workersToDelete, which removes exactly the named Pod); a head template naming a ServiceAccount that
// does not exist gets a Warning and no head Pod.
func TestInTreeAutoscaling(t *testing.T) {
	ctx, ns := setup(t)
	c := sample(t, ns, 2)
	c.Spec.EnableInTreeAutoscaling = ptr.To(true)
	if err := cl.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	name, desc := c.Name, describe(ctx, t, ns, c.Name)
	key := types.NamespacedName{Namespace: ns, Name: name}
	var (
		sa   corev1.ServiceAccount
		role rbacv1.Role
		rb   rbacv1.RoleBinding
	)
	eventually(ctx, t, "ServiceAccount, Role and RoleBinding", func() bool {
		return cl.Get(ctx, key, &sa) == nil && cl.Get(ctx, key, &role) == nil && cl.Get(ctx, key, &rb) == nil
	}, desc)
	for _, o := range []metav1.Object{&sa, &role, &rb} {
		if refs := o.GetOwnerReferences(); len(refs) != 1 || refs[0].Kind != "RayCluster" || refs[0].Name != name {
			t.Errorf("%s not owned by the RayCluster: %+v", o.GetName(), refs)
		}
	}
	if rb.Subjects[0].Name != name || rb.RoleRef.Name != name {
		t.Errorf("binding %+v → %+v", rb.Subjects, rb.RoleRef)
	}
	eventually(ctx, t, "head and 2 workers", func() bool { return len(pods(ctx, t, ns)) == 3 }, desc)
	head := pods(ctx, t, ns, client.MatchingLabels{"ray.io/node-type": "head"})[0]
	if head.Spec.ServiceAccountName != name || len(head.Spec.Containers) != 2 || head.Spec.Containers[1].Name != raycluster.AutoscalerContainerName {
		t.Fatalf("head pod: serviceAccountName %q, containers %d", head.Spec.ServiceAccountName, len(head.Spec.Containers))
	}
	runPods(ctx, t, ns)

	w := names(workers(ctx, t, ns))
	patchSpec(ctx, t, ns, name, func(c *rayv1.RayCluster) { c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](1) })
	eventually(ctx, t, "the controller to see replicas 1", func() bool {
		return get(ctx, t, ns, name).Status.DesiredWorkerReplicas == 1
	}, desc)
	if got := names(workers(ctx, t, ns)); len(got) != 2 {
		t.Fatalf("with the autoscaler on, lowering replicas removed a worker by itself: %v", got)
	}
	patchSpec(ctx, t, ns, name, func(c *rayv1.RayCluster) { c.Spec.WorkerGroupSpecs[0].ScaleStrategy.WorkersToDelete = []string{w[0]} })
	eventually(ctx, t, "exactly the named worker gone", func() bool {
		got := names(workers(ctx, t, ns))
		return len(got) == 1 && got[0] == w[1]
	}, desc)

	// A head that names its own ServiceAccount: the user creates it; until then a Warning, no head.
	c2 := sample(t, ns, 0)
	c2.Name = "named-sa"
	c2.Spec.EnableInTreeAutoscaling = ptr.To(true)
	c2.Spec.HeadGroupSpec.Template.Spec.ServiceAccountName = "users-own"
	if err := cl.Create(ctx, c2); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "a Warning naming the missing ServiceAccount", func() bool {
		return hasEvent(ctx, ns, raycluster.EventAutoscalerSANotFound, "named-sa", "users-own")
	}, desc)
	if err := cl.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "users-own", Namespace: ns}}); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "the head Pod once the ServiceAccount exists", func() bool {
		hs := pods(ctx, t, ns, client.MatchingLabels{"ray.io/cluster": "named-sa", "ray.io/node-type": "head"})
		return len(hs) == 1 && hs[0].Spec.ServiceAccountName == "users-own"
	}, desc)
	if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: "users-own"}, &sa); err != nil || len(sa.OwnerReferences) != 0 {
		t.Errorf("the user's ServiceAccount was taken over: %+v, %v", sa.OwnerReferences, err)
	}
}

// TestGCSFaultTolerance: a RayCluster with gcsFaultToleranceOptions gets a head Pod that carries its
// Redis; one that also sets the older ray.io/ft-enabled annotation is refused with a Warning and gets
// no Pods, as KubeRay refuses it.
func TestGCSFaultTolerance(t *testing.T) {
	ctx, ns := setup(t)
	c := sample(t, ns, 0)
	c.Spec.GcsFaultToleranceOptions = &rayv1.GcsFaultToleranceOptions{RedisAddress: "redis:6379", RedisPassword: &rayv1.RedisCredential{Value: "pw"}}
	if err := cl.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	heads := client.MatchingLabels{"ray.io/node-type": "head"}
	eventually(ctx, t, "the head Pod", func() bool { return len(pods(ctx, t, ns, heads)) == 1 }, describe(ctx, t, ns, c.Name))
	head := pods(ctx, t, ns, heads)[0]
	env := map[string]string{}
	for _, e := range head.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if head.Annotations[rayparams.AnnotationFTEnabled] != "true" || env[raycluster.EnvRedisAddress] != "redis:6379" ||
		env[raycluster.EnvRedisPassword] != "pw" || env[raycluster.EnvExternalStorageNS] != string(c.UID) {
		t.Errorf("head annotations %v, env %v", head.Annotations, env)
	}

	bad := sample(t, ns, 0)
	bad.Name = "both-ways"
	bad.Annotations = map[string]string{rayparams.AnnotationFTEnabled: "true"}
	bad.Spec.GcsFaultToleranceOptions = c.Spec.GcsFaultToleranceOptions
	if err := cl.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "a Warning saying both are set", func() bool {
		return hasEvent(ctx, ns, raycluster.EventInvalidSpec, bad.Name, "both set")
	}, describe(ctx, t, ns, bad.Name))
	if ps := pods(ctx, t, ns, client.MatchingLabels{"ray.io/cluster": bad.Name}); len(ps) != 0 {
		t.Errorf("an invalid cluster got Pods: %v", names(ps))
	}
}

// TestK8sTokenAuthUnsupportedNode: on a node whose pods cannot have files at Ray's fixed paths, a valid
// RayCluster with enableK8sTokenAuth gets the UnsupportedNode Warning saying why (not the invalid-spec
// one) and no Pods.
func TestK8sTokenAuthUnsupportedNode(t *testing.T) {
	ctx, ns := setup(t)
	c := sample(t, ns, 0)
	c.Name = "k8s-auth"
	c.Spec.RayVersion = "2.60.0"
	c.Spec.AuthOptions = &rayv1.AuthOptions{Mode: rayv1.AuthModeToken, EnableK8sTokenAuth: ptr.To(true)}
	if err := cl.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "the UnsupportedNode Warning naming the field", func() bool {
		return hasEvent(ctx, ns, raycluster.EventUnsupportedNode, c.Name, "authOptions.enableK8sTokenAuth")
	}, describe(ctx, t, ns, c.Name))
	if hasEvent(ctx, ns, raycluster.EventInvalidSpec, c.Name, "") {
		t.Error("a valid spec was reported invalid")
	}
	if ps := pods(ctx, t, ns, client.MatchingLabels{"ray.io/cluster": c.Name}); len(ps) != 0 {
		t.Errorf("a cluster this node cannot run got Pods: %v", names(ps))
	}
}

// TestRedisCleanupAtDeletion: a fault-tolerant RayCluster carries KubeRay's finalizer; deleted, it loses
// its Pods, then, once the head Pod is gone, gets the Redis cleanup Job, and goes once that Job has
// finished — with a Warning when the Job failed. (The test plays the kubelet, holding the head Pod with a
// finalizer while it "terminates", and the Job controller, writing the Job's outcome.)
func TestRedisCleanupAtDeletion(t *testing.T) {
	ctx, ns := setup(t)
	for _, outcome := range []batchv1.JobConditionType{batchv1.JobComplete, batchv1.JobFailed} {
		name := "ft-" + strings.ToLower(string(outcome))
		c := sample(t, ns, 0)
		c.Name = name
		c.Spec.GcsFaultToleranceOptions = &rayv1.GcsFaultToleranceOptions{RedisAddress: "redis:6379"}
		if err := cl.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		heads := client.MatchingLabels{"ray.io/cluster": name, "ray.io/node-type": "head"}
		eventually(ctx, t, name+"'s finalizer and head Pod", func() bool {
			return slices.Contains(get(ctx, t, ns, name).Finalizers, rayparams.FinalizerRedisCleanup) && len(pods(ctx, t, ns, heads)) == 1
		}, describe(ctx, t, ns, name))

		// A finalizer of the test's holds the head Pod as a kubelet would while its containers stop.
		hold := pods(ctx, t, ns, heads)[0]
		base := hold.DeepCopy()
		hold.Finalizers = append(hold.Finalizers, "rayctl.io/test-hold")
		if err := cl.Patch(ctx, &hold, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
		if err := cl.Delete(ctx, c); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, name+"'s head Pod deleted", func() bool {
			hs := pods(ctx, t, ns, heads)
			return len(hs) == 1 && !hs[0].DeletionTimestamp.IsZero()
		}, describe(ctx, t, ns, name))
		job := &batchv1.Job{}
		jobKey := types.NamespacedName{Namespace: ns, Name: name + "-redis-cleanup"}
		if err := cl.Get(ctx, jobKey, job); !apierrors.IsNotFound(err) {
			t.Fatalf("the cleanup Job exists while the head Pod terminates: %v", err)
		}
		base = hold.DeepCopy()
		hold.Finalizers = nil
		if err := cl.Patch(ctx, &hold, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, name+"'s cleanup Job", func() bool { return cl.Get(ctx, jobKey, job) == nil }, describe(ctx, t, ns, name))
		// Events reach the API server from the recorder's own goroutine, after the write they tell of.
		eventually(ctx, t, "a "+raycluster.EventCreatedRedisCleanupJob+" event", func() bool {
			return hasEvent(ctx, ns, raycluster.EventCreatedRedisCleanupJob, name, jobKey.Name)
		}, describe(ctx, t, ns, name))
		now := metav1.Now()
		job.Status.StartTime = &now
		job.Status.CompletionTime = nil
		reason := "Done"
		if outcome == batchv1.JobFailed {
			reason = "BackoffLimitExceeded"
			job.Status.Failed = 1
			job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: reason, LastTransitionTime: now})
		} else {
			job.Status.Succeeded = 1
			job.Status.CompletionTime = &now
			job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: "CompletionsReached", LastTransitionTime: now})
		}
		job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{Type: outcome, Status: corev1.ConditionTrue, Reason: reason, LastTransitionTime: now})
		if err := cl.Status().Update(ctx, job); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, name+" gone", func() bool {
			return apierrors.IsNotFound(cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &rayv1.RayCluster{}))
		}, describe(ctx, t, ns, name))
		failedEvent := func() bool { return hasEvent(ctx, ns, raycluster.EventRedisCleanupFailed, name, "may remain in Redis") }
		if outcome == batchv1.JobFailed {
			eventually(ctx, t, "a "+raycluster.EventRedisCleanupFailed+" event", failedEvent, func() string { return "" })
		} else if failedEvent() {
			t.Errorf("%s event after a Job %s", raycluster.EventRedisCleanupFailed, outcome)
		}
	}

	// Fault tolerance turned on by the annotation and off again: the finalizer holds nothing to clean up.
	c := sample(t, ns, 0)
	c.Name = "ft-off"
	c.Annotations = map[string]string{rayparams.AnnotationFTEnabled: "true"}
	if err := cl.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "ft-off's finalizer", func() bool {
		return slices.Contains(get(ctx, t, ns, c.Name).Finalizers, rayparams.FinalizerRedisCleanup)
	}, describe(ctx, t, ns, c.Name))
	if err := update(ctx, ns, c.Name, func(c *rayv1.RayCluster) { delete(c.Annotations, rayparams.AnnotationFTEnabled) }); err != nil {
		t.Fatal(err)
	}
	if err := cl.Delete(ctx, get(ctx, t, ns, c.Name)); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "ft-off gone", func() bool {
		return apierrors.IsNotFound(cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: c.Name}, &rayv1.RayCluster{}))
	}, describe(ctx, t, ns, c.Name))
}

// hasEvent says whether ns has an event of reason about the object named name whose message holds text.
func hasEvent(ctx context.Context, ns, reason, name, text string) bool {
	var ev corev1.EventList
	_ = cl.List(ctx, &ev, client.InNamespace(ns))
	for _, e := range ev.Items {
		if e.Reason == reason && e.InvolvedObject.Name == name && strings.Contains(e.Message, text) {
			return true
		}
	}
	return false
}
