// Package endpointslice is the registry of discovery.k8s.io/v1 endpointslices.
package endpointslice

import (
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rayctl/rayctl/pkg/apiserver/registry"
	"github.com/rayctl/rayctl/pkg/apiserver/validation"
)

// Resource describes endpointslices to the shared store.
var Resource = &registry.Resource{
	Resource:       discoveryv1.Resource("endpointslices"),
	Singular:       "endpointslice",
	Version:        "v1",
	Kind:           "EndpointSlice",
	New:            func() runtime.Object { return &discoveryv1.EndpointSlice{} },
	NewList:        func() runtime.Object { return &discoveryv1.EndpointSliceList{} },
	Namespaced:     true,
	Validate:       registry.Validator(validation.ValidateEndpointSlice),
	ValidateUpdate: registry.UpdateValidator(validation.ValidateEndpointSliceUpdate),
}
