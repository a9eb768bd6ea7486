package kubelet_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rayctl/rayctl/pkg/kubelet"
	"github.com/rayctl/rayctl/pkg/kubelet/podworker"
	"github.com/rayctl/rayctl/pkg/runtime/network"
	"github.com/rayctl/rayctl/pkg/runtime/process"
)

// TestWithTheProcessRuntime runs real processes: one that prints and exits 3, one that runs until its
// pod is deleted.
func TestWithTheProcessRuntime(t *testing.T) {
	e, ctx, rt := processKubelet(t, "proc-node", kubelet.Config{
		CrashLoopBackOff: podworker.BackoffConfig{Initial: 300 * time.Millisecond, Max: time.Second},
		RelistPeriod:     100 * time.Millisecond,
	})

	e.create(e.pod("printer", func(p *corev1.Pod) {
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
		p.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "echo hello from $(POD); exit 3"}
		p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	}))
	p, _ := e.waitPod("printer", 60*time.Second, "Failed", func(p *corev1.Pod) bool { return p != nil && p.Status.Phase == corev1.PodFailed })
	cs := containerStatus(p, "main")
	if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 3 || !strings.HasPrefix(cs.ContainerID, "process://") {
		t.Fatalf("status = %+v", cs)
	}
	logs, _ := filepath.Glob(filepath.Join(e.dir, string(p.UID), "logs", "main", "*.log"))
	if len(logs) != 1 {
		t.Fatalf("log files %v", logs)
	}
	if b, _ := os.ReadFile(logs[0]); !strings.Contains(string(b), " stdout F hello from printer") {
		t.Errorf("log = %q", b)
	}

	e.create(e.pod("sleeper", func(p *corev1.Pod) {
		p.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.1; done"}
	}))
	e.waitPod("sleeper", 60*time.Second, "Ready", func(p *corev1.Pod) bool { return conditionIs(p, corev1.PodReady, corev1.ConditionTrue) })
	grace := int64(5)
	if err := e.client.CoreV1().Pods(e.ns).Delete(ctx, "sleeper", metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	e.waitPod("sleeper", 60*time.Second, "gone", func(p *corev1.Pod) bool { return p == nil })
	left, _ := rt.ListContainers(ctx)
	for _, c := range left {
		if c.Name == "main" && c.State == "running" {
			t.Errorf("container %s still runs", c.ID)
		}
	}
}

// TestExitsNoticedWithoutRelist: with relists and resyncs an hour apart, a pod still goes from its
// init container to its main container and then to Succeeded, because the runtime tells the kubelet
// of each exit (runtime.ExitNotifier) instead of leaving it to the next relist. Each container outlives
// the status writes its start causes, so none of their echoes can wake the pod worker in its place.
func TestExitsNoticedWithoutRelist(t *testing.T) {
	e, _, _ := processKubelet(t, "exit-node", kubelet.Config{RelistPeriod: time.Hour, ResyncPeriod: time.Hour})

	e.create(e.pod("init-then-main", func(p *corev1.Pod) {
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
		p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: p.Spec.Containers[0].Image,
			Command: []string{"/bin/sh", "-c", "sleep 1; echo init done"}}}
		p.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "sleep 1; echo main done"}
	}))
	p, _ := e.waitPod("init-then-main", 60*time.Second, "Succeeded", func(p *corev1.Pod) bool { return p != nil && p.Status.Phase == corev1.PodSucceeded })
	for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
			t.Errorf("container %s: %+v", cs.Name, cs.State)
		}
	}
}

// processKubelet starts a kubelet configured as cfg (its node, API server, runtime and pods dir filled
// in) on the process runtime against a test API server, waits until it is ready and stops it when the
// test ends. It returns the test's environment, the kubelet's context and its runtime.
func processKubelet(t *testing.T, nodePrefix string, cfg kubelet.Config) (*testEnv, context.Context, *process.Runtime) {
	t.Helper()
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh to run containers with")
	}
	inst := apiServer(t)
	dir := t.TempDir()
	nm, err := network.New(network.Config{StateDir: filepath.Join(dir, "net"), HostOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rt, err := process.New(ctx, process.Options{StateDir: filepath.Join(dir, "state"), Network: nm})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	e := &testEnv{t: t, client: inst.Client, node: uniqueName(nodePrefix), ns: uniqueName("ns"), dir: filepath.Join(dir, "pods")}
	createNamespace(t, inst, e.ns)
	cfg.NodeName, cfg.RESTConfig, cfg.Runtime, cfg.PodsDir = e.node, inst.Config, rt, e.dir
	kl, err := kubelet.New(cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- kl.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		rt.Close()
		_ = e.client.CoreV1().Nodes().Delete(context.Background(), e.node, metav1.DeleteOptions{})
	})
	<-kl.Ready()
	return e, ctx, rt
}
