// Package rootca publishes the cluster's CA certificate as the ConfigMap kube-root-ca.crt (key ca.crt) in
// every namespace, as kube-controller-manager's root-ca-cert-publisher does: in-cluster clients read it
// from their service-account volume to trust the API server. The ConfigMap is created with the namespace,
// put back if changed, and recreated if deleted, except in namespaces being deleted.
package rootca

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rayctl/rayctl/pkg/controllers/manager"
)

// Name is the controller's name, in logs, metrics and --kube-controllers.
const Name = "root-ca-cert-publisher"

// ConfigMapName is the ConfigMap every namespace gets, and DataKey its key holding the CA.
const (
	ConfigMapName = "kube-root-ca.crt"
	DataKey       = "ca.crt"
)

// Reconciler keeps the kube-root-ca.crt ConfigMap of one namespace.
type Reconciler struct {
	// Client reads through the manager's cache and writes to the API server.
	Client client.Client
	// CA is the certificate published, in PEM.
	CA string
}

// Setup registers the controller with mgr: it watches namespaces, and ConfigMaps named kube-root-ca.crt
// mapped to their namespace. env.RootCA is what it publishes.
func Setup(mgr ctrl.Manager, env manager.Env) error {
	if len(env.RootCA) == 0 {
		return fmt.Errorf("%s: no root CA to publish", Name)
	}
	r := &Reconciler{Client: mgr.GetClient(), CA: string(env.RootCA)}
	isOurs := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == ConfigMapName })
	toNamespace := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetNamespace()}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		For(&corev1.Namespace{}).
		Watches(&corev1.ConfigMap{}, toNamespace, builder.WithPredicates(isOurs)).
		Complete(r)
}

// Reconcile creates the namespace's kube-root-ca.crt, or puts its data back to the CA.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ns := &corev1.Namespace{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: req.Name}, ns); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating {
		return reconcile.Result{}, nil
	}
	want := map[string]string{DataKey: r.CA}
	cm := &corev1.ConfigMap{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: ConfigMapName}, cm)
	switch {
	case err == nil:
		if len(cm.Data) == 1 && cm.Data[DataKey] == r.CA && len(cm.BinaryData) == 0 {
			return reconcile.Result{}, nil
		}
		cm.Data, cm.BinaryData = want, nil
		return reconcile.Result{}, client.IgnoreNotFound(r.Client.Update(ctx, cm))
	case !apierrors.IsNotFound(err):
		return reconcile.Result{}, err
	}
	cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: ConfigMapName}, Data: want}
	err = r.Client.Create(ctx, cm)
	switch {
	case err == nil, apierrors.IsAlreadyExists(err):
		return reconcile.Result{}, nil
	case apierrors.IsNotFound(err), apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		// The namespace went away or began terminating in the meantime.
		return reconcile.Result{}, nil
	default:
		return reconcile.Result{}, fmt.Errorf("creating %s/%s: %w", ns.Name, ConfigMapName, err)
	}
}
