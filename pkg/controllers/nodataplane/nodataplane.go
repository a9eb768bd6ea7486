// Package nodataplane says out loud what rayctl stores but does not act on: an Ingress routes no traffic
// (no ingress controller runs), a NetworkPolicy restricts none where the pod network does not enforce
// policies (pods on the host's network, the fake runtime), and the Gateway API's GatewayClasses, Gateways, HTTPRoutes and GRPCRoutes are claimed by no
// Gateway controller. Each such object gets a Warning event when it is created or its spec changes, so
// that `kubectl describe` shows why traffic does not follow it.
//
// The Gateway API kinds are left as a cluster without a Gateway controller leaves them: their status is
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
	messageGateway = "rayctl runs no Gateway API controller: this %s is stored and validated, but no controller " +
		"accepts it or routes traffic by it, and its status stays as the API defaults it (reach services with " +
		"`kubectl port-forward` or the API server's services/NAME:PORT/proxy)"
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
}

// Reconcile records the Warning on the object, unless it is gone or going.
func (w *warner) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj := w.new()
	if err := w.client.Get(ctx, req.NamespacedName, obj); err != nil || obj.GetDeletionTimestamp() != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	w.recorder.Event(obj, corev1.EventTypeWarning, w.reason, w.message)
	return reconcile.Result{}, nil
}
