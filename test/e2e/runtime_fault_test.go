package e2e

// A node-level fault: the private containerd that `rayctl up` started is killed with SIGKILL. rayctl
// notices, starts it again on the same root, state and socket, and the kubelet reconnects and reports
// the truth about the pods' containers, which ran on in their shims meanwhile.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

// TestContainerdKilledIsRestarted kills the instance's private containerd with SIGKILL while two pods
// run, and kills one pod's process while containerd is gone. rayctl says containerd exited and is back;
// exactly one containerd of the instance runs afterwards. The untouched pod never stops being Running
// and Ready, keeps its container (same ID, no restart) and its output keeps reaching its log; the pod
// whose process died is restarted per its policy (restartCount 1, last state exit 137) and is Ready
// again; a pod created after the restart starts. Figures: time from the kill to containerd back, to the
// killed container running again, and to the new pod Ready.
func TestContainerdKilledIsRestarted(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts rayctl up")
	}
	if _, err := exec.LookPath("containerd"); err != nil || os.Geteuid() != 0 {
		t.Skip("needs containerd installed and root (a private containerd)")
	}
	in := startPurgedInstance(t, "--runtime", "containerd")
	ctx := nodeContext(t, 5*time.Minute)
	ns := newNamespace(t, ctx, in)
	t.Cleanup(func() {
		if t.Failed() {
			dumpNodeFault(t, in, ns)
		}
	})

	steady, sw := nodeStartPod(t, ctx, in, ns, nodePod("steady", corev1.RestartPolicyAlways, 1,
		nodeSh("main", "echo hello; i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.2; done")))
	sw.stop()
	marker := fmt.Sprint(3_000_000 + rand.IntN(1_000_000))
	victim, vw := nodeStartPod(t, ctx, in, ns, nodePod("victim", corev1.RestartPolicyAlways, 1, nodeSh("main", "exec sleep "+marker)))
	steadyCS, victimCS := nodeContainer(steady, "main"), nodeContainer(victim, "main")

	// Every version of the steady pod written from now on.
	history := watchPodHistory(t, ctx, in, ns, "steady", steady.ResourceVersion)

	// Running means the container's process started, not that its shell has exec'd sleep yet.
	var procs []int
	framework.WaitFor(t, ctx, "the victim's shell to exec `sleep "+marker+"`", func() (bool, error) {
		procs = processesWithArgs("sleep", marker)
		return len(procs) == 1, nil
	})
	old := containerdPIDs(in.DataDir)
	if len(old) != 1 {
		t.Fatalf("containerd processes of the instance: %v, want one", old)
	}
	killed := time.Now()
	must(t, "killing containerd", syscall.Kill(old[0], syscall.SIGKILL))
	must(t, "killing the victim's process", syscall.Kill(procs[0], syscall.SIGKILL))
	t.Logf("killed containerd (pid %d) and the victim's process (pid %d)", old[0], procs[0])

	// rayctl notices and restarts containerd.
	framework.WaitFor(t, ctx, "rayctl reporting containerd back", func() (bool, error) {
		return strings.Contains(in.Output.String(), "the private containerd is back"), nil
	})
	backIn := time.Since(killed)
	for _, line := range strings.Split(in.Output.String(), "\n") {
		if strings.HasPrefix(line, "runtime: ") {
			t.Logf("rayctl up: %s", line)
		}
	}
	if !strings.Contains(in.Output.String(), "the private containerd exited") {
		t.Errorf("rayctl up did not say that containerd exited:\n%s", in.Output.String())
	}
	if now := containerdPIDs(in.DataDir); len(now) != 1 || now[0] == old[0] {
		t.Errorf("containerd processes of the instance after the restart: %v, want one other than %d", now, old[0])
	}

	// The victim's container died while containerd was gone: the kubelet learns of it and restarts it.
	restarted := vw.until(ctx, nodeTimeout, "the victim restarted and Ready", func(p *corev1.Pod) bool {
		cs := nodeContainer(p, "main")
		return runningReady(p) && cs != nil && cs.RestartCount == victimCS.RestartCount+1 && cs.Ready
	})
	victimIn := time.Since(killed)
	vw.stop()
	cs := nodeContainer(restarted, "main")
	if cs.ContainerID == victimCS.ContainerID {
		t.Errorf("the victim still reports container %s after its process was killed", cs.ContainerID)
	}
	if term := cs.LastTerminationState.Terminated; term == nil || term.ExitCode != 137 {
		t.Errorf("the victim's last state: %+v, want terminated with exit code 137", cs.LastTerminationState)
	}

	// The steady pod's container ran through it all and is still reported so.
	now, err := in.Client.CoreV1().Pods(ns).Get(ctx, "steady", metav1.GetOptions{})
	must(t, "reading the steady pod", err)
	if cs := nodeContainer(now, "main"); !runningReady(now) || cs.ContainerID != steadyCS.ContainerID || cs.RestartCount != steadyCS.RestartCount {
		t.Errorf("the steady pod after the restart: %s, container %s; want Running and Ready, container %s, restarts %d",
			nodePodSummary(now), cs.ContainerID, steadyCS.ContainerID, steadyCS.RestartCount)
	}
	ticks := strings.Count(nodeContainerLog(t, ctx, in, now, "main"), "tick ")
	eventually(t, ctx, time.Minute, "the steady container's output reaching its log after the restart", func(ctx context.Context) (bool, error) {
		return strings.Count(nodeContainerLog(t, ctx, in, now, "main"), "tick ") > ticks+3, nil
	})
	if out := nodeContainerLog(t, ctx, in, now, "main"); strings.Count(out, "hello\n") != 1 {
		t.Errorf("the steady container's log has %d hello lines, want 1 (one process throughout)", strings.Count(out, "hello\n"))
	}

	// A pod created after the restart starts.
	_, aw := nodeStartPod(t, ctx, in, ns, nodePod("after", corev1.RestartPolicyAlways, 1, nodeSh("main", "exec sleep 3600")))
	aw.stop()
	newPodIn := time.Since(killed)

	for _, h := range history() {
		if !strings.HasPrefix(h, "phase=Running ready=True") {
			t.Errorf("the steady pod was reported otherwise than Running and Ready: %s (all: %v)", h, history())
			break
		}
	}
	t.Logf("figures: containerd back %s after the kill; the killed container running again %s after it (kubelet back-off included); a new pod Ready %s after it; the steady pod had %d status writes meanwhile, all Running and Ready",
		backIn.Round(time.Millisecond), victimIn.Round(time.Millisecond), newPodIn.Round(time.Millisecond), len(history()))
}

// dumpNodeFault logs, for a failed test, the events of namespace ns (the kubelet's Failed events carry
// the runtime's error) and the tail of the instance's containerd log.
func dumpNodeFault(t *testing.T, in *framework.Instance, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b strings.Builder
	if l, err := in.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, ev := range l.Items {
			fmt.Fprintf(&b, "  event %s %s/%s %s (x%d): %s\n", ev.Type, ev.InvolvedObject.Kind, ev.InvolvedObject.Name,
				ev.Reason, max(ev.Count, 1), ev.Message)
		}
	}
	if l, err := in.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range l.Items {
			fmt.Fprintf(&b, "  pod %s: %s\n", p.Name, nodePodSummary(&p))
		}
	}
	if log, err := os.ReadFile(filepath.Join(in.DataDir, "containerd", "containerd.log")); err == nil {
		if len(log) > 6000 {
			log = log[len(log)-6000:]
		}
		fmt.Fprintf(&b, "containerd.log tail:\n%s\n", log)
	}
	t.Logf("namespace %s after the failure:\n%s", ns, b.String())
}

// watchPodHistory records a summary of every version of pod ns/name after resourceVersion rv until the
// test ends; the returned func gives the summaries so far.
func watchPodHistory(t *testing.T, ctx context.Context, in *framework.Instance, ns, name, rv string) func() []string {
	t.Helper()
	w, err := in.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: rv,
	})
	must(t, "watching pod "+name, err)
	var mu sync.Mutex
	var seen []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Error {
				mu.Lock()
				seen = append(seen, nodePodSummary(p))
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { w.Stop(); <-done })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// processesWithArgs lists the pids of processes whose command line is exactly args.
func processesWithArgs(args ...string) []int {
	want := strings.Join(args, "\x00")
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || strings.TrimRight(string(b), "\x00") != want {
			continue
		}
		var pid int
		if _, err := fmt.Sscanf(filepath.Base(filepath.Dir(p)), "%d", &pid); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}
