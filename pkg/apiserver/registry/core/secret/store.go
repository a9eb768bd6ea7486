// Package secret is the registry of core/v1 secrets.
package secret

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rayctl/rayctl/pkg/apiserver/registry"
	"github.com/rayctl/rayctl/pkg/apiserver/validation"
)

// Resource describes secrets to the shared store.
var Resource = &registry.Resource{
	Resource:         corev1.Resource("secrets"),
	Singular:         "secret",
	Version:          "v1",
	Kind:             "Secret",
	New:              func() runtime.Object { return &corev1.Secret{} },
	NewList:          func() runtime.Object { return &corev1.SecretList{} },
	Namespaced:       true,
	PrepareForCreate: mergeStringData,
	PrepareForUpdate: func(ctx context.Context, obj, old runtime.Object) { mergeStringData(ctx, obj) },
	Validate:         registry.Validator(validation.ValidateSecret),
	ValidateUpdate:   registry.UpdateValidator(validation.ValidateSecretUpdate),
	SelectableFields: map[string]func(runtime.Object) string{
		"type": func(o runtime.Object) string { return string(o.(*corev1.Secret).Type) },
	},
}
