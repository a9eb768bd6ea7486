// Package nodataplane says out loud what rayctl stores but does not act on: an Ingress routes no traffic
// (no ingress controller runs), a NetworkPolicy restricts none where the pod network does not enforce
// policies (pods on the host's network, the fake runtime), and the Gateway API's GatewayClasses, Gateways,
// HTTPRoutes and GRPCRoutes that rayctl's own Gateway controller (pkg/controllers/ray/gateway) does not claim
// (a GatewayClass naming another controllerName, the Gateways of such a class, routes none of whose
// parents is a Gateway of rayctl's, every GRPCRoute) are claimed by no Gateway controller. Each such
// object gets a Warning event when it is created or its spec changes, so that `kubectl describe` shows
// why traffic does not follow it.
//
// The unclaimed Gateway API kinds are left as a cluster without their Gateway controller leaves them: their status is
// what the CRDs default it to (a Gateway's Accepted and Programmed conditions Unknown, reason Pending,
// "Waiting for controller"; a GatewayClass's Accepted likewise; a route lists no parents). Writing
// Accepted=False would claim a GatewayClass whose controllerName names someone else's controller, which
// the Gateway API leaves to that controller alone.
package nodataplane

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rayctl/rayctl/pkg/controllers/chainhooks"
	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
	"github.com/rayctl/rayctl/pkg/controllers/ray/gateway"
)

// Name is the controller's name, in logs and metrics.
const Name = "no-data-plane"

// The Warning events' reasons and messages.
const (
	ReasonIngress       = "NoIngressController"
	ReasonNetworkPolicy = "NetworkPolicyNotEnforced"
	ReasonGateway       = "NoGatewayController"

	messageIngress = "rayctl runs no ingress controller: this Ingress is stored, but no traffic is routed by it " +
		"(reach services with `kubectl port-forward` or the API server's services/NAME:PORT/proxy)"
	messageNetworkPolicy = "rayctl's pods share the host's network here, where NetworkPolicies cannot be enforced: this one " +
		"is stored, but traffic to and from the pods it selects is not restricted"
	messageGateway = "rayctl runs no Gateway API controller for this %s: it is stored and validated, but no controller " +
		"accepts it or routes traffic by it, and its status stays as the API defaults it (rayctl's own Gateway " +
		"controller claims GatewayClasses whose controllerName is " + string(gateway.ControllerName) + " and their " +
		"Gateways' HTTPRoutes; else reach services with `kubectl port-forward` or the API server's services/NAME:PORT/proxy)"
)

// GatewayGroupVersion is the Gateway API version whose kinds get the NoGatewayController warning.
var GatewayGroupVersion = schema.GroupVersion{Group: "gateway.networking.k8s.io", Version: "v1"}

// GatewayKinds are the Gateway API kinds that would need a Gateway controller to mean anything
// (ReferenceGrant only permits references, so it needs no warning).
var GatewayKinds = []string{"GatewayClass", "Gateway", "HTTPRoute", "GRPCRoute"}

// gatewayObject is an empty object of a Gateway API kind, read unstructured (rayctl has no Go types for them).
func gatewayObject(kind string) client.Object {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(GatewayGroupVersion.WithKind(kind))
	return u
}

// Setup registers one controller per kind with mgr, each warning on create and on spec changes.
func Setup(mgr ctrl.Manager, env ctrlset.Env) error {
	type warned struct {
		name            string
		obj             client.Object
		reason, message string
	}
	kinds := []warned{{ReasonIngress, &networkingv1.Ingress{}, ReasonIngress, messageIngress}}
	if !env.NetworkPolicyEnforced {
		// Where the pod network enforces them (pkg/netpolicy), policies need no warning.
		kinds = append(kinds, warned{ReasonNetworkPolicy, &networkingv1.NetworkPolicy{}, ReasonNetworkPolicy, messageNetworkPolicy})
	}
	for _, kind := range GatewayKinds {
		// The Gateway API is served only where its CRDs are installed (rayctl up --gateway-api, or by
		// the user): a kind the API server does not serve at start gets no watch.
		if _, err := mgr.GetRESTMapper().RESTMapping(GatewayGroupVersion.WithKind(kind).GroupKind(), GatewayGroupVersion.Version); meta.IsNoMatchError(err) {
			continue
		} else if err != nil {
			return fmt.Errorf("is the Gateway API's %s served: %w", kind, err)
		}
		kinds = append(kinds, warned{ReasonGateway + "-" + strings.ToLower(kind), gatewayObject(kind), ReasonGateway, fmt.Sprintf(messageGateway, kind)})
	}
	for _, kind := range kinds {
		obj := kind.obj
		w := &warner{client: mgr.GetClient(), recorder: env.Recorder, reason: kind.reason, message: kind.message,
			new: func() client.Object { return obj.DeepCopyObject().(client.Object) }}
		if kind.reason == ReasonGateway {
			w.claimed = claimedByRayctl
		}
		if err := env.Hooks.Sub(kind.name).NewControllerManagedBy(mgr).
			For(kind.obj, chainhooks.Named("generation changed", predicate.GenerationChangedPredicate{})).
			Complete(w); err != nil {
			return err
		}
	}
	return nil
}

// warner records one kind's Warning on the object a request names.
type warner struct {
	client          client.Client
	recorder        record.EventRecorder
	new             func() client.Object
	reason, message string
	// claimed, when set, says whether another controller of rayctl's acts on the object (no Warning then).
	claimed func(ctx context.Context, c client.Client, obj client.Object) bool
}

// Reconcile records the Warning on the object, unless it is gone or going.
func (w *warner) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj := w.new()
	if err := w.client.Get(ctx, req.NamespacedName, obj); err != nil || obj.GetDeletionTimestamp() != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if w.claimed != nil && w.claimed(ctx, w.client, obj) {
		return reconcile.Result{}, nil
	}
	w.recorder.Event(obj, corev1.EventTypeWarning, w.reason, w.message)
	return reconcile.Result{}, nil
}

// claimedByRayctl reports whether rayctl's Gateway controller acts on a Gateway API object: a
// GatewayClass naming its controllerName, a Gateway of such a class, an HTTPRoute with such a Gateway
// among its parents.
func claimedByRayctl(ctx context.Context, c client.Client, obj client.Object) bool {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return false
	}
	classIsOurs := func(name string) bool {
		gc := gatewayObject("GatewayClass")
		if err := c.Get(ctx, client.ObjectKey{Name: name}, gc); err != nil {
			return false
		}
		cn, _, _ := unstructured.NestedString(gc.(*unstructured.Unstructured).Object, "spec", "controllerName")
		return cn == string(gateway.ControllerName)
	}
	gatewayIsOurs := func(ns, name string) bool {
		gw := gatewayObject("Gateway")
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, gw); err != nil {
			return false
		}
		class, _, _ := unstructured.NestedString(gw.(*unstructured.Unstructured).Object, "spec", "gatewayClassName")
		return classIsOurs(class)
	}
	switch u.GetKind() {
	case "GatewayClass":
		cn, _, _ := unstructured.NestedString(u.Object, "spec", "controllerName")
		return cn == string(gateway.ControllerName)
	case "Gateway":
		class, _, _ := unstructured.NestedString(u.Object, "spec", "gatewayClassName")
		return classIsOurs(class)
	case "HTTPRoute":
		refs, _, _ := unstructured.NestedSlice(u.Object, "spec", "parentRefs")
		for _, r := range refs {
			ref, _ := r.(map[string]any)
			if kind, ok := ref["kind"].(string); ok && kind != "Gateway" {
				continue
			}
			ns, _ := ref["namespace"].(string)
			if ns == "" {
				ns = u.GetNamespace()
			}
			if name, _ := ref["name"].(string); gatewayIsOurs(ns, name) {
				return true
			}
		}
	}
	return false
}
