// Package e2e holds the end-to-end tests of the control plane: they start `rayctl up` as a separate process
// (see package framework) and drive it the way users do, with client-go, raw HTTPS and the built-in kubectl.
//
// Most tests share one instance, started on first use, each in its own namespace so that they run in
// parallel; lifecycle tests (restart, kill -9, detach/down) start instances of their own.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

var (
	sharedOnce sync.Once
	sharedInst *framework.Instance
	sharedErr  error
)

func TestMain(m *testing.M) {
	if addrs := os.Getenv(probeEnv); addrs != "" {
		os.Exit(probeMain(addrs))
	}
	code := m.Run()
	if sharedInst != nil {
		if err := sharedInst.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the shared rayctl:", err)
		}
		if code != 0 {
			if b, err := os.ReadFile(sharedInst.DataDir + "/rayctl.log"); err == nil {
				if len(b) > 8000 {
					b = b[len(b)-8000:]
				}
				fmt.Fprintf(os.Stderr, "shared rayctl.log tail:\n%s\n", b)
			}
		}
		if err := sharedInst.Purge(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		if left := framework.KillLeftoverShims(sharedInst.DataDir); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "after the purge, containerd shims of the shared instance still ran (killed now): %s\n", strings.Join(left, "; "))
			if code == 0 {
				code = 1
			}
		}
		os.RemoveAll(sharedInst.DataDir)
	}
	os.Exit(code)
}

// sharedCapacity is what the shared instance's Node advertises. That one Node holds the pods of every
// parallel test at once (the KubeRay samples ask 1 CPU a head, and every worker's wait-gcs-ready init
// container 200m), so on a 2-core runner the machine's own capacity made tests wait on each other's pods
// for scheduling, not on anything they test. Scheduling by capacity is tested on an instance of its own
// (TestNodeCapacity); a test that wants Insufficient cpu here asks for more than this.
const sharedCapacity = "cpu=64,memory=64Gi"

// shared returns the instance most tests share, starting it on first use.
func shared(t *testing.T) *framework.Instance {
	t.Helper()
	sharedOnce.Do(func() { sharedInst, sharedErr = framework.Start("", "--node-capacity", sharedCapacity) })
	if sharedErr != nil {
		t.Fatalf("starting the shared rayctl: %v", sharedErr)
	}
	return sharedInst
}

// withoutRootCA drops from items the kube-root-ca.crt ConfigMap that every namespace holds (the cluster's
// CA, for in-cluster clients), leaving the ConfigMaps a test made.
func withoutRootCA(items []corev1.ConfigMap) []corev1.ConfigMap {
	return slices.DeleteFunc(slices.Clone(items), func(cm corev1.ConfigMap) bool { return cm.Name == "kube-root-ca.crt" })
}

// testContext is the test's context with a deadline, so that no test hangs on a dead server.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// setup marks the test parallel and returns the shared instance, a context and a fresh namespace.
func setup(t *testing.T) (*framework.Instance, context.Context, string) {
	t.Helper()
	t.Parallel()
	in := shared(t)
	ctx := testContext(t)
	return in, ctx, newNamespace(t, ctx, in)
}

// newNamespace creates a namespace with a generated name for one test.
func newNamespace(t *testing.T, ctx context.Context, in *framework.Instance) string {
	t.Helper()
	ns, err := in.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-", Labels: map[string]string{"e2e.rayctl.io/test": "true"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	return ns.Name
}

// namespacePublished waits until the controllers have published what every new namespace gets a
// moment after it is made, as on a cluster: the kube-root-ca.crt ConfigMap and the default
// ServiceAccount. A test that compares a namespace's lists, or watches them, waits first so that
// neither shows up in the middle.
func namespacePublished(t *testing.T, ctx context.Context, in *framework.Instance, ns string) {
	t.Helper()
	eventually(t, ctx, time.Minute, "kube-root-ca.crt and the default ServiceAccount published in "+ns, func(ctx context.Context) (bool, error) {
		if _, err := in.Client.CoreV1().ConfigMaps(ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{}); err != nil {
			return false, err
		}
		_, err := in.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, err
	})
}

// expectStatus fails the test unless err is an API error with the given HTTP code whose message or causes
// mention every one of wants (field paths, for instance).
func expectStatus(t *testing.T, what string, err error, code int32, wants ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: succeeded, want HTTP %d", what, code)
		return
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		t.Errorf("%s: got %v (not an API status), want HTTP %d", what, err, code)
		return
	}
	if got := status.Status().Code; got != code {
		t.Errorf("%s: got HTTP %d (%v), want %d", what, got, err, code)
		return
	}
	text := statusText(status.Status())
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("%s: error %q does not mention %q", what, text, w)
		}
	}
}

// statusText is a Status's message and its causes' fields and messages, for matching.
func statusText(s metav1.Status) string {
	var b strings.Builder
	b.WriteString(s.Message)
	if s.Details != nil {
		for _, c := range s.Details.Causes {
			fmt.Fprintf(&b, "\n%s: %s", c.Field, c.Message)
		}
	}
	return b.String()
}

// eventually polls cond every 50 ms until it reports true, failing the test after timeout.
func eventually(t *testing.T, ctx context.Context, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil {
			last = err
			return false, nil
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %s (last error: %v)", what, timeout, last)
	}
}

// quiet is cfg without the printing of server warnings (deprecated kinds, unknown fields pruned), for
// tests that provoke them on purpose.
func quiet(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.WarningHandler = rest.NoWarnings{}
	return c
}

// must fails the test at once on err.
func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// Nodes that no kubelet runs: pods bound to them stay as the API server leaves them.
const (
	fakeNode = "e2e-node-a"
	// noScheduler is a scheduler that does not exist, so that unscheduled test pods stay unscheduled
	// even when a binder runs.
	noScheduler = "e2e-no-scheduler"
)

// podSpec is a minimal pod spec with one container.
func podSpec(image string) corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: image}}}
}

// boundPod is a pod already bound to fakeNode.
func boundPod(name string) *corev1.Pod {
	spec := podSpec("busybox:1.36")
	spec.NodeName = fakeNode
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}

// unscheduledPod is a pod no scheduler will bind.
func unscheduledPod(name string) *corev1.Pod {
	spec := podSpec("busybox:1.36")
	spec.SchedulerName = noScheduler
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}
