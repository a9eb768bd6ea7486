// Package runtimeclass is the registry of node.k8s.io/v1 runtimeclasses (cluster-scoped): each names a
// runtime handler of the node that a pod's spec.runtimeClassName may ask for.
package runtimeclass

import (
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rayctl/rayctl/pkg/apiserver/registry"
	"github.com/rayctl/rayctl/pkg/apiserver/validation"
)

// Resource describes runtimeclasses to the shared store.
var Resource = &registry.Resource{
	Resource:       nodev1.Resource("runtimeclasses"),
	Singular:       "runtimeclass",
	Version:        "v1",
	Kind:           "RuntimeClass",
	New:            func() runtime.Object { return &nodev1.RuntimeClass{} },
	NewList:        func() runtime.Object { return &nodev1.RuntimeClassList{} },
	Validate:       registry.Validator(validation.ValidateRuntimeClass),
	ValidateUpdate: registry.UpdateValidator(validation.ValidateRuntimeClassUpdate),
}
