package diagnose

import (
	"fmt"
	"strings"
	"time"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/chain/render"
	"github.com/rayctl/rayctl/pkg/rayparams"
)

// recentChange is how long a change may go without a reconcile before that counts as a failure
// rather than as work in progress.
const recentChange = 2 * time.Second

// (f) The controller reconciled after the last change of what it watches for the object, and how the
// latest pass ended.
func (d *diag) checkReconciled() []Check {
	var out []Check
	if s := d.subject(KindRayCluster); s != nil {
		out = append(out, d.reconciledCluster(s))
	}
	for _, kind := range []string{KindRayJob, KindRayService} {
		if s := d.subject(kind); s != nil {
			out = append(out, d.reconciledOwner(s))
		}
	}
	return out
}

func (d *diag) reconciledCluster(s *subj) Check {
	ctrl := d.controller(KindRayCluster)
	if op := d.external(s); ctrl == nil && op != nil {
		return d.externalReconciled(s, op)
	}
	if ctrl == nil {
		return d.missingController(s, KindRayCluster)
	}
	// What the RayCluster controller reacts to: the Pod diagnosed (or the cluster's Pods), and the
	// RayCluster's own writes other than status ones (the predicate drops those; see e).
	var objs []Subject
	from := "its Pods' and its own last change"
	if d.in.Kind == KindPod && d.in.Pod != nil {
		objs = append(objs, Subject{KindPod, d.in.Pod.Namespace, d.in.Pod.Name})
		from = "the Pod's last change"
	} else {
		for i := range d.in.ClusterPods {
			p := &d.in.ClusterPods[i]
			objs = append(objs, Subject{KindPod, p.Namespace, p.Name})
		}
	}
	ch := d.lastChange(ctrl.Name, objs, nil)
	if own := d.lastChange(ctrl.Name, []Subject{s.Subject}, notStatus); own != nil && (ch == nil || own.at() > ch.at()) {
		ch = own
	}
	c := d.reconciled(s, ctrl, ch, from)
	if c.Status == Pass && d.in.Cluster != nil {
		cl := d.in.Cluster
		switch {
		case !cl.DeletionTimestamp.IsZero():
			c.Evidence = append(c.Evidence, "the RayCluster is being deleted: its reconciles return early and the garbage collector removes its Pods")
		case cl.Spec.ManagedBy != nil && *cl.Spec.ManagedBy != "" && *cl.Spec.ManagedBy != rayparams.ManagedByKubeRay:
			c.Status, c.Cause = Fail, CauseNotReconciled
			c.Summary = fmt.Sprintf("the RayCluster is managed by %s (spec.managedBy): rayctl's controller returns early on it", *cl.Spec.ManagedBy)
			c.Fix = "run that controller, or clear spec.managedBy (only possible by recreating the RayCluster)"
		}
	} else if c.Status == Pass && d.in.Cluster == nil {
		c.Evidence = append(c.Evidence, "the RayCluster does not exist: a reconcile of it returns early (NotFound)")
	}
	return c
}

// reconciledOwner checks a RayJob or RayService: its controller reacts to every write of its RayCluster
// (no predicate) and to its own writes other than status ones.
func (d *diag) reconciledOwner(s *subj) Check {
	ctrl := d.controller(s.Kind)
	if op := d.external(s); ctrl == nil && op != nil {
		return d.externalReconciled(s, op)
	}
	if ctrl == nil {
		return d.missingController(s, s.Kind)
	}
	var ch *change
	if cl := d.subject(KindRayCluster); cl != nil {
		ch = d.lastChange(ctrl.Name, []Subject{cl.Subject}, nil)
	}
	if own := d.lastChange(ctrl.Name, []Subject{s.Subject}, notStatus); own != nil && (ch == nil || own.at() > ch.at()) {
		ch = own
	}
	return d.reconciled(s, ctrl, ch, "its RayCluster's and its own last change")
}

// notStatus keeps the writes that are not to the status subresource.
func notStatus(e *chain.Event) bool { return !isStatusWrite(e) }

// reconciled checks the passes of s's key by ctrl against the change ch (nil if none was recorded).
func (d *diag) reconciled(s *subj, ctrl *chain.ControllerInfo, ch *change, from string) Check {
	c := Check{Subject: s.Subject, Status: Pass}
	passes := d.passes(ctrl.Name, s.Kind, s.Namespace, s.Name)
	if ch == nil && len(passes) == 0 {
		c.Status = NotApplicable
		c.Summary = fmt.Sprintf("no change and no reconcile of the %s recorded (%s)", s.Kind, d.ringNote())
		return c
	}
	if ch != nil {
		c.Evidence = append(c.Evidence, "last change: "+ch.what())
		if ch.seen != nil {
			c.Evidence = append(c.Evidence, "seen by the controller: "+line(ch.seen))
			for _, h := range d.after(ch.seen) {
				c.Evidence = append(c.Evidence, "  then "+line(h))
			}
		} else {
			c.Evidence = append(c.Evidence, fmt.Sprintf("controller %s's cache delivered no event for that version", ctrl.Name))
		}
	}
	var first *pass
	if ch != nil {
		for _, p := range passes {
			if p.start.Seq > ch.at() {
				first = p
				break
			}
		}
	}
	if ch != nil && first == nil {
		// Not reconciled since the change: work in progress, or the chain broke on the way.
		waiting := false
		for _, e := range d.find(ctrl.Name, chain.EnqueueHop, s.Kind, s.Namespace, s.Name) {
			if e.Seq > ch.at() {
				waiting = true
				c.Evidence = append(c.Evidence, "queued since: "+line(e))
				break
			}
		}
		// A change of a moment ago may still be on its way (cache, handler, queue): not a failure yet.
		if age := d.in.Now.Sub(ch.write.Time); age >= 0 && age < recentChange {
			if waiting {
				c.Summary = fmt.Sprintf("the %s is queued for a reconcile after %s (%s ago)", s.Kind, from, ms(age))
			} else {
				c.Summary = fmt.Sprintf("%s was %s ago: not reconciled yet, on its way (run diagnose again if it stays so)", from, ms(age))
			}
			return c
		}
		c.Status, c.Cause = Fail, CauseNotReconciled
		c.Summary = fmt.Sprintf("controller %s has not reconciled the %s since %s", ctrl.Name, s.Kind, from)
		switch {
		case ch.seen == nil:
			c.Fix = "its cache never delivered that change: see checks a–c (watch namespaces, label selector, RBAC); if they pass, the controller's watch is broken: restart rayctl"
		case waiting:
			c.Fix = "the key waits in the work queue: see check i (queue depth, busy workers)"
		default:
			c.Fix = "the change was not queued for it: see checks d (owner) and e (predicate)"
		}
		if len(passes) > 0 {
			c.Evidence = append(c.Evidence, "latest reconcile before it: "+passText(passes[len(passes)-1]))
		}
		return c
	}
	if first != nil {
		c.Evidence = append(c.Evidence, fmt.Sprintf("reconciled after it: #%d started %s later", first.start.Reconcile, ms(between(ch.write, first.start))))
	}
	last := passes[len(passes)-1]
	c.Evidence = append(c.Evidence, "latest reconcile: "+passText(last))
	if last.end == nil {
		c.Summary = fmt.Sprintf("reconcile #%d of the %s is in progress", last.start.Reconcile, s.Kind)
		return c
	}
	// Failures in a row, newest last.
	failures := 0
	for i := len(passes) - 1; i >= 0 && passes[i].end != nil && passes[i].end.Outcome == chain.Failed; i-- {
		failures++
	}
	if failures > 0 {
		c.Status, c.Cause = Fail, CauseReconcileError
		c.Summary = fmt.Sprintf("the %s's reconciles fail: %s", s.Kind, last.end.Error)
		retry := "retried with back-off"
		if last.requeue != nil && last.requeue.Outcome == chain.EnqueueRateLimited {
			retry += " " + ms(last.requeue.Duration)
		}
		retry += fmt.Sprintf(" (%d failed %s in a row", failures, plural(failures, "pass", "passes"))
		if note := render.IgnoredRequeue(last.end); note != "" {
			retry += "; " + note
		}
		retry += ")"
		c.Fix = retry + "; " + errorAdvice(last.end.Error)
		return c
	}
	errs := 0
	for _, p := range passes {
		if p.end != nil && p.end.Outcome == chain.Failed {
			errs++
		}
	}
	switch {
	case first != nil:
		c.Summary = fmt.Sprintf("reconciled after %s; the latest pass #%d ended %s", from, last.start.Reconcile, endText(last.end))
	default:
		c.Summary = fmt.Sprintf("the latest pass #%d ended %s", last.start.Reconcile, endText(last.end))
	}
	if errs > 0 {
		c.Evidence = append(c.Evidence, fmt.Sprintf("%d earlier %s failed; the controller recovered", errs, plural(errs, "pass", "passes")))
	}
	return c
}

// passText describes one reconcile pass.
func passText(p *pass) string {
	if p.end == nil {
		return fmt.Sprintf("#%d started (seq %d), not ended", p.start.Reconcile, p.start.Seq)
	}
	s := fmt.Sprintf("#%d ended %s in %s", p.start.Reconcile, endText(p.end), ms(p.end.Duration))
	if p.end.Outcome == chain.Failed {
		s += ": " + p.end.Error
		if note := render.IgnoredRequeue(p.end); note != "" {
			s += " (" + note + ")"
		}
	}
	if p.requeue != nil {
		switch p.requeue.Outcome {
		case chain.EnqueueRateLimited:
			s += fmt.Sprintf("; requeued with back-off %s", ms(p.requeue.Duration))
		case chain.EnqueueRequeueAfter:
			s += fmt.Sprintf("; requeued after %s", ms(p.requeue.Duration))
		}
	}
	return s
}

// endText is how a pass ended: "done", "with RequeueAfter 2s", "with an error".
func endText(e *chain.Event) string {
	switch e.Outcome {
	case chain.RequeueAfter:
		return "with RequeueAfter " + e.Result.RequeueAfter.String()
	case chain.Requeue:
		return "with Requeue"
	case chain.Failed:
		return "with an error"
	}
	return string(e.Outcome)
}

// errorAdvice says what to do about a reconcile error.
func errorAdvice(err string) string {
	switch {
	case strings.Contains(err, "is invalid") || strings.Contains(err, "Invalid value"):
		return "the API server rejects what the controller builds from the spec: fix the spec (e.g. the pod template)"
	case strings.Contains(err, "forbidden"):
		return "the controller lacks a permission: restore its RBAC (ClusterRole rayctl:controllers)"
	case strings.Contains(err, "head Services found"):
		return "delete the extra head Service"
	case strings.Contains(err, "head Pods found"):
		return "delete the extra head Pods"
	case strings.Contains(err, "exceeded quota"):
		return "raise the namespace's ResourceQuota or lower the requests"
	}
	return "fix what the error names"
}

// plural is one if n is 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
