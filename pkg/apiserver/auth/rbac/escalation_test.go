package rbac_test

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/rayctl/rayctl/pkg/apiserver/auth"
	"github.com/rayctl/rayctl/pkg/apiserver/auth/rbac"
)

func rule(group, resource string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{resource}, Verbs: verbs}
}

func describeAll(rules []rbacv1.PolicyRule) string {
	var lines []string
	for _, r := range rules {
		lines = append(lines, rbac.DescribeRule(r))
	}
	return strings.Join(lines, "\n")
}

// TestMissingPermissions checks which of a role's permissions a user is found to hold: every verb,
// group, resource (with subresource), name and URL a rule names must be allowed as it is written.
func TestMissingPermissions(t *testing.T) {
	holder := &user.DefaultInfo{Name: "hana", Groups: []string{"system:authenticated"}}
	a := rbac.NewWithListers(listersFor(t,
		role("team", "editor",
			rule("", "pods", "get", "list"),
			rule("", "pods/status", "update"),
			rule("apps", "*/scale", "update"),
			rule("", "services", "*"),
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"settings", "flags"}, Verbs: []string{"get"}},
			rule("", "secrets", "get"),
		),
		binding("team", "hana-edits", "Role", "editor", userSubject("hana")),
		clusterRole("debugger", rbacv1.PolicyRule{NonResourceURLs: []string{"/debug/*", "/metrics"}, Verbs: []string{"get"}}),
		clusterBinding("hana-debugs", "debugger", userSubject("hana")),
	))
	names := func(names ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: names, Verbs: []string{"get"}}
	}
	urls := func(verb string, urls ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{NonResourceURLs: urls, Verbs: []string{verb}}
	}
	for _, tc := range []struct {
		name      string
		namespace string
		rules     []rbacv1.PolicyRule
		want      string // the missing rules, described, one a line
	}{
		{"held verbs", "team", []rbacv1.PolicyRule{rule("", "pods", "get")}, ""},
		{"all held verbs", "team", []rbacv1.PolicyRule{rule("", "pods", "list", "get")}, ""},
		{"a verb not held", "team", []rbacv1.PolicyRule{rule("", "pods", "get", "delete")},
			`{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}`},
		{"not in another namespace", "other", []rbacv1.PolicyRule{rule("", "pods", "get", "list")},
			`{APIGroups:[""], Resources:["pods"], Verbs:["get" "list"]}`},
		{"not cluster-wide", "", []rbacv1.PolicyRule{rule("", "pods", "get")},
			`{APIGroups:[""], Resources:["pods"], Verbs:["get"]}`},
		{"the * verb is held only as *", "team", []rbacv1.PolicyRule{rule("", "pods", "*")},
			`{APIGroups:[""], Resources:["pods"], Verbs:["*"]}`},
		{"* verbs cover any verb", "team", []rbacv1.PolicyRule{rule("", "services", "*", "delete", "escalate")}, ""},
		{"* resources are not pods", "team", []rbacv1.PolicyRule{rule("", "*", "get")},
			`{APIGroups:[""], Resources:["*"], Verbs:["get"]}`},
		{"* groups are not the core group", "team", []rbacv1.PolicyRule{rule("*", "pods", "get")},
			`{APIGroups:["*"], Resources:["pods"], Verbs:["get"]}`},
		{"another group", "team", []rbacv1.PolicyRule{rule("apps", "pods", "get")},
			`{APIGroups:["apps"], Resources:["pods"], Verbs:["get"]}`},
		{"subresource held", "team", []rbacv1.PolicyRule{rule("", "pods/status", "update")}, ""},
		{"resource does not cover subresource", "team", []rbacv1.PolicyRule{rule("", "pods/log", "get")},
			`{APIGroups:[""], Resources:["pods/log"], Verbs:["get"]}`},
		{"*/scale covers deployments/scale", "team", []rbacv1.PolicyRule{rule("apps", "deployments/scale", "update")}, ""},
		{"*/scale held as written", "team", []rbacv1.PolicyRule{rule("apps", "*/scale", "update")}, ""},
		{"pods/status does not cover */status", "team", []rbacv1.PolicyRule{rule("", "*/status", "update")},
			`{APIGroups:[""], Resources:["*/status"], Verbs:["update"]}`},
		{"named objects held", "team", []rbacv1.PolicyRule{names("flags", "settings")}, ""},
		{"one name not held", "team", []rbacv1.PolicyRule{names("settings", "tokens", "keys")},
			`{APIGroups:[""], Resources:["configmaps"], ResourceNames:["tokens" "keys"], Verbs:["get"]}`},
		{"names do not cover every object", "team", []rbacv1.PolicyRule{rule("", "configmaps", "get")},
			`{APIGroups:[""], Resources:["configmaps"], Verbs:["get"]}`},
		{"every object covers names", "team", []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"a"}, Verbs: []string{"get"}}}, ""},
		{"URL under a held prefix", "", []rbacv1.PolicyRule{urls("get", "/debug/pprof", "/debug/*", "/metrics")}, ""},
		{"URL not held", "", []rbacv1.PolicyRule{urls("get", "/metrics", "/logs/*")},
			`{NonResourceURLs:["/logs/*"], Verbs:["get"]}`},
		{"URL verb not held", "", []rbacv1.PolicyRule{urls("post", "/metrics")},
			`{NonResourceURLs:["/metrics"], Verbs:["post"]}`},
		{"a wider prefix than held", "", []rbacv1.PolicyRule{urls("get", "/debug*")},
			`{NonResourceURLs:["/debug*"], Verbs:["get"]}`},
		{"several rules", "team", []rbacv1.PolicyRule{rule("", "pods", "get"), rule("", "secrets", "get", "list"), rule("batch", "jobs", "create")},
			"{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"list\"]}\n{APIGroups:[\"batch\"], Resources:[\"jobs\"], Verbs:[\"create\"]}"},
		{"a rule granting nothing", "team", []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}}}, ""},
	} {
		missing, err := rbac.MissingPermissions(context.Background(), a, holder, tc.namespace, tc.rules)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if got := describeAll(missing); got != tc.want {
			t.Errorf("%s: missing\n%s\nwant\n%s", tc.name, got, tc.want)
		}
	}
}

// TestMissingPermissionsMasters checks that through the server's authorizer chain system:masters holds
// everything, cluster-admin's wildcards included, and that others hold nothing of it.
func TestMissingPermissionsMasters(t *testing.T) {
	a, err := auth.NewAuthorizer()
	if err != nil {
		t.Fatal(err)
	}
	clusterAdmin := []rbacv1.PolicyRule{rule("*", "*", "*"), {NonResourceURLs: []string{"*"}, Verbs: []string{"*"}}}
	master := &user.DefaultInfo{Name: "admin", Groups: []string{user.SystemPrivilegedGroup}}
	if missing, _ := rbac.MissingPermissions(context.Background(), a, master, "", clusterAdmin); len(missing) != 0 {
		t.Errorf("system:masters misses %s", describeAll(missing))
	}
	nobody := &user.DefaultInfo{Name: "nobody"}
	missing, _ := rbac.MissingPermissions(context.Background(), a, nobody, "default", clusterAdmin)
	if want := "{APIGroups:[\"*\"], Resources:[\"*\"], Verbs:[\"*\"]}\n{NonResourceURLs:[\"*\"], Verbs:[\"*\"]}"; describeAll(missing) != want {
		t.Errorf("an unbound user misses\n%s\nwant\n%s", describeAll(missing), want)
	}
}

func TestCompact(t *testing.T) {
	in := []rbacv1.PolicyRule{
		rule("", "pods", "get"),
		rule("", "secrets", "get"),
		rule("", "pods", "list"),
		rule("", "pods", "get"),
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"a"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"b"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"b"}, Verbs: []string{"update"}},
		{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}},
		{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"post"}},
		{APIGroups: []string{"", "apps"}, Resources: []string{"x"}, Verbs: []string{"get"}},
	}
	want := strings.Join([]string{
		`{APIGroups:[""], Resources:["pods"], Verbs:["get" "list"]}`,
		`{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}`,
		`{APIGroups:[""], Resources:["configmaps"], ResourceNames:["a"], Verbs:["get"]}`,
		`{APIGroups:[""], Resources:["configmaps"], ResourceNames:["b"], Verbs:["get" "update"]}`,
		`{NonResourceURLs:["/metrics"], Verbs:["get" "post"]}`,
		`{APIGroups:["" "apps"], Resources:["x"], Verbs:["get"]}`,
	}, "\n")
	if got := describeAll(rbac.Compact(in)); got != want {
		t.Errorf("Compact:\n%s\nwant\n%s", got, want)
	}
}

func TestEscalationError(t *testing.T) {
	u := &user.DefaultInfo{Name: "bob", Groups: []string{"devs", "system:authenticated"}}
	err := rbac.EscalationError(u, []rbacv1.PolicyRule{rule("", "secrets", "get"), rule("", "pods", "delete")}, nil)
	want := "user \"bob\" (groups=[\"devs\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n" +
		"{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\"]}\n{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\"]}"
	if err.Error() != want {
		t.Errorf("message:\n%s\nwant\n%s", err, want)
	}
}
