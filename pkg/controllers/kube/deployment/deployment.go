// Package deployment is the apps/v1 Deployment controller, as kube-controller-manager runs it: one
// ReplicaSet per pod template (named NAME-HASH, its pods and selector carrying pod-template-hash), rolled
// out with RollingUpdate (maxSurge, maxUnavailable) or Recreate, each ReplicaSet numbered by the
// deployment.kubernetes.io/revision annotation so that `kubectl rollout history|undo` work; paused
// Deployments are only scaled; old ReplicaSets beyond revisionHistoryLimit are deleted; status reports
// replicas, updatedReplicas, readyReplicas, availableReplicas, unavailableReplicas, observedGeneration,
// collisionCount and the Available and Progressing conditions (ProgressDeadlineExceeded included), which
// `kubectl rollout status` reads.
//
// Simplification: while several ReplicaSets hold replicas, a change of spec.replicas goes to the new
// ReplicaSet rather than proportionally to all.
package deployment

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/controllers/chainhooks"
	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
	"github.com/rayctl/rayctl/pkg/controllers/kube/workload"
)

// Name is the controller's name; events are reported as "deployment-controller".
const Name = "deployment"

// Annotations and labels the controller reads and writes, as on a real cluster.
const (
	// RevisionAnnotation numbers a ReplicaSet (and its Deployment) in the rollout history.
	RevisionAnnotation = "deployment.kubernetes.io/revision"
	// RevisionHistoryAnnotation lists the earlier revisions a ReplicaSet held (after an undo).
	RevisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"
	// DesiredReplicasAnnotation is the Deployment's spec.replicas, on its ReplicaSets.
	DesiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	// MaxReplicasAnnotation is spec.replicas plus maxSurge, on its ReplicaSets.
	MaxReplicasAnnotation = "deployment.kubernetes.io/max-replicas"
	// lastAppliedAnnotation is kubectl apply's, never copied to ReplicaSets.
	lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"
)

// Condition reasons, as the real controller writes them.
const (
	reasonNewRSCreated       = "NewReplicaSetCreated"
	reasonRSUpdated          = "ReplicaSetUpdated"
	reasonNewRSAvailable     = "NewReplicaSetAvailable"
	reasonFoundNewRS         = "FoundNewReplicaSet"
	reasonDeadlineExceeded   = "ProgressDeadlineExceeded"
	reasonMinimumAvailable   = "MinimumReplicasAvailable"
	reasonMinimumUnavailable = "MinimumReplicasUnavailable"
	reasonPaused             = "DeploymentPaused"
)

var (
	kind   = appsv1.SchemeGroupVersion.WithKind("Deployment")
	rsKind = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")
)

// reconciler syncs one Deployment with its ReplicaSets.
type reconciler struct {
	// client reads through the manager's cache and writes to the API server.
	client client.Client
	// recorder records the Deployment's events.
	recorder record.EventRecorder

	hooks *chainhooks.Hooks
	exp   *workload.Expectations
}

// Setup is the ctrlset.SetupFunc of this controller: For Deployments, Owns their ReplicaSets.
func Setup(mgr ctrl.Manager, env ctrlset.Env) error {
	r := &reconciler{client: mgr.GetClient(), exp: workload.NewExpectations()}
	r.hooks, r.recorder = env.Hooks, env.Recorder
	return r.hooks.NewControllerManagedBy(mgr).
		For(&appsv1.Deployment{}).
		Owns(&appsv1.ReplicaSet{}).
		MaxConcurrentReconciles(env.ReconcileConcurrency).
		Complete(r)
}

// pass is one reconcile of one Deployment.
type pass struct {
	r     *reconciler
	d     *appsv1.Deployment
	newRS *appsv1.ReplicaSet
	old   []*appsv1.ReplicaSet // oldest first
	now   time.Time
	// status is the status being made, from the one read.
	status *appsv1.DeploymentStatus
}

// Reconcile brings the Deployment req names one step closer to its spec.
func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	d := &appsv1.Deployment{}
	if err := r.client.Get(ctx, req.NamespacedName, d); err != nil {
		if apierrors.IsNotFound(err) {
			r.exp.Forget(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if d.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	sel, ok := workload.Selector(d.Spec.Selector)
	if !ok {
		return reconcile.Result{}, nil
	}
	list := &appsv1.ReplicaSetList{}
	if err := r.client.List(ctx, list, client.InNamespace(d.Namespace)); err != nil {
		return reconcile.Result{}, err
	}
	all := make([]*appsv1.ReplicaSet, len(list.Items))
	for i := range list.Items {
		all[i] = &list.Items[i]
	}
	owned, err := workload.Claim(ctx, r.client, d, kind, sel, all)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !r.exp.Satisfied(req.NamespacedName, workload.ByName(owned)) {
		return reconcile.Result{}, nil
	}
	p := &pass{r: r, d: d, now: time.Now(), status: d.Status.DeepCopy()}
	for _, rs := range owned {
		if p.newRS == nil && equalIgnoringHash(&rs.Spec.Template, &d.Spec.Template) {
			p.newRS = rs
		} else {
			p.old = append(p.old, rs)
		}
	}
	sort.Slice(p.old, func(i, j int) bool { return p.old[i].CreationTimestamp.Before(&p.old[j].CreationTimestamp) })
	return p.run(ctx)
}

func (p *pass) run(ctx context.Context) (reconcile.Result, error) {
	var err error
	if !p.d.Spec.Paused {
		if err = p.ensureNewRS(ctx); err == nil {
			if p.d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
				err = p.recreate(ctx)
			} else {
				err = p.rollingUpdate(ctx)
			}
		}
		if err == nil {
			err = p.cleanup(ctx)
		}
	} else if p.newRS != nil && len(activeOf(p.old)) == 0 {
		err = p.scale(ctx, p.newRS, replicas(p.d))
	}
	wait, serr := p.writeStatus(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: wait}, serr
}

// equalIgnoringHash compares a ReplicaSet's template with the Deployment's, leaving pod-template-hash out.
func equalIgnoringHash(a, b *corev1.PodTemplateSpec) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	delete(a.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	delete(b.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	if len(a.Labels) == 0 {
		a.Labels = nil
	}
	if len(b.Labels) == 0 {
		b.Labels = nil
	}
	return apiequality.Semantic.DeepEqual(a, b)
}

func replicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

func rsReplicas(rs *appsv1.ReplicaSet) int32 {
	if rs.Spec.Replicas == nil {
		return 0
	}
	return *rs.Spec.Replicas
}

func revision(rs *appsv1.ReplicaSet) int64 {
	v, _ := strconv.ParseInt(rs.Annotations[RevisionAnnotation], 10, 64)
	return v
}

func (p *pass) maxOldRevision() int64 {
	var m int64
	for _, rs := range p.old {
		m = max(m, revision(rs))
	}
	return m
}

// surgeAndUnavailable resolves maxSurge (rounded up) and maxUnavailable (rounded down) against
// spec.replicas; both zero would stall, so maxUnavailable is then 1.
func surgeAndUnavailable(d *appsv1.Deployment) (int32, int32) {
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || d.Spec.Strategy.RollingUpdate == nil {
		return 0, 0
	}
	n := int(replicas(d))
	zero := intstr.FromInt32(0)
	ru := d.Spec.Strategy.RollingUpdate
	surgeV, unavailV := ru.MaxSurge, ru.MaxUnavailable
	if surgeV == nil {
		surgeV = &zero
	}
	if unavailV == nil {
		unavailV = &zero
	}
	surge, err1 := intstr.GetScaledValueFromIntOrPercent(surgeV, n, true)
	unavail, err2 := intstr.GetScaledValueFromIntOrPercent(unavailV, n, false)
	if err1 != nil || err2 != nil {
		return 0, 1
	}
	if surge == 0 && unavail == 0 {
		unavail = 1
	}
	return int32(surge), int32(min(unavail, n))
}

// annotationsFor are the annotations a ReplicaSet of d carries: d's own (but kubectl apply's and the
// revision), the revision, desired-replicas and max-replicas.
func (p *pass) annotationsFor(rs *appsv1.ReplicaSet, rev int64) map[string]string {
	out := maps.Clone(rs.Annotations)
	if out == nil {
		out = map[string]string{}
	}
	for k, v := range p.d.Annotations {
		if k != lastAppliedAnnotation && k != RevisionAnnotation && k != RevisionHistoryAnnotation {
			out[k] = v
		}
	}
	if old := out[RevisionAnnotation]; old != "" && old != strconv.FormatInt(rev, 10) {
		if h := out[RevisionHistoryAnnotation]; h != "" {
			out[RevisionHistoryAnnotation] = h + "," + old
		} else {
			out[RevisionHistoryAnnotation] = old
		}
	}
	out[RevisionAnnotation] = strconv.FormatInt(rev, 10)
	surge, _ := surgeAndUnavailable(p.d)
	out[DesiredReplicasAnnotation] = strconv.Itoa(int(replicas(p.d)))
	out[MaxReplicasAnnotation] = strconv.Itoa(int(replicas(p.d) + surge))
	return out
}

// ensureNewRS makes the ReplicaSet of the current template if missing, numbers it above every old one,
// and copies the revision to the Deployment.
func (p *pass) ensureNewRS(ctx context.Context) error {
	rev := p.maxOldRevision() + 1
	if p.newRS == nil {
		if err := p.createNewRS(ctx, rev); err != nil {
			return err
		}
	} else if revision(p.newRS) < rev || !maps.Equal(p.annotationsFor(p.newRS, max(rev, revision(p.newRS))), p.newRS.Annotations) {
		rs := p.newRS.DeepCopy()
		rs.Annotations = p.annotationsFor(rs, max(rev, revision(p.newRS)))
		if err := p.r.client.Update(ctx, rs); err != nil {
			return err
		}
		p.newRS = rs
	}
	want := p.newRS.Annotations[RevisionAnnotation]
	if p.d.Annotations[RevisionAnnotation] != want {
		d := p.d.DeepCopy()
		if d.Annotations == nil {
			d.Annotations = map[string]string{}
		}
		d.Annotations[RevisionAnnotation] = want
		if err := p.r.client.Update(ctx, d); err != nil {
			return err
		}
		p.d = d
	}
	return nil
}

func (p *pass) createNewRS(ctx context.Context, rev int64) error {
	d := p.d
	hash := workload.TemplateHash(&d.Spec.Template, d.Status.CollisionCount)
	t := d.Spec.Template.DeepCopy()
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	t.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	sel := d.Spec.Selector.DeepCopy()
	if sel.MatchLabels == nil {
		sel.MatchLabels = map[string]string{}
	}
	sel.MatchLabels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	start := int32(0)
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		start = p.newReplicasForRollingUpdate(0)
	} else if len(activeOf(p.old)) == 0 {
		start = replicas(d)
	}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:            d.Name + "-" + hash,
			Namespace:       d.Namespace,
			Labels:          maps.Clone(t.Labels),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, kind)},
		},
		Spec: appsv1.ReplicaSetSpec{Replicas: &start, MinReadySeconds: d.Spec.MinReadySeconds, Selector: sel, Template: *t},
	}
	rs.Annotations = p.annotationsFor(rs, rev)
	err := p.r.client.Create(ctx, rs)
	if apierrors.IsAlreadyExists(err) {
		// A ReplicaSet of that name with another template: count the collision so the next hash differs.
		existing := &appsv1.ReplicaSet{}
		if gerr := p.r.client.Get(ctx, client.ObjectKeyFromObject(rs), existing); gerr == nil && metav1.IsControlledBy(existing, d) && equalIgnoringHash(&existing.Spec.Template, &d.Spec.Template) {
			p.newRS = existing
			return nil
		}
		updated := d.DeepCopy()
		n := int32(1)
		if d.Status.CollisionCount != nil {
			n = *d.Status.CollisionCount + 1
		}
		updated.Status.CollisionCount = &n
		if uerr := p.r.client.Status().Update(ctx, updated); uerr != nil {
			return uerr
		}
		return fmt.Errorf("replicaset %s exists with another template; collisionCount now %d", rs.Name, n)
	}
	if err != nil {
		p.r.recorder.Eventf(d, corev1.EventTypeWarning, "FailedCreate", "Failed to create new replica set %q: %v", rs.Name, err)
		return err
	}
	p.r.exp.Created(client.ObjectKeyFromObject(d), rs.Name)
	p.r.recorder.Eventf(d, corev1.EventTypeNormal, "ScalingReplicaSet", "Scaled up replica set %s from 0 to %d", rs.Name, start)
	p.newRS = rs
	p.setProgressing(corev1.ConditionTrue, reasonNewRSCreated, fmt.Sprintf("Created new replica set %q", rs.Name))
	return nil
}

// newReplicasForRollingUpdate is what the new ReplicaSet may grow to now: up to spec.replicas while
// all ReplicaSets together stay within spec.replicas + maxSurge pods. An old ReplicaSet counts its
// pods until its controller reports them gone (status.replicas), not only its spec: right after a
// scale-down the pods still live, and growing the new ReplicaSet into that room would put more than
// maxSurge extra pods on the node for a moment (the upstream controller counts specs alone and allows
// that overshoot).
func (p *pass) newReplicasForRollingUpdate(current int32) int32 {
	want := replicas(p.d)
	if current >= want {
		return want
	}
	surge, _ := surgeAndUnavailable(p.d)
	total := current
	for _, rs := range p.old {
		total += max(rsReplicas(rs), rs.Status.Replicas)
	}
	room := want + surge - total
	if room <= 0 {
		return current
	}
	return min(current+room, want)
}

func activeOf(sets []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, rs := range sets {
		if rsReplicas(rs) > 0 || rs.Status.Replicas > 0 {
			out = append(out, rs)
		}
	}
	return out
}

// scale sets a ReplicaSet's spec.replicas and annotations.
func (p *pass) scale(ctx context.Context, rs *appsv1.ReplicaSet, n int32) error {
	ann := maps.Clone(rs.Annotations)
	if ann == nil {
		ann = map[string]string{}
	}
	surge, _ := surgeAndUnavailable(p.d)
	ann[DesiredReplicasAnnotation] = strconv.Itoa(int(replicas(p.d)))
	ann[MaxReplicasAnnotation] = strconv.Itoa(int(replicas(p.d) + surge))
	if rsReplicas(rs) == n && maps.Equal(ann, rs.Annotations) {
		return nil
	}
	from := rsReplicas(rs)
	updated := rs.DeepCopy()
	updated.Spec.Replicas = &n
	updated.Annotations = ann
	if err := p.r.client.Update(ctx, updated); err != nil {
		return err
	}
	*rs = *updated
	if from != n {
		dir := "up"
		if n < from {
			dir = "down"
		}
		p.r.recorder.Eventf(p.d, corev1.EventTypeNormal, "ScalingReplicaSet", "Scaled %s replica set %s from %d to %d", dir, rs.Name, from, n)
	}
	return nil
}

// rollingUpdate grows the new ReplicaSet within maxSurge and shrinks old ones while at least
// spec.replicas - maxUnavailable pods stay available.
func (p *pass) rollingUpdate(ctx context.Context) error {
	if n := p.newReplicasForRollingUpdate(rsReplicas(p.newRS)); n != rsReplicas(p.newRS) {
		if err := p.scale(ctx, p.newRS, n); err != nil {
			return err
		}
	}
	_, unavail := surgeAndUnavailable(p.d)
	minAvailable := replicas(p.d) - unavail
	total := rsReplicas(p.newRS)
	available := p.newRS.Status.AvailableReplicas
	for _, rs := range p.old {
		total += rsReplicas(rs)
		available += rs.Status.AvailableReplicas
	}
	newUnavailable := rsReplicas(p.newRS) - p.newRS.Status.AvailableReplicas
	budget := total - minAvailable - newUnavailable
	if budget <= 0 {
		return nil
	}
	// First the old pods that are not available anyway, then available ones down to minAvailable.
	for _, rs := range p.old {
		if budget <= 0 {
			break
		}
		unhealthy := rsReplicas(rs) - rs.Status.AvailableReplicas
		if unhealthy <= 0 {
			continue
		}
		down := min(unhealthy, budget)
		if err := p.scale(ctx, rs, rsReplicas(rs)-down); err != nil {
			return err
		}
		budget -= down
	}
	canDrop := min(available-minAvailable, budget)
	for _, rs := range p.old {
		if canDrop <= 0 {
			break
		}
		down := min(rsReplicas(rs), canDrop)
		if down == 0 {
			continue
		}
		if err := p.scale(ctx, rs, rsReplicas(rs)-down); err != nil {
			return err
		}
		canDrop -= down
	}
	return nil
}

// recreate scales every old ReplicaSet to zero, waits for their pods to go, then scales the new one up.
func (p *pass) recreate(ctx context.Context) error {
	for _, rs := range p.old {
		if err := p.scale(ctx, rs, 0); err != nil {
			return err
		}
	}
	for _, rs := range p.old {
		if rs.Status.Replicas > 0 || rs.Status.ObservedGeneration < rs.Generation {
			return nil
		}
	}
	return p.scale(ctx, p.newRS, replicas(p.d))
}

// cleanup deletes the oldest empty old ReplicaSets beyond revisionHistoryLimit.
func (p *pass) cleanup(ctx context.Context) error {
	limit := int32(10)
	if p.d.Spec.RevisionHistoryLimit != nil {
		limit = *p.d.Spec.RevisionHistoryLimit
	}
	var empty []*appsv1.ReplicaSet
	for _, rs := range p.old {
		if rsReplicas(rs) == 0 && rs.Status.Replicas == 0 && rs.DeletionTimestamp == nil {
			empty = append(empty, rs)
		}
	}
	sort.Slice(empty, func(i, j int) bool { return revision(empty[i]) < revision(empty[j]) })
	var errs []error
	for i := 0; i < len(empty)-int(limit); i++ {
		rs := empty[i]
		if err := p.r.client.Delete(ctx, rs, client.Preconditions{UID: &rs.UID}); client.IgnoreNotFound(err) != nil {
			errs = append(errs, err)
			continue
		}
		p.r.exp.Deleted(client.ObjectKeyFromObject(p.d), rs.UID)
	}
	return errors.Join(errs...)
}

func findCondition(st *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

// setCondition sets a condition on st, keeping its transition time when the status stays and its update
// time when nothing changes.
func setCondition(st *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType, status corev1.ConditionStatus, reason, message string, now time.Time) {
	c := findCondition(st, t)
	if c == nil {
		st.Conditions = append(st.Conditions, appsv1.DeploymentCondition{Type: t, Status: status, Reason: reason, Message: message,
			LastUpdateTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now)})
		return
	}
	if c.Status == status && c.Reason == reason && c.Message == message {
		return
	}
	if c.Status != status {
		c.LastTransitionTime = metav1.NewTime(now)
	}
	c.Status, c.Reason, c.Message, c.LastUpdateTime = status, reason, message, metav1.NewTime(now)
}

// setProgressing records a Progressing condition on the Deployment's in-memory status, written by
// writeStatus.
func (p *pass) setProgressing(status corev1.ConditionStatus, reason, message string) {
	setCondition(p.status, appsv1.DeploymentProgressing, status, reason, message, p.now)
}

// writeStatus counts the ReplicaSets' pods, sets the conditions and writes the status if it changed. It
// returns when to look again: when the progress deadline would pass.
func (p *pass) writeStatus(ctx context.Context) (time.Duration, error) {
	st, d := p.status, p.d
	before := *st
	st.ObservedGeneration = d.Generation
	st.Replicas, st.UpdatedReplicas, st.ReadyReplicas, st.AvailableReplicas = 0, 0, 0, 0
	all := p.old
	if p.newRS != nil {
		all = append([]*appsv1.ReplicaSet{p.newRS}, p.old...)
		st.UpdatedReplicas = p.newRS.Status.Replicas
	}
	for _, rs := range all {
		st.Replicas += rs.Status.Replicas
		st.ReadyReplicas += rs.Status.ReadyReplicas
		st.AvailableReplicas += rs.Status.AvailableReplicas
	}
	st.UnavailableReplicas = max(replicas(d)-st.AvailableReplicas, 0)
	_, unavail := surgeAndUnavailable(d)
	if st.AvailableReplicas >= replicas(d)-unavail {
		setCondition(st, appsv1.DeploymentAvailable, corev1.ConditionTrue, reasonMinimumAvailable, "Deployment has minimum availability.", p.now)
	} else {
		setCondition(st, appsv1.DeploymentAvailable, corev1.ConditionFalse, reasonMinimumUnavailable, "Deployment does not have minimum availability.", p.now)
	}
	var wait time.Duration
	switch {
	case d.Spec.Paused:
		setCondition(st, appsv1.DeploymentProgressing, corev1.ConditionUnknown, reasonPaused, "Deployment is paused", p.now)
	case p.newRS == nil:
	case st.UpdatedReplicas == replicas(d) && st.Replicas == replicas(d) && st.AvailableReplicas == replicas(d) && len(activeOf(p.old)) == 0:
		setCondition(st, appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonNewRSAvailable, fmt.Sprintf("ReplicaSet %q has successfully progressed.", p.newRS.Name), p.now)
	case findCondition(st, appsv1.DeploymentProgressing) == nil:
		setCondition(st, appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonFoundNewRS, fmt.Sprintf("Found new replica set %q", p.newRS.Name), p.now)
	case before.Replicas != st.Replicas || before.UpdatedReplicas != st.UpdatedReplicas || before.ReadyReplicas != st.ReadyReplicas ||
		before.AvailableReplicas != st.AvailableReplicas || findCondition(st, appsv1.DeploymentProgressing).Reason == reasonNewRSAvailable:
		setCondition(st, appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonRSUpdated, fmt.Sprintf("ReplicaSet %q is progressing.", p.newRS.Name), p.now)
		findCondition(st, appsv1.DeploymentProgressing).LastUpdateTime = metav1.NewTime(p.now)
	}
	if c := findCondition(st, appsv1.DeploymentProgressing); c != nil && c.Status == corev1.ConditionTrue && c.Reason != reasonNewRSAvailable && d.Spec.ProgressDeadlineSeconds != nil && p.newRS != nil {
		deadline := c.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second)
		if p.now.After(deadline) {
			setCondition(st, appsv1.DeploymentProgressing, corev1.ConditionFalse, reasonDeadlineExceeded, fmt.Sprintf("ReplicaSet %q has timed out progressing.", p.newRS.Name), p.now)
			p.r.recorder.Eventf(d, corev1.EventTypeWarning, reasonDeadlineExceeded, "Deployment %q has timed out progressing.", d.Name)
		} else {
			wait = deadline.Sub(p.now) + time.Second
		}
	}
	if apiequality.Semantic.DeepEqual(&d.Status, st) {
		return wait, nil
	}
	updated := d.DeepCopy()
	updated.Status = *st
	if err := p.r.client.Status().Update(ctx, updated); err != nil {
		return 0, fmt.Errorf("writing the status of deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	p.r.hooks.StatusWritten(ctx, updated, chain.F("replicas", st.Replicas), chain.F("updated", st.UpdatedReplicas), chain.F("available", st.AvailableReplicas))
	return wait, nil
}
