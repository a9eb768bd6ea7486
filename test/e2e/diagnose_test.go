package e2e

// `rayctl diagnose` against causes staged on purpose: each scenario breaks one link of the trigger
// chain and waits until `rayctl diagnose … -o json` names that cause as its verdict and the text's
// last line says so. All scenarios share one instance whose Ray controllers watch a fixed list of
// namespaces (so that one scenario can create a Pod outside it); the RBAC scenario, which takes a
// rule away from the controllers' ClusterRole, runs alone after the others.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/rayctl/rayctl/pkg/diagnose"
	"github.com/rayctl/rayctl/test/e2e/framework"
)

// diagTimeout bounds the wait for a diagnosis to name its cause: the RayJob's and the healthy
// cluster's Pods start in containerd on a 2-core machine.
const diagTimeout = 3 * time.Minute

// The namespaces the diagnose instance's controllers watch, one per scenario, and one they do not.
const (
	diagNSHealthy   = "diag-healthy"
	diagNSLabel     = "diag-label"
	diagNSOwner     = "diag-owner"
	diagNSPredicate = "diag-predicate"
	diagNSError     = "diag-error"
	diagNSJob       = "diag-rayjob"
	diagNSOutside   = "diag-outside"
)

var diagWatched = []string{diagNSHealthy, diagNSLabel, diagNSOwner, diagNSPredicate, diagNSError, diagNSJob}

// diagEnv is what a diagnose scenario works with.
type diagEnv struct {
	in  *framework.Instance
	ray rayclient.Interface
	// timeout bounds waitDiagnosis (diagTimeout if 0).
	timeout time.Duration
}

func TestDiagnose(t *testing.T) {
	t.Parallel()
	in := framework.StartTest(t, "--watch-namespace", strings.Join(diagWatched, ","))
	ray, err := rayclient.NewForConfig(in.Config)
	must(t, "a ray.io client", err)
	e := &diagEnv{in: in, ray: ray}
	ctx := t.Context()
	for _, ns := range append(slices.Clone(diagWatched), diagNSOutside) {
		_, err := in.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		must(t, "creating namespace "+ns, err)
	}
	t.Run("causes", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			test func(t *testing.T, e *diagEnv)
		}{
			{"PodOutsideWatchNamespace", testDiagnoseOutsideNamespace},
			{"PodMissingNodeTypeLabel", testDiagnoseMissingLabel},
			{"PodWithoutOwner", testDiagnoseNoOwner},
			{"StatusOnlyUpdateDropped", testDiagnoseStatusOnlyUpdate},
			{"ReconcileErrorBackOff", testDiagnoseReconcileError},
			{"RayJobClusterNeverReady", testDiagnoseJobNeverReady},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tc.test(t, e)
			})
		}
	})
	// Alone: it changes what the controllers may do in every namespace.
	t.Run("HealthyThenRBACRuleRemoved", func(t *testing.T) { testDiagnoseRBAC(t, e) })
}

// diagnosis is one run of rayctl diagnose: the JSON report and the text's last line.
type diagnosis struct {
	report   diagnose.Report
	lastLine string
	text     string
}

// diagnoseOnce runs `rayctl diagnose obj -n ns`, as JSON and as text.
func (e *diagEnv) diagnoseOnce(ctx context.Context, obj, ns string) (*diagnosis, error) {
	out, err := e.in.Rayctl(ctx, "diagnose", obj, "-n", ns, "-o", "json")
	if err != nil {
		return nil, fmt.Errorf("rayctl diagnose -o json: %v: %s", err, out)
	}
	d := &diagnosis{}
	if err := json.Unmarshal([]byte(out), &d.report); err != nil {
		return nil, fmt.Errorf("rayctl diagnose -o json: %v in %s", err, out)
	}
	text, err := e.in.Rayctl(ctx, "diagnose", obj, "-n", ns)
	if err != nil {
		return nil, fmt.Errorf("rayctl diagnose: %v: %s", err, text)
	}
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	d.text, d.lastLine = text, lines[len(lines)-1]
	return d, nil
}

// check returns the report's check id for a subject of kind ("" for the first).
func (d *diagnosis) check(id, kind string) *diagnose.Check {
	for i := range d.report.Checks {
		c := &d.report.Checks[i]
		if c.ID == id && (kind == "" || c.Subject.Kind == kind) {
			return c
		}
	}
	return nil
}

// waitDiagnosis runs rayctl diagnose until its verdict's cause is cause (empty: no check fails), its
// text's last line contains each of wants, and ok (if set) holds; stage (if set) runs before each
// attempt, to stage the cause again when something undid it. It fails the test with the last
// diagnosis after e.timeout (diagTimeout if 0).
func (e *diagEnv) waitDiagnosis(t *testing.T, obj, ns, cause string, wants []string, ok func(*diagnosis) bool, stage func(ctx context.Context) error) *diagnosis {
	t.Helper()
	timeout := diagTimeout
	if e.timeout > 0 {
		timeout = e.timeout
	}
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	var last *diagnosis
	var lastErr error
	for {
		err := func() error {
			if stage != nil {
				if err := stage(ctx); err != nil {
					return err
				}
			}
			d, err := e.diagnoseOnce(ctx, obj, ns)
			if err != nil {
				return err
			}
			last = d
			return nil
		}()
		lastErr = err
		if err == nil && last.report.Verdict.Cause == cause && containsAll(last.lastLine, wants) && (ok == nil || ok(last)) {
			t.Logf("rayctl diagnose %s -n %s: %s", obj, ns, last.lastLine)
			return last
		}
		select {
		case <-ctx.Done():
			if last != nil {
				t.Fatalf("rayctl diagnose %s -n %s: verdict %q (cause %q), want cause %q mentioning %q (last error: %v); text:\n%s",
					obj, ns, last.report.Verdict.Text, last.report.Verdict.Cause, cause, wants, lastErr, last.text)
			}
			t.Fatalf("rayctl diagnose %s -n %s: no diagnosis: %v", obj, ns, lastErr)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func containsAll(s string, wants []string) bool {
	for _, w := range wants {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}

// diagPod is a Pod labelled as a Ray head (without owner) that no scheduler binds, so it never runs.
func diagPod(ns, name string, labels map[string]string) *corev1.Pod {
	spec := podSpec("rayctl.local/raysim:latest")
	spec.SchedulerName = noScheduler
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Spec: spec}
}

func (e *diagEnv) createPod(t *testing.T, p *corev1.Pod) {
	t.Helper()
	_, err := e.in.Client.CoreV1().Pods(p.Namespace).Create(t.Context(), p, metav1.CreateOptions{})
	must(t, "creating pod "+p.Name, err)
}

// (a) A Pod in a namespace the controllers do not watch.
func testDiagnoseOutsideNamespace(t *testing.T, e *diagEnv) {
	e.createPod(t, diagPod(diagNSOutside, "outside-head", map[string]string{"ray.io/node-type": "head", "ray.io/cluster": "outside"}))
	d := e.waitDiagnosis(t, "pod/outside-head", diagNSOutside, diagnose.CauseNamespaceNotWatched,
		[]string{"namespace diag-outside is outside --watch-namespace " + strings.Join(diagWatched, ","), "add it to --watch-namespace"}, nil, nil)
	if v := d.report.Verdict; v.Check != "a" || v.Subject == nil || v.Subject.Kind != "Pod" {
		t.Errorf("verdict %+v, want check a on the Pod", v)
	}
}

// (b) A Pod without the ray.io/node-type label that the controllers' cache selects on.
func testDiagnoseMissingLabel(t *testing.T, e *diagEnv) {
	e.createPod(t, diagPod(diagNSLabel, "unlabelled", map[string]string{"ray.io/cluster": "some-cluster"}))
	d := e.waitDiagnosis(t, "pod/unlabelled", diagNSLabel, diagnose.CauseLabelSelector,
		[]string{"Pod lacks label ray.io/node-type", "cache only holds pods with ray.io/node-type in (head,worker"}, nil, nil)
	// The cache never held it: no informer event.
	if b := d.check("b", "Pod"); b == nil || !slices.Contains(b.Evidence, "controller raycluster's cache delivered 0 events for it") {
		t.Errorf("check b's evidence does not show the cache never saw the Pod: %+v", b)
	}
}

// (d) A Ray Pod without a controller ownerReference: the controller's handler maps it to no RayCluster.
func testDiagnoseNoOwner(t *testing.T, e *diagEnv) {
	e.createPod(t, diagPod(diagNSOwner, "orphan-worker", map[string]string{"ray.io/node-type": "worker", "ray.io/cluster": "gone"}))
	e.waitDiagnosis(t, "pod/orphan-worker", diagNSOwner, diagnose.CauseNoOwner,
		[]string{"has no controller ownerReference", "maps its events to no RayCluster"},
		func(d *diagnosis) bool {
			// The recorder's map-miss is the evidence.
			c := d.check("d", "Pod")
			return c != nil && strings.Contains(strings.Join(c.Evidence, "\n"), "no controller owner")
		}, nil)
}

// suspendedCluster is the sample RayCluster, suspended: the controller runs no Pods for it.
func suspendedCluster(t *testing.T, name string) *rayv1.RayCluster {
	c := sampleCluster(t, name)
	c.Spec.Suspend = ptr.To(true)
	return c
}

// (e) A status-only update of a RayCluster, which the For() predicate drops by design. Its state is
// written by someone other than the controller; if a reconcile happens to follow (the controller's
// own requeue), the write is made again.
func testDiagnoseStatusOnlyUpdate(t *testing.T, e *diagEnv) {
	ctx := t.Context()
	_, err := e.ray.RayV1().RayClusters(diagNSPredicate).Create(ctx, suspendedCluster(t, "poked"), metav1.CreateOptions{})
	must(t, "creating RayCluster poked", err)
	e.waitDiagnosis(t, "raycluster/poked", diagNSPredicate, "", nil, func(d *diagnosis) bool {
		c := d.check("g", "RayCluster")
		return c != nil && strings.Contains(c.Summary, "suspended")
	}, nil)
	n := 0
	poke := func(ctx context.Context) error {
		n++
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			c, err := e.ray.RayV1().RayClusters(diagNSPredicate).Get(ctx, "poked", metav1.GetOptions{})
			if err != nil {
				return err
			}
			c.Status.Reason = fmt.Sprintf("poked by hand %d", n)
			_, err = e.ray.RayV1().RayClusters(diagNSPredicate).UpdateStatus(ctx, c, metav1.UpdateOptions{})
			return err
		})
	}
	d := e.waitDiagnosis(t, "raycluster/poked", diagNSPredicate, diagnose.CausePredicateDropped,
		[]string{"update status by rayctl-admin", "dropped by the For() predicate", "status-only update", "by design"}, nil,
		func(ctx context.Context) error {
			if n > 0 {
				// Write again only if a reconcile undid the last one's effect on the diagnosis.
				if d, err := e.diagnoseOnce(ctx, "raycluster/poked", diagNSPredicate); err == nil && d.report.Verdict.Cause == diagnose.CausePredicateDropped {
					return nil
				}
			}
			return poke(ctx)
		})
	if v := d.report.Verdict; v.Check != "e" {
		t.Errorf("verdict check %q, want e", v.Check)
	}
}

// (f) A RayCluster whose reconciles fail: its head container's name is one the API server refuses in a
// Pod, so every head Pod create fails and the controller retries with back-off.
func testDiagnoseReconcileError(t *testing.T, e *diagEnv) {
	c := sampleCluster(t, "refused")
	c.Spec.WorkerGroupSpecs = nil
	c.Spec.HeadGroupSpec.Template.Spec.Containers[0].Name = "Ray_Head"
	_, err := e.ray.RayV1().RayClusters(diagNSError).Create(t.Context(), c, metav1.CreateOptions{})
	must(t, "creating RayCluster refused", err)
	d := e.waitDiagnosis(t, "raycluster/refused", diagNSError, diagnose.CauseReconcileError,
		[]string{"the RayCluster's reconciles fail: FailedCreateHeadPod", "is invalid", "retried with back-off"},
		func(d *diagnosis) bool {
			// At least two failures, so that a back-off was taken.
			f := d.check("f", "RayCluster")
			return f != nil && !strings.Contains(f.Fix, "(1 failed pass in a row")
		}, nil)
	if g := d.check("g", "RayCluster"); g == nil || g.Status != diagnose.Fail || !strings.Contains(g.Summary, "no head Pod") {
		t.Errorf("check g: %+v, want a failure naming the missing head Pod", g)
	}
}

// (g, h) A RayJob whose cluster never gets ready: its head asks for more CPU than the node has, so
// the head Pod stays Pending, Unschedulable.
func testDiagnoseJobNeverReady(t *testing.T, e *diagEnv) {
	j := rayJobFromSample(t, "rayjob-http.yaml", "starved")
	res := &j.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec.Containers[0].Resources
	res.Requests[corev1.ResourceCPU] = resource.MustParse("1000")
	res.Limits[corev1.ResourceCPU] = resource.MustParse("1000")
	_, err := e.ray.RayV1().RayJobs(diagNSJob).Create(t.Context(), j, metav1.CreateOptions{})
	must(t, "creating RayJob starved", err)
	// The JSON report and the text come from two runs of rayctl diagnose: the first may still precede the
	// head Pod, so the wait is for a report that holds it too.
	d := e.waitDiagnosis(t, "rayjob/starved", diagNSJob, diagnose.CauseClusterNotReady,
		[]string{"the RayCluster is not ready: pod starved-", "is Pending (Unschedulable", "Insufficient cpu"},
		func(d *diagnosis) bool { return subjectKinds(d.report.Subjects) == "Pod,RayCluster,RayJob" }, nil)
	if v := d.report.Verdict; v.Check != "g" {
		t.Errorf("verdict check %q, want g", v.Check)
	}
	if h := d.check("h", "RayJob"); h == nil || h.Status != diagnose.Fail || !strings.Contains(h.Summary, "waits for RayCluster starved-") {
		t.Errorf("check h: %+v, want the RayJob waiting for its cluster", h)
	}
	if kinds := subjectKinds(d.report.Subjects); kinds != "Pod,RayCluster,RayJob" {
		t.Errorf("subjects %s, want the head Pod, the RayCluster and the RayJob", kinds)
	}
}

func subjectKinds(s []diagnose.Subject) string {
	var k []string
	for _, x := range s {
		k = append(k, x.Kind)
	}
	return strings.Join(k, ",")
}

// (c) A healthy RayCluster's head Pod passes every check; with list taken from the pods rule of the
// controllers' ClusterRole, diagnose names the missing permission; restored, every check passes again.
func testDiagnoseRBAC(t *testing.T, e *diagEnv) {
	ctx := t.Context()
	c := sampleCluster(t, "healthy")
	c.Spec.WorkerGroupSpecs = nil
	_, err := e.ray.RayV1().RayClusters(diagNSHealthy).Create(ctx, c, metav1.CreateOptions{})
	must(t, "creating RayCluster healthy", err)
	var head string
	e.waitDiagnosis(t, "raycluster/healthy", diagNSHealthy, "", []string{"No cause found: every check passed"}, func(d *diagnosis) bool {
		g := d.check("g", "RayCluster")
		if g == nil || g.Status != diagnose.Pass || !strings.Contains(g.Summary, "is ready") {
			return false
		}
		for _, s := range d.report.Subjects {
			if s.Kind == "Pod" {
				head = s.Name
			}
		}
		return head != ""
	}, nil)
	e.waitDiagnosis(t, "pod/"+head, diagNSHealthy, "", []string{"No cause found: every check passed"}, nil, nil)

	const role = "rayctl:controllers"
	roles := e.in.Client.RbacV1().ClusterRoles()
	setPodVerbs := func(ctx context.Context, edit func(verbs []string) []string) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cr, err := roles.Get(ctx, role, metav1.GetOptions{})
			if err != nil {
				return err
			}
			found := false
			for i := range cr.Rules {
				r := &cr.Rules[i]
				if slices.Equal(r.APIGroups, []string{""}) && slices.Equal(r.Resources, []string{"pods"}) {
					r.Verbs, found = edit(r.Verbs), true
				}
			}
			if !found {
				return fmt.Errorf("ClusterRole %s has no rule for pods alone: %+v", role, cr.Rules)
			}
			_, err = roles.Update(ctx, cr, metav1.UpdateOptions{})
			return err
		})
	}
	restore := func(ctx context.Context) error {
		return setPodVerbs(ctx, func(verbs []string) []string {
			if !slices.Contains(verbs, "list") {
				verbs = append(verbs, "list")
			}
			return verbs
		})
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := restore(ctx); err != nil {
			t.Errorf("restoring the pods rule of ClusterRole %s: %v", role, err)
		}
	})
	must(t, "taking list from the pods rule", setPodVerbs(ctx, func(verbs []string) []string {
		return slices.DeleteFunc(verbs, func(v string) bool { return v == "list" })
	}))
	d := e.waitDiagnosis(t, "pod/"+head, diagNSHealthy, diagnose.CauseRBACDenied,
		[]string{"rayctl:controllers may not list pods", "restore the rule in ClusterRole rayctl:controllers"}, nil, nil)
	if v := d.report.Verdict; v.Check != "c" {
		t.Errorf("verdict check %q, want c", v.Check)
	}
	must(t, "restoring the pods rule", restore(ctx))
	e.waitDiagnosis(t, "pod/"+head, diagNSHealthy, "", []string{"No cause found: every check passed"}, nil, nil)
}
