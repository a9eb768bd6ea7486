// Package endpoints is the registry of core/v1 endpoints.
package endpoints

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rayctl/rayctl/pkg/apiserver/registry"
	"github.com/rayctl/rayctl/pkg/apiserver/validation"
)

// Resource describes endpoints to the shared store.
var Resource = &registry.Resource{
	Resource:            corev1.Resource("endpoints"),
	Singular:            "endpoints",
	Version:             "v1",
	Kind:                "Endpoints",
	New:                 func() runtime.Object { return &corev1.Endpoints{} },
	NewList:             func() runtime.Object { return &corev1.EndpointsList{} },
	Namespaced:          true,
	AllowCreateOnUpdate: true,
	Validate:            registry.Validator(validation.ValidateEndpoints),
	ValidateUpdate:      registry.UpdateValidator(validation.ValidateEndpointsUpdate),
	ShortNames:          []string{"ep"},
}
