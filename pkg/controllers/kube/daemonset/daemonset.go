// Package daemonset is the apps/v1 DaemonSet controller: one pod per Node whose labels match the
// template's nodeSelector (rayctl has one node), bound to it by spec.nodeName; template changes are
// ControllerRevisions, rolled out by replacing out-of-date pods (RollingUpdate, maxUnavailable of them
// at a time) or when they are deleted (OnDelete); failed pods are replaced. Status reports the
// desired, current, misscheduled, ready, available and updated counts.
//
// Simplifications: node taints and the template's node affinity are not weighed; maxSurge is not used.
package daemonset

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
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

// Name is the controller's name; events are reported as "daemonset-controller".
const Name = "daemonset"

var kind = appsv1.SchemeGroupVersion.WithKind("DaemonSet")

// reconciler syncs one DaemonSet with its pods.
type reconciler struct {
	// client reads through the manager's cache and writes to the API server.
	client client.Client
	// reader reads revisions just written from the API server.
	reader client.Reader
	// recorder records the DaemonSet's events.
	recorder record.EventRecorder

	hooks *chainhooks.Hooks
	exp   *workload.Expectations
}

// Setup is the ctrlset.SetupFunc of this controller: For DaemonSets, Owns their pods and
// ControllerRevisions, and a Node's changes go to every DaemonSet.
func Setup(mgr ctrl.Manager, env ctrlset.Env) error {
	r := &reconciler{client: mgr.GetClient(), reader: mgr.GetAPIReader(), exp: workload.NewExpectations()}
	r.hooks, r.recorder = env.Hooks, env.Recorder
	return r.hooks.NewControllerManagedBy(mgr).
		For(&appsv1.DaemonSet{}).
		Owns(&corev1.Pod{}).
		Owns(&appsv1.ControllerRevision{}).
		Watches(&corev1.Node{}, "node changed", handler.EnqueueRequestsFromMapFunc(r.all)).
		MaxConcurrentReconciles(env.ReconcileConcurrency).
		Complete(r)
}

// all maps a Node to every DaemonSet.
func (r *reconciler) all(ctx context.Context, _ client.Object) []reconcile.Request {
	list := &appsv1.DaemonSetList{}
	if err := r.client.List(ctx, list); err != nil {
		return nil
	}
	out := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		out[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])}
	}
	return out
}

// Reconcile brings the DaemonSet req names one step closer to one up-to-date pod per eligible node.
func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ds := &appsv1.DaemonSet{}
	if err := r.client.Get(ctx, req.NamespacedName, ds); err != nil {
		if apierrors.IsNotFound(err) {
			r.exp.Forget(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if ds.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	sel, ok := workload.Selector(ds.Spec.Selector)
	if !ok {
		return reconcile.Result{}, nil
	}
	nodes := &corev1.NodeList{}
	if err := r.client.List(ctx, nodes); err != nil {
		return reconcile.Result{}, err
	}
	pods, err := workload.ClaimPods(ctx, r.client, ds, kind, sel, nil)
	if err != nil {
		return reconcile.Result{}, err
	}
	revs, err := workload.SyncRevisions(ctx, r.client, r.reader, ds, kind, &ds.Spec.Template, ds.Status.CollisionCount)
	if err != nil {
		return reconcile.Result{}, err
	}
	byNode := map[string][]*corev1.Pod{}
	for _, p := range pods {
		byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
	}
	key := req.NamespacedName
	now := time.Now()
	st := ds.Status.DeepCopy()
	st.ObservedGeneration = ds.Generation
	st.DesiredNumberScheduled, st.CurrentNumberScheduled, st.NumberMisscheduled, st.NumberReady = 0, 0, 0, 0
	st.NumberAvailable, st.UpdatedNumberScheduled, st.NumberUnavailable = 0, 0, 0
	var errs []error
	var wait time.Duration
	manage := r.exp.Satisfied(key, workload.ByName(pods))
	budget := maxUnavailable(ds, len(nodes.Items))
	var outdated []*corev1.Pod
	for i := range nodes.Items {
		node := &nodes.Items[i]
		wanted := labels.SelectorFromSet(ds.Spec.Template.Spec.NodeSelector).Matches(labels.Set(node.Labels))
		var active []*corev1.Pod
		for _, p := range byNode[node.Name] {
			switch {
			case p.Status.Phase == corev1.PodFailed && p.DeletionTimestamp == nil && manage:
				errs = append(errs, r.delete(ctx, ds, p))
			case workload.IsActive(p):
				active = append(active, p)
			}
		}
		if !wanted {
			if len(active) > 0 {
				st.NumberMisscheduled++
			}
			for _, p := range active {
				if manage {
					errs = append(errs, r.delete(ctx, ds, p))
				}
			}
			continue
		}
		st.DesiredNumberScheduled++
		if len(active) == 0 {
			st.NumberUnavailable++
			if manage {
				errs = append(errs, r.create(ctx, ds, revs.Update, node.Name))
			}
			continue
		}
		st.CurrentNumberScheduled++
		p := active[0]
		available, w := workload.Availability(p, ds.Spec.MinReadySeconds, now)
		wait = workload.MinRequeue(wait, w)
		if podutils.IsPodReady(p) {
			st.NumberReady++
		}
		if available {
			st.NumberAvailable++
		} else {
			st.NumberUnavailable++
			budget--
		}
		if p.Labels[appsv1.ControllerRevisionHashLabelKey] == revs.Update.Labels[appsv1.ControllerRevisionHashLabelKey] {
			st.UpdatedNumberScheduled++
		} else if available {
			outdated = append(outdated, p)
		}
		for _, extra := range active[1:] {
			if manage {
				errs = append(errs, r.delete(ctx, ds, extra))
			}
		}
	}
	if manage && ds.Spec.UpdateStrategy.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		for _, p := range outdated[:max(0, min(budget, len(outdated)))] {
			errs = append(errs, r.delete(ctx, ds, p))
		}
	}
	live := map[string]bool{}
	for _, rev := range revs.All {
		for _, p := range pods {
			if p.Labels[appsv1.ControllerRevisionHashLabelKey] == rev.Labels[appsv1.ControllerRevisionHashLabelKey] {
				live[rev.Name] = true
			}
		}
	}
	limit := int32(10)
	if ds.Spec.RevisionHistoryLimit != nil {
		limit = *ds.Spec.RevisionHistoryLimit
	}
	errs = append(errs, workload.TrimRevisions(ctx, r.client, revs, limit, live))
	if !apiequality.Semantic.DeepEqual(&ds.Status, st) {
		updated := ds.DeepCopy()
		updated.Status = *st
		if err := r.client.Status().Update(ctx, updated); err != nil {
			errs = append(errs, fmt.Errorf("writing the status of daemonset %s/%s: %w", ds.Namespace, ds.Name, err))
		} else {
			r.hooks.StatusWritten(ctx, updated, chain.F("desired", st.DesiredNumberScheduled), chain.F("ready", st.NumberReady), chain.F("updated", st.UpdatedNumberScheduled))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: wait}, nil
}

// maxUnavailable resolves the rolling update's maxUnavailable against the number of nodes (at least 1).
func maxUnavailable(ds *appsv1.DaemonSet, nodes int) int {
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	if ru == nil || ru.MaxUnavailable == nil {
		return 1
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, nodes, true)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

func (r *reconciler) create(ctx context.Context, ds *appsv1.DaemonSet, rev *appsv1.ControllerRevision, node string) error {
	pod := workload.NewPod(&ds.Spec.Template, ds, kind, "", ds.Name+"-")
	pod.Labels[appsv1.ControllerRevisionHashLabelKey] = rev.Labels[appsv1.ControllerRevisionHashLabelKey]
	pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] = rev.Labels[appsv1.ControllerRevisionHashLabelKey]
	pod.Spec.NodeName = node
	if err := r.client.Create(ctx, pod); err != nil {
		r.recorder.Eventf(ds, corev1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
		return err
	}
	r.exp.Created(client.ObjectKeyFromObject(ds), pod.Name)
	r.recorder.Eventf(ds, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: %s", pod.Name)
	return nil
}

func (r *reconciler) delete(ctx context.Context, ds *appsv1.DaemonSet, pod *corev1.Pod) error {
	if err := r.client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil {
		r.recorder.Eventf(ds, corev1.EventTypeWarning, "FailedDelete", "Error deleting: %v", err)
		return err
	}
	r.exp.Deleted(client.ObjectKeyFromObject(ds), pod.UID)
	r.recorder.Eventf(ds, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %s", pod.Name)
	return nil
}
