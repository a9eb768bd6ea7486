package endpoints

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Reconcile brings one Service's Endpoints and EndpointSlices in line with its pods. A write that
// raced the cache (a conflict, or an object already there) is tried again shortly, quietly: the watch
// brings the newer version.
func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	err := r.sync(ctx, req.Namespace, req.Name)
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		ctrl.LoggerFrom(ctx).V(2).Info("the cache was behind; retrying", "error", err.Error())
		return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, nil
	}
	return reconcile.Result{}, err
}

func (r *reconciler) sync(ctx context.Context, ns, name string) error {
	svc := &corev1.Service{}
	err := r.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, svc)
	if apierrors.IsNotFound(err) {
		return errors.Join(r.deleteEndpoints(ctx, ns, name), r.syncSlices(ctx, ns, name, nil))
	}
	if err != nil {
		return err
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return r.syncSlices(ctx, ns, name, nil)
	}
	if len(svc.Spec.Selector) == 0 {
		return nil
	}
	// The pods are only read (the desired objects copy what they use), so the cache's own are listed.
	list := &corev1.PodList{}
	if err := r.client.List(ctx, list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: labels.SelectorFromValidatedSet(svc.Spec.Selector)},
		client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	pods := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		pods[i] = &list.Items[i]
	}
	return errors.Join(r.syncEndpoints(ctx, svc, desiredSubsets(svc, pods)), r.syncSlices(ctx, ns, name, desiredSlices(svc, pods)))
}

func (r *reconciler) deleteEndpoints(ctx context.Context, ns, name string) error {
	ep := &corev1.Endpoints{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, ep); apierrors.IsNotFound(err) {
		return nil
	}
	return client.IgnoreNotFound(r.client.Delete(ctx, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}))
}

func (r *reconciler) syncEndpoints(ctx context.Context, svc *corev1.Service, subsets []corev1.EndpointSubset) error {
	want := serviceLabels(svc)
	cur := &corev1.Endpoints{}
	err := r.client.Get(ctx, client.ObjectKeyFromObject(svc), cur)
	if apierrors.IsNotFound(err) {
		return r.client.Create(ctx, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Namespace: svc.Namespace, Labels: want}, Subsets: subsets})
	}
	if err != nil {
		return err
	}
	if apiequality.Semantic.DeepEqual(cur.Subsets, subsets) && apiequality.Semantic.DeepEqual(cur.Labels, want) {
		return nil
	}
	ep := cur.DeepCopy()
	ep.Labels, ep.Subsets = want, subsets
	return r.client.Update(ctx, ep)
}

// syncSlices makes the managed slices of Service ns/name exactly want: same-named ones are updated when they
// differ; a wanted slice without one takes over a slice no longer wanted, of its address type, as
// Kubernetes' EndpointSlice controller reuses a slice it would delete (the placeholder of a Service
// without endpoints becomes its first slice in one update instead of a create and a delete); the rest
// are created, and what is left deleted.
func (r *reconciler) syncSlices(ctx context.Context, ns, name string, want []*discoveryv1.EndpointSlice) error {
	// The cache's own slices: only read (an update writes a copy).
	existing := &discoveryv1.EndpointSliceList{}
	if err := r.client.List(ctx, existing, client.InNamespace(ns),
		client.MatchingLabels{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: ManagedBy}, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	cur := map[string]*discoveryv1.EndpointSlice{}
	for i := range existing.Items {
		cur[existing.Items[i].Name] = &existing.Items[i]
	}
	var errs []error
	var unmatched []*discoveryv1.EndpointSlice
	for _, w := range want {
		old, ok := cur[w.Name]
		if !ok {
			unmatched = append(unmatched, w)
			continue
		}
		delete(cur, w.Name)
		errs = append(errs, r.updateSlice(ctx, old, w))
	}
	spare := slices.SortedFunc(maps.Values(cur), func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	for _, w := range unmatched {
		i := slices.IndexFunc(spare, func(s *discoveryv1.EndpointSlice) bool { return s.AddressType == w.AddressType })
		if i < 0 {
			errs = append(errs, r.client.Create(ctx, w))
			continue
		}
		old := spare[i]
		spare = slices.Delete(spare, i, i+1)
		errs = append(errs, r.updateSlice(ctx, old, w))
	}
	for _, s := range spare {
		errs = append(errs, client.IgnoreNotFound(r.client.Delete(ctx, s)))
	}
	return errors.Join(errs...)
}

// updateSlice gives slice old (a cache object, not changed) w's contents if they differ; a slice whose
// address type differs is deleted instead, since that cannot change (the next pass creates w).
func (r *reconciler) updateSlice(ctx context.Context, old, w *discoveryv1.EndpointSlice) error {
	if sliceEqual(old, w) {
		return nil
	}
	if old.AddressType != w.AddressType {
		return r.client.Delete(ctx, old)
	}
	s := old.DeepCopy()
	s.Labels, s.OwnerReferences, s.Endpoints, s.Ports = w.Labels, w.OwnerReferences, w.Endpoints, w.Ports
	return r.client.Update(ctx, s)
}

func sliceEqual(a, b *discoveryv1.EndpointSlice) bool {
	return a.AddressType == b.AddressType &&
		apiequality.Semantic.DeepEqual(a.Labels, b.Labels) &&
		apiequality.Semantic.DeepEqual(a.OwnerReferences, b.OwnerReferences) &&
		apiequality.Semantic.DeepEqual(a.Endpoints, b.Endpoints) &&
		apiequality.Semantic.DeepEqual(a.Ports, b.Ports)
}
