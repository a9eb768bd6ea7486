// Package replicaset is the registry of apps/v1 replicasets (with status and scale).
package replicaset

import (
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rayctl/rayctl/pkg/apiserver/registry"
	"github.com/rayctl/rayctl/pkg/apiserver/validation"
)

// Resource describes replicasets to the shared store.
var Resource = &registry.Resource{
	Resource:             appsv1.Resource("replicasets"),
	Singular:             "replicaset",
	Version:              "v1",
	Kind:                 "ReplicaSet",
	New:                  func() runtime.Object { return &appsv1.ReplicaSet{} },
	NewList:              func() runtime.Object { return &appsv1.ReplicaSetList{} },
	Namespaced:           true,
	HasStatus:            true,
	HasScale:             true,
	Validate:             registry.Validator(validation.ValidateReplicaSet),
	ValidateUpdate:       registry.UpdateValidator(validation.ValidateReplicaSetUpdate),
	ValidateStatusUpdate: registry.UpdateValidator(validation.ValidateReplicaSetStatusUpdate),
	ShortNames:           []string{"rs"},
	Categories:           []string{"all"},
}
