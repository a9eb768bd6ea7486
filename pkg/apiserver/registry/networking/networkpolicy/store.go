// Package networkpolicy is the registry of networking.k8s.io/v1 networkpolicies. rayctl stores them;
// pkg/netpolicy enforces them in the pod network.
package networkpolicy

import (
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rayctl/rayctl/pkg/apiserver/registry"
	"github.com/rayctl/rayctl/pkg/apiserver/validation"
)

// Resource describes networkpolicies to the shared store.
var Resource = &registry.Resource{
	Resource:       networkingv1.Resource("networkpolicies"),
	Singular:       "networkpolicy",
	Version:        "v1",
	Kind:           "NetworkPolicy",
	New:            func() runtime.Object { return &networkingv1.NetworkPolicy{} },
	NewList:        func() runtime.Object { return &networkingv1.NetworkPolicyList{} },
	Namespaced:     true,
	Validate:       registry.Validator(validation.ValidateNetworkPolicy),
	ValidateUpdate: registry.UpdateValidator(validation.ValidateNetworkPolicyUpdate),
	ShortNames:     []string{"netpol"},
}
