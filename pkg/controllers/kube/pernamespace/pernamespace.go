// Package pernamespace is the shape of kube-controller-manager's controllers that keep one named object
// in every namespace (the default ServiceAccount, the kube-root-ca.crt ConfigMap): a controller For
// Namespace that also watches objects of that name, mapped to their namespace, and brings the
// namespace's object back to what it should be, except in namespaces being deleted.
package pernamespace

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rayctl/rayctl/pkg/controllers/chainhooks"
	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
)

// SyncFunc makes the object of a live namespace what it should be (creating it with Create when it is
// missing), reading through c (the manager's cache) and writing to the API server.
type SyncFunc func(ctx context.Context, c client.Client, namespace string) error

// Setup registers the controller env names with mgr: For Namespace,
// Watches kind (objects called name, mapped to their namespace); each pass calls sync for a namespace
// that exists and is not being deleted.
func Setup(mgr ctrl.Manager, env ctrlset.Env, kind client.Object, name string, sync SyncFunc) error {
	h := env.Hooks
	r := &reconciler{client: mgr.GetClient(), sync: sync}
	named := chainhooks.Named("named "+name, predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == name }))
	toNamespace := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetNamespace()}}}
	})
	return h.NewControllerManagedBy(mgr).
		For(&corev1.Namespace{}).
		Watches(kind, "its namespace", toNamespace, named).
		Complete(r)
}

type reconciler struct {
	client client.Client
	sync   SyncFunc
}

// Reconcile syncs the object of the namespace req names, unless the namespace is gone or going.
func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ns := &corev1.Namespace{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: req.Name}, ns); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, r.sync(ctx, r.client, ns.Name)
}

// Create creates obj. That it exists already, or that its namespace went away or began terminating in
// the meantime, is no error: there is nothing more to do.
func Create(ctx context.Context, c client.Client, obj client.Object) error {
	err := c.Create(ctx, obj)
	switch {
	case err == nil, apierrors.IsAlreadyExists(err), apierrors.IsNotFound(err),
		apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return nil
	default:
		return fmt.Errorf("creating %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
}
