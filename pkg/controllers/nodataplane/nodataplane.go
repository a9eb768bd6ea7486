// Package nodataplane says out loud what rayctl stores but does not act on: an Ingress routes no traffic
// (no ingress controller runs) and a NetworkPolicy restricts none (the pod network does not enforce
// policies). Each such object gets a Warning event when it is created or its spec changes, so that
// `kubectl describe` shows why traffic does not follow it.
package nodataplane

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rayctl/rayctl/pkg/controllers/manager"
)

// Name is the controller's name, in logs and metrics.
const Name = "no-data-plane"

// The Warning events' reasons and messages.
const (
	ReasonIngress       = "NoIngressController"
	ReasonNetworkPolicy = "NetworkPolicyNotEnforced"

	messageIngress = "rayctl runs no ingress controller: this Ingress is stored, but no traffic is routed by it " +
		"(reach services with `kubectl port-forward` or the API server's services/NAME:PORT/proxy)"
	messageNetworkPolicy = "rayctl's pod network does not enforce NetworkPolicies: this one is stored, but traffic " +
		"to and from the pods it selects is not restricted"
)

// Setup registers one controller per kind with mgr, each warning on create and on spec changes.
func Setup(mgr ctrl.Manager, env manager.Env) error {
	for _, kind := range []struct {
		obj             client.Object
		reason, message string
	}{
		{&networkingv1.Ingress{}, ReasonIngress, messageIngress},
		{&networkingv1.NetworkPolicy{}, ReasonNetworkPolicy, messageNetworkPolicy},
	} {
		obj := kind.obj
		w := &warner{client: mgr.GetClient(), recorder: env.Recorder, reason: kind.reason, message: kind.message,
			new: func() client.Object { return obj.DeepCopyObject().(client.Object) }}
		if err := ctrl.NewControllerManagedBy(mgr).
			Named(env.Name+"-"+kind.reason).
			For(kind.obj, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
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
