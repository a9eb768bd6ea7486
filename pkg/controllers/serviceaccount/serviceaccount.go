// Package serviceaccount keeps a "default" ServiceAccount in every namespace, as kube-controller-manager's
// serviceaccounts controller does: it is created with the namespace and recreated if deleted, except in
// namespaces being deleted.
package serviceaccount

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rayctl/rayctl/pkg/controllers/manager"
)

// Name is the controller's name, in logs and metrics.
const Name = "serviceaccount"

// DefaultName is the name of the ServiceAccount every namespace gets.
const DefaultName = "default"

// Reconciler ensures the default ServiceAccount of one namespace.
type Reconciler struct {
	// Client reads through the manager's cache and writes to the API server.
	Client client.Client
}

// Setup registers the controller with mgr: it watches namespaces, and ServiceAccounts named "default"
// mapped to their namespace.
func Setup(mgr ctrl.Manager) error {
	r := &Reconciler{Client: mgr.GetClient()}
	isDefault := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == DefaultName })
	toNamespace := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetNamespace()}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		For(&corev1.Namespace{}).
		Watches(&corev1.ServiceAccount{}, toNamespace, builder.WithPredicates(isDefault)).
		Complete(r)
}

// Run runs the controller alone, with a manager of its own, until ctx ends. rayctl runs it even when the
// other controllers are left to an external operator, since every cluster has it.
func Run(ctx context.Context, cfg *rest.Config) error {
	return manager.RunStandalone(ctx, cfg, Setup)
}

// Reconcile creates the default ServiceAccount of the namespace req names when it is missing.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ns := &corev1.Namespace{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: req.Name}, ns); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating {
		return reconcile.Result{}, nil
	}
	sa := &corev1.ServiceAccount{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: DefaultName}, sa)
	if err == nil || !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	sa = &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: DefaultName}}
	err = r.Client.Create(ctx, sa)
	switch {
	case err == nil, apierrors.IsAlreadyExists(err):
		return reconcile.Result{}, nil
	case apierrors.IsNotFound(err), apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		// The namespace went away or began terminating in the meantime.
		return reconcile.Result{}, nil
	default:
		return reconcile.Result{}, fmt.Errorf("creating %s/%s: %w", ns.Name, DefaultName, err)
	}
}
