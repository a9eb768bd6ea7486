package diagnose

import (
	"context"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/rayctl/rayctl/pkg/chain"
)

const operatorUser = "kuberay-operator"

// runningJob is a RayJob running on a ready cluster under an operator outside rayctl (controllers
// holds only the Job controller: rayctl up --controllers=none).
func runningJob() *Input {
	in, _ := pendingJob()
	in.Controllers = controllers()[:1]
	in.Events = nil
	in.Job.Status.JobDeploymentStatus = rayv1.JobDeploymentStatusRunning
	in.Job.Status.JobId = "rayjob-abc"
	in.Job.CreationTimestamp = metav1.NewTime(t0)
	in.Cluster.Status.State = rayv1.Ready //nolint:staticcheck // State is what KubeRay writes
	in.Cluster.CreationTimestamp = metav1.NewTime(t0)
	head := rayPod("job-rc-head-x", "job-rc", "uid-jrc", "head")
	in.Pod, in.ClusterPods = head, []corev1.Pod{*head}
	running := true
	in.Operator = &Operator{Found: true, Running: &running, RunningEvidence: []string{"Lease ns/ray-operator-leader was last renewed 1s ago"},
		User: operatorUser, UserSource: "--operator-user", WatchSource: "--operator-watch-namespace"}
	return in
}

func TestExternalOperatorHealthy(t *testing.T) {
	in := runningJob()
	rep := run(t, in, nil)
	if rep.Verdict.Check != "" {
		t.Fatalf("verdict %+v, want none", rep.Verdict)
	}
	if o := check(t, rep, "o", "Operator"); o.Status != Pass || !strings.Contains(o.Summary, "runs as kuberay-operator") {
		t.Errorf("o: %s %q", o.Status, o.Summary)
	}
	c := check(t, rep, "c", KindRayCluster)
	if !hasEvidence(c, "SubjectAccessReview: create pods in team-a: allowed") {
		t.Errorf("c has no review of creating pods: %v", c.Evidence)
	}
	if i := check(t, rep, "i", "Operator"); i.Status != NotApplicable || !strings.Contains(i.Summary, "--operator-metrics") {
		t.Errorf("i without metrics: %s %q", i.Status, i.Summary)
	}
}

func TestExternalOperatorNotFound(t *testing.T) {
	in := runningJob()
	in.Operator = &Operator{}
	expect(t, run(t, in, nil), "o", CauseOperatorNotRunning, "no KubeRay operator was found", "start KubeRay's operator")
}

func TestExternalOperatorStopped(t *testing.T) {
	in := runningJob()
	stopped := false
	in.Operator.Running = &stopped
	in.Operator.RunningEvidence = []string{"Lease ns/ray-operator-leader was last renewed 2m0s ago (lease duration 15s)"}
	expect(t, run(t, in, nil), "o", CauseOperatorNotRunning, "does not run: Lease ns/ray-operator-leader was last renewed 2m0s ago")
}

func TestExternalOperatorWatchesAnotherNamespace(t *testing.T) {
	in := runningJob()
	in.Operator.WatchNamespaces, in.Operator.WatchSource = []string{"team-b"}, "the API server's records"
	in.Operator.Reads = []chain.Event{{Seq: 3, Component: "apiserver", Hop: chain.APIRead, Outcome: "watch",
		Object: chain.Ref{Kind: KindRayJob, Namespace: "team-b"}, Call: &chain.Call{Verb: "watch", User: operatorUser}}}
	rep := run(t, in, nil)
	expect(t, rep, "a", CauseNamespaceNotWatched, "namespace team-a is not one KubeRay's operator watches (it watches team-b)")
	a := check(t, rep, "a", KindRayJob)
	if !hasEvidence(a, "opened a watch of RayJobs in namespace team-b (kuberay-operator)") {
		t.Errorf("a's evidence does not show the watch: %v", a.Evidence)
	}
}

func TestExternalOperatorMayNotCreatePods(t *testing.T) {
	in := runningJob()
	in.Access = AccessRequests(in)
	for i := range in.Access {
		a := &in.Access[i]
		a.Allowed = !(a.Verb == "create" && a.Resource == "pods")
	}
	in.ObjectEvents = []corev1.Event{{InvolvedObject: corev1.ObjectReference{Kind: KindRayCluster, Namespace: ns, Name: "job-rc"},
		Reason: "FailedToCreateHeadPod", Message: `pods is forbidden: User "kuberay-operator" cannot create resource "pods"`}}
	rep := Run(in)
	expect(t, rep, "c", CauseRBACDenied, "KubeRay's operator (kuberay-operator) may not create pods in namespace team-a", "RoleBinding")
	c := check(t, rep, "c", KindRayCluster)
	if ev := strings.Join(c.Evidence, "\n"); !strings.Contains(ev, "create pods in team-a: DENIED") || !strings.Contains(ev, "Event FailedToCreateHeadPod") {
		t.Errorf("c's evidence: %v", c.Evidence)
	}
}

func TestRayJobPendingOnRuntimeEnv(t *testing.T) {
	in := runningJob()
	in.Ray = &RayState{Source: "services/job-rc-head-svc:dashboard/proxy/api/jobs/rayjob-abc in team-a", JobStatus: "PENDING",
		JobMessage: "Job has not started yet. It may be waiting for the runtime environment to be set up."}
	rep := run(t, in, nil)
	expect(t, rep, "h", CauseRayJobPending, "the Ray job is PENDING", "runtime environment")
	h := check(t, rep, "h", KindRayJob)
	if !hasEvidence(h, "Ray's dashboard (services/job-rc-head-svc:dashboard/proxy/api/jobs/rayjob-abc") {
		t.Errorf("h's evidence does not name the dashboard: %v", h.Evidence)
	}
}

func TestExternalNeverReconciled(t *testing.T) {
	in := runningJob()
	in.Job.Status = rayv1.RayJobStatus{}
	in.ClusterName, in.Cluster, in.Pod, in.ClusterPods = "", nil, nil, nil
	in.Now = t0.Add(time.Minute)
	expect(t, run(t, in, nil), "f", CauseNotReconciled, "never wrote the RayJob's status")

	// The API server delivered the RayJob to the operator's watch: it got it, and stopped inside.
	in.Events = []chain.Event{{Seq: 1, Time: t0.Add(time.Second), Component: "apiserver", Hop: chain.WatchDelivery, Outcome: chain.Create,
		Object: chain.Ref{Kind: KindRayJob, Namespace: in.Job.Namespace, Name: in.Job.Name, ResourceVersion: "5"},
		Call:   &chain.Call{Verb: "watch", User: operatorUser, UserAgent: "kuberay-operator/v1.6.2"}}}
	rep := run(t, in, nil)
	expect(t, rep, "f", CauseNotReconciled, "never wrote the RayJob's status", "delivered it to the operator's watch")
	if f := check(t, rep, "f", KindRayJob); !hasEvidence(f, "API server delivered 1 watch events of it to the operator's watches") {
		t.Errorf("f's evidence: %v", f.Evidence)
	}
}

func TestParseMetrics(t *testing.T) {
	text := `# TYPE workqueue_depth gauge
workqueue_depth{controller="raycluster-controller",name="raycluster-controller"} 4
# TYPE workqueue_retries_total counter
workqueue_retries_total{controller="raycluster-controller",name="raycluster-controller"} 7
# TYPE controller_runtime_reconcile_errors_total counter
controller_runtime_reconcile_errors_total{controller="raycluster-controller"} 2
# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller="raycluster-controller",result="success"} 10
controller_runtime_reconcile_total{controller="raycluster-controller",result="error"} 2
# TYPE controller_runtime_active_workers gauge
controller_runtime_active_workers{controller="raycluster-controller"} 1
# TYPE controller_runtime_max_concurrent_reconciles gauge
controller_runtime_max_concurrent_reconciles{controller="raycluster-controller"} 1
# TYPE controller_runtime_reconcile_time_seconds histogram
controller_runtime_reconcile_time_seconds_bucket{controller="raycluster-controller",le="+Inf"} 12
controller_runtime_reconcile_time_seconds_sum{controller="raycluster-controller"} 0.6
controller_runtime_reconcile_time_seconds_count{controller="raycluster-controller"} 12
`
	qs, errText := parseMetrics(strings.NewReader(text))
	if errText != "" || len(qs) != 1 {
		t.Fatalf("queues %+v, error %q", qs, errText)
	}
	q := qs[0]
	if q.Depth != 4 || q.Retries != 7 || q.Errors != 2 || q.Reconciles != 12 || q.Busy != 1 || q.Workers != 1 || q.ReconcileSeconds < 0.049 || q.ReconcileSeconds > 0.051 {
		t.Errorf("queue %+v", q)
	}
	in := runningJob()
	in.Operator.MetricsSource, in.Operator.Queues = "http://127.0.0.1:8080/metrics", qs
	expect(t, run(t, in, nil), "i", CauseQueueSaturated, "raycluster-controller are saturated", "--reconcile-concurrency")
}

// hasEvidence reports whether one of c's evidence lines contains want.
func hasEvidence(c Check, want string) bool {
	return strings.Contains(strings.Join(c.Evidence, "\n"), want)
}

func TestGatherOperatorFromDeploymentAndLease(t *testing.T) {
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ray-system", Name: "kuberay-operator"}}
	dep.Spec.Replicas = ptr.To[int32](1)
	dep.Spec.Template.Spec.ServiceAccountName = "kuberay-operator"
	dep.Spec.Template.Spec.Containers = []corev1.Container{{Name: "kuberay-operator", Image: "quay.io/kuberay/operator:v1.6.2",
		Command: []string{"/manager"}, Args: []string{"--watch-namespace=team-b,team-c", "--metrics-addr=:9090"}}}
	now := time.Now()
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ray-system", Name: leaseName},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("kuberay-operator-abc"), LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime: &metav1.MicroTime{Time: now.Add(-time.Minute)}}}
	kube := fake.NewClientset(dep, lease)
	op := gatherOperator(context.Background(), Clients{Kube: kube}, &Input{Now: now})
	if !op.Found || op.User != "system:serviceaccount:ray-system:kuberay-operator" || strings.Join(op.WatchNamespaces, ",") != "team-b,team-c" ||
		op.WatchSource != "Deployment ray-system/kuberay-operator's args" || len(op.Groups) != 3 {
		t.Errorf("operator %+v", op)
	}
	// No replica available, and the Lease a minute old: it does not run.
	if op.Running == nil || *op.Running {
		t.Errorf("running %v, want false: %v", op.Running, op.RunningEvidence)
	}
	if got := metricsPort(dep); got != "9090" {
		t.Errorf("metrics port %q, want 9090", got)
	}
}

func TestNoteworthySetupLine(t *testing.T) {
	log := "2026-12-04 23:59:10,100\tINFO utils.py:76 -- Run cmd[1] ['/tmp/ray/session_x/runtime_resources/pip/abc/virtualenv/bin/python', '-m', 'virtualenv', '--system-site-packages', '/tmp/ray/session_x/runtime_resources/pip/abc/virtualenv']\n" +
		"2026-12-04 23:59:12,932\tINFO utils.py:76 -- Run cmd[3] ['/tmp/ray/session_x/runtime_resources/pip/abc/virtualenv/bin/python', '-m', 'pip', 'install', '--retries', '20', '-r', '/tmp/ray/session_x/runtime_resources/pip/abc/requirements.txt']\n" +
		"2026-12-04 23:59:13,001\tINFO utils.py:76 -- Run cmd[4] ['/tmp/ray/session_x/runtime_resources/pip/abc/virtualenv/bin/python', '-c', 'import ray']\n"
	if got, want := noteworthy(log), "runs pip install --retries 20 -r …/requirements.txt (23:59:12)"; got != want {
		t.Errorf("noteworthy %q, want %q", got, want)
	}
	failed := log + "2026-12-04 23:59:40,000\tERROR pip.py:12 -- Failed to install pip packages: No matching distribution found for requests==2.26.0\n"
	if got := noteworthy(failed); !strings.Contains(got, "No matching distribution found for requests==2.26.0") {
		t.Errorf("noteworthy of a failure %q", got)
	}
}
