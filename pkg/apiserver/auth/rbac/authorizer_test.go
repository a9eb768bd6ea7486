package rbac_test

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/rayctl/rayctl/pkg/apiserver/auth/rbac"
)

// listersFor serves objs from in-memory indexers, as informers would.
func listersFor(t *testing.T, objs ...runtime.Object) rbac.Listers {
	t.Helper()
	newIndexer := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	roles, clusterRoles, bindings, clusterBindings := newIndexer(), newIndexer(), newIndexer(), newIndexer()
	for _, o := range objs {
		var err error
		switch o.(type) {
		case *rbacv1.Role:
			err = roles.Add(o)
		case *rbacv1.ClusterRole:
			err = clusterRoles.Add(o)
		case *rbacv1.RoleBinding:
			err = bindings.Add(o)
		case *rbacv1.ClusterRoleBinding:
			err = clusterBindings.Add(o)
		default:
			t.Fatalf("not an RBAC object: %T", o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return rbac.Listers{
		Roles:               rbaclisters.NewRoleLister(roles),
		ClusterRoles:        rbaclisters.NewClusterRoleLister(clusterRoles),
		RoleBindings:        rbaclisters.NewRoleBindingLister(bindings),
		ClusterRoleBindings: rbaclisters.NewClusterRoleBindingLister(clusterBindings),
	}
}

func clusterRole(name string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
}

func role(ns, name string, rules ...rbacv1.PolicyRule) *rbacv1.Role {
	return &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}
}

func clusterBinding(name, roleName string, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roleName},
		Subjects:   subjects,
	}
}

func binding(ns, name, kind, roleName string, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: roleName},
		Subjects:   subjects,
	}
}

func userSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: name}
}

func groupSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: name}
}

func saSubject(ns, name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}
}

// request is a resource request: verb, group, "resource[/subresource]", namespace, name.
func request(u user.Info, verb, group, resource, ns, name string) authorizer.AttributesRecord {
	res, sub, _ := strings.Cut(resource, "/")
	return authorizer.AttributesRecord{
		User: u, Verb: verb, APIGroup: group, APIVersion: "v1", Resource: res, Subresource: sub,
		Namespace: ns, Name: name, ResourceRequest: true,
	}
}

func pathRequest(u user.Info, verb, path string) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{User: u, Verb: verb, Path: path}
}

func decide(t *testing.T, a authorizer.Authorizer, attrs authorizer.AttributesRecord) (bool, string) {
	t.Helper()
	d, reason, err := a.Authorize(context.Background(), attrs)
	if err != nil {
		t.Fatalf("Authorize(%+v): %v", attrs, err)
	}
	if d == authorizer.DecisionDeny {
		t.Fatalf("Authorize(%+v) denied; RBAC only allows or has no opinion", attrs)
	}
	return d == authorizer.DecisionAllow, reason
}

func TestRuleMatching(t *testing.T) {
	alice := &user.DefaultInfo{Name: "alice"}
	a := rbac.NewWithListers(listersFor(t,
		clusterRole("pods-reader", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}),
		clusterRole("status-writer", rbacv1.PolicyRule{APIGroups: []string{"ray.io"}, Resources: []string{"rayclusters/status"}, Verbs: []string{"patch"}}),
		clusterRole("scaler", rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*/scale"}, Verbs: []string{"update"}}),
		clusterRole("batch-all", rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"*"}, Verbs: []string{"*"}}),
		clusterRole("one-config", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"settings"}, Verbs: []string{"get", "update"}}),
		clusterRole("metrics", rbacv1.PolicyRule{NonResourceURLs: []string{"/metrics", "/debug/*"}, Verbs: []string{"get"}}),
		clusterBinding("alice-1", "pods-reader", userSubject("alice")),
		clusterBinding("alice-2", "status-writer", userSubject("alice")),
		clusterBinding("alice-3", "scaler", userSubject("alice")),
		clusterBinding("alice-4", "batch-all", userSubject("alice")),
		clusterBinding("alice-5", "one-config", userSubject("alice")),
		clusterBinding("alice-6", "metrics", userSubject("alice")),
	))
	for _, tc := range []struct {
		name  string
		attrs authorizer.AttributesRecord
		want  bool
	}{
		{"listed verb", request(alice, "list", "", "pods", "default", ""), true},
		{"verb not listed", request(alice, "delete", "", "pods", "default", "p"), false},
		{"cluster-wide list", request(alice, "list", "", "pods", "", ""), true},
		{"other group", request(alice, "get", "apps", "pods", "default", "p"), false},
		{"resource does not cover its subresource", request(alice, "get", "", "pods/log", "default", "p"), false},
		{"resource/subresource", request(alice, "patch", "ray.io", "rayclusters/status", "default", "c"), true},
		{"subresource does not cover its resource", request(alice, "patch", "ray.io", "rayclusters", "default", "c"), false},
		{"*/scale on any resource", request(alice, "update", "apps", "deployments/scale", "default", "d"), true},
		{"*/scale is not the resource", request(alice, "update", "apps", "deployments", "default", "d"), false},
		{"*/scale is not another subresource", request(alice, "update", "apps", "deployments/status", "default", "d"), false},
		{"* resources and verbs", request(alice, "deletecollection", "batch", "jobs", "default", ""), true},
		{"* resources covers subresources", request(alice, "patch", "batch", "jobs/status", "default", "j"), true},
		{"named object", request(alice, "get", "", "configmaps", "default", "settings"), true},
		{"another object", request(alice, "get", "", "configmaps", "default", "other"), false},
		{"resourceNames never allow list", request(alice, "list", "", "configmaps", "default", ""), false},
		{"exact URL", pathRequest(alice, "get", "/metrics"), true},
		{"URL prefix", pathRequest(alice, "get", "/debug/pprof/heap"), true},
		{"URL prefix itself", pathRequest(alice, "get", "/debug/"), true},
		{"URL not exact", pathRequest(alice, "get", "/metrics/extra"), false},
		{"URL verb", pathRequest(alice, "post", "/metrics"), false},
		{"other URL", pathRequest(alice, "get", "/api"), false},
		{"other user", request(&user.DefaultInfo{Name: "bob"}, "list", "", "pods", "default", ""), false},
	} {
		if got, reason := decide(t, a, tc.attrs); got != tc.want {
			t.Errorf("%s: allowed=%v (%q), want %v", tc.name, got, reason, tc.want)
		}
	}
}

func TestSubjects(t *testing.T) {
	podsRule := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}
	a := rbac.NewWithListers(listersFor(t,
		clusterRole("reader", podsRule),
		clusterBinding("by-group", "reader", groupSubject("readers")),
		clusterBinding("by-sa", "reader", saSubject("ops", "robot")),
		clusterBinding("by-sa-group", "reader", groupSubject("system:serviceaccounts:ci")),
		// A ServiceAccount subject without a namespace in a RoleBinding means the binding's namespace.
		binding("team", "local-sa", "ClusterRole", "reader", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "builder"}),
	))
	sa := func(ns, name string) user.Info {
		return &user.DefaultInfo{Name: serviceaccount.MakeUsername(ns, name), Groups: serviceaccount.MakeGroupNames(ns)}
	}
	for _, tc := range []struct {
		name string
		u    user.Info
		ns   string
		want bool
	}{
		{"group member", &user.DefaultInfo{Name: "carol", Groups: []string{"readers"}}, "x", true},
		{"not a member", &user.DefaultInfo{Name: "carol", Groups: []string{"writers"}}, "x", false},
		{"user named like the group", &user.DefaultInfo{Name: "readers"}, "x", false},
		{"service account", sa("ops", "robot"), "x", true},
		{"same name, other namespace", sa("dev", "robot"), "x", false},
		{"user named like the service account", &user.DefaultInfo{Name: "robot"}, "x", false},
		{"service accounts of a namespace", sa("ci", "anyone"), "x", true},
		{"service account of the binding's namespace", sa("team", "builder"), "team", true},
		{"that service account elsewhere", sa("team", "builder"), "other", false},
		{"same name in another namespace", sa("other", "builder"), "team", false},
	} {
		if got, reason := decide(t, a, request(tc.u, "get", "", "pods", tc.ns, "p")); got != tc.want {
			t.Errorf("%s: allowed=%v (%q), want %v", tc.name, got, reason, tc.want)
		}
	}
}

func TestRoleBindingScope(t *testing.T) {
	dave := &user.DefaultInfo{Name: "dave"}
	edit := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods", "configmaps"}, Verbs: []string{"*"}}
	a := rbac.NewWithListers(listersFor(t,
		clusterRole("edit", edit),
		role("team-b", "config-reader", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}),
		binding("team-a", "dave-edit", "ClusterRole", "edit", userSubject("dave")),
		binding("team-b", "dave-config", "Role", "config-reader", userSubject("dave")),
	))
	for _, tc := range []struct {
		name  string
		attrs authorizer.AttributesRecord
		want  bool
	}{
		{"ClusterRole through a RoleBinding, in its namespace", request(dave, "create", "", "pods", "team-a", ""), true},
		{"not in another namespace", request(dave, "create", "", "pods", "team-b", ""), false},
		{"not across all namespaces", request(dave, "list", "", "pods", "", ""), false},
		{"Role in its namespace", request(dave, "get", "", "configmaps", "team-b", "c"), true},
		{"Role only grants its rules", request(dave, "delete", "", "configmaps", "team-b", "c"), false},
		{"Role not elsewhere", request(dave, "get", "", "configmaps", "team-c", "c"), false},
	} {
		if got, reason := decide(t, a, tc.attrs); got != tc.want {
			t.Errorf("%s: allowed=%v (%q), want %v", tc.name, got, reason, tc.want)
		}
	}
}

func TestReasons(t *testing.T) {
	rule := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}
	a := rbac.NewWithListers(listersFor(t,
		clusterRole("reader", rule),
		clusterBinding("erin-reads", "reader", userSubject("erin")),
		binding("ns1", "sa-reads", "ClusterRole", "reader", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "bot"}),
		clusterBinding("dangling", "no-such-role", userSubject("frank")),
	))
	_, reason := decide(t, a, request(&user.DefaultInfo{Name: "erin"}, "get", "", "pods", "ns1", "p"))
	if want := `RBAC: allowed by ClusterRoleBinding "erin-reads" of ClusterRole "reader" to User "erin"`; reason != want {
		t.Errorf("reason %q, want %q", reason, want)
	}
	_, reason = decide(t, a, request(&user.DefaultInfo{Name: serviceaccount.MakeUsername("ns1", "bot")}, "get", "", "pods", "ns1", "p"))
	if want := `RBAC: allowed by RoleBinding "sa-reads/ns1" of ClusterRole "reader" to ServiceAccount "bot/ns1"`; reason != want {
		t.Errorf("reason %q, want %q", reason, want)
	}
	allowed, reason := decide(t, a, request(&user.DefaultInfo{Name: "frank"}, "get", "", "pods", "ns1", "p"))
	if allowed || !strings.Contains(reason, `clusterrole.rbac.authorization.k8s.io "no-such-role" not found`) {
		t.Errorf("a binding to a missing role: allowed=%v reason %q, want no opinion naming the missing role", allowed, reason)
	}
	allowed, reason = decide(t, a, request(&user.DefaultInfo{Name: "nobody"}, "get", "", "pods", "ns1", "p"))
	if allowed || reason != "" {
		t.Errorf("an unbound user: allowed=%v reason %q, want no opinion and no reason", allowed, reason)
	}
}

func TestNoOpinionBeforeSync(t *testing.T) {
	a := rbac.New()
	if a.Ready() {
		t.Error("a new authorizer reports ready before it has data")
	}
	if allowed, _ := decide(t, a, pathRequest(&user.DefaultInfo{Name: "x", Groups: []string{"system:authenticated"}}, "get", "/healthz")); allowed {
		t.Error("an authorizer without data allowed a request")
	}
	if _, _, incomplete, err := a.RulesFor(context.Background(), &user.DefaultInfo{Name: "x"}, "default"); !incomplete || err == nil {
		t.Errorf("RulesFor before sync: incomplete=%v err=%v, want incomplete with an error", incomplete, err)
	}
}

func TestRulesFor(t *testing.T) {
	a := rbac.NewWithListers(listersFor(t,
		clusterRole("reader", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}),
		clusterRole("health", rbacv1.PolicyRule{NonResourceURLs: []string{"/healthz"}, Verbs: []string{"get"}}),
		role("ns1", "writer", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}}),
		clusterBinding("g-reader", "reader", userSubject("gina")),
		clusterBinding("g-health", "health", userSubject("gina")),
		binding("ns1", "g-writer", "Role", "writer", userSubject("gina")),
		binding("ns1", "g-missing", "Role", "missing", userSubject("gina")),
	))
	gina := &user.DefaultInfo{Name: "gina"}
	res, nonRes, incomplete, err := a.RulesFor(context.Background(), gina, "ns1")
	if len(res) != 2 || len(nonRes) != 1 {
		t.Fatalf("RulesFor ns1: %d resource rules and %d non-resource rules, want 2 and 1", len(res), len(nonRes))
	}
	if !incomplete || err == nil || !strings.Contains(err.Error(), `"missing" not found`) {
		t.Errorf("RulesFor ns1 with a missing Role: incomplete=%v err=%v, want incomplete naming it", incomplete, err)
	}
	if got := nonRes[0].GetNonResourceURLs(); len(got) != 1 || got[0] != "/healthz" {
		t.Errorf("non-resource rule %v", got)
	}
	res, _, incomplete, err = a.RulesFor(context.Background(), gina, "ns2")
	if len(res) != 1 || res[0].GetResources()[0] != "pods" || incomplete || err != nil {
		t.Errorf("RulesFor ns2: %v incomplete=%v err=%v, want only the cluster-wide pods rule", res, incomplete, err)
	}
}
