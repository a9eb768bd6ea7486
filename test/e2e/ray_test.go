package e2e

// The Ray tests: RayClusters and RayJobs from the samples in configs/samples, run end to end on an
// instance of their own (everything on: controllers, kubelet, binder, cluster DNS, the containerd runtime when present)
// with the raysim image. Each test works in a namespace of its own and deletes it at the end; the Ray
// dashboard's Jobs API is read straight from the head pod's IP, which the host reaches over the pod bridge.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/kubectl/pkg/util/podutils"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

// rayTimeout bounds one wait in a Ray test: pods start in containerd on a 2-core CI machine while other
// tests do the same, so it is generous.
const rayTimeout = 3 * time.Minute

// rayEnv is what a Ray test works with.
type rayEnv struct {
	in  *framework.Instance
	ray rayclient.Interface
	ctx context.Context
	ns  string
}

// TestRay runs the Ray tests, in parallel, on an instance of their own with everything on (the default
// arguments), stopped once they are all done. They do not share the package's shared instance: other tests
// create RayJobs there for the schema alone (images that do not exist, 1 CPU per pod) which the controllers
// would turn into pods holding the node's CPU.
func TestRay(t *testing.T) {
	t.Parallel()
	in, err := framework.Start("")
	if err != nil {
		t.Fatalf("starting rayctl: %v", err)
	}
	t.Cleanup(func() { in.Cleanup(t) })
	for _, tc := range []struct {
		name string
		test func(t *testing.T, e *rayEnv)
	}{
		{"ClusterSample", testClusterSample},
		{"ClusterScale", testClusterScale},
		{"WorkerPodReplaced", testWorkerPodReplaced},
		{"JobK8sJobMode", testJobMode("K8sJobMode", "rayjob-k8sjob.yaml")},
		{"JobHTTPMode", testJobMode("HTTPMode", "rayjob-http.yaml")},
		{"JobSidecarMode", testJobMode("SidecarMode", "rayjob-sidecar.yaml")},
		{"JobTrace", testJobTrace},
		{"CronJob", testCronJob},
		{"Service", testService},
		{"ServiceUpgrade", testServiceUpgrade},
		{"ServiceBadConfig", testServiceBadConfig},
		{"JobFailingEntrypoint", testJobFailingEntrypoint},
		{"JobShutdownAfterFinish", testJobShutdownAfterFinish},
		{"ClusterDeletionCollectsPods", testClusterDeletionCollectsPods},
		{"HeadPodRecreated", testHeadPodRecreated},
		{"HeadRayProcessKilled", testHeadRayProcessKilled},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.test(t, raySetup(t, in)) })
	}
}

// raySetup marks the test parallel and returns the instance's clients, a context and a fresh namespace
// that is deleted (and waited for) when the test ends.
func raySetup(t *testing.T, in *framework.Instance) *rayEnv {
	t.Helper()
	t.Parallel()
	return newRayEnv(t, in)
}

// newRayEnv is raySetup for a test that is parallel already (or must not be).
func newRayEnv(t *testing.T, in *framework.Instance) *rayEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	t.Cleanup(cancel)
	rc, err := rayclient.NewForConfig(in.Config)
	must(t, "a ray.io client", err)
	ns := newNamespace(t, ctx, in)
	e := &rayEnv{in: in, ray: rc, ctx: ctx, ns: ns}
	t.Cleanup(func() {
		if t.Failed() {
			dctx, dcancel := context.WithTimeout(context.Background(), 2*time.Minute)
			e.dump(t, dctx)
			dcancel()
		}
		deleteNamespaceAndWait(t, in, ns, func() { e.dump(t, context.Background()) })
	})
	return e
}

// waitFor polls cond every 250 ms until it reports true, failing the test after timeout with the last
// state cond described. An error from cond is a state too (kept for the message), not a failure.
func (e *rayEnv) waitFor(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, timeout)
	defer cancel()
	var last string
	for {
		ok, desc, err := cond(ctx)
		if err != nil {
			desc = fmt.Sprintf("%s (error: %v)", desc, err)
		}
		if ok {
			return
		}
		last = desc
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within %s; last seen: %s", what, timeout, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// samplePath is a file of configs/samples.
func samplePath(name string) string {
	_, file, _, _ := goruntime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "configs", "samples", name)
}

// loadSample decodes configs/samples/<name> into obj.
func loadSample(t *testing.T, name string, obj any) {
	t.Helper()
	b, err := os.ReadFile(samplePath(name))
	must(t, "reading sample "+name, err)
	must(t, "decoding sample "+name, yaml.UnmarshalStrict(b, obj))
}

// sampleCluster is the sample RayCluster under another name.
func sampleCluster(t *testing.T, name string) *rayv1.RayCluster {
	c := &rayv1.RayCluster{}
	loadSample(t, "raycluster.yaml", c)
	c.Name = name
	return c
}

// createCluster creates c in the test's namespace.
func (e *rayEnv) createCluster(t *testing.T, c *rayv1.RayCluster) {
	t.Helper()
	_, err := e.ray.RayV1().RayClusters(e.ns).Create(e.ctx, c, metav1.CreateOptions{})
	must(t, "creating RayCluster "+c.Name, err)
}

// clusterPods lists the live (not terminating) pods of a cluster of one node type ("head", "worker"),
// or of every type when nodeType is empty, sorted by name.
func (e *rayEnv) clusterPods(ctx context.Context, cluster, nodeType string) ([]corev1.Pod, error) {
	sel := "ray.io/cluster=" + cluster
	if nodeType != "" {
		sel += ",ray.io/node-type=" + nodeType
	}
	list, err := e.in.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// runningReady reports whether a pod is Running with its Ready condition True.
func runningReady(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning && podutils.IsPodReady(p)
}

// podsState is a short description of pods for failure messages.
func podsState(pods []corev1.Pod) string {
	var parts []string
	for _, p := range pods {
		parts = append(parts, fmt.Sprintf("%s(%s ready=%v ip=%s)", p.Name, p.Status.Phase, runningReady(&p), p.Status.PodIP))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// clusterState is a short description of a RayCluster's status for failure messages.
func clusterState(c *rayv1.RayCluster) string {
	s := c.Status
	return fmt.Sprintf("state=%q reason=%q readyWorkers=%d availableWorkers=%d desiredWorkers=%d head=%s/%s",
		s.State, s.Reason, s.ReadyWorkerReplicas, s.AvailableWorkerReplicas, s.DesiredWorkerReplicas, s.Head.PodName, s.Head.PodIP)
}

// waitClusterReady waits until the cluster is ready with workers ready worker replicas, exactly one live
// head pod and workers live worker pods, all Running and Ready, and returns the cluster and its pods.
func (e *rayEnv) waitClusterReady(t *testing.T, name string, workers int) (*rayv1.RayCluster, *corev1.Pod, []corev1.Pod) {
	t.Helper()
	return e.waitClusterReadyWithin(t, name, workers, rayTimeout)
}

// waitClusterReadyWithin is waitClusterReady with a timeout of its own.
func (e *rayEnv) waitClusterReadyWithin(t *testing.T, name string, workers int, timeout time.Duration) (*rayv1.RayCluster, *corev1.Pod, []corev1.Pod) {
	t.Helper()
	var (
		cluster *rayv1.RayCluster
		head    *corev1.Pod
		wpods   []corev1.Pod
	)
	e.waitFor(t, timeout, fmt.Sprintf("RayCluster %s ready with %d worker(s)", name, workers), func(ctx context.Context) (bool, string, error) {
		c, err := e.ray.RayV1().RayClusters(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "RayCluster not read", err
		}
		heads, err := e.clusterPods(ctx, name, "head")
		if err != nil {
			return false, clusterState(c), err
		}
		ws, err := e.clusterPods(ctx, name, "worker")
		if err != nil {
			return false, clusterState(c), err
		}
		desc := fmt.Sprintf("%s; head pods %s; worker pods %s", clusterState(c), podsState(heads), podsState(ws))
		if c.Status.State != rayv1.Ready || c.Status.ReadyWorkerReplicas != int32(workers) || c.Status.DesiredWorkerReplicas != int32(workers) {
			return false, desc, nil
		}
		if len(heads) != 1 || !runningReady(&heads[0]) || len(ws) != workers {
			return false, desc, nil
		}
		for i := range ws {
			if !runningReady(&ws[i]) {
				return false, desc, nil
			}
		}
		cluster, head, wpods = c, &heads[0], ws
		return true, desc, nil
	})
	return cluster, head, wpods
}

// dashboardGet GETs path from the Ray dashboard on a head pod's IP and decodes the JSON answer into out.
func (e *rayEnv) dashboardGet(ctx context.Context, podIP, path string, out any) error {
	hc := e.in.PodHTTPClient(10 * time.Second)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(podIP, "8265")+path, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d: %s", path, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("GET %s: %v in %s", path, err, b)
	}
	return nil
}

// dashboardJob is the part of a GET /api/jobs/ entry the tests read.
type dashboardJob struct {
	SubmissionID *string `json:"submission_id"`
	Status       string  `json:"status"`
	Entrypoint   string  `json:"entrypoint"`
}

// submissions counts the jobs the head's dashboard lists under submissionID, and returns all it lists.
func (e *rayEnv) submissions(ctx context.Context, podIP, submissionID string) (int, []dashboardJob, error) {
	var jobs []dashboardJob
	if err := e.dashboardGet(ctx, podIP, "/api/jobs/", &jobs); err != nil {
		return 0, nil, err
	}
	n := 0
	for _, j := range jobs {
		if j.SubmissionID != nil && *j.SubmissionID == submissionID {
			n++
		}
	}
	return n, jobs, nil
}

// dump logs the namespace's Ray objects, pods and events, for a failed test.
func (e *rayEnv) dump(t *testing.T, ctx context.Context) {
	var b strings.Builder
	fmt.Fprintf(&b, "namespace %s:\n", e.ns)
	if l, err := e.ray.RayV1().RayClusters(e.ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, c := range l.Items {
			fmt.Fprintf(&b, "  RayCluster %s: %s\n", c.Name, clusterState(&c))
		}
	}
	if l, err := e.ray.RayV1().RayJobs(e.ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, j := range l.Items {
			s := j.Status
			fmt.Fprintf(&b, "  RayJob %s: deployment=%q job=%q reason=%q message=%q cluster=%s jobId=%s\n",
				j.Name, s.JobDeploymentStatus, s.JobStatus, s.Reason, s.Message, s.RayClusterName, s.JobId)
		}
	}
	if l, err := e.ray.RayV1().RayServices(e.ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, rs := range l.Items {
			fmt.Fprintf(&b, "  RayService %s: %s\n", rs.Name, serviceState(&rs))
		}
	}
	if l, err := e.in.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range l.Items {
			fmt.Fprintf(&b, "  Pod %s: phase=%s deleting=%v ip=%s", p.Name, p.Status.Phase, p.DeletionTimestamp != nil, p.Status.PodIP)
			for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
				state := "waiting"
				switch {
				case cs.State.Running != nil:
					state = "running"
				case cs.State.Terminated != nil:
					state = fmt.Sprintf("terminated(%d %s)", cs.State.Terminated.ExitCode, cs.State.Terminated.Reason)
				case cs.State.Waiting != nil:
					state = "waiting(" + cs.State.Waiting.Reason + ")"
				}
				fmt.Fprintf(&b, " %s=%s/restarts=%d", cs.Name, state, cs.RestartCount)
			}
			b.WriteString("\n")
		}
	}
	if l, err := e.in.Client.CoreV1().Events(e.ns).List(ctx, metav1.ListOptions{}); err == nil {
		sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].LastTimestamp.Before(&l.Items[j].LastTimestamp) })
		for _, ev := range l.Items {
			fmt.Fprintf(&b, "  Event %s %s/%s %s: %s\n", ev.Type, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Reason, ev.Message)
		}
	}
	t.Log(b.String())
}

// (a) The sample RayCluster, applied with kubectl, comes up: ready with one ready worker, a Running and
// Ready head, the head service, and a worker whose wait-gcs-ready init container got through — which it
// only does once cluster DNS resolves the head service's name from inside the pod.
func testClusterSample(t *testing.T, e *rayEnv) {
	if out, stderr, err := e.in.Kubectl(e.ctx, "", "apply", "-n", e.ns, "-f", samplePath("raycluster.yaml")); err != nil {
		t.Fatalf("kubectl apply: %v\n%s%s", err, out, stderr)
	}
	const name = "raycluster-sample"
	cluster, head, workers := e.waitClusterReady(t, name, 1)

	if cluster.Status.Head.PodName != head.Name || cluster.Status.Head.PodIP != head.Status.PodIP {
		t.Errorf("status.head = %+v, want the head pod %s at %s", cluster.Status.Head, head.Name, head.Status.PodIP)
	}
	svc, err := e.in.Client.CoreV1().Services(e.ns).Get(e.ctx, name+"-head-svc", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the head service: %v", err)
	}
	if svc.Spec.Selector["ray.io/cluster"] != name || svc.Spec.Selector["ray.io/node-type"] != "head" {
		t.Errorf("head service selector %v does not pick the head", svc.Spec.Selector)
	}
	w := workers[0]
	var found bool
	for _, cs := range w.Status.InitContainerStatuses {
		if cs.Name != "wait-gcs-ready" {
			continue
		}
		found = true
		if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
			t.Errorf("worker %s: init container wait-gcs-ready is %+v, want terminated with exit code 0", w.Name, cs.State)
		}
	}
	if !found {
		t.Errorf("worker %s has no wait-gcs-ready init container status: %+v", w.Name, w.Status.InitContainerStatuses)
	}

	// What a user sees with kubectl.
	out, stderr, err := e.in.Kubectl(e.ctx, "", "get", "raycluster", name, "-n", e.ns, "-o", "jsonpath={.status.state}")
	if err != nil || out != "ready" {
		t.Errorf("kubectl get raycluster -o jsonpath={.status.state}: %q (%v %s), want ready", out, err, stderr)
	}
}

// (b) Scaling the worker group 1 → 2 → 1: the worker pods follow, and so does the status.
func testClusterScale(t *testing.T, e *rayEnv) {
	e.createCluster(t, sampleCluster(t, "scale"))
	e.waitClusterReady(t, "scale", 1)

	setReplicas := func(n int32) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			c, err := e.ray.RayV1().RayClusters(e.ns).Get(e.ctx, "scale", metav1.GetOptions{})
			if err != nil {
				return err
			}
			c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To(n)
			_, err = e.ray.RayV1().RayClusters(e.ns).Update(e.ctx, c, metav1.UpdateOptions{})
			return err
		})
		must(t, fmt.Sprintf("scaling to %d", n), err)
	}

	setReplicas(2)
	e.waitClusterReady(t, "scale", 2)

	setReplicas(1)
	_, _, workers := e.waitClusterReady(t, "scale", 1)
	// The pod scaled away is gone for good, not just terminating.
	e.waitFor(t, rayTimeout, "the removed worker pod deleted", func(ctx context.Context) (bool, string, error) {
		l, err := e.in.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/cluster=scale,ray.io/node-type=worker"})
		if err != nil {
			return false, "", err
		}
		return len(l.Items) == 1 && l.Items[0].UID == workers[0].UID, podsState(l.Items), nil
	})
}

// (c) Deleting the worker pod: a new one replaces it and the cluster is ready again.
func testWorkerPodReplaced(t *testing.T, e *rayEnv) {
	e.createCluster(t, sampleCluster(t, "replace"))
	_, _, workers := e.waitClusterReady(t, "replace", 1)
	old := workers[0]
	must(t, "deleting the worker pod", e.in.Client.CoreV1().Pods(e.ns).Delete(e.ctx, old.Name, metav1.DeleteOptions{}))

	e.waitFor(t, rayTimeout, "the deleted worker pod gone and a new one in its place", func(ctx context.Context) (bool, string, error) {
		l, err := e.in.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/cluster=replace,ray.io/node-type=worker"})
		if err != nil {
			return false, "", err
		}
		for _, p := range l.Items {
			if p.UID == old.UID {
				return false, podsState(l.Items), nil
			}
		}
		return len(l.Items) == 1, podsState(l.Items), nil
	})
	_, _, workers = e.waitClusterReady(t, "replace", 1)
	if workers[0].UID == old.UID {
		t.Fatalf("worker pod %s was not replaced", old.Name)
	}
}

// rayJobFromSample is a sample RayJob under another name, keeping its cluster after the job (so that
// the dashboard can be read) unless the test says otherwise.
func rayJobFromSample(t *testing.T, sample, name string) *rayv1.RayJob {
	j := &rayv1.RayJob{}
	loadSample(t, sample, j)
	j.Name = name
	j.Spec.ShutdownAfterJobFinishes = false
	j.Spec.TTLSecondsAfterFinished = 0
	return j
}

// waitJobFinished waits for a RayJob to reach Complete or Failed and returns it.
func (e *rayEnv) waitJobFinished(t *testing.T, name string) *rayv1.RayJob {
	t.Helper()
	var job *rayv1.RayJob
	e.waitFor(t, rayTimeout, "RayJob "+name+" finished", func(ctx context.Context) (bool, string, error) {
		j, err := e.ray.RayV1().RayJobs(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		s := j.Status
		desc := fmt.Sprintf("deployment=%q job=%q reason=%q message=%q cluster=%q clusterState=%q",
			s.JobDeploymentStatus, s.JobStatus, s.Reason, s.Message, s.RayClusterName, s.RayClusterStatus.State)
		job = j
		return s.JobDeploymentStatus == rayv1.JobDeploymentStatusComplete || s.JobDeploymentStatus == rayv1.JobDeploymentStatusFailed, desc, nil
	})
	return job
}

// releaseJob waits for RayJob name to be Running, then creates the file its gated entrypoint waits for
// in the head's Ray container.
func (e *rayEnv) releaseJob(t *testing.T, name string) {
	t.Helper()
	e.releaseJobWithin(t, name, rayTimeout)
}

// releaseJobWithin is releaseJob with a timeout of its own for the wait.
func (e *rayEnv) releaseJobWithin(t *testing.T, name string, timeout time.Duration) {
	t.Helper()
	var cluster string
	e.waitFor(t, timeout, "RayJob "+name+" Running", func(ctx context.Context) (bool, string, error) {
		j, err := e.ray.RayV1().RayJobs(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		cluster = j.Status.RayClusterName
		return j.Status.JobDeploymentStatus == rayv1.JobDeploymentStatusRunning,
			fmt.Sprintf("deployment=%q clusterState=%q", j.Status.JobDeploymentStatus, j.Status.RayClusterStatus.State), nil
	})
	heads, err := e.clusterPods(e.ctx, cluster, "head")
	must(t, "listing the head pod", err)
	if len(heads) != 1 {
		t.Fatalf("cluster %s: want one head pod, got %s", cluster, podsState(heads))
	}
	if out, stderr, err := e.in.Kubectl(e.ctx, "", "exec", "-n", e.ns, heads[0].Name, "-c", heads[0].Spec.Containers[0].Name,
		"--", "touch", "/tmp/release-"+name); err != nil {
		t.Fatalf("releasing the job: %v\n%s%s", err, out, stderr)
	}
}

// headIP is the IP of the live head pod of a cluster.
func (e *rayEnv) headIP(t *testing.T, cluster string) string {
	t.Helper()
	heads, err := e.clusterPods(e.ctx, cluster, "head")
	must(t, "listing the head pod", err)
	if len(heads) != 1 || heads[0].Status.PodIP == "" {
		t.Fatalf("cluster %s: want one head pod with an IP, got %s", cluster, podsState(heads))
	}
	return heads[0].Status.PodIP
}

// (d) A RayJob in each submission mode completes, SUCCEEDED, and the cluster's dashboard knows exactly one
// job under the RayJob's submission id: retried submissions (submitter Job retries, controller requeues)
// never run the job twice.
func testJobMode(mode, sample string) func(t *testing.T, e *rayEnv) {
	return func(t *testing.T, e *rayEnv) {
		name := strings.ToLower(mode)
		job := rayJobFromSample(t, sample, name)
		if got := job.Spec.SubmissionMode; got != "" && string(got) != mode {
			t.Fatalf("sample %s has submissionMode %s, want %s", sample, got, mode)
		}
		// The job waits for the test's signal, sent once the RayJob is Running. A job that ended at
		// once could end before the head Pod was first seen Ready: in SidecarMode the submitter
		// container then terminates, the Pod never becomes Ready, and the RayCluster (so the RayJob)
		// never leaves Initializing — as with KubeRay.
		job.Spec.Entrypoint = "sh -c 'until [ -e /tmp/release-" + name + " ]; do sleep 0.1; done; echo hello from ray job'"
		_, err := e.ray.RayV1().RayJobs(e.ns).Create(e.ctx, job, metav1.CreateOptions{})
		must(t, "creating the RayJob", err)
		e.releaseJob(t, name)

		job = e.waitJobFinished(t, name)
		s := job.Status
		if s.JobDeploymentStatus != rayv1.JobDeploymentStatusComplete || s.JobStatus != rayv1.JobStatusSucceeded {
			t.Fatalf("RayJob ended with jobDeploymentStatus %q, jobStatus %q (reason %q, message %q); want Complete, SUCCEEDED",
				s.JobDeploymentStatus, s.JobStatus, s.Reason, s.Message)
		}
		if s.JobId == "" || s.RayClusterName == "" || s.DashboardURL == "" {
			t.Errorf("status lacks jobId %q, rayClusterName %q or dashboardURL %q", s.JobId, s.RayClusterName, s.DashboardURL)
		}
		if ptr.Deref(s.Succeeded, 0) != 1 {
			t.Errorf("status.succeeded = %v, want 1", ptr.Deref(s.Succeeded, 0))
		}
		ip := e.headIP(t, s.RayClusterName)
		n, all, err := e.submissions(e.ctx, ip, s.JobId)
		must(t, "listing the dashboard's jobs", err)
		if n != 1 {
			t.Errorf("the dashboard lists %d jobs with submission id %s, want exactly 1; all: %+v", n, s.JobId, all)
		}
		if mode == "K8sJobMode" {
			j, err := e.in.Client.BatchV1().Jobs(e.ns).Get(e.ctx, name, metav1.GetOptions{})
			must(t, "the submitter Job", err)
			if j.Status.Succeeded != 1 {
				t.Errorf("submitter Job %s: succeeded=%d failed=%d, want 1 succeeded", name, j.Status.Succeeded, j.Status.Failed)
			}
		}
	}
}

// (e) A RayJob whose entrypoint exits non-zero fails: jobDeploymentStatus Failed, jobStatus FAILED.
func testJobFailingEntrypoint(t *testing.T, e *rayEnv) {
	job := rayJobFromSample(t, "rayjob-k8sjob.yaml", "boom")
	job.Spec.Entrypoint = "sh -c 'echo boom; exit 3'"
	_, err := e.ray.RayV1().RayJobs(e.ns).Create(e.ctx, job, metav1.CreateOptions{})
	must(t, "creating the RayJob", err)

	job = e.waitJobFinished(t, "boom")
	s := job.Status
	if s.JobDeploymentStatus != rayv1.JobDeploymentStatusFailed || s.JobStatus != rayv1.JobStatusFailed {
		t.Fatalf("RayJob ended with jobDeploymentStatus %q, jobStatus %q (reason %q, message %q); want Failed, FAILED",
			s.JobDeploymentStatus, s.JobStatus, s.Reason, s.Message)
	}
	t.Logf("failed as expected: reason %q, message %q", s.Reason, s.Message)
	n, all, err := e.submissions(e.ctx, e.headIP(t, s.RayClusterName), s.JobId)
	must(t, "listing the dashboard's jobs", err)
	if n != 1 {
		t.Errorf("the dashboard lists %d jobs with submission id %s, want exactly 1; all: %+v", n, s.JobId, all)
	}
	for _, j := range all {
		if j.SubmissionID != nil && *j.SubmissionID == s.JobId && j.Status != "FAILED" {
			t.Errorf("the dashboard says job %s is %s, want FAILED", s.JobId, j.Status)
		}
	}
}

// (f) shutdownAfterJobFinishes with ttlSecondsAfterFinished 1: once the job is done, its RayCluster and
// the cluster's pods are deleted; the RayJob stays, Complete.
func testJobShutdownAfterFinish(t *testing.T, e *rayEnv) {
	job := rayJobFromSample(t, "rayjob-k8sjob.yaml", "shutdown")
	job.Spec.ShutdownAfterJobFinishes = true
	job.Spec.TTLSecondsAfterFinished = 1
	_, err := e.ray.RayV1().RayJobs(e.ns).Create(e.ctx, job, metav1.CreateOptions{})
	must(t, "creating the RayJob", err)

	job = e.waitJobFinished(t, "shutdown")
	s := job.Status
	if s.JobDeploymentStatus != rayv1.JobDeploymentStatusComplete || s.JobStatus != rayv1.JobStatusSucceeded {
		t.Fatalf("RayJob ended with jobDeploymentStatus %q, jobStatus %q (reason %q, message %q); want Complete, SUCCEEDED",
			s.JobDeploymentStatus, s.JobStatus, s.Reason, s.Message)
	}
	cluster := s.RayClusterName
	e.waitFor(t, rayTimeout, "RayCluster "+cluster+" and its pods deleted after the job", func(ctx context.Context) (bool, string, error) {
		_, err := e.ray.RayV1().RayClusters(e.ns).Get(ctx, cluster, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, "", err
		}
		l, lerr := e.in.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/cluster=" + cluster})
		if lerr != nil {
			return false, "", lerr
		}
		return apierrors.IsNotFound(err) && len(l.Items) == 0, fmt.Sprintf("cluster found=%v pods %s", err == nil, podsState(l.Items)), nil
	})
	j, err := e.ray.RayV1().RayJobs(e.ns).Get(e.ctx, "shutdown", metav1.GetOptions{})
	must(t, "the RayJob after the shutdown", err)
	if j.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusComplete {
		t.Errorf("RayJob after the shutdown: jobDeploymentStatus %q, want it still Complete", j.Status.JobDeploymentStatus)
	}
}

// (g) Deleting a RayCluster: the garbage collector deletes its pods and services.
func testClusterDeletionCollectsPods(t *testing.T, e *rayEnv) {
	e.createCluster(t, sampleCluster(t, "doomed"))
	e.waitClusterReady(t, "doomed", 1)
	svcs, err := e.in.Client.CoreV1().Services(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: "ray.io/cluster=doomed"})
	must(t, "listing the cluster's services", err)
	if len(svcs.Items) == 0 {
		t.Fatalf("the cluster has no services labelled ray.io/cluster=doomed")
	}
	must(t, "deleting the RayCluster", e.ray.RayV1().RayClusters(e.ns).Delete(e.ctx, "doomed", metav1.DeleteOptions{}))

	e.waitFor(t, rayTimeout, "the RayCluster's pods and services deleted", func(ctx context.Context) (bool, string, error) {
		pods, err := e.in.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/cluster=doomed"})
		if err != nil {
			return false, "", err
		}
		svcs, err := e.in.Client.CoreV1().Services(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		var names []string
		for _, s := range svcs.Items {
			names = append(names, s.Name)
		}
		_, cerr := e.ray.RayV1().RayClusters(e.ns).Get(ctx, "doomed", metav1.GetOptions{})
		return len(pods.Items) == 0 && len(svcs.Items) == 0 && apierrors.IsNotFound(cerr),
			fmt.Sprintf("cluster gone=%v pods %s services %v", apierrors.IsNotFound(cerr), podsState(pods.Items), names), nil
	})
}

// (h) Deleting the head pod (Ray's head going away): a new head comes up, the worker reconnects to it, and
// the cluster is ready again with status.head pointing at the new pod.
func testHeadPodRecreated(t *testing.T, e *rayEnv) {
	e.createCluster(t, sampleCluster(t, "phoenix"))
	_, head, _ := e.waitClusterReady(t, "phoenix", 1)
	must(t, "deleting the head pod", e.in.Client.CoreV1().Pods(e.ns).Delete(e.ctx, head.Name, metav1.DeleteOptions{}))

	e.waitFor(t, rayTimeout, "the old head pod gone", func(ctx context.Context) (bool, string, error) {
		_, err := e.in.Client.CoreV1().Pods(e.ns).Get(ctx, head.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), "", nil
	})
	e.waitFor(t, rayTimeout, "a new head pod Running and Ready", func(ctx context.Context) (bool, string, error) {
		heads, err := e.clusterPods(ctx, "phoenix", "head")
		if err != nil {
			return false, "", err
		}
		return len(heads) == 1 && heads[0].UID != head.UID && runningReady(&heads[0]), podsState(heads), nil
	})
	cluster, newHead, _ := e.waitClusterReady(t, "phoenix", 1)
	if newHead.UID == head.UID {
		t.Fatalf("head pod %s was not replaced", head.Name)
	}
	if cluster.Status.Head.PodName != newHead.Name || cluster.Status.Head.PodIP != newHead.Status.PodIP {
		// The status may lag the pod by a reconcile; wait for it.
		e.waitFor(t, rayTimeout, "status.head pointing at the new head", func(ctx context.Context) (bool, string, error) {
			c, err := e.ray.RayV1().RayClusters(e.ns).Get(ctx, "phoenix", metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			return c.Status.Head.PodName == newHead.Name && c.Status.Head.PodIP == newHead.Status.PodIP, clusterState(c), nil
		})
	}
	e.waitFor(t, rayTimeout, "the worker registered with the new head", func(ctx context.Context) (bool, string, error) {
		n, report, err := e.aliveNodes(ctx, newHead.Status.PodIP)
		// The head is a Ray node too: the alive nodes are the head and the worker.
		return n == 2, "new head's dashboard:\n" + report, err
	})
	e.waitClusterReady(t, "phoenix", 1)
}

// testHeadRayProcessKilled kills the Ray process inside the head container: the container restarts in the
// same pod, the head Pod and the RayCluster's HeadPodReady condition show it not ready meanwhile, and the
// cluster comes back ready with the worker registered again.
func testHeadRayProcessKilled(t *testing.T, e *rayEnv) {
	e.createCluster(t, sampleCluster(t, "lazarus"))
	cluster, head, _ := e.waitClusterReady(t, "lazarus", 1)

	// Watch from the ready state on, so the dip is seen however short it is.
	podWatch, err := e.in.Client.CoreV1().Pods(e.ns).Watch(e.ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=" + head.Name, ResourceVersion: head.ResourceVersion})
	must(t, "watching the head pod", err)
	defer podWatch.Stop()
	clusterWatch, err := e.ray.RayV1().RayClusters(e.ns).Watch(e.ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=lazarus", ResourceVersion: cluster.ResourceVersion})
	must(t, "watching the RayCluster", err)
	defer clusterWatch.Stop()

	// The shell runs inside the container whose main process it kills: when that process ends, the runtime
	// kills the container's other processes, so the shell may die by SIGKILL (exit code 137) just after its
	// kill went out. That is the container ending, not a failed kill; the watches below show the restart.
	if out, stderr, err := e.in.Kubectl(e.ctx, "", "exec", "-n", e.ns, head.Name, "-c", head.Spec.Containers[0].Name,
		"--", "sh", "-c", "kill $(pidof ray)"); err != nil && !strings.Contains(out+stderr, "exit code 137") {
		t.Fatalf("killing ray in the head container: %v\n%s%s", err, out, stderr)
	}

	podNotReady, clusterNotReady := false, false
	deadline := time.After(rayTimeout)
	for !podNotReady || !clusterNotReady {
		select {
		case ev, ok := <-podWatch.ResultChan():
			if !ok {
				t.Fatal("head pod watch closed")
			}
			if p, isPod := ev.Object.(*corev1.Pod); isPod && !runningReady(p) {
				podNotReady = true
			}
		case ev, ok := <-clusterWatch.ResultChan():
			if !ok {
				t.Fatal("RayCluster watch closed")
			}
			if c, isCluster := ev.Object.(*rayv1.RayCluster); isCluster {
				if cond := meta.FindStatusCondition(c.Status.Conditions, string(rayv1.HeadPodReady)); cond != nil && cond.Status != metav1.ConditionTrue {
					clusterNotReady = true
				}
			}
		case <-deadline:
			t.Fatalf("after killing ray: head pod seen not ready=%v, RayCluster HeadPodReady seen false=%v", podNotReady, clusterNotReady)
		}
	}

	e.waitFor(t, rayTimeout, "the head container restarted in the same pod", func(ctx context.Context) (bool, string, error) {
		p, err := e.in.Client.CoreV1().Pods(e.ns).Get(ctx, head.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		restarts := int32(0)
		for _, cs := range p.Status.ContainerStatuses {
			restarts += cs.RestartCount
		}
		return restarts >= 1 && runningReady(p), fmt.Sprintf("restarts %d, %s", restarts, podsState([]corev1.Pod{*p})), nil
	})
	_, again, _ := e.waitClusterReady(t, "lazarus", 1)
	if again.UID != head.UID {
		t.Errorf("the head pod was replaced (%s -> %s); killing Ray should restart the container only", head.Name, again.Name)
	}
	e.waitFor(t, rayTimeout, "the worker registered with the restarted head", func(ctx context.Context) (bool, string, error) {
		n, report, err := e.aliveNodes(ctx, again.Status.PodIP)
		return n == 2, report, err
	})
}

// aliveNodes counts the nodes the `ray status` report of the head's dashboard (GET
// /api/cluster_status?format=1, as Ray serves it) lists as active or idle, and returns the report.
func (e *rayEnv) aliveNodes(ctx context.Context, podIP string) (int, string, error) {
	var resp struct {
		Data struct {
			ClusterStatus string `json:"clusterStatus"`
		} `json:"data"`
	}
	if err := e.dashboardGet(ctx, podIP, "/api/cluster_status?format=1", &resp); err != nil {
		return 0, "", err
	}
	report := resp.Data.ClusterStatus
	n := rayStatusNodes(report)
	if n < 0 {
		return 0, report, fmt.Errorf("no node status in the report")
	}
	return n, report, nil
}

// TestRayClusterWithoutInitContainerInjection: rayctl reads KubeRay's operator switch
// ENABLE_INIT_CONTAINER_INJECTION=false from its environment, as KubeRay's operator does from its own:
// the workers get no wait-gcs-ready init container, start beside the head (Ray's `ray start --address`
// waits for the GCS itself), and the cluster gets ready. Not parallel: it sets rayctl's environment.
func TestRayClusterWithoutInitContainerInjection(t *testing.T) {
	t.Setenv("ENABLE_INIT_CONTAINER_INJECTION", "false")
	in, err := framework.Start("")
	if err != nil {
		t.Fatalf("starting rayctl: %v", err)
	}
	t.Cleanup(func() { in.Cleanup(t) })
	e := newRayEnv(t, in)
	if out, stderr, err := e.in.Kubectl(e.ctx, "", "apply", "-n", e.ns, "-f", samplePath("raycluster.yaml")); err != nil {
		t.Fatalf("kubectl apply: %v\n%s%s", err, out, stderr)
	}
	_, head, workers := e.waitClusterReady(t, "raycluster-sample", 1)
	w := workers[0]
	if len(w.Spec.InitContainers) != 0 || len(w.Status.InitContainerStatuses) != 0 {
		t.Errorf("worker %s has init containers %+v, want none", w.Name, w.Spec.InitContainers)
	}
	for _, p := range []corev1.Pod{*head, w} {
		if p.Spec.Containers[0].ReadinessProbe == nil {
			t.Errorf("pod %s lost its readiness probe: only the init container is switched off", p.Name)
		}
	}
}
