package rbac

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/rayctl/rayctl/pkg/apiserver/auth/rbac"
	"github.com/rayctl/rayctl/pkg/apiserver/registry"
)

// RoleRulesFunc returns the rules of the role ref names: a ClusterRole, or a Role in namespace. A
// missing role is a NotFound error.
type RoleRulesFunc func(ctx context.Context, ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error)

// Guard keeps RBAC writes from granting more than their author holds, as Kubernetes' RBAC registry
// does. A Role or ClusterRole may be written only by a user who already has every permission it
// grants (in the Role's namespace), or may escalate it; a RoleBinding or ClusterRoleBinding only by a
// user who has every permission of the role it refers to (in the binding's namespace), or may bind that
// role. Members of system:masters may do anything.
type Guard struct {
	// Authorizer is the server's authorizer: it answers both the escalate and bind questions and
	// whether the user holds each permission.
	Authorizer authorizer.Authorizer
	// RoleRules reads the role a binding refers to.
	RoleRules RoleRulesFunc
}

// CheckRole returns nil if the user in ctx may write the role called name (of resource "roles" or
// "clusterroles") with rules in namespace ("" for a ClusterRole), else a Forbidden error listing what
// the role grants that the user does not hold.
func (g *Guard) CheckRole(ctx context.Context, resource schema.GroupResource, namespace, name string, rules []rbacv1.PolicyRule) error {
	u, err := requestUser(ctx, resource, name)
	if err != nil || isMaster(u) {
		return err
	}
	if g.allowed(ctx, authorizer.AttributesRecord{
		User: u, Verb: "escalate", APIGroup: rbacv1.GroupName, APIVersion: "*",
		Resource: resource.Resource, Namespace: namespace, Name: name, ResourceRequest: true,
	}) {
		return nil
	}
	return g.noEscalation(ctx, u, resource, namespace, name, rules)
}

// CheckBinding returns nil if the user in ctx may write the binding called name (of resource
// "rolebindings" or "clusterrolebindings") in namespace ("" for a ClusterRoleBinding) to ref, else a
// Forbidden error listing what the role grants that the user does not hold.
func (g *Guard) CheckBinding(ctx context.Context, resource schema.GroupResource, namespace, name string, ref rbacv1.RoleRef) error {
	u, err := requestUser(ctx, resource, name)
	if err != nil || isMaster(u) {
		return err
	}
	bind := authorizer.AttributesRecord{
		User: u, Verb: "bind", APIGroup: rbacv1.GroupName, APIVersion: "*",
		Namespace: namespace, Name: ref.Name, ResourceRequest: true,
	}
	switch ref.Kind {
	case "ClusterRole":
		bind.Resource = "clusterroles"
	case "Role":
		bind.Resource = "roles"
	default:
		// Validation refuses the binding; there is no role to weigh.
		return nil
	}
	if g.allowed(ctx, bind) {
		return nil
	}
	rules, err := g.RoleRules(ctx, ref, namespace)
	if err != nil {
		return err
	}
	return g.noEscalation(ctx, u, resource, namespace, name, rules)
}

// noEscalation refuses unless u holds every permission of rules in namespace.
func (g *Guard) noEscalation(ctx context.Context, u user.Info, resource schema.GroupResource, namespace, name string, rules []rbacv1.PolicyRule) error {
	missing, resolution := rbac.MissingPermissions(ctx, g.Authorizer, u, namespace, rules)
	if len(missing) == 0 {
		return nil
	}
	return apierrors.NewForbidden(resource, name, rbac.EscalationError(u, missing, resolution))
}

func (g *Guard) allowed(ctx context.Context, attrs authorizer.AttributesRecord) bool {
	d, _, _ := g.Authorizer.Authorize(ctx, attrs)
	return d == authorizer.DecisionAllow
}

// requestUser returns the user a request comes from; a request without one may write no RBAC object.
func requestUser(ctx context.Context, resource schema.GroupResource, name string) (user.Info, error) {
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok || u == nil {
		return nil, apierrors.NewForbidden(resource, name, fmt.Errorf("no user on the request"))
	}
	return u, nil
}

// isMaster reports whether u is in system:masters, which may do anything; the server's own loopback
// identity, which applies the bootstrap policy, is one.
func isMaster(u user.Info) bool {
	for _, g := range u.GetGroups() {
		if g == user.SystemPrivilegedGroup {
			return true
		}
	}
	return false
}

// onlyGCFields reports whether obj differs from old only in what the garbage collector writes (owner
// references and finalizers) or the server keeps (resourceVersion, managedFields): such updates grant
// nothing new, so they are not weighed.
func onlyGCFields(obj, old runtime.Object) bool {
	oldMeta, err := meta.Accessor(old)
	if err != nil || oldMeta.GetResourceVersion() == "" {
		return false
	}
	copied := obj.DeepCopyObject()
	m, err := meta.Accessor(copied)
	if err != nil {
		return false
	}
	m.SetOwnerReferences(oldMeta.GetOwnerReferences())
	m.SetFinalizers(oldMeta.GetFinalizers())
	m.SetResourceVersion(oldMeta.GetResourceVersion())
	m.SetManagedFields(oldMeta.GetManagedFields())
	return apiequality.Semantic.DeepEqual(copied, old)
}

// guardedREST is an RBAC resource's store with Create and Update weighed by check first; everything
// else (reads, deletes, table printing, short names…) is the store's.
type guardedREST struct {
	*registry.REST
	// check weighs obj, to be stored as name in namespace.
	check func(ctx context.Context, resource schema.GroupResource, namespace, name string, obj runtime.Object) error
}

// Create weighs the new object before storing it.
func (s *guardedREST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	// The object's namespace may still be empty: the store fills it in from the request's.
	namespace, _ := genericapirequest.NamespaceFrom(ctx)
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	if err := s.check(ctx, s.DefaultQualifiedResource, namespace, m.GetName(), obj); err != nil {
		return nil, err
	}
	return s.REST.Create(ctx, obj, createValidation, options)
}

// Update weighs the updated object (as replaced, patched or applied) once the store has it, unless it
// only changes what the garbage collector writes.
func (s *guardedREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	namespace, _ := genericapirequest.NamespaceFrom(ctx)
	checked := rest.WrapUpdatedObjectInfo(objInfo, func(ctx context.Context, obj, old runtime.Object) (runtime.Object, error) {
		if old != nil && onlyGCFields(obj, old) {
			return obj, nil
		}
		if err := s.check(ctx, s.DefaultQualifiedResource, namespace, name, obj); err != nil {
			return nil, err
		}
		return obj, nil
	})
	return s.REST.Update(ctx, name, checked, createValidation, updateValidation, forceAllowCreate, options)
}
