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
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
	"github.com/rayctl/rayctl/pkg/controllers/kube/pernamespace"
)

// Name is the controller's name, in logs, metrics and --kube-controllers.
const Name = "root-ca-cert-publisher"

// ConfigMapName is the ConfigMap every namespace gets, and DataKey its key holding the CA.
const (
	ConfigMapName = "kube-root-ca.crt"
	DataKey       = "ca.crt"
)

// Setup registers the controller with mgr: it watches namespaces, and ConfigMaps named kube-root-ca.crt
// mapped to their namespace. env.RootCA is what it publishes.
func Setup(mgr ctrl.Manager, env ctrlset.Env) error {
	if len(env.RootCA) == 0 {
		return fmt.Errorf("%s: no root CA to publish", Name)
	}
	return pernamespace.Setup(mgr, env, &corev1.ConfigMap{}, ConfigMapName, publisher(string(env.RootCA)))
}

// publisher makes a namespace's kube-root-ca.crt hold ca, and only that.
func publisher(ca string) pernamespace.SyncFunc {
	want := map[string]string{DataKey: ca}
	return func(ctx context.Context, c client.Client, namespace string) error {
		cm := &corev1.ConfigMap{}
		err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ConfigMapName}, cm)
		switch {
		case apierrors.IsNotFound(err):
			return pernamespace.Create(ctx, c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: ConfigMapName}, Data: want})
		case err != nil:
			return err
		case len(cm.Data) == 1 && cm.Data[DataKey] == ca && len(cm.BinaryData) == 0:
			return nil
		}
		cm.Data, cm.BinaryData = want, nil
		return client.IgnoreNotFound(c.Update(ctx, cm))
	}
}
