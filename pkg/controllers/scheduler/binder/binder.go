// Package binder is rayctl's small scheduler. It watches pods that name the default scheduler and no
// node and decides as kube-scheduler's default profile does for what KubeRay's YAML asks: it filters
// the nodes (unschedulable, taints with NoSchedule and NoExecute, nodeSelector and required node
// affinity, allocatable resources including extended ones such as nvidia.com/gpu minus what the
// non-terminal pods there request, DoNotSchedule topology spread constraints, required pod affinity
// and anti-affinity by topology key), scores the rest (PreferNoSchedule taints, preferred node
// affinity, ScheduleAnyway topology spread constraints, preferred pod affinity, the least allocated),
// and binds the pod to the best through pods/binding. When no node fits it sets PodScheduled=False
// (reason Unschedulable) with kube-scheduler's message ("0/2 nodes are available: 1 Insufficient
// nvidia.com/gpu, 1 node(s) had untolerated taint {nvidia.com/gpu: present}. preemption: ...") and
// records FailedScheduling, then tries again when pods go away or nodes change.
package binder

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rayctl/rayctl/pkg/controllers/chainhooks"
	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
)

// Name is the binder's name, as registered in the controller set (ctrlset).
const Name = "binder"

// Options configures a binder.
type Options struct {
	// SchedulerName is the spec.schedulerName served (default "default-scheduler"); the binder's events
	// come from it.
	SchedulerName string
	// RetryPeriod is how often an unschedulable pod is tried again without a triggering change
	// (default 30s).
	RetryPeriod time.Duration
	// InsufficientHint, when set, ends the FailedScheduling event of a pod that does not fit for want
	// of a resource ("Insufficient cpu"), saying what the user can do about it.
	InsufficientHint string
}

// reconciler binds pending pods to nodes. It places one pod at a time against per-node accounts that the
// pod informer keeps up to date (which keeps the accounting exact without summing every pod for each
// placement) and binds up to bindWorkers at once (a binding is a round trip to the API server). It
// reads pods and nodes through the manager's cache, which must hold every Pod and Node.
type reconciler struct {
	opts     Options
	client   client.Client
	recorder record.EventRecorder

	// accounts is what each node's pods request; accountsSynced reports whether it has seen every
	// pod of the cache's first list.
	accounts       *accounts
	accountsSynced func() bool

	mu sync.Mutex
	// unschedulable are pods that fit no node: a change that may make room tries them again. The value
	// says whether the pod has pod affinity or a DoNotSchedule topology spread constraint (a pod bound
	// elsewhere may satisfy it).
	unschedulable map[types.NamespacedName]bool
}

// Setup is the ctrlset.SetupFunc of the binder with the default Options (pkg/controlplane registers it in
// its group).
func Setup(mgr ctrl.Manager, env ctrlset.Env) error { return Options{}.Setup(mgr, env) }

// Setup adds a binder with this configuration to mgr, in the ctrlset.SetupFunc shape: For pending Pods
// that name the scheduler; Watches Nodes (a node added, or changed in what placement reads) and Pods
// (one that leaves a node or finishes) to try the unschedulable pods again. An empty InsufficientHint
// takes env's.
func (o Options) Setup(mgr ctrl.Manager, env ctrlset.Env) error {
	if o.InsufficientHint == "" {
		o.InsufficientHint = env.InsufficientHint
	}
	if o.SchedulerName == "" {
		o.SchedulerName = corev1.DefaultSchedulerName
	}
	if o.RetryPeriod <= 0 {
		o.RetryPeriod = 30 * time.Second
	}
	h := env.Hooks
	b := &reconciler{
		opts: o, client: mgr.GetClient(),
		accounts:      newAccounts(),
		unschedulable: map[types.NamespacedName]bool{},
	}
	b.recorder = env.EventRecorderFor(o.SchedulerName)
	// The accounts follow the cache's pods through an event handler of their own on the Pod informer
	// (not a watch of the controller: it adds no hop to the trigger chain).
	inf, err := mgr.GetCache().GetInformer(context.Background(), &corev1.Pod{})
	if err != nil {
		return err
	}
	reg, err := inf.AddEventHandler(b.accounts.handler())
	if err != nil {
		return err
	}
	b.accountsSynced = reg.HasSynced
	retry := handler.EnqueueRequestsFromMapFunc(b.unschedulablePods)
	return h.NewControllerManagedBy(mgr).
		For(&corev1.Pod{}, chainhooks.Named("pending for "+o.SchedulerName, predicate.NewPredicateFuncs(b.pendingOrGone))).
		Watches(&corev1.Node{}, "unschedulable pods", retry, nodeAddedOrChanged).
		Watches(&corev1.Pod{}, "unschedulable pods", retry, leftNodeOrFinished).
		Watches(&corev1.Pod{}, "unschedulable pods", handler.EnqueueRequestsFromMapFunc(b.unschedulableAfterBinding), podBound).
		WithOptions(controller.Options{MaxConcurrentReconciles: bindWorkers,
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](100*time.Millisecond, 10*time.Second)}).
		Complete(b)
}

// bindWorkers is how many pods are bound at once.
const bindWorkers = 4

func (b *reconciler) pending(pod *corev1.Pod) bool {
	return pod.Spec.NodeName == "" && pod.Spec.SchedulerName == b.opts.SchedulerName && pod.DeletionTimestamp == nil &&
		!terminal(pod)
}

// pendingOrGone passes a pending pod's events, and every deletion (the reconcile forgets the pod).
func (b *reconciler) pendingOrGone(obj client.Object) bool {
	pod, ok := obj.(*corev1.Pod)
	return ok && (b.pending(pod) || pod.DeletionTimestamp != nil)
}

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// nodeAddedOrChanged passes a node's creation and an update that can matter to placement (heartbeats
// change only condition times).
var nodeAddedOrChanged = chainhooks.Named("node added or changed for placement", predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, okOld := e.ObjectOld.(*corev1.Node)
		n, okNew := e.ObjectNew.(*corev1.Node)
		return okOld && okNew && (o.Spec.Unschedulable != n.Spec.Unschedulable || nodeReady(o) != nodeReady(n) ||
			!equalLists(o.Status.Allocatable, n.Status.Allocatable) || !equalMaps(o.Labels, n.Labels) || !equality.Semantic.DeepEqual(o.Spec.Taints, n.Spec.Taints))
	},
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
})

// leftNodeOrFinished passes the deletion of a pod bound to a node and a pod's update to Succeeded or
// Failed: both free the node's resources.
var leftNodeOrFinished = chainhooks.Named("pod left its node or finished", predicate.Funcs{
	CreateFunc: func(event.CreateEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, okOld := e.ObjectOld.(*corev1.Pod)
		n, okNew := e.ObjectNew.(*corev1.Pod)
		return okOld && okNew && !terminal(o) && terminal(n)
	},
	DeleteFunc: func(e event.DeleteEvent) bool {
		p, ok := e.Object.(*corev1.Pod)
		return ok && p.Spec.NodeName != ""
	},
	GenericFunc: func(event.GenericEvent) bool { return false },
})

// podBound passes a pod's binding to a node: a pod that waits for a pod like it (pod affinity) may
// fit now.
var podBound = chainhooks.Named("pod bound to a node", predicate.Funcs{
	CreateFunc: func(event.CreateEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, okOld := e.ObjectOld.(*corev1.Pod)
		n, okNew := e.ObjectNew.(*corev1.Pod)
		return okOld && okNew && o.Spec.NodeName == "" && n.Spec.NodeName != ""
	},
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
})

// unschedulableAfterBinding maps a pod's binding to the pods waiting for a pod to match their pod
// affinity, or for pods in other domains to even out their topology spread.
func (b *reconciler) unschedulableAfterBinding(_ context.Context, _ client.Object) []reconcile.Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []reconcile.Request
	for k, affine := range b.unschedulable {
		if affine {
			out = append(out, reconcile.Request{NamespacedName: k})
		}
	}
	return out
}

// unschedulablePods maps any event to every pod waiting for room. A pod's event here is one that
// frees room (leftNodeOrFinished): the accounts drop the pod first, so the pods tried again see the
// room even when the accounts' own handler has not yet had the event.
func (b *reconciler) unschedulablePods(_ context.Context, obj client.Object) []reconcile.Request {
	if p, ok := obj.(*corev1.Pod); ok {
		b.accounts.left(p.UID)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]reconcile.Request, 0, len(b.unschedulable))
	for k := range b.unschedulable {
		out = append(out, reconcile.Request{NamespacedName: k})
	}
	return out
}

func equalLists(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || v.Cmp(w) != 0 {
			return false
		}
	}
	return true
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || v != w {
			return false
		}
	}
	return true
}

// Reconcile places one pod: it binds it to the fitting node with the most cpu left or, when none fits,
// marks it unschedulable and tries again after the retry period (or sooner, when room may have come).
func (b *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pod := &corev1.Pod{}
	if err := b.client.Get(ctx, req.NamespacedName, pod); err != nil {
		if apierrors.IsNotFound(err) {
			b.forget(req.NamespacedName)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	if !b.pending(pod) {
		b.forget(req.NamespacedName)
		return reconcile.Result{}, nil
	}
	node, known, nodes, reasons, unhelpful, err := b.place(ctx, pod)
	if err != nil || known {
		// known: placed already and its binding in flight, or the accounts are ahead of this read.
		return reconcile.Result{}, err
	}
	if node == "" {
		return reconcile.Result{RequeueAfter: b.opts.RetryPeriod},
			b.markUnschedulable(ctx, req.NamespacedName, pod, unschedulableMessage(nodes, reasons, unhelpful))
	}
	b.forget(req.NamespacedName)
	return reconcile.Result{}, b.bind(ctx, pod, node)
}

// place picks the best-scoring fitting node and assumes the pod there (its requests count against the
// node from now on), or says why no node fits: the nodes looked at, per reason how many refused, and how
// many refused for a reason no preemption could cure. Placements are made one at a time, against the
// accounts, so two pods never both take the last room; the bindings that follow run in parallel.
func (b *reconciler) place(ctx context.Context, pod *corev1.Pod) (node string, known bool, count int, reasons map[string]int, unhelpful int, err error) {
	if b.accountsSynced != nil && !b.accountsSynced() && !toolscache.WaitForCacheSync(ctx.Done(), b.accountsSynced) {
		return "", false, 0, nil, 0, ctx.Err()
	}
	nodes := &corev1.NodeList{}
	if err := b.client.List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
		return "", false, 0, nil, 0, err
	}
	p := &placement{pod: pod, required: nodeaffinity.GetRequiredNodeAffinity(pod), nodeLabels: map[string]map[string]string{},
		namespaceLabels: b.namespaceLabels(ctx)}
	for i := range nodes.Items {
		p.nodeLabels[nodes.Items[i].Name] = nodes.Items[i].Labels
	}
	aff := pod.Spec.Affinity
	allOthers := aff != nil && (aff.PodAffinity != nil || aff.PodAntiAffinity != nil) || len(pod.Spec.TopologySpreadConstraints) > 0
	node, known = b.accounts.placeWith(pod, func(usage func(string) nodeUsage, others func(bool) []placedPod) string {
		p.others = others(allOthers)
		node, reasons, unhelpful = p.choose(nodes.Items, usage)
		return node
	})
	if known || node == "" {
		return "", known, len(nodes.Items), reasons, unhelpful, nil
	}
	return node, false, len(nodes.Items), nil, 0, nil
}

// namespaceLabels returns a lookup of namespaces' labels through the cache, for pod affinity terms
// with a namespaceSelector (asked for only then).
func (b *reconciler) namespaceLabels(ctx context.Context) func(string) map[string]string {
	return func(name string) map[string]string {
		ns := &corev1.Namespace{}
		if err := b.client.Get(ctx, types.NamespacedName{Name: name}, ns); err != nil {
			return nil
		}
		return ns.Labels
	}
}

// forget drops a pod that no longer waits from the unschedulable ones.
func (b *reconciler) forget(key types.NamespacedName) {
	b.mu.Lock()
	delete(b.unschedulable, key)
	b.mu.Unlock()
}

func (b *reconciler) bind(ctx context.Context, pod *corev1.Pod, node string) error {
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	if err := b.client.SubResource("binding").Create(ctx, pod, binding); err != nil {
		b.accounts.forgetAssumed(pod.UID)
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			// Gone, bound by someone else, or being deleted: nothing left to do.
			return nil
		}
		return fmt.Errorf("binding %s/%s to %s: %w", pod.Namespace, pod.Name, node, err)
	}
	b.recorder.Eventf(pod, corev1.EventTypeNormal, "Scheduled", "Successfully assigned %s/%s to %s", pod.Namespace, pod.Name, node)
	return nil
}

// markUnschedulable records why the pod waits, writing PodScheduled only when it changes.
func (b *reconciler) markUnschedulable(ctx context.Context, key types.NamespacedName, pod *corev1.Pod, message string) error {
	b.mu.Lock()
	b.unschedulable[key] = pod.Spec.Affinity != nil && pod.Spec.Affinity.PodAffinity != nil || hasHardSpread(pod)
	b.mu.Unlock()
	event := message
	if b.opts.InsufficientHint != "" && strings.Contains(message, " Insufficient ") {
		event += " " + b.opts.InsufficientHint
	}
	b.recorder.Event(pod, corev1.EventTypeWarning, "FailedScheduling", event)
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable && c.Message == message {
			return nil
		}
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status": map[string]any{"conditions": []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: message, LastTransitionTime: metav1.Now(),
		}}},
	})
	if err != nil {
		return err
	}
	err = b.client.Status().Patch(ctx, pod, client.RawPatch(types.StrategicMergePatchType, patch))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("pod unschedulable", "pod", key.String(), "message", message)
	return nil
}
