package diagnose

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/rayparams"
)

// (g) The RayCluster's state and conditions, and the Pods that keep it from ready.
func (d *diag) checkClusterStatus() []Check {
	s := d.subject(KindRayCluster)
	if s == nil {
		return nil
	}
	c := Check{Subject: s.Subject}
	cl := d.in.Cluster
	if cl == nil {
		if d.in.Job == nil {
			c.Status, c.Summary = NotApplicable, "the RayCluster does not exist (see d)"
			return []Check{c}
		}
		switch st := d.in.Job.Status.JobDeploymentStatus; st {
		case rayv1.JobDeploymentStatusComplete, rayv1.JobDeploymentStatusFailed:
			c.Status = NotApplicable
			c.Summary = fmt.Sprintf("the RayCluster is gone; the RayJob is %s (shutdownAfterJobFinishes deletes it)", st)
			return []Check{c}
		case rayv1.JobDeploymentStatusValidationFailed, rayv1.JobDeploymentStatusSuspended, rayv1.JobDeploymentStatusSuspending, rayv1.JobDeploymentStatusRetrying:
			c.Status = NotApplicable
			c.Summary = fmt.Sprintf("the RayJob is %s: it has no RayCluster now", st)
			return []Check{c}
		}
		c.Status, c.Cause = Fail, CauseClusterMissing
		c.Summary = fmt.Sprintf("the RayJob's RayCluster %s does not exist", s.Name)
		c.Fix = "the RayJob controller creates it on its next pass; if it does not, see f"
		return []Check{c}
	}
	st := &cl.Status
	c.Evidence = append(c.Evidence, fmt.Sprintf("state=%q reason=%q readyWorkers=%d/%d observedGeneration=%d (generation %d)",
		st.State, st.Reason, st.ReadyWorkerReplicas, st.DesiredWorkerReplicas, st.ObservedGeneration, cl.Generation)) //nolint:staticcheck // State is what KubeRay users read
	for _, k := range toConds(st) {
		c.Evidence = append(c.Evidence, k.String())
	}
	pods := livePods(d.in.ClusterPods)
	var heads, workers []*corev1.Pod
	for _, p := range pods {
		if p.Labels[rayparams.LabelNodeType] == string(rayv1.HeadNode) {
			heads = append(heads, p)
		} else {
			workers = append(workers, p)
		}
	}
	type problem struct{ pod, text, fix string }
	var problems []problem
	for _, p := range append(append([]*corev1.Pod(nil), heads...), workers...) {
		text, fix := podProblem(p)
		state := "Running and Ready"
		if text != "" {
			state = text
			problems = append(problems, problem{p.Name, text, fix})
		}
		c.Evidence = append(c.Evidence, fmt.Sprintf("pod %s (%s): %s", p.Name, orUnknown(p.Labels[rayparams.LabelNodeType]), state))
	}
	if len(pods) == 0 {
		c.Evidence = append(c.Evidence, "no Pods labelled "+rayparams.LabelCluster+"="+cl.Name)
	}
	state := st.State //nolint:staticcheck // State is what KubeRay users read
	switch {
	case state == rayv1.Suspended || (cl.Spec.Suspend != nil && *cl.Spec.Suspend):
		c.Status = Pass
		c.Summary = fmt.Sprintf("the RayCluster is suspended (spec.suspend): no Pods, by design (state %q)", state)
	case state == rayv1.Ready && len(problems) == 0:
		c.Status = Pass
		c.Summary = fmt.Sprintf("the RayCluster is ready: %d Pods Running and Ready", len(pods))
	case state == rayv1.Ready:
		c.Status, c.Cause = Fail, CauseClusterNotReady
		c.Summary = fmt.Sprintf("the RayCluster says ready (KubeRay keeps a cluster ready once it was), but pod %s %s", problems[0].pod, problems[0].text)
		c.Fix = problems[0].fix
	case len(problems) > 0:
		c.Status, c.Cause = Fail, CauseClusterNotReady
		c.Summary = fmt.Sprintf("the RayCluster is not ready: pod %s %s", problems[0].pod, problems[0].text)
		c.Fix = problems[0].fix
	case len(heads) == 0:
		c.Status, c.Cause = Fail, CauseClusterNotReady
		c.Summary = "the RayCluster is not ready: it has no head Pod"
		if rf := meta.FindStatusCondition(st.Conditions, string(rayv1.RayClusterReplicaFailure)); rf != nil && rf.Status == metav1.ConditionTrue {
			c.Summary += " (" + rf.Message + ")"
		}
		c.Fix = "the controller creates it: see f for how its reconciles end"
	case int32(len(workers)) < st.DesiredWorkerReplicas:
		c.Status, c.Cause = Fail, CauseClusterNotReady
		c.Summary = fmt.Sprintf("the RayCluster is not ready: it has %d of %d worker Pods", len(workers), st.DesiredWorkerReplicas)
		c.Fix = "the controller creates them: see f for how its reconciles end"
	default:
		c.Status, c.Cause = Fail, CauseClusterNotReady
		c.Summary = fmt.Sprintf("the RayCluster's Pods are Running and Ready but its state is still %q", state)
		c.Fix = "its next reconcile sets it: see f"
	}
	return []Check{c}
}

// livePods are the Pods not being deleted, sorted by name.
func livePods(pods []corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range pods {
		if pods[i].DeletionTimestamp.IsZero() {
			out = append(out, &pods[i])
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func orUnknown(s string) string {
	if s == "" {
		return "no node type"
	}
	return s
}

// metaCondition is a condition as evidence.
type metaCondition struct{ typ, status, reason, message string }

func (c metaCondition) String() string {
	s := fmt.Sprintf("condition %s=%s", c.typ, c.status)
	if c.reason != "" || c.message != "" {
		s += " (" + c.reason
		if c.message != "" {
			s += ": " + c.message
		}
		s += ")"
	}
	return s
}

func toConds(st *rayv1.RayClusterStatus) []metaCondition {
	out := make([]metaCondition, 0, len(st.Conditions))
	for _, c := range st.Conditions {
		out = append(out, metaCondition{c.Type, string(c.Status), c.Reason, c.Message})
	}
	return out
}

// podProblem says what keeps a Pod from Running and Ready ("" if nothing) and what to do about it.
func podProblem(p *corev1.Pod) (problem, fix string) {
	describe := "see rayctl kubectl describe pod " + p.Name + " -n " + p.Namespace
	if !p.DeletionTimestamp.IsZero() {
		return "is terminating", "wait for it to go; the controller replaces it"
	}
	switch p.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded:
		s := fmt.Sprintf("has ended (%s", p.Status.Phase)
		if p.Status.Reason != "" {
			s += ": " + p.Status.Reason
		}
		if p.Status.Message != "" {
			s += ": " + p.Status.Message
		}
		return s + ")", "the controller replaces it; " + describe
	case corev1.PodRunning:
		if podutils.IsPodReady(p) {
			return "", ""
		}
		if w := waiting(p); w != "" {
			return "is Running but not Ready (" + w + ")", "see rayctl kubectl logs " + p.Name + " -n " + p.Namespace + " --previous"
		}
		detail := "Ready condition not True"
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Reason != "" {
				detail = "Ready=" + string(c.Status) + " " + c.Reason
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Running != nil && !cs.Ready {
				detail += "; " + cs.Name + " running, not ready"
			}
		}
		return "is Running but not Ready (" + detail + ")", "wait for its readiness probe; if it stays so, " + describe
	}
	// Pending (or unknown).
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			s := fmt.Sprintf("is Pending (%s: %s)", c.Reason, c.Message)
			if strings.Contains(c.Message, "Insufficient") {
				return s, "lower the Pod's resource requests in the RayCluster's spec, or free the node (rayctl kubectl describe node)"
			}
			return s, "make a node fit it (node selector, affinity, taints, resources): " + describe
		}
	}
	if p.Spec.NodeName == "" {
		return "is Pending (not scheduled yet)", "wait for the scheduler; " + describe
	}
	if w := waiting(p); w != "" {
		fix := describe
		if strings.Contains(w, "Image") {
			fix = "fix the image name, or load the image into rayctl's runtime with rayctl image load"
		}
		return "is Pending (" + w + ")", fix
	}
	return fmt.Sprintf("is %s", orPhase(p.Status.Phase)), describe
}

func orPhase(p corev1.PodPhase) string {
	if p == "" {
		return "Pending"
	}
	return string(p)
}

// waiting describes the first container (init containers first) that waits or crashed.
func waiting(p *corev1.Pod) string {
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range list {
			switch {
			case cs.State.Waiting != nil && cs.State.Waiting.Reason != "" && cs.State.Waiting.Reason != "PodInitializing":
				s := cs.Name + ": " + cs.State.Waiting.Reason
				if cs.State.Waiting.Message != "" {
					s += ": " + cs.State.Waiting.Message
				}
				return s
			case cs.State.Terminated != nil && cs.State.Terminated.ExitCode != 0:
				return fmt.Sprintf("%s: exited %d (%s)", cs.Name, cs.State.Terminated.ExitCode, cs.State.Terminated.Reason)
			}
		}
	}
	return ""
}

// (h) The RayJob's state, dashboard URL, submission attempts, and what it waits for.
func (d *diag) checkJob() []Check {
	s := d.subject(KindRayJob)
	if s == nil {
		return nil
	}
	job := d.in.Job
	st := &job.Status
	c := Check{Subject: s.Subject, Status: Pass}
	mode := job.Spec.SubmissionMode
	if mode == "" {
		mode = rayv1.K8sJobMode
	}
	c.Evidence = append(c.Evidence,
		fmt.Sprintf("jobDeploymentStatus=%q jobStatus=%q submissionMode=%s", st.JobDeploymentStatus, st.JobStatus, mode),
		fmt.Sprintf("rayClusterName=%q dashboardURL=%q jobId=%q", st.RayClusterName, st.DashboardURL, st.JobId))
	if st.Reason != "" || st.Message != "" {
		c.Evidence = append(c.Evidence, fmt.Sprintf("reason=%q message=%q", st.Reason, st.Message))
	}
	var submits, polls []*chain.Event
	if ctrl := d.controller(KindRayJob); ctrl != nil {
		for _, e := range d.find(ctrl.Name, chain.DashboardCall, KindRayJob, s.Namespace, s.Name) {
			if e.IsCall(http.MethodPost) {
				submits = append(submits, e)
			} else {
				polls = append(polls, e)
			}
		}
	}
	for _, e := range submits[max(0, len(submits)-3):] {
		c.Evidence = append(c.Evidence, "submit attempt: "+line(e))
	}
	if n := len(polls); n > 0 {
		c.Evidence = append(c.Evidence, fmt.Sprintf("%d other dashboard calls; the last: %s", n, line(polls[n-1])))
	}
	if op := d.external(s); op != nil {
		var calls []*chain.Event
		for i := range d.in.Events {
			e := &d.in.Events[i]
			if e.Hop == chain.ProxyCall && e.Call != nil && e.Call.User == op.User && e.Object.Namespace == s.Namespace && strings.Contains(e.Call.Path, "/api/jobs") {
				calls = append(calls, e)
			}
		}
		for _, e := range calls[max(0, len(calls)-3):] {
			c.Evidence = append(c.Evidence, "API server proxied for the operator: "+timed(e))
		}
	}
	if len(submits) == 0 && mode == rayv1.HTTPMode && d.external(s) == nil {
		c.Evidence = append(c.Evidence, "no submit attempt recorded")
	}
	clusterName := st.RayClusterName
	waitCluster := func() {
		cl := d.in.Cluster
		switch {
		case cl == nil:
			c.Status, c.Cause = Fail, CauseJobWaiting
			c.Summary = fmt.Sprintf("the RayJob waits for its RayCluster %s, which does not exist yet", clusterName)
			c.Fix = "the RayJob controller creates it; see f for how its reconciles end"
		case cl.Status.State != rayv1.Ready: //nolint:staticcheck // State is what KubeRay users read
			c.Status, c.Cause = Fail, CauseClusterNotReady
			c.Summary = fmt.Sprintf("the RayJob waits for RayCluster %s to be ready (state %q)", cl.Name, cl.Status.State) //nolint:staticcheck // State is what KubeRay users read
			c.Fix = "see g for what keeps the RayCluster from ready"
		default:
			c.Summary = fmt.Sprintf("RayCluster %s is ready: the RayJob's next reconcile (every few seconds) records the dashboard URL and submits", cl.Name)
		}
	}
	lastSubmitFailed := func() *chain.Event {
		if n := len(submits); n > 0 && (submits[n-1].Error != "" || callCode(submits[n-1]) >= 400) {
			return submits[n-1]
		}
		return nil
	}
	switch st.JobDeploymentStatus {
	case rayv1.JobDeploymentStatusNew:
		c.Summary = "the RayJob is new: it waits for the RayJob controller's first reconcile"
	case rayv1.JobDeploymentStatusInitializing:
		waitCluster()
	case rayv1.JobDeploymentStatusWaiting:
		c.Summary = "the RayJob (InteractiveMode) waits for spec.jobId to name the job you submitted"
	case rayv1.JobDeploymentStatusRunning:
		if f := lastSubmitFailed(); f != nil && (st.JobStatus == "" || st.JobStatus == rayv1.JobStatusNew) {
			c.Status, c.Cause = Fail, CauseSubmitFailed
			why := f.Error
			if why == "" {
				why = fmt.Sprintf("HTTP %d", callCode(f))
			}
			c.Summary = fmt.Sprintf("the submission to the dashboard fails: %s → %s", callText(f), why)
			c.Fix = "check the head Pod's dashboard (port 8265): rayctl kubectl logs " + d.headName() + " -n " + s.Namespace
			break
		}
		switch mode {
		case rayv1.HTTPMode:
			c.Summary = fmt.Sprintf("the RayJob is running: it polls the dashboard until the Ray job ends (jobStatus %q)", st.JobStatus)
		default:
			c.Summary = fmt.Sprintf("the RayJob is running (%s): it follows the submitter and the Ray job until it ends (jobStatus %q)", mode, st.JobStatus)
		}
		d.rayJobCheck(&c)
	case rayv1.JobDeploymentStatusComplete:
		c.Summary = fmt.Sprintf("the RayJob is complete (jobStatus %q): it waits for nothing", st.JobStatus)
	case rayv1.JobDeploymentStatusFailed:
		c.Status, c.Cause = Fail, CauseJobFailed
		c.Summary = fmt.Sprintf("the RayJob failed: %s: %s", st.Reason, st.Message)
		c.Fix = "see the Ray job's logs (rayctl kubectl logs " + d.headName() + " -n " + s.Namespace + ") and the RayJob's events (rayctl kubectl describe rayjob " + s.Name + " -n " + s.Namespace + ")"
	case rayv1.JobDeploymentStatusValidationFailed:
		c.Status, c.Cause = Fail, CauseJobInvalid
		c.Summary = "the RayJob's spec is invalid: " + st.Message
		c.Fix = "fix the spec and recreate the RayJob (KubeRay does not leave ValidationFailed)"
	case rayv1.JobDeploymentStatusSuspending, rayv1.JobDeploymentStatusSuspended:
		c.Summary = fmt.Sprintf("the RayJob is %s (spec.suspend): it waits to be resumed", lower(string(st.JobDeploymentStatus)))
	case rayv1.JobDeploymentStatusRetrying:
		c.Summary = fmt.Sprintf("the RayJob is retrying after a failed attempt (failed %d, succeeded %d)", deref(st.Failed), deref(st.Succeeded))
	default:
		c.Summary = fmt.Sprintf("the RayJob is in state %q", st.JobDeploymentStatus)
	}
	return []Check{c}
}

func deref(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// headName is the head Pod's name, or a placeholder.
func (d *diag) headName() string {
	if d.in.Pod != nil {
		return d.in.Pod.Name
	}
	return "<head pod>"
}

// saturatedWait is the queue wait beyond which a busy controller counts as saturated.
const saturatedWait = time.Second

// (i) The work queue of each controller involved: depth, busy workers, concurrency.
func (d *diag) checkQueues() []Check {
	var out []Check
	seen := map[string]bool{}
	for i := range d.subs {
		if op := d.external(&d.subs[i]); op != nil && !seen["\x00operator"] {
			seen["\x00operator"] = true
			out = append(out, d.externalQueues(op))
		}
		for _, k := range d.watcherKinds(&d.subs[i]) {
			ctrl := d.controller(k)
			if ctrl == nil || seen[ctrl.Name] {
				continue
			}
			seen[ctrl.Name] = true
			out = append(out, d.queue(ctrl))
		}
	}
	return out
}

func (d *diag) queue(ctrl *chain.ControllerInfo) Check {
	q := ctrl.Queue
	c := Check{Subject: Subject{Kind: "Controller", Name: ctrl.Name}, Status: Pass}
	c.Evidence = append(c.Evidence, fmt.Sprintf("queue depth %d, %d of %d workers busy (--reconcile-concurrency %d)", q.Depth, q.Busy, q.Concurrency, q.Concurrency))
	// The key's recent queue waits.
	var lastWait time.Duration = -1
	var key *subj
	for i := range d.subs {
		if d.subs[i].Kind == ctrl.Kind {
			key = &d.subs[i]
		}
	}
	if key != nil {
		deq := d.find(ctrl.Name, chain.DequeueHop, key.Kind, key.Namespace, key.Name)
		if n := len(deq); n > 0 {
			worst := deq[0]
			for _, e := range deq[max(0, n-20):] {
				if e.Duration > worst.Duration {
					worst = e
				}
			}
			lastWait = deq[n-1].Duration
			c.Evidence = append(c.Evidence, fmt.Sprintf("%s %s/%s waited %s in the queue at its last dequeue (longest of the last %d: %s)",
				key.Kind, key.Namespace, key.Name, ms(deq[n-1].Duration), min(n, 20), ms(worst.Duration)))
		}
	}
	// Depth counts delayed keys too (RequeueAfter, back-off): the queue is saturated when every worker
	// is busy, keys wait, and the key itself waited long at its last dequeue.
	if q.Concurrency > 0 && q.Depth > 0 && q.Busy >= q.Concurrency && (lastWait < 0 || lastWait >= saturatedWait) {
		c.Status, c.Cause = Fail, CauseQueueSaturated
		c.Summary = fmt.Sprintf("the %s controller is saturated: %d keys waiting, all %d workers busy", ctrl.Name, q.Depth, q.Concurrency)
		c.Fix = fmt.Sprintf("raise rayctl up --reconcile-concurrency (now %d), or find the slow reconciles with rayctl trace", q.Concurrency)
		return c
	}
	c.Summary = fmt.Sprintf("keeps up: %d keys waiting, %d of %d workers busy", q.Depth, q.Busy, q.Concurrency)
	return c
}
