package e2e

// rayctl killed with SIGKILL part-way through a pod's creation: the restart (the kubelet's sweep before it
// re-adopts pods) and `rayctl down --purge` leave nothing of it on the host beyond what the live pods
// need: no task made but never started, no shim containerd does not know, no snapshot without a
// container, no cgroup without a task, no network namespace without a pod.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	ctrd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rayctl/rayctl/pkg/runtime/containerd"
	"github.com/rayctl/rayctl/test/e2e/framework"
)

// orphanTrials is how many times TestKillDuringPodCreation kills rayctl.
const orphanTrials = 8

// TestKillDuringPodCreation creates a pod and kills `rayctl up` with SIGKILL after a delay drawn (from a
// seed it prints; RAYCTL_E2E_SEED repeats a run) over the time a pod takes from creation to Running,
// orphanTrials times. After each kill it notes what the crash left (tasks created but not started, shims
// containerd lost, snapshots without a container); after each restart every pod so far runs, and the
// instance holds nothing beyond what they need. After `rayctl down --purge` no shim, runc container,
// cgroup, network namespace or mount of the instance is left, and a second purge finds nothing.
func TestKillDuringPodCreation(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts rayctl up")
	}
	if _, err := exec.LookPath("containerd"); err != nil || os.Geteuid() != 0 {
		t.Skip("needs containerd installed and root (a private containerd)")
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("RAYCTL_E2E_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		must(t, "parsing RAYCTL_E2E_SEED", err)
	}
	t.Logf("seed %d (RAYCTL_E2E_SEED=%d repeats this run)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))

	in := startPurgedInstance(t, "--runtime", "containerd")
	ctx := nodeContext(t, 8*time.Minute)
	ns := newNamespace(t, ctx, in)
	t.Cleanup(func() {
		if t.Failed() {
			dumpNodeFault(t, in, ns)
		}
	})

	// How long a pod takes from creation to Running here and now (the first one also waits for the image
	// to be loaded): the window the kills are spread over.
	_, w := nodeStartPod(t, ctx, in, ns, nodePod("first", corev1.RestartPolicyAlways, 1, nodeSh("main", "exec sleep 3600")))
	w.stop()
	began := time.Now()
	_, w = nodeStartPod(t, ctx, in, ns, nodePod("second", corev1.RestartPolicyAlways, 1, nodeSh("main", "exec sleep 3600")))
	w.stop()
	window := time.Since(began)
	t.Logf("a pod took %s from creation to Running and Ready", window.Round(time.Millisecond))
	pods := []string{"first", "second"}

	// restart starts rayctl again and checks that every pod runs and nothing else is left.
	restart := func(trial string) {
		t.Helper()
		must(t, "restarting rayctl up", in.Restart())
		for _, p := range pods {
			framework.WaitFor(t, ctx, "pod "+p+" Running and Ready after the restart", func() (bool, error) {
				pod, err := in.Client.CoreV1().Pods(ns).Get(ctx, p, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				if pod.Status.Phase == corev1.PodFailed {
					return false, fmt.Errorf("pod %s failed: %s", p, nodePodSummary(pod))
				}
				return runningReady(pod), nil
			})
		}
		after := inspectInstance(t, ctx, in.DataDir)
		if extra := after.beyondNeeds(len(pods)); len(extra) > 0 {
			t.Errorf("%s: after the restart, with %d pods running: %s (all: %s)", trial, len(pods), strings.Join(extra, "; "), after.describe())
		}
	}

	reached := map[string]int{}
	for i := range orphanTrials {
		name := fmt.Sprintf("kill-%d", i)
		delay := time.Duration(rng.Int64N(int64(window)))
		nodeCreatePod(t, ctx, in, ns, nodePod(name, corev1.RestartPolicyNever, 1, nodeSh("main", "exec sleep 3600")))
		time.Sleep(delay)
		in.Kill()
		left := inspectInstance(t, ctx, in.DataDir)
		for k, v := range left.crashStates() {
			reached[k] += v
		}
		t.Logf("trial %d: killed %s after creating pod %s; left: %s", i, delay.Round(time.Millisecond), name, left.describe())
		pods = append(pods, name)
		restart(fmt.Sprintf("trial %d", i))
	}
	t.Logf("states the random kills left, over %d trials: %v", orphanTrials, reached)

	// The narrowest window, hit for sure: rayctl kills itself between a task's creation and its start.
	must(t, "stopping rayctl up", in.Stop())
	in.Env = []string{"RAYCTL_TEST_CRASH_AT=containerd-after-new-task"}
	must(t, "starting rayctl up with a crash point", in.Restart())
	nodeCreatePod(t, ctx, in, ns, nodePod("crash-point", corev1.RestartPolicyNever, 1, nodeSh("main", "exec sleep 3600")))
	select {
	case <-in.Exited():
	case <-time.After(nodeTimeout):
		t.Fatalf("rayctl up did not reach its crash point within %s", nodeTimeout)
	}
	left := inspectInstance(t, ctx, in.DataDir)
	t.Logf("crash point: rayctl killed itself after a task's creation; left: %s", left.describe())
	if left.crashStates()["created task"] != 1 {
		t.Errorf("the crash point left %v, want one created task", left.crashStates())
	}
	in.Env = nil
	pods = append(pods, "crash-point")
	restart("crash point")

	must(t, "stopping rayctl up", in.Stop())
	out, err := in.Rayctl(ctx, "down", "--purge")
	if err != nil {
		t.Fatalf("rayctl down --purge: %v\n%s", err, out)
	}
	t.Logf("rayctl down --purge: %s", strings.TrimSpace(out))
	if shims := nodeShimsOf(in.DataDir); len(shims) > 0 {
		t.Errorf("after the purge, shims of the instance run: %s", strings.Join(shims, "; "))
	}
	stateDir := filepath.Join(in.DataDir, "containerd", "state")
	if ids := runcContainersUnder(t, stateDir); len(ids) > 0 {
		t.Errorf("after the purge, runc still has containers of the instance: %v", ids)
	}
	if cg := cgroupsUnder(containerd.CgroupParent(containerd.Namespace, stateDir)); len(cg) > 0 {
		t.Errorf("after the purge, cgroups of the instance are left: %v", cg)
	}
	checkNothingLeft(t, in.DataDir)
	out, err = in.Rayctl(ctx, "down", "--purge")
	if err != nil {
		t.Fatalf("a second rayctl down --purge: %v\n%s", err, out)
	}
	if !strings.Contains(out, "removed 0 containers and 0 pod sandboxes") || strings.Contains(out, "also removed") {
		t.Errorf("a second purge: %q, want it to find nothing (no container, sandbox, snapshot…)", strings.TrimSpace(out))
	}
}

// instanceState is what an instance's private containerd and the host hold for it.
type instanceState struct {
	tasks      map[string]string // task id → status
	containers map[string]string // container id → snapshot key
	active     []string          // active snapshots
	shims      []string          // ids of the shims serving the instance's containerd
	runc       []string          // runc containers with a bundle in the instance's state dir
	cgroups    []string          // cgroups under the instance's parent
	netns      []string          // pod network namespace files
	errs       []string
}

// inspectInstance reads the instance's state, through its private containerd (which outlives a SIGKILL
// of rayctl; the restart stops it and starts another) and from the host.
func inspectInstance(t *testing.T, ctx context.Context, dataDir string) *instanceState {
	t.Helper()
	s := &instanceState{tasks: map[string]string{}, containers: map[string]string{}}
	stateDir := filepath.Join(dataDir, "containerd", "state")
	c, err := ctrd.New(filepath.Join(dataDir, "containerd", "containerd.sock"), ctrd.WithTimeout(5*time.Second))
	if err != nil {
		s.errs = append(s.errs, err.Error())
	} else {
		defer c.Close()
		s.readContainerd(namespaces.WithNamespace(ctx, containerd.Namespace), c)
	}
	for _, cmd := range nodeShimsOf(dataDir) {
		f := strings.Fields(cmd)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "-id" {
				s.shims = append(s.shims, f[i+1])
			}
		}
	}
	s.runc = runcContainersUnder(t, stateDir)
	s.cgroups = cgroupsUnder(containerd.CgroupParent(containerd.Namespace, stateDir))
	entries, _ := os.ReadDir(filepath.Join(dataDir, "network", "netns"))
	for _, e := range entries {
		s.netns = append(s.netns, e.Name())
	}
	return s
}

func (s *instanceState) readContainerd(ctx context.Context, c *ctrd.Client) {
	resp, err := c.TaskService().List(ctx, nil)
	if err != nil {
		s.errs = append(s.errs, err.Error())
		return
	}
	for _, tk := range resp.Tasks {
		s.tasks[tk.ID] = strings.ToLower(strings.TrimPrefix(tk.Status.String(), "TASK_"))
	}
	cs, err := c.ContainerService().List(ctx)
	if err != nil {
		s.errs = append(s.errs, err.Error())
		return
	}
	for _, ct := range cs {
		s.containers[ct.ID] = ct.SnapshotKey
	}
	err = c.SnapshotService(containerd.DefaultSnapshotter).Walk(ctx, func(_ context.Context, info snapshots.Info) error {
		if info.Kind == snapshots.KindActive {
			s.active = append(s.active, info.Name)
		}
		return nil
	})
	if err != nil {
		s.errs = append(s.errs, err.Error())
	}
}

// crashStates counts the dangerous states in s: tasks created but never started, shims or runc
// containers containerd has no task for, active snapshots no container uses.
func (s *instanceState) crashStates() map[string]int {
	out := map[string]int{}
	for _, st := range s.tasks {
		if st == "created" {
			out["created task"]++
		}
	}
	for _, id := range s.shims {
		if _, ok := s.tasks[id]; !ok {
			out["shim without task"]++
		}
	}
	for _, id := range s.runc {
		if _, ok := s.tasks[id]; !ok {
			out["runc container without task"]++
		}
	}
	used := map[string]bool{}
	for _, key := range s.containers {
		used[key] = true
	}
	for _, key := range s.active {
		if !used[key] {
			if strings.HasPrefix(key, "extract-") {
				out["extract snapshot"]++
			} else {
				out["snapshot without container"]++
			}
		}
	}
	return out
}

// beyondNeeds describes what s holds beyond what pods running pods need: one running task (and shim,
// runc container, cgroup) per pod, and one network namespace per pod; containers that did not start
// are kept without a task (as a previous attempt).
func (s *instanceState) beyondNeeds(pods int) []string {
	var out []string
	out = append(out, s.errs...)
	for k, v := range s.crashStates() {
		out = append(out, fmt.Sprintf("%d %s", v, k))
	}
	running := 0
	for id, st := range s.tasks {
		if st == "running" {
			running++
		} else {
			out = append(out, fmt.Sprintf("task %s %s", id, st))
		}
	}
	if running != pods {
		out = append(out, fmt.Sprintf("%d running tasks", running))
	}
	for _, counted := range []struct {
		what string
		n    int
	}{{"shims", len(s.shims)}, {"runc containers", len(s.runc)}, {"cgroups", len(s.cgroups)}, {"network namespaces", len(s.netns)}} {
		if counted.n != pods {
			out = append(out, fmt.Sprintf("%d %s", counted.n, counted.what))
		}
	}
	return out
}

func (s *instanceState) describe() string {
	tasks := make([]string, 0, len(s.tasks))
	for id, st := range s.tasks {
		tasks = append(tasks, id+"="+st)
	}
	sort.Strings(tasks)
	return fmt.Sprintf("crash states %v; tasks %v; %d containers; active snapshots %v; shims %v; runc %v; cgroups %v; netns %d; errors %v",
		s.crashStates(), tasks, len(s.containers), s.active, s.shims, s.runc, s.cgroups, len(s.netns), s.errs)
}

// runcContainersUnder lists runc's containers (containerd 1.6's runc root for the namespace) whose
// bundle is under stateDir.
func runcContainersUnder(t *testing.T, stateDir string) []string {
	// The runc root is shared by every instance on the machine (containerd 1.6 puts it under
	// /run/containerd whatever its state dir), and other tests' containers come and go meanwhile: read
	// each container's state.json, skipping one deleted while we read, rather than `runc list`, which
	// fails outright when a container vanishes under it.
	root := filepath.Join("/run/containerd/runc", containerd.Namespace)
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	var ids []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(root, e.Name(), "state.json"))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Errorf("reading runc's state of %s: %v", e.Name(), err)
			continue
		}
		var st struct {
			Config struct{ Labels []string } `json:"config"`
		}
		if err := json.Unmarshal(b, &st); err != nil {
			t.Errorf("runc's state of %s: %v", e.Name(), err)
			continue
		}
		for _, l := range st.Config.Labels {
			if bundle, ok := strings.CutPrefix(l, "bundle="); ok && strings.HasPrefix(bundle, stateDir+"/") {
				ids = append(ids, e.Name())
			}
		}
	}
	return ids
}

// cgroupsUnder lists the cgroups under parent in the memory hierarchy (v1) or the unified one (v2).
func cgroupsUnder(parent string) []string {
	var out []string
	for _, root := range []string{"/sys/fs/cgroup/memory", "/sys/fs/cgroup"} {
		if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil {
			continue
		}
		entries, err := os.ReadDir(filepath.Join(root, parent))
		if err != nil {
			return nil
		}
		for _, e := range entries {
			if e.IsDir() {
				out = append(out, e.Name())
			}
		}
		return out
	}
	return out
}
