// Package replicaset is the apps/v1 ReplicaSet controller, as kube-controller-manager runs it: it keeps
// spec.replicas pods from spec.template, adopting orphan pods its selector matches and releasing pods
// it no longer selects, deletes surplus pods least-established first, and reports replicas,
// fullyLabeledReplicas, readyReplicas, availableReplicas (ready for minReadySeconds) and
// observedGeneration.
package replicaset

import (
	"context"
	"fmt"
	"sort"
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
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/controllers/chainhooks"
	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
	"github.com/rayctl/rayctl/pkg/controllers/kube/workload"
)

// Name is the controller's name; events are reported as "replicaset-controller".
const Name = "replicaset"

// burst is how many pods one pass creates or deletes at most, as the real controller's burstReplicas.
const burst = 500

var kind = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")

// reconciler syncs one ReplicaSet with its pods.
type reconciler struct {
	// client reads through the manager's cache (which must hold every pod) and writes to the API server.
	client client.Client
	// recorder records the ReplicaSet's events.
	recorder record.EventRecorder

	hooks *chainhooks.Hooks
	exp   *workload.Expectations
}

// Setup is the ctrlset.SetupFunc of this controller: For ReplicaSets, Owns their pods, and orphan pods
// go to the ReplicaSets that select them.
func Setup(mgr ctrl.Manager, env ctrlset.Env) error {
	r := &reconciler{client: mgr.GetClient(), exp: workload.NewExpectations()}
	r.hooks, r.recorder = env.Hooks, env.Recorder
	return r.hooks.NewControllerManagedBy(mgr).
		For(&appsv1.ReplicaSet{}).
		Owns(&corev1.Pod{}).
		Watches(&corev1.Pod{}, "orphan pod selected", handler.EnqueueRequestsFromMapFunc(r.selecting)).
		MaxConcurrentReconciles(env.ReconcileConcurrency).
		Complete(r)
}

// selecting maps an orphan pod to the ReplicaSets of its namespace whose selector matches it.
func (r *reconciler) selecting(ctx context.Context, obj client.Object) []reconcile.Request {
	if metav1.GetControllerOf(obj) != nil {
		return nil
	}
	list := &appsv1.ReplicaSetList{}
	if err := r.client.List(ctx, list, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		sel, err := metav1.LabelSelectorAsSelector(list.Items[i].Spec.Selector)
		if err == nil && !sel.Empty() && sel.Matches(labels.Set(obj.GetLabels())) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return out
}

// Reconcile brings the ReplicaSet req names one step closer to spec.replicas pods.
func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	rs := &appsv1.ReplicaSet{}
	if err := r.client.Get(ctx, req.NamespacedName, rs); err != nil {
		if apierrors.IsNotFound(err) {
			r.exp.Forget(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	sel, ok := workload.Selector(rs.Spec.Selector)
	if !ok {
		return reconcile.Result{}, nil
	}
	pods, err := workload.ClaimPods(ctx, r.client, rs, kind, sel, nil)
	if err != nil {
		return reconcile.Result{}, err
	}
	var active []*corev1.Pod
	for _, p := range pods {
		if workload.IsActive(p) {
			active = append(active, p)
		}
	}
	var manageErr error
	if rs.DeletionTimestamp == nil && r.exp.Satisfied(req.NamespacedName, workload.ByName(pods)) {
		manageErr = r.manage(ctx, rs, active)
	}
	wait, err := r.writeStatus(ctx, rs, active)
	if manageErr != nil {
		return reconcile.Result{}, manageErr
	}
	return reconcile.Result{RequeueAfter: wait}, err
}

// manage creates or deletes pods towards spec.replicas.
func (r *reconciler) manage(ctx context.Context, rs *appsv1.ReplicaSet, active []*corev1.Pod) error {
	want := int32(1)
	if rs.Spec.Replicas != nil {
		want = *rs.Spec.Replicas
	}
	key := client.ObjectKeyFromObject(rs)
	diff := int(want) - len(active)
	switch {
	case diff > 0:
		for i := 0; i < min(diff, burst); i++ {
			pod := workload.NewPod(&rs.Spec.Template, rs, kind, "", rs.Name+"-")
			if err := r.client.Create(ctx, pod); err != nil {
				if apierrors.IsAlreadyExists(err) {
					continue
				}
				r.recorder.Eventf(rs, corev1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
				return err
			}
			r.exp.Created(key, pod.Name)
			r.recorder.Eventf(rs, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: %s", pod.Name)
		}
	case diff < 0:
		victims := append([]*corev1.Pod(nil), active...)
		sort.SliceStable(victims, func(i, j int) bool { return lessEstablished(victims[i], victims[j]) })
		for _, p := range victims[:min(-diff, burst)] {
			if err := r.client.Delete(ctx, p, client.Preconditions{UID: &p.UID}); client.IgnoreNotFound(err) != nil {
				r.recorder.Eventf(rs, corev1.EventTypeWarning, "FailedDelete", "Error deleting: %v", err)
				return err
			}
			r.exp.Deleted(key, p.UID)
			r.recorder.Eventf(rs, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %s", p.Name)
		}
	}
	return nil
}

// lessEstablished orders pods for deletion as the real controller does, in short: unscheduled before
// scheduled, pending before unknown before running, not ready before ready, the more restarted first,
// the newer first.
func lessEstablished(a, b *corev1.Pod) bool {
	if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
		return a.Spec.NodeName == ""
	}
	rank := map[corev1.PodPhase]int{corev1.PodPending: 0, corev1.PodUnknown: 1, corev1.PodRunning: 2}
	if rank[a.Status.Phase] != rank[b.Status.Phase] {
		return rank[a.Status.Phase] < rank[b.Status.Phase]
	}
	if podutils.IsPodReady(a) != podutils.IsPodReady(b) {
		return !podutils.IsPodReady(a)
	}
	if ra, rb := restarts(a), restarts(b); ra != rb {
		return ra > rb
	}
	return b.CreationTimestamp.Before(&a.CreationTimestamp)
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, c := range p.Status.ContainerStatuses {
		n += c.RestartCount
	}
	return n
}

// writeStatus writes the counts if they changed; it returns how long until a ready pod becomes
// available.
func (r *reconciler) writeStatus(ctx context.Context, rs *appsv1.ReplicaSet, active []*corev1.Pod) (time.Duration, error) {
	st := rs.Status.DeepCopy()
	st.Replicas, st.FullyLabeledReplicas, st.ReadyReplicas, st.AvailableReplicas = int32(len(active)), 0, 0, 0
	st.ObservedGeneration = rs.Generation
	templateLabels := labels.Set(rs.Spec.Template.Labels).AsSelectorPreValidated()
	now := time.Now()
	var wait time.Duration
	for _, p := range active {
		if templateLabels.Matches(labels.Set(p.Labels)) {
			st.FullyLabeledReplicas++
		}
		if podutils.IsPodReady(p) {
			st.ReadyReplicas++
		}
		available, w := workload.Availability(p, rs.Spec.MinReadySeconds, now)
		if available {
			st.AvailableReplicas++
		}
		wait = workload.MinRequeue(wait, w)
	}
	if apiequality.Semantic.DeepEqual(&rs.Status, st) {
		return wait, nil
	}
	updated := rs.DeepCopy()
	updated.Status = *st
	if err := r.client.Status().Update(ctx, updated); err != nil {
		return 0, fmt.Errorf("writing the status of replicaset %s/%s: %w", rs.Namespace, rs.Name, err)
	}
	r.hooks.StatusWritten(ctx, updated, chain.F("replicas", st.Replicas), chain.F("ready", st.ReadyReplicas), chain.F("available", st.AvailableReplicas))
	return wait, nil
}
