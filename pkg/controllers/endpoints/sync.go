package endpoints

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// sync brings one Service's Endpoints and EndpointSlices in line with its pods.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	svc, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return errors.Join(c.deleteEndpoints(ctx, ns, name), c.syncSlices(ctx, ns, name, nil))
	}
	if err != nil {
		return err
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return c.syncSlices(ctx, ns, name, nil)
	}
	if len(svc.Spec.Selector) == 0 {
		return nil
	}
	pods, err := c.pods.Pods(ns).List(labels.SelectorFromValidatedSet(svc.Spec.Selector))
	if err != nil {
		return err
	}
	return errors.Join(c.syncEndpoints(ctx, svc, desiredSubsets(svc, pods)), c.syncSlices(ctx, ns, name, desiredSlices(svc, pods)))
}

func (c *Controller) deleteEndpoints(ctx context.Context, ns, name string) error {
	if _, err := c.endpoints.Endpoints(ns).Get(name); apierrors.IsNotFound(err) {
		return nil
	}
	err := c.client.CoreV1().Endpoints(ns).Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (c *Controller) syncEndpoints(ctx context.Context, svc *corev1.Service, subsets []corev1.EndpointSubset) error {
	want := serviceLabels(svc)
	cur, err := c.endpoints.Endpoints(svc.Namespace).Get(svc.Name)
	if apierrors.IsNotFound(err) {
		ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Namespace: svc.Namespace, Labels: want}, Subsets: subsets}
		_, err = c.client.CoreV1().Endpoints(svc.Namespace).Create(ctx, ep, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	if apiequality.Semantic.DeepEqual(cur.Subsets, subsets) && apiequality.Semantic.DeepEqual(cur.Labels, want) {
		return nil
	}
	ep := cur.DeepCopy()
	ep.Labels, ep.Subsets = want, subsets
	_, err = c.client.CoreV1().Endpoints(svc.Namespace).Update(ctx, ep, metav1.UpdateOptions{})
	return err
}

// syncSlices makes the managed slices of Service ns/name exactly want: same-named ones are updated when they
// differ, missing ones created, the rest deleted.
func (c *Controller) syncSlices(ctx context.Context, ns, name string, want []*discoveryv1.EndpointSlice) error {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: ManagedBy})
	existing, err := c.slices.EndpointSlices(ns).List(sel)
	if err != nil {
		return err
	}
	cur := map[string]*discoveryv1.EndpointSlice{}
	for _, s := range existing {
		cur[s.Name] = s
	}
	api := c.client.DiscoveryV1().EndpointSlices(ns)
	var errs []error
	for _, w := range want {
		old, ok := cur[w.Name]
		delete(cur, w.Name)
		switch {
		case !ok:
			if _, err := api.Create(ctx, w, metav1.CreateOptions{}); err != nil {
				errs = append(errs, err)
			}
		case !sliceEqual(old, w):
			s := old.DeepCopy()
			s.Labels, s.OwnerReferences, s.Endpoints, s.Ports = w.Labels, w.OwnerReferences, w.Endpoints, w.Ports
			if s.AddressType != w.AddressType {
				// The address type cannot change; replace the slice.
				errs = append(errs, api.Delete(ctx, s.Name, metav1.DeleteOptions{}))
				continue
			}
			if _, err := api.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for n := range cur {
		if err := api.Delete(ctx, n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func sliceEqual(a, b *discoveryv1.EndpointSlice) bool {
	return a.AddressType == b.AddressType &&
		apiequality.Semantic.DeepEqual(a.Labels, b.Labels) &&
		apiequality.Semantic.DeepEqual(a.OwnerReferences, b.OwnerReferences) &&
		apiequality.Semantic.DeepEqual(a.Endpoints, b.Endpoints) &&
		apiequality.Semantic.DeepEqual(a.Ports, b.Ports)
}
