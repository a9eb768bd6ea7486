// Package lease is the registry of coordination.k8s.io/v1 leases (node heartbeats, leader election).
package lease

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rayctl/rayctl/pkg/apiserver/registry"
	"github.com/rayctl/rayctl/pkg/apiserver/validation"
)

// Resource describes leases to the shared store.
var Resource = &registry.Resource{
	Resource:       coordinationv1.Resource("leases"),
	Singular:       "lease",
	Version:        "v1",
	Kind:           "Lease",
	New:            func() runtime.Object { return &coordinationv1.Lease{} },
	NewList:        func() runtime.Object { return &coordinationv1.LeaseList{} },
	Namespaced:     true,
	Validate:       registry.Validator(validation.ValidateLease),
	ValidateUpdate: registry.UpdateValidator(validation.ValidateLeaseUpdate),
}
