package gc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/rayctl/rayctl/pkg/controllers/gc"
	"github.com/rayctl/rayctl/test/e2e/framework"
)

var (
	in  *framework.Instance
	dyn dynamic.Interface
)

var rayClusters = schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayclusters"}

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	var err error
	if in, err = framework.Start("", framework.ControlPlaneOnly()...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(in.DataDir)
	defer in.Stop()
	dyn = dynamic.NewForConfigOrDie(in.Config)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- gc.Run(ctx, in.Config) }()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "garbage collector:", err)
		return 1
	}
	return code
}

// fixture is a namespace with a RayCluster owning two pods and a service, as the RayCluster
// controller would set them up.
type fixture struct {
	ns      string
	owner   *unstructured.Unstructured
	pods    []string
	service string
}

func newFixture(t *testing.T, ctx context.Context, block bool) *fixture {
	t.Helper()
	c := in.Client
	f := &fixture{ns: newNamespace(t, ctx), service: "head-svc", pods: []string{"head", "worker"}}
	var err error
	f.owner, err = dyn.Resource(rayClusters).Namespace(f.ns).Create(ctx, rayCluster("rc"), metav1.CreateOptions{})
	must(t, "creating the RayCluster", err)
	ref := ownerRef(f.owner, block)
	for _, name := range f.pods {
		_, err := c.CoreV1().Pods(f.ns).Create(ctx, unscheduledPod(name, ref), metav1.CreateOptions{})
		must(t, "creating pod "+name, err)
	}
	_, err = c.CoreV1().Services(f.ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: f.service, OwnerReferences: []metav1.OwnerReference{ref}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8265}}},
	}, metav1.CreateOptions{})
	must(t, "creating the service", err)
	return f
}

func (f *fixture) deleteOwner(t *testing.T, ctx context.Context, policy metav1.DeletionPropagation) {
	t.Helper()
	must(t, "deleting the RayCluster", dyn.Resource(rayClusters).Namespace(f.ns).Delete(ctx, f.owner.GetName(), metav1.DeleteOptions{PropagationPolicy: &policy}))
}

// dependents returns the fixture's pods and service that still exist.
func (f *fixture) dependents(ctx context.Context) ([]metav1.Object, error) {
	var out []metav1.Object
	for _, name := range f.pods {
		p, err := in.Client.CoreV1().Pods(f.ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			out = append(out, p)
		} else if !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	s, err := in.Client.CoreV1().Services(f.ns).Get(ctx, f.service, metav1.GetOptions{})
	if err == nil {
		out = append(out, s)
	} else if !apierrors.IsNotFound(err) {
		return nil, err
	}
	return out, nil
}

func TestBackgroundDeletionCollectsDependents(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	f := newFixture(t, ctx, false)
	f.deleteOwner(t, ctx, metav1.DeletePropagationBackground)
	waitFor(t, ctx, "the RayCluster's pods and service to be collected", func() (bool, error) {
		deps, err := f.dependents(ctx)
		return len(deps) == 0, err
	})
}

func TestForegroundDeletionKeepsOwnerUntilDependentsGo(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	f := newFixture(t, ctx, true)
	// A dependent that a finalizer of its own keeps around for a while.
	const hold = "e2e.rayctl.io/hold"
	held := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "held", Finalizers: []string{hold}, OwnerReferences: []metav1.OwnerReference{ownerRef(f.owner, true)},
	}}
	_, err := in.Client.CoreV1().ConfigMaps(f.ns).Create(ctx, held, metav1.CreateOptions{})
	must(t, "creating the held configmap", err)

	f.deleteOwner(t, ctx, metav1.DeletePropagationForeground)
	waitFor(t, ctx, "the pods and service to be collected, the held configmap to be deleting", func() (bool, error) {
		deps, err := f.dependents(ctx)
		if err != nil || len(deps) > 0 {
			return false, err
		}
		cm, err := in.Client.CoreV1().ConfigMaps(f.ns).Get(ctx, "held", metav1.GetOptions{})
		return err == nil && cm.DeletionTimestamp != nil, err
	})
	time.Sleep(time.Second)
	owner, err := dyn.Resource(rayClusters).Namespace(f.ns).Get(ctx, f.owner.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the RayCluster went before its blocking dependent: %v", err)
	}
	if owner.GetDeletionTimestamp() == nil || !contains(owner.GetFinalizers(), metav1.FinalizerDeleteDependents) {
		t.Errorf("the RayCluster is not waiting in foreground deletion: deletionTimestamp %v, finalizers %v", owner.GetDeletionTimestamp(), owner.GetFinalizers())
	}

	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": nil}})
	_, err = in.Client.CoreV1().ConfigMaps(f.ns).Patch(ctx, "held", types.MergePatchType, patch, metav1.PatchOptions{})
	must(t, "releasing the held configmap", err)
	waitFor(t, ctx, "the RayCluster to be gone once its last dependent went", func() (bool, error) {
		_, err := dyn.Resource(rayClusters).Namespace(f.ns).Get(ctx, f.owner.GetName(), metav1.GetOptions{})
		return apierrors.IsNotFound(err), ignoreNotFound(err)
	})
}

func TestOrphanDeletionLeavesDependents(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	f := newFixture(t, ctx, true)
	f.deleteOwner(t, ctx, metav1.DeletePropagationOrphan)
	waitFor(t, ctx, "the RayCluster to be gone", func() (bool, error) {
		_, err := dyn.Resource(rayClusters).Namespace(f.ns).Get(ctx, f.owner.GetName(), metav1.GetOptions{})
		return apierrors.IsNotFound(err), ignoreNotFound(err)
	})
	deps, err := f.dependents(ctx)
	must(t, "reading the dependents", err)
	if len(deps) != len(f.pods)+1 {
		t.Fatalf("%d of %d dependents survived orphaning", len(deps), len(f.pods)+1)
	}
	for _, d := range deps {
		if len(d.GetOwnerReferences()) != 0 {
			t.Errorf("%s still has ownerReferences %v", d.GetName(), d.GetOwnerReferences())
		}
	}
	// And they stay.
	time.Sleep(time.Second)
	if deps, err := f.dependents(ctx); err != nil || len(deps) != len(f.pods)+1 {
		t.Errorf("orphaned dependents were collected later: %d left (%v)", len(deps), err)
	}
}

func TestJobPodsCollectedWithJob(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	c := in.Client
	ns := newNamespace(t, ctx)
	job, err := c.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "pi"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "main", Image: "busybox:1.36"}},
		}}},
	}, metav1.CreateOptions{})
	must(t, "creating the job", err)
	ref := *metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))
	for i := range 3 {
		_, err := c.CoreV1().Pods(ns).Create(ctx, unscheduledPod(fmt.Sprintf("pi-%d", i), ref), metav1.CreateOptions{})
		must(t, "creating a pod", err)
	}
	policy := metav1.DeletePropagationBackground
	must(t, "deleting the job", c.BatchV1().Jobs(ns).Delete(ctx, "pi", metav1.DeleteOptions{PropagationPolicy: &policy}))
	waitFor(t, ctx, "the job's pods to be collected", func() (bool, error) {
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, err
	})
}

func TestOwnerRecreatedUnderSameNameCountsAsGone(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	c := in.Client
	ns := newNamespace(t, ctx)
	owner, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	must(t, "creating the owner", err)
	// A dependent of an earlier incarnation of "owner", and one of the current one.
	stale := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: types.UID("00000000-0000-0000-0000-000000000001")}
	current := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: owner.UID}
	for name, ref := range map[string]metav1.OwnerReference{"stale": stale, "current": current} {
		_, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{ref}}}, metav1.CreateOptions{})
		must(t, "creating "+name, err)
	}
	// Two owners, one gone: the reference to the gone one is dropped, the object kept.
	_, err = c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "both", OwnerReferences: []metav1.OwnerReference{stale, current}}}, metav1.CreateOptions{})
	must(t, "creating both", err)

	waitFor(t, ctx, "the dependent of the old owner to be collected", func() (bool, error) {
		_, err := c.CoreV1().ConfigMaps(ns).Get(ctx, "stale", metav1.GetOptions{})
		return apierrors.IsNotFound(err), ignoreNotFound(err)
	})
	waitFor(t, ctx, "the reference to the old owner to be dropped", func() (bool, error) {
		cm, err := c.CoreV1().ConfigMaps(ns).Get(ctx, "both", metav1.GetOptions{})
		return err == nil && len(cm.OwnerReferences) == 1 && cm.OwnerReferences[0].UID == owner.UID, err
	})
	if _, err := c.CoreV1().ConfigMaps(ns).Get(ctx, "current", metav1.GetOptions{}); err != nil {
		t.Errorf("the dependent of the existing owner: %v", err)
	}
}

func rayCluster(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ray.io/v1",
		"kind":       "RayCluster",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"headGroupSpec": map[string]any{
				"rayStartParams": map[string]any{},
				"template": map[string]any{"spec": map[string]any{
					"containers": []any{map[string]any{"name": "ray-head", "image": "rayproject/ray:2.46.0"}},
				}},
			},
		},
	}}
}

func ownerRef(o *unstructured.Unstructured, block bool) metav1.OwnerReference {
	t := true
	return metav1.OwnerReference{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Name: o.GetName(), UID: o.GetUID(), Controller: &t, BlockOwnerDeletion: &block}
}

// unscheduledPod is a pod no scheduler binds, so that it is deleted at once.
func unscheduledPod(name string, owner metav1.OwnerReference) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{owner}},
		Spec:       corev1.PodSpec{SchedulerName: "no-such-scheduler", Containers: []corev1.Container{{Name: "main", Image: "busybox:1.36"}}},
	}
}

func newNamespace(t *testing.T, ctx context.Context) string {
	t.Helper()
	ns, err := in.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "gc-"}}, metav1.CreateOptions{})
	must(t, "creating a namespace", err)
	return ns.Name
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func waitFor(t *testing.T, ctx context.Context, what string, cond func() (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		ok, err := cond()
		if err != nil {
			last = err
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not in time (last error: %v)", what, last)
	}
}
