package endpoints

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/kubectl/pkg/util/podutils"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rayctl/rayctl/pkg/controllers/chainhooks"
	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
)

// Name is the controller's name, as registered in the controller set (ctrlset).
const Name = "endpoints"

// ManagedBy is the endpointslice.kubernetes.io/managed-by value on the slices this controller writes. It is
// the value kube-controller-manager's EndpointSlice controller uses, so tools that look for controller-made
// slices find these.
const ManagedBy = "endpointslice-controller.k8s.io"

// concurrency is how many Services are synced at once.
const concurrency = 2

// reconciler keeps one Service's Endpoints and EndpointSlices in step with the pods it selects. It reads
// through the manager's cache, which must hold every Pod, Service, Endpoints and EndpointSlice.
type reconciler struct {
	client client.Client
	// services is the cache's Service indexer (by namespace), read by selectingServices without a list's
	// copies.
	services toolscache.Indexer
}

// Setup is the ctrlset.SetupFunc of this controller: For Services; Watches Pods (mapped to the Services
// that select them, now or before the change, when a field an endpoint is made of changed), Endpoints
// (by name) and its own EndpointSlices (by their service-name label) when someone else changes or
// deletes them.
func Setup(mgr ctrl.Manager, env ctrlset.Env) error {
	h := env.Hooks
	r := &reconciler{client: mgr.GetClient()}
	inf, err := mgr.GetCache().GetInformer(context.Background(), &corev1.Service{})
	if err != nil {
		return err
	}
	i, ok := inf.(interface{ GetIndexer() toolscache.Indexer })
	if !ok {
		return fmt.Errorf("the manager's Service informer (%T) has no indexer to read Services from", inf)
	}
	r.services = i.GetIndexer()
	return h.NewControllerManagedBy(mgr).
		For(&corev1.Service{}).
		Watches(&corev1.Pod{}, "selected by the service", handler.EnqueueRequestsFromMapFunc(r.selectingServices), endpointFieldsChanged).
		Watches(&corev1.Endpoints{}, "object", &handler.EnqueueRequestForObject{}, changedOrDeleted).
		Watches(&discoveryv1.EndpointSlice{}, "service-name label", handler.EnqueueRequestsFromMapFunc(sliceService), changedOrDeleted).
		MaxConcurrentReconciles(concurrency).
		Complete(r)
}

// Run runs the controller alone, with a manager of its own, until ctx ends.
func Run(ctx context.Context, cfg *rest.Config) error {
	return ctrlset.RunStandalone(ctx, cfg, Setup, ctrlset.Env{Name: Name})
}

// changedOrDeleted passes updates and deletions: the controller's own objects come back for a check when
// someone else changes or removes them (their creation is the controller's own doing).
var changedOrDeleted = chainhooks.Named("changed or deleted", predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
})

// endpointFieldsChanged passes a Pod's creation and deletion, and an update that touches anything an
// endpoint is made of.
var endpointFieldsChanged = chainhooks.Named("endpoint fields changed", predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, okOld := e.ObjectOld.(*corev1.Pod)
		n, okNew := e.ObjectNew.(*corev1.Pod)
		return okOld && okNew && podChanged(o, n)
	},
})

// sliceService maps one of the controller's EndpointSlices to its Service.
func sliceService(_ context.Context, obj client.Object) []reconcile.Request {
	l := obj.GetLabels()
	if l[discoveryv1.LabelManagedBy] != ManagedBy || l[discoveryv1.LabelServiceName] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: l[discoveryv1.LabelServiceName]}}}
}

// selectingServices maps a pod to every Service in its namespace whose selector matches its labels. For an
// update the builder maps the old pod as well, so a Service the pod no longer matches is synced too. It
// runs for each pod event and only reads the Services, so it reads the cache's own objects through its
// namespace index: a list copied every Service of the namespace per pod event (N pods beside N Services
// cost N² copies).
func (r *reconciler) selectingServices(_ context.Context, obj client.Object) []reconcile.Request {
	svcs, err := r.services.ByIndex(toolscache.NamespaceIndex, obj.GetNamespace())
	if err != nil {
		return nil
	}
	var out []reconcile.Request
	podLabels := obj.GetLabels()
	for _, o := range svcs {
		if svc, ok := o.(*corev1.Service); ok && len(svc.Spec.Selector) > 0 && selects(svc.Spec.Selector, podLabels) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}})
		}
	}
	return out
}

// selects reports whether every key of a Service's selector has its value among the pod's labels
// (what labels.SelectorFromValidatedSet(selector).Matches(pod labels) says, without building a selector).
func selects(selector, podLabels map[string]string) bool {
	for k, v := range selector {
		if l, ok := podLabels[k]; !ok || l != v {
			return false
		}
	}
	return true
}

// podChanged reports whether an update touches anything an endpoint is made of.
func podChanged(o, n *corev1.Pod) bool {
	return o.Status.PodIP != n.Status.PodIP ||
		!apiequality.Semantic.DeepEqual(o.Status.PodIPs, n.Status.PodIPs) ||
		o.Status.Phase != n.Status.Phase ||
		podutils.IsPodReady(o) != podutils.IsPodReady(n) ||
		(o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) ||
		!apiequality.Semantic.DeepEqual(o.Labels, n.Labels) ||
		o.Spec.Hostname != n.Spec.Hostname || o.Spec.Subdomain != n.Spec.Subdomain ||
		o.Spec.NodeName != n.Spec.NodeName ||
		!apiequality.Semantic.DeepEqual(o.Spec.Containers, n.Spec.Containers)
}
