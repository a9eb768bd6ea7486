package policy_test

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes/fake"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/rayctl/rayctl/configs"
	"github.com/rayctl/rayctl/pkg/apiserver/auth/rbac"
	"github.com/rayctl/rayctl/pkg/apiserver/auth/rbac/policy"
	"github.com/rayctl/rayctl/pkg/apiserver/validation"
)

func bootstrapPolicy(t *testing.T) []runtime.Object {
	t.Helper()
	manifests, err := policy.ReadFS(configs.RBAC)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := policy.Parse(manifests...)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// TestBootstrapPolicyIsValid checks that every object of configs/rbac passes the API server's validation,
// is labelled as rayctl's, and that every binding refers to a role of the policy.
func TestBootstrapPolicyIsValid(t *testing.T) {
	objs := bootstrapPolicy(t)
	roles := map[string]bool{}
	for _, o := range objs {
		switch o := o.(type) {
		case *rbacv1.ClusterRole:
			roles["ClusterRole/"+o.Name] = true
		case *rbacv1.Role:
			roles["Role/"+o.Namespace+"/"+o.Name] = true
		}
	}
	for _, o := range objs {
		m := o.(metav1.Object)
		if m.GetLabels()["app.kubernetes.io/managed-by"] != "rayctl" {
			t.Errorf("%T %s lacks the label app.kubernetes.io/managed-by=rayctl", o, m.GetName())
		}
		var errs []string
		var ref string
		switch o := o.(type) {
		case *rbacv1.ClusterRole:
			for _, e := range validation.ValidateClusterRole(o) {
				errs = append(errs, e.Error())
			}
		case *rbacv1.Role:
			for _, e := range validation.ValidateRole(o) {
				errs = append(errs, e.Error())
			}
		case *rbacv1.ClusterRoleBinding:
			for _, e := range validation.ValidateClusterRoleBinding(o) {
				errs = append(errs, e.Error())
			}
			ref = "ClusterRole/" + o.RoleRef.Name
		case *rbacv1.RoleBinding:
			for _, e := range validation.ValidateRoleBinding(o) {
				errs = append(errs, e.Error())
			}
			ref = o.RoleRef.Kind + "/" + o.RoleRef.Name
			if o.RoleRef.Kind == "Role" {
				ref = "Role/" + o.Namespace + "/" + o.RoleRef.Name
			}
		}
		if len(errs) > 0 {
			t.Errorf("%T %s is invalid: %s", o, m.GetName(), strings.Join(errs, "; "))
		}
		if ref != "" && !roles[ref] {
			t.Errorf("%T %s refers to %s, which the policy does not define", o, m.GetName(), ref)
		}
	}
}

// TestBootstrapPolicyGrants checks that each component's identity may do what it does, and not more.
func TestBootstrapPolicyGrants(t *testing.T) {
	a := rbac.NewWithListers(listers(t, bootstrapPolicy(t)))
	authed := func(name string, groups ...string) user.Info {
		return &user.DefaultInfo{Name: name, Groups: append(groups, user.AllAuthenticated)}
	}
	var (
		node        = authed("system:node:n1", "system:nodes")
		scheduler   = authed("system:kube-scheduler")
		controllers = authed("rayctl:controllers")
		gc          = authed("rayctl:garbage-collector")
		namespaces  = authed("rayctl:namespace-controller")
		dns         = authed("rayctl:dns")
		proxy       = authed("rayctl:service-proxy")
		someone     = authed("someone")
		anonymous   = &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}
		admin       = &user.DefaultInfo{Name: "admin", Groups: []string{user.SystemPrivilegedGroup}}
	)
	res := func(u user.Info, verb, group, resource, ns string) authorizer.AttributesRecord {
		r, sub, _ := strings.Cut(resource, "/")
		return authorizer.AttributesRecord{User: u, Verb: verb, APIGroup: group, Resource: r, Subresource: sub, Namespace: ns, ResourceRequest: true}
	}
	path := func(u user.Info, p string) authorizer.AttributesRecord {
		return authorizer.AttributesRecord{User: u, Verb: "get", Path: p}
	}
	for _, tc := range []struct {
		name  string
		attrs authorizer.AttributesRecord
		want  bool
	}{
		{"anyone reads /healthz", path(anonymous, "/healthz"), true},
		{"anonymous reads no discovery", path(anonymous, "/api"), false},
		{"authenticated users read discovery", path(someone, "/apis/ray.io/v1"), true},
		{"authenticated users review their access", res(someone, "create", "authorization.k8s.io", "selfsubjectrulesreviews", ""), true},
		{"authenticated users list nothing", res(someone, "list", "", "pods", "default"), false},
		{"system:masters by cluster-admin", res(admin, "delete", "ray.io", "rayclusters", "x"), true},

		{"kubelet watches pods", res(node, "watch", "", "pods", ""), true},
		{"kubelet writes pod status", res(node, "patch", "", "pods/status", "x"), true},
		{"kubelet does not bind pods", res(node, "create", "", "pods/binding", "x"), false},
		{"kubelet updates its node status", res(node, "patch", "", "nodes/status", ""), true},
		{"kubelet renews its lease", res(node, "update", "coordination.k8s.io", "leases", "kube-node-lease"), true},
		{"kubelet has no leases elsewhere", res(node, "update", "coordination.k8s.io", "leases", "default"), false},
		{"kubelet records events", res(node, "create", "events.k8s.io", "events", "x"), true},
		// Reads of the secrets and config maps its pods use come from the node authorizer, not RBAC.
		{"RBAC grants the kubelet no secrets", res(node, "get", "", "secrets", "x"), false},
		{"RBAC grants the kubelet no config maps", res(node, "list", "", "configmaps", ""), false},
		{"kubelet does not write secrets", res(node, "update", "", "secrets", "x"), false},
		{"kubelet creates no RayClusters", res(node, "create", "ray.io", "rayclusters", "x"), false},

		{"scheduler binds pods", res(scheduler, "create", "", "pods/binding", "x"), true},
		{"scheduler marks pods unschedulable", res(scheduler, "patch", "", "pods/status", "x"), true},
		{"scheduler lists nodes", res(scheduler, "list", "", "nodes", ""), true},
		{"scheduler deletes no pods", res(scheduler, "delete", "", "pods", "x"), false},

		{"controllers create pods", res(controllers, "create", "", "pods", "x"), true},
		{"controllers write RayCluster status", res(controllers, "patch", "ray.io", "rayclusters/status", "x"), true},
		{"controllers write RayJob finalizers", res(controllers, "update", "ray.io", "rayjobs/finalizers", "x"), true},
		{"controllers run batch Jobs", res(controllers, "create", "batch", "jobs", "x"), true},
		{"controllers write Job status", res(controllers, "update", "batch", "jobs/status", "x"), true},
		{"controllers elect a leader", res(controllers, "update", "coordination.k8s.io", "leases", "kube-system"), true},
		{"controllers finalize namespaces", res(controllers, "update", "", "namespaces/finalize", ""), true},
		{"controllers read no nodes", res(controllers, "list", "", "nodes", ""), false},
		{"controllers read a Ray token's Secret", res(controllers, "get", "", "secrets", "x"), true},
		{"controllers list no secrets", res(controllers, "list", "", "secrets", ""), false},
		{"controllers watch no secrets", res(controllers, "watch", "", "secrets", ""), false},
		{"controllers update no secrets", res(controllers, "update", "", "secrets", "x"), false},
		{"controllers grant no cluster roles", res(controllers, "create", "rbac.authorization.k8s.io", "clusterrolebindings", ""), false},

		{"garbage collector deletes anything", res(gc, "delete", "ray.io", "rayclusters", "x"), true},
		{"garbage collector creates nothing", res(gc, "create", "", "pods", "x"), false},

		{"namespace controller empties namespaces", res(namespaces, "deletecollection", "ray.io", "rayjobs", "x"), true},
		{"namespace controller finalizes namespaces", res(namespaces, "update", "", "namespaces/finalize", ""), true},
		{"namespace controller creates nothing", res(namespaces, "create", "", "pods", "x"), false},

		{"dns watches services", res(dns, "watch", "", "services", ""), true},
		{"dns watches endpointslices", res(dns, "watch", "discovery.k8s.io", "endpointslices", ""), true},
		{"dns reads no secrets", res(dns, "get", "", "secrets", "x"), false},
		{"service proxy watches services", res(proxy, "watch", "", "services", ""), true},
		{"service proxy lists endpointslices", res(proxy, "list", "discovery.k8s.io", "endpointslices", ""), true},
		{"service proxy reads no pods", res(proxy, "list", "", "pods", ""), false},
		{"service proxy writes no services", res(proxy, "update", "", "services", "x"), false},
		{"service proxy reads no secrets", res(proxy, "get", "", "secrets", "x"), false},
	} {
		d, reason, err := a.Authorize(context.Background(), tc.attrs)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if got := d == authorizer.DecisionAllow; got != tc.want {
			t.Errorf("%s: allowed=%v (%q), want %v", tc.name, got, reason, tc.want)
		}
	}
}

// TestApplyIsIdempotent checks that applying the policy creates it, applying it again writes nothing,
// and a changed object is put back.
func TestApplyIsIdempotent(t *testing.T) {
	ctx := context.Background()
	objs := bootstrapPolicy(t)
	client := fake.NewClientset()
	stored, err := policy.Apply(ctx, client, objs)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != len(objs) {
		t.Fatalf("Apply returned %d objects for %d", len(stored), len(objs))
	}
	if n := writes(client.Actions()); n != len(objs) {
		t.Errorf("first apply wrote %d times, want %d creates", n, len(objs))
	}
	client.ClearActions()
	if _, err := policy.Apply(ctx, client, objs); err != nil {
		t.Fatal(err)
	}
	if n := writes(client.Actions()); n != 0 {
		t.Errorf("second apply wrote %d times, want none: %v", n, client.Actions())
	}

	// Someone widens a role and points a binding elsewhere; the next apply undoes both.
	roles := client.RbacV1().ClusterRoles()
	dns, _ := roles.Get(ctx, "rayctl:dns", metav1.GetOptions{})
	dns.Rules = append(dns.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}})
	dns.Labels["extra"] = "kept"
	if _, err := roles.Update(ctx, dns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	bindings := client.RbacV1().ClusterRoleBindings()
	b, _ := bindings.Get(ctx, "rayctl:dns", metav1.GetOptions{})
	b.RoleRef.Name = "cluster-admin"
	if _, err := bindings.Update(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := policy.Apply(ctx, client, objs); err != nil {
		t.Fatal(err)
	}
	dns, _ = roles.Get(ctx, "rayctl:dns", metav1.GetOptions{})
	if len(dns.Rules) != 2 || dns.Labels["extra"] != "kept" {
		t.Errorf("rayctl:dns after apply: rules %v labels %v, want the policy's two rules and the extra label kept", dns.Rules, dns.Labels)
	}
	if b, _ = bindings.Get(ctx, "rayctl:dns", metav1.GetOptions{}); b.RoleRef.Name != "rayctl:dns" {
		t.Errorf("binding rayctl:dns refers to %s after apply", b.RoleRef.Name)
	}

	// An object its owner marked autoupdate=false is left alone.
	dns.Annotations[policy.AutoupdateAnnotation] = "false"
	dns.Rules = dns.Rules[:1]
	if _, err := roles.Update(ctx, dns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := policy.Apply(ctx, client, objs); err != nil {
		t.Fatal(err)
	}
	if dns, _ = roles.Get(ctx, "rayctl:dns", metav1.GetOptions{}); len(dns.Rules) != 1 {
		t.Errorf("apply changed a role marked autoupdate=false")
	}
}

func TestParseRejectsOtherKinds(t *testing.T) {
	_, err := policy.Parse([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"))
	if err == nil {
		t.Error("a ConfigMap parsed as RBAC policy")
	}
	_, err = policy.Parse([]byte("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: x\nrulez: []\n"))
	if err == nil {
		t.Error("an unknown field parsed")
	}
	objs, err := policy.Parse([]byte("# only a comment\n---\n"))
	if err != nil || len(objs) != 0 {
		t.Errorf("comments: %v %v", objs, err)
	}
}

func writes(actions []k8stesting.Action) int {
	n := 0
	for _, a := range actions {
		switch a.GetVerb() {
		case "create", "update", "patch", "delete":
			n++
		}
	}
	return n
}

func listers(t *testing.T, objs []runtime.Object) rbac.Listers {
	t.Helper()
	idx := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	r, cr, rb, crb := idx(), idx(), idx(), idx()
	for _, o := range objs {
		var err error
		switch o.(type) {
		case *rbacv1.Role:
			err = r.Add(o)
		case *rbacv1.ClusterRole:
			err = cr.Add(o)
		case *rbacv1.RoleBinding:
			err = rb.Add(o)
		case *rbacv1.ClusterRoleBinding:
			err = crb.Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return rbac.Listers{
		Roles: rbaclisters.NewRoleLister(r), ClusterRoles: rbaclisters.NewClusterRoleLister(cr),
		RoleBindings: rbaclisters.NewRoleBindingLister(rb), ClusterRoleBindings: rbaclisters.NewClusterRoleBindingLister(crb),
	}
}
