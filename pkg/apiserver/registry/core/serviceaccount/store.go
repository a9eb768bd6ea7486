// Package serviceaccount is the registry of core/v1 serviceaccounts.
package serviceaccount

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rayctl/rayctl/pkg/apiserver/registry"
	"github.com/rayctl/rayctl/pkg/apiserver/validation"
)

// Resource describes serviceaccounts to the shared store.
var Resource = &registry.Resource{
	Resource:       corev1.Resource("serviceaccounts"),
	Singular:       "serviceaccount",
	Version:        "v1",
	Kind:           "ServiceAccount",
	New:            func() runtime.Object { return &corev1.ServiceAccount{} },
	NewList:        func() runtime.Object { return &corev1.ServiceAccountList{} },
	Namespaced:     true,
	Validate:       registry.Validator(validation.ValidateServiceAccount),
	ValidateUpdate: registry.UpdateValidator(validation.ValidateServiceAccountUpdate),
	ShortNames:     []string{"sa"},
}
