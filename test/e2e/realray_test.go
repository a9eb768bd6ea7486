package e2e

// The real-Ray tests: configs/samples/rayjob-real.yaml, in the shape of KubeRay's samples, image
// rayproject/ray:2.60.0, run on the host's Ray that `make ray` installs (the process runtime runs Ray's
// images on it). Each test works in a namespace of its own. Real Ray needs CPU (a head is a GCS, a raylet,
// a dashboard and its agents, all Python or C++ processes starting at once), so at most realRaySlots
// clusters run at a time across these tests; the waits are generous for a 2-core machine.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

// realRayTimeout bounds one wait in a real-Ray test: a Ray head starts in 10–30 s on an idle 2-core
// machine, far slower while other tests run.
const realRayTimeout = 5 * time.Minute

// realRaySlots bounds how many real-Ray tests run their clusters at once.
var realRaySlots = make(chan struct{}, 2)

// The driver's output the sample's ConfigMap script prints (a task, an actor, the runtime env's variable).
var realRayOutput = []string{"squares: [0, 1, 4, 9]", "counter: 6", "greeting: hello from the runtime env"}

// TestRealRay runs the real-Ray tests on one instance with everything on, on the process runtime, whose
// start-up says the host's Ray runs Ray's images.
func TestRealRay(t *testing.T) {
	t.Parallel()
	hostRay(t)
	// The subtests run two at a time (realRaySlots), each with its own deadline: with the node advertising
	// only this machine's CPUs, one's pods waited Pending ("Insufficient cpu") behind the other's for as
	// long as the other ran, and a slow pip install in one failed both.
	in, err := framework.Start("", "--runtime", "process", "--node-capacity", sharedCapacity)
	if err != nil {
		t.Fatalf("starting rayctl: %v", err)
	}
	t.Cleanup(func() { in.Cleanup(t) })
	if line := startupLine(in, "ray"); !strings.Contains(line, "host Ray 2.60.0") {
		t.Fatalf("rayctl up does not run Ray's images on the host's Ray: %q", line)
	}
	for _, tc := range []struct {
		name string
		test func(t *testing.T, e *rayEnv)
	}{
		{"JobK8sJobMode", testRealJob(rayv1.K8sJobMode)},
		{"JobHTTPMode", testRealJob(rayv1.HTTPMode)},
		{"JobSidecarMode", testRealJob(rayv1.SidecarMode)},
		{"JobLightWeightSubmitter", testRealJobAs("light-weight", rayv1.K8sJobMode, lightWeightSubmitter)},
		{"ClusterOfThree", testRealClusterOfThree},
		{"HeadPodDeleted", testRealHeadPodDeleted},
		{"JobSuspendedAndResumed", testRealJobSuspendResume},
		{"JobFailingEntrypoint", testRealJobFailing},
		{"Autoscaler", testRealAutoscaler},
		{"Service", testRealService},
		{"KubeRaySampleWithPip", testKubeRaySampleWithPip},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.test(t, realRaySetup(t, in)) })
	}
}

// realRaySetup is raySetup for a real-Ray test: it waits for a slot, then makes the namespace and the
// sample's ConfigMap in it.
func realRaySetup(t *testing.T, in *framework.Instance) *rayEnv {
	t.Helper()
	t.Parallel()
	realRaySlots <- struct{}{}
	t.Cleanup(func() { <-realRaySlots })
	e := newRayEnv(t, in)
	_, cm := realRaySample(t)
	_, err := in.Client.CoreV1().ConfigMaps(e.ns).Create(e.ctx, cm, metav1.CreateOptions{})
	must(t, "creating the sample's ConfigMap", err)
	return e
}

// realRaySample decodes configs/samples/rayjob-real.yaml: the RayJob and the ConfigMap with its script.
func realRaySample(t *testing.T) (*rayv1.RayJob, *corev1.ConfigMap) {
	t.Helper()
	b, err := os.ReadFile(samplePath("rayjob-real.yaml"))
	must(t, "reading the real-Ray sample", err)
	job, cm := &rayv1.RayJob{}, &corev1.ConfigMap{}
	docs := strings.Split(string(b), "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("the real-Ray sample has %d documents, want a RayJob and a ConfigMap", len(docs))
	}
	must(t, "decoding the sample RayJob", yaml.UnmarshalStrict([]byte(docs[0]), job))
	must(t, "decoding the sample ConfigMap", yaml.UnmarshalStrict([]byte(docs[1]), cm))
	return job, cm
}

// realJob is the sample RayJob under another name in submission mode mode, keeping its cluster after the
// job (so that its head can be asked about it).
func realJob(t *testing.T, name string, mode rayv1.JobSubmissionMode) *rayv1.RayJob {
	job, _ := realRaySample(t)
	job.Name = name
	job.Spec.SubmissionMode = mode
	return job
}

// realCluster is the sample RayJob's cluster as a RayCluster of its own with workers workers.
func realCluster(t *testing.T, name string, workers int32) *rayv1.RayCluster {
	job, _ := realRaySample(t)
	c := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: *job.Spec.RayClusterSpec}
	g := &c.Spec.WorkerGroupSpecs[0]
	g.Replicas, g.MinReplicas, g.MaxReplicas = ptr.To(workers), ptr.To(workers), ptr.To(workers)
	return c
}

// waitRealJob is waitJobFinished with the real-Ray timeout.
func (e *rayEnv) waitRealJob(t *testing.T, name string) *rayv1.RayJob {
	t.Helper()
	var job *rayv1.RayJob
	e.waitFor(t, realRayTimeout, "RayJob "+name+" finished", func(ctx context.Context) (bool, string, error) {
		j, err := e.ray.RayV1().RayJobs(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		job = j
		s := j.Status
		return s.JobDeploymentStatus == rayv1.JobDeploymentStatusComplete || s.JobDeploymentStatus == rayv1.JobDeploymentStatusFailed,
			fmt.Sprintf("deployment=%q job=%q reason=%q message=%q", s.JobDeploymentStatus, s.JobStatus, s.Reason, s.Message), nil
	})
	return job
}

// headExec runs argv in a cluster's head container and returns its standard output.
func (e *rayEnv) headExec(t *testing.T, head *corev1.Pod, argv ...string) string {
	t.Helper()
	out, stderr, err := e.in.Kubectl(e.ctx, "", append([]string{"exec", "-n", e.ns, head.Name, "-c", head.Spec.Containers[0].Name, "--"}, argv...)...)
	if err != nil {
		t.Fatalf("kubectl exec %s -- %s: %v\n%s%s", head.Name, strings.Join(argv, " "), err, out, stderr)
	}
	return out
}

// liveHead is the one live head pod of a cluster.
func (e *rayEnv) liveHead(t *testing.T, cluster string) *corev1.Pod {
	t.Helper()
	heads, err := e.clusterPods(e.ctx, cluster, "head")
	must(t, "listing the head pod", err)
	if len(heads) != 1 {
		t.Fatalf("cluster %s: want one head pod, got %s", cluster, podsState(heads))
	}
	return &heads[0]
}

// wantDriverOutput fails unless text (a log) holds every line the sample's driver prints.
func wantDriverOutput(t *testing.T, where, text string) {
	t.Helper()
	for _, line := range realRayOutput {
		if !strings.Contains(text, line) {
			t.Errorf("%s lacks the driver's %q:\n%s", where, line, text)
		}
	}
}

// (1) The sample RayJob in one submission mode: Complete and SUCCEEDED on real Ray, submitted once, and
// the driver's output in `ray job logs` on the head and, where a submitter runs, in its `kubectl logs`.
func testRealJob(mode rayv1.JobSubmissionMode) func(t *testing.T, e *rayEnv) {
	return testRealJobAs(strings.ToLower(string(mode)), mode, nil)
}

// lightWeightSubmitter selects KubeRay v1.7's light-weight submitter as its sample
// ray-job.light-weight-submitter.yaml does: a submitter Pod template running the image's /submitter with
// the runtime env and the entrypoint as arguments (rayctl's process runtime runs its own Go submitter for it).
func lightWeightSubmitter(t *testing.T, job *rayv1.RayJob) {
	var env map[string]any
	must(t, "reading the sample's runtime env", yaml.Unmarshal([]byte(job.Spec.RuntimeEnvYAML), &env))
	envJSON, err := json.Marshal(env)
	must(t, "encoding the runtime env", err)
	job.Spec.SubmitterPodTemplate = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: "my-custom-rayjob-submitter", Image: "quay.io/kuberay/submitter:v1.5.1", Command: []string{"/submitter"},
			Args: append([]string{"--runtime-env-json", string(envJSON), "--"}, strings.Fields(job.Spec.Entrypoint)...)}}}}
}

// testRealJobAs is testRealJob for a RayJob named name, changed by tweak (when not nil) before it is created.
func testRealJobAs(name string, mode rayv1.JobSubmissionMode, tweak func(*testing.T, *rayv1.RayJob)) func(t *testing.T, e *rayEnv) {
	return func(t *testing.T, e *rayEnv) {
		job := realJob(t, name, mode)
		if tweak != nil {
			tweak(t, job)
		}
		_, err := e.ray.RayV1().RayJobs(e.ns).Create(e.ctx, job, metav1.CreateOptions{})
		must(t, "creating the RayJob", err)
		s := e.waitRealJob(t, name).Status
		if s.JobDeploymentStatus != rayv1.JobDeploymentStatusComplete || s.JobStatus != rayv1.JobStatusSucceeded {
			t.Fatalf("RayJob ended %q/%q (reason %q, message %q); want Complete, SUCCEEDED", s.JobDeploymentStatus, s.JobStatus, s.Reason, s.Message)
		}
		head := e.liveHead(t, s.RayClusterName)
		wantDriverOutput(t, "ray job logs "+s.JobId, e.headExec(t, head, "ray", "job", "logs", s.JobId))
		n, all, err := e.submissions(e.ctx, head.Status.PodIP, s.JobId)
		must(t, "listing the dashboard's jobs", err)
		if n != 1 {
			t.Errorf("the head's dashboard lists %d jobs with submission id %s, want 1: %+v", n, s.JobId, all)
		}
		var logArgs []string
		switch mode {
		case rayv1.K8sJobMode:
			logArgs = []string{"logs", "-n", e.ns, "job/" + name}
		case rayv1.SidecarMode:
			logArgs = []string{"logs", "-n", e.ns, head.Name, "-c", "ray-job-submitter"}
		}
		if logArgs != nil {
			out, stderr, err := e.in.Kubectl(e.ctx, "", logArgs...)
			if err != nil {
				t.Fatalf("kubectl %s: %v\n%s", strings.Join(logArgs, " "), err, stderr)
			}
			wantDriverOutput(t, "kubectl "+strings.Join(logArgs, " "), out)
		}
	}
}

// (2) A RayCluster of 1 head and 2 workers: `ray status` on the head counts 3 nodes, and a task pinned to
// a worker's node runs in that worker's pod.
func testRealClusterOfThree(t *testing.T, e *rayEnv) {
	e.createCluster(t, realCluster(t, "three", 2))
	_, head, workers := e.waitClusterReadyWithin(t, "three", 2, realRayTimeout)
	var status string
	e.waitFor(t, realRayTimeout, "ray status counting 3 nodes", func(ctx context.Context) (bool, string, error) {
		out, _, err := e.in.Kubectl(ctx, "", "exec", "-n", e.ns, head.Name, "-c", head.Spec.Containers[0].Name, "--", "ray", "status")
		status = out
		return err == nil && rayStatusNodes(out) == 3, out, err
	})
	t.Logf("ray status on the head:\n%s", status)

	// The worker's Ray node is the one whose IP is the worker pod's; the task reports the host name it
	// ran on, which is its pod's name.
	w := workers[1]
	script := `import socket, ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
ray.init()
node = next(n["NodeID"] for n in ray.nodes() if n["Alive"] and n["NodeManagerAddress"] == "` + w.Status.PodIP + `")
@ray.remote
def where():
    return socket.gethostname()
print("ran on", ray.get(where.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote()))`
	if out := e.headExec(t, head, "python", "-c", script); !strings.Contains(out, "ran on "+w.Name) {
		t.Errorf("a task pinned to worker %s (%s) says %q, want it ran in that pod", w.Name, w.Status.PodIP, out)
	}
}

// rayStatusNode is a node line of `ray status`: its count and node type under Active or Idle.
var rayStatusNode = regexp.MustCompile(`^\s+(\d+) (\S+)$`)

// rayStatusNodes counts the active and idle nodes `ray status` lists (-1 when it lists no Node status).
func rayStatusNodes(out string) int {
	n, in, seen := 0, false, false
	for _, line := range strings.Split(out, "\n") {
		switch strings.TrimSpace(line) {
		case "Active:", "Idle:":
			in, seen = true, true
			continue
		case "Pending:", "Recent failures:":
			in = false
		}
		if m := rayStatusNode.FindStringSubmatch(line); in && m != nil {
			k, _ := strconv.Atoi(m[1])
			n += k
		}
	}
	if !seen {
		return -1
	}
	return n
}

// aliveRayNodes counts the nodes the head's GCS holds alive, as Ray's own API says.
func (e *rayEnv) aliveRayNodes(ctx context.Context, head *corev1.Pod) (int, error) {
	out, stderr, err := e.in.Kubectl(ctx, "", "exec", "-n", e.ns, head.Name, "-c", head.Spec.Containers[0].Name, "--",
		"python", "-c", `import ray; ray.init(); print("alive", sum(n["Alive"] for n in ray.nodes()))`)
	if err != nil {
		return 0, fmt.Errorf("%v: %s", err, stderr)
	}
	m := regexp.MustCompile(`(?m)^alive (\d+)$`).FindStringSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no count in %q", out)
	}
	return strconv.Atoi(m[1])
}

// (3) Deleting the head Pod of a 1-head, 1-worker cluster: a new head comes up, the worker rejoins it (the
// new GCS holds 2 nodes alive), and the RayCluster is ready again. The times are reported.
func testRealHeadPodDeleted(t *testing.T, e *rayEnv) {
	e.createCluster(t, realCluster(t, "phoenix", 1))
	_, head, _ := e.waitClusterReadyWithin(t, "phoenix", 1, realRayTimeout)
	deleted := time.Now()
	must(t, "deleting the head pod", e.in.Client.CoreV1().Pods(e.ns).Delete(e.ctx, head.Name, metav1.DeleteOptions{}))
	var newHead *corev1.Pod
	e.waitFor(t, realRayTimeout, "a new head pod Running and Ready", func(ctx context.Context) (bool, string, error) {
		heads, err := e.clusterPods(ctx, "phoenix", "head")
		if err != nil {
			return false, "", err
		}
		if len(heads) == 1 && heads[0].UID != head.UID && runningReady(&heads[0]) {
			newHead = &heads[0]
			return true, "", nil
		}
		return false, podsState(heads), nil
	})
	headBack := time.Since(deleted)
	e.waitFor(t, realRayTimeout, "the worker rejoined the new head", func(ctx context.Context) (bool, string, error) {
		n, err := e.aliveRayNodes(ctx, newHead)
		return n == 2, fmt.Sprintf("%d nodes alive", n), err
	})
	rejoined := time.Since(deleted)
	e.waitClusterReadyWithin(t, "phoenix", 1, realRayTimeout)
	t.Logf("figures: head pod deleted → new head Ready %s, → worker rejoined %s, → RayCluster ready %s",
		headBack.Round(time.Millisecond), rejoined.Round(time.Millisecond), time.Since(deleted).Round(time.Millisecond))
}

// (5a) The sample RayJob suspended while it runs, then resumed: suspending deletes its RayCluster and
// stops at Suspended; resuming makes a new cluster and the job completes, SUCCEEDED.
func testRealJobSuspendResume(t *testing.T, e *rayEnv) {
	const name = "nap"
	job := realJob(t, name, rayv1.K8sJobMode)
	// The driver waits for a file while it runs, so the suspension meets it running.
	job.Spec.Entrypoint = "sh -c 'until [ -e /tmp/release-" + name + " ]; do sleep 0.2; done; python /home/ray/samples/sample_code.py'"
	// As with KubeRay, only a RayJob that deletes its cluster once done may be suspended; the cluster
	// stays a minute after the job, for its logs to be read.
	job.Spec.ShutdownAfterJobFinishes, job.Spec.TTLSecondsAfterFinished = true, 60
	_, err := e.ray.RayV1().RayJobs(e.ns).Create(e.ctx, job, metav1.CreateOptions{})
	must(t, "creating the RayJob", err)
	var first string
	e.waitFor(t, realRayTimeout, "RayJob "+name+" Running", func(ctx context.Context) (bool, string, error) {
		j, err := e.ray.RayV1().RayJobs(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		first = j.Status.RayClusterName
		return j.Status.JobDeploymentStatus == rayv1.JobDeploymentStatusRunning && j.Status.JobStatus == rayv1.JobStatusRunning,
			fmt.Sprintf("deployment=%q job=%q", j.Status.JobDeploymentStatus, j.Status.JobStatus), nil
	})
	setSuspend := func(v bool) {
		t.Helper()
		must(t, fmt.Sprintf("setting suspend=%v", v), retry.RetryOnConflict(retry.DefaultRetry, func() error {
			j, err := e.ray.RayV1().RayJobs(e.ns).Get(e.ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			j.Spec.Suspend = v
			_, err = e.ray.RayV1().RayJobs(e.ns).Update(e.ctx, j, metav1.UpdateOptions{})
			return err
		}))
	}
	setSuspend(true)
	e.waitFor(t, realRayTimeout, "RayJob Suspended and its RayCluster gone", func(ctx context.Context) (bool, string, error) {
		j, err := e.ray.RayV1().RayJobs(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		_, cerr := e.ray.RayV1().RayClusters(e.ns).Get(ctx, first, metav1.GetOptions{})
		return j.Status.JobDeploymentStatus == rayv1.JobDeploymentStatusSuspended && apierrors.IsNotFound(cerr),
			fmt.Sprintf("deployment=%q cluster %s gone=%v", j.Status.JobDeploymentStatus, first, apierrors.IsNotFound(cerr)), nil
	})
	setSuspend(false)
	e.releaseJobWithin(t, name, realRayTimeout)
	job = e.waitRealJob(t, name)
	s := job.Status
	if s.JobDeploymentStatus != rayv1.JobDeploymentStatusComplete || s.JobStatus != rayv1.JobStatusSucceeded {
		t.Fatalf("resumed RayJob ended %q/%q (reason %q, message %q); want Complete, SUCCEEDED", s.JobDeploymentStatus, s.JobStatus, s.Reason, s.Message)
	}
	if s.RayClusterName == first {
		t.Errorf("the resumed RayJob ran on its first cluster %s, want a new one", first)
	}
	wantDriverOutput(t, "ray job logs "+s.JobId, e.headExec(t, e.liveHead(t, s.RayClusterName), "ray", "job", "logs", s.JobId))
}

// (5b) A RayJob whose Python entrypoint raises: Failed and FAILED, with Ray's message (the exit code and
// the end of the driver's output) in its status.
func testRealJobFailing(t *testing.T, e *rayEnv) {
	const name = "boom"
	job := realJob(t, name, rayv1.K8sJobMode)
	job.Spec.Entrypoint = `python -c "raise SystemExit('the driver gives up on purpose')"`
	job.Spec.SubmitterConfig = &rayv1.SubmitterConfig{BackoffLimit: ptr.To[int32](0)}
	_, err := e.ray.RayV1().RayJobs(e.ns).Create(e.ctx, job, metav1.CreateOptions{})
	must(t, "creating the RayJob", err)
	job = e.waitRealJob(t, name)
	s := job.Status
	if s.JobDeploymentStatus != rayv1.JobDeploymentStatusFailed || s.JobStatus != rayv1.JobStatusFailed {
		t.Fatalf("RayJob ended %q/%q (reason %q, message %q); want Failed, FAILED", s.JobDeploymentStatus, s.JobStatus, s.Reason, s.Message)
	}
	if !strings.Contains(s.Message, "exit code 1") || !strings.Contains(s.Message, "the driver gives up on purpose") {
		t.Errorf("the failed RayJob's message is %q, want Ray's: the exit code and the driver's last output", s.Message)
	}
}

// (4) rayctl killed with SIGKILL while a real Ray job runs, then started again on the same data dir: the
// pods' Ray keeps running meanwhile, the RayJob completes, SUCCEEDED, and the head's job list holds
// exactly one submission of it.
func TestRealRayJobSurvivesRayctlKill(t *testing.T) {
	t.Parallel()
	hostRay(t)
	realRaySlots <- struct{}{}
	t.Cleanup(func() { <-realRaySlots })
	e := newRayEnv(t, startPurgedInstance(t, "--runtime", "process"))
	_, cm := realRaySample(t)
	_, err := e.in.Client.CoreV1().ConfigMaps(e.ns).Create(e.ctx, cm, metav1.CreateOptions{})
	must(t, "creating the sample's ConfigMap", err)

	const name = "survivor"
	job := realJob(t, name, rayv1.K8sJobMode)
	job.Spec.Entrypoint = "sh -c 'until [ -e /tmp/release-" + name + " ]; do sleep 0.2; done; python /home/ray/samples/sample_code.py'"
	_, err = e.ray.RayV1().RayJobs(e.ns).Create(e.ctx, job, metav1.CreateOptions{})
	must(t, "creating the RayJob", err)
	var head *corev1.Pod
	var jobID string
	e.waitFor(t, realRayTimeout, "the job RUNNING on the head", func(ctx context.Context) (bool, string, error) {
		j, err := e.ray.RayV1().RayJobs(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || j.Status.JobId == "" || j.Status.RayClusterName == "" {
			return false, "no job id yet", err
		}
		heads, err := e.clusterPods(ctx, j.Status.RayClusterName, "head")
		if err != nil || len(heads) != 1 || heads[0].Status.PodIP == "" {
			return false, podsState(heads), err
		}
		var jobs []dashboardJob
		if err := e.dashboardGet(ctx, heads[0].Status.PodIP, "/api/jobs/", &jobs); err != nil {
			return false, "", err
		}
		for _, dj := range jobs {
			if dj.SubmissionID != nil && *dj.SubmissionID == j.Status.JobId && dj.Status == "RUNNING" {
				head, jobID = &heads[0], j.Status.JobId
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("dashboard: %+v", jobs), nil
	})

	e.in.Kill()
	restarted := time.Now()
	must(t, "restarting rayctl after SIGKILL", e.in.Restart())
	e.ray, err = rayclient.NewForConfig(e.in.Config)
	must(t, "a ray.io client after the restart", err)
	e.releaseJobWithin(t, name, realRayTimeout)
	job = e.waitRealJob(t, name)
	s := job.Status
	if s.JobDeploymentStatus != rayv1.JobDeploymentStatusComplete || s.JobStatus != rayv1.JobStatusSucceeded || s.JobId != jobID {
		t.Fatalf("after the restart the RayJob ended %q/%q as job %q (reason %q, message %q); want Complete, SUCCEEDED as %s",
			s.JobDeploymentStatus, s.JobStatus, s.JobId, s.Reason, s.Message, jobID)
	}
	t.Logf("figures: RayJob Complete %s after the restart", time.Since(restarted).Round(time.Millisecond))
	after := e.liveHead(t, s.RayClusterName)
	if after.UID != head.UID {
		t.Errorf("the head pod was replaced across the restart (%s → %s)", head.Name, after.Name)
	}
	n, all, err := e.submissions(e.ctx, after.Status.PodIP, jobID)
	must(t, "listing the dashboard's jobs", err)
	if n != 1 || len(all) != 1 {
		t.Errorf("the head's dashboard lists %d jobs (%d under %s), want exactly one submission: %+v", len(all), n, jobID, all)
	}
	wantDriverOutput(t, "ray job logs "+jobID, e.headExec(t, after, "ray", "job", "logs", jobID))
}

// testRealAutoscaler: the same manifests' autoscaling on real Ray, where the sidecar is Ray's own
// autoscaler: a head with no CPUs, a job asking for one, a 1-CPU worker group from 0 to 1, workers idle
// for 10 s going.
func testRealAutoscaler(t *testing.T, e *rayEnv) {
	c := autoscalingCluster("real-asc")
	c.Spec.RayVersion = "2.60.0"
	c.Spec.AutoscalerOptions.IdleTimeoutSeconds = ptr.To[int32](10)
	head, g := &c.Spec.HeadGroupSpec, &c.Spec.WorkerGroupSpecs[0]
	head.RayStartParams["num-cpus"], g.RayStartParams["num-cpus"] = "0", "1"
	g.MaxReplicas = ptr.To[int32](1)
	for _, ctr := range []*corev1.Container{&head.Template.Spec.Containers[0], &g.Template.Spec.Containers[0]} {
		ctr.Image = "rayproject/ray:2.60.0"
		ctr.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("3Gi")}
	}
	_, logs := e.autoscales(t, c, 1, false, realRayTimeout)
	for _, line := range []string{"Submitting a scale request", "Removing 1 nodes of type cpu (idle)"} {
		if !strings.Contains(logs, line) {
			t.Errorf("Ray's autoscaler's log lacks %q", line)
		}
	}
}

// (9) configs/samples/rayservice-real.yaml on real Ray Serve: the RayService becomes Ready with the
// application of the ConfigMap's module (on PYTHONPATH, no runtime_env download) RUNNING, and
// `kubectl port-forward svc/<name>-serve-svc` reaches it.
func testRealService(t *testing.T, e *rayEnv) {
	const name = "rayservice-real"
	// Serve needs the serve extra (hack/ray-version); a venv made before it was pinned lacks it.
	venv := filepath.Dir(filepath.Dir(hostRay(t)))
	if m, _ := filepath.Glob(filepath.Join(venv, "lib", "python*", "site-packages", "starlette")); len(m) == 0 {
		t.Fatalf("the Ray at %s has no Ray Serve (ray[serve]'s starlette is missing): run `make ray` again (hack/ray-version pins ray[default,serve])", venv)
	}
	b, err := os.ReadFile(samplePath("rayservice-real.yaml"))
	must(t, "reading the real-Ray RayService sample", err)
	docs := strings.Split(string(b), "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("the sample has %d documents, want a RayService and a ConfigMap", len(docs))
	}
	rs, cm := &rayv1.RayService{}, &corev1.ConfigMap{}
	must(t, "decoding the sample RayService", yaml.UnmarshalStrict([]byte(docs[0]), rs))
	must(t, "decoding the sample ConfigMap", yaml.UnmarshalStrict([]byte(docs[1]), cm))
	_, err = e.in.Client.CoreV1().ConfigMaps(e.ns).Create(e.ctx, cm, metav1.CreateOptions{})
	must(t, "creating the ConfigMap", err)
	started := time.Now()
	_, err = e.ray.RayV1().RayServices(e.ns).Create(e.ctx, rs, metav1.CreateOptions{})
	must(t, "creating the RayService", err)
	got := e.waitService(t, name, "Ready on real Ray Serve", realRayTimeout, serviceReady)
	t.Logf("Ready after %s: %s", time.Since(started).Round(100*time.Millisecond), serviceState(got))
	if a := got.Status.ActiveServiceStatus.Applications["hello"]; a.Deployments["Hello"].Status != "HEALTHY" {
		t.Errorf("application hello: %+v, want its deployment Hello HEALTHY", a)
	}
	_, port := portForward(t, e.ctx, e.in, e.ns, nil, "svc/"+name+"-serve-svc", 8000)
	code, body, err := httpGet(e.ctx, fmt.Sprintf("http://127.0.0.1:%d/hello/world", port))
	if err != nil || code != 200 || !strings.HasPrefix(body, "hello from real Ray Serve: path=/hello") {
		t.Errorf("GET /hello/world through port-forward: %d %q (%v), want 200 from the ConfigMap's module", code, body, err)
	}
	t.Logf("GET /hello/world: %d %q", code, body)
}
