// Package ingress is the registry of networking.k8s.io/v1 ingresses (with status). rayctl stores them; no
// ingress controller acts on them.
package ingress

import (
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rayctl/rayctl/pkg/apiserver/registry"
	"github.com/rayctl/rayctl/pkg/apiserver/validation"
)

// Resource describes ingresses to the shared store.
var Resource = &registry.Resource{
	Resource:             networkingv1.Resource("ingresses"),
	Singular:             "ingress",
	Version:              "v1",
	Kind:                 "Ingress",
	New:                  func() runtime.Object { return &networkingv1.Ingress{} },
	NewList:              func() runtime.Object { return &networkingv1.IngressList{} },
	Namespaced:           true,
	HasStatus:            true,
	Validate:             registry.Validator(validation.ValidateIngress),
	ValidateUpdate:       registry.UpdateValidator(validation.ValidateIngressUpdate),
	ValidateStatusUpdate: registry.UpdateValidator(validation.ValidateIngressStatusUpdate),
	ShortNames:           []string{"ing"},
}
