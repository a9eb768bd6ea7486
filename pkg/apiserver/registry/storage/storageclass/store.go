// Package storageclass is the registry of storage.k8s.io/v1 storageclasses (cluster-scoped).
package storageclass

import (
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rayctl/rayctl/pkg/apiserver/registry"
	"github.com/rayctl/rayctl/pkg/apiserver/validation"
)

// Resource describes storageclasses to the shared store.
var Resource = &registry.Resource{
	Resource:       storagev1.Resource("storageclasses"),
	Singular:       "storageclass",
	Version:        "v1",
	Kind:           "StorageClass",
	New:            func() runtime.Object { return &storagev1.StorageClass{} },
	NewList:        func() runtime.Object { return &storagev1.StorageClassList{} },
	Validate:       registry.Validator(validation.ValidateStorageClass),
	ValidateUpdate: registry.UpdateValidator(validation.ValidateStorageClassUpdate),
	ShortNames:     []string{"sc"},
}
