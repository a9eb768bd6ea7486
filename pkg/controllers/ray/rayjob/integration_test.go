package rayjob_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
	"github.com/rayctl/rayctl/pkg/controllers/ray/rayjob"
	"github.com/rayctl/rayctl/pkg/raysim/jobs"
	"github.com/rayctl/rayctl/pkg/raysim/node"
	"github.com/rayctl/rayctl/test/e2e/framework"
)

// env is one `rayctl up` process, an in-process raysim head standing in for
// every RayCluster's head, and a manager running the RayJob controller plus a
// stub that marks each RayCluster ready (head pod IP 127.0.0.1).
type env struct {
	c    client.Client
	head *node.Head
	ray  *jobs.Client
}

func startEnv(t *testing.T) *env {
	t.Helper()
	if testing.Short() {
		t.Skip("starts rayctl up")
	}
	// This test runs its own RayJob controller and marks clusters ready itself.
	in, err := framework.Start("", framework.ControlPlaneOnly()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Cleanup(t) })

	head, err := node.StartHead(node.HeadConfig{BindHost: "127.0.0.1", NodeIP: "127.0.0.1", TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { head.Close() })

	reg := &ctrlset.Registry{}
	reg.Register(rayjob.Name, rayjob.Options{
		// Every cluster's "head" is the in-process raysim, reachable once the stub reports a pod IP.
		Resolver: func(_ context.Context, c *rayv1.RayCluster) (string, error) {
			if c.Status.Head.PodIP == "" {
				return "", fmt.Errorf("no head pod IP")
			}
			return head.DashboardURL(), nil
		},
	}.Setup)
	reg.Register("readystub", setupReadyStub)
	opts := ctrlset.DefaultOptions()
	opts.Controllers = []string{"all"}
	opts.Registry = reg
	opts.LeaderElection = false
	mgr, err := ctrlset.New(in.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	// The test reads and writes straight through the API server, not the manager's cache.
	direct, err := client.New(in.Config, client.Options{Scheme: ctrlset.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return &env{c: direct, head: head, ray: jobs.NewClient(head.DashboardURL())}
}

// setupReadyStub stands in for the RayCluster controller: every RayCluster is
// reported ready at once, its head at 127.0.0.1.
func setupReadyStub(mgr ctrl.Manager, _ ctrlset.Env) error {
	c := mgr.GetClient()
	return ctrl.NewControllerManagedBy(mgr).Named("readystub").For(&rayv1.RayCluster{}).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			rc := &rayv1.RayCluster{}
			if err := c.Get(ctx, req.NamespacedName, rc); err != nil {
				return reconcile.Result{}, client.IgnoreNotFound(err)
			}
			if rc.Status.State == rayv1.Ready {
				return reconcile.Result{}, nil
			}
			rc.Status.State = rayv1.Ready //nolint:staticcheck // KubeRay still reads State
			rc.Status.Head = rayv1.HeadInfo{PodIP: "127.0.0.1", PodName: rc.Name + "-head"}
			rc.Status.ReadyWorkerReplicas = 0
			return reconcile.Result{}, c.Status().Update(ctx, rc)
		}))
}

func clusterSpec() *rayv1.RayClusterSpec {
	return &rayv1.RayClusterSpec{
		RayVersion: "2.46.0",
		HeadGroupSpec: rayv1.HeadGroupSpec{
			RayStartParams: map[string]string{"dashboard-host": "0.0.0.0"},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "ray-head", Image: "rayctl.local/raysim:latest",
				Ports: []corev1.ContainerPort{{Name: "gcs-server", ContainerPort: 6379}, {Name: "dashboard", ContainerPort: 8265}},
			}}}},
		},
	}
}

func rayJob(name string, mode rayv1.JobSubmissionMode, entrypoint string, mut ...func(*rayv1.RayJob)) *rayv1.RayJob {
	j := &rayv1.RayJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       rayv1.RayJobSpec{Entrypoint: entrypoint, SubmissionMode: mode, RayClusterSpec: clusterSpec()},
	}
	for _, m := range mut {
		m(j)
	}
	return j
}

func (e *env) create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := e.c.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %s: %v", obj.GetName(), err)
	}
}

func (e *env) get(t *testing.T, name string) *rayv1.RayJob {
	t.Helper()
	j := &rayv1.RayJob{}
	if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: name}, j); err != nil {
		t.Fatalf("get RayJob %s: %v", name, err)
	}
	return j
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (e *env) waitDeployment(t *testing.T, name string, want rayv1.JobDeploymentStatus) *rayv1.RayJob {
	t.Helper()
	var j *rayv1.RayJob
	waitFor(t, 60*time.Second, fmt.Sprintf("RayJob %s to be %s", name, want), func() bool {
		j = e.get(t, name)
		if rayv1.IsJobDeploymentTerminal(j.Status.JobDeploymentStatus) && j.Status.JobDeploymentStatus != want {
			t.Fatalf("RayJob %s ended %s (%s: %s), want %s", name, j.Status.JobDeploymentStatus, j.Status.Reason, j.Status.Message, want)
		}
		return j.Status.JobDeploymentStatus == want
	})
	return j
}

// submissions counts the dashboard's jobs with the given submission id.
func (e *env) submissions(t *testing.T, id string) int {
	t.Helper()
	list, err := e.ray.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range list {
		if d.SubmissionID != nil && *d.SubmissionID == id {
			n++
		}
	}
	return n
}

// touch changes an annotation n times, each change a watch event and a reconcile.
func (e *env) touch(t *testing.T, name string, n int) {
	t.Helper()
	for i := range n {
		patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{"test/touch":"%d"}}}`, i))
		j := &rayv1.RayJob{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
		if err := e.c.Patch(context.Background(), j, client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRayJobAgainstAPIServer(t *testing.T) {
	e := startEnv(t)

	t.Run("HTTPMode completes with exactly one submission through a reconcile storm", func(t *testing.T) {
		t.Parallel()
		e.create(t, rayJob("http-ok", rayv1.HTTPMode, "echo hello from ray job && sleep 2"))
		j := e.waitDeployment(t, "http-ok", rayv1.JobDeploymentStatusRunning)
		if !strings.HasPrefix(j.Status.JobId, "http-ok-") || j.Status.DashboardURL != j.Status.RayClusterName+"-head-svc.default.svc.cluster.local:8265" {
			t.Errorf("jobId %q dashboardURL %q", j.Status.JobId, j.Status.DashboardURL)
		}
		e.touch(t, "http-ok", 30)
		j = e.waitDeployment(t, "http-ok", rayv1.JobDeploymentStatusComplete)
		e.touch(t, "http-ok", 30)
		time.Sleep(time.Second)
		if n := e.submissions(t, j.Status.JobId); n != 1 {
			t.Fatalf("the dashboard has %d jobs with submission id %s, want 1", n, j.Status.JobId)
		}
		if j.Status.JobStatus != rayv1.JobStatusSucceeded || j.Status.EndTime == nil || j.Status.Succeeded == nil || *j.Status.Succeeded != 1 {
			t.Errorf("status %+v", j.Status)
		}
		rc := &rayv1.RayCluster{}
		if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: j.Status.RayClusterName}, rc); err != nil {
			t.Fatalf("RayCluster %s: %v", j.Status.RayClusterName, err)
		}
		if ref := metav1.GetControllerOf(rc); ref == nil || ref.Name != "http-ok" || ref.UID != j.UID {
			t.Errorf("RayCluster controller ref %+v", ref)
		}
		svc := &corev1.Service{}
		if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: "http-ok-head-svc"}, svc); err != nil {
			t.Errorf("RayJob head service: %v", err)
		} else if svc.Spec.Selector["ray.io/cluster"] != j.Status.RayClusterName {
			t.Errorf("head service selector %v", svc.Spec.Selector)
		}
	})

	t.Run("a failing entrypoint fails the RayJob with Ray's message", func(t *testing.T) {
		t.Parallel()
		e.create(t, rayJob("http-fail", rayv1.HTTPMode, "echo about to fail; exit 3"))
		j := e.waitDeployment(t, "http-fail", rayv1.JobDeploymentStatusFailed)
		if j.Status.JobStatus != rayv1.JobStatusFailed || j.Status.Reason != rayv1.AppFailed {
			t.Errorf("jobStatus %q reason %q", j.Status.JobStatus, j.Status.Reason)
		}
		if !strings.Contains(j.Status.Message, "exit code 3") {
			t.Errorf("message %q does not mention exit code 3", j.Status.Message)
		}
		if j.Status.Failed == nil || *j.Status.Failed != 1 {
			t.Errorf("failed = %v", j.Status.Failed)
		}
	})

	t.Run("shutdownAfterJobFinishes deletes the RayCluster after the TTL", func(t *testing.T) {
		t.Parallel()
		e.create(t, rayJob("http-ttl", rayv1.HTTPMode, "true", func(j *rayv1.RayJob) {
			j.Spec.ShutdownAfterJobFinishes = true
			j.Spec.TTLSecondsAfterFinished = 1
		}))
		j := e.waitDeployment(t, "http-ttl", rayv1.JobDeploymentStatusComplete)
		key := types.NamespacedName{Namespace: "default", Name: j.Status.RayClusterName}
		waitFor(t, 30*time.Second, "the RayCluster to be deleted", func() bool {
			return apierrors.IsNotFound(e.c.Get(context.Background(), key, &rayv1.RayCluster{}))
		})
		if got := e.get(t, "http-ttl").Status.JobDeploymentStatus; got != rayv1.JobDeploymentStatusComplete {
			t.Errorf("after shutdown the RayJob is %q", got)
		}
	})

	t.Run("K8sJobMode creates the submitter Job and completes when it has", func(t *testing.T) {
		t.Parallel()
		e.create(t, rayJob("k8s", "", "echo hello"))
		j := e.waitDeployment(t, "k8s", rayv1.JobDeploymentStatusRunning)
		if j.Spec.SubmissionMode != rayv1.K8sJobMode {
			t.Errorf("submissionMode defaulted to %q", j.Spec.SubmissionMode)
		}
		sub := &batchv1.Job{}
		key := types.NamespacedName{Namespace: "default", Name: "k8s"}
		if err := e.c.Get(context.Background(), key, sub); err != nil {
			t.Fatalf("submitter Job: %v", err)
		}
		if ref := metav1.GetControllerOf(sub); ref == nil || ref.Kind != "RayJob" || ref.UID != j.UID {
			t.Errorf("submitter owner %+v", ref)
		}
		c := sub.Spec.Template.Spec.Containers[0]
		addr := "http://" + j.Status.DashboardURL
		wantScript := fmt.Sprintf("if ! ray job status --address %[1]s %[2]s >/dev/null 2>&1 ; then ray job submit --address %[1]s --no-wait --submission-id %[2]s -- echo hello ; fi ; ray job logs --address %[1]s --follow %[2]s", addr, j.Status.JobId)
		if c.Image != "rayctl.local/raysim:latest" || strings.Join(c.Command, " ") != "/bin/bash -ce --" || len(c.Args) != 1 || c.Args[0] != wantScript {
			t.Errorf("submitter container image %q command %q args %q\nwant args %q", c.Image, c.Command, c.Args, wantScript)
		}

		// Play the submitter pod: submit under the RayJob's id and let the job finish.
		if _, err := e.ray.Submit(context.Background(), jobs.SubmitRequest{Entrypoint: "echo hello", SubmissionID: j.Status.JobId}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, "jobStatus SUCCEEDED", func() bool { return e.get(t, "k8s").Status.JobStatus == rayv1.JobStatusSucceeded })
		if got := e.get(t, "k8s").Status.JobDeploymentStatus; got != rayv1.JobDeploymentStatusRunning {
			t.Fatalf("RayJob is %q before its submitter finished, want Running", got)
		}
		now := metav1.Now()
		sub.Status.StartTime = &now
		sub.Status.CompletionTime = &now
		sub.Status.Succeeded = 1
		sub.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}
		if err := e.c.Status().Update(context.Background(), sub); err != nil {
			t.Fatal(err)
		}
		j = e.waitDeployment(t, "k8s", rayv1.JobDeploymentStatusComplete)
		if n := e.submissions(t, j.Status.JobId); n != 1 {
			t.Errorf("%d submissions", n)
		}
	})

	t.Run("clusterSelector uses an existing cluster and never deletes it", func(t *testing.T) {
		t.Parallel()
		e.create(t, &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: "default"}, Spec: *clusterSpec()})
		e.create(t, rayJob("selector", rayv1.HTTPMode, "echo on a shared cluster", func(j *rayv1.RayJob) {
			j.Spec.RayClusterSpec = nil
			j.Spec.ClusterSelector = map[string]string{"ray.io/cluster": "shared"}
			j.Spec.ShutdownAfterJobFinishes = true
		}))
		j := e.waitDeployment(t, "selector", rayv1.JobDeploymentStatusComplete)
		if j.Status.RayClusterName != "shared" {
			t.Errorf("rayClusterName %q", j.Status.RayClusterName)
		}
		time.Sleep(4 * time.Second) // several polling periods past the end
		rc := &rayv1.RayCluster{}
		if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: "shared"}, rc); err != nil {
			t.Fatalf("the selected cluster: %v", err)
		}
		if !rc.DeletionTimestamp.IsZero() || metav1.GetControllerOf(rc) != nil {
			t.Errorf("the selected cluster was taken over: deletion %v owner %+v", rc.DeletionTimestamp, metav1.GetControllerOf(rc))
		}
		list := &rayv1.RayClusterList{}
		if err := e.c.List(context.Background(), list, client.MatchingLabels{"ray.io/originated-from-cr-name": "selector"}); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 0 {
			t.Errorf("a cluster was created for a clusterSelector job: %s", list.Items[0].Name)
		}
	})

	t.Run("a bad spec is ValidationFailed with a message", func(t *testing.T) {
		t.Parallel()
		e.create(t, rayJob("invalid", rayv1.HTTPMode, ""))
		j := e.waitDeployment(t, "invalid", rayv1.JobDeploymentStatusValidationFailed)
		if !strings.Contains(j.Status.Message, "entrypoint must be set") {
			t.Errorf("message %q", j.Status.Message)
		}
	})
}

// The K8sJobMode submitter script, run as its pod would run it (bash, with
// raysim as `ray`), submits the job once, follows it to the end, and when run
// again (a retried submitter pod) does not submit a second time.
func TestSubmitterScriptAgainstRaysim(t *testing.T) {
	if testing.Short() {
		t.Skip("builds rayctl")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	bin, err := framework.Binary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(dir, "ray")); err != nil {
		t.Fatal(err)
	}
	head, err := node.StartHead(node.HeadConfig{BindHost: "127.0.0.1", NodeIP: "127.0.0.1", TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer head.Close()

	j := rayJob("script", rayv1.K8sJobMode, "sh -c 'echo hello from ray job && sleep 1'")
	j.Status.JobId = "script-abcde"
	j.Status.DashboardURL = strings.TrimPrefix(head.DashboardURL(), "http://")
	sub, err := rayjob.SubmitterJob(j, &rayv1.RayCluster{Spec: *clusterSpec()}, false)
	if err != nil {
		t.Fatal(err)
	}
	c := sub.Spec.Template.Spec.Containers[0]
	run := func() string {
		cmd := exec.Command(bash, append(c.Command[1:], c.Args...)...)
		cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("submitter script failed: %v\n%s", err, out)
		}
		return string(out)
	}
	if out := run(); !strings.Contains(out, "hello from ray job") {
		t.Errorf("the submitter did not follow the job's logs:\n%s", out)
	}
	run()
	list, err := jobs.NewClient(head.DashboardURL()).List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Status != jobs.StatusSucceeded {
		t.Fatalf("dashboard jobs after two submitter runs: %+v", list)
	}
}
