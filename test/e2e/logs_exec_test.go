package e2e

// The pods/log and pods/exec tests: real pods of the raysim image on the shared instance's kubelet,
// read and entered with the built-in kubectl, through the API server's proxy to the kubelet API.

import (
	"bufio"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

// simImage is the raysim image the shared instance preloads.
const simImage = "rayctl.local/raysim:latest"

// tickScript prints hello, then a numbered tick every second.
const tickScript = "echo hello; i=0; while true; do echo tick $i; i=$((i+1)); sleep 1; done"

// podStartTimeout bounds the wait for a real pod to run: containers start in containerd on a busy
// 2-core machine.
const podStartTimeout = 3 * time.Minute

// logsSetup marks the test parallel and returns the shared instance, a context long enough for a real
// pod to start and be read, and a fresh namespace. The namespace is deleted when the test ends, and
// waited for, so that the kubelet stops the test's containers while the instance still runs.
func logsSetup(t *testing.T) (*framework.Instance, context.Context, string) {
	t.Helper()
	in, _, ns := setup(t)
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	t.Cleanup(cancel)
	t.Cleanup(func() { deleteNamespaceAndWait(t, in, ns, nil) })
	return in, ctx, ns
}

// deleteNamespaceAndWait deletes ns and waits (up to 2 minutes) until it is gone, so the kubelet stops a
// test's containers while the instance still runs; onTimeout, if set, runs before the timeout is
// reported.
func deleteNamespaceAndWait(t *testing.T, in *framework.Instance, ns string, onTimeout func()) {
	t.Helper()
	cctx, ccancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer ccancel()
	if err := in.Client.CoreV1().Namespaces().Delete(cctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting namespace %s: %v", ns, err)
		return
	}
	for {
		_, err := in.Client.CoreV1().Namespaces().Get(cctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		if cctx.Err() != nil {
			if onTimeout != nil {
				onTimeout()
			}
			t.Errorf("namespace %s still there 2m after its deletion (last error: %v)", ns, err)
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// runPod creates a pod of simImage in ns with the given containers (command per name, in order) and
// restart policy.
func runPod(t *testing.T, ctx context.Context, in *framework.Instance, ns, name string, policy corev1.RestartPolicy, containers ...corev1.Container) {
	t.Helper()
	for i := range containers {
		containers[i].Image = simImage
		containers[i].ImagePullPolicy = corev1.PullNever
	}
	termination := int64(1)
	_, err := in.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			Containers:                    containers,
			RestartPolicy:                 policy,
			TerminationGracePeriodSeconds: &termination,
		},
	}, metav1.CreateOptions{})
	must(t, "creating pod "+name, err)
}

// shContainer is a container called name running script with sh.
func shContainer(name, script string) corev1.Container {
	return corev1.Container{Name: name, Command: []string{"sh", "-c", script}}
}

// waitPod waits until cond holds for pod ns/name, and returns it.
func waitPod(t *testing.T, ctx context.Context, in *framework.Instance, ns, name, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	eventually(t, ctx, podStartTimeout, "pod "+name+" "+what, func(ctx context.Context) (bool, error) {
		p, err := in.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod = p
		return cond(p), nil
	})
	return pod
}

// allRunning reports whether every container of the pod runs.
func allRunning(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) != len(p.Spec.Containers) {
		return false
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.State.Running == nil {
			return false
		}
	}
	return true
}

// kubectlFails runs kubectl in ns, expects it to fail, and returns its stderr.
func kubectlFails(t *testing.T, ctx context.Context, in *framework.Instance, ns string, args ...string) string {
	t.Helper()
	out, errOut, err := in.Kubectl(ctx, "", append([]string{"-n", ns}, args...)...)
	if err == nil {
		t.Fatalf("kubectl %s succeeded, want a failure; stdout:\n%s", strings.Join(args, " "), out)
	}
	return errOut
}

// TestLogs reads a running container's log with kubectl logs: all of it, its tail, with timestamps,
// followed, and the errors for a wrong container and a missing container name.
func TestLogs(t *testing.T) {
	in, ctx, ns := logsSetup(t)
	runPod(t, ctx, in, ns, "ticker", corev1.RestartPolicyAlways, shContainer("main", tickScript))
	waitPod(t, ctx, in, ns, "ticker", "runs", allRunning)
	// Wait for a few ticks so that the tail has something to cut.
	var out string
	eventually(t, ctx, time.Minute, "the log shows tick 2", func(ctx context.Context) (bool, error) {
		out = kubectl(t, ctx, in, ns, "", "logs", "ticker")
		return strings.Contains(out, "tick 2\n"), nil
	})

	t.Run("all", func(t *testing.T) {
		ls := lines(out)
		if len(ls) < 4 || ls[0] != "hello" || ls[1] != "tick 0" {
			t.Fatalf("kubectl logs: got\n%s\nwant hello, tick 0, tick 1, ...", out)
		}
		// The container is named; -c and pod/NAME read the same log.
		if got := kubectl(t, ctx, in, ns, "", "logs", "pod/ticker", "-c", "main"); !strings.HasPrefix(got, "hello\ntick 0\n") {
			t.Errorf("kubectl logs pod/ticker -c main: got\n%s", got)
		}
	})

	t.Run("tail", func(t *testing.T) {
		got := lines(kubectl(t, ctx, in, ns, "", "logs", "ticker", "--tail=1"))
		if len(got) != 1 || !strings.HasPrefix(got[0], "tick ") {
			t.Fatalf("kubectl logs --tail=1: got %q, want one tick line", got)
		}
	})

	t.Run("limit-bytes", func(t *testing.T) {
		if got := kubectl(t, ctx, in, ns, "", "logs", "ticker", "--limit-bytes=3"); got != "hel" {
			t.Fatalf("kubectl logs --limit-bytes=3: got %q, want %q", got, "hel")
		}
	})

	t.Run("timestamps", func(t *testing.T) {
		got := lines(kubectl(t, ctx, in, ns, "", "logs", "ticker", "--timestamps"))
		if len(got) < 2 {
			t.Fatalf("kubectl logs --timestamps: got %q", got)
		}
		ts, msg, ok := strings.Cut(got[0], " ")
		if !ok || msg != "hello" {
			t.Fatalf("kubectl logs --timestamps: first line %q, want <timestamp> hello", got[0])
		}
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			t.Fatalf("kubectl logs --timestamps: %q is not an RFC 3339 time: %v", ts, err)
		}
		if d := time.Since(at); d < 0 || d > 10*time.Minute {
			t.Errorf("kubectl logs --timestamps: hello written at %s, %s ago", at, d)
		}
	})

	t.Run("since", func(t *testing.T) {
		// hello was written seconds ago; the last 2 seconds hold ticks only.
		got := kubectl(t, ctx, in, ns, "", "logs", "ticker", "--since=2s")
		if strings.Contains(got, "hello") {
			t.Fatalf("kubectl logs --since=2s: got\n%s\nwhich still has hello", got)
		}
	})

	t.Run("follow", func(t *testing.T) {
		// Follow the log from its last line: a tick written after the request must arrive.
		fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		bin, err := framework.Binary()
		must(t, "the rayctl binary", err)
		cmd := exec.CommandContext(fctx, bin, "kubectl", "--kubeconfig", in.Kubeconfig, "-n", ns, "logs", "-f", "--tail=1", "ticker")
		stdout, err := cmd.StdoutPipe()
		must(t, "kubectl logs -f stdout", err)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		must(t, "starting kubectl logs -f", cmd.Start())
		defer func() {
			cancel()
			_ = cmd.Wait()
		}()
		scanner := bufio.NewScanner(stdout)
		var seen []string
		for len(seen) < 3 && scanner.Scan() {
			seen = append(seen, scanner.Text())
		}
		if len(seen) < 3 {
			t.Fatalf("kubectl logs -f: got %q before the stream ended (%v); stderr:\n%s", seen, fctx.Err(), stderr.String())
		}
		// Three lines from a tail of one: at least two were written while following, in order.
		for i, l := range seen {
			if !strings.HasPrefix(l, "tick ") {
				t.Fatalf("kubectl logs -f: line %d is %q, want a tick", i, l)
			}
		}
		if seen[1] == seen[2] {
			t.Errorf("kubectl logs -f: a tick repeated: %q", seen)
		}
	})

	t.Run("wrong-container", func(t *testing.T) {
		errOut := kubectlFails(t, ctx, in, ns, "logs", "ticker", "-c", "wrong")
		if !strings.Contains(errOut, "container wrong is not valid for pod ticker") {
			t.Fatalf("kubectl logs -c wrong: stderr %q, want it to name the bad container", errOut)
		}
		// kubectl checks the name itself; the API server does too.
		err := in.Client.CoreV1().Pods(ns).GetLogs("ticker", &corev1.PodLogOptions{Container: "wrong"}).Do(ctx).Error()
		expectStatus(t, "logs of a container the pod does not have", err, 400, "container wrong is not valid for pod ticker")
	})

	t.Run("previous-none", func(t *testing.T) {
		errOut := kubectlFails(t, ctx, in, ns, "logs", "ticker", "--previous")
		if !strings.Contains(errOut, "previous terminated container") {
			t.Fatalf("kubectl logs --previous of a container that never restarted: stderr %q", errOut)
		}
	})
}

// TestLogsContainers checks the container choice of a pod of two: without -c the API asks for one (naming
// both), with -c each container's own log comes back; a pod with no kubelet yet is waiting to start.
func TestLogsContainers(t *testing.T) {
	in, ctx, ns := logsSetup(t)
	runPod(t, ctx, in, ns, "pair", corev1.RestartPolicyAlways,
		shContainer("left", "echo from-left; exec sleep 3600"),
		shContainer("right", "echo from-right; exec sleep 3600"))

	// The API server itself refuses a log request naming no container of a two-container pod (kubectl
	// would pick the first container on its own, so this goes through client-go).
	err := in.Client.CoreV1().Pods(ns).GetLogs("pair", &corev1.PodLogOptions{}).Do(ctx).Error()
	expectStatus(t, "logs of a two-container pod without a container", err, 400,
		"a container name must be specified for pod pair, choose one of: [left right]")

	// A pod bound to a node no kubelet runs is never started: its container is waiting.
	pending := boundPod("pending")
	_, err = in.Client.CoreV1().Pods(ns).Create(ctx, pending, metav1.CreateOptions{})
	must(t, "creating a pod on a node with no kubelet", err)
	err = in.Client.CoreV1().Pods(ns).GetLogs("pending", &corev1.PodLogOptions{}).Do(ctx).Error()
	expectStatus(t, "logs of a container not started", err, 400, `container "main" in pod "pending" is waiting to start: ContainerCreating`)
	// No kubelet will confirm its deletion: remove it at once, so that the namespace can go.
	must(t, "deleting the pod on a node with no kubelet", in.Client.CoreV1().Pods(ns).Delete(ctx, "pending", *metav1.NewDeleteOptions(0)))

	waitPod(t, ctx, in, ns, "pair", "runs", allRunning)
	for _, c := range []string{"left", "right"} {
		var out string
		eventually(t, ctx, 30*time.Second, "the log of "+c, func(ctx context.Context) (bool, error) {
			out = kubectl(t, ctx, in, ns, "", "logs", "pair", "-c", c)
			return out != "", nil
		})
		if out != "from-"+c+"\n" {
			t.Errorf("kubectl logs pair -c %s: got %q, want %q", c, out, "from-"+c+"\n")
		}
	}
}

// TestLogsPrevious restarts a container (its command fails) and reads the earlier run's log with
// --previous.
func TestLogsPrevious(t *testing.T) {
	in, ctx, ns := logsSetup(t)
	// Each run prints its own start time, so that two runs' logs differ.
	runPod(t, ctx, in, ns, "crasher", corev1.RestartPolicyAlways,
		shContainer("main", `echo "run started $(date +%s%N)"; sleep 2; echo "run ends"; exit 1`))
	waitPod(t, ctx, in, ns, "crasher", "restarts", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1
	})
	var prev string
	eventually(t, ctx, time.Minute, "the previous run's log", func(ctx context.Context) (bool, error) {
		out, _, err := in.Kubectl(ctx, "", "-n", ns, "logs", "crasher", "--previous")
		if err != nil {
			return false, err
		}
		prev = out
		return true, nil
	})
	ls := lines(prev)
	if len(ls) != 2 || !strings.HasPrefix(ls[0], "run started ") || ls[1] != "run ends" {
		t.Fatalf("kubectl logs --previous: got\n%s\nwant a whole earlier run", prev)
	}
	// The current run (once it has printed) is another one.
	eventually(t, ctx, time.Minute, "the current run's log", func(ctx context.Context) (bool, error) {
		out, _, err := in.Kubectl(ctx, "", "-n", ns, "logs", "crasher")
		if err != nil {
			return false, err
		}
		cur := lines(out)
		return len(cur) > 0 && strings.HasPrefix(cur[0], "run started ") && cur[0] != ls[0], nil
	})
}

// TestExec runs commands in a running container with kubectl exec: output and exit code, stdin, and the
// errors for a wrong container.
func TestExec(t *testing.T) {
	in, ctx, ns := logsSetup(t)
	runPod(t, ctx, in, ns, "shell", corev1.RestartPolicyAlways, shContainer("main", tickScript))
	waitPod(t, ctx, in, ns, "shell", "runs", allRunning)

	t.Run("exit-code", func(t *testing.T) {
		out, errOut, err := in.Kubectl(ctx, "", "-n", ns, "exec", "shell", "--", "sh", "-c", "echo $HOSTNAME; echo to-stderr >&2; exit 3")
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) || exitErr.ExitCode() != 3 {
			t.Fatalf("kubectl exec ... exit 3: got error %v, want exit status 3; stdout %q, stderr %q", err, out, errOut)
		}
		if out != "shell\n" {
			t.Errorf("kubectl exec echo $HOSTNAME: stdout %q, want %q", out, "shell\n")
		}
		if !strings.Contains(errOut, "to-stderr") {
			t.Errorf("kubectl exec: stderr %q, want the command's stderr", errOut)
		}
	})

	t.Run("success", func(t *testing.T) {
		if got := kubectl(t, ctx, in, ns, "", "exec", "shell", "-c", "main", "--", "echo", "a b", "c"); got != "a b c\n" {
			t.Errorf("kubectl exec -- echo 'a b' c: got %q", got)
		}
	})

	t.Run("stdin", func(t *testing.T) {
		input := "line one\nline two\n"
		if got := kubectl(t, ctx, in, ns, input, "exec", "-i", "shell", "--", "cat"); got != input {
			t.Errorf("kubectl exec -i -- cat: got %q, want %q", got, input)
		}
		// A larger input arrives whole.
		big := strings.Repeat("0123456789abcdef", 8192)
		if got := kubectl(t, ctx, in, ns, big, "exec", "-i", "shell", "--", "wc", "-c"); strings.TrimSpace(got) != "131072" {
			t.Errorf("kubectl exec -i -- wc -c of 128 KiB: got %q", got)
		}
	})

	t.Run("wrong-container", func(t *testing.T) {
		errOut := kubectlFails(t, ctx, in, ns, "exec", "shell", "-c", "wrong", "--", "true")
		if !strings.Contains(errOut, "container wrong is not valid for pod shell") {
			t.Fatalf("kubectl exec -c wrong: stderr %q, want it to name the bad container", errOut)
		}
	})
}
