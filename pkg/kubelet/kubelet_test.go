package kubelet_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rayctl/rayctl/pkg/runtime"
	"github.com/rayctl/rayctl/pkg/runtime/fake"
)

func TestNodeRegistersWithLeaseAndCapacity(t *testing.T) {
	e := newEnv(t, fake.New(fake.Options{}))
	ctx := context.Background()
	n, err := e.client.CoreV1().Nodes().Get(ctx, e.node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Status.NodeInfo.ContainerRuntimeVersion != "fake://0.1" || n.Status.NodeInfo.KubeletVersion != "v1.37.2" {
		t.Errorf("nodeInfo = %+v", n.Status.NodeInfo)
	}
	if n.Status.NodeInfo.KernelVersion == "" || n.Status.NodeInfo.OSImage == "" {
		t.Errorf("nodeInfo lacks kernel or OS image: %+v", n.Status.NodeInfo)
	}
	if pods := n.Status.Allocatable[corev1.ResourcePods]; pods.Value() != 110 {
		t.Errorf("allocatable pods = %s, want 110", pods.String())
	}
	if cpu := n.Status.Capacity[corev1.ResourceCPU]; cpu.Value() < 1 {
		t.Errorf("capacity cpu = %s", cpu.String())
	}
	if mem := n.Status.Capacity[corev1.ResourceMemory]; mem.Value() < 1<<20 {
		t.Errorf("capacity memory = %s", mem.String())
	}
	ready := false
	types := map[corev1.NodeConditionType]bool{}
	for _, c := range n.Status.Conditions {
		types[c.Type] = true
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && !c.LastHeartbeatTime.IsZero() {
			ready = true
		}
	}
	if !ready || !types[corev1.NodeMemoryPressure] || !types[corev1.NodeDiskPressure] || !types[corev1.NodePIDPressure] {
		t.Errorf("conditions = %+v", n.Status.Conditions)
	}
	if !slices.ContainsFunc(n.Status.Addresses, func(a corev1.NodeAddress) bool { return a.Type == corev1.NodeInternalIP && a.Address == "127.0.0.1" }) {
		t.Errorf("addresses = %+v", n.Status.Addresses)
	}
	lease, err := e.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, e.node, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("node lease: %v", err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != e.node || lease.Spec.LeaseDurationSeconds == nil || *lease.Spec.LeaseDurationSeconds != 40 || lease.Spec.RenewTime == nil {
		t.Errorf("lease spec = %+v", lease.Spec)
	}
}

func TestPodGoesFromContainerCreatingToRunningAndReady(t *testing.T) {
	rt := fake.New(fake.Options{Script: func(*runtime.Sandbox, runtime.ContainerConfig) fake.Script {
		return fake.Script{StartDelay: 400 * time.Millisecond}
	}})
	e := newEnv(t, rt)
	created := e.create(e.pod("web"))
	p, seen := e.waitPodSince(created, "web", 30*time.Second, "Running and Ready", func(p *corev1.Pod) bool {
		return p != nil && p.Status.Phase == corev1.PodRunning && conditionIs(p, corev1.PodReady, corev1.ConditionTrue)
	})
	creating := false
	for _, s := range seen {
		if cs := containerStatus(s, "main"); cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason == "ContainerCreating" && s.Status.Phase == corev1.PodPending {
			creating = true
		}
	}
	if !creating {
		t.Errorf("never saw Pending with ContainerCreating; saw %d versions", len(seen))
	}
	for _, c := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		if !conditionIs(p, c, corev1.ConditionTrue) {
			t.Errorf("condition %s not True: %s", c, describe(p))
		}
	}
	cs := containerStatus(p, "main")
	if !strings.HasPrefix(cs.ContainerID, "fake://") || cs.State.Running == nil || !cs.Ready || cs.Started == nil || !*cs.Started || cs.ImageID == "" {
		t.Errorf("container status = %+v", cs)
	}
	if p.Status.PodIP == "" || len(p.Status.PodIPs) != 1 || p.Status.HostIP != "127.0.0.1" || p.Status.StartTime == nil || p.Status.QOSClass != corev1.PodQOSBestEffort {
		t.Errorf("status = podIP %q podIPs %v hostIP %q startTime %v qos %q", p.Status.PodIP, p.Status.PodIPs, p.Status.HostIP, p.Status.StartTime, p.Status.QOSClass)
	}
	for _, reason := range []string{"Pulling", "Pulled", "Created", "Started"} {
		ev := e.waitEvent("web", reason, 10*time.Second)
		if ev.ReportingController != "kubelet" || ev.Source.Component != "kubelet" {
			t.Errorf("%s event from %q/%q, want kubelet", reason, ev.ReportingController, ev.Source.Component)
		}
	}
	e.mu.Lock()
	writes := len(e.writes)
	e.mu.Unlock()
	if writes == 0 {
		t.Error("OnStatusWrite was never called")
	}
}

func TestNeverRestartedContainerExitingOneFailsThePod(t *testing.T) {
	rt := fake.New(fake.Options{Script: func(*runtime.Sandbox, runtime.ContainerConfig) fake.Script {
		return fake.Script{RunFor: 200 * time.Millisecond, ExitCode: 1}
	}})
	e := newEnv(t, rt)
	e.create(e.pod("fails", func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever }))
	p, _ := e.waitPod("fails", 30*time.Second, "Failed", func(p *corev1.Pod) bool { return p != nil && p.Status.Phase == corev1.PodFailed })
	term := containerStatus(p, "main").State.Terminated
	if term == nil || term.ExitCode != 1 || term.Reason != "Error" || term.FinishedAt.IsZero() {
		t.Fatalf("terminated = %+v", term)
	}
	if conditionIs(p, corev1.PodReady, corev1.ConditionTrue) {
		t.Error("a failed pod reports Ready")
	}
	if n := len(rt.Find(string(p.UID), "main")); n != 1 {
		t.Errorf("%d containers were made, want 1 (Never restarts)", n)
	}
}

// TestStartErrorFollowsTheRestartPolicy: a container that fails to start (exit 128, StartError) shows
// RunContainerError and is started again under Always; under Never the pod fails and the container
// shows as it ended, with nothing waiting.
func TestStartErrorFollowsTheRestartPolicy(t *testing.T) {
	rt := fake.New(fake.Options{Script: func(_ *runtime.Sandbox, cfg runtime.ContainerConfig) fake.Script {
		if cfg.Attempt == 0 {
			return fake.Script{StartError: errors.New(`exec: "/no/such/program": no such file or directory`)}
		}
		return fake.Script{}
	}})
	e := newEnv(t, rt)
	created := e.create(e.pod("always"))
	p, seen := e.waitPodSince(created, "always", 30*time.Second, "Running after a failed start", func(p *corev1.Pod) bool {
		cs := containerStatus(p, "main")
		return cs != nil && cs.State.Running != nil && cs.RestartCount == 1
	})
	if last := containerStatus(p, "main").LastTerminationState.Terminated; last == nil || last.ExitCode != 128 || last.Reason != "StartError" {
		t.Errorf("lastState.terminated %+v, want exit 128 StartError", last)
	}
	if !slices.ContainsFunc(seen, func(s *corev1.Pod) bool {
		cs := containerStatus(s, "main")
		return cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason == "RunContainerError" && strings.Contains(cs.State.Waiting.Message, "/no/such/program")
	}) {
		t.Errorf("never saw RunContainerError naming the program among %d versions", len(seen))
	}
	e.waitEvent("always", "Failed", 10*time.Second)

	created = e.create(e.pod("never", func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever }))
	p, _ = e.waitPodSince(created, "never", 30*time.Second, "Failed", func(p *corev1.Pod) bool { return p != nil && p.Status.Phase == corev1.PodFailed })
	cs := containerStatus(p, "main")
	if term := cs.State.Terminated; cs.State.Waiting != nil || term == nil || term.ExitCode != 128 || term.Reason != "StartError" || cs.RestartCount != 0 {
		t.Errorf("container status %+v, want terminated 128 StartError with no restart", cs)
	}
}

// TestCreatedContainerIsStartedAgain: a start that failed without the runtime recording it leaves the
// container created; the kubelet starts a new attempt rather than leave the pod waiting for ever, even
// under restartPolicy Never (nothing ran).
func TestCreatedContainerIsStartedAgain(t *testing.T) {
	rt := fake.New(fake.Options{Script: func(_ *runtime.Sandbox, cfg runtime.ContainerConfig) fake.Script {
		if cfg.Attempt == 0 {
			return fake.Script{StartError: errors.New("connection to the runtime lost"), StartErrorLeavesCreated: true}
		}
		return fake.Script{}
	}})
	e := newEnv(t, rt)
	created := e.create(e.pod("created", func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever }))
	p, _ := e.waitPodSince(created, "created", 30*time.Second, "Running and Ready", func(p *corev1.Pod) bool {
		return p != nil && p.Status.Phase == corev1.PodRunning && conditionIs(p, corev1.PodReady, corev1.ConditionTrue)
	})
	if cs := containerStatus(p, "main"); cs.RestartCount != 1 {
		t.Errorf("restartCount %d, want 1 (the attempt that never started, then this one)", cs.RestartCount)
	}
}

func TestOnFailureRestartsIntoCrashLoopBackOff(t *testing.T) {
	rt := fake.New(fake.Options{Script: func(*runtime.Sandbox, runtime.ContainerConfig) fake.Script {
		return fake.Script{RunFor: 100 * time.Millisecond, ExitCode: 1}
	}})
	e := newEnv(t, rt)
	created := e.create(e.pod("crashy", func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure }))
	p, seen := e.waitPodSince(created, "crashy", 60*time.Second, "restartCount >= 3", func(p *corev1.Pod) bool {
		cs := containerStatus(p, "main")
		return cs != nil && cs.RestartCount >= 3
	})
	var backoff *corev1.ContainerStateWaiting
	counts := []int32{}
	for _, s := range seen {
		cs := containerStatus(s, "main")
		if cs == nil {
			continue
		}
		counts = append(counts, cs.RestartCount)
		if w := cs.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
			backoff = w
			if lt := cs.LastTerminationState.Terminated; lt == nil || lt.ExitCode != 1 {
				t.Errorf("CrashLoopBackOff without lastState terminated exit 1: %+v", cs.LastTerminationState)
			}
		}
	}
	if backoff == nil {
		t.Fatalf("never saw CrashLoopBackOff; restart counts seen %v", counts)
	}
	if !strings.HasPrefix(backoff.Message, "back-off ") || !strings.Contains(backoff.Message, "restarting failed container=main pod=crashy_"+e.ns) {
		t.Errorf("CrashLoopBackOff message = %q", backoff.Message)
	}
	if !slices.IsSorted(counts) {
		t.Errorf("restart counts went backwards: %v", counts)
	}
	if p.Status.Phase != corev1.PodRunning && p.Status.Phase != corev1.PodPending {
		t.Errorf("phase = %s, want Running while restarting", p.Status.Phase)
	}
	e.waitEvent("crashy", "BackOff", 10*time.Second)
}

func TestFailingInitContainerBlocksTheContainers(t *testing.T) {
	rt := fake.New(fake.Options{Script: func(_ *runtime.Sandbox, cfg runtime.ContainerConfig) fake.Script {
		if cfg.Name == "setup" {
			return fake.Script{RunFor: 100 * time.Millisecond, ExitCode: 2}
		}
		return fake.Script{}
	}})
	e := newEnv(t, rt)
	withInit := func(p *corev1.Pod) {
		p.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "busybox:1.36", Command: []string{"false"}}}
	}
	e.create(e.pod("blocked", withInit))
	p, _ := e.waitPod("blocked", 30*time.Second, "init restarted", func(p *corev1.Pod) bool {
		cs := containerStatus(p, "setup")
		return cs != nil && cs.RestartCount >= 1 && conditionIs(p, corev1.PodInitialized, corev1.ConditionFalse)
	})
	if p.Status.Phase != corev1.PodPending {
		t.Errorf("phase = %s, want Pending", p.Status.Phase)
	}
	if cs := containerStatus(p, "main"); cs == nil || cs.State.Waiting == nil || cs.State.Waiting.Reason != "PodInitializing" {
		t.Errorf("main = %+v, want waiting PodInitializing", cs)
	}
	if c := condition(p, corev1.PodInitialized); c.Reason != "ContainersNotInitialized" || !strings.Contains(c.Message, "setup") {
		t.Errorf("Initialized = %+v", c)
	}
	if n := len(rt.Find(string(p.UID), "main")); n != 0 {
		t.Errorf("main was created %d times while its init container fails", n)
	}

	e.create(e.pod("blocked-never", withInit, func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever }))
	p, _ = e.waitPod("blocked-never", 30*time.Second, "Failed", func(p *corev1.Pod) bool { return p != nil && p.Status.Phase == corev1.PodFailed })
	if cs := containerStatus(p, "setup"); cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 2 || cs.RestartCount != 0 {
		t.Errorf("setup = %+v", cs)
	}
	if n := len(rt.Find(string(p.UID), "main")); n != 0 {
		t.Errorf("main was created %d times after its init container failed", n)
	}
}

func TestInitContainersRunInOrderBeforeContainers(t *testing.T) {
	rt := fake.New(fake.Options{Script: func(_ *runtime.Sandbox, cfg runtime.ContainerConfig) fake.Script {
		if strings.HasPrefix(cfg.Name, "init") {
			return fake.Script{RunFor: 50 * time.Millisecond}
		}
		return fake.Script{}
	}})
	e := newEnv(t, rt)
	e.create(e.pod("ordered", func(p *corev1.Pod) {
		p.Spec.InitContainers = []corev1.Container{{Name: "init-a", Image: "busybox:1.36"}, {Name: "init-b", Image: "busybox:1.36"}}
	}))
	p, _ := e.waitPod("ordered", 30*time.Second, "Ready", func(p *corev1.Pod) bool { return conditionIs(p, corev1.PodReady, corev1.ConditionTrue) })
	var order []string
	for _, c := range rt.History() {
		if c.Sandbox.PodUID == string(p.UID) {
			order = append(order, c.Config.Name)
		}
	}
	if !slices.Equal(order, []string{"init-a", "init-b", "main"}) {
		t.Errorf("creation order = %v", order)
	}
	for _, name := range []string{"init-a", "init-b"} {
		if cs := containerStatus(p, name); cs.State.Terminated == nil || cs.State.Terminated.Reason != "Completed" {
			t.Errorf("%s = %+v", name, cs.State)
		}
	}
}

// The fake runtime's own behaviour (no script): the kubelet tells it which containers are init
// containers, an init container completes, and the pod goes on to Running and Ready.
func TestInitContainerCompletesOnTheFakeRuntime(t *testing.T) {
	rt := fake.New(fake.Options{})
	e := newEnv(t, rt)
	e.create(e.pod("initialized", func(p *corev1.Pod) {
		p.Spec.InitContainers = []corev1.Container{{Name: "wait", Image: "busybox:1.36", Command: []string{"sh", "-c", "until nslookup head; do sleep 1; done"}}}
	}))
	p, _ := e.waitPod("initialized", 30*time.Second, "Ready", func(p *corev1.Pod) bool { return conditionIs(p, corev1.PodReady, corev1.ConditionTrue) })
	if p.Status.Phase != corev1.PodRunning || !conditionIs(p, corev1.PodInitialized, corev1.ConditionTrue) {
		t.Errorf("phase = %s, conditions = %+v", p.Status.Phase, p.Status.Conditions)
	}
	if cs := p.Status.InitContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != 0 {
		t.Errorf("init container statuses = %+v, want wait terminated with exit code 0", cs)
	}
	for name, init := range map[string]bool{"wait": true, "main": false} {
		if c, err := rt.Latest(string(p.UID), name); err != nil || c.Config.Init != init {
			t.Errorf("%s: runtime was told Init=%v (%v), want %v", name, c.Config.Init, err, init)
		}
	}
}

// probeExec answers exec probes: the command's first word names a flag that decides the exit code.
type probeExec struct{ healthy, ready atomic.Bool }

func (pe *probeExec) exec(c *fake.Container, cmd []string, _ runtime.ExecIO) (int, error) {
	ok := true
	switch cmd[0] {
	case "ready-check":
		ok = pe.ready.Load()
	case "live-check":
		ok = pe.healthy.Load()
	}
	if ok {
		return 0, nil
	}
	return 1, nil
}

func TestReadinessProbeFailureMakesThePodNotReady(t *testing.T) {
	pe := &probeExec{}
	rt := fake.New(fake.Options{Exec: pe.exec})
	e := newEnv(t, rt)
	e.create(e.pod("probed", func(p *corev1.Pod) {
		p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"ready-check"}}},
			PeriodSeconds: 1, FailureThreshold: 1, SuccessThreshold: 1,
		}
	}))
	p, _ := e.waitPod("probed", 30*time.Second, "running, not ready", func(p *corev1.Pod) bool {
		cs := containerStatus(p, "main")
		return cs != nil && cs.State.Running != nil && conditionIs(p, corev1.PodReady, corev1.ConditionFalse)
	})
	if containerStatus(p, "main").Ready {
		t.Error("container ready while its readiness probe fails")
	}
	if c := condition(p, corev1.ContainersReady); c == nil || c.Status != corev1.ConditionFalse || c.Reason != "ContainersNotReady" {
		t.Errorf("ContainersReady = %+v", c)
	}
	e.waitEvent("probed", "Unhealthy", 15*time.Second)
	pe.ready.Store(true)
	e.waitPod("probed", 30*time.Second, "Ready after the probe passes", func(p *corev1.Pod) bool {
		return conditionIs(p, corev1.PodReady, corev1.ConditionTrue)
	})
	pe.ready.Store(false)
	p, _ = e.waitPod("probed", 30*time.Second, "not Ready again", func(p *corev1.Pod) bool {
		return conditionIs(p, corev1.PodReady, corev1.ConditionFalse)
	})
	if cs := containerStatus(p, "main"); cs.RestartCount != 0 || cs.State.Running == nil {
		t.Errorf("readiness failure restarted the container: %+v", cs)
	}
}

func TestLivenessProbeFailureRestartsTheContainer(t *testing.T) {
	pe := &probeExec{}
	rt := fake.New(fake.Options{Exec: pe.exec})
	e := newEnv(t, rt)
	e.create(e.pod("unhealthy", func(p *corev1.Pod) {
		p.Spec.Containers[0].LivenessProbe = &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"live-check"}}},
			PeriodSeconds: 1, FailureThreshold: 2,
		}
	}))
	p, _ := e.waitPod("unhealthy", 60*time.Second, "restarted by liveness", func(p *corev1.Pod) bool {
		cs := containerStatus(p, "main")
		return cs != nil && cs.RestartCount >= 1
	})
	pe.healthy.Store(true)
	ev := e.waitEvent("unhealthy", "Unhealthy", 10*time.Second)
	if !strings.HasPrefix(ev.Message, "Liveness probe failed") {
		t.Errorf("Unhealthy message = %q", ev.Message)
	}
	kill := e.waitEvent("unhealthy", "Killing", 10*time.Second)
	if !strings.Contains(kill.Message, "failed liveness probe, will be restarted") {
		t.Errorf("Killing message = %q", kill.Message)
	}
	first := rt.Find(string(p.UID), "main")[0]
	if first.StoppedAt.IsZero() {
		t.Error("the first container was not stopped")
	}
}

func TestGracefulDeletionStopsContainersAndRemovesThePod(t *testing.T) {
	rt := fake.New(fake.Options{})
	e := newEnv(t, rt)
	e.create(e.pod("doomed", func(p *corev1.Pod) {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "sidecar", Image: "busybox:1.36"})
	}))
	p, _ := e.waitPod("doomed", 30*time.Second, "Ready", func(p *corev1.Pod) bool { return conditionIs(p, corev1.PodReady, corev1.ConditionTrue) })
	grace := int64(2)
	if err := e.client.CoreV1().Pods(e.ns).Delete(context.Background(), "doomed", metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	e.waitPod("doomed", 30*time.Second, "gone from the API", func(p *corev1.Pod) bool { return p == nil })
	for _, name := range []string{"main", "sidecar"} {
		cs := rt.Find(string(p.UID), name)
		if len(cs) != 1 {
			t.Fatalf("%s: %d containers", name, len(cs))
		}
		if cs[0].StoppedAt.IsZero() || cs[0].StopGrace != 2*time.Second || !cs[0].Removed {
			t.Errorf("%s: stopped %v with grace %s, removed %v; want stopped with 2s and removed", name, cs[0].StoppedAt, cs[0].StopGrace, cs[0].Removed)
		}
	}
	sbs, _ := rt.ListSandboxes(context.Background())
	if slices.ContainsFunc(sbs, func(s *runtime.Sandbox) bool { return s.PodUID == string(p.UID) }) {
		t.Error("the sandbox is still there")
	}
	e.waitEvent("doomed", "Killing", 10*time.Second)
	if _, err := os.Stat(filepath.Join(e.dir, string(p.UID))); !os.IsNotExist(err) {
		t.Errorf("pod dir still there: %v", err)
	}
}

func TestEnvironmentDownwardAPIAndVolumesReachTheRuntime(t *testing.T) {
	rt := fake.New(fake.Options{})
	e := newEnv(t, rt)
	ctx := context.Background()
	if _, err := e.client.CoreV1().ConfigMaps(e.ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"mode": "fast", "ray.conf": "num_cpus=2\n"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.CoreV1().Secrets(e.ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds"}, Data: map[string][]byte{"token": []byte("s3cret")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	optional := true
	e.create(e.pod("envy", func(p *corev1.Pod) {
		p.Labels["tier"] = "head"
		c := &p.Spec.Containers[0]
		c.Command = []string{"sh", "-c", "echo $(GREETING) $$(HOME) $(UNDEFINED)"}
		c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi"), corev1.ResourceCPU: resource.MustParse("1500m")}
		c.EnvFrom = []corev1.EnvFromSource{
			{Prefix: "CFG_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}},
			{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Optional: &optional}},
		}
		c.Env = []corev1.EnvVar{
			{Name: "NAME", Value: "world"},
			{Name: "GREETING", Value: "hello-$(NAME)"},
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "POD_NS", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
			{Name: "TIER", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['tier']"}}},
			{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
			{Name: "MEM_MB", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
			{Name: "CPUS", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}},
			{Name: "MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "mode"}}},
			{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "token"}}},
		}
		c.VolumeMounts = []corev1.VolumeMount{
			{Name: "config", MountPath: "/etc/ray"},
			{Name: "info", MountPath: "/etc/podinfo", ReadOnly: true},
			{Name: "scratch", MountPath: "/tmp/scratch"},
		}
		p.Spec.Volumes = []corev1.Volume{
			{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}},
			{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
				{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}},
			}}}},
			{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		}
	}))
	p, _ := e.waitPod("envy", 30*time.Second, "Ready", func(p *corev1.Pod) bool { return conditionIs(p, corev1.PodReady, corev1.ConditionTrue) })
	c, err := rt.Latest(string(p.UID), "main")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, v := range c.Config.Env {
		env[v.Name] = v.Value
	}
	want := map[string]string{
		"CFG_mode": "fast", "NAME": "world", "GREETING": "hello-world", "POD_NAME": "envy", "POD_NS": e.ns, "TIER": "head",
		"POD_IP": p.Status.PodIP, "NODE": e.node, "MEM_MB": "256", "CPUS": "2", "MODE": "fast", "TOKEN": "s3cret",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("env %s = %q, want %q", k, env[k], v)
		}
	}
	if env["CFG_ray.conf"] != "num_cpus=2\n" {
		t.Errorf("env CFG_ray.conf = %q (dots are allowed in names)", env["CFG_ray.conf"])
	}
	if got := c.Config.Command[2]; got != "echo hello-world $(HOME) $(UNDEFINED)" {
		t.Errorf("expanded command = %q", got)
	}
	mounts := map[string]runtime.Mount{}
	for _, m := range c.Config.Mounts {
		mounts[m.ContainerPath] = m
	}
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Error(err)
		}
		return string(b)
	}
	if got := read(filepath.Join(mounts["/etc/ray"].HostPath, "ray.conf")); got != "num_cpus=2\n" {
		t.Errorf("configMap file = %q", got)
	}
	if got := read(filepath.Join(mounts["/etc/podinfo"].HostPath, "labels")); got != "app=\"envy\"\ntier=\"head\"" {
		t.Errorf("downward API labels = %q", got)
	}
	if !mounts["/etc/podinfo"].ReadOnly {
		t.Error("readOnly mount not passed on")
	}
	if fi, err := os.Stat(mounts["/tmp/scratch"].HostPath); err != nil || !fi.IsDir() {
		t.Errorf("emptyDir: %v", err)
	}
	if _, ok := mounts["/etc/resolv.conf"]; !ok {
		t.Error("no resolv.conf mount")
	}
	sbs, _ := rt.ListSandboxes(ctx)
	for _, sb := range sbs {
		if sb.PodUID != string(p.UID) {
			continue
		}
		dns := sb.Config.DNS
		if !slices.Equal(dns.Nameservers, []string{"10.96.0.10"}) || dns.Searches[0] != e.ns+".svc.cluster.local" || !slices.Contains(dns.Options, "ndots:5") {
			t.Errorf("sandbox DNS = %+v", dns)
		}
		if sb.Config.Hostname != "envy" {
			t.Errorf("hostname = %q", sb.Config.Hostname)
		}
	}
	if c.Config.Resources.MemoryBytes != 256<<20 || c.Config.Resources.CPUMillis != 1500 {
		t.Errorf("resources = %+v", c.Config.Resources)
	}
}

func TestMissingConfigMapIsCreateContainerConfigError(t *testing.T) {
	e := newEnv(t, fake.New(fake.Options{}))
	e.create(e.pod("noconfig", func(p *corev1.Pod) {
		p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "later"}, Key: "x"}}}}
	}))
	e.waitPod("noconfig", 30*time.Second, "CreateContainerConfigError", func(p *corev1.Pod) bool {
		cs := containerStatus(p, "main")
		return cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason == "CreateContainerConfigError"
	})
	if _, err := e.client.CoreV1().ConfigMaps(e.ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "later"}, Data: map[string]string{"x": "1"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitPod("noconfig", 30*time.Second, "Ready once the config map exists", func(p *corev1.Pod) bool {
		return conditionIs(p, corev1.PodReady, corev1.ConditionTrue)
	})
}

func TestImagePullFailureBacksOff(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	rt := fake.New(fake.Options{PullError: func(image string) error {
		if failing.Load() {
			return os.ErrPermission
		}
		return nil
	}})
	e := newEnv(t, rt)
	created := e.create(e.pod("nopull"))
	_, seen := e.waitPodSince(created, "nopull", 30*time.Second, "ImagePullBackOff", func(p *corev1.Pod) bool {
		cs := containerStatus(p, "main")
		return cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason == "ImagePullBackOff"
	})
	sawErr := false
	for _, s := range seen {
		if cs := containerStatus(s, "main"); cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason == "ErrImagePull" {
			sawErr = true
		}
	}
	if !sawErr {
		t.Error("never saw ErrImagePull before ImagePullBackOff")
	}
	e.waitEvent("nopull", "Failed", 10*time.Second)
	failing.Store(false)
	e.waitPod("nopull", 30*time.Second, "Ready once the pull works", func(p *corev1.Pod) bool {
		return conditionIs(p, corev1.PodReady, corev1.ConditionTrue)
	})
}

func TestNoStatusWriteWhileNothingChanges(t *testing.T) {
	e := newEnv(t, fake.New(fake.Options{}))
	e.create(e.pod("steady"))
	p, _ := e.waitPod("steady", 30*time.Second, "Ready", func(p *corev1.Pod) bool { return conditionIs(p, corev1.PodReady, corev1.ConditionTrue) })
	// The watch can deliver the Ready write before the kubelet has its response; wait for the hook to
	// report that write so the count below includes it.
	rv := p.ResourceVersion
	deadline := time.Now().Add(10 * time.Second)
	for !e.wrote("steady@" + rv) {
		if time.Now().After(deadline) {
			t.Fatalf("OnStatusWrite never reported resourceVersion %s", rv)
		}
		time.Sleep(10 * time.Millisecond)
	}
	writes := e.kl.StatusManager().Writes()
	// Nothing happens for several resync periods (500ms each): nothing may be written. This waits out
	// a window on purpose, as it checks for the absence of writes.
	ctx := context.Background()
	time.Sleep(3 * time.Second)
	if got := e.kl.StatusManager().Writes(); got != writes {
		t.Errorf("%d status writes while nothing changed", got-writes)
	}
	cur, err := e.client.CoreV1().Pods(e.ns).Get(ctx, "steady", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cur.ResourceVersion != rv {
		t.Errorf("pod resourceVersion moved from %s to %s with nothing changing", rv, cur.ResourceVersion)
	}
}

func TestRestartedKubeletReadoptsContainers(t *testing.T) {
	rt := fake.New(fake.Options{Script: func(_ *runtime.Sandbox, cfg runtime.ContainerConfig) fake.Script {
		if cfg.Attempt == 0 {
			return fake.Script{RunFor: 100 * time.Millisecond, ExitCode: 1}
		}
		return fake.Script{}
	}})
	e := newEnv(t, rt)
	e.create(e.pod("survivor"))
	e.create(e.pod("orphan"))
	p, _ := e.waitPod("survivor", 30*time.Second, "Ready after one restart", func(p *corev1.Pod) bool {
		cs := containerStatus(p, "main")
		return cs != nil && cs.RestartCount == 1 && conditionIs(p, corev1.PodReady, corev1.ConditionTrue)
	})
	orphan, _ := e.waitPod("orphan", 30*time.Second, "Ready", func(p *corev1.Pod) bool {
		cs := containerStatus(p, "main")
		return cs != nil && cs.RestartCount == 1 && conditionIs(p, corev1.PodReady, corev1.ConditionTrue)
	})
	e.stop()
	before := len(rt.History())
	// While the kubelet is down the orphan's pod disappears for good.
	zero := int64(0)
	if err := e.client.CoreV1().Pods(e.ns).Delete(context.Background(), "orphan", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	e.waitPod("orphan", 30*time.Second, "gone", func(p *corev1.Pod) bool { return p == nil })

	e.startKubelet()
	// The adopted container dies: the new kubelet must restart it as attempt 2, not start over.
	adopted, err := rt.Latest(string(p.UID), "main")
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Exit(adopted.ID, 1); err != nil {
		t.Fatal(err)
	}
	got, _ := e.waitPod("survivor", 30*time.Second, "restarted by the new kubelet", func(p *corev1.Pod) bool {
		cs := containerStatus(p, "main")
		return cs != nil && cs.RestartCount == 2 && conditionIs(p, corev1.PodReady, corev1.ConditionTrue)
	})
	if cs := containerStatus(got, "main"); cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ContainerID != "fake://"+adopted.ID {
		t.Errorf("lastState = %+v, want the adopted container %s", cs.LastTerminationState, adopted.ID)
	}
	history := rt.History()
	if len(history) != before+1 || history[len(history)-1].Config.Attempt != 2 {
		t.Errorf("the new kubelet made %d containers (want 1, attempt 2)", len(history)-before)
	}
	live, _ := rt.ListContainers(context.Background())
	for _, c := range live {
		if c.PodUID == string(orphan.UID) {
			t.Errorf("container %s of the deleted pod is still there", c.ID)
		}
	}
	sbs, _ := rt.ListSandboxes(context.Background())
	if slices.ContainsFunc(sbs, func(s *runtime.Sandbox) bool { return s.PodUID == string(orphan.UID) }) {
		t.Error("the deleted pod's sandbox is still there")
	}
}

// TestConfigMapChangeReachesTheNextPod: the kubelet reads a ConfigMap through a watch shared by the pods
// that use it; a key added while one pod runs on it reaches a pod started afterwards. (A watch, as a real
// kubelet's, shows the change after a moment, not at once: the second pod reads a key that only the change
// adds, so a read before the event gives CreateContainerConfigError and a later sync the key, never a stale
// value.)
func TestConfigMapChangeReachesTheNextPod(t *testing.T) {
	rt := fake.New(fake.Options{})
	e := newEnv(t, rt)
	ctx := context.Background()
	cm, err := e.client.CoreV1().ConfigMaps(e.ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Data: map[string]string{"mode": "first"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	withMode := func(key string) func(p *corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "shared"}, Key: key}}}}
		}
	}
	mode := func(name string) string {
		t.Helper()
		p, _ := e.waitPod(name, 30*time.Second, "Ready", func(p *corev1.Pod) bool { return conditionIs(p, corev1.PodReady, corev1.ConditionTrue) })
		c, err := rt.Latest(string(p.UID), "main")
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range c.Config.Env {
			if v.Name == "MODE" {
				return v.Value
			}
		}
		return ""
	}
	e.create(e.pod("first", withMode("mode")))
	if got := mode("first"); got != "first" {
		t.Fatalf("first pod: MODE=%q, want first", got)
	}
	cm.Data["next"] = "second"
	if _, err := e.client.CoreV1().ConfigMaps(e.ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.create(e.pod("second", withMode("next")))
	if got := mode("second"); got != "second" {
		t.Fatalf("pod started after the change: MODE=%q, want second", got)
	}
}
