package namespace_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/rayctl/rayctl/pkg/controllers/namespace"
	"github.com/rayctl/rayctl/test/e2e/framework"
)

var in *framework.Instance

// conditionsReported matches the controller's ReportConditions in this test.
const conditionsReported = true

var rayClusters = schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayclusters"}

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctrl.SetLogger(logr.Discard())
	var err error
	if in, err = framework.Start("", framework.ControlPlaneOnly()...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(in.DataDir)
	defer in.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- namespace.Run(ctx, in.Config) }()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "controller:", err)
		return 1
	}
	return code
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

func TestDeleteNamespaceRemovesContent(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := in.Client
	dyn := dynamic.NewForConfigOrDie(in.Config)
	ns := newNamespace(t, ctx)

	must(t, "configmap", create(c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"a": "b"}}, metav1.CreateOptions{})))
	must(t, "pod", create(c.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pod"},
		Spec:       corev1.PodSpec{SchedulerName: "no-such-scheduler", Containers: []corev1.Container{{Name: "main", Image: "busybox:1.36"}}},
	}, metav1.CreateOptions{})))
	must(t, "service", create(c.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "svc"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})))
	must(t, "raycluster", create(dyn.Resource(rayClusters).Namespace(ns).Create(ctx, rayCluster("rc"), metav1.CreateOptions{})))

	// kubectl waits until the namespace is gone.
	if out, stderr, err := in.Kubectl(ctx, "", "delete", "namespace", ns, "--timeout=60s"); err != nil {
		t.Fatalf("kubectl delete namespace: %v\n%s%s", err, out, stderr)
	}
	if _, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("namespace after kubectl delete: got %v, want NotFound", err)
	}
	cms, err := c.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	must(t, "listing configmaps", err)
	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	must(t, "listing pods", err)
	svcs, err := c.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	must(t, "listing services", err)
	rcs, err := dyn.Resource(rayClusters).Namespace(ns).List(ctx, metav1.ListOptions{})
	must(t, "listing rayclusters", err)
	if n := len(cms.Items) + len(pods.Items) + len(svcs.Items) + len(rcs.Items); n != 0 {
		t.Errorf("%d objects survived their namespace: %d configmaps, %d pods, %d services, %d rayclusters",
			n, len(cms.Items), len(pods.Items), len(svcs.Items), len(rcs.Items))
	}

	// The name can be used again at once.
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("recreating namespace %s: %v", ns, err)
	}
	must(t, "deleting the recreated namespace", c.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}))
}

func TestFinalizerHoldsNamespace(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := in.Client
	ns := newNamespace(t, ctx)
	const hold = "e2e.rayctl.io/hold"
	must(t, "configmap", create(c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{hold}},
	}, metav1.CreateOptions{})))
	must(t, "deleting the namespace", c.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}))

	// The controller deletes the content, but the namespace stays Terminating while some remains.
	waitFor(t, ctx, "the held configmap to be deleted", func() (bool, error) {
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
	must(t, "releasing the finalizer", create(c.CoreV1().ConfigMaps(ns).Patch(ctx, "held", types.MergePatchType, patch, metav1.PatchOptions{})))
	waitFor(t, ctx, "the namespace to be gone", func() (bool, error) {
		_, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), ignoreNotFound(err)
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

func newNamespace(t *testing.T, ctx context.Context) string {
	t.Helper()
	ns, err := in.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "ns-"}}, metav1.CreateOptions{})
	must(t, "creating a namespace", err)
	return ns.Name
}

func create[T any](_ T, err error) error { return err }

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
