// Package persistentvolume is the registry of core/v1 persistentvolumes (cluster-scoped, with status).
package persistentvolume

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rayctl/rayctl/pkg/apiserver/registry"
	"github.com/rayctl/rayctl/pkg/apiserver/validation"
)

// Resource describes persistentvolumes to the shared store.
var Resource = &registry.Resource{
	Resource:             corev1.Resource("persistentvolumes"),
	Singular:             "persistentvolume",
	Version:              "v1",
	Kind:                 "PersistentVolume",
	New:                  func() runtime.Object { return &corev1.PersistentVolume{} },
	NewList:              func() runtime.Object { return &corev1.PersistentVolumeList{} },
	HasStatus:            true,
	PrepareForCreate:     pending,
	Validate:             registry.Validator(validation.ValidatePersistentVolume),
	ValidateUpdate:       registry.UpdateValidator(validation.ValidatePersistentVolumeUpdate),
	ValidateStatusUpdate: registry.UpdateValidator(validation.ValidatePersistentVolumeStatusUpdate),
	ShortNames:           []string{"pv"},
}

// pending starts a new volume in phase Pending, as kube-apiserver does; the binder makes it Available.
func pending(_ context.Context, obj runtime.Object) {
	obj.(*corev1.PersistentVolume).Status.Phase = corev1.VolumePending
}
