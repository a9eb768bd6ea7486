// Package statefulset is the apps/v1 StatefulSet controller, as kube-controller-manager runs it: pods
// named NAME-0 … NAME-(N-1) (from spec.ordinals.start), created lowest ordinal first and each only once
// the one before is Running and Ready (OrderedReady) or all at once (Parallel); each pod's hostname is
// its name and its subdomain spec.serviceName, so the headless Service resolves it; each
// volumeClaimTemplate gives a pod the PersistentVolumeClaim TEMPLATE-POD, made if missing and kept when
// the pod goes; a pod deleted or failed comes back with the same name; scaling down removes the highest
// ordinals first; template changes are ControllerRevisions, rolled out from the highest ordinal down to
// the partition one pod at a time (RollingUpdate) or when pods are deleted (OnDelete).
//
// Simplifications: persistentVolumeClaimRetentionPolicy.whenScaled is not applied (claims of removed
// ordinals stay); maxUnavailable is 1.
package statefulset

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/record"
	"k8s.io/kubectl/pkg/util/podutils"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/controllers/chainhooks"
	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
	"github.com/rayctl/rayctl/pkg/controllers/kube/workload"
)

// Name is the controller's name; events are reported as "statefulset-controller".
const Name = "statefulset"

// Labels a StatefulSet's pods carry, as on a real cluster.
const (
	// PodNameLabel is the pod's own name, so a Service can select one pod.
	PodNameLabel = "statefulset.kubernetes.io/pod-name"
	// PodIndexLabel is the pod's ordinal.
	PodIndexLabel = "apps.kubernetes.io/pod-index"
)

// claimRetry is how soon a StatefulSet whose claims cannot be made tries again.
const claimRetry = 10 * time.Second

var kind = appsv1.SchemeGroupVersion.WithKind("StatefulSet")

// reconciler syncs one StatefulSet with its pods, claims and revisions.
type reconciler struct {
	// client reads through the manager's cache and writes to the API server.
	client client.Client
	// reader reads from the API server directly: claims (which the cache does not hold) and revisions
	// just written.
	reader client.Reader
	// recorder records the StatefulSet's events.
	recorder record.EventRecorder

	hooks *chainhooks.Hooks
}

// Setup is the ctrlset.SetupFunc of this controller: For StatefulSets, Owns their pods and
// ControllerRevisions.
func Setup(mgr ctrl.Manager, env ctrlset.Env) error {
	r := &reconciler{client: mgr.GetClient(), reader: mgr.GetAPIReader()}
	r.hooks, r.recorder = env.Hooks, env.Recorder
	return r.hooks.NewControllerManagedBy(mgr).
		For(&appsv1.StatefulSet{}).
		Owns(&corev1.Pod{}).
		Owns(&appsv1.ControllerRevision{}).
		MaxConcurrentReconciles(env.ReconcileConcurrency).
		Complete(r)
}

// pass is one reconcile of one StatefulSet.
type pass struct {
	r       *reconciler
	s       *appsv1.StatefulSet
	revs    *workload.Revisions
	current *appsv1.ControllerRevision
	pods    map[int]*corev1.Pod
	now     time.Time
	wait    time.Duration
}

// Reconcile brings the StatefulSet req names one step closer to its spec.
func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	s := &appsv1.StatefulSet{}
	if err := r.client.Get(ctx, req.NamespacedName, s); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if s.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	sel, ok := workload.Selector(s.Spec.Selector)
	if !ok {
		return reconcile.Result{}, nil
	}
	owned, err := workload.ClaimPods(ctx, r.client, s, kind, sel, func(p *corev1.Pod) bool { _, ok := ordinal(s, p); return ok })
	if err != nil {
		return reconcile.Result{}, err
	}
	revs, err := workload.SyncRevisions(ctx, r.client, r.reader, s, kind, &s.Spec.Template, s.Status.CollisionCount)
	if err != nil {
		return reconcile.Result{}, err
	}
	p := &pass{r: r, s: s, revs: revs, current: revs.Find(s.Status.CurrentRevision), pods: map[int]*corev1.Pod{}, now: time.Now()}
	if p.current == nil {
		p.current = revs.Update
	}
	for _, pod := range owned {
		ord, _ := ordinal(s, pod)
		p.pods[ord] = pod
	}
	err = p.run(ctx)
	serr := p.writeStatus(ctx)
	live := map[string]bool{p.current.Name: true, revs.Update.Name: true}
	for _, pod := range p.pods {
		live[pod.Labels[appsv1.ControllerRevisionHashLabelKey]] = true
	}
	limit := int32(10)
	if s.Spec.RevisionHistoryLimit != nil {
		limit = *s.Spec.RevisionHistoryLimit
	}
	terr := workload.TrimRevisions(ctx, r.client, revs, limit, live)
	if err := errors.Join(err, serr, terr); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: p.wait}, nil
}

// ordinal reads the ordinal of a pod named after s ("web-3" → 3).
func ordinal(s *appsv1.StatefulSet, pod *corev1.Pod) (int, bool) {
	rest, ok := strings.CutPrefix(pod.Name, s.Name+"-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n >= 0 && strconv.Itoa(n) == rest
}

func (p *pass) replicas() int {
	if p.s.Spec.Replicas == nil {
		return 1
	}
	return int(*p.s.Spec.Replicas)
}

func (p *pass) start() int {
	if p.s.Spec.Ordinals != nil {
		return int(p.s.Spec.Ordinals.Start)
	}
	return 0
}

func (p *pass) ordered() bool {
	return p.s.Spec.PodManagementPolicy != appsv1.ParallelPodManagement
}

// healthy reports a pod Running, Ready and available for minReadySeconds, noting when a ready pod will
// become available.
func (p *pass) healthy(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil {
		return false
	}
	ok, wait := workload.Availability(pod, p.s.Spec.MinReadySeconds, p.now)
	p.wait = workload.MinRequeue(p.wait, wait)
	return ok
}

// run creates missing pods, replaces failed ones, removes condemned ones and rolls out updates, in the
// order the pod management policy asks.
func (p *pass) run(ctx context.Context) error {
	first, last := p.start(), p.start()+p.replicas()
	for ord := first; ord < last; ord++ {
		pod := p.pods[ord]
		switch {
		case pod == nil:
			if err := p.createPod(ctx, ord); err != nil || p.ordered() {
				return err
			}
		case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
			if pod.DeletionTimestamp == nil {
				p.r.recorder.Eventf(p.s, corev1.EventTypeWarning, "RecreatingFailedPod", "StatefulSet %s/%s is recreating failed Pod %s", p.s.Namespace, p.s.Name, pod.Name)
				if err := p.deletePod(ctx, pod); err != nil || p.ordered() {
					return err
				}
			}
			if p.ordered() {
				return nil
			}
		case !p.healthy(pod) && p.ordered():
			return nil
		}
	}
	// Condemned pods, highest ordinal first; one at a time when ordered.
	for ord := maxOrdinal(p.pods); ord >= first; ord-- {
		pod := p.pods[ord]
		if pod == nil || ord < last {
			continue
		}
		if pod.DeletionTimestamp != nil {
			if p.ordered() {
				return nil
			}
			continue
		}
		if err := p.deletePod(ctx, pod); err != nil || p.ordered() {
			return err
		}
	}
	for ord := range p.pods {
		if ord < first {
			if err := p.deletePod(ctx, p.pods[ord]); err != nil {
				return err
			}
		}
	}
	return p.rollOut(ctx)
}

// rollOut replaces, highest ordinal first down to the partition, one pod not at the update revision,
// once every pod is healthy.
func (p *pass) rollOut(ctx context.Context) error {
	if p.s.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return nil
	}
	first, last := p.start(), p.start()+p.replicas()
	for ord := first; ord < last; ord++ {
		if pod := p.pods[ord]; pod == nil || !p.healthy(pod) {
			return nil
		}
	}
	partition := 0
	if ru := p.s.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		partition = int(*ru.Partition)
	}
	for ord := last - 1; ord >= first+partition; ord-- {
		pod := p.pods[ord]
		if pod.Labels[appsv1.ControllerRevisionHashLabelKey] != p.revs.Update.Name {
			p.r.recorder.Eventf(p.s, corev1.EventTypeNormal, "SuccessfulDelete", "delete Pod %s in StatefulSet %s successful", pod.Name, p.s.Name)
			return p.r.client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID})
		}
	}
	return nil
}

func maxOrdinal(pods map[int]*corev1.Pod) int {
	m := -1
	for ord := range pods {
		m = max(m, ord)
	}
	return m
}

func (p *pass) deletePod(ctx context.Context, pod *corev1.Pod) error {
	err := p.r.client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID})
	if client.IgnoreNotFound(err) != nil {
		p.r.recorder.Eventf(p.s, corev1.EventTypeWarning, "FailedDelete", "delete Pod %s in StatefulSet %s failed error: %v", pod.Name, p.s.Name, err)
		return err
	}
	p.r.recorder.Eventf(p.s, corev1.EventTypeNormal, "SuccessfulDelete", "delete Pod %s in StatefulSet %s successful", pod.Name, p.s.Name)
	return nil
}

// revisionFor is the revision a new pod of ordinal ord gets: below the partition the current one, else
// the update one.
func (p *pass) revisionFor(ord int) *appsv1.ControllerRevision {
	if ru := p.s.Spec.UpdateStrategy.RollingUpdate; p.s.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType &&
		ru != nil && ru.Partition != nil && ord-p.start() < int(*ru.Partition) {
		return p.current
	}
	return p.revs.Update
}

// createPod makes the claims of ordinal ord, then its pod.
func (p *pass) createPod(ctx context.Context, ord int) error {
	rev := p.revisionFor(ord)
	t, err := workload.TemplateOf(rev)
	if err != nil {
		return err
	}
	name := fmt.Sprintf("%s-%d", p.s.Name, ord)
	pod := workload.NewPod(t, p.s, kind, name, "")
	pod.Labels[appsv1.ControllerRevisionHashLabelKey] = rev.Name
	pod.Labels[PodNameLabel] = name
	pod.Labels[PodIndexLabel] = strconv.Itoa(ord)
	pod.Spec.Hostname = name
	pod.Spec.Subdomain = p.s.Spec.ServiceName
	for _, c := range p.s.Spec.VolumeClaimTemplates {
		claim := c.Name + "-" + name
		if ok, err := p.ensureClaim(ctx, &c, claim); !ok {
			return err
		}
		vol := corev1.Volume{Name: c.Name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
		replaced := false
		for i := range pod.Spec.Volumes {
			if pod.Spec.Volumes[i].Name == c.Name {
				pod.Spec.Volumes[i], replaced = vol, true
			}
		}
		if !replaced {
			pod.Spec.Volumes = append(pod.Spec.Volumes, vol)
		}
	}
	if err := p.r.client.Create(ctx, pod); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		p.r.recorder.Eventf(p.s, corev1.EventTypeWarning, "FailedCreate", "create Pod %s in StatefulSet %s failed error: %v", name, p.s.Name, err)
		return err
	}
	p.r.recorder.Eventf(p.s, corev1.EventTypeNormal, "SuccessfulCreate", "create Pod %s in StatefulSet %s successful", name, p.s.Name)
	return nil
}

// ensureClaim creates the claim name from template c unless it exists, and reports whether it does.
// A claim that cannot be read or made is a Warning event, and the pod waits.
func (p *pass) ensureClaim(ctx context.Context, c *corev1.PersistentVolumeClaim, name string) (bool, error) {
	existing := &corev1.PersistentVolumeClaim{}
	err := p.r.reader.Get(ctx, client.ObjectKey{Namespace: p.s.Namespace, Name: name}, existing)
	if err == nil {
		return true, nil
	}
	if apierrors.IsNotFound(err) {
		claim := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.s.Namespace, Labels: labels.Merge(c.Labels, p.s.Spec.Selector.MatchLabels), Annotations: c.Annotations},
			Spec:       c.Spec,
		}
		if p.s.Spec.PersistentVolumeClaimRetentionPolicy != nil && p.s.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted == appsv1.DeletePersistentVolumeClaimRetentionPolicyType {
			ref := metav1.NewControllerRef(p.s, kind)
			ref.Controller = nil
			claim.OwnerReferences = []metav1.OwnerReference{*ref}
		}
		if err = p.r.client.Create(ctx, claim); err == nil || apierrors.IsAlreadyExists(err) {
			if err == nil {
				p.r.recorder.Eventf(p.s, corev1.EventTypeNormal, "SuccessfulCreate", "create Claim %s for Pod %s in StatefulSet %s success", name, strings.TrimPrefix(name, c.Name+"-"), p.s.Name)
			}
			return true, nil
		}
	}
	p.r.recorder.Eventf(p.s, corev1.EventTypeWarning, "FailedCreate", "create Claim %s for Pod %s in StatefulSet %s failed error: %s",
		name, strings.TrimPrefix(name, c.Name+"-"), p.s.Name, err)
	p.wait = workload.MinRequeue(p.wait, claimRetry)
	return false, nil
}

// writeStatus counts the pods by readiness and revision and writes the status if it changed.
func (p *pass) writeStatus(ctx context.Context) error {
	s := p.s
	st := s.Status.DeepCopy()
	st.ObservedGeneration = s.Generation
	st.Replicas, st.ReadyReplicas, st.AvailableReplicas, st.CurrentReplicas, st.UpdatedReplicas = 0, 0, 0, 0, 0
	for _, pod := range p.pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		st.Replicas++
		if pod.Status.Phase == corev1.PodRunning && podutils.IsPodReady(pod) {
			st.ReadyReplicas++
			if ok, _ := workload.Availability(pod, s.Spec.MinReadySeconds, p.now); ok {
				st.AvailableReplicas++
			}
		}
		switch pod.Labels[appsv1.ControllerRevisionHashLabelKey] {
		case p.revs.Update.Name:
			st.UpdatedReplicas++
			if p.current == p.revs.Update {
				st.CurrentReplicas++
			}
		case p.current.Name:
			st.CurrentReplicas++
		}
	}
	st.CurrentRevision, st.UpdateRevision = p.current.Name, p.revs.Update.Name
	if st.UpdatedReplicas == int32(p.replicas()) && st.Replicas == st.UpdatedReplicas && st.ReadyReplicas == st.Replicas {
		st.CurrentRevision, st.CurrentReplicas = st.UpdateRevision, st.UpdatedReplicas
	}
	if apiequality.Semantic.DeepEqual(&s.Status, st) {
		return nil
	}
	updated := s.DeepCopy()
	updated.Status = *st
	if err := p.r.client.Status().Update(ctx, updated); err != nil {
		return fmt.Errorf("writing the status of statefulset %s/%s: %w", s.Namespace, s.Name, err)
	}
	p.r.hooks.StatusWritten(ctx, updated, chain.F("replicas", st.Replicas), chain.F("ready", st.ReadyReplicas), chain.F("updated", st.UpdatedReplicas))
	return nil
}
