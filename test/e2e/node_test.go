package e2e

// Node tests: real containers on the kubelet and containerd of `rayctl up`, seen the way users see them —
// through pod watches, events, container logs and from inside the pods.

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

// nodeSimImage is the image every `rayctl up` preloads: busybox (sh, httpd, nslookup, dd…) plus raysim.
const nodeSimImage = "rayctl.local/raysim:latest"

// nodeTimeout bounds one wait for the kubelet. The first pod of an instance also waits for the image
// preload, and the machine may be busy with other tests, so it is generous.
const nodeTimeout = 2 * time.Minute

// nodeContext is a context for node tests, longer than testContext's: some wait through restarts.
func nodeContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// nodeSetup is setup with a longer context.
func nodeSetup(t *testing.T) (*framework.Instance, context.Context, string) {
	t.Helper()
	t.Parallel()
	in := shared(t)
	ctx := nodeContext(t, 3*time.Minute)
	return in, ctx, newNamespace(t, ctx, in)
}

// nodeSh is a container of the raysim image running script with sh -c.
func nodeSh(name, script string) corev1.Container {
	return corev1.Container{Name: name, Image: nodeSimImage, ImagePullPolicy: corev1.PullIfNotPresent, Command: []string{"sh", "-c", script}}
}

// nodePod is a pod with the given restart policy and containers; grace is its terminationGracePeriodSeconds.
func nodePod(name string, policy corev1.RestartPolicy, grace int64, containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy: policy, TerminationGracePeriodSeconds: &grace, Containers: containers,
		},
	}
}

// nodePodWatch follows one pod through a watch opened before the pod is created, keeping a summary of
// every version seen for failure messages.
type nodePodWatch struct {
	t        *testing.T
	in       *framework.Instance
	ns, name string
	w        watch.Interface
	rv       string
	history  []string
	last     *corev1.Pod
	deleted  bool
}

// nodeWatchPod opens a watch on the pod ns/name (which need not exist yet).
func nodeWatchPod(t *testing.T, ctx context.Context, in *framework.Instance, ns, name string) *nodePodWatch {
	t.Helper()
	list, err := in.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	must(t, "listing pods", err)
	pw := &nodePodWatch{t: t, in: in, ns: ns, name: name, rv: list.ResourceVersion}
	if len(list.Items) > 0 {
		pw.last = &list.Items[0]
	}
	must(t, "watching the pod", pw.open(ctx))
	t.Cleanup(pw.stop)
	return pw
}

// stop closes the watch. (An open watch holds up a clean stop of `rayctl up`: close it first.)
func (pw *nodePodWatch) stop() { pw.w.Stop() }

func (pw *nodePodWatch) open(ctx context.Context) error {
	w, err := pw.in.Client.CoreV1().Pods(pw.ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", pw.name).String(), ResourceVersion: pw.rv,
	})
	if err != nil {
		return err
	}
	pw.w = w
	return nil
}

// next returns the pod's next version, reopening the watch if the server closed it.
func (pw *nodePodWatch) next(ctx context.Context) (*corev1.Pod, watch.EventType, error) {
	for {
		select {
		case <-ctx.Done():
			return nil, "", ctx.Err()
		case ev, ok := <-pw.w.ResultChan():
			if !ok {
				if err := pw.open(ctx); err != nil {
					return nil, "", err
				}
				continue
			}
			if ev.Type == watch.Error {
				return nil, "", apierrors.FromObject(ev.Object)
			}
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			pw.rv = pod.ResourceVersion
			pw.last = pod
			pw.deleted = ev.Type == watch.Deleted
			pw.history = append(pw.history, fmt.Sprintf("%s %s", ev.Type, nodePodSummary(pod)))
			return pod, ev.Type, nil
		}
	}
}

// until reads the watch until cond holds for a version of the pod and returns that version.
func (pw *nodePodWatch) until(ctx context.Context, timeout time.Duration, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	pw.t.Helper()
	if pw.last != nil && !pw.deleted && cond(pw.last) {
		return pw.last
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		pod, typ, err := pw.next(ctx)
		if err != nil {
			pw.t.Fatalf("%s: %v; the pod went through:\n  %s", what, err, strings.Join(pw.history, "\n  "))
		}
		if typ == watch.Deleted {
			pw.t.Fatalf("%s: the pod was deleted; it went through:\n  %s", what, strings.Join(pw.history, "\n  "))
		}
		if cond(pod) {
			return pod
		}
	}
}

// untilDeleted reads the watch until the pod is deleted and returns its last version.
func (pw *nodePodWatch) untilDeleted(ctx context.Context, timeout time.Duration) *corev1.Pod {
	pw.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for !pw.deleted {
		if _, _, err := pw.next(ctx); err != nil {
			pw.t.Fatalf("the pod's deletion: %v; it went through:\n  %s", err, strings.Join(pw.history, "\n  "))
		}
	}
	return pw.last
}

// nodePodSummary is one line of a pod's state: phase, Ready, and each container's state.
func nodePodSummary(p *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "phase=%s ready=%s", p.Status.Phase, nodeCond(p, corev1.PodReady))
	if p.DeletionTimestamp != nil {
		b.WriteString(" deleting")
	}
	for _, group := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range group {
			fmt.Fprintf(&b, " [%s %s restarts=%d ready=%t]", cs.Name, nodeStateString(cs.State), cs.RestartCount, cs.Ready)
		}
	}
	return b.String()
}

func nodeStateString(s corev1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running"
	case s.Terminated != nil:
		return fmt.Sprintf("terminated(%d,%s)", s.Terminated.ExitCode, s.Terminated.Reason)
	case s.Waiting != nil:
		return "waiting(" + s.Waiting.Reason + ")"
	}
	return "unknown"
}

// nodeCond is the status of the pod's condition t, "" when it has none.
func nodeCond(p *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// nodeContainer returns the status of the named container (init containers included).
func nodeContainer(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for _, group := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for i := range group {
			if group[i].Name == name {
				return &group[i]
			}
		}
	}
	return nil
}

func nodePhaseIs(phase corev1.PodPhase) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool { return p.Status.Phase == phase }
}

// nodeCreatePod creates pod in ns, failing the test on error.
func nodeCreatePod(t *testing.T, ctx context.Context, in *framework.Instance, ns string, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	got, err := in.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	must(t, "creating pod "+pod.Name, err)
	return got
}

// nodeStartPod creates a pod and waits through a watch until it is Running and Ready.
func nodeStartPod(t *testing.T, ctx context.Context, in *framework.Instance, ns string, pod *corev1.Pod) (*corev1.Pod, *nodePodWatch) {
	t.Helper()
	pw := nodeWatchPod(t, ctx, in, ns, pod.Name)
	nodeCreatePod(t, ctx, in, ns, pod)
	return pw.until(ctx, nodeTimeout, "pod "+pod.Name+" Running and Ready", runningReady), pw
}

// nodeWaitEvents waits until the pod has events with every one of reasons (from the kubelet).
func nodeWaitEvents(t *testing.T, ctx context.Context, in *framework.Instance, ns, pod string, reasons ...string) []corev1.Event {
	t.Helper()
	var events []corev1.Event
	eventually(t, ctx, nodeTimeout, fmt.Sprintf("events %v for pod %s", reasons, pod), func(ctx context.Context) (bool, error) {
		list, err := in.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("involvedObject.name", pod).String(),
		})
		if err != nil {
			return false, err
		}
		events = list.Items
		seen := map[string]bool{}
		for _, e := range list.Items {
			seen[e.Reason] = true
		}
		for _, r := range reasons {
			if !seen[r] {
				return false, fmt.Errorf("no %s event yet among %d", r, len(list.Items))
			}
		}
		return true, nil
	})
	return events
}

// nodeInstanceArg returns the value of a `rayctl up` flag the instance was started with.
func nodeInstanceArg(in *framework.Instance, flag string) string {
	for i, a := range in.ExtraArgs {
		if a == flag && i+1 < len(in.ExtraArgs) {
			return in.ExtraArgs[i+1]
		}
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

// nodeContainerLog returns what a finished container wrote: through `kubectl logs`, else (while the
// logs subresource is not wired) from the kubelet's CRI log file of its first attempt.
func nodeContainerLog(t *testing.T, ctx context.Context, in *framework.Instance, pod *corev1.Pod, container string) string {
	t.Helper()
	if out, _, err := in.Kubectl(ctx, "", "-n", pod.Namespace, "logs", pod.Name, "-c", container); err == nil {
		return out
	}
	path := filepath.Join(in.DataDir, "pods", string(pod.UID), "logs", container, "0.log")
	b, err := os.ReadFile(path)
	must(t, "reading the container's log file", err)
	// CRI format: "<time> <stream> <F|P> <text>"; P pieces continue on the next record.
	var out strings.Builder
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		f := strings.SplitN(line, " ", 4)
		if len(f) < 3 {
			continue
		}
		if len(f) == 4 {
			out.WriteString(f[3])
		}
		if f[2] == "F" {
			out.WriteString("\n")
		}
	}
	return out.String()
}

// TestNodePodLifecycle follows a pod from creation to Running and Ready through a watch, and checks the
// status the kubelet reports: conditions, container ID and image ID, the pod IP from the instance's pod
// CIDR and the node's IP as host IP.
func TestNodePodLifecycle(t *testing.T) {
	in, ctx, ns := nodeSetup(t)
	pw := nodeWatchPod(t, ctx, in, ns, "life")
	nodeCreatePod(t, ctx, in, ns, nodePod("life", corev1.RestartPolicyAlways, 1, nodeSh("main", "exec sleep 3600")))

	var phases []corev1.PodPhase
	pod := pw.until(ctx, nodeTimeout, "Running and Ready", func(p *corev1.Pod) bool {
		if len(phases) == 0 || phases[len(phases)-1] != p.Status.Phase {
			phases = append(phases, p.Status.Phase)
		}
		return runningReady(p)
	})
	t.Logf("the pod went through:\n  %s", strings.Join(pw.history, "\n  "))
	if len(phases) < 2 || phases[0] != corev1.PodPending || phases[len(phases)-1] != corev1.PodRunning {
		t.Errorf("phases seen %v, want Pending first and Running last", phases)
	}
	// Before running, a container waits as ContainerCreating, never as anything else.
	for _, h := range pw.history {
		if strings.Contains(h, "waiting(") && !strings.Contains(h, "waiting(ContainerCreating)") {
			t.Errorf("a version of the pod before Running shows an unexpected waiting reason: %s", h)
		}
	}
	for _, c := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady, corev1.PodReadyToStartContainers} {
		if got := nodeCond(pod, c); got != corev1.ConditionTrue {
			t.Errorf("condition %s = %q, want True", c, got)
		}
	}
	cs := nodeContainer(pod, "main")
	if cs == nil || cs.State.Running == nil || !cs.Ready || cs.Started == nil || !*cs.Started || cs.RestartCount != 0 {
		t.Fatalf("container status %+v, want running, started and ready with no restarts", cs)
	}
	if !strings.HasPrefix(cs.ContainerID, "containerd://") || len(cs.ContainerID) <= len("containerd://") {
		t.Errorf("containerID %q, want containerd://<id>", cs.ContainerID)
	}
	if cs.ImageID == "" {
		t.Error("imageID is empty")
	}
	if cs.Image != nodeSimImage {
		t.Errorf("image %q, want %q", cs.Image, nodeSimImage)
	}
	if pod.Status.StartTime == nil || cs.State.Running.StartedAt.IsZero() {
		t.Errorf("startTime %v, running.startedAt %v: want both set", pod.Status.StartTime, cs.State.Running.StartedAt)
	}

	_, cidr, err := net.ParseCIDR(nodeInstanceArg(in, "--pod-cidr"))
	must(t, "the instance's pod CIDR", err)
	ip := net.ParseIP(pod.Status.PodIP)
	if ip == nil || !cidr.Contains(ip) {
		t.Errorf("podIP %q, want an address in the instance's pod CIDR %s", pod.Status.PodIP, cidr)
	}
	if len(pod.Status.PodIPs) != 1 || pod.Status.PodIPs[0].IP != pod.Status.PodIP {
		t.Errorf("podIPs %v, want [%s]", pod.Status.PodIPs, pod.Status.PodIP)
	}
	node, err := in.Client.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
	must(t, "getting the pod's node", err)
	var nodeIP string
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			nodeIP = a.Address
		}
	}
	if pod.Status.HostIP == "" || pod.Status.HostIP != nodeIP {
		t.Errorf("hostIP %q, want the node's InternalIP %q", pod.Status.HostIP, nodeIP)
	}
	nodeWaitEvents(t, ctx, in, ns, "life", "Scheduled", "Created", "Started")
}

// TestNodeReadinessProbe: a container whose readiness probe starts passing only after a few seconds is
// Running but not Ready first, then Ready.
func TestNodeReadinessProbe(t *testing.T) {
	in, ctx, ns := nodeSetup(t)
	c := nodeSh("main", "sleep 6; touch /tmp/ready; exec sleep 3600")
	c.ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", "/tmp/ready"}}},
		PeriodSeconds: 1, FailureThreshold: 1, SuccessThreshold: 1,
	}
	pw := nodeWatchPod(t, ctx, in, ns, "ready")
	nodeCreatePod(t, ctx, in, ns, nodePod("ready", corev1.RestartPolicyAlways, 1, c))

	unready := pw.until(ctx, nodeTimeout, "Running with the container not ready", func(p *corev1.Pod) bool {
		cs := nodeContainer(p, "main")
		return p.Status.Phase == corev1.PodRunning && cs != nil && cs.State.Running != nil
	})
	if nodeCond(unready, corev1.PodReady) != corev1.ConditionFalse || nodeContainer(unready, "main").Ready {
		t.Fatalf("the first Running version is already ready (the probe cannot pass before 6 s): %s", nodePodSummary(unready))
	}
	ready := pw.until(ctx, nodeTimeout, "Ready", runningReady)
	cs := nodeContainer(ready, "main")
	if !cs.Ready || cs.RestartCount != 0 || cs.ContainerID != nodeContainer(unready, "main").ContainerID {
		t.Errorf("ready container %+v: want the same container, ready, never restarted", cs)
	}
	// A failing readiness probe never restarts anything.
	for _, h := range pw.history {
		if strings.Contains(h, "restarts=1") {
			t.Errorf("the container restarted: %s", h)
		}
	}
}

// TestNodeLivenessProbe: a container failing its liveness probe is killed and restarted, with Unhealthy
// and Killing events.
func TestNodeLivenessProbe(t *testing.T) {
	in, ctx, ns := nodeSetup(t)
	c := nodeSh("main", "exec sleep 3600")
	c.LivenessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", "/tmp/healthy"}}},
		PeriodSeconds: 1, FailureThreshold: 2, SuccessThreshold: 1,
	}
	pw := nodeWatchPod(t, ctx, in, ns, "live")
	nodeCreatePod(t, ctx, in, ns, nodePod("live", corev1.RestartPolicyAlways, 1, c))
	first := pw.until(ctx, nodeTimeout, "running", func(p *corev1.Pod) bool {
		cs := nodeContainer(p, "main")
		return cs != nil && cs.State.Running != nil
	})
	firstID := nodeContainer(first, "main").ContainerID
	restarted := pw.until(ctx, nodeTimeout, "a restart", func(p *corev1.Pod) bool {
		cs := nodeContainer(p, "main")
		return cs != nil && cs.RestartCount >= 1
	})
	cs := nodeContainer(restarted, "main")
	if cs.ContainerID == firstID {
		t.Errorf("restartCount %d but the container ID is still %s", cs.RestartCount, firstID)
	}
	if restarted.Status.Phase != corev1.PodRunning {
		t.Errorf("phase %s after a liveness restart, want Running (restartPolicy Always)", restarted.Status.Phase)
	}
	if last := cs.LastTerminationState.Terminated; last == nil || last.ContainerID != firstID {
		t.Errorf("lastState.terminated %+v, want the killed container %s", last, firstID)
	}
	events := nodeWaitEvents(t, ctx, in, ns, "live", "Unhealthy", "Killing")
	for _, e := range events {
		switch e.Reason {
		case "Unhealthy":
			if e.Type != corev1.EventTypeWarning || !strings.Contains(strings.ToLower(e.Message), "liveness probe failed") {
				t.Errorf("Unhealthy event %s %q, want a Warning about the liveness probe", e.Type, e.Message)
			}
		case "Killing":
			if !strings.Contains(e.Message, "liveness") {
				t.Errorf("Killing event %q, want it to name the failed liveness probe", e.Message)
			}
		}
		if e.Reason == "Unhealthy" || e.Reason == "Killing" {
			if e.InvolvedObject.FieldPath != "spec.containers{main}" {
				t.Errorf("%s event about %q, want spec.containers{main}", e.Reason, e.InvolvedObject.FieldPath)
			}
		}
	}
}

// TestNodeRestartPolicyNever: a container's exit code decides the phase of a pod that never restarts.
func TestNodeRestartPolicyNever(t *testing.T) {
	in, _, ns := nodeSetup(t)
	for _, tc := range []struct {
		name   string
		script string
		phase  corev1.PodPhase
		code   int32
		reason string
	}{
		{"fails", "exit 3", corev1.PodFailed, 3, "Error"},
		{"succeeds", "echo done; exit 0", corev1.PodSucceeded, 0, "Completed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// A context of the subtest's own: a parallel subtest may wait long for its turn, and the
			// parent's context counts that wait.
			ctx := nodeContext(t, 3*time.Minute)
			pw := nodeWatchPod(t, ctx, in, ns, tc.name)
			nodeCreatePod(t, ctx, in, ns, nodePod(tc.name, corev1.RestartPolicyNever, 1, nodeSh("main", tc.script)))
			pod := pw.until(ctx, nodeTimeout, "phase "+string(tc.phase), func(p *corev1.Pod) bool {
				return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
			})
			if pod.Status.Phase != tc.phase {
				t.Fatalf("phase %s, want %s: %s", pod.Status.Phase, tc.phase, nodePodSummary(pod))
			}
			cs := nodeContainer(pod, "main")
			term := cs.State.Terminated
			if term == nil || term.ExitCode != tc.code || term.Reason != tc.reason {
				t.Fatalf("terminated state %+v, want exit code %d reason %s", term, tc.code, tc.reason)
			}
			if cs.RestartCount != 0 || cs.Ready || term.ContainerID != cs.ContainerID || term.FinishedAt.IsZero() {
				t.Errorf("container status %+v: want no restarts, not ready, the container's ID and a finish time", cs)
			}
			if nodeCond(pod, corev1.PodReady) != corev1.ConditionFalse {
				t.Errorf("Ready = %s for a finished pod, want False", nodeCond(pod, corev1.PodReady))
			}
			// The pod stays as it finished: no restart happens later.
			time.Sleep(3 * time.Second)
			now, err := in.Client.CoreV1().Pods(ns).Get(ctx, tc.name, metav1.GetOptions{})
			must(t, "get", err)
			if now.Status.Phase != tc.phase || nodeContainer(now, "main").RestartCount != 0 {
				t.Errorf("3 s later: %s", nodePodSummary(now))
			}
		})
	}
}

// TestNodeInitContainerFails: with restartPolicy Never, a failing init container fails the pod and its
// main container never starts.
func TestNodeInitContainerFails(t *testing.T) {
	in, ctx, ns := nodeSetup(t)
	pod := nodePod("init", corev1.RestartPolicyNever, 1, nodeSh("main", "echo should-not-run; sleep 3600"))
	pod.Spec.InitContainers = []corev1.Container{nodeSh("setup", "echo setting up; exit 1")}
	pw := nodeWatchPod(t, ctx, in, ns, "init")
	nodeCreatePod(t, ctx, in, ns, pod)
	got := pw.until(ctx, nodeTimeout, "Failed", nodePhaseIs(corev1.PodFailed))

	for _, h := range pw.history {
		if strings.Contains(h, "[main running") || strings.Contains(h, "[main terminated") {
			t.Errorf("the main container ran: %s", h)
		}
	}
	init := nodeContainer(got, "setup")
	if init == nil || init.State.Terminated == nil || init.State.Terminated.ExitCode != 1 || init.State.Terminated.Reason != "Error" {
		t.Errorf("init container status %+v, want terminated with exit code 1, reason Error", init)
	}
	main := nodeContainer(got, "main")
	if main == nil || main.State.Waiting == nil || main.ContainerID != "" || main.RestartCount != 0 {
		t.Errorf("main container status %+v, want waiting, never created", main)
	}
	if nodeCond(got, corev1.PodInitialized) != corev1.ConditionFalse {
		t.Errorf("Initialized = %s, want False", nodeCond(got, corev1.PodInitialized))
	}
	time.Sleep(3 * time.Second)
	now, err := in.Client.CoreV1().Pods(ns).Get(ctx, "init", metav1.GetOptions{})
	must(t, "get", err)
	if now.Status.Phase != corev1.PodFailed || nodeContainer(now, "main").ContainerID != "" || nodeContainer(now, "setup").RestartCount != 0 {
		t.Errorf("3 s later: %s", nodePodSummary(now))
	}
}

// TestNodeCrashLoopBackOff: a container that keeps failing under restartPolicy OnFailure is restarted
// once at once, then waits in CrashLoopBackOff (the kubelet's real 10 s first back-off).
func TestNodeCrashLoopBackOff(t *testing.T) {
	in, ctx, ns := nodeSetup(t)
	pw := nodeWatchPod(t, ctx, in, ns, "crash")
	nodeCreatePod(t, ctx, in, ns, nodePod("crash", corev1.RestartPolicyOnFailure, 1, nodeSh("main", "echo crashing; exit 2")))
	pod := pw.until(ctx, nodeTimeout, "CrashLoopBackOff", func(p *corev1.Pod) bool {
		cs := nodeContainer(p, "main")
		return cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff"
	})
	cs := nodeContainer(pod, "main")
	if cs.RestartCount < 1 {
		t.Errorf("restartCount %d in CrashLoopBackOff, want ≥ 1", cs.RestartCount)
	}
	if !strings.Contains(cs.State.Waiting.Message, "back-off") {
		t.Errorf("waiting message %q, want it to mention the back-off", cs.State.Waiting.Message)
	}
	if last := cs.LastTerminationState.Terminated; last == nil || last.ExitCode != 2 || last.Reason != "Error" {
		t.Errorf("lastState.terminated %+v, want exit code 2, reason Error", last)
	}
	// OnFailure keeps a failing pod Running (the upstream kubelet's choice) or Pending, never Failed.
	if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		t.Errorf("phase %s in CrashLoopBackOff", pod.Status.Phase)
	}
	if nodeCond(pod, corev1.PodReady) != corev1.ConditionFalse {
		t.Errorf("Ready = %s in CrashLoopBackOff, want False", nodeCond(pod, corev1.PodReady))
	}
	nodeWaitEvents(t, ctx, in, ns, "crash", "BackOff")
	// After the back-off the container is tried again.
	pw.until(ctx, nodeTimeout, "a restart after the back-off", func(p *corev1.Pod) bool {
		cs := nodeContainer(p, "main")
		return cs != nil && cs.RestartCount > nodeContainer(pod, "main").RestartCount
	})
}

// TestNodeStartError: a container whose program does not exist fails to start. The kubelet says
// RunContainerError with the runtime's message, records the attempt as terminated with exit code 128
// and reason StartError (as containerd reports it), and then goes by the restart policy: Always starts
// it again with back-off, Never fails the pod.
func TestNodeStartError(t *testing.T) {
	in, _, ns := nodeSetup(t)
	missing := func(name string) corev1.Container {
		return corev1.Container{Name: name, Image: nodeSimImage, ImagePullPolicy: corev1.PullIfNotPresent, Command: []string{"/no/such/program"}}
	}
	isStartError := func(term *corev1.ContainerStateTerminated) bool {
		return term != nil && term.ExitCode == 128 && term.Reason == "StartError" && strings.Contains(term.Message, "/no/such/program")
	}
	t.Run("always", func(t *testing.T) {
		t.Parallel()
		ctx := nodeContext(t, 3*time.Minute)
		pw := nodeWatchPod(t, ctx, in, ns, "always")
		nodeCreatePod(t, ctx, in, ns, nodePod("always", corev1.RestartPolicyAlways, 1, missing("main")))
		sawRunError := false
		pod := pw.until(ctx, nodeTimeout, "a second failed start", func(p *corev1.Pod) bool {
			cs := nodeContainer(p, "main")
			if cs == nil {
				return false
			}
			if w := cs.State.Waiting; w != nil && w.Reason == "RunContainerError" && strings.Contains(w.Message, "/no/such/program") {
				sawRunError = true
			}
			return cs.RestartCount >= 1 && isStartError(cs.LastTerminationState.Terminated)
		})
		if !sawRunError {
			t.Errorf("the container never waited with RunContainerError naming the program: %v", pw.history)
		}
		if p := pod.Status.Phase; p == corev1.PodFailed || p == corev1.PodSucceeded || nodeCond(pod, corev1.PodReady) == corev1.ConditionTrue {
			t.Errorf("a container that cannot start: %s", nodePodSummary(pod))
		}
		nodeWaitEvents(t, ctx, in, ns, "always", "Failed")
	})
	t.Run("never", func(t *testing.T) {
		t.Parallel()
		ctx := nodeContext(t, 3*time.Minute)
		pw := nodeWatchPod(t, ctx, in, ns, "never")
		nodeCreatePod(t, ctx, in, ns, nodePod("never", corev1.RestartPolicyNever, 1, missing("main")))
		pod := pw.until(ctx, nodeTimeout, "Failed", nodePhaseIs(corev1.PodFailed))
		if cs := nodeContainer(pod, "main"); cs.RestartCount != 0 || !isStartError(cs.State.Terminated) {
			t.Errorf("container status %+v; want terminated with 128 StartError naming the program, no restarts", cs)
		}
	})
}

// TestNodeGracefulDeletion: a container that handles SIGTERM ends on it within the grace period; one that
// ignores it is killed when the grace period runs out. Either way the pod goes from the API once its
// containers have stopped.
func TestNodeGracefulDeletion(t *testing.T) {
	in, _, ns := nodeSetup(t)
	for _, tc := range []struct {
		name     string
		script   string
		grace    int64
		exitCode int32
	}{
		{"trapping", "trap 'echo bye; exit 0' TERM; echo up; while true; do sleep 1; done", 5, 0},
		{"ignoring", "trap '' TERM; echo up; while true; do sleep 1; done", 2, 137},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// A context of the subtest's own: a parallel subtest may wait long for its turn, and the
			// parent's context counts that wait.
			ctx := nodeContext(t, 3*time.Minute)
			// The pod's own grace period is long: the deletion's must be the one used.
			pod, pw := nodeStartPod(t, ctx, in, ns, nodePod(tc.name, corev1.RestartPolicyAlways, 120, nodeSh("main", tc.script)))
			// Running is not enough: until the shell has set its trap, a SIGTERM to it (PID 1 of its
			// container, where a signal with the default action is ignored) would be lost. "up" comes after.
			eventually(t, ctx, time.Minute, "the container's trap set (its \"up\" line)", func(ctx context.Context) (bool, error) {
				return strings.Contains(nodeContainerLog(t, ctx, in, pod, "main"), "up\n"), nil
			})
			started := time.Now()
			must(t, "delete", in.Client.CoreV1().Pods(ns).Delete(ctx, tc.name, metav1.DeleteOptions{GracePeriodSeconds: &tc.grace}))
			last := pw.untilDeleted(ctx, nodeTimeout)
			t.Logf("gone %s after the delete call (grace %d s)", time.Since(started).Round(100*time.Millisecond), tc.grace)
			// The kubelet's last status write shows how the container ended.
			final := nodeContainer(last, "main")
			if final == nil || final.State.Terminated == nil {
				t.Fatalf("the pod's last version shows no terminated container: %s\n  %s", nodePodSummary(last), strings.Join(pw.history, "\n  "))
			}
			if final.State.Terminated.ExitCode != tc.exitCode {
				t.Errorf("the container ended with exit code %d, want %d\n  %s", final.State.Terminated.ExitCode, tc.exitCode, strings.Join(pw.history, "\n  "))
			}
			if final.ContainerID != nodeContainer(pod, "main").ContainerID {
				t.Errorf("terminated container %s, want %s", final.ContainerID, nodeContainer(pod, "main").ContainerID)
			}
			if last.DeletionGracePeriodSeconds == nil || *last.DeletionGracePeriodSeconds != tc.grace && *last.DeletionGracePeriodSeconds != 0 {
				t.Errorf("deletionGracePeriodSeconds %v, want %d (or 0 once the kubelet confirmed)", last.DeletionGracePeriodSeconds, tc.grace)
			}
			nodeWaitEvents(t, ctx, in, ns, tc.name, "Killing")
			if _, err := os.Stat(filepath.Join(in.DataDir, "pods", string(pod.UID))); !os.IsNotExist(err) {
				t.Errorf("the pod's directory is still there after its deletion (%v)", err)
			}
		})
	}
}

// TestNodeClusterDNS: a second pod finds a Service by its cluster DNS name and fetches a page from the
// busybox httpd behind it (through the Service's ClusterIP), and looks the name up with nslookup.
func TestNodeClusterDNS(t *testing.T) {
	in, ctx, ns := nodeSetup(t)
	web := nodeSh("httpd", "mkdir -p /www && echo hello-from-$(hostname) > /www/index.html && exec httpd -f -p 8080 -h /www")
	web.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	web.ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}},
		PeriodSeconds: 1,
	}
	pod := nodePod("web", corev1.RestartPolicyAlways, 1, web)
	pod.Labels = map[string]string{"app": "web"}
	_, err := in.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 8080, TargetPort: intstr.FromString("http")}}},
	}, metav1.CreateOptions{})
	must(t, "creating the service", err)
	webPod, _ := nodeStartPod(t, ctx, in, ns, pod)

	host := fmt.Sprintf("web.%s.svc.cluster.local", ns)
	// The endpoints and the DNS server catch up with the pod shortly; the client retries for a while.
	script := fmt.Sprintf(`for i in $(seq 60); do
  if nslookup %[1]s >/tmp/ns 2>&1 && wget -q -O /tmp/page http://%[1]s:8080/; then
    echo "PAGE=$(cat /tmp/page)"; cat /tmp/ns; cat /etc/resolv.conf; exit 0
  fi
  sleep 1
done
cat /tmp/ns; cat /etc/resolv.conf; exit 1`, host)
	cpw := nodeWatchPod(t, ctx, in, ns, "client")
	client := nodeCreatePod(t, ctx, in, ns, nodePod("client", corev1.RestartPolicyNever, 1, nodeSh("main", script)))
	done := cpw.until(ctx, nodeTimeout, "the client finished", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
	out := nodeContainerLog(t, ctx, in, client, "main")
	if done.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("the client pod %s; its output:\n%s", nodePodSummary(done), out)
	}
	if want := "PAGE=hello-from-web"; !strings.Contains(out, want) {
		t.Errorf("the client's output lacks %q:\n%s", want, out)
	}
	// The Service has a ClusterIP, which carries traffic here (the Service proxy): its name resolves to it, as
	// on a cluster, not to the pod.
	svc, err := in.Client.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	must(t, "reading the service", err)
	if !strings.Contains(out, svc.Spec.ClusterIP) || strings.Contains(out, webPod.Status.PodIP) {
		t.Errorf("nslookup %s did not answer the Service's ClusterIP %s (the pod is %s):\n%s", host, svc.Spec.ClusterIP, webPod.Status.PodIP, out)
	}
	if !strings.Contains(out, "search "+ns+".svc.cluster.local svc.cluster.local cluster.local") {
		t.Errorf("the client's resolv.conf lacks the cluster search path:\n%s", out)
	}
}

// TestNodeEnvDownwardConfigMap: a container sees its env (literal, from a config map, from the downward
// API) and its config map and downward API volumes.
func TestNodeEnvDownwardConfigMap(t *testing.T) {
	in, ctx, ns := nodeSetup(t)
	_, err := in.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings"},
		Data:       map[string]string{"color": "teal", "app.conf": "threads=4\n"},
	}, metav1.CreateOptions{})
	must(t, "creating the config map", err)

	c := nodeSh("main", `echo "GREETING=$GREETING"; echo "COLOR=$COLOR"; echo "POD_NAME=$POD_NAME"; echo "POD_NS=$POD_NS"
echo "POD_IP=$POD_IP"; echo "NODE=$NODE"; echo "MEM_LIMIT=$MEM_LIMIT"; echo "CONF=$(cat /etc/config/app.conf)"
echo "LABELS=$(cat /etc/podinfo/labels | tr '\n' ' ')"; echo "VOL_NAME=$(cat /etc/podinfo/name)"`)
	c.Env = []corev1.EnvVar{
		{Name: "GREETING", Value: "hello"},
		{Name: "COLOR", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "color"}}},
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "POD_NS", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		{Name: "MEM_LIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
	}
	c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "config", MountPath: "/etc/config"}, {Name: "podinfo", MountPath: "/etc/podinfo"}}
	pod := nodePod("env", corev1.RestartPolicyNever, 1, c)
	pod.Labels = map[string]string{"tier": "backend"}
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}},
		{Name: "podinfo", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
			{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}},
		}}}},
	}
	pw := nodeWatchPod(t, ctx, in, ns, "env")
	created := nodeCreatePod(t, ctx, in, ns, pod)
	done := pw.until(ctx, nodeTimeout, "finished", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
	out := nodeContainerLog(t, ctx, in, created, "main")
	if done.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("%s; output:\n%s", nodePodSummary(done), out)
	}
	node := done.Spec.NodeName
	for _, want := range []string{
		"GREETING=hello", "COLOR=teal", "POD_NAME=env", "POD_NS=" + ns, "POD_IP=" + done.Status.PodIP, "NODE=" + node,
		"MEM_LIMIT=64", "CONF=threads=4", `LABELS=tier="backend"`, "VOL_NAME=env",
	} {
		if !strings.Contains(out, want+"\n") && !strings.Contains(out, want+" ") {
			t.Errorf("the container's output lacks %q:\n%s", want, out)
		}
	}
	if done.Status.PodIP == "" {
		t.Error("the pod has no IP")
	}
}

// TestNodeOOMKilled: a container allocating past its memory limit is killed by the kernel and reported
// as OOMKilled.
func TestNodeOOMKilled(t *testing.T) {
	in, ctx, ns := nodeSetup(t)
	if _, err := os.Stat("/sys/fs/cgroup/memory/memory.limit_in_bytes"); err != nil {
		if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil {
			t.Skip("no memory cgroup controller here")
		}
	}
	c := nodeSh("hog", "exec dd if=/dev/zero of=/dev/null bs=200M count=1")
	c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")}
	pw := nodeWatchPod(t, ctx, in, ns, "oom")
	nodeCreatePod(t, ctx, in, ns, nodePod("oom", corev1.RestartPolicyNever, 1, c))
	pod := pw.until(ctx, nodeTimeout, "finished", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
	term := nodeContainer(pod, "hog").State.Terminated
	if pod.Status.Phase != corev1.PodFailed || term == nil || term.Reason != "OOMKilled" || term.ExitCode != 137 {
		t.Errorf("%s: terminated %+v, want phase Failed, reason OOMKilled, exit code 137", nodePodSummary(pod), term)
	}
}

// TestNodeRestartAndPurge stops `rayctl up` with pods running and starts it again: the kubelet re-adopts
// the running container (same container ID, no restart, log continuing). Deleting a pod then removes its
// network namespace and directory, and `rayctl down --purge` after a stop leaves no container, network
// namespace, bridge or shim behind.
func TestNodeRestartAndPurge(t *testing.T) {
	t.Parallel()
	ctx := nodeContext(t, 4*time.Minute)
	in := startOwn(t)
	ns := newNamespace(t, ctx, in)

	keep, kw := nodeStartPod(t, ctx, in, ns, nodePod("keep", corev1.RestartPolicyAlways, 1, nodeSh("main", "echo hello; i=0; while true; do echo tick $i; i=$((i+1)); sleep 1; done")))
	left, lw := nodeStartPod(t, ctx, in, ns, nodePod("left", corev1.RestartPolicyAlways, 1, nodeSh("main", "exec sleep 3600")))
	keepCS := nodeContainer(keep, "main")
	kw.stop()
	lw.stop()

	must(t, "stopping rayctl up", in.Stop())
	must(t, "restarting rayctl up", in.Restart())
	// A pod created after the restart runs: the new kubelet is syncing.
	_, aw := nodeStartPod(t, ctx, in, ns, nodePod("after", corev1.RestartPolicyAlways, 1, nodeSh("main", "exec sleep 3600")))
	aw.stop()
	now, err := in.Client.CoreV1().Pods(ns).Get(ctx, "keep", metav1.GetOptions{})
	must(t, "get", err)
	cs := nodeContainer(now, "main")
	if !runningReady(now) || cs.ContainerID != keepCS.ContainerID || cs.RestartCount != keepCS.RestartCount || now.Status.PodIP != keep.Status.PodIP {
		t.Errorf("after the restart: %s, container %s, pod IP %s; want Running and Ready, container %s, restarts %d, pod IP %s",
			nodePodSummary(now), cs.ContainerID, now.Status.PodIP, keepCS.ContainerID, keepCS.RestartCount, keep.Status.PodIP)
	}
	// The same process kept going: one "hello", and ticks still being written after the restart.
	out := nodeContainerLog(t, ctx, in, now, "main")
	if n := strings.Count(out, "hello\n"); n != 1 {
		t.Errorf("the container's log has %d hello lines, want 1 (one process from start to now):\n%s", n, out)
	}
	ticks := strings.Count(out, "tick ")
	eventually(t, ctx, 30*time.Second, "the re-adopted container logging on", func(ctx context.Context) (bool, error) {
		return strings.Count(nodeContainerLog(t, ctx, in, now, "main"), "tick ") > ticks, nil
	})

	// Deleting a running pod removes its network namespace and its directory.
	netnsDir := filepath.Join(in.DataDir, "network", "netns")
	if _, err := os.Stat(filepath.Join(netnsDir, string(keep.UID))); err != nil {
		t.Errorf("the running pod's netns file: %v", err)
	}
	pw := nodeWatchPod(t, ctx, in, ns, "keep")
	one := int64(1)
	must(t, "delete keep", in.Client.CoreV1().Pods(ns).Delete(ctx, "keep", metav1.DeleteOptions{GracePeriodSeconds: &one}))
	pw.untilDeleted(ctx, nodeTimeout)
	pw.stop()
	for _, p := range []string{filepath.Join(netnsDir, string(keep.UID)), filepath.Join(in.DataDir, "pods", string(keep.UID))} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there after the pod's deletion (%v)", p, err)
		}
	}

	// Stop with pods still running, then purge.
	if _, err := os.Stat(filepath.Join(netnsDir, string(left.UID))); err != nil {
		t.Errorf("the running pod's netns file: %v", err)
	}
	// The bridge is in rayctl's node network namespace, whose file stays mounted while pods run; the
	// host's namespace has no such link.
	bridge := nodeInstanceArg(in, "--bridge")
	if _, err := net.InterfaceByName(bridge); err == nil {
		t.Errorf("the bridge %s is in the host's network namespace", bridge)
	}
	nodeNS := filepath.Join(in.DataDir, "network", "node.netns")
	if !isMountPoint(t, nodeNS) {
		t.Errorf("the node namespace %s is not mounted while pods run", nodeNS)
	}
	must(t, "stopping rayctl up", in.Stop())
	if shims := nodeShimsOf(in.DataDir); len(shims) == 0 {
		t.Errorf("no containerd shim of %s after a stop: pods' containers should keep running until purged", in.DataDir)
	}
	out, err = in.Rayctl(ctx, "down", "--purge")
	if err != nil {
		t.Fatalf("rayctl down --purge: %v\n%s", err, out)
	}
	t.Logf("rayctl down --purge: %s", strings.TrimSpace(out))
	entries, err := os.ReadDir(netnsDir)
	if err != nil && !os.IsNotExist(err) {
		t.Errorf("reading %s: %v", netnsDir, err)
	}
	for _, e := range entries {
		t.Errorf("netns file %s left after the purge", e.Name())
	}
	if _, err := os.Stat(nodeNS); !os.IsNotExist(err) {
		t.Errorf("the node namespace %s (with the bridge %s) is still there after the purge: %v", nodeNS, bridge, err)
	}
	eventually(t, ctx, 30*time.Second, "no containerd shim of the data dir after the purge", func(context.Context) (bool, error) {
		if shims := nodeShimsOf(in.DataDir); len(shims) > 0 {
			return false, fmt.Errorf("still running: %s", strings.Join(shims, "; "))
		}
		return true, nil
	})
	// A second purge finds nothing to remove.
	out, err = in.Rayctl(ctx, "down", "--purge")
	if err != nil {
		t.Fatalf("a second rayctl down --purge: %v\n%s", err, out)
	}
	if !strings.Contains(out, "removed 0 containers and 0 pod sandboxes") {
		t.Errorf("a second purge: %q, want it to find 0 containers and 0 sandboxes", out)
	}
}

// nodeShimsOf lists the command lines of running containerd shims serving the data dir's containerd.
func nodeShimsOf(dataDir string) []string {
	var out []string
	for _, cmd := range commandLinesNaming(dataDir) {
		if strings.Contains(cmd, "containerd-shim") {
			out = append(out, cmd)
		}
	}
	return out
}

// commandLinesNaming lists "pid command line" of the running processes whose command line names a path
// under dataDir (a zombie's is empty).
func commandLinesNaming(dataDir string) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		cmd := strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")
		if strings.Contains(cmd, dataDir+"/") {
			out = append(out, filepath.Base(filepath.Dir(p))+" "+cmd)
		}
	}
	return out
}

// isMountPoint reports whether path is a mount point in this process's mount namespace.
func isMountPoint(t *testing.T, path string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	must(t, "reading mountinfo", err)
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == path {
			return true
		}
	}
	return false
}
