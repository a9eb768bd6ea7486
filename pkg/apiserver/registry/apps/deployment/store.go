// Package deployment is the registry of apps/v1 deployments (with status and scale).
package deployment

import (
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rayctl/rayctl/pkg/apiserver/registry"
	"github.com/rayctl/rayctl/pkg/apiserver/validation"
)

// Resource describes deployments to the shared store.
var Resource = &registry.Resource{
	Resource:             appsv1.Resource("deployments"),
	Singular:             "deployment",
	Version:              "v1",
	Kind:                 "Deployment",
	New:                  func() runtime.Object { return &appsv1.Deployment{} },
	NewList:              func() runtime.Object { return &appsv1.DeploymentList{} },
	Namespaced:           true,
	HasStatus:            true,
	HasScale:             true,
	Validate:             registry.Validator(validation.ValidateDeployment),
	ValidateUpdate:       registry.UpdateValidator(validation.ValidateDeploymentUpdate),
	ValidateStatusUpdate: registry.UpdateValidator(validation.ValidateDeploymentStatusUpdate),
	ShortNames:           []string{"deploy"},
	Categories:           []string{"all"},
}
