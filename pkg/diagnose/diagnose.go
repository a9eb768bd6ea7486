// Package diagnose explains why rayctl's Ray controllers did not act on an object. It walks the
// checklist of the trigger chain — a Pod's change has to reach the controller's cache (watch
// namespaces, label selector, RBAC), map to its owner RayCluster, pass the For() predicate, be
// reconciled, and the RayCluster has to get ready before a RayJob is submitted or a RayService's Serve
// config deployed, its applications run and its serve Service gets endpoints — and says for each
// check whether it holds, with the evidence it used: the objects, the chain recorder's events, the
// controllers' set-up and queues, and SubjectAccessReviews against the real authorizer.
//
// Gather reads all that from a running rayctl into an Input; Run turns an Input into a Report
// without any I/O, so the checks are tested over fixtures.
package diagnose

import (
	"fmt"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/rayctl/rayctl/pkg/chain"
)

// Kinds Diagnose looks at.
const (
	KindPod        = chain.KindPod
	KindRayCluster = chain.KindRayCluster
	KindRayJob     = chain.KindRayJob
	KindRayService = chain.KindRayService
)

// Status is a check's outcome.
type Status string

// The outcomes of a check: it holds, it does not, or it does not apply to the object.
const (
	Pass          Status = "pass"
	Fail          Status = "fail"
	NotApplicable Status = "n/a"
)

// Symbol is how the text output marks s: ✓, ✗ or –.
func (s Status) Symbol() string {
	switch s {
	case Pass:
		return "✓"
	case Fail:
		return "✗"
	}
	return "–"
}

// Causes name what a failing check found, for scripts and tests (Check.Cause, Verdict.Cause).
const (
	CauseControllerMissing   = "controller-missing"
	CauseNamespaceNotWatched = "namespace-not-watched"
	CauseLabelSelector       = "label-selector"
	CauseRBACDenied          = "rbac-denied"
	CauseNoOwner             = "no-controller-owner"
	CauseOwnerKind           = "owner-not-raycluster"
	CauseOwnerMissing        = "owner-missing"
	CauseOwnerUIDMismatch    = "owner-uid-mismatch"
	CausePredicateDropped    = "predicate-dropped"
	CauseNotReconciled       = "not-reconciled"
	CauseReconcileError      = "reconcile-error"
	CauseClusterMissing      = "cluster-missing"
	CauseClusterNotReady     = "cluster-not-ready"
	CauseJobInvalid          = "job-validation-failed"
	CauseJobFailed           = "job-failed"
	CauseSubmitFailed        = "submit-failed"
	CauseJobWaiting          = "job-waiting"
	CauseQueueSaturated      = "queue-saturated"
	CauseServiceInvalid      = "service-validation-failed"
	CauseServeNotDeployed    = "serve-not-deployed"
	CauseServeAppNotRunning  = "serve-app-not-running"
	CauseNoServeEndpoints    = "no-serve-endpoints"
)

// Subject names one object (or, for the queue check, a controller: Kind "Controller").
type Subject struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// String is "Kind namespace/name".
func (s Subject) String() string {
	if s.Namespace == "" {
		return s.Kind + " " + s.Name
	}
	return s.Kind + " " + s.Namespace + "/" + s.Name
}

// Check is one item of the checklist for one subject.
type Check struct {
	// ID is the item's letter, a to i.
	ID string `json:"id"`
	// Title names the item ("watch namespaces").
	Title   string  `json:"title"`
	Subject Subject `json:"subject"`
	Status  Status  `json:"status"`
	// Summary says in one sentence what the check found; for a failure, the cause.
	Summary string `json:"summary"`
	// Evidence is what the check looked at: objects' fields, chain events, access reviews.
	Evidence []string `json:"evidence,omitempty"`
	// Cause names a failure (one of the Cause constants); Fix says what to do about it.
	Cause string `json:"cause,omitempty"`
	Fix   string `json:"fix,omitempty"`
}

// Verdict is the most likely cause: the first failing check in chain order.
type Verdict struct {
	// Check is the failing check's ID and Subject its subject; empty when every check held.
	Check   string   `json:"check,omitempty"`
	Subject *Subject `json:"subject,omitempty"`
	// Cause is the failing check's Cause.
	Cause string `json:"cause,omitempty"`
	// Text is the one line: the cause and what to do.
	Text string `json:"text"`
}

// Report is the result of a diagnosis.
type Report struct {
	// Object is what was asked about; Subjects what was diagnosed for it, upstream first (its head or
	// owner Pod, RayCluster, RayJob).
	Object   Subject   `json:"object"`
	Subjects []Subject `json:"subjects"`
	// Checks are in chain order: by item, then by subject.
	Checks  []Check `json:"checks"`
	Verdict Verdict `json:"verdict"`
}

// Access is the answer of one SubjectAccessReview.
type Access struct {
	User      string `json:"user"`
	Verb      string `json:"verb"`
	Group     string `json:"group,omitempty"`
	Resource  string `json:"resource"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	Allowed   bool   `json:"allowed"`
	Reason    string `json:"reason,omitempty"`
	// Error is the review's evaluation error, or why it could not be made.
	Error string `json:"error,omitempty"`
}

// Binding is a RoleBinding or ClusterRoleBinding that names a controller's identity.
type Binding struct {
	// Kind is RoleBinding or ClusterRoleBinding; Namespace is a RoleBinding's.
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// RoleKind and RoleName are its roleRef.
	RoleKind string `json:"roleKind"`
	RoleName string `json:"roleName"`
	// User is the identity it binds.
	User string `json:"user"`
}

// Input is everything the checks look at.
type Input struct {
	// Kind, Namespace and Name are the object asked about (Kind one of KindPod, KindRayCluster,
	// KindRayJob, KindRayService).
	Kind, Namespace, Name string
	// Pod is the Pod asked about, or the head Pod of the RayCluster or RayJob asked about (nil if none).
	Pod *corev1.Pod
	// ClusterName is the RayCluster involved: the Pod's controller owner, the one asked about, or the
	// RayJob's status.rayClusterName; Cluster is it (nil if it does not exist).
	ClusterName string
	Cluster     *rayv1.RayCluster
	// ClusterPods are the Pods labelled ray.io/cluster=ClusterName.
	ClusterPods []corev1.Pod
	// Job is the RayJob asked about.
	Job *rayv1.RayJob
	// Service is the RayService asked about; ClusterName is then its pending cluster while it has one
	// (the one being brought up), else its active one.
	Service *rayv1.RayService
	// Events are the chain recorder's events about the namespace, oldest first; RecorderSize is its
	// ring's capacity. ChainError says why there are none, if the recorder could not be read.
	Events       []chain.Event
	RecorderSize int
	ChainError   string
	// Controllers are the controllers the recorder knows, with their queues.
	Controllers []chain.ControllerInfo
	// Access holds the SubjectAccessReviews AccessRequests asked for; Bindings the bindings that name
	// the controllers' identities.
	Access   []Access
	Bindings []Binding
	// Operator is the Ray operator outside rayctl that acts on the kinds no rayctl controller runs for
	// (nil when rayctl's controllers cover them, or it was not looked for).
	Operator *Operator
	// ObjectEvents are the Kubernetes Events about the subjects, oldest first.
	ObjectEvents []corev1.Event
	// Ray is what Ray's dashboard said of the RayJob's job or the RayService's applications (nil if
	// not asked).
	Ray *RayState
	// Now is when the input was read.
	Now time.Time
}

// Run walks the checklist over in.
func Run(in *Input) *Report {
	d := newDiag(in)
	r := &Report{Object: Subject{Kind: in.Kind, Namespace: in.Namespace, Name: in.Name}, Subjects: d.subjects()}
	for _, item := range checklist {
		checks := item.run(d)
		if len(checks) == 0 && item.notApplicable == "" {
			continue
		}
		if len(checks) == 0 {
			checks = []Check{{Subject: r.Object, Status: NotApplicable, Summary: item.notApplicable}}
		}
		for _, c := range checks {
			c.ID, c.Title = item.id, item.title
			r.Checks = append(r.Checks, c)
		}
	}
	r.Verdict = verdict(r)
	return r
}

// verdict picks the first failing check.
func verdict(r *Report) Verdict {
	for i := range r.Checks {
		c := &r.Checks[i]
		if c.Status != Fail {
			continue
		}
		s := c.Subject
		text := c.Summary
		if c.Fix != "" {
			text += ": " + c.Fix
		}
		return Verdict{Check: c.ID, Subject: &s, Cause: c.Cause, Text: text}
	}
	return Verdict{Text: fmt.Sprintf("every check passed; to see what happens next, follow %s live with rayctl trace %s/%s -n %s --follow",
		r.Object, lower(r.Object.Kind), r.Object.Name, r.Object.Namespace)}
}

// item is one entry of the checklist.
type item struct {
	id, title string
	run       func(d *diag) []Check
	// notApplicable is the summary when run returns no check ("": the item is left out then).
	notApplicable string
}

// checklist is issue 7's list, in chain order, after o: the operator outside rayctl that acts on the
// kinds no rayctl controller runs for (issue 32), left out when rayctl's controllers cover them.
var checklist = []item{
	{"o", "Ray operator outside rayctl", (*diag).checkOperator, ""},
	{"a", "watch namespaces", (*diag).checkNamespaces, "no subject"},
	{"b", "cache label selector", (*diag).checkLabels, "no subject"},
	{"c", "RBAC for what the chain needs", (*diag).checkAccess, "no subject"},
	{"d", "controller owner", (*diag).checkOwner, "only for Pods (and a RayJob's RayCluster)"},
	{"e", "For() predicate", (*diag).checkPredicate, "only for RayClusters: no RayCluster involved"},
	{"f", "reconciled after the last change", (*diag).checkReconciled, "no RayCluster or RayJob to reconcile"},
	{"g", "RayCluster status", (*diag).checkClusterStatus, "no RayCluster involved"},
	{"h", "RayJob state", (*diag).checkJob, "only for RayJobs"},
	{"i", "work queue", (*diag).checkQueues, "no controller involved"},
	{"j", "RayService Serve applications and endpoints", (*diag).checkService, "only for RayServices"},
}
