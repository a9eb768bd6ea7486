// Package configmap is the registry of core/v1 configmaps.
package configmap

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rayctl/rayctl/pkg/apiserver/registry"
	"github.com/rayctl/rayctl/pkg/apiserver/validation"
)

// Resource describes configmaps to the shared store.
var Resource = &registry.Resource{
	Resource:       corev1.Resource("configmaps"),
	Singular:       "configmap",
	Version:        "v1",
	Kind:           "ConfigMap",
	New:            func() runtime.Object { return &corev1.ConfigMap{} },
	NewList:        func() runtime.Object { return &corev1.ConfigMapList{} },
	Namespaced:     true,
	Validate:       registry.Validator(validation.ValidateConfigMap),
	ValidateUpdate: registry.UpdateValidator(validation.ValidateConfigMapUpdate),
	ShortNames:     []string{"cm"},
}
