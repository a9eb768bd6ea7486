package diagnose

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/rayctl/rayctl/pkg/chain"
)

// Causes of the checks of an operator outside rayctl.
const (
	CauseOperatorNotRunning = "operator-not-running"
	CauseRayJobPending      = "ray-job-pending"
)

// Operator is a Ray operator outside rayctl (KubeRay's), as diagnose sees it from what it exposes: its
// Deployment, its leader-election Lease, the requests the API server saw it make, its metrics, and
// what diagnose's flags say of it. It acts on the kinds no rayctl controller runs for.
type Operator struct {
	// Found says whether any trace of it was found; Sources are where (one line each).
	Found   bool     `json:"found"`
	Sources []string `json:"sources,omitempty"`
	// Running is whether it runs (nil: unknown); RunningEvidence says how that is known.
	Running         *bool    `json:"running,omitempty"`
	RunningEvidence []string `json:"runningEvidence,omitempty"`
	// User is the identity it acts as ("" unknown), UserSource where that came from.
	User       string `json:"user,omitempty"`
	UserSource string `json:"userSource,omitempty"`
	// Groups are User's groups for access reviews (a service account's).
	Groups []string `json:"groups,omitempty"`
	// WatchNamespaces are the namespaces its cache holds (empty: all), when WatchSource says where that
	// came from; WatchSource "" means unknown.
	WatchNamespaces []string `json:"watchNamespaces,omitempty"`
	WatchSource     string   `json:"watchSource,omitempty"`
	// Reads are the lists and watches the API server saw it open, newest last (rayctl's API server only).
	Reads []chain.Event `json:"reads,omitempty"`
	// Queues are its controllers' work queues from its metrics; MetricsSource is where they were read,
	// MetricsError why they could not be ("" with no source: not asked).
	Queues        []OperatorQueue `json:"queues,omitempty"`
	MetricsSource string          `json:"metricsSource,omitempty"`
	MetricsError  string          `json:"metricsError,omitempty"`
}

// OperatorQueue is one controller of an operator as its controller-runtime metrics show it.
type OperatorQueue struct {
	// Controller is the controller's name (its metrics' "controller" or "name" label).
	Controller string `json:"controller"`
	// Depth is workqueue_depth; Retries workqueue_retries_total; Errors
	// controller_runtime_reconcile_errors_total; Reconciles controller_runtime_reconcile_total.
	Depth      float64 `json:"depth"`
	Retries    float64 `json:"retries"`
	Errors     float64 `json:"errors"`
	Reconciles float64 `json:"reconciles"`
	// Busy is controller_runtime_active_workers, Workers controller_runtime_max_concurrent_reconciles.
	Busy    float64 `json:"busy"`
	Workers float64 `json:"workers"`
	// ReconcileSeconds is the mean of controller_runtime_reconcile_time_seconds (0 if none).
	ReconcileSeconds float64 `json:"reconcileSeconds"`
}

// RayState is what Ray's dashboard said, asked through the API server's service proxy.
type RayState struct {
	// Source is the URL asked; Error why it could not be read.
	Source string `json:"source"`
	Error  string `json:"error,omitempty"`
	// JobStatus and JobMessage are the Ray job's (PENDING, RUNNING …) for a RayJob.
	JobStatus  string `json:"jobStatus,omitempty"`
	JobMessage string `json:"jobMessage,omitempty"`
	// RuntimeEnvLog names the head's runtime env setup log read (through the dashboard's log API) for
	// a PENDING job, RuntimeEnvLine its latest line of note (the command it runs, a retry, an error).
	RuntimeEnvLog  string `json:"runtimeEnvLog,omitempty"`
	RuntimeEnvLine string `json:"runtimeEnvLine,omitempty"`
	// Applications are Serve's applications by name (status and message), for a RayService.
	Applications map[string]RayApp `json:"applications,omitempty"`
}

// RayApp is one Serve application's state.
type RayApp struct {
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}

// external returns the operator outside rayctl that acts on s, nil when rayctl's controllers do (or no
// operator was looked for).
func (d *diag) external(s *subj) *Operator {
	if d.in.Operator == nil {
		return nil
	}
	for _, k := range d.watcherKinds(s) {
		if d.controller(k) == nil {
			return d.in.Operator
		}
	}
	return nil
}

// (o) The operator runs: rayctl's controllers for the kinds involved, or one outside rayctl.
func (d *diag) checkOperator() []Check {
	var out []Check
	done := false
	for i := range d.subs {
		s := &d.subs[i]
		op := d.external(s)
		if op == nil || done {
			continue
		}
		done = true
		c := Check{Subject: Subject{Kind: "Operator", Name: op.name()}, Status: Pass}
		c.Evidence = append(c.Evidence, op.Sources...)
		c.Evidence = append(c.Evidence, op.RunningEvidence...)
		if d.in.ChainError != "" {
			c.Evidence = append(c.Evidence, "the API server's records of the operator's requests (its watches, writes and proxy calls) need rayctl's API server: "+d.in.ChainError)
		}
		if names := d.controllerNames(); names != "none" {
			c.Evidence = append(c.Evidence, "rayctl's own controllers: "+names)
		} else if d.in.ChainError == "" {
			c.Evidence = append(c.Evidence, "rayctl runs no Ray controller (rayctl up --controllers=none)")
		}
		switch {
		case !op.Found:
			c.Status, c.Cause = Fail, CauseOperatorNotRunning
			c.Summary = "no Ray operator acts on these objects: rayctl runs no controller for them and no KubeRay operator was found (no Deployment, no Lease ray-operator-leader, no API request with its user agent)"
			c.Fix = "start KubeRay's operator (or rayctl up with --controllers), or name it to diagnose with --operator-user"
		case op.Running != nil && !*op.Running:
			c.Status, c.Cause = Fail, CauseOperatorNotRunning
			c.Summary = "KubeRay's operator does not run: " + firstOr(op.RunningEvidence, "its Deployment has no available replica")
			c.Fix = "start the operator again (kubectl -n <ns> rollout restart deployment, or its process), and read why it stopped in its logs"
		case op.Running == nil:
			c.Status = NotApplicable
			c.Summary = "KubeRay's operator was found, but whether it runs is unknown (no Deployment, no Lease)"
		default:
			c.Summary = "KubeRay's operator runs"
			if op.User != "" {
				c.Summary += " as " + op.User
			}
		}
		out = append(out, c)
	}
	return out
}

// name is how checks name the operator.
func (o *Operator) name() string {
	if o.User != "" {
		return o.User
	}
	return "kuberay-operator"
}

func firstOr(list []string, def string) string {
	if len(list) > 0 {
		return list[len(list)-1]
	}
	return def
}

// externalNamespaces is check a for an object an outside operator acts on.
func (d *diag) externalNamespaces(s *subj, op *Operator) Check {
	c := Check{Subject: s.Subject, Status: Pass}
	if !op.Found {
		return Check{Subject: s.Subject, Status: NotApplicable, Summary: "no operator found (see o)"}
	}
	for _, r := range d.readsOf(op, s.Kind) {
		c.Evidence = append(c.Evidence, "API server saw: "+timed(&r))
	}
	switch {
	case op.WatchSource == "":
		c.Status = NotApplicable
		c.Summary = "the operator's watch namespaces are unknown (no Deployment args, no watch seen by rayctl's API server): pass --operator-watch-namespace"
	case len(op.WatchNamespaces) == 0:
		c.Summary = fmt.Sprintf("namespace %s is watched (the operator watches all namespaces)", s.Namespace)
		c.Evidence = append(c.Evidence, "watch namespaces from "+op.WatchSource)
	case !slices.Contains(op.WatchNamespaces, s.Namespace):
		c.Status, c.Cause = Fail, CauseNamespaceNotWatched
		c.Summary = fmt.Sprintf("%s's namespace %s is not one KubeRay's operator watches (it watches %s)", the(s.Kind), s.Namespace, strings.Join(op.WatchNamespaces, ","))
		c.Fix = fmt.Sprintf("add %s to the operator's --watch-namespace (now %s), or create the %s in a watched namespace", s.Namespace, strings.Join(op.WatchNamespaces, ","), s.Kind)
		c.Evidence = append(c.Evidence, "watch namespaces from "+op.WatchSource)
	default:
		c.Summary = fmt.Sprintf("namespace %s is watched", s.Namespace)
		c.Evidence = append(c.Evidence, fmt.Sprintf("the operator watches %s (from %s)", strings.Join(op.WatchNamespaces, ","), op.WatchSource))
	}
	return c
}

// readsOf are op's latest list and watch of kind, as evidence.
func (d *diag) readsOf(op *Operator, kind string) []chain.Event {
	var out []chain.Event
	for _, r := range op.Reads {
		if strings.EqualFold(r.Object.Kind, kind) {
			out = append(out, r)
		}
	}
	return out[max(0, len(out)-3):]
}

// timed is an event in words with its time.
func timed(e *chain.Event) string {
	return e.Time.Format("15:04:05.000") + " " + line(e)
}

// externalLabels is check b: KubeRay's cache has no label selector on the kinds the chain follows.
func (d *diag) externalLabels(s *subj, op *Operator) Check {
	if !op.Found {
		return Check{Subject: s.Subject, Status: NotApplicable, Summary: "no operator found (see o)"}
	}
	return Check{Subject: s.Subject, Status: Pass,
		Summary:  fmt.Sprintf("KubeRay's operator caches every %s (its only cache label selector is on batch Jobs)", s.Kind),
		Evidence: []string{"KubeRay's manager sets a cache selector only for batch Jobs: app.kubernetes.io/created-by=kuberay-operator", "labels: " + labelString(s.obj.GetLabels())}}
}

// operatorVerbs are what KubeRay's operator must be allowed to do for each kind of subject: the verbs
// of its chain (watching, writing status, creating what it owns).
func operatorVerbs(kind string) []Access {
	switch kind {
	case KindPod:
		return []Access{{Verb: "get", Resource: "pods"}, {Verb: "list", Resource: "pods"}, {Verb: "watch", Resource: "pods"}}
	case KindRayCluster:
		return []Access{{Verb: "get", Group: "ray.io", Resource: "rayclusters"}, {Verb: "list", Group: "ray.io", Resource: "rayclusters"},
			{Verb: "watch", Group: "ray.io", Resource: "rayclusters"}, {Verb: "update", Group: "ray.io", Resource: "rayclusters/status"},
			{Verb: "create", Resource: "pods"}, {Verb: "delete", Resource: "pods"}, {Verb: "create", Resource: "services"}}
	case KindRayJob:
		return []Access{{Verb: "get", Group: "ray.io", Resource: "rayjobs"}, {Verb: "list", Group: "ray.io", Resource: "rayjobs"},
			{Verb: "watch", Group: "ray.io", Resource: "rayjobs"}, {Verb: "update", Group: "ray.io", Resource: "rayjobs/status"},
			{Verb: "create", Group: "ray.io", Resource: "rayclusters"}, {Verb: "create", Group: "batch", Resource: "jobs"}}
	case KindRayService:
		return []Access{{Verb: "get", Group: "ray.io", Resource: "rayservices"}, {Verb: "list", Group: "ray.io", Resource: "rayservices"},
			{Verb: "watch", Group: "ray.io", Resource: "rayservices"}, {Verb: "update", Group: "ray.io", Resource: "rayservices/status"},
			{Verb: "create", Group: "ray.io", Resource: "rayclusters"}, {Verb: "create", Resource: "services"}}
	}
	return nil
}

// operatorAccess are the reviews of op's identity for subject s: in its namespace, a get by name, a
// list or watch across all namespaces when the operator watches them all.
func operatorAccess(op *Operator, s *subj) []Access {
	if op.User == "" {
		return nil
	}
	var out []Access
	for _, a := range operatorVerbs(s.Kind) {
		a.User = op.User
		a.Namespace = s.Namespace
		switch {
		case a.Verb == "get" && !strings.Contains(a.Resource, "/"):
			a.Name = s.Name
		case (a.Verb == "list" || a.Verb == "watch") && len(op.WatchNamespaces) == 0:
			a.Namespace = ""
		}
		out = append(out, a)
	}
	return out
}

// externalAccess is check c for an outside operator: each verb its chain needs, reviewed for its
// identity, and the writes of it the API server refused.
func (d *diag) externalAccess(s *subj, op *Operator) Check {
	c := Check{Subject: s.Subject, Status: Pass}
	if !op.Found {
		return Check{Subject: s.Subject, Status: NotApplicable, Summary: "no operator found (see o)"}
	}
	if op.User == "" {
		return Check{Subject: s.Subject, Status: NotApplicable,
			Summary: "the operator's identity is unknown (no Deployment's service account, no request seen): pass --operator-user to review its RBAC"}
	}
	c.Evidence = append(c.Evidence, fmt.Sprintf("identity %s (from %s)", op.User, op.UserSource))
	var denied []string
	for _, want := range operatorAccess(op, s) {
		a := d.access(want)
		what := fmt.Sprintf("%s %s %s", want.Verb, qualified(want), scopeOf(want))
		switch {
		case a == nil:
			c.Evidence = append(c.Evidence, what+": not reviewed")
		case a.Error != "" && !a.Allowed:
			c.Evidence = append(c.Evidence, what+": review failed: "+a.Error)
		case a.Allowed:
			c.Evidence = append(c.Evidence, "SubjectAccessReview: "+what+": allowed")
		default:
			denied = append(denied, want.Verb+" "+qualified(want))
			c.Evidence = append(c.Evidence, "SubjectAccessReview: "+what+": DENIED")
		}
	}
	// What the API server refused it (rayctl's API server records refused writes).
	needs := map[string]bool{}
	for _, a := range operatorVerbs(s.Kind) {
		res, _, _ := strings.Cut(a.Resource, "/")
		needs[res] = true
	}
	for _, e := range d.in.Events {
		if _, res := resourceOf(e.Object.Kind); e.Hop == chain.APIWrite && e.Call != nil && e.Call.User == op.User && e.Call.Code == 403 &&
			e.Object.Namespace == s.Namespace && needs[res] {
			c.Evidence = append(c.Evidence, "API server refused: "+timed(&e))
			break
		}
	}
	for _, ev := range d.in.ObjectEvents {
		if refers(&ev, s) && strings.Contains(strings.ToLower(ev.Message), "forbidden") {
			c.Evidence = append(c.Evidence, fmt.Sprintf("Event %s on %s %s: %s", ev.Reason, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Message))
		}
	}
	for _, b := range d.rolesOf(op.User) {
		c.Evidence = append(c.Evidence, fmt.Sprintf("%s is bound by %s %s to %s %s", op.User, b.Kind, b.Name, b.RoleKind, b.RoleName))
	}
	if len(denied) > 0 {
		c.Status, c.Cause = Fail, CauseRBACDenied
		c.Summary = fmt.Sprintf("KubeRay's operator (%s) may not %s in namespace %s", op.User, strings.Join(denied, ", "), s.Namespace)
		c.Fix = "restore the RoleBinding or ClusterRoleBinding that grants it (KubeRay's Helm chart binds ClusterRole kuberay-operator to its service account)"
		return c
	}
	c.Summary = fmt.Sprintf("%s may do what the chain needs of %ss", op.User, lower(s.Kind))
	return c
}

// qualified is "pods", "rayjobs.ray.io", "jobs.batch".
func qualified(a Access) string {
	if a.Group == "" {
		return a.Resource
	}
	res, sub, found := strings.Cut(a.Resource, "/")
	if found {
		return res + "." + a.Group + "/" + sub
	}
	return a.Resource + "." + a.Group
}

// refers reports whether the Event is about s.
func refers(ev *corev1.Event, s *subj) bool {
	return ev.InvolvedObject.Kind == s.Kind && ev.InvolvedObject.Name == s.Name && ev.InvolvedObject.Namespace == s.Namespace
}

// externalReconciled is check f for an outside operator: what the API server saw it write of the
// object, and its Events. A RayJob or RayCluster without a status a while after its creation was never
// reconciled.
func (d *diag) externalReconciled(s *subj, op *Operator) Check {
	c := Check{Subject: s.Subject, Status: Pass}
	if s.obj == nil {
		return Check{Subject: s.Subject, Status: NotApplicable, Summary: fmt.Sprintf("%s does not exist", the(s.Kind))}
	}
	var writes, delivered []*chain.Event
	for i := range d.in.Events {
		e := &d.in.Events[i]
		if e.Call == nil || op.User == "" || e.Call.User != op.User || !refIs(&e.Object, s.Kind, s.Namespace, s.Name) {
			continue
		}
		switch e.Hop {
		case chain.APIWrite:
			writes = append(writes, e)
		case chain.WatchDelivery:
			delivered = append(delivered, e)
		}
	}
	if n := len(delivered); n > 0 {
		c.Evidence = append(c.Evidence, fmt.Sprintf("API server delivered %d watch events of it to the operator's watches; the last: %s", n, timed(delivered[n-1])))
	}
	if n := len(writes); n > 0 {
		c.Evidence = append(c.Evidence, fmt.Sprintf("API server saw %d writes of it by the operator; the last: %s", n, timed(writes[n-1])))
	} else if d.in.ChainError != "" {
		c.Evidence = append(c.Evidence, "the API server's records of its writes are not available ("+d.in.ChainError+"): rayctl's API server records them")
	}
	for _, ev := range d.in.ObjectEvents {
		if refers(&ev, s) {
			c.Evidence = append(c.Evidence, fmt.Sprintf("Event %s %s (%s, ×%d): %s", ev.Type, ev.Reason, ev.Source.Component, max(ev.Count, 1), ev.Message))
		}
	}
	age := d.in.Now.Sub(s.obj.GetCreationTimestamp().Time)
	untouched := false
	switch s.Kind {
	case KindRayJob:
		untouched = d.in.Job.Status.JobDeploymentStatus == ""
	case KindRayCluster:
		untouched = d.in.Cluster.Status.State == "" && len(d.in.Cluster.Status.Conditions) == 0 //nolint:staticcheck // State is what KubeRay writes first
	case KindRayService:
		untouched = d.in.Service.Status.ServiceStatus == "" && len(d.in.Service.Status.Conditions) == 0
	}
	switch {
	case untouched && age >= 10*time.Second:
		c.Status, c.Cause = Fail, CauseNotReconciled
		c.Summary = fmt.Sprintf("the operator never wrote the %s's status (created %s ago)", s.Kind, age.Round(time.Second))
		c.Fix = "see o–c: the operator does not run, does not watch the namespace, or may not read or write it"
		if n := len(delivered); n > 0 {
			// It got the object: what stopped it happened inside its process.
			c.Summary = fmt.Sprintf("the operator never wrote the %s's status (created %s ago), though the API server delivered it to the operator's watch (%s)",
				s.Kind, age.Round(time.Second), delivered[n-1].Time.Format("15:04:05.000"))
			c.Fix = "its queue or Reconcile holds it: see i (its queues) and the operator's log"
		}
	case untouched:
		c.Summary = fmt.Sprintf("the %s was created %s ago: not reconciled yet, on its way", s.Kind, age.Round(time.Second))
	default:
		c.Summary = fmt.Sprintf("the operator has written the %s's status", s.Kind)
	}
	return c
}

// externalQueues is check i for an outside operator: its controllers' queues from its metrics.
func (d *diag) externalQueues(op *Operator) Check {
	c := Check{Subject: Subject{Kind: "Operator", Name: op.name()}, Status: Pass}
	switch {
	case op.MetricsSource == "":
		c.Status = NotApplicable
		c.Summary = "the operator's work queues are inside its process: pass --operator-metrics URL (KubeRay serves controller-runtime metrics on :8080/metrics)"
		return c
	case op.MetricsError != "":
		c.Status = NotApplicable
		c.Summary = "the operator's metrics could not be read: " + op.MetricsError
		c.Evidence = []string{"metrics from " + op.MetricsSource}
		return c
	}
	c.Evidence = append(c.Evidence, "metrics from "+op.MetricsSource)
	var saturated, failing []string
	for _, q := range op.Queues {
		c.Evidence = append(c.Evidence, fmt.Sprintf("controller %s: workqueue_depth %g, %g of %g workers busy, %g reconciles (mean %s), %g errors, %g retries",
			q.Controller, q.Depth, q.Busy, q.Workers, q.Reconciles, ms(time.Duration(q.ReconcileSeconds*float64(time.Second))), q.Errors, q.Retries))
		if q.Workers > 0 && q.Busy >= q.Workers && q.Depth > 0 {
			saturated = append(saturated, q.Controller)
		}
		if q.Errors > 0 {
			failing = append(failing, q.Controller)
		}
	}
	if len(saturated) > 0 {
		c.Status, c.Cause = Fail, CauseQueueSaturated
		c.Summary = "the operator's controllers " + strings.Join(saturated, ", ") + " are saturated: every worker busy and keys waiting"
		c.Fix = "raise the operator's --reconcile-concurrency"
		return c
	}
	c.Summary = "the operator's queues keep up"
	if len(failing) > 0 {
		c.Summary += "; reconcile errors so far in " + strings.Join(failing, ", ") + " (see f and its Events)"
	}
	return c
}

// rayJobCheck is what Ray said of a running RayJob's job: a Ray job PENDING (waiting for its runtime
// environment) or FAILED is the RayJob's story.
func (d *diag) rayJobCheck(c *Check) {
	r := d.in.Ray
	if r == nil {
		return
	}
	if r.Error != "" {
		c.Evidence = append(c.Evidence, fmt.Sprintf("Ray's dashboard (%s): %s", r.Source, r.Error))
		return
	}
	c.Evidence = append(c.Evidence, fmt.Sprintf("Ray's dashboard (%s): status %s: %s", r.Source, r.JobStatus, r.JobMessage))
	switch r.JobStatus {
	case "PENDING":
		c.Status, c.Cause = Fail, CauseRayJobPending
		c.Summary = "the Ray job is PENDING: " + r.JobMessage
		if env := strings.Join(strings.Fields(d.in.Job.Spec.RuntimeEnvYAML), " "); env != "" {
			c.Evidence = append(c.Evidence, "spec.runtimeEnvYAML: "+cut(env, 200))
		}
		if r.RuntimeEnvLine != "" {
			c.Evidence = append(c.Evidence, fmt.Sprintf("%s on the head (the dashboard's log API): %s", r.RuntimeEnvLog, r.RuntimeEnvLine))
			c.Summary = fmt.Sprintf("the Ray job is PENDING on its runtime env: its setup %s, in %s", r.RuntimeEnvLine, r.RuntimeEnvLog)
		}
		c.Fix = "the job's runtime environment is being set up or cannot be (a pip or conda install that cannot reach its index, a working_dir that cannot be fetched): see the head's runtime_env_setup logs (rayctl kubectl exec " + d.headName() + " -- cat /tmp/ray/session_latest/logs/runtime_env_setup-*.log) and the job's runtimeEnvYAML"
		if !strings.Contains(strings.ToLower(r.JobMessage), "runtime env") {
			c.Fix = "the job waits for resources or for its driver to start: see rayctl kubectl logs " + d.headName()
		}
	case "FAILED":
		c.Status, c.Cause = Fail, CauseJobFailed
		c.Summary = "the Ray job FAILED: " + r.JobMessage
		c.Fix = "see the job's logs on the head (rayctl kubectl logs " + d.headName() + ")"
	}
}

// sortedApps are a RayState's applications by name.
func (r *RayState) sortedApps() []string {
	names := make([]string, 0, len(r.Applications))
	for n := range r.Applications {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
