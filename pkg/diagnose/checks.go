package diagnose

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/rayparams"
)

// the is "the Pod", "the RayCluster", for sentences.
func the(kind string) string { return "the " + kind }

// missingController is the failure of a check that needs a controller that does not run.
func (d *diag) missingController(s *subj, kind string) Check {
	if d.in.ChainError != "" {
		return Check{Subject: s.Subject, Status: NotApplicable, Summary: "the controllers' set-up is unknown", Evidence: []string{d.ringNote()}}
	}
	name := lower(kind)
	return Check{
		Subject: s.Subject, Status: Fail, Cause: CauseControllerMissing,
		Summary:  fmt.Sprintf("no %s controller runs in this rayctl, so nothing acts on %s", kind, the(s.Kind)),
		Fix:      fmt.Sprintf("start rayctl up with --controllers including %s (an external operator such as KubeRay's is not seen by rayctl diagnose)", name),
		Evidence: []string{"controllers registered with the chain recorder: " + d.controllerNames()},
	}
}

func (d *diag) controllerNames() string {
	var names []string
	for _, c := range d.in.Controllers {
		names = append(names, c.Name)
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// (a) The object's namespace is one the controllers' caches hold.
func (d *diag) checkNamespaces() []Check {
	var out []Check
	for i := range d.subs {
		s := &d.subs[i]
		if op := d.external(s); op != nil {
			out = append(out, d.externalNamespaces(s, op))
			continue
		}
		c := Check{Subject: s.Subject, Status: Pass}
		var watched []string
		for _, k := range d.watcherKinds(s) {
			ctrl := d.controller(k)
			if ctrl == nil {
				c = d.missingController(s, k)
				break
			}
			if len(ctrl.WatchNamespaces) == 0 {
				c.Evidence = append(c.Evidence, fmt.Sprintf("controller %s (%s) watches all namespaces", ctrl.Name, ctrl.Manager))
				continue
			}
			c.Evidence = append(c.Evidence, fmt.Sprintf("controller %s (%s) watches namespaces %s (--watch-namespace)", ctrl.Name, ctrl.Manager, strings.Join(ctrl.WatchNamespaces, ",")))
			watched = ctrl.WatchNamespaces
			if !slices.Contains(ctrl.WatchNamespaces, s.Namespace) {
				c.Status, c.Cause = Fail, CauseNamespaceNotWatched
				c.Summary = fmt.Sprintf("%s's namespace %s is outside --watch-namespace %s", the(s.Kind), s.Namespace, strings.Join(ctrl.WatchNamespaces, ","))
				c.Fix = fmt.Sprintf("add it to --watch-namespace (rayctl up --watch-namespace %s,%s), or create the %s in a watched namespace",
					strings.Join(ctrl.WatchNamespaces, ","), s.Namespace, s.Kind)
				break
			}
		}
		if c.Status == Pass {
			if watched != nil {
				c.Summary = fmt.Sprintf("namespace %s is watched", s.Namespace)
			} else {
				c.Summary = fmt.Sprintf("namespace %s is watched (all namespaces are)", s.Namespace)
			}
		}
		out = append(out, c)
	}
	return out
}

// (b) The object's labels pass the label selector of the controllers' cache for its kind.
func (d *diag) checkLabels() []Check {
	var out []Check
	for i := range d.subs {
		s := &d.subs[i]
		if s.obj == nil {
			out = append(out, Check{Subject: s.Subject, Status: NotApplicable, Summary: fmt.Sprintf("%s does not exist", the(s.Kind))})
			continue
		}
		if op := d.external(s); op != nil {
			out = append(out, d.externalLabels(s, op))
			continue
		}
		c := Check{Subject: s.Subject, Status: Pass}
		var selectors []string
		for _, k := range d.watcherKinds(s) {
			ctrl := d.controller(k)
			if ctrl == nil {
				c = d.missingController(s, k)
				break
			}
			sel := ctrl.LabelSelectors[s.Kind]
			if sel == "" {
				continue
			}
			selectors = append(selectors, sel)
			c.Evidence = append(c.Evidence, fmt.Sprintf("controller %s's cache holds only %ss with %s", ctrl.Name, lower(s.Kind), sel))
			if failed := d.selectorFails(s, sel); failed != "" {
				c.Status, c.Cause = Fail, CauseLabelSelector
				c.Summary = fmt.Sprintf("%s %s: KubeRay's cache only holds %ss with %s", s.Kind, failed, lower(s.Kind), sel)
				c.Fix = fmt.Sprintf("label it to match (the RayCluster controller's own Pods carry %s=head or worker); until then no Ray controller sees it", rayparams.LabelNodeType)
				break
			}
		}
		if c.Status == Fail && c.Cause != CauseLabelSelector {
			out = append(out, c)
			continue
		}
		c.Evidence = append(c.Evidence, "labels: "+labelString(s.obj.GetLabels()))
		if c.Status == Pass {
			if len(selectors) == 0 {
				c.Summary = fmt.Sprintf("the cache holds every %s (no label selector)", s.Kind)
			} else {
				c.Summary = "its labels pass " + strings.Join(selectors, " and ")
			}
		}
		if k := d.watcherKinds(s); len(k) > 0 {
			if ctrl := d.controller(k[0]); ctrl != nil && d.in.ChainError == "" {
				n := len(d.find(ctrl.Name, chain.InformerEvent, s.Kind, s.Namespace, s.Name))
				c.Evidence = append(c.Evidence, fmt.Sprintf("controller %s's cache delivered %d events for it", ctrl.Name, n))
			}
		}
		out = append(out, c)
	}
	return out
}

// selectorFails says how s's labels fail sel ("" if they pass): "lacks label K", or "label K=V is not
// in (…)".
func (d *diag) selectorFails(s *subj, sel string) string {
	parsed, err := labels.Parse(sel)
	if err != nil {
		return fmt.Sprintf("cannot be matched: the selector %q does not parse: %v", sel, err)
	}
	set := labels.Set(s.obj.GetLabels())
	if parsed.Matches(set) {
		return ""
	}
	reqs, _ := parsed.Requirements()
	for _, r := range reqs {
		if r.Matches(set) {
			continue
		}
		v, has := set[r.Key()]
		switch {
		case !has && r.Operator() != selection.NotIn && r.Operator() != selection.DoesNotExist && r.Operator() != selection.NotEquals:
			return "lacks label " + r.Key()
		default:
			return fmt.Sprintf("label %s=%s does not satisfy %s", r.Key(), v, r.String())
		}
	}
	return "labels do not match " + sel
}

func labelString(l map[string]string) string {
	if len(l) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + l[k]
	}
	return strings.Join(parts, ", ")
}

// (c) The controller identity may get, list and watch the object (SubjectAccessReviews).
func (d *diag) checkAccess() []Check {
	var out []Check
	for i := range d.subs {
		s := &d.subs[i]
		if op := d.external(s); op != nil {
			out = append(out, d.externalAccess(s, op))
			continue
		}
		c := Check{Subject: s.Subject, Status: Pass}
		_, resource := resourceOf(s.Kind)
		done := map[string]bool{}
		for _, k := range d.watcherKinds(s) {
			ctrl := d.controller(k)
			if ctrl == nil {
				c = d.missingController(s, k)
				break
			}
			if ctrl.Identity == "" || done[ctrl.Identity] {
				continue
			}
			done[ctrl.Identity] = true
			var denied, unknown, reasons []string
			for _, want := range accessFor(ctrl, s) {
				a := d.access(want)
				what := fmt.Sprintf("%s %s %s", want.Verb, resource, scopeOf(want))
				switch {
				case a == nil:
					unknown = append(unknown, want.Verb)
					c.Evidence = append(c.Evidence, what+": not reviewed")
				case a.Error != "" && !a.Allowed:
					unknown = append(unknown, want.Verb)
					c.Evidence = append(c.Evidence, what+": review failed: "+a.Error)
				case a.Allowed:
					c.Evidence = append(c.Evidence, fmt.Sprintf("%s: allowed for %s", what, a.User))
				default:
					denied = append(denied, want.Verb)
					c.Evidence = append(c.Evidence, fmt.Sprintf("%s: DENIED for %s", what, a.User))
				}
				if a != nil && a.Reason != "" && !slices.Contains(reasons, a.Reason) {
					reasons = append(reasons, a.Reason)
				}
			}
			for _, r := range reasons {
				c.Evidence = append(c.Evidence, "authorizer: "+r)
			}
			roles := d.rolesOf(ctrl.Identity)
			for _, b := range roles {
				where := ""
				if b.Namespace != "" {
					where = " in " + b.Namespace
				}
				c.Evidence = append(c.Evidence, fmt.Sprintf("%s is bound by %s %s%s to %s %s", ctrl.Identity, b.Kind, b.Name, where, b.RoleKind, b.RoleName))
			}
			if len(denied) > 0 {
				c.Status, c.Cause = Fail, CauseRBACDenied
				c.Summary = fmt.Sprintf("%s may not %s %s", ctrl.Identity, joinOr(denied), resource)
				if len(roles) > 0 {
					c.Fix = fmt.Sprintf("restore the rule in %s %s (verbs get, list, watch on %s)", roles[0].RoleKind, roles[0].RoleName, resource)
				} else {
					c.Fix = fmt.Sprintf("bind a role that grants get, list and watch on %s to user %s (rayctl's own: ClusterRole rayctl:controllers)", resource, ctrl.Identity)
				}
				break
			}
			if len(unknown) > 0 && c.Status == Pass {
				c.Status = NotApplicable
				c.Summary = fmt.Sprintf("could not review %s's access (%s)", ctrl.Identity, strings.Join(unknown, ", "))
			}
		}
		if c.Status == Pass {
			var ids []string
			for id := range done {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			c.Summary = fmt.Sprintf("%s may get, list and watch %s", strings.Join(ids, ", "), resource)
		}
		out = append(out, c)
	}
	return out
}

// scopeOf is where a review asks: "ns/name", "in ns" or "in all namespaces".
func scopeOf(a Access) string {
	switch {
	case a.Name != "":
		return a.Namespace + "/" + a.Name
	case a.Namespace != "":
		return "in " + a.Namespace
	}
	return "in all namespaces"
}

// joinOr is "list", "list or watch", "get, list or watch".
func joinOr(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// (d) A Pod has a controller ownerReference to an existing RayCluster with its UID (and a RayJob's
// RayCluster one to the RayJob).
func (d *diag) checkOwner() []Check {
	var out []Check
	if s := d.subject(KindPod); s != nil {
		out = append(out, d.podOwner(s))
	}
	if s := d.subject(KindRayCluster); s != nil && d.in.Job != nil {
		out = append(out, d.clusterOwner(s))
	}
	return out
}

func (d *diag) podOwner(s *subj) Check {
	pod := d.in.Pod
	c := Check{Subject: s.Subject}
	ctrl := d.controller(KindRayCluster)
	var maps, misses []*chain.Event
	if ctrl != nil {
		maps = d.find(ctrl.Name, chain.MapHop, KindPod, s.Namespace, s.Name)
		misses = d.find(ctrl.Name, chain.MapMiss, KindPod, s.Namespace, s.Name)
	}
	for _, r := range pod.OwnerReferences {
		ctl := r.Controller != nil && *r.Controller
		c.Evidence = append(c.Evidence, fmt.Sprintf("ownerReference %s %s (uid %s, controller: %v)", r.Kind, r.Name, r.UID, ctl))
	}
	if len(pod.OwnerReferences) == 0 {
		c.Evidence = append(c.Evidence, "no ownerReferences")
	}
	if n := len(misses); n > 0 {
		c.Evidence = append(c.Evidence, fmt.Sprintf("%d of its events mapped to no RayCluster; the last: %s", n, line(misses[n-1])))
	}
	if n := len(maps); n > 0 {
		c.Evidence = append(c.Evidence, fmt.Sprintf("%d of its events mapped to a RayCluster; the last: %s", n, line(maps[n-1])))
	}
	ref := metav1.GetControllerOfNoCopy(pod)
	switch {
	case ref == nil:
		c.Status, c.Cause = Fail, CauseNoOwner
		c.Summary = "the Pod has no controller ownerReference, so the RayCluster controller maps its events to no RayCluster"
		if cl := pod.Labels[rayparams.LabelCluster]; cl != "" {
			c.Summary = fmt.Sprintf("the Pod is labelled %s=%s but has no controller ownerReference, so the RayCluster controller maps its events to no RayCluster", rayparams.LabelCluster, cl)
		}
		c.Fix = "let a RayCluster create its Pods (it sets ownerReferences with controller: true), or add such an ownerReference"
	case ref.Kind != KindRayCluster || !strings.HasPrefix(ref.APIVersion, rayv1.GroupVersion.Group+"/"):
		c.Status, c.Cause = Fail, CauseOwnerKind
		c.Summary = fmt.Sprintf("the Pod's controller owner is %s %s, not a RayCluster", ref.Kind, ref.Name)
		c.Fix = "the RayCluster controller only follows Pods a RayCluster controls; this Pod is its owner's business"
	case d.in.Cluster == nil:
		c.Status, c.Cause = Fail, CauseOwnerMissing
		c.Summary = fmt.Sprintf("the Pod's owner RayCluster %s does not exist", ref.Name)
		c.Fix = "the garbage collector deletes the Pod; recreate the RayCluster if it was deleted by mistake"
	case d.in.Cluster.UID != ref.UID:
		c.Status, c.Cause = Fail, CauseOwnerUIDMismatch
		c.Summary = fmt.Sprintf("the Pod's ownerReference names RayCluster %s with UID %s, but that RayCluster has UID %s (it was recreated)", ref.Name, ref.UID, d.in.Cluster.UID)
		c.Fix = "the Pod belongs to the old cluster and the garbage collector deletes it; delete it if it lingers"
	default:
		c.Status = Pass
		c.Summary = fmt.Sprintf("controlled by RayCluster %s (UID %s matches)", ref.Name, ref.UID)
		if len(maps) == 0 && ctrl != nil {
			c.Evidence = append(c.Evidence, "no map event recorded for it ("+d.ringNote()+")")
		}
	}
	return c
}

func (d *diag) clusterOwner(s *subj) Check {
	job := d.in.Job
	c := Check{Subject: s.Subject}
	if len(job.Spec.ClusterSelector) > 0 {
		c.Status = NotApplicable
		c.Summary = fmt.Sprintf("the RayJob selects RayCluster %s (spec.clusterSelector) and does not own it", s.Name)
		return c
	}
	if d.in.Cluster == nil {
		c.Status = NotApplicable
		c.Summary = "the RayCluster does not exist (see g)"
		return c
	}
	if ctrl := d.controller(KindRayJob); ctrl != nil {
		if m := d.find(ctrl.Name, chain.MapHop, KindRayCluster, s.Namespace, s.Name); len(m) > 0 {
			c.Evidence = append(c.Evidence, fmt.Sprintf("%d of its events mapped to the RayJob; the last: %s", len(m), line(m[len(m)-1])))
		}
		if m := d.find(ctrl.Name, chain.MapMiss, KindRayCluster, s.Namespace, s.Name); len(m) > 0 {
			c.Evidence = append(c.Evidence, fmt.Sprintf("%d of its events mapped to no RayJob; the last: %s", len(m), line(m[len(m)-1])))
		}
	}
	ref := metav1.GetControllerOfNoCopy(d.in.Cluster)
	switch {
	case ref == nil || ref.Kind != KindRayJob || ref.Name != job.Name:
		c.Status, c.Cause = Fail, CauseNoOwner
		c.Summary = fmt.Sprintf("RayCluster %s is not controlled by RayJob %s, so its changes do not reach the RayJob controller", s.Name, job.Name)
		c.Fix = "let the RayJob create its cluster, or select an existing one with spec.clusterSelector"
	case ref.UID != job.UID:
		c.Status, c.Cause = Fail, CauseOwnerUIDMismatch
		c.Summary = fmt.Sprintf("RayCluster %s's ownerReference names RayJob %s with UID %s, but the RayJob has UID %s (it was recreated)", s.Name, job.Name, ref.UID, job.UID)
		c.Fix = "delete the old RayCluster; the RayJob controller creates a new one"
	default:
		c.Status = Pass
		c.Summary = fmt.Sprintf("controlled by RayJob %s (UID %s matches)", job.Name, ref.UID)
	}
	return c
}

// (e) The RayCluster's latest updates passed the For() predicate, or were dropped by it.
func (d *diag) checkPredicate() []Check {
	s := d.subject(KindRayCluster)
	if s == nil {
		return nil
	}
	c := Check{Subject: s.Subject}
	ctrl := d.controller(KindRayCluster)
	if ctrl == nil && d.external(s) != nil {
		return []Check{{Subject: s.Subject, Status: NotApplicable, Summary: "the operator's predicates run inside its process: not visible from the API"}}
	}
	if ctrl == nil {
		return []Check{d.missingController(s, KindRayCluster)}
	}
	var preds []string
	for _, w := range ctrl.Watches {
		if w.Kind == KindRayCluster && w.Handler == "object" {
			preds = w.Predicates
		}
	}
	if len(preds) > 0 {
		c.Evidence = append(c.Evidence, fmt.Sprintf("controller %s's For(RayCluster) predicate: %q", ctrl.Name, strings.Join(preds, `", "`)))
	}
	var updates []*chain.Event
	for _, e := range d.find(ctrl.Name, chain.InformerEvent, KindRayCluster, s.Namespace, s.Name) {
		if e.Outcome == chain.Update {
			updates = append(updates, e)
		}
	}
	if len(updates) == 0 {
		c.Status = NotApplicable
		c.Summary = "no update of the RayCluster recorded (" + d.ringNote() + ")"
		return []Check{c}
	}
	type decided struct {
		ev      *chain.Event
		dropped *chain.Event
		writer  *chain.Event
	}
	decide := func(u *chain.Event) decided {
		x := decided{ev: u, writer: d.writer(KindRayCluster, s.Namespace, s.Name, u.Object.ResourceVersion)}
		for _, h := range d.after(u) {
			if h.Hop == chain.PredicateHop && h.Outcome == chain.Dropped {
				x.dropped = h
				break
			}
		}
		return x
	}
	passed, dropped, own := 0, 0, 0
	for _, u := range updates {
		x := decide(u)
		switch {
		case x.dropped == nil:
			passed++
		case d.ownStatusWrite(x.writer, ctrl):
			dropped++
			own++
		default:
			dropped++
		}
	}
	c.Evidence = append(c.Evidence, fmt.Sprintf("%d updates recorded: %d passed, %d dropped (%d of them the controller's own status writes)", len(updates), passed, dropped, own))
	start := max(0, len(updates)-3)
	for _, u := range updates[start:] {
		x := decide(u)
		verdict := "passed"
		if x.dropped != nil {
			verdict = fmt.Sprintf("dropped by %q", x.dropped.Predicate)
		}
		c.Evidence = append(c.Evidence, fmt.Sprintf("#%d update rv %s→%s, %s: %s", u.Seq, u.OldResourceVersion, u.Object.ResourceVersion, writerText(x.writer), verdict))
	}
	last := decide(updates[len(updates)-1])
	what := fmt.Sprintf("the RayCluster's latest update (rv %s, %s)", last.ev.Object.ResourceVersion, writerText(last.writer))
	var later *pass
	for _, p := range d.passes(ctrl.Name, KindRayCluster, s.Namespace, s.Name) {
		if p.start.Seq > last.ev.Seq {
			later = p
			break
		}
	}
	switch {
	case last.dropped == nil:
		c.Status = Pass
		c.Summary = what + " passed the predicate"
	case d.ownStatusWrite(last.writer, ctrl):
		c.Status = Pass
		c.Summary = what + " was dropped by design: the controller's own status write does not come back as a reconcile"
	case later != nil:
		c.Status = Pass
		c.Summary = fmt.Sprintf("%s was dropped by the predicate, but the RayCluster was reconciled since (#%d)", what, later.start.Reconcile)
	default:
		c.Status, c.Cause = Fail, CausePredicateDropped
		kind := "an update that changes no spec, label or annotation"
		if isStatusWrite(last.writer) {
			kind = "a status-only update"
		}
		c.Summary = fmt.Sprintf("%s was dropped by the For() predicate %q: it is %s, and those do not trigger a reconcile, by design",
			what, last.dropped.Predicate, kind)
		c.Fix = fmt.Sprintf("change the spec, a label or an annotation to have it reconciled (e.g. rayctl kubectl annotate raycluster %s -n %s rayctl.io/reconcile=now --overwrite), or wait for the periodic resync",
			s.Name, s.Namespace)
	}
	return []Check{c}
}

// ownStatusWrite reports whether w is a status write by ctrl's identity.
func (d *diag) ownStatusWrite(w *chain.Event, ctrl *chain.ControllerInfo) bool {
	return isStatusWrite(w) && w.Call.User == ctrl.Identity
}

// isStatusWrite reports whether w is an API write of a status subresource.
func isStatusWrite(w *chain.Event) bool {
	return w != nil && w.Call != nil && w.Call.Subresource == "status"
}

func writerText(w *chain.Event) string {
	if w == nil {
		return "writer not recorded"
	}
	user := ""
	if w.Call != nil {
		user = w.Call.User
	}
	return fmt.Sprintf("%s by %s", w.Outcome, user)
}
