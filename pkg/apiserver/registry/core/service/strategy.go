package service

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// prepareForUpdate keeps the allocated ClusterIP when an update (such as a client's apply that never
// mentions it) leaves it empty, as the real API server does.
func prepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	svc, oldSvc := obj.(*corev1.Service), old.(*corev1.Service)
	if svc.Spec.ClusterIP == "" && svc.Spec.Type != corev1.ServiceTypeExternalName {
		svc.Spec.ClusterIP = oldSvc.Spec.ClusterIP
	}
	if len(svc.Spec.ClusterIPs) == 0 && svc.Spec.Type != corev1.ServiceTypeExternalName {
		svc.Spec.ClusterIPs = oldSvc.Spec.ClusterIPs
	}
}
