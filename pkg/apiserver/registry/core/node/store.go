// Package node is the registry of core/v1 nodes (cluster-scoped, with status).
package node

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rayctl/rayctl/pkg/apiserver/registry"
	"github.com/rayctl/rayctl/pkg/apiserver/validation"
)

// Resource describes nodes to the shared store.
var Resource = &registry.Resource{
	Resource:       corev1.Resource("nodes"),
	Singular:       "node",
	Version:        "v1",
	Kind:           "Node",
	New:            func() runtime.Object { return &corev1.Node{} },
	NewList:        func() runtime.Object { return &corev1.NodeList{} },
	HasStatus:      true,
	Validate:       registry.Validator(validation.ValidateNode),
	ValidateUpdate: registry.UpdateValidator(validation.ValidateNodeUpdate),
	SelectableFields: map[string]func(runtime.Object) string{
		"spec.unschedulable": func(o runtime.Object) string {
			if o.(*corev1.Node).Spec.Unschedulable {
				return "true"
			}
			return "false"
		},
	},
	ShortNames: []string{"no"},
}
