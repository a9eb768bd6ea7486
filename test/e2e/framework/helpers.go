package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// RunMain is the whole of a TestMain for a package whose tests share one instance started with
// ControlPlaneOnly and run their own controllers against it. After the instance is ready, setup is called
// with it (to keep it and to build what the tests need) and returns what runs in the background while the
// tests run, until its context is canceled; name labels that function's error. A failure to start, a
// setup error or a background error fails the run. RunMain does not return: it exits with the result.
func RunMain(m *testing.M, name string, setup func(in *Instance) (run func(ctx context.Context) error, err error)) {
	os.Exit(runMain(m, name, setup))
}

func runMain(m *testing.M, name string, setup func(in *Instance) (func(context.Context) error, error)) int {
	in, err := Start("", ControlPlaneOnly()...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(in.DataDir)
	defer in.Stop()
	run, err := setup(in)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_, stop := background(run)
	code := m.Run()
	if errs := stop(); len(errs) > 0 {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, errs[0])
		return 1
	}
	return code
}

// StartTest starts an instance for one test (skipped under -short) with extraArgs, and removes it when
// the test ends.
func StartTest(t testing.TB, extraArgs ...string) *Instance {
	t.Helper()
	if testing.Short() {
		t.Skip("starts rayctl up")
	}
	in, err := Start("", extraArgs...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Cleanup(t) })
	return in
}

// RunDuringTest runs each of runs in its own goroutine with the returned context until t ends; then the
// context is canceled, and each run is waited for and fails t if it returned an error.
func RunDuringTest(t testing.TB, runs ...func(ctx context.Context) error) context.Context {
	ctx, stop := background(runs...)
	t.Cleanup(func() {
		for _, err := range stop() {
			t.Error(err)
		}
	})
	return ctx
}

// background runs each of runs in a goroutine with one new context. stop cancels it, waits for every run
// to return and gives the errors they returned.
func background(runs ...func(ctx context.Context) error) (ctx context.Context, stop func() []error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, len(runs))
	for _, run := range runs {
		go func() { done <- run(ctx) }()
	}
	return ctx, func() []error {
		cancel()
		var errs []error
		for range runs {
			if err := <-done; err != nil {
				errs = append(errs, err)
			}
		}
		return errs
	}
}

// TestContext is the test's context, ended after timeout at the latest.
func TestContext(t testing.TB, timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	return ctx
}

// WaitFor checks cond every 50ms until it holds, and fails t if ctx ends first, with the last error cond
// returned (errors do not stop the wait).
func WaitFor(t testing.TB, ctx context.Context, what string, cond func() (bool, error)) {
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

// Must fails t at once if err is not nil; what says what was being done.
func Must(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// IgnoreNotFound is nil for a NotFound error, else err.
func IgnoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// NewNamespace creates a namespace with a name generated from prefix (e.g. "gc-") and returns the name.
func (in *Instance) NewNamespace(t testing.TB, ctx context.Context, prefix string) string {
	t.Helper()
	ns, err := in.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}, metav1.CreateOptions{})
	Must(t, "creating a namespace", err)
	return ns.Name
}

// SetPodRunning plays the kubelet for a pod on a node none serves: it writes the pod's status as
// running with ip, ready or not.
func SetPodRunning(t testing.TB, ctx context.Context, c kubernetes.Interface, namespace, name, ip string, ready bool) {
	t.Helper()
	r := corev1.ConditionFalse
	if ready {
		r = corev1.ConditionTrue
	}
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{
		"phase": corev1.PodRunning, "podIP": ip, "podIPs": []map[string]string{{"ip": ip}},
		"conditions": []map[string]any{{"type": corev1.PodReady, "status": r}},
	}})
	if _, err := c.CoreV1().Pods(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
}

// RayClusters is the RayCluster resource, for dynamic clients.
var RayClusters = schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayclusters"}

// RayCluster is the smallest RayCluster the schema accepts: a head group of one container.
func RayCluster(name string) *unstructured.Unstructured {
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

// SilentServer is an HTTP server on 127.0.0.1 that takes every request and never answers it (a hung
// server) until the test ends; it returns the address (host:port).
func SilentServer(t testing.TB) string {
	t.Helper()
	ended := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-ended }))
	t.Cleanup(func() { close(ended); srv.Close() })
	return srv.Listener.Addr().String()
}
