package gc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/rayctl/rayctl/pkg/controllers/kube/gc"
	"github.com/rayctl/rayctl/test/e2e/framework"
)

var (
	in  *framework.Instance
	dyn dynamic.Interface
)

func TestMain(m *testing.M) {
	framework.RunMain(m, "garbage collector", func(i *framework.Instance) (func(context.Context) error, error) {
		in, dyn = i, dynamic.NewForConfigOrDie(i.Config)
		return func(ctx context.Context) error { return gc.Run(ctx, in.Config) }, nil
	})
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
	f := &fixture{ns: in.NewNamespace(t, ctx, "gc-"), service: "head-svc", pods: []string{"head", "worker"}}
	var err error
	f.owner, err = dyn.Resource(framework.RayClusters).Namespace(f.ns).Create(ctx, framework.RayCluster("rc"), metav1.CreateOptions{})
	framework.Must(t, "creating the RayCluster", err)
	ref := ownerRef(f.owner, block)
	for _, name := range f.pods {
		_, err := c.CoreV1().Pods(f.ns).Create(ctx, unscheduledPod(name, ref), metav1.CreateOptions{})
		framework.Must(t, "creating pod "+name, err)
	}
	_, err = c.CoreV1().Services(f.ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: f.service, OwnerReferences: []metav1.OwnerReference{ref}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8265}}},
	}, metav1.CreateOptions{})
	framework.Must(t, "creating the service", err)
	return f
}

func (f *fixture) deleteOwner(t *testing.T, ctx context.Context, policy metav1.DeletionPropagation) {
	t.Helper()
	framework.Must(t, "deleting the RayCluster", dyn.Resource(framework.RayClusters).Namespace(f.ns).Delete(ctx, f.owner.GetName(), metav1.DeleteOptions{PropagationPolicy: &policy}))
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
	ctx := framework.TestContext(t, 90*time.Second)
	f := newFixture(t, ctx, false)
	f.deleteOwner(t, ctx, metav1.DeletePropagationBackground)
	framework.WaitFor(t, ctx, "the RayCluster's pods and service to be collected", func() (bool, error) {
		deps, err := f.dependents(ctx)
		return len(deps) == 0, err
	})
}

func TestForegroundDeletionKeepsOwnerUntilDependentsGo(t *testing.T) {
	t.Parallel()
	ctx := framework.TestContext(t, 90*time.Second)
	f := newFixture(t, ctx, true)
	// A dependent that a finalizer of its own keeps around for a while.
	const hold = "e2e.rayctl.io/hold"
	held := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "held", Finalizers: []string{hold}, OwnerReferences: []metav1.OwnerReference{ownerRef(f.owner, true)},
	}}
	_, err := in.Client.CoreV1().ConfigMaps(f.ns).Create(ctx, held, metav1.CreateOptions{})
	framework.Must(t, "creating the held configmap", err)

	f.deleteOwner(t, ctx, metav1.DeletePropagationForeground)
	framework.WaitFor(t, ctx, "the pods and service to be collected, the held configmap to be deleting", func() (bool, error) {
		deps, err := f.dependents(ctx)
		if err != nil || len(deps) > 0 {
			return false, err
		}
		cm, err := in.Client.CoreV1().ConfigMaps(f.ns).Get(ctx, "held", metav1.GetOptions{})
		return err == nil && cm.DeletionTimestamp != nil, err
	})
	time.Sleep(time.Second)
	owner, err := dyn.Resource(framework.RayClusters).Namespace(f.ns).Get(ctx, f.owner.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the RayCluster went before its blocking dependent: %v", err)
	}
	if owner.GetDeletionTimestamp() == nil || !contains(owner.GetFinalizers(), metav1.FinalizerDeleteDependents) {
		t.Errorf("the RayCluster is not waiting in foreground deletion: deletionTimestamp %v, finalizers %v", owner.GetDeletionTimestamp(), owner.GetFinalizers())
	}

	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": nil}})
	_, err = in.Client.CoreV1().ConfigMaps(f.ns).Patch(ctx, "held", types.MergePatchType, patch, metav1.PatchOptions{})
	framework.Must(t, "releasing the held configmap", err)
	framework.WaitFor(t, ctx, "the RayCluster to be gone once its last dependent went", func() (bool, error) {
		_, err := dyn.Resource(framework.RayClusters).Namespace(f.ns).Get(ctx, f.owner.GetName(), metav1.GetOptions{})
		return apierrors.IsNotFound(err), framework.IgnoreNotFound(err)
	})
}

func TestOrphanDeletionLeavesDependents(t *testing.T) {
	t.Parallel()
	ctx := framework.TestContext(t, 90*time.Second)
	f := newFixture(t, ctx, true)
	f.deleteOwner(t, ctx, metav1.DeletePropagationOrphan)
	framework.WaitFor(t, ctx, "the RayCluster to be gone", func() (bool, error) {
		_, err := dyn.Resource(framework.RayClusters).Namespace(f.ns).Get(ctx, f.owner.GetName(), metav1.GetOptions{})
		return apierrors.IsNotFound(err), framework.IgnoreNotFound(err)
	})
	deps, err := f.dependents(ctx)
	framework.Must(t, "reading the dependents", err)
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
	ctx := framework.TestContext(t, 90*time.Second)
	c := in.Client
	ns := in.NewNamespace(t, ctx, "gc-")
	job, err := c.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "pi"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "main", Image: "busybox:1.36"}},
		}}},
	}, metav1.CreateOptions{})
	framework.Must(t, "creating the job", err)
	ref := *metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))
	for i := range 3 {
		_, err := c.CoreV1().Pods(ns).Create(ctx, unscheduledPod(fmt.Sprintf("pi-%d", i), ref), metav1.CreateOptions{})
		framework.Must(t, "creating a pod", err)
	}
	policy := metav1.DeletePropagationBackground
	framework.Must(t, "deleting the job", c.BatchV1().Jobs(ns).Delete(ctx, "pi", metav1.DeleteOptions{PropagationPolicy: &policy}))
	framework.WaitFor(t, ctx, "the job's pods to be collected", func() (bool, error) {
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, err
	})
}

func TestOwnerRecreatedUnderSameNameCountsAsGone(t *testing.T) {
	t.Parallel()
	ctx := framework.TestContext(t, 90*time.Second)
	c := in.Client
	ns := in.NewNamespace(t, ctx, "gc-")
	owner, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	framework.Must(t, "creating the owner", err)
	// A dependent of an earlier incarnation of "owner", and one of the current one.
	stale := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: types.UID("00000000-0000-0000-0000-000000000001")}
	current := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: owner.UID}
	for name, ref := range map[string]metav1.OwnerReference{"stale": stale, "current": current} {
		_, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{ref}}}, metav1.CreateOptions{})
		framework.Must(t, "creating "+name, err)
	}
	// Two owners, one gone: the reference to the gone one is dropped, the object kept.
	_, err = c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "both", OwnerReferences: []metav1.OwnerReference{stale, current}}}, metav1.CreateOptions{})
	framework.Must(t, "creating both", err)

	framework.WaitFor(t, ctx, "the dependent of the old owner to be collected", func() (bool, error) {
		_, err := c.CoreV1().ConfigMaps(ns).Get(ctx, "stale", metav1.GetOptions{})
		return apierrors.IsNotFound(err), framework.IgnoreNotFound(err)
	})
	framework.WaitFor(t, ctx, "the reference to the old owner to be dropped", func() (bool, error) {
		cm, err := c.CoreV1().ConfigMaps(ns).Get(ctx, "both", metav1.GetOptions{})
		return err == nil && len(cm.OwnerReferences) == 1 && cm.OwnerReferences[0].UID == owner.UID, err
	})
	if _, err := c.CoreV1().ConfigMaps(ns).Get(ctx, "current", metav1.GetOptions{}); err != nil {
		t.Errorf("the dependent of the existing owner: %v", err)
	}
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

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
