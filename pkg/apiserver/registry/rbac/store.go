// Package rbac is the registry of rbac.authorization.k8s.io/v1 roles, cluster roles and their bindings.
// Writes of them are guarded against privilege escalation, as in Kubernetes: see Guard.
package rbac

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"

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

// NewStorage builds the stores of the four RBAC resources, keyed by path, with their creates and updates
// guarded against privilege escalation by authz, the server's authorizer (see Guard).
func NewStorage(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, authz authorizer.Authorizer) (registry.Storage, error) {
	stores := map[*registry.Resource]*registry.REST{}
	for _, r := range []*registry.Resource{Roles, ClusterRoles, RoleBindings, ClusterRoleBindings} {
		s, _, err := registry.NewStore(scheme, r, optsGetter)
		if err != nil {
			return nil, err
		}
		stores[r] = s
	}
	roles, clusterRoles := stores[Roles], stores[ClusterRoles]
	g := &Guard{Authorizer: authz, RoleRules: func(ctx context.Context, ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
		switch ref.Kind {
		case "ClusterRole":
			obj, err := clusterRoles.Get(genericapirequest.WithNamespace(ctx, ""), ref.Name, &metav1.GetOptions{})
			if err != nil {
				return nil, roleError(err, ClusterRoles, ref.Name)
			}
			return obj.(*rbacv1.ClusterRole).Rules, nil
		case "Role":
			obj, err := roles.Get(genericapirequest.WithNamespace(ctx, namespace), ref.Name, &metav1.GetOptions{})
			if err != nil {
				return nil, roleError(err, Roles, ref.Name)
			}
			return obj.(*rbacv1.Role).Rules, nil
		}
		return nil, fmt.Errorf("unknown kind of role %q", ref.Kind)
	}}
	return registry.Storage{
		Roles.Resource.Resource: &guardedREST{REST: roles, check: func(ctx context.Context, res schema.GroupResource, namespace, name string, obj runtime.Object) error {
			return g.CheckRole(ctx, res, namespace, name, obj.(*rbacv1.Role).Rules)
		}},
		ClusterRoles.Resource.Resource: &guardedREST{REST: clusterRoles, check: func(ctx context.Context, res schema.GroupResource, _, name string, obj runtime.Object) error {
			return g.CheckRole(ctx, res, "", name, obj.(*rbacv1.ClusterRole).Rules)
		}},
		RoleBindings.Resource.Resource: &guardedREST{REST: stores[RoleBindings], check: func(ctx context.Context, res schema.GroupResource, namespace, name string, obj runtime.Object) error {
			return g.CheckBinding(ctx, res, namespace, name, obj.(*rbacv1.RoleBinding).RoleRef)
		}},
		ClusterRoleBindings.Resource.Resource: &guardedREST{REST: stores[ClusterRoleBindings], check: func(ctx context.Context, res schema.GroupResource, _, name string, obj runtime.Object) error {
			return g.CheckBinding(ctx, res, "", name, obj.(*rbacv1.ClusterRoleBinding).RoleRef)
		}},
	}, nil
}

// roleError names the role in a NotFound from its store, which would otherwise name the resource of the
// request (the binding's).
func roleError(err error, r *registry.Resource, name string) error {
	if apierrors.IsNotFound(err) {
		return apierrors.NewNotFound(r.Resource, name)
	}
	return err
}
