// Package serviceaccount keeps a "default" ServiceAccount in every namespace, as kube-controller-manager's
// serviceaccounts controller does: it is created with the namespace and recreated if deleted, except in
// namespaces being deleted.
package serviceaccount

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
	"github.com/rayctl/rayctl/pkg/controllers/kube/pernamespace"
)

// Name is the controller's name, in logs and metrics.
const Name = "serviceaccount"

// DefaultName is the name of the ServiceAccount every namespace gets.
const DefaultName = "default"

// Setup registers the controller with mgr: it watches namespaces, and ServiceAccounts named "default"
// mapped to their namespace.
func Setup(mgr ctrl.Manager, env ctrlset.Env) error {
	return pernamespace.Setup(mgr, env, &corev1.ServiceAccount{}, DefaultName, sync)
}

// Run runs the controller alone, with a manager of its own, until ctx ends. rayctl runs it even when the
// other controllers are left to an external operator, since every cluster has it.
func Run(ctx context.Context, cfg *rest.Config) error {
	return ctrlset.RunStandalone(ctx, cfg, Setup, ctrlset.Env{Name: Name})
}

// sync creates the default ServiceAccount of namespace when it is missing.
func sync(ctx context.Context, c client.Client, namespace string) error {
	err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: DefaultName}, &corev1.ServiceAccount{})
	if err == nil || !apierrors.IsNotFound(err) {
		return err
	}
	return pernamespace.Create(ctx, c, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: DefaultName}})
}
