// Package controllerrevision is the registry of apps/v1 controllerrevisions: the immutable snapshots of
// a StatefulSet's or DaemonSet's template that their rollouts and `kubectl rollout undo` use.
package controllerrevision

import (
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rayctl/rayctl/pkg/apiserver/registry"
	"github.com/rayctl/rayctl/pkg/apiserver/validation"
)

// Resource describes controllerrevisions to the shared store.
var Resource = &registry.Resource{
	Resource:       appsv1.Resource("controllerrevisions"),
	Singular:       "controllerrevision",
	Version:        "v1",
	Kind:           "ControllerRevision",
	New:            func() runtime.Object { return &appsv1.ControllerRevision{} },
	NewList:        func() runtime.Object { return &appsv1.ControllerRevisionList{} },
	Namespaced:     true,
	Validate:       registry.Validator(validation.ValidateControllerRevision),
	ValidateUpdate: registry.UpdateValidator(validation.ValidateControllerRevisionUpdate),
}
