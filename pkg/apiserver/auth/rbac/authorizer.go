// Package rbac authorizes requests by the rbac.authorization.k8s.io/v1 objects stored in the API server:
// Roles and ClusterRoles hold rules, RoleBindings (which grant a Role or a ClusterRole within their
// namespace) and ClusterRoleBindings (which grant a ClusterRole everywhere) hand them to users, groups
// and service accounts. Like Kubernetes' RBAC it only ever allows or has no opinion; it never denies.
//
// The objects come from informers the server starts after it begins serving (see Authorizer.Start);
// until they have synced, the authorizer has no opinion about anything.
package rbac

import (
	"context"
	"fmt"
	"sync/atomic"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
)

// Listers are where the authorizer reads RBAC objects from.
type Listers struct {
	Roles               rbaclisters.RoleLister
	ClusterRoles        rbaclisters.ClusterRoleLister
	RoleBindings        rbaclisters.RoleBindingLister
	ClusterRoleBindings rbaclisters.ClusterRoleBindingLister
}

// Authorizer is an RBAC authorizer and rule resolver.
type Authorizer struct {
	listers atomic.Pointer[Listers]
}

var (
	_ authorizer.Authorizer   = &Authorizer{}
	_ authorizer.RuleResolver = &Authorizer{}
)

// New returns an authorizer with no data: it has no opinion until Start has synced its informers.
func New() *Authorizer { return &Authorizer{} }

// NewWithListers returns an authorizer that reads from l, ready at once.
func NewWithListers(l Listers) *Authorizer {
	a := &Authorizer{}
	a.listers.Store(&l)
	return a
}

// Ready reports whether the authorizer has its data.
func (a *Authorizer) Ready() bool { return a.listers.Load() != nil }

// Authorize allows the request if a rule bound to its user allows it, saying which binding did;
// otherwise it has no opinion (and names any binding whose role is missing).
func (a *Authorizer) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	l := a.listers.Load()
	if l == nil {
		return authorizer.DecisionNoOpinion, "RBAC: the authorizer has not loaded its roles yet", nil
	}
	var allowedBy fmt.Stringer
	errs := visit(l, attrs.GetUser(), attrs.GetNamespace(), func(g grant, rules []rbacv1.PolicyRule) bool {
		for i := range rules {
			if RuleAllows(attrs, &rules[i]) {
				allowedBy = g
				return false
			}
		}
		return true
	})
	if allowedBy != nil {
		return authorizer.DecisionAllow, "RBAC: allowed by " + allowedBy.String(), nil
	}
	reason := ""
	if len(errs) > 0 {
		reason = fmt.Sprintf("RBAC: %v", utilerrors.NewAggregate(errs))
	}
	return authorizer.DecisionNoOpinion, reason, nil
}

// ConditionsAwareAuthorize answers as Authorize does; RBAC decisions carry no conditions.
func (a *Authorizer) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(a.Authorize(ctx, attrs))
}

// EvaluateConditions fails closed: RBAC never returns conditional decisions.
func (a *Authorizer) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

// RulesFor lists the rules u has in namespace (ClusterRoleBindings' and that namespace's RoleBindings'),
// split into resource and non-resource rules. The list is incomplete when a bound role is missing.
func (a *Authorizer) RulesFor(ctx context.Context, u user.Info, namespace string) ([]authorizer.ResourceRuleInfo, []authorizer.NonResourceRuleInfo, bool, error) {
	l := a.listers.Load()
	if l == nil {
		return nil, nil, true, fmt.Errorf("RBAC: the authorizer has not loaded its roles yet")
	}
	var res []authorizer.ResourceRuleInfo
	var nonRes []authorizer.NonResourceRuleInfo
	errs := visit(l, u, namespace, func(_ grant, rules []rbacv1.PolicyRule) bool {
		for _, r := range rules {
			if len(r.NonResourceURLs) > 0 {
				nonRes = append(nonRes, &authorizer.DefaultNonResourceRuleInfo{Verbs: r.Verbs, NonResourceURLs: r.NonResourceURLs})
			} else {
				res = append(res, &authorizer.DefaultResourceRuleInfo{Verbs: r.Verbs, APIGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames})
			}
		}
		return true
	})
	return res, nonRes, len(errs) > 0, utilerrors.NewAggregate(errs)
}

// visit calls f with the rules of every binding that applies to u in namespace (ClusterRoleBindings
// first, then, for a namespaced request, the namespace's RoleBindings) until f returns false. It returns
// the errors met on the way, such as a binding to a role that does not exist.
func visit(l *Listers, u user.Info, namespace string, f func(grant, []rbacv1.PolicyRule) bool) []error {
	if u == nil {
		return nil
	}
	var errs []error
	clusterBindings, err := l.ClusterRoleBindings.List(labels.Everything())
	if err != nil {
		return []error{err}
	}
	for _, b := range clusterBindings {
		subject, ok := appliesTo(b.Subjects, "", u)
		if !ok {
			continue
		}
		rules, err := rulesOf(l, b.RoleRef, "")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !f(grant{clusterBinding: b, subject: subject}, rules) {
			return errs
		}
	}
	if namespace == "" {
		return errs
	}
	bindings, err := l.RoleBindings.RoleBindings(namespace).List(labels.Everything())
	if err != nil {
		return append(errs, err)
	}
	for _, b := range bindings {
		subject, ok := appliesTo(b.Subjects, namespace, u)
		if !ok {
			continue
		}
		rules, err := rulesOf(l, b.RoleRef, namespace)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !f(grant{binding: b, subject: subject}, rules) {
			return errs
		}
	}
	return errs
}

// rulesOf returns the rules of the role ref points to: a ClusterRole, or a Role in namespace.
func rulesOf(l *Listers, ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	switch ref.Kind {
	case "ClusterRole":
		r, err := l.ClusterRoles.Get(ref.Name)
		if err != nil {
			return nil, err
		}
		return r.Rules, nil
	case "Role":
		if namespace == "" {
			return nil, fmt.Errorf("a ClusterRoleBinding cannot refer to Role %q", ref.Name)
		}
		r, err := l.Roles.Roles(namespace).Get(ref.Name)
		if err != nil {
			return nil, err
		}
		return r.Rules, nil
	}
	return nil, fmt.Errorf("unknown kind of role %q in a binding's roleRef", ref.Kind)
}
