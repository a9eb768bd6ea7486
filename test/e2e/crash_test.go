package e2e

// Crash and fault tests: rayctl itself killed with SIGKILL while a RayJob runs (everything it made before
// the crash is still there and the job finishes exactly once), and faults inside the pods (Ray killed in a
// worker container). Each test runs on an instance of its own, since it kills things.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

// crashTimeout bounds one wait in these tests.
const crashTimeout = 2 * time.Minute

// startPurgedInstance starts an instance of the test's own with args; when the test ends it is stopped
// and purged, no pod network namespace and no containerd of it may be left on the host, and only then
// is its data dir removed.
func startPurgedInstance(t *testing.T, args ...string) *framework.Instance {
	t.Helper()
	in, err := framework.Start("", args...)
	if err != nil {
		t.Fatalf("starting rayctl: %v", err)
	}
	t.Cleanup(func() {
		if err := in.Stop(); err != nil {
			t.Log(err)
		}
		if err := in.Purge(); err != nil {
			t.Errorf("purging: %v", err)
		}
		checkNothingLeft(t, in.DataDir)
		in.Cleanup(t)
	})
	return in
}

// startFaultInstance starts an instance of the test's own with everything on, and returns a rayEnv on it
// with a fresh namespace. When the test ends the instance is stopped and purged; then no pod network
// namespace and no containerd of the instance may be left on the host, and only then is the data dir removed.
func startFaultInstance(t *testing.T) *rayEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("starts rayctl up")
	}
	in := startPurgedInstance(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	t.Cleanup(cancel)
	rc, err := rayclient.NewForConfig(in.Config)
	must(t, "a ray.io client", err)
	e := &rayEnv{in: in, ray: rc, ctx: ctx, ns: newNamespace(t, ctx, in)}
	t.Cleanup(func() {
		if t.Failed() {
			dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer dcancel()
			e.dump(t, dctx)
		}
	})
	return e
}

// checkNothingLeft fails t if, after a purge, the data dir still has pod network namespace files or
// mounts, or a containerd process of the instance still runs.
func checkNothingLeft(t *testing.T, dataDir string) {
	t.Helper()
	netnsDir := filepath.Join(dataDir, "network", "netns")
	if entries, err := os.ReadDir(netnsDir); err == nil && len(entries) > 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("after the purge, %s still holds netns files %v", netnsDir, names)
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dataDir+"/") {
				t.Errorf("after the purge, a mount is left under the data dir: %s", line)
			}
		}
	}
	if pids := containerdPIDs(dataDir); len(pids) > 0 {
		t.Errorf("after the purge, containerd processes of the instance still run: pids %v", pids)
	}
}

// containerdPIDs are the pids of the containerd daemons started with --config <dataDir>/containerd/....
func containerdPIDs(dataDir string) []int {
	prefix := filepath.Join(dataDir, "containerd") + string(filepath.Separator)
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || fmt.Sprint(pid) != e.Name() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		args := strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
		if filepath.Base(args[0]) != "containerd" {
			continue
		}
		for i := 1; i+1 < len(args); i++ {
			if args[i] == "--config" && strings.HasPrefix(args[i+1], prefix) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// podSnapshot is what must survive a crash of rayctl for one pod.
type podSnapshot struct {
	uid          types.UID
	containerIDs map[string]string
	restarts     map[string]int32
}

func snapshotPod(p *corev1.Pod) podSnapshot {
	s := podSnapshot{uid: p.UID, containerIDs: map[string]string{}, restarts: map[string]int32{}}
	for _, cs := range p.Status.ContainerStatuses {
		s.containerIDs[cs.Name] = cs.ContainerID
		s.restarts[cs.Name] = cs.RestartCount
	}
	return s
}

// crashJob is the HTTPMode sample RayJob with the sample RayCluster's worker group, and an entrypoint that
// runs long enough to be running when rayctl is killed.
func crashJob(t *testing.T, name string) *rayv1.RayJob {
	job := rayJobFromSample(t, "rayjob-http.yaml", name)
	job.Spec.Entrypoint = "sh -c 'sleep 8; echo done'"
	job.Spec.RayClusterSpec.WorkerGroupSpecs = sampleCluster(t, "unused").Spec.WorkerGroupSpecs
	return job
}

// TestCrashWhileRayJobRunning kills rayctl with SIGKILL while a RayJob's entrypoint runs in its cluster,
// starts it again on the same data dir, and finds: the RayJob completes, SUCCEEDED, submitted exactly once;
// the RayJob, its RayCluster, the cluster's pods and services are the same objects (same UIDs); the pods'
// containers were re-adopted (same container IDs, no restart). The cleanup leaves no pod network namespace.
// The private containerd outlives the SIGKILL (it has a process group of its own); the restart stops it and
// starts a fresh one on the same state, which picks the running containers up.
func TestCrashWhileRayJobRunning(t *testing.T) {
	t.Parallel()
	e := startFaultInstance(t)
	const name = "crash"
	created, err := e.ray.RayV1().RayJobs(e.ns).Create(e.ctx, crashJob(t, name), metav1.CreateOptions{})
	must(t, "creating the RayJob", err)

	// Running and submitted: the dashboard lists the submission as running.
	var job *rayv1.RayJob
	var headIP string
	e.waitFor(t, crashTimeout, "RayJob "+name+" Running with its entrypoint running", func(ctx context.Context) (bool, string, error) {
		j, err := e.ray.RayV1().RayJobs(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		s := j.Status
		desc := fmt.Sprintf("deployment=%q job=%q jobId=%q cluster=%q", s.JobDeploymentStatus, s.JobStatus, s.JobId, s.RayClusterName)
		if s.JobDeploymentStatus != rayv1.JobDeploymentStatusRunning || s.JobId == "" || s.RayClusterName == "" {
			return false, desc, nil
		}
		heads, err := e.clusterPods(ctx, s.RayClusterName, "head")
		if err != nil || len(heads) != 1 || heads[0].Status.PodIP == "" {
			return false, desc + " head " + podsState(heads), err
		}
		var jobs []dashboardJob
		if err := e.dashboardGet(ctx, heads[0].Status.PodIP, "/api/jobs/", &jobs); err != nil {
			return false, desc, err
		}
		for _, dj := range jobs {
			if dj.SubmissionID != nil && *dj.SubmissionID == s.JobId && dj.Status == "RUNNING" {
				job, headIP = j, heads[0].Status.PodIP
				return true, desc, nil
			}
		}
		return false, fmt.Sprintf("%s; dashboard: %+v", desc, jobs), nil
	})
	clusterName, jobID := job.Status.RayClusterName, job.Status.JobId

	// What must survive the crash.
	cluster, err := e.ray.RayV1().RayClusters(e.ns).Get(e.ctx, clusterName, metav1.GetOptions{})
	must(t, "reading the RayCluster", err)
	pods, err := e.clusterPods(e.ctx, clusterName, "")
	must(t, "listing the cluster's pods", err)
	before := map[string]podSnapshot{}
	var nHead, nWorker int
	for i := range pods {
		p := &pods[i]
		if !runningReady(p) {
			t.Fatalf("before the crash, pod %s is not Running and Ready: %s", p.Name, podsState(pods))
		}
		switch p.Labels["ray.io/node-type"] {
		case "head":
			nHead++
		case "worker":
			nWorker++
		}
		before[p.Name] = snapshotPod(p)
		for c, id := range before[p.Name].containerIDs {
			if id == "" {
				t.Fatalf("before the crash, pod %s container %s has no containerID", p.Name, c)
			}
		}
	}
	if nHead != 1 || nWorker != 1 {
		t.Fatalf("before the crash: %d head and %d worker pods, want 1 and 1: %s", nHead, nWorker, podsState(pods))
	}
	svcs, err := e.in.Client.CoreV1().Services(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: "ray.io/cluster=" + clusterName})
	must(t, "listing the cluster's services", err)
	if len(svcs.Items) == 0 {
		t.Fatalf("the cluster %s has no services", clusterName)
	}
	svcUIDs := map[string]types.UID{}
	for _, s := range svcs.Items {
		svcUIDs[s.Name] = s.UID
	}

	// The crash, and the restart.
	e.in.Kill()
	t.Logf("killed rayctl with SIGKILL while job %s runs; containerd processes of the instance left: %v", jobID, containerdPIDs(e.in.DataDir))
	restarted := time.Now()
	must(t, "restarting rayctl after SIGKILL", e.in.Restart())
	readyIn := time.Since(restarted)
	e.ray, err = rayclient.NewForConfig(e.in.Config)
	must(t, "a ray.io client after the restart", err)
	t.Logf("containerd processes of the instance after the restart: %v", containerdPIDs(e.in.DataDir))
	for _, line := range strings.Split(e.in.Output.String(), "\n") {
		if strings.Contains(line, "runtime") {
			t.Logf("rayctl up after the restart: %s", strings.TrimSpace(line))
		}
	}

	job = e.waitJobFinished(t, name)
	completeIn := time.Since(restarted)
	s := job.Status
	if s.JobDeploymentStatus != rayv1.JobDeploymentStatusComplete || s.JobStatus != rayv1.JobStatusSucceeded {
		t.Fatalf("RayJob ended with jobDeploymentStatus %q, jobStatus %q (reason %q, message %q); want Complete, SUCCEEDED",
			s.JobDeploymentStatus, s.JobStatus, s.Reason, s.Message)
	}
	t.Logf("figures: rayctl ready %s after the restart; RayJob Complete %s after the restart",
		readyIn.Round(time.Millisecond), completeIn.Round(time.Millisecond))

	if s.JobId != jobID || s.RayClusterName != clusterName {
		t.Errorf("after the crash: jobId %q cluster %q, want %q %q", s.JobId, s.RayClusterName, jobID, clusterName)
	}
	n, all, err := e.submissions(e.ctx, headIP, jobID)
	must(t, "listing the dashboard's jobs after the crash", err)
	if n != 1 {
		t.Errorf("the dashboard lists %d jobs with submission id %s, want exactly 1; all: %+v", n, jobID, all)
	}

	// The same objects.
	j, err := e.ray.RayV1().RayJobs(e.ns).Get(e.ctx, name, metav1.GetOptions{})
	must(t, "reading the RayJob after the crash", err)
	if j.UID != created.UID {
		t.Errorf("RayJob %s: UID %s after the crash, was %s (recreated)", name, j.UID, created.UID)
	}
	c, err := e.ray.RayV1().RayClusters(e.ns).Get(e.ctx, clusterName, metav1.GetOptions{})
	must(t, "reading the RayCluster after the crash", err)
	if c.UID != cluster.UID {
		t.Errorf("RayCluster %s: UID %s after the crash, was %s (recreated)", clusterName, c.UID, cluster.UID)
	}
	for svc, uid := range svcUIDs {
		got, err := e.in.Client.CoreV1().Services(e.ns).Get(e.ctx, svc, metav1.GetOptions{})
		if err != nil {
			t.Errorf("service %s after the crash: %v", svc, err)
		} else if got.UID != uid {
			t.Errorf("service %s: UID %s after the crash, was %s (recreated)", svc, got.UID, uid)
		}
	}
	// The pods: the same, Running and Ready, their containers re-adopted rather than restarted.
	e.waitFor(t, crashTimeout, "the cluster's pods Running and Ready after the restart", func(ctx context.Context) (bool, string, error) {
		pods, err := e.clusterPods(ctx, clusterName, "")
		if err != nil {
			return false, "", err
		}
		for i := range pods {
			if !runningReady(&pods[i]) {
				return false, podsState(pods), nil
			}
		}
		return len(pods) == len(before), podsState(pods), nil
	})
	after, err := e.clusterPods(e.ctx, clusterName, "")
	must(t, "listing the cluster's pods after the crash", err)
	for i := range after {
		p := &after[i]
		was, ok := before[p.Name]
		if !ok {
			t.Errorf("pod %s (UID %s) is new after the crash", p.Name, p.UID)
			continue
		}
		now := snapshotPod(p)
		if now.uid != was.uid {
			t.Errorf("pod %s: UID %s after the crash, was %s", p.Name, now.uid, was.uid)
		}
		for ctr, id := range was.containerIDs {
			if now.containerIDs[ctr] != id {
				t.Errorf("pod %s container %s: containerID %q after the crash, was %q (not re-adopted)", p.Name, ctr, now.containerIDs[ctr], id)
			}
			if now.restarts[ctr] != was.restarts[ctr] {
				t.Errorf("pod %s container %s: restartCount %d after the crash, was %d", p.Name, ctr, now.restarts[ctr], was.restarts[ctr])
			}
		}
	}
	if len(after) != len(before) {
		t.Errorf("after the crash the cluster has pods %s, before it had %d", podsState(after), len(before))
	}
	// The kubelet writes a pod's status only when it changes: give it time to show a replaced container.
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
		pods, err := e.clusterPods(e.ctx, clusterName, "")
		must(t, "listing the cluster's pods", err)
		for i := range pods {
			now, was := snapshotPod(&pods[i]), before[pods[i].Name]
			for ctr, id := range was.containerIDs {
				if now.containerIDs[ctr] != id || now.restarts[ctr] != was.restarts[ctr] || !runningReady(&pods[i]) {
					t.Fatalf("pod %s container %s: containerID %q restarts %d (%s) some seconds after the restart, was %q restarts %d",
						pods[i].Name, ctr, now.containerIDs[ctr], now.restarts[ctr], podsState(pods[i:i+1]), id, was.restarts[ctr])
				}
			}
		}
	}
}

// TestPodFaults breaks things inside a running RayCluster's pods and checks that the cluster recovers.
func TestPodFaults(t *testing.T) {
	t.Parallel()
	e := startFaultInstance(t)
	const name = "faults"
	e.createCluster(t, sampleCluster(t, name))
	cluster, _, workers := e.waitClusterReady(t, name, 1)

	// (a) Ray killed in the worker container: the container restarts in the same pod, and the RayCluster's
	// readyWorkerReplicas drops to 0 and comes back to 1.
	t.Run("WorkerRayKilled", func(t *testing.T) {
		w := workers[0]
		clusterWatch, err := e.ray.RayV1().RayClusters(e.ns).Watch(e.ctx, metav1.ListOptions{
			FieldSelector: "metadata.name=" + name, ResourceVersion: cluster.ResourceVersion})
		must(t, "watching the RayCluster", err)
		defer clusterWatch.Stop()

		killedAt := time.Now()
		if out, stderr, err := e.in.Kubectl(e.ctx, "", "exec", "-n", e.ns, w.Name, "-c", w.Spec.Containers[0].Name,
			"--", "sh", "-c", "kill $(pidof ray)"); err != nil {
			t.Fatalf("killing ray in the worker container: %v\n%s%s", err, out, stderr)
		}
		dropped, back := false, false
		var droppedAfter, backAfter time.Duration
		deadline := time.After(crashTimeout)
		for !back {
			select {
			case ev, ok := <-clusterWatch.ResultChan():
				if !ok {
					t.Fatalf("RayCluster watch closed (dropped=%v)", dropped)
				}
				c, isCluster := ev.Object.(*rayv1.RayCluster)
				if !isCluster {
					continue
				}
				switch r := c.Status.ReadyWorkerReplicas; {
				case !dropped && r < 1:
					dropped, droppedAfter = true, time.Since(killedAt)
				case dropped && r == 1:
					back, backAfter = true, time.Since(killedAt)
				}
			case <-deadline:
				t.Fatalf("after killing ray in the worker: readyWorkerReplicas seen below 1=%v, back to 1=%v", dropped, back)
			}
		}
		e.waitFor(t, crashTimeout, "the worker container restarted in the same pod", func(ctx context.Context) (bool, string, error) {
			p, err := e.in.Client.CoreV1().Pods(e.ns).Get(ctx, w.Name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			var restarts int32
			for _, cs := range p.Status.ContainerStatuses {
				restarts += cs.RestartCount
			}
			return p.UID == w.UID && restarts >= 1 && runningReady(p), fmt.Sprintf("restarts %d, %s", restarts, podsState([]corev1.Pod{*p})), nil
		})
		_, _, again := e.waitClusterReady(t, name, 1)
		if again[0].UID != w.UID {
			t.Errorf("the worker pod was replaced (%s -> %s); killing Ray should restart the container only", w.Name, again[0].Name)
		}
		t.Logf("figures: readyWorkerReplicas dropped %s and was back to 1 %s after the kill",
			droppedAfter.Round(time.Millisecond), backAfter.Round(time.Millisecond))
	})
}
