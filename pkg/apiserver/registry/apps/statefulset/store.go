// Package statefulset is the registry of apps/v1 statefulsets (with status and scale).
package statefulset

import (
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rayctl/rayctl/pkg/apiserver/registry"
	"github.com/rayctl/rayctl/pkg/apiserver/validation"
)

// Resource describes statefulsets to the shared store.
var Resource = &registry.Resource{
	Resource:             appsv1.Resource("statefulsets"),
	Singular:             "statefulset",
	Version:              "v1",
	Kind:                 "StatefulSet",
	New:                  func() runtime.Object { return &appsv1.StatefulSet{} },
	NewList:              func() runtime.Object { return &appsv1.StatefulSetList{} },
	Namespaced:           true,
	HasStatus:            true,
	HasScale:             true,
	Validate:             registry.Validator(validation.ValidateStatefulSet),
	ValidateUpdate:       registry.UpdateValidator(validation.ValidateStatefulSetUpdate),
	ValidateStatusUpdate: registry.UpdateValidator(validation.ValidateStatefulSetStatusUpdate),
	ShortNames:           []string{"sts"},
	Categories:           []string{"all"},
}
