// Package persistentvolumeclaim is the registry of core/v1 persistentvolumeclaims (with status).
package persistentvolumeclaim

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rayctl/rayctl/pkg/apiserver/registry"
	"github.com/rayctl/rayctl/pkg/apiserver/validation"
)

// Resource describes persistentvolumeclaims to the shared store.
var Resource = &registry.Resource{
	Resource:             corev1.Resource("persistentvolumeclaims"),
	Singular:             "persistentvolumeclaim",
	Version:              "v1",
	Kind:                 "PersistentVolumeClaim",
	New:                  func() runtime.Object { return &corev1.PersistentVolumeClaim{} },
	NewList:              func() runtime.Object { return &corev1.PersistentVolumeClaimList{} },
	Namespaced:           true,
	HasStatus:            true,
	PrepareForCreate:     pending,
	Validate:             registry.Validator(validation.ValidatePersistentVolumeClaim),
	ValidateUpdate:       registry.UpdateValidator(validation.ValidatePersistentVolumeClaimUpdate),
	ValidateStatusUpdate: registry.UpdateValidator(validation.ValidatePersistentVolumeClaimStatusUpdate),
	ShortNames:           []string{"pvc"},
}

// pending starts a new claim in phase Pending: no volume is bound to it yet.
func pending(_ context.Context, obj runtime.Object) {
	obj.(*corev1.PersistentVolumeClaim).Status.Phase = corev1.ClaimPending
}
