package rbac

import (
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
)

// SubjectMatches reports whether subject (from a binding in bindingNamespace, "" for a
// ClusterRoleBinding) names u: a User by name, a Group u is in, or a ServiceAccount whose username
// (system:serviceaccount:<namespace>:<name>) is u's. A ServiceAccount subject without a namespace means
// one in the binding's namespace.
func SubjectMatches(subject *rbacv1.Subject, bindingNamespace string, u user.Info) bool {
	switch subject.Kind {
	case rbacv1.UserKind:
		return u.GetName() == subject.Name
	case rbacv1.GroupKind:
		return slices.Contains(u.GetGroups(), subject.Name)
	case rbacv1.ServiceAccountKind:
		ns := subject.Namespace
		if ns == "" {
			ns = bindingNamespace
		}
		return ns != "" && u.GetName() == serviceaccount.MakeUsername(ns, subject.Name)
	}
	return false
}

// appliesTo returns the first of subjects that names u.
func appliesTo(subjects []rbacv1.Subject, bindingNamespace string, u user.Info) (*rbacv1.Subject, bool) {
	for i := range subjects {
		if SubjectMatches(&subjects[i], bindingNamespace, u) {
			return &subjects[i], true
		}
	}
	return nil, false
}

// describeSubject names a subject the way Kubernetes' RBAC reasons do; a service account reads
// "name/namespace".
func describeSubject(s *rbacv1.Subject, bindingNamespace string) string {
	if s.Kind == rbacv1.ServiceAccountKind {
		ns := s.Namespace
		if ns == "" {
			ns = bindingNamespace
		}
		return fmt.Sprintf("%s %q", s.Kind, s.Name+"/"+ns)
	}
	return fmt.Sprintf("%s %q", s.Kind, s.Name)
}

// grant says which binding gave a user a rule, for reasons.
type grant struct {
	clusterBinding *rbacv1.ClusterRoleBinding
	binding        *rbacv1.RoleBinding
	subject        *rbacv1.Subject
}

func (g grant) String() string {
	if g.clusterBinding != nil {
		b := g.clusterBinding
		return fmt.Sprintf("ClusterRoleBinding %q of %s %q to %s", b.Name, b.RoleRef.Kind, b.RoleRef.Name, describeSubject(g.subject, ""))
	}
	b := g.binding
	return fmt.Sprintf("RoleBinding %q of %s %q to %s", b.Name+"/"+b.Namespace, b.RoleRef.Kind, b.RoleRef.Name, describeSubject(g.subject, b.Namespace))
}
