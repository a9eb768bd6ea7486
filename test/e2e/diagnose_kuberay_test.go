package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/diagnose"
	"github.com/rayctl/rayctl/test/e2e/framework"
)

// Namespaces of TestDiagnoseKubeRayOperator, one a cause.
const (
	krdJob     = "krd-job"     // no operator yet, then one watching another namespace, then it completes
	krdOther   = "krd-other"   // the namespace the first operator watches
	krdRBAC    = "krd-rbac"    // the operator's RoleBinding for Pods removed
	krdOwner   = "krd-owner"   // the head Pod's ownerReference removed
	krdPending = "krd-pending" // the Ray job asks for more CPUs than the cluster has: PENDING
)

// kuberayPodsRole grants what TestDiagnoseKubeRayOperator takes from the operator's ClusterRole and
// gives back per namespace with a RoleBinding: writing Pods.
const kuberayPodsRole = "e2e:kuberay-operator-pods"

// TestDiagnoseKubeRayOperator runs `rayctl diagnose` and `rayctl trace` against KubeRay's unmodified
// operator on `rayctl up --controllers=none --ray=sim`, one RayJob stuck on each cause, in as few
// operator runs as the causes allow: no operator at all, then one that watches another namespace, then
// none again (its Lease no longer renewed), then one watching all namespaces for which a RoleBinding
// was removed, a head Pod lost its ownerReference, and a Ray job stays PENDING; and the first RayJob,
// completed, traced from the API server's side: the kubelet's write, its delivery to the operator's
// watch, the operator's writes, the submitter and the Ray job, in order.
func TestDiagnoseKubeRayOperator(t *testing.T) {
	t.Parallel()
	operator, in := kuberaySimInstance(t)
	ctx := t.Context()
	ray, err := rayclient.NewForConfig(in.Config)
	must(t, "a ray.io client", err)
	e := &diagEnv{in: in, ray: ray}

	out, stderr, err := in.Kubectl(ctx, "", "apply", "-f", filepath.Join(testdataDir(), "kuberay", "operator-rbac.yaml"))
	must(t, "binding the operator's role: "+out+stderr, err)
	// Pods are written only where a RoleBinding lets it.
	cr, err := in.Client.RbacV1().ClusterRoles().Get(ctx, "e2e:kuberay-operator", metav1.GetOptions{})
	must(t, "reading the operator's ClusterRole", err)
	for i, r := range cr.Rules {
		if slices.Equal(r.Resources, []string{"pods", "services", "persistentvolumeclaims"}) {
			cr.Rules[i].Resources = []string{"services", "persistentvolumeclaims"}
			cr.Rules = append(cr.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}})
			break
		}
	}
	_, err = in.Client.RbacV1().ClusterRoles().Update(ctx, cr, metav1.UpdateOptions{})
	must(t, "taking Pod writes from the operator's ClusterRole", err)
	_, err = in.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: kuberayPodsRole},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "update", "patch", "delete", "deletecollection"}}},
	}, metav1.CreateOptions{})
	must(t, "the Pod writers' role", err)
	for _, ns := range []string{krdJob, krdOther, krdRBAC, krdOwner, krdPending} {
		_, err := in.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		must(t, "creating namespace "+ns, err)
		_, err = in.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "kuberay-operator-pods"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: kuberayPodsRole},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: kuberayUser}},
		}, metav1.CreateOptions{})
		must(t, "binding the Pod writers' role in "+ns, err)
	}
	kc := operatorKubeconfig(t, in)

	// 1. No operator has ever run.
	out, stderr, err = in.Kubectl(ctx, "", "apply", "-n", krdJob, "-f", samplePath("rayjob-k8sjob.yaml"))
	must(t, "applying rayjob-k8sjob: "+out+stderr, err)
	d := e.waitDiagnosis(t, "rayjob/rayjob-k8sjob", krdJob, diagnose.CauseOperatorNotRunning, []string{"no KubeRay operator was found"}, nil, nil)
	expectCheck(t, d, "o")

	// 2. An operator that watches another namespace: the API server saw its watches there.
	other := startOperator(t, operator, kc, krdOther, "--watch-namespace="+krdOther)
	d = e.waitDiagnosis(t, "rayjob/rayjob-k8sjob", krdJob, diagnose.CauseNamespaceNotWatched,
		[]string{"namespace krd-job is not one KubeRay's operator watches (it watches krd-other)"}, nil, nil)
	expectCheck(t, d, "a")
	expectEvidence(t, d, "a", "API server saw", "opened a watch of RayJobs in namespace krd-other (kuberay-operator)")

	// 3. It stopped: its Lease is no longer renewed.
	other.stop()
	d = e.waitDiagnosis(t, "rayjob/rayjob-k8sjob", krdJob, diagnose.CauseOperatorNotRunning, []string{"KubeRay's operator does not run", "Lease krd-other/ray-operator-leader"}, nil, nil)
	expectCheck(t, d, "o")

	// 4. One operator for every namespace; in krd-rbac its RoleBinding for Pods is gone.
	must(t, "removing the operator's RoleBinding in "+krdRBAC, in.Client.RbacV1().RoleBindings(krdRBAC).Delete(ctx, "kuberay-operator-pods", metav1.DeleteOptions{}))
	startOperator(t, operator, kc, krdOther)
	var httpJob rayv1.RayJob
	loadSample(t, "rayjob-http.yaml", &httpJob)
	create := func(ns, name string, edit func(j *rayv1.RayJob)) {
		j := httpJob.DeepCopy()
		j.Namespace, j.Name = ns, name
		if edit != nil {
			edit(j)
		}
		_, err := ray.RayV1().RayJobs(ns).Create(ctx, j, metav1.CreateOptions{})
		must(t, "creating RayJob "+ns+"/"+name, err)
	}
	create(krdRBAC, "rayjob-rbac", nil)
	d = e.waitDiagnosis(t, "rayjob/rayjob-rbac", krdRBAC, diagnose.CauseRBACDenied, []string{"KubeRay's operator (kuberay-operator) may not create pods", "in namespace krd-rbac"}, nil, nil)
	expectCheck(t, d, "c")
	expectEvidence(t, d, "c", "SubjectAccessReview: create pods in krd-rbac: DENIED")
	// The same from a kubeconfig that cannot read rayctl's chain recorder, as on a cluster that is not
	// rayctl's: the checks that need only the API give the verdict, and say what needs rayctl's.
	reader := diagnoseReader(t, in)
	out, err = in.Rayctl(ctx, "diagnose", "rayjob/rayjob-rbac", "-n", krdRBAC, "--kubeconfig", reader, "--operator-user", kuberayUser, "-o", "json")
	must(t, "rayctl diagnose --kubeconfig: "+out, err)
	var api diagnose.Report
	must(t, "decoding the report: "+out, json.Unmarshal([]byte(out), &api))
	if api.Verdict.Cause != diagnose.CauseRBACDenied || !strings.Contains(api.Verdict.Text, "may not create pods") {
		t.Errorf("rayctl diagnose --kubeconfig (API only): verdict %+v, want %s on creating pods", api.Verdict, diagnose.CauseRBACDenied)
	}
	o := &diagnosis{report: api}
	expectEvidence(t, o, "o", "Lease krd-other/ray-operator-leader was last renewed")
	expectEvidence(t, o, "o", "need rayctl's API server")

	// 5. A head Pod whose ownerReference was taken away as soon as it was created.
	w, err := in.Client.CoreV1().Pods(krdOwner).Watch(ctx, metav1.ListOptions{LabelSelector: "ray.io/node-type=head"})
	must(t, "watching head Pods in "+krdOwner, err)
	create(krdOwner, "rayjob-owner", nil)
	var head string
	for ev := range w.ResultChan() {
		if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Added {
			head = p.Name
			break
		}
	}
	w.Stop()
	_, err = in.Client.CoreV1().Pods(krdOwner).Patch(ctx, head, types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/ownerReferences"}]`), metav1.PatchOptions{})
	must(t, "removing the head Pod's ownerReference", err)
	d = e.waitDiagnosis(t, "rayjob/rayjob-owner", krdOwner, diagnose.CauseNoOwner, []string{"has no controller ownerReference"}, nil, nil)
	expectCheck(t, d, "d")

	// 6. A Ray job that asks for more CPUs than the cluster has stays PENDING: Ray's dashboard says so.
	create(krdPending, "rayjob-pending", func(j *rayv1.RayJob) { j.Spec.EntrypointNumCpus = 100 })
	d = e.waitDiagnosis(t, "rayjob/rayjob-pending", krdPending, diagnose.CauseRayJobPending, []string{"the Ray job is PENDING"}, nil, nil)
	expectCheck(t, d, "h")
	expectEvidence(t, d, "h", "Ray's dashboard (services/", ":dashboard/proxy/api/jobs/")

	// 7. The first RayJob completed: its trace from the API server's side.
	re := &rayEnv{in: in, ray: ray, ctx: ctx, ns: krdJob}
	if j := re.waitJobFinished(t, "rayjob-k8sjob"); j.Status.JobStatus != rayv1.JobStatusSucceeded {
		t.Fatalf("RayJob rayjob-k8sjob ended %s/%s: %s", j.Status.JobDeploymentStatus, j.Status.JobStatus, j.Status.Message)
	}
	traceOut, err := in.Rayctl(ctx, "trace", "rayjob/rayjob-k8sjob", "-n", krdJob, "-o", "json")
	must(t, "rayctl trace -o json: "+traceOut, err)
	var steps []chain.Step
	must(t, "decoding the trace", json.Unmarshal([]byte(traceOut), &steps))
	text, err := in.Rayctl(ctx, "trace", "rayjob/rayjob-k8sjob", "-n", krdJob)
	must(t, "rayctl trace: "+text, err)
	t.Logf("rayctl trace rayjob/rayjob-k8sjob -n %s:\n%s", krdJob, text)
	expectTraceOrder(t, steps, []traceHop{
		{"the kubelet's write of the head Pod Ready", func(s *chain.Step) bool {
			return s.Hop == chain.KubeletWrite && strings.Contains(s.Object.Name, "-head-") && s.Pod.IsReady()
		}},
		{"the update of the cluster's last Pod to get ready delivered to the operator's watch", func(s *chain.Step) bool {
			return s.Hop == chain.WatchDelivery && s.Object.Kind == "Pod" && strings.HasPrefix(s.Object.Name, "rayjob-k8sjob-") &&
				s.Call.User == kuberayUser && strings.HasPrefix(s.Call.UserAgent, "kuberay-operator/")
		}},
		{"the operator's RayCluster status write state=ready", func(s *chain.Step) bool {
			return s.Hop == chain.APIWrite && s.Object.Kind == "RayCluster" && s.Call.User == kuberayUser && s.Call.Subresource == "status" && hasField(s.Status, "state", "ready")
		}},
		{"the operator's creation of the submitter Job", func(s *chain.Step) bool {
			return s.Hop == chain.APIWrite && s.Object.Kind == "Job" && s.Call.Verb == "create" && s.Call.User == kuberayUser
		}},
		{"the submitter Job delivered to the Job controller's watch", func(s *chain.Step) bool {
			return s.Hop == chain.WatchDelivery && s.Object.Kind == "Job" && s.Call.User != kuberayUser
		}},
		{"the kubelet's write of the submitter Pod", func(s *chain.Step) bool {
			return s.Hop == chain.KubeletWrite && strings.HasPrefix(s.Object.Name, "rayjob-k8sjob-") && !strings.Contains(s.Object.Name, "-head-") && !strings.Contains(s.Object.Name, "-worker-")
		}},
		{"the operator's proxied call for the Ray job", func(s *chain.Step) bool {
			return s.Hop == chain.ProxyCall && s.Call.User == kuberayUser && strings.Contains(s.Call.Path, "/api/jobs/")
		}},
		{"the operator's RayJob status write jobStatus=SUCCEEDED", func(s *chain.Step) bool {
			return s.Hop == chain.APIWrite && s.Object.Kind == "RayJob" && s.Call.User == kuberayUser && hasField(s.Status, "jobStatus", "SUCCEEDED")
		}},
	})
	// The delivery is seen; what the operator does with it is not, and the trace says so.
	if !strings.Contains(text, "to the watch of "+kuberayUser) || !strings.Contains(text, "┆ "+kuberayUser+": its cache, queue and reconcile") {
		t.Errorf("the trace does not show the deliveries to the operator's watches and mark its unseen hops:\n%s", text)
	}
}

// diagnoseReader writes a kubeconfig for a user who may read what diagnose reads and review access,
// but not rayctl's chain recorder (/debug/chain): what `rayctl diagnose --kubeconfig` meets on a
// cluster that is not rayctl's.
func diagnoseReader(t *testing.T, in *framework.Instance) string {
	t.Helper()
	const user = "diagnose-reader"
	read := []string{"get", "list"}
	_, err := in.Client.RbacV1().ClusterRoles().Create(t.Context(), &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"ray.io"}, Resources: []string{"rayjobs", "rayclusters", "rayservices"}, Verbs: read},
			{APIGroups: []string{""}, Resources: []string{"pods", "services", "events"}, Verbs: read},
			{APIGroups: []string{""}, Resources: []string{"services/proxy", "pods/proxy"}, Verbs: []string{"get"}},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: read},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: read},
			{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"rolebindings", "clusterrolebindings"}, Verbs: read},
			{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
		},
	}, metav1.CreateOptions{})
	must(t, "the diagnose reader's role", err)
	_, err = in.Client.RbacV1().ClusterRoleBindings().Create(t.Context(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}, metav1.CreateOptions{})
	must(t, "binding the diagnose reader's role", err)
	return userKubeconfig(t, in, user)
}

// expectCheck fails the test unless the verdict names check id.
func expectCheck(t *testing.T, d *diagnosis, id string) {
	t.Helper()
	if d.report.Verdict.Check != id {
		t.Errorf("verdict from check %q, want %q:\n%s", d.report.Verdict.Check, id, d.text)
	}
}

// expectEvidence fails the test unless a check id has evidence containing each of wants in one line.
func expectEvidence(t *testing.T, d *diagnosis, id string, wants ...string) {
	t.Helper()
	for _, c := range d.report.Checks {
		if c.ID != id {
			continue
		}
		for _, ev := range c.Evidence {
			if containsAll(ev, wants) {
				return
			}
		}
	}
	t.Errorf("no evidence of check %s mentions %q:\n%s", id, wants, d.text)
}

// traceHop is one hop a trace must show.
type traceHop struct {
	what string
	is   func(s *chain.Step) bool
}

// expectTraceOrder fails the test unless each hop appears in steps after the one before it, at a
// time no earlier.
func expectTraceOrder(t *testing.T, steps []chain.Step, hops []traceHop) {
	t.Helper()
	from, at := 0, int64(0)
	for _, h := range hops {
		found := -1
		for i := from; i < len(steps); i++ {
			if h.is(&steps[i]) {
				found = i
				break
			}
		}
		if found < 0 {
			var b strings.Builder
			for _, s := range steps {
				fmt.Fprintf(&b, "  %d %s %s %s/%s %v\n", s.At, s.Hop, s.Outcome, s.Object.Kind, s.Object.Name, s.Status)
			}
			t.Fatalf("no %s after step %d in the trace:\n%s", h.what, from, b.String())
		}
		if steps[found].At < at {
			t.Errorf("%s at %d, before the hop ahead of it (%d)", h.what, steps[found].At, at)
		}
		at, from = steps[found].At, found+1
	}
}

// hasField reports whether fields has name=value.
func hasField(fields []chain.Field, name, value string) bool {
	return slices.Contains(fields, chain.Field{Name: name, Value: value})
}

// offlinePip is the runtime env of KubeRay's ray-job.sample.yaml with pip told to retry long: offline
// (rayctl up --pod-egress=off) its install keeps the Ray job PENDING for minutes, as on a cluster whose
// pods cannot reach the package index.
const offlinePip = `  runtimeEnvYAML: |
    pip:
      packages: ["requests==2.26.0", "pendulum==2.1.2"]
      pip_install_options: ["--disable-pip-version-check", "--no-cache-dir", "--retries", "20"]
    env_vars:
      counter_name: "test_counter"
`

// TestDiagnoseKubeRayOperatorRuntimeEnv runs KubeRay's unmodified operator on `rayctl up
// --controllers=none --pod-egress=off` with real Ray: KubeRay's ray-job.sample.yaml, whose runtime env
// pip-installs packages the offline pods cannot fetch, stays Running with its Ray job PENDING, and
// `rayctl diagnose` says so from Ray's dashboard (through the API server's service proxy), naming the
// pip install its runtime env setup runs.
func TestDiagnoseKubeRayOperatorRuntimeEnv(t *testing.T) {
	hostRay(t)
	operator := kuberayOperator(t)
	in, err := framework.Start("", "--runtime", "process", "--controllers=none", "--pod-egress=off", "--node-capacity", "cpu=8,memory=16Gi")
	if in != nil {
		t.Cleanup(func() { in.Cleanup(t) })
	}
	must(t, "rayctl up --controllers=none --pod-egress=off", err)
	out, stderr, err := in.Kubectl(t.Context(), "", "apply", "-f", filepath.Join(testdataDir(), "kuberay", "operator-rbac.yaml"))
	must(t, "binding the operator's role: "+out+stderr, err)
	// Started before the test's namespace exists, the operator stops after its deletion (cleanups run
	// last in, first out) and removes its finalizer from the RayJob there.
	startOperator(t, operator, operatorKubeconfig(t, in), "default")
	e := realRaySetup(t, in)

	b, err := os.ReadFile(kubeRaySample(t, "ray-job.sample.yaml"))
	must(t, "reading ray-job.sample.yaml", err)
	start := strings.Index(string(b), "  runtimeEnvYAML: |\n")
	end := strings.Index(string(b), `      counter_name: "test_counter"`+"\n")
	if start < 0 || end < start {
		t.Fatalf("ray-job.sample.yaml has no runtimeEnvYAML block to replace")
	}
	sample := string(b[:start]) + offlinePip + string(b[end+len(`      counter_name: "test_counter"`+"\n"):])
	path := filepath.Join(t.TempDir(), "ray-job.sample.yaml")
	must(t, "writing the sample", os.WriteFile(path, []byte(sample), 0o600))
	// The sample brings its own ConfigMap, of the name realRaySetup's has.
	must(t, "deleting realRaySetup's ConfigMap", in.Client.CoreV1().ConfigMaps(e.ns).Delete(e.ctx, "ray-job-code-sample", metav1.DeleteOptions{}))
	out, stderr, err = in.Kubectl(e.ctx, "", "apply", "-n", e.ns, "-f", path)
	must(t, "applying the sample: "+out+stderr, err)

	ray, err := rayclient.NewForConfig(in.Config)
	must(t, "a ray.io client", err)
	de := &diagEnv{in: in, ray: ray, timeout: realRayTimeout}
	// The JSON and the text come of two runs: both once the setup runs pip.
	pip := func(d *diagnosis) bool {
		return slices.ContainsFunc(d.check("h", "RayJob").Evidence, func(ev string) bool { return strings.Contains(ev, "log API): runs pip install") })
	}
	d := de.waitDiagnosis(t, "rayjob/rayjob-sample", e.ns, diagnose.CauseRayJobPending, []string{"the Ray job is PENDING on its runtime env: its setup runs pip install"}, pip, nil)
	expectCheck(t, d, "h")
	expectEvidence(t, d, "h", "Ray's dashboard (services/", ":dashboard/proxy/api/jobs/", "status PENDING")
	expectEvidence(t, d, "h", "runtime_env_setup-", "on the head (the dashboard's log API): runs pip install")
	expectEvidence(t, d, "h", "spec.runtimeEnvYAML:", "requests==2.26.0")
}
