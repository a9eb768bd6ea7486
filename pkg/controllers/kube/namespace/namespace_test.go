package namespace_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/rayctl/rayctl/pkg/controllers/kube/namespace"
	"github.com/rayctl/rayctl/test/e2e/framework"
)

var in *framework.Instance

// conditionsReported matches the controller's reportConditions in this test.
const conditionsReported = true

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	framework.RunMain(m, "controller", func(i *framework.Instance) (func(context.Context) error, error) {
		in = i
		return func(ctx context.Context) error { return namespace.Run(ctx, in.Config) }, nil
	})
}

func TestDeleteNamespaceRemovesContent(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := in.Client
	dyn := dynamic.NewForConfigOrDie(in.Config)
	ns := in.NewNamespace(t, ctx, "ns-")

	framework.Must(t, "configmap", create(c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"a": "b"}}, metav1.CreateOptions{})))
	framework.Must(t, "pod", create(c.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pod"},
		Spec:       corev1.PodSpec{SchedulerName: "no-such-scheduler", Containers: []corev1.Container{{Name: "main", Image: "busybox:1.36"}}},
	}, metav1.CreateOptions{})))
	framework.Must(t, "service", create(c.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "svc"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})))
	framework.Must(t, "raycluster", create(dyn.Resource(framework.RayClusters).Namespace(ns).Create(ctx, framework.RayCluster("rc"), metav1.CreateOptions{})))

	// kubectl waits until the namespace is gone.
	if out, stderr, err := in.Kubectl(ctx, "", "delete", "namespace", ns, "--timeout=60s"); err != nil {
		t.Fatalf("kubectl delete namespace: %v\n%s%s", err, out, stderr)
	}
	if _, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("namespace after kubectl delete: got %v, want NotFound", err)
	}
	cms, err := c.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	framework.Must(t, "listing configmaps", err)
	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	framework.Must(t, "listing pods", err)
	svcs, err := c.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	framework.Must(t, "listing services", err)
	rcs, err := dyn.Resource(framework.RayClusters).Namespace(ns).List(ctx, metav1.ListOptions{})
	framework.Must(t, "listing rayclusters", err)
	if n := len(cms.Items) + len(pods.Items) + len(svcs.Items) + len(rcs.Items); n != 0 {
		t.Errorf("%d objects survived their namespace: %d configmaps, %d pods, %d services, %d rayclusters",
			n, len(cms.Items), len(pods.Items), len(svcs.Items), len(rcs.Items))
	}

	// The name can be used again at once.
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("recreating namespace %s: %v", ns, err)
	}
	framework.Must(t, "deleting the recreated namespace", c.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}))
}

func TestFinalizerHoldsNamespace(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := in.Client
	ns := in.NewNamespace(t, ctx, "ns-")
	const hold = "e2e.rayctl.io/hold"
	framework.Must(t, "configmap", create(c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{hold}},
	}, metav1.CreateOptions{})))
	framework.Must(t, "deleting the namespace", c.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}))

	// The controller deletes the content, but the namespace stays Terminating while some remains.
	framework.WaitFor(t, ctx, "the held configmap to be deleted", func() (bool, error) {
		cm, err := c.CoreV1().ConfigMaps(ns).Get(ctx, "held", metav1.GetOptions{})
		return err == nil && cm.DeletionTimestamp != nil, err
	})
	time.Sleep(2 * time.Second) // more than one recheck
	got, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the namespace went away while content remained: %v", err)
	}
	if got.Status.Phase != corev1.NamespaceTerminating {
		t.Errorf("namespace phase %q, want Terminating", got.Status.Phase)
	}
	if conditionsReported {
		remaining := condition(got, corev1.NamespaceContentRemaining)
		fin := condition(got, corev1.NamespaceFinalizersRemaining)
		if remaining == nil || remaining.Status != corev1.ConditionTrue || !strings.Contains(remaining.Message, "configmaps") ||
			fin == nil || fin.Status != corev1.ConditionTrue || !strings.Contains(fin.Message, hold) {
			t.Errorf("namespace conditions do not name the remaining content and finalizer: %+v", got.Status.Conditions)
		}
	}

	// Releasing the finalizer lets the namespace go.
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": nil}})
	framework.Must(t, "releasing the finalizer", create(c.CoreV1().ConfigMaps(ns).Patch(ctx, "held", types.MergePatchType, patch, metav1.PatchOptions{})))
	framework.WaitFor(t, ctx, "the namespace to be gone", func() (bool, error) {
		_, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), framework.IgnoreNotFound(err)
	})
}

func condition(ns *corev1.Namespace, t corev1.NamespaceConditionType) *corev1.NamespaceCondition {
	for i := range ns.Status.Conditions {
		if ns.Status.Conditions[i].Type == t {
			return &ns.Status.Conditions[i]
		}
	}
	return nil
}

func create[T any](_ T, err error) error { return err }
