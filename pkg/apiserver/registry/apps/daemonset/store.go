// Package daemonset is the registry of apps/v1 daemonsets (with status).
package daemonset

import (
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rayctl/rayctl/pkg/apiserver/registry"
	"github.com/rayctl/rayctl/pkg/apiserver/validation"
)

// Resource describes daemonsets to the shared store.
var Resource = &registry.Resource{
	Resource:             appsv1.Resource("daemonsets"),
	Singular:             "daemonset",
	Version:              "v1",
	Kind:                 "DaemonSet",
	New:                  func() runtime.Object { return &appsv1.DaemonSet{} },
	NewList:              func() runtime.Object { return &appsv1.DaemonSetList{} },
	Namespaced:           true,
	HasStatus:            true,
	Validate:             registry.Validator(validation.ValidateDaemonSet),
	ValidateUpdate:       registry.UpdateValidator(validation.ValidateDaemonSetUpdate),
	ValidateStatusUpdate: registry.UpdateValidator(validation.ValidateDaemonSetStatusUpdate),
	ShortNames:           []string{"ds"},
	Categories:           []string{"all"},
}
