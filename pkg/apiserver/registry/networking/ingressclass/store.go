// Package ingressclass is the registry of networking.k8s.io/v1 ingressclasses (cluster-scoped).
package ingressclass

import (
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rayctl/rayctl/pkg/apiserver/registry"
	"github.com/rayctl/rayctl/pkg/apiserver/validation"
)

// Resource describes ingressclasses to the shared store.
var Resource = &registry.Resource{
	Resource:       networkingv1.Resource("ingressclasses"),
	Singular:       "ingressclass",
	Version:        "v1",
	Kind:           "IngressClass",
	New:            func() runtime.Object { return &networkingv1.IngressClass{} },
	NewList:        func() runtime.Object { return &networkingv1.IngressClassList{} },
	Validate:       registry.Validator(validation.ValidateIngressClass),
	ValidateUpdate: registry.UpdateValidator(validation.ValidateIngressClassUpdate),
}
