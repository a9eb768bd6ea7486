package kubelet_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/rayctl/rayctl/pkg/kubelet"
	"github.com/rayctl/rayctl/pkg/kubelet/podworker"
	"github.com/rayctl/rayctl/pkg/runtime/fake"
	"github.com/rayctl/rayctl/test/e2e/framework"
)

var (
	sharedOnce sync.Once
	sharedInst *framework.Instance
	sharedErr  error
	nameSeq    atomic.Int64
)

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedInst != nil {
		_ = sharedInst.Stop()
		os.RemoveAll(sharedInst.DataDir)
	}
	os.Exit(code)
}

// apiServer returns the `rayctl up` shared by this package's tests.
func apiServer(t *testing.T) *framework.Instance {
	t.Helper()
	sharedOnce.Do(func() { sharedInst, sharedErr = framework.Start("", framework.ControlPlaneOnly()...) })
	if sharedErr != nil {
		t.Fatalf("starting rayctl up: %v", sharedErr)
	}
	return sharedInst
}

// testEnv is one kubelet on its own node, with a namespace of its own.
type testEnv struct {
	t      *testing.T
	client kubernetes.Interface
	rt     *fake.Runtime
	node   string
	ns     string
	dir    string
	kl     *kubelet.Kubelet
	stop   func()
	writes []string
	mu     sync.Mutex
}

func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid()%10000, nameSeq.Add(1))
}

// newEnv starts a kubelet on a fresh node using rt.
func newEnv(t *testing.T, rt *fake.Runtime) *testEnv {
	t.Helper()
	inst := apiServer(t)
	e := &testEnv{t: t, client: inst.Client, rt: rt, node: uniqueName("node"), ns: uniqueName("ns"), dir: t.TempDir()}
	createNamespace(t, inst, e.ns)
	e.startKubelet()
	t.Cleanup(func() {
		e.stop()
		_ = e.client.CoreV1().Nodes().Delete(context.Background(), e.node, metav1.DeleteOptions{})
	})
	return e
}

// createNamespace makes namespace ns with what kube-controller-manager (absent here) gives every
// namespace, and every pod's token volume needs: the default ServiceAccount and kube-root-ca.crt.
func createNamespace(t *testing.T, inst *framework.Instance, ns string) {
	t.Helper()
	ctx, c := context.Background(), inst.Client
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rootCA := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt"}, Data: map[string]string{"ca.crt": string(inst.Config.CAData)}}
	if _, err := c.CoreV1().ConfigMaps(ns).Create(ctx, rootCA, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (e *testEnv) startKubelet() {
	t := e.t
	t.Helper()
	kl, err := kubelet.New(kubelet.Config{
		NodeName:          e.node,
		RESTConfig:        apiServer(t).Config,
		Runtime:           e.rt,
		PodsDir:           e.dir,
		ClusterDNS:        []string{"10.96.0.10"},
		KubernetesVersion: "v1.37.2",
		CrashLoopBackOff:  podworker.BackoffConfig{Initial: 300 * time.Millisecond, Max: 2 * time.Second},
		RelistPeriod:      50 * time.Millisecond,
		ResyncPeriod:      500 * time.Millisecond,
		OnStatusWrite: func(pod *corev1.Pod, rv string) {
			e.mu.Lock()
			e.writes = append(e.writes, pod.Name+"@"+rv)
			e.mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- kl.Run(ctx) }()
	select {
	case <-kl.Ready():
	case err := <-done:
		cancel()
		t.Fatalf("kubelet stopped before ready: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("kubelet not ready after 30s")
	}
	e.kl = kl
	var once sync.Once
	e.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("kubelet.Run: %v", err)
			}
		})
	}
}

// pod returns a pod bound to the env's node with one container.
func (e *testEnv) pod(name string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			NodeName:   e.node,
			Containers: []corev1.Container{{Name: "main", Image: "busybox:1.36", Command: []string{"sleep", "3600"}}},
		},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func (e *testEnv) create(p *corev1.Pod) *corev1.Pod {
	e.t.Helper()
	created, err := e.client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return created
}

// waitPod watches pod until cond holds, failing after timeout; it returns the pod and every version seen
// from the time of the call.
func (e *testEnv) waitPod(name string, timeout time.Duration, what string, cond func(*corev1.Pod) bool) (*corev1.Pod, []*corev1.Pod) {
	return e.waitPodSince(nil, name, timeout, what, cond)
}

// waitPodSince is waitPod for a test that needs every version of the pod since it created it (a state
// the kubelet passes through quickly): it watches from created's resourceVersion instead of listing
// first, so no write between the create and the call is missed.
func (e *testEnv) waitPodSince(created *corev1.Pod, name string, timeout time.Duration, what string, cond func(*corev1.Pod) bool) (*corev1.Pod, []*corev1.Pod) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var seen []*corev1.Pod
	pods := e.client.CoreV1().Pods(e.ns)
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	var from string
	if created != nil {
		seen = append(seen, created)
		if cond(created) {
			return created, seen
		}
		from = created.ResourceVersion
	} else {
		list, err := pods.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			e.t.Fatal(err)
		}
		if len(list.Items) == 1 {
			p := &list.Items[0]
			seen = append(seen, p)
			if cond(p) {
				return p, seen
			}
		} else if cond(nil) {
			return nil, seen
		}
		from = list.ResourceVersion
	}
	w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: from})
	if err != nil {
		e.t.Fatal(err)
	}
	defer w.Stop()
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				e.t.Fatalf("watch closed waiting for pod %s: %s", name, what)
			}
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod {
				continue
			}
			if ev.Type == watch.Deleted {
				p = nil
			}
			if p != nil {
				seen = append(seen, p)
			}
			if cond(p) {
				return p, seen
			}
		case <-ctx.Done():
			last := "none"
			if len(seen) > 0 {
				last = describe(seen[len(seen)-1])
			}
			e.t.Fatalf("pod %s: %s: not within %s; last seen: %s", name, what, timeout, last)
		}
	}
}

func describe(p *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "phase=%s", p.Status.Phase)
	for _, c := range p.Status.Conditions {
		fmt.Fprintf(&b, " %s=%s", c.Type, c.Status)
	}
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range list {
			fmt.Fprintf(&b, " [%s restarts=%d ready=%v %s]", cs.Name, cs.RestartCount, cs.Ready, stateString(cs.State))
		}
	}
	return b.String()
}

func stateString(s corev1.ContainerState) string {
	switch {
	case s.Waiting != nil:
		return "waiting:" + s.Waiting.Reason + " " + s.Waiting.Message
	case s.Running != nil:
		return "running"
	case s.Terminated != nil:
		return fmt.Sprintf("terminated:%s(%d)", s.Terminated.Reason, s.Terminated.ExitCode)
	}
	return "none"
}

func condition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	if p == nil {
		return nil
	}
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func conditionIs(p *corev1.Pod, t corev1.PodConditionType, s corev1.ConditionStatus) bool {
	c := condition(p, t)
	return c != nil && c.Status == s
}

func containerStatus(p *corev1.Pod, name string) *corev1.ContainerStatus {
	if p == nil {
		return nil
	}
	for _, list := range [][]corev1.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// waitEvent waits for an event about the pod with this reason (and reporting controller kubelet).
func (e *testEnv) waitEvent(pod, reason string, timeout time.Duration) *corev1.Event {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		list, err := e.client.CoreV1().Events(e.ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		for i := range list.Items {
			ev := &list.Items[i]
			if ev.InvolvedObject.Name == pod && ev.Reason == reason {
				return ev
			}
		}
		if time.Now().After(deadline) {
			var seen []string
			for _, ev := range list.Items {
				seen = append(seen, ev.InvolvedObject.Name+":"+ev.Reason)
			}
			e.t.Fatalf("no %s event for pod %s within %s; events: %v", reason, pod, timeout, seen)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

// wrote reports whether OnStatusWrite has reported this "pod@resourceVersion".
func (e *testEnv) wrote(podAtRV string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Contains(e.writes, podAtRV)
}
