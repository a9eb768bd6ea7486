package namespace

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
)

// prepareForCreate makes a namespace Active, held by the "kubernetes" finalizer until it is emptied.
func prepareForCreate(ctx context.Context, obj runtime.Object) {
	ns := obj.(*corev1.Namespace)
	ns.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
	ns.Spec.Finalizers = []corev1.FinalizerName{corev1.FinalizerKubernetes}
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[corev1.LabelMetadataName] = ns.Name
}

// prepareForUpdate keeps spec.finalizers, which only namespaces/finalize changes, and the name label.
func prepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	ns, oldNs := obj.(*corev1.Namespace), old.(*corev1.Namespace)
	ns.Spec.Finalizers = oldNs.Spec.Finalizers
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[corev1.LabelMetadataName] = ns.Name
}

// shouldDeleteDuringUpdate keeps a Terminating namespace while spec.finalizers still holds it: only
// once the namespace controller has emptied it and removed "kubernetes" may an update remove it.
func shouldDeleteDuringUpdate(ctx context.Context, key string, obj, existing runtime.Object) bool {
	ns, ok := obj.(*corev1.Namespace)
	return ok && len(ns.Spec.Finalizers) == 0 && genericregistry.ShouldDeleteDuringUpdate(ctx, key, obj, existing)
}
