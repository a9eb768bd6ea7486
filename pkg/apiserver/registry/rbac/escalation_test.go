package rbac

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
)

// fakeAuthz allows exactly the requests allow accepts, and remembers every question.
type fakeAuthz struct {
	allow func(a authorizer.Attributes) bool
	asked []authorizer.Attributes
}

func (f *fakeAuthz) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	f.asked = append(f.asked, a)
	if f.allow != nil && f.allow(a) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

func (f *fakeAuthz) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(f.Authorize(ctx, a))
}

func (f *fakeAuthz) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

var (
	rolesResource    = Roles.Resource
	bindingsResource = RoleBindings.Resource
	secretsGet       = rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}
	podsGet          = rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}
)

func as(u user.Info) context.Context {
	return genericapirequest.WithUser(context.Background(), u)
}

// holds allows u's verb on resource in namespace.
func holds(verb, resource, namespace string) func(authorizer.Attributes) bool {
	return func(a authorizer.Attributes) bool {
		return a.GetVerb() == verb && a.GetResource() == resource && a.GetNamespace() == namespace
	}
}

func anyOf(fs ...func(authorizer.Attributes) bool) func(authorizer.Attributes) bool {
	return func(a authorizer.Attributes) bool {
		for _, f := range fs {
			if f(a) {
				return true
			}
		}
		return false
	}
}

func expectForbidden(t *testing.T, what string, err error, wants ...string) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: %v, want Forbidden", what, err)
		return
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %q does not mention %q", what, err, w)
		}
	}
}

func TestGuardRole(t *testing.T) {
	bob := &user.DefaultInfo{Name: "bob", Groups: []string{"system:authenticated"}}
	rules := []rbacv1.PolicyRule{podsGet, secretsGet}

	f := &fakeAuthz{allow: holds("get", "pods", "ns")}
	g := &Guard{Authorizer: f}
	err := g.CheckRole(as(bob), rolesResource, "ns", "reader", rules)
	expectForbidden(t, "a role granting secrets bob lacks", err,
		`roles.rbac.authorization.k8s.io "reader" is forbidden: user "bob" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:`,
		`{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}`)
	if strings.Contains(err.Error(), `"pods"`) {
		t.Errorf("the refusal lists a permission bob holds: %v", err)
	}
	// The first question is whether bob may escalate this role, in its namespace.
	if e := f.asked[0]; e.GetVerb() != "escalate" || e.GetAPIGroup() != rbacv1.GroupName || e.GetResource() != "roles" ||
		e.GetNamespace() != "ns" || e.GetName() != "reader" || !e.IsResourceRequest() {
		t.Errorf("escalate question %+v", e)
	}

	g.Authorizer = &fakeAuthz{allow: anyOf(holds("get", "pods", "ns"), holds("get", "secrets", "ns"))}
	if err := g.CheckRole(as(bob), rolesResource, "ns", "reader", rules); err != nil {
		t.Errorf("a role granting what bob holds: %v", err)
	}
	g.Authorizer = &fakeAuthz{allow: anyOf(holds("get", "pods", "ns"), holds("get", "secrets", "other"))}
	expectForbidden(t, "a role granting what bob holds elsewhere", g.CheckRole(as(bob), rolesResource, "ns", "reader", rules))
	g.Authorizer = &fakeAuthz{allow: holds("escalate", "roles", "ns")}
	if err := g.CheckRole(as(bob), rolesResource, "ns", "reader", rules); err != nil {
		t.Errorf("bob may escalate roles: %v", err)
	}
	g.Authorizer = &fakeAuthz{allow: holds("escalate", "roles", "")}
	expectForbidden(t, "escalate on cluster roles is not on roles", g.CheckRole(as(bob), rolesResource, "ns", "reader", rules))

	// system:masters is never asked about; a request without a user is refused.
	f = &fakeAuthz{}
	g.Authorizer = f
	master := &user.DefaultInfo{Name: "admin", Groups: []string{user.SystemPrivilegedGroup}}
	if err := g.CheckRole(as(master), ClusterRoles.Resource, "", "everything", rules); err != nil || len(f.asked) != 0 {
		t.Errorf("system:masters: %v after %d questions", err, len(f.asked))
	}
	expectForbidden(t, "no user", g.CheckRole(context.Background(), rolesResource, "ns", "reader", nil), "no user")
}

func TestGuardBinding(t *testing.T) {
	carol := &user.DefaultInfo{Name: "carol"}
	roles := map[string][]rbacv1.PolicyRule{
		"ClusterRole/cluster-admin": {{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}},
		"Role/ns/pod-reader":        {podsGet},
		"Role/ns/cluster-admin":     {secretsGet},
	}
	var lookups []string
	roleRules := func(_ context.Context, ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
		key := ref.Kind + "/" + ref.Name
		if ref.Kind == "Role" {
			key = ref.Kind + "/" + namespace + "/" + ref.Name
		}
		lookups = append(lookups, key)
		rules, ok := roles[key]
		if !ok {
			return nil, apierrors.NewNotFound(rbacv1.Resource(strings.ToLower(ref.Kind)+"s"), ref.Name)
		}
		return rules, nil
	}
	admin := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"}
	podReader := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"}

	f := &fakeAuthz{allow: holds("get", "pods", "ns")}
	g := &Guard{Authorizer: f, RoleRules: roleRules}
	expectForbidden(t, "binding cluster-admin", g.CheckBinding(as(carol), bindingsResource, "ns", "b", admin),
		`rolebindings.rbac.authorization.k8s.io "b" is forbidden: user "carol" (groups=[]) is attempting to grant RBAC permissions not currently held:`,
		`{APIGroups:["*"], Resources:["*"], Verbs:["*"]}`)
	if e := f.asked[0]; e.GetVerb() != "bind" || e.GetAPIGroup() != rbacv1.GroupName || e.GetResource() != "clusterroles" ||
		e.GetNamespace() != "ns" || e.GetName() != "cluster-admin" {
		t.Errorf("bind question %+v", e)
	}
	if err := g.CheckBinding(as(carol), bindingsResource, "ns", "b", podReader); err != nil {
		t.Errorf("binding a Role whose rules carol holds: %v", err)
	}
	if want := []string{"ClusterRole/cluster-admin", "Role/ns/pod-reader"}; strings.Join(lookups, ",") != strings.Join(want, ",") {
		t.Errorf("roles read %v, want %v", lookups, want)
	}

	bindAdmin := func(a authorizer.Attributes) bool {
		return a.GetVerb() == "bind" && a.GetResource() == "clusterroles" && a.GetName() == "cluster-admin" && a.GetNamespace() == "ns"
	}
	lookups = nil
	g.Authorizer = &fakeAuthz{allow: bindAdmin}
	if err := g.CheckBinding(as(carol), bindingsResource, "ns", "b", admin); err != nil {
		t.Errorf("carol may bind cluster-admin in ns: %v", err)
	}
	if len(lookups) != 0 {
		t.Errorf("the role was read although carol may bind it: %v", lookups)
	}
	expectForbidden(t, "bind in ns does not cover a ClusterRoleBinding",
		g.CheckBinding(as(carol), ClusterRoleBindings.Resource, "", "b", admin), `clusterrolebindings.rbac.authorization.k8s.io "b" is forbidden`)
	expectForbidden(t, "bind on cluster-admin is not bind on another role",
		g.CheckBinding(as(carol), bindingsResource, "ns", "b", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "cluster-admin"}))

	// A missing role cannot be weighed: its NotFound comes back.
	g.Authorizer = &fakeAuthz{}
	err := g.CheckBinding(as(carol), bindingsResource, "ns", "b", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "ghost"})
	if !apierrors.IsNotFound(err) {
		t.Errorf("binding a missing role: %v, want NotFound", err)
	}
}

func TestOnlyGCFields(t *testing.T) {
	old := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns", ResourceVersion: "5", Labels: map[string]string{"a": "b"}},
		Rules:      []rbacv1.PolicyRule{podsGet},
	}
	gc := old.DeepCopy()
	gc.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "u"}}
	gc.Finalizers = []string{"foregroundDeletion"}
	gc.ResourceVersion = ""
	if !onlyGCFields(gc, old) {
		t.Error("owner references and finalizers are GC fields")
	}
	relabel := old.DeepCopy()
	relabel.Labels["a"] = "c"
	if onlyGCFields(relabel, old) {
		t.Error("a label change is weighed")
	}
	widen := old.DeepCopy()
	widen.Rules = append(widen.Rules, secretsGet)
	if onlyGCFields(widen, old) {
		t.Error("a rule change is weighed")
	}
	// Created through an update (server-side apply): the stored object is empty.
	if onlyGCFields(old.DeepCopy(), &rbacv1.Role{}) {
		t.Error("a create through an update is weighed")
	}
}
