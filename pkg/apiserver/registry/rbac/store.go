// Package rbac is the registry of rbac.authorization.k8s.io/v1 roles, cluster roles and their bindings.
package rbac

import (
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rayctl/rayctl/pkg/apiserver/registry"
	"github.com/rayctl/rayctl/pkg/apiserver/validation"
)

// Roles describes roles to the shared store.
var Roles = &registry.Resource{
	Resource:       rbacv1.Resource("roles"),
	Singular:       "role",
	Version:        "v1",
	Kind:           "Role",
	New:            func() runtime.Object { return &rbacv1.Role{} },
	NewList:        func() runtime.Object { return &rbacv1.RoleList{} },
	Namespaced:     true,
	Validate:       registry.Validator(validation.ValidateRole),
	ValidateUpdate: registry.UpdateValidator(validation.ValidateRoleUpdate),
}

// ClusterRoles describes cluster roles to the shared store.
var ClusterRoles = &registry.Resource{
	Resource:       rbacv1.Resource("clusterroles"),
	Singular:       "clusterrole",
	Version:        "v1",
	Kind:           "ClusterRole",
	New:            func() runtime.Object { return &rbacv1.ClusterRole{} },
	NewList:        func() runtime.Object { return &rbacv1.ClusterRoleList{} },
	Validate:       registry.Validator(validation.ValidateClusterRole),
	ValidateUpdate: registry.UpdateValidator(validation.ValidateClusterRoleUpdate),
}

// RoleBindings describes role bindings to the shared store.
var RoleBindings = &registry.Resource{
	Resource:       rbacv1.Resource("rolebindings"),
	Singular:       "rolebinding",
	Version:        "v1",
	Kind:           "RoleBinding",
	New:            func() runtime.Object { return &rbacv1.RoleBinding{} },
	NewList:        func() runtime.Object { return &rbacv1.RoleBindingList{} },
	Namespaced:     true,
	Validate:       registry.Validator(validation.ValidateRoleBinding),
	ValidateUpdate: registry.UpdateValidator(validation.ValidateRoleBindingUpdate),
}

// ClusterRoleBindings describes cluster role bindings to the shared store.
var ClusterRoleBindings = &registry.Resource{
	Resource:       rbacv1.Resource("clusterrolebindings"),
	Singular:       "clusterrolebinding",
	Version:        "v1",
	Kind:           "ClusterRoleBinding",
	New:            func() runtime.Object { return &rbacv1.ClusterRoleBinding{} },
	NewList:        func() runtime.Object { return &rbacv1.ClusterRoleBindingList{} },
	Validate:       registry.Validator(validation.ValidateClusterRoleBinding),
	ValidateUpdate: registry.UpdateValidator(validation.ValidateClusterRoleBindingUpdate),
}
