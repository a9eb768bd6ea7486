package diagnose

import (
	"bytes"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/rayparams"
)

const (
	ns       = "team-a"
	identity = "rayctl:controllers"
	podSel   = "ray.io/node-type in (head,worker,redis-cleanup)"
	forPred  = "generation, labels or annotations changed"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// recorder builds a fixture's chain events: each added event gets the next Seq and is 1 ms after the
// one before.
type recorder struct {
	events []chain.Event
	passes uint64
}

func (r *recorder) add(e chain.Event) {
	n := len(r.events) + 1
	e.Seq = uint64(n)
	e.Mono = int64(n) * int64(time.Millisecond)
	e.Time = t0.Add(time.Duration(e.Mono))
	r.events = append(r.events, e)
}

func ref(kind, name, rv string) chain.Ref {
	return chain.Ref{Kind: kind, Namespace: ns, Name: name, ResourceVersion: rv}
}

// write records the API server accepting a write by user.
func (r *recorder) write(kind, name, rv, verb, user string) {
	v, sub, _ := strings.Cut(verb, " ")
	r.add(chain.Event{Component: "apiserver", Hop: chain.APIWrite, Object: ref(kind, name, rv), Outcome: chain.Outcome(verb),
		Call: &chain.Call{Verb: v, Subresource: sub, User: user, Code: 200}})
}

// informer records controller's cache delivering an event, then the hops after it.
func (r *recorder) informer(controller, kind, name, rv, oldRV string, typ chain.Outcome, after ...chain.Event) {
	r.add(chain.Event{Component: controller, Hop: chain.InformerEvent, Object: ref(kind, name, rv), OldResourceVersion: oldRV, Outcome: typ})
	for _, e := range after {
		e.Component = controller
		e.Object = ref(kind, name, rv)
		r.add(e)
	}
}

func predicate(outcome chain.Outcome) chain.Event {
	return chain.Event{Hop: chain.PredicateHop, Outcome: outcome, Predicate: forPred}
}

func mapped(kind, to string) chain.Event {
	t := ref(kind, to, "")
	return chain.Event{Hop: chain.MapHop, To: &t, Reason: "controller owner"}
}

func miss(reason string) chain.Event { return chain.Event{Hop: chain.MapMiss, Reason: reason} }

// reconcile records one pass of controller on kind/name: enqueue, dequeue, start, end, and the
// controller's requeue (rate-limited after an error).
func (r *recorder) reconcile(controller, kind, name string, outcome chain.Outcome, errText string, requeue time.Duration) {
	r.passes++
	key := ref(kind, name, "")
	r.add(chain.Event{Component: controller, Hop: chain.EnqueueHop, Object: key, Outcome: chain.EnqueueNew})
	r.add(chain.Event{Component: controller, Hop: chain.DequeueHop, Object: key, Duration: 200 * time.Microsecond, Reconcile: r.passes})
	r.add(chain.Event{Component: controller, Hop: chain.ReconcileStart, Object: key, Reconcile: r.passes})
	end := chain.Event{Component: controller, Hop: chain.ReconcileEnd, Object: key, Outcome: outcome, Error: errText, Duration: 3 * time.Millisecond, Reconcile: r.passes}
	if outcome == chain.RequeueAfter {
		end.Result = &chain.Result{RequeueAfter: requeue}
	}
	r.add(end)
	if requeue > 0 {
		kind := chain.EnqueueRequeueAfter
		if outcome == chain.Failed {
			kind = chain.EnqueueRateLimited
		}
		r.add(chain.Event{Component: controller, Hop: chain.EnqueueHop, Object: key, Outcome: kind, Duration: requeue})
	}
}

func controllers(watch ...string) []chain.ControllerInfo {
	sel := map[string]string{"Pod": podSel, "Job": "app.kubernetes.io/created-by=kuberay-operator"}
	return []chain.ControllerInfo{
		{Name: "job", Kind: "Job", Manager: "kube-controllers", Identity: "system:kube-controller-manager",
			Watches: []chain.WatchInfo{{Kind: "Job", Handler: "object"}, {Kind: "Pod", Handler: "controller owner"}},
			Queue:   chain.QueueStats{Concurrency: 1}},
		{Name: "raycluster", Kind: KindRayCluster, Manager: "ray-controllers", Identity: identity, WatchNamespaces: watch, LabelSelectors: sel,
			Watches: []chain.WatchInfo{{Kind: KindRayCluster, Handler: "object", Predicates: []string{forPred}},
				{Kind: "Pod", Handler: "controller owner"}, {Kind: "Service", Handler: "controller owner"}},
			Queue: chain.QueueStats{Concurrency: 1}},
		{Name: "rayjob", Kind: KindRayJob, Manager: "ray-controllers", Identity: identity, WatchNamespaces: watch, LabelSelectors: sel,
			Watches: []chain.WatchInfo{{Kind: KindRayJob, Handler: "object"}, {Kind: KindRayCluster, Handler: "controller owner"},
				{Kind: "Service", Handler: "controller owner"}, {Kind: "Job", Handler: "controller owner"}},
			Queue: chain.QueueStats{Concurrency: 1}},
	}
}

func rayCluster(name, uid, state string) *rayv1.RayCluster {
	c := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid), Generation: 1}}
	c.Status.State = rayv1.ClusterState(state) //nolint:staticcheck // State is what KubeRay users read
	c.Status.ObservedGeneration = 1
	return c
}

func ownedBy(kind, name, uid string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: kind, Name: name, UID: types.UID(uid), Controller: ptr.To(true)}}
}

// rayPod is a Pod of cluster (a head unless nodeType says otherwise), Running and Ready.
func rayPod(name, cluster, uid, nodeType string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels: map[string]string{rayparams.LabelCluster: cluster, rayparams.LabelNodeType: nodeType}}}
	if uid != "" {
		p.OwnerReferences = ownedBy(KindRayCluster, cluster, uid)
	}
	p.Spec.NodeName = "vm"
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	return p
}

// allow answers every review the input needs, allowing all but the verbs in deny.
func allow(in *Input, deny ...string) {
	in.Access = AccessRequests(in)
	for i := range in.Access {
		a := &in.Access[i]
		a.Allowed = true
		a.Reason = `RBAC: allowed by ClusterRoleBinding "rayctl:controllers"`
		for _, v := range deny {
			if a.Verb == v {
				a.Allowed, a.Reason = false, ""
			}
		}
	}
	in.Bindings = []Binding{{Kind: "ClusterRoleBinding", Name: identity, RoleKind: "ClusterRole", RoleName: identity, User: identity}}
}

// healthyPod is a ready head Pod of a ready RayCluster, with the chain of its last status write.
func healthyPod() (*Input, *recorder) {
	cl := rayCluster("rc", "uid-rc", "ready")
	head := rayPod("rc-head-x", "rc", "uid-rc", "head")
	r := &recorder{}
	r.write(KindRayCluster, "rc", "10", "create", "rayctl-admin")
	r.informer("raycluster", KindRayCluster, "rc", "10", "", "create", predicate("passed"), mapped(KindRayCluster, "rc"))
	r.reconcile("raycluster", KindRayCluster, "rc", "requeue-after", "", 2*time.Second)
	r.add(chain.Event{Component: "kubelet", Hop: chain.KubeletWrite, Object: ref("Pod", "rc-head-x", "12"), Outcome: "Running", Pod: &chain.PodStatus{Phase: "Running", Ready: "True"}})
	r.write("Pod", "rc-head-x", "12", "patch status", "system:node:vm")
	r.informer("raycluster", "Pod", "rc-head-x", "12", "11", "update", mapped(KindRayCluster, "rc"))
	r.reconcile("raycluster", KindRayCluster, "rc", "requeue-after", "", 2*time.Second)
	r.write(KindRayCluster, "rc", "13", "update status", identity)
	r.informer("raycluster", KindRayCluster, "rc", "13", "10", "update", predicate("dropped"))
	in := &Input{Kind: KindPod, Namespace: ns, Name: head.Name, Pod: head, ClusterName: "rc", Cluster: cl,
		ClusterPods: []corev1.Pod{*head}, Controllers: controllers(), RecorderSize: 20000, Now: t0.Add(time.Minute)}
	return in, r
}

func run(t *testing.T, in *Input, r *recorder) *Report {
	t.Helper()
	if r != nil {
		in.Events = r.events
	}
	if in.Access == nil {
		allow(in)
	}
	return Run(in)
}

func check(t *testing.T, rep *Report, id, kind string) Check {
	t.Helper()
	for _, c := range rep.Checks {
		if c.ID == id && (kind == "" || c.Subject.Kind == kind) {
			return c
		}
	}
	t.Fatalf("no check %s for %s in %+v", id, kind, rep.Checks)
	return Check{}
}

// expect asserts the verdict names check id with cause, and that its text mentions each of wants.
func expect(t *testing.T, rep *Report, id, cause string, wants ...string) {
	t.Helper()
	v := rep.Verdict
	if v.Check != id || v.Cause != cause {
		var b bytes.Buffer
		WriteText(&b, rep, TextOptions{Width: 100})
		t.Fatalf("verdict is %s/%s, want %s/%s:\n%s", v.Check, v.Cause, id, cause, b.String())
	}
	for _, w := range wants {
		if !strings.Contains(v.Text, w) {
			t.Errorf("verdict %q does not mention %q", v.Text, w)
		}
	}
}

func TestHealthyPodPassesEveryCheck(t *testing.T) {
	in, r := healthyPod()
	rep := run(t, in, r)
	if rep.Verdict.Check != "" {
		t.Fatalf("verdict %+v, want none", rep.Verdict)
	}
	ids := ""
	for _, c := range rep.Checks {
		if c.Status == Fail {
			t.Errorf("check %s (%s) failed: %s", c.ID, c.Subject, c.Summary)
		}
		if !strings.HasSuffix(ids, c.ID) {
			ids += c.ID
		}
	}
	if ids != "abcdefghij" {
		t.Errorf("checks %q, want every item a to j in order", ids)
	}
	if got := rep.Subjects; len(got) != 2 || got[0].Kind != KindPod || got[1].Kind != KindRayCluster {
		t.Errorf("subjects %v, want the Pod then its RayCluster", got)
	}
	if e := check(t, rep, "e", KindRayCluster); e.Status != Pass || !strings.Contains(e.Summary, "by design") {
		t.Errorf("e: %s %q, want a pass saying the controller's own status write is dropped by design", e.Status, e.Summary)
	}
	f := check(t, rep, "f", KindRayCluster)
	if f.Status != Pass || !strings.Contains(f.Summary, "reconciled after the Pod's last change") || !strings.Contains(f.Summary, "RequeueAfter 2s") {
		t.Errorf("f: %s %q", f.Status, f.Summary)
	}
	if h := check(t, rep, "h", ""); h.Status != NotApplicable {
		t.Errorf("h for a Pod: %s, want n/a", h.Status)
	}
}

func TestNamespaceOutsideWatchNamespaces(t *testing.T) {
	in, r := healthyPod()
	in.Controllers = controllers("team-b", "team-c")
	rep := run(t, in, r)
	expect(t, rep, "a", CauseNamespaceNotWatched, "namespace team-a is outside --watch-namespace team-b,team-c", "add it to --watch-namespace")
	// Reviews of list and watch ask in the namespace when the controllers watch only some.
	for _, a := range AccessRequests(in) {
		if a.Namespace != ns {
			t.Errorf("review %+v not in namespace %s", a, ns)
		}
	}
}

func TestControllerMissing(t *testing.T) {
	in, r := healthyPod()
	in.Controllers = controllers()[:1] // the Job controller only: --controllers=none
	rep := run(t, in, r)
	expect(t, rep, "a", CauseControllerMissing, "no RayCluster controller", "--controllers")
}

func TestPodMissingNodeTypeLabel(t *testing.T) {
	in, r := healthyPod()
	delete(in.Pod.Labels, rayparams.LabelNodeType)
	rep := run(t, in, r)
	expect(t, rep, "b", CauseLabelSelector, "Pod lacks label ray.io/node-type", "only holds pods with "+podSel)

	in, r = healthyPod()
	in.Pod.Labels[rayparams.LabelNodeType] = "gpu"
	expect(t, run(t, in, r), "b", CauseLabelSelector, "label ray.io/node-type=gpu does not satisfy")
}

func TestRBACRuleRemoved(t *testing.T) {
	in, r := healthyPod()
	allow(in, "list")
	rep := run(t, in, r)
	expect(t, rep, "c", CauseRBACDenied, "rayctl:controllers may not list pods", "restore the rule in ClusterRole rayctl:controllers")
	c := check(t, rep, "c", KindPod)
	if !hasEvidence(c, "list pods in all namespaces: DENIED") {
		t.Errorf("evidence lacks the denied review: %q", c.Evidence)
	}
}

func TestPodWithoutOwner(t *testing.T) {
	in, r := healthyPod()
	in.Pod.OwnerReferences = nil
	in.ClusterName, in.Cluster, in.ClusterPods = "", nil, nil
	r.informer("raycluster", "Pod", "rc-head-x", "14", "12", "update", miss("no controller owner (ownerReferences without controller: true to a RayCluster)"))
	rep := run(t, in, r)
	expect(t, rep, "d", CauseNoOwner, "labelled ray.io/cluster=rc but has no controller ownerReference")
	d := check(t, rep, "d", KindPod)
	if !hasEvidence(d, "not mapped: Pod rc-head-x: no controller owner") {
		t.Errorf("evidence lacks the map-miss: %q", d.Evidence)
	}
	for _, id := range []string{"e", "f", "g"} {
		if c := check(t, rep, id, ""); c.Status != NotApplicable {
			t.Errorf("%s without a RayCluster: %s, want n/a", id, c.Status)
		}
	}
}

func TestPodOwnerProblems(t *testing.T) {
	in, r := healthyPod()
	in.Pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: "uid-j", Controller: ptr.To(true)}}
	in.ClusterName, in.Cluster = "", nil
	expect(t, run(t, in, r), "d", CauseOwnerKind, "controller owner is Job j, not a RayCluster")

	in, r = healthyPod()
	in.Cluster = nil
	expect(t, run(t, in, r), "d", CauseOwnerMissing, "owner RayCluster rc does not exist")

	in, r = healthyPod()
	in.Cluster.UID = "uid-new"
	expect(t, run(t, in, r), "d", CauseOwnerUIDMismatch, "UID uid-rc", "UID uid-new")
}

func TestStatusOnlyUpdateDroppedByPredicate(t *testing.T) {
	in, r := healthyPod()
	in.Kind, in.Name = KindRayCluster, "rc"
	r.write(KindRayCluster, "rc", "20", "update status", "rayctl-admin")
	r.informer("raycluster", KindRayCluster, "rc", "20", "13", "update", predicate("dropped"))
	rep := run(t, in, r)
	expect(t, rep, "e", CausePredicateDropped, "rv 20, update status by rayctl-admin", "status-only update", "by design", "annotate raycluster rc")

	// Once the cluster was reconciled since, the drop no longer matters.
	r.reconcile("raycluster", KindRayCluster, "rc", "done", "", 0)
	rep = run(t, in, r)
	if e := check(t, rep, "e", KindRayCluster); e.Status != Pass || !strings.Contains(e.Summary, "reconciled since") {
		t.Errorf("e after a reconcile: %s %q", e.Status, e.Summary)
	}
}

func TestReconcileErrorsWithBackOff(t *testing.T) {
	in, r := healthyPod()
	in.Kind, in.Name, in.Pod, in.ClusterPods = KindRayCluster, "rc", nil, nil
	in.Cluster.Status.State = "" //nolint:staticcheck // State is what KubeRay users read
	const msg = `FailedCreateHeadPod: Pod "rc-head-abc" is invalid: spec.containers[0].name: Invalid value: "Ray_Head"`
	for _, backoff := range []time.Duration{5, 10, 20} {
		r.add(chain.Event{Component: "apiserver", Hop: chain.APIWrite, Object: ref("Pod", "", ""), Outcome: "create", Call: &chain.Call{Verb: "create", Code: 422}, Error: "invalid"})
		r.reconcile("raycluster", KindRayCluster, "rc", "error", msg, backoff*time.Millisecond)
	}
	rep := run(t, in, r)
	expect(t, rep, "f", CauseReconcileError, "the RayCluster's reconciles fail: "+msg, "back-off 20.0 ms", "3 failed passes in a row", "fix the spec")
	if g := check(t, rep, "g", KindRayCluster); g.Status != Fail || !strings.Contains(g.Summary, "no head Pod") {
		t.Errorf("g: %s %q, want a failure naming the missing head Pod", g.Status, g.Summary)
	}

	// A success after the errors passes, and says the controller recovered.
	r.reconcile("raycluster", KindRayCluster, "rc", "requeue-after", "", 2*time.Second)
	f := check(t, run(t, in, r), "f", KindRayCluster)
	if f.Status != Pass || !hasEvidence(f, "3 earlier passes failed") {
		t.Errorf("f after recovering: %s %q %q", f.Status, f.Summary, f.Evidence)
	}
}

func TestErrorWithRequeueAfterIgnored(t *testing.T) {
	in, r := healthyPod()
	r.reconcile("raycluster", KindRayCluster, "rc", "error", "boom", 5*time.Millisecond)
	r.events[len(r.events)-2].Result = &chain.Result{RequeueAfter: 2 * time.Second, RequeueAfterIgnored: true}
	expect(t, run(t, in, r), "f", CauseReconcileError, "boom", "RequeueAfter 2s ignored")
}

func TestChangeNotReconciled(t *testing.T) {
	in, r := healthyPod()
	// The kubelet's write reached the cache and was mapped, but no reconcile followed.
	r.add(chain.Event{Component: "kubelet", Hop: chain.KubeletWrite, Object: ref("Pod", "rc-head-x", "30"), Outcome: "Running", Pod: &chain.PodStatus{Phase: "Running", Ready: "False"}})
	r.write("Pod", "rc-head-x", "30", "patch status", "system:node:vm")
	r.informer("raycluster", "Pod", "rc-head-x", "30", "12", "update", mapped(KindRayCluster, "rc"))
	rep := run(t, in, r)
	expect(t, rep, "f", CauseNotReconciled, "has not reconciled the RayCluster since the Pod's last change", "checks d (owner) and e")

	// A write the cache never delivered points at a–c.
	in, r = healthyPod()
	r.write("Pod", "rc-head-x", "31", "patch status", "system:node:vm")
	expect(t, run(t, in, r), "f", CauseNotReconciled, "never delivered that change")

	// A change a moment ago that is queued is work in progress, not a failure.
	in, r = healthyPod()
	r.write("Pod", "rc-head-x", "32", "patch status", "system:node:vm")
	r.informer("raycluster", "Pod", "rc-head-x", "32", "12", "update", mapped(KindRayCluster, "rc"))
	r.add(chain.Event{Component: "raycluster", Hop: chain.EnqueueHop, Object: ref(KindRayCluster, "rc", ""), Outcome: "new"})
	in.Now = r.events[len(r.events)-1].Time.Add(100 * time.Millisecond)
	if f := check(t, run(t, in, r), "f", KindRayCluster); f.Status != Pass || !strings.Contains(f.Summary, "queued") {
		t.Errorf("f for a fresh queued change: %s %q", f.Status, f.Summary)
	}

	// So is one the cache has not delivered yet.
	in, r = healthyPod()
	r.write("Pod", "rc-head-x", "33", "patch status", "system:node:vm")
	in.Now = r.events[len(r.events)-1].Time.Add(time.Millisecond)
	if f := check(t, run(t, in, r), "f", KindRayCluster); f.Status != Pass || !strings.Contains(f.Summary, "on its way") {
		t.Errorf("f for a change of a moment ago: %s %q", f.Status, f.Summary)
	}
}

// pendingJob is a RayJob whose cluster's head Pod cannot be scheduled.
func pendingJob() (*Input, *recorder) {
	job := &rayv1.RayJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job", UID: "uid-job"}}
	job.Spec.SubmissionMode = rayv1.HTTPMode
	job.Status.JobDeploymentStatus = rayv1.JobDeploymentStatusInitializing
	job.Status.RayClusterName = "job-rc"
	cl := rayCluster("job-rc", "uid-jrc", "")
	cl.OwnerReferences = ownedBy(KindRayJob, "job", "uid-job")
	head := rayPod("job-rc-head-x", "job-rc", "uid-jrc", "head")
	head.Spec.NodeName = ""
	head.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient cpu."}}}
	r := &recorder{}
	r.write(KindRayJob, "job", "1", "create", "rayctl-admin")
	r.informer("rayjob", KindRayJob, "job", "1", "", "create", mapped(KindRayJob, "job"))
	r.reconcile("rayjob", KindRayJob, "job", "requeue-after", "", 3*time.Second)
	r.write(KindRayCluster, "job-rc", "3", "create", identity)
	r.informer("raycluster", KindRayCluster, "job-rc", "3", "", "create", predicate("passed"), mapped(KindRayCluster, "job-rc"))
	r.informer("rayjob", KindRayCluster, "job-rc", "3", "", "create", mapped(KindRayJob, "job"))
	r.reconcile("raycluster", KindRayCluster, "job-rc", "requeue-after", "", 2*time.Second)
	r.write("Pod", "job-rc-head-x", "5", "patch status", "system:kube-scheduler")
	r.informer("raycluster", "Pod", "job-rc-head-x", "5", "4", "update", mapped(KindRayCluster, "job-rc"))
	r.reconcile("raycluster", KindRayCluster, "job-rc", "requeue-after", "", 2*time.Second)
	r.reconcile("rayjob", KindRayJob, "job", "requeue-after", "", 3*time.Second)
	in := &Input{Kind: KindRayJob, Namespace: ns, Name: "job", Job: job, ClusterName: "job-rc", Cluster: cl, Pod: head,
		ClusterPods: []corev1.Pod{*head}, Controllers: controllers(), RecorderSize: 20000, Now: t0.Add(time.Minute)}
	return in, r
}

func TestRayJobClusterNeverReady(t *testing.T) {
	in, r := pendingJob()
	rep := run(t, in, r)
	expect(t, rep, "g", CauseClusterNotReady, "the RayCluster is not ready: pod job-rc-head-x is Pending (Unschedulable: 0/1 nodes are available: 1 Insufficient cpu.)",
		"lower the Pod's resource requests")
	if got := rep.Subjects; len(got) != 3 || got[0].Kind != KindPod || got[1].Kind != KindRayCluster || got[2].Kind != KindRayJob {
		t.Errorf("subjects %v, want the head Pod, the RayCluster, the RayJob", got)
	}
	h := check(t, rep, "h", KindRayJob)
	if h.Status != Fail || !strings.Contains(h.Summary, "waits for RayCluster job-rc to be ready") {
		t.Errorf("h: %s %q", h.Status, h.Summary)
	}
	if d := check(t, rep, "d", KindRayCluster); d.Status != Pass {
		t.Errorf("d for the RayJob's RayCluster: %s %q", d.Status, d.Summary)
	}
	if f := check(t, rep, "f", KindRayJob); f.Status != Pass {
		t.Errorf("f for the RayJob: %s %q", f.Status, f.Summary)
	}
	queues := 0
	for _, c := range rep.Checks {
		if c.ID == "i" {
			queues++
		}
	}
	if queues != 2 {
		t.Errorf("%d queue checks, want one per controller (raycluster, rayjob)", queues)
	}
}

func TestRayJobSubmitFails(t *testing.T) {
	in, r := pendingJob()
	in.Cluster.Status.State = rayv1.Ready //nolint:staticcheck // State is what KubeRay users read
	in.Pod = rayPod("job-rc-head-x", "job-rc", "uid-jrc", "head")
	in.ClusterPods = []corev1.Pod{*in.Pod}
	in.Job.Status.JobDeploymentStatus = rayv1.JobDeploymentStatusRunning
	in.Job.Status.DashboardURL = "job-rc-head-svc.team-a.svc.cluster.local:8265"
	r.add(chain.Event{Component: "rayjob", Hop: chain.DashboardCall, Object: ref(KindRayJob, "job", ""), Call: &chain.Call{Method: "POST", URL: "http://10.0.0.2:8265/api/jobs/", Path: "/api/jobs/", Code: 500}, Duration: time.Millisecond})
	rep := run(t, in, r)
	expect(t, rep, "h", CauseSubmitFailed, "POST http://10.0.0.2:8265/api/jobs/ → HTTP 500", "rayctl kubectl logs job-rc-head-x")
	h := check(t, rep, "h", KindRayJob)
	if !hasEvidence(h, "submit attempt: #") {
		t.Errorf("h evidence lacks the submit attempt: %q", h.Evidence)
	}
}

func TestRayJobFinalStates(t *testing.T) {
	in, r := pendingJob()
	in.Job.Status.JobDeploymentStatus = rayv1.JobDeploymentStatusValidationFailed
	in.Job.Status.Message = "entrypoint is required"
	in.Cluster, in.ClusterPods, in.Pod = nil, nil, nil
	expect(t, run(t, in, r), "h", CauseJobInvalid, "entrypoint is required", "recreate")

	in, r = pendingJob()
	in.Job.Status.JobDeploymentStatus = rayv1.JobDeploymentStatusComplete
	in.Job.Status.JobStatus = rayv1.JobStatusSucceeded
	in.Cluster, in.ClusterPods, in.Pod = nil, nil, nil
	rep := run(t, in, r)
	if rep.Verdict.Check != "" {
		t.Errorf("a complete RayJob whose cluster was shut down: verdict %+v, want none", rep.Verdict)
	}
}

func TestQueueSaturated(t *testing.T) {
	in, r := healthyPod()
	in.Controllers[1].Queue = chain.QueueStats{Depth: 40, Busy: 1, Concurrency: 1}
	r.add(chain.Event{Component: "raycluster", Hop: chain.DequeueHop, Object: ref(KindRayCluster, "rc", ""), Duration: 4 * time.Second})
	expect(t, run(t, in, r), "i", CauseQueueSaturated, "40 keys waiting, all 1 workers busy", "--reconcile-concurrency (now 1)")

	// Busy with delayed keys in the queue, but the key did not wait: not saturated.
	in, r = healthyPod()
	in.Controllers[1].Queue = chain.QueueStats{Depth: 3, Busy: 1, Concurrency: 1}
	if rep := run(t, in, r); rep.Verdict.Check != "" {
		t.Errorf("verdict %+v, want none", rep.Verdict)
	}
}

func TestNoRecorder(t *testing.T) {
	in, _ := healthyPod()
	in.Controllers, in.ChainError = nil, "the API server has no chain recorder"
	rep := run(t, in, nil)
	for _, c := range rep.Checks {
		if c.Status == Fail {
			t.Errorf("check %s failed without a recorder: %s", c.ID, c.Summary)
		}
	}
	if g := check(t, rep, "g", KindRayCluster); g.Status != Pass {
		t.Errorf("g reads the objects alone and should pass: %s %q", g.Status, g.Summary)
	}
}

func TestWriteText(t *testing.T) {
	in, r := healthyPod()
	in.Controllers = controllers("team-b")
	rep := run(t, in, r)
	var b bytes.Buffer
	WriteText(&b, rep, TextOptions{})
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "Most likely cause (a): the Pod's namespace team-a is outside --watch-namespace team-b: add it to --watch-namespace") {
		t.Errorf("last line %q", last)
	}
	for _, l := range lines[:len(lines)-1] {
		if n := len([]rune(l)); n > 80 {
			t.Errorf("line of %d columns: %q", n, l)
		}
	}
	for _, want := range []string{"a) watch namespaces", "  ✗ Pod rc-head-x: the Pod's namespace", "  ✓ RayCluster rc:", "h) RayJob state", "  – "} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
}
