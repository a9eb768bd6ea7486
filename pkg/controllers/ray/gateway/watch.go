package gateway

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// gatewaysOfClass maps a GatewayClass to the Gateways of that class.
func (r *reconciler) gatewaysOfClass(ctx context.Context, o client.Object) []reconcile.Request {
	return r.gatewaysWhere(ctx, func(gw *gwv1.Gateway) bool { return string(gw.Spec.GatewayClassName) == o.GetName() })
}

// allGateways maps anything to every Gateway (ReferenceGrants are few and rarely change).
func (r *reconciler) allGateways(ctx context.Context, _ client.Object) []reconcile.Request {
	return r.gatewaysWhere(ctx, func(*gwv1.Gateway) bool { return true })
}

func (r *reconciler) gatewaysWhere(ctx context.Context, keep func(*gwv1.Gateway) bool) []reconcile.Request {
	list := &gwv1.GatewayList{}
	if err := r.client.List(ctx, list); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if keep(&list.Items[i]) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return out
}

// gatewaysOfRoute maps an HTTPRoute to the Gateways it names, and those whose status entries it carries
// (so a Gateway it left removes its entry).
func (r *reconciler) gatewaysOfRoute(_ context.Context, o client.Object) []reconcile.Request {
	rt, ok := o.(*gwv1.HTTPRoute)
	if !ok {
		return nil
	}
	seen := map[types.NamespacedName]bool{}
	var out []reconcile.Request
	add := func(ref gwv1.ParentReference) {
		if ref.Group != nil && *ref.Group != gwv1.GroupName || ref.Kind != nil && *ref.Kind != "Gateway" {
			return
		}
		key := types.NamespacedName{Namespace: rt.Namespace, Name: string(ref.Name)}
		if ref.Namespace != nil {
			key.Namespace = string(*ref.Namespace)
		}
		if !seen[key] {
			seen[key] = true
			out = append(out, reconcile.Request{NamespacedName: key})
		}
	}
	for _, ref := range rt.Spec.ParentRefs {
		add(ref)
	}
	for _, s := range rt.Status.Parents {
		if s.ControllerName == ControllerName {
			add(s.ParentRef)
		}
	}
	return out
}

// gatewaysOfService maps a Service to the Gateway owning it (the proxy's) and to the Gateways of the
// routes that name it as a backend.
func (r *reconciler) gatewaysOfService(ctx context.Context, o client.Object) []reconcile.Request {
	var out []reconcile.Request
	if owner := metav1.GetControllerOf(o); owner != nil && owner.Kind == "Gateway" {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: owner.Name}})
	}
	if _, ok := o.(*corev1.Service); !ok {
		return out
	}
	routes := &gwv1.HTTPRouteList{}
	if err := r.client.List(ctx, routes); err != nil {
		return out
	}
	for i := range routes.Items {
		rt := &routes.Items[i]
		if namesService(rt, o.GetNamespace(), o.GetName()) {
			out = append(out, r.gatewaysOfRoute(ctx, rt)...)
		}
	}
	return out
}

// namesService reports whether rt refers to the Service ns/name (a backend or a mirror).
func namesService(rt *gwv1.HTTPRoute, ns, name string) bool {
	return slices.Contains(serviceRefs(rt), types.NamespacedName{Namespace: ns, Name: name})
}
