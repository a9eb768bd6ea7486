package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/rayctl/rayctl/pkg/apiserver/pki"
	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/chain/chainhttp"
	"github.com/rayctl/rayctl/test/e2e/framework"
)

// identity is a client certificate minted from the instance's CA for user (in groups), and clients
// that present it.
type identity struct {
	config  *rest.Config
	client  kubernetes.Interface
	dynamic dynamic.Interface
}

func newIdentity(t *testing.T, in *framework.Instance, user string, groups ...string) *identity {
	t.Helper()
	ca, err := pki.LoadOrCreate(filepath.Join(in.DataDir, "pki"))
	must(t, "loading the instance's CA", err)
	file := "e2e-rbac-" + strings.NewReplacer(":", "-", "/", "-").Replace(user)
	kp, err := ca.Client(file, user, groups)
	must(t, "minting a client certificate for "+user, err)
	cfg := &rest.Config{
		Host:            in.Config.Host,
		TLSClientConfig: rest.TLSClientConfig{CAData: in.Config.CAData, CertData: kp.CertPEM, KeyData: kp.KeyPEM},
		WarningHandler:  rest.NoWarnings{},
		QPS:             100, Burst: 200,
	}
	id := &identity{config: cfg}
	id.client, err = kubernetes.NewForConfig(cfg)
	must(t, "client for "+user, err)
	id.dynamic, err = dynamic.NewForConfig(cfg)
	must(t, "dynamic client for "+user, err)
	return id
}

// TestRBACBindingGrantsAccess checks that a user without bindings is refused with Kubernetes' message, and
// that a RoleBinding lets the same user in, in its namespace only.
func TestRBACBindingGrantsAccess(t *testing.T) {
	in, ctx, ns := setup(t)
	erin := newIdentity(t, in, "e2e-rbac-erin")

	_, err := erin.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	expectStatus(t, "an unbound user lists pods", err, 403,
		`pods is forbidden: User "e2e-rbac-erin" cannot list resource "pods" in API group "" in the namespace "default"`)
	_, err = erin.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	expectStatus(t, "an unbound user lists nodes", err, 403,
		`User "e2e-rbac-erin" cannot list resource "nodes" in API group "" at the cluster scope`)

	// Every authenticated user may still use discovery and ask what it may do.
	_, err = erin.client.Discovery().ServerGroups()
	must(t, "discovery as an unbound user", err)
	review, err := erin.client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "list", Resource: "pods"}},
	}, metav1.CreateOptions{})
	must(t, "SelfSubjectAccessReview as an unbound user", err)
	if review.Status.Allowed {
		t.Errorf("an unbound user's self review says it may list pods: %+v", review.Status)
	}

	_, err = in.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{})
	must(t, "creating a Role", err)
	_, err = in.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "erin-reads-pods"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "e2e-rbac-erin"}},
	}, metav1.CreateOptions{})
	must(t, "creating a RoleBinding", err)

	// The authorizer learns of the binding through its informers, a moment later.
	eventually(t, ctx, 30*time.Second, "the RoleBinding lets erin list pods", func(ctx context.Context) (bool, error) {
		_, err := erin.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil, err
	})
	_, err = erin.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	expectStatus(t, "listing pods outside the RoleBinding's namespace", err, 403, `in the namespace "default"`)
	_, err = erin.client.CoreV1().Pods(ns).Create(ctx, boundPod("p"), metav1.CreateOptions{})
	expectStatus(t, "creating a pod with a read-only Role", err, 403, `cannot create resource "pods"`)

	// Removing the binding takes the access away again.
	must(t, "deleting the RoleBinding", in.Client.RbacV1().RoleBindings(ns).Delete(ctx, "erin-reads-pods", metav1.DeleteOptions{}))
	eventually(t, ctx, 30*time.Second, "erin loses access with the binding", func(ctx context.Context) (bool, error) {
		_, err := erin.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return apierrors.IsForbidden(err), nil
	})
}

// TestRBACNodeIdentity checks that a kubelet's identity may write pod status but not create RayClusters
// or bind pods.
func TestRBACNodeIdentity(t *testing.T) {
	in, ctx, ns := setup(t)
	node := newIdentity(t, in, "system:node:"+fakeNode, "system:nodes")

	_, err := in.Client.CoreV1().Pods(ns).Create(ctx, boundPod("work"), metav1.CreateOptions{})
	must(t, "creating a pod", err)
	_, err = node.client.CoreV1().Pods(ns).Get(ctx, "work", metav1.GetOptions{})
	must(t, "the node reads a pod", err)
	patch := []byte(`{"status":{"conditions":[{"type":"e2e.rayctl.io/Checked","status":"True"}]}}`)
	_, err = node.client.CoreV1().Pods(ns).Patch(ctx, "work", types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	must(t, "the node patches pods/status", err)
	got, err := in.Client.CoreV1().Pods(ns).Get(ctx, "work", metav1.GetOptions{})
	must(t, "reading the pod back", err)
	found := false
	for _, c := range got.Status.Conditions {
		found = found || (c.Type == "e2e.rayctl.io/Checked" && c.Status == corev1.ConditionTrue)
	}
	if !found {
		t.Errorf("the node's status patch did not land: %+v", got.Status.Conditions)
	}

	// Writing the pod's spec is not the kubelet's business.
	_, err = node.client.CoreV1().Pods(ns).Patch(ctx, "work", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
	expectStatus(t, "the node patches a pod", err, 403, `User "system:node:`+fakeNode+`" cannot patch resource "pods"`)
	_, err = node.dynamic.Resource(framework.RayClusters).Namespace(ns).Create(ctx, framework.RayCluster("sneaky"), metav1.CreateOptions{})
	expectStatus(t, "the node creates a RayCluster", err, 403,
		`User "system:node:`+fakeNode+`" cannot create resource "rayclusters" in API group "ray.io" in the namespace "`+ns+`"`)
	err = node.client.CoreV1().Pods(ns).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: "work"}, Target: corev1.ObjectReference{Kind: "Node", Name: fakeNode},
	}, metav1.CreateOptions{})
	expectStatus(t, "the node binds a pod", err, 403, `cannot create resource "pods/binding"`)
	// The chain recorder is for admins: the node may not read it.
	chainClient, err := chainhttp.NewClient(node.config)
	must(t, "a chain client for the node", err)
	_, err = chainClient.Events(ctx, chain.Filter{})
	if err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("the node reads /debug/chain/events: %v, want 403", err)
	}
}

// TestRBACControllersIdentity checks rayctl:controllers against KubeRay's operator role: it creates pods
// and writes RayCluster status, but reads no nodes or secrets.
func TestRBACControllersIdentity(t *testing.T) {
	in, ctx, ns := setup(t)
	ctrl := newIdentity(t, in, "rayctl:controllers")

	_, err := ctrl.client.CoreV1().Pods(ns).Create(ctx, boundPod("head"), metav1.CreateOptions{})
	must(t, "the controllers create a pod", err)
	admin, err := dynamic.NewForConfig(quiet(in.Config))
	must(t, "admin dynamic client", err)
	_, err = admin.Resource(framework.RayClusters).Namespace(ns).Create(ctx, framework.RayCluster("c1"), metav1.CreateOptions{})
	must(t, "creating a RayCluster", err)
	_, err = ctrl.dynamic.Resource(framework.RayClusters).Namespace(ns).Patch(ctx, "c1", types.MergePatchType,
		[]byte(`{"status":{"desiredWorkerReplicas":0}}`), metav1.PatchOptions{}, "status")
	must(t, "the controllers patch rayclusters/status", err)
	_, err = ctrl.dynamic.Resource(framework.RayClusters).Namespace(ns).List(ctx, metav1.ListOptions{})
	must(t, "the controllers list RayClusters", err)

	_, err = ctrl.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	expectStatus(t, "the controllers list nodes", err, 403,
		`User "rayctl:controllers" cannot list resource "nodes" in API group "" at the cluster scope`)
	_, err = ctrl.client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	expectStatus(t, "the controllers list secrets", err, 403, `cannot list resource "secrets"`)
	_, err = ctrl.client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-escalate"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "rayctl:controllers"}},
	}, metav1.CreateOptions{})
	expectStatus(t, "the controllers bind themselves to cluster-admin", err, 403, `cannot create resource "clusterrolebindings"`)
}

// TestRBACKubectlCanI checks `kubectl auth can-i` through impersonation, its --list form, and the reasons
// SubjectAccessReviews give.
func TestRBACKubectlCanI(t *testing.T) {
	in, ctx, ns := setup(t)
	canI := func(args ...string) string {
		t.Helper()
		out, errOut, err := in.Kubectl(ctx, "", append([]string{"auth", "can-i", "-n", ns}, args...)...)
		answer := strings.TrimSpace(out)
		// can-i exits 1 when the answer is no.
		if err != nil && answer != "no" {
			t.Fatalf("kubectl auth can-i %v: %v\n%s%s", args, err, out, errOut)
		}
		return answer
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "pods", "--as=rayctl:controllers"}, "yes"},
		{[]string{"list", "nodes", "--as=rayctl:controllers"}, "no"},
		{[]string{"create", "pods", "--subresource=binding", "--as=system:kube-scheduler"}, "yes"},
		{[]string{"create", "pods", "--as=system:kube-scheduler"}, "no"},
		{[]string{"patch", "pods", "--subresource=status", "--as=system:node:n1", "--as-group=system:nodes"}, "yes"},
		{[]string{"create", "rayclusters.ray.io", "--as=system:node:n1", "--as-group=system:nodes"}, "no"},
		{[]string{"list", "pods", "--as=system:serviceaccount:" + ns + ":default"}, "no"},
	} {
		if got := canI(c.args...); got != c.want {
			t.Errorf("kubectl auth can-i %s = %q, want %q", strings.Join(c.args, " "), got, c.want)
		}
	}

	// A service account through a RoleBinding, with impersonation adding its groups.
	_, err := in.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "default-sa-dns"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "rayctl:dns"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: ns}},
	}, metav1.CreateOptions{})
	must(t, "binding a service account", err)
	eventually(t, ctx, 30*time.Second, "the service account may list pods in its namespace", func(ctx context.Context) (bool, error) {
		return canI("list", "pods", "--as=system:serviceaccount:"+ns+":default") == "yes", nil
	})

	// --list shows a component's rules (SelfSubjectRulesReview).
	out, errOut, err := in.Kubectl(ctx, "", "auth", "can-i", "--list", "-n", ns, "--as=rayctl:dns")
	if err != nil {
		t.Fatalf("kubectl auth can-i --list --as=rayctl:dns: %v\n%s", err, errOut)
	}
	for _, want := range []string{"endpointslices.discovery.k8s.io", "services", "selfsubjectrulesreviews.authorization.k8s.io", "[/healthz]"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl auth can-i --list --as=rayctl:dns does not show %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "secrets") {
		t.Errorf("kubectl auth can-i --list --as=rayctl:dns shows secrets:\n%s", out)
	}
	out, errOut, err = in.Kubectl(ctx, "", "auth", "can-i", "--list")
	if err != nil || !strings.Contains(out, "*.*") {
		t.Errorf("kubectl auth can-i --list as admin: %v\n%s%s\nwant the cluster-admin rule *.*", err, out, errOut)
	}

	sar, err := in.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "rayctl:dns",
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "watch", Resource: "services"},
		},
	}, metav1.CreateOptions{})
	must(t, "SubjectAccessReview", err)
	want := `RBAC: allowed by ClusterRoleBinding "rayctl:dns" of ClusterRole "rayctl:dns" to User "rayctl:dns"`
	if !sar.Status.Allowed || sar.Status.Reason != want {
		t.Errorf("SubjectAccessReview for rayctl:dns: %+v, want allowed with reason %q", sar.Status, want)
	}
}

// TestRBACPublicPaths checks that RBAC leaves anonymous access as it was (health and version only) and
// that an authenticated user without bindings may read health and discovery.
func TestRBACPublicPaths(t *testing.T) {
	t.Parallel()
	in := shared(t)
	ctx := testContext(t)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(in.Config.CAData) {
		t.Fatal("the kubeconfig carries no CA certificate")
	}
	anonymous := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	get := func(c *http.Client, path string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, in.Config.Host+path, nil)
		must(t, "request", err)
		resp, err := c.Do(req)
		must(t, "GET "+path, err)
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	if code := get(anonymous, "/api"); code != http.StatusUnauthorized {
		t.Errorf("anonymous GET /api = %d, want 401", code)
	}
	if code := get(anonymous, "/healthz"); code != http.StatusOK {
		t.Errorf("anonymous GET /healthz = %d, want 200", code)
	}
	nobody := newIdentity(t, in, "e2e-rbac-nobody")
	transport, err := rest.TransportFor(nobody.config)
	must(t, "transport", err)
	authed := &http.Client{Timeout: 30 * time.Second, Transport: transport}
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/version": 200, "/api": 200, "/apis": 200, "/metrics": 403, "/api/v1/secrets": 403} {
		if code := get(authed, path); code != want {
			t.Errorf("GET %s as an unbound user = %d, want %d", path, code, want)
		}
	}
}

// TestRBACPolicySurvivesRestart checks that a restart puts an edited bootstrap role back, leaves alone one
// whose owner set autoupdate=false, and keeps the user's own bindings in force.
func TestRBACPolicySurvivesRestart(t *testing.T) {
	t.Parallel()
	in, err := framework.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Cleanup(t) })
	ctx := testContext(t)
	roles := in.Client.RbacV1().ClusterRoles()
	widen := func(name string, keep bool) {
		t.Helper()
		r, err := roles.Get(ctx, name, metav1.GetOptions{})
		must(t, "reading "+name, err)
		r.Rules = append(r.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}})
		if keep {
			r.Annotations["rbac.authorization.kubernetes.io/autoupdate"] = "false"
		}
		_, err = roles.Update(ctx, r, metav1.UpdateOptions{})
		must(t, "widening "+name, err)
	}
	widen("rayctl:dns", false)
	widen("rayctl:scheduler", true)
	_, err = in.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-viewer-nodes"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "rayctl:scheduler"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "e2e-rbac-viewer"}},
	}, metav1.CreateOptions{})
	must(t, "binding a user", err)

	must(t, "stopping", in.Stop())
	must(t, "restarting", in.Restart())

	secretRules := func(name string) int {
		r, err := in.Client.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
		must(t, "reading "+name, err)
		n := 0
		for _, rule := range r.Rules {
			for _, res := range rule.Resources {
				if res == "secrets" {
					n++
				}
			}
		}
		return n
	}
	if n := secretRules("rayctl:dns"); n != 0 {
		t.Errorf("rayctl:dns still grants secrets after a restart")
	}
	if n := secretRules("rayctl:scheduler"); n != 1 {
		t.Errorf("rayctl:scheduler, marked autoupdate=false, lost its edit on restart")
	}
	// Ready means RBAC is in force: the binding works at once, without waiting.
	viewer := newIdentity(t, in, "e2e-rbac-viewer")
	_, err = viewer.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	must(t, "listing nodes through a binding right after the restart", err)
	_, err = viewer.client.CoreV1().Secrets("default").Get(ctx, "x", metav1.GetOptions{})
	expectStatus(t, "reading a secret through the kept edit (the secret does not exist)", err, 404)
}

// grantInNamespace gives user the rules in ns, through a Role and a RoleBinding both called name.
func grantInNamespace(t *testing.T, ctx context.Context, in *framework.Instance, ns, name, user string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	_, err := in.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
	must(t, "creating Role "+name, err)
	_, err = in.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}, metav1.CreateOptions{})
	must(t, "creating RoleBinding "+name, err)
}

// untilEscalationChecked retries write while the authorizer has not yet learnt of a grant (its 403 says
// "cannot …"), and returns the first answer that is not that: success, or the escalation check's 403.
func untilEscalationChecked(t *testing.T, ctx context.Context, what string, write func(ctx context.Context) error) error {
	t.Helper()
	var err error
	eventually(t, ctx, 30*time.Second, what, func(ctx context.Context) (bool, error) {
		err = write(ctx)
		return err == nil || strings.Contains(err.Error(), "not currently held"), nil
	})
	return err
}

// TestRBACEscalationRoles checks privilege escalation prevention for roles: a user who may create
// roles may create one granting only what it holds itself, until it is granted the rest or escalate.
func TestRBACEscalationRoles(t *testing.T) {
	in, ctx, ns := setup(t)
	const user = "e2e-rbac-role-writer"
	writer := newIdentity(t, in, user)
	roles := writer.client.RbacV1().Roles(ns)
	grantInNamespace(t, ctx, in, ns, "role-writer", user,
		rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles"}, Verbs: []string{"create", "get", "update", "patch"}})
	secretReader := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "secret-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}},
	}
	createRole := func(r *rbacv1.Role) func(ctx context.Context) error {
		return func(ctx context.Context) error { _, err := roles.Create(ctx, r, metav1.CreateOptions{}); return err }
	}

	err := untilEscalationChecked(t, ctx, "the role-writer binding in force", createRole(secretReader))
	expectStatus(t, "creating a Role granting get secrets without holding it", err, 403,
		`roles.rbac.authorization.k8s.io "secret-reader" is forbidden: user "`+user+`" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:`,
		`{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}`)
	if _, err := in.Client.RbacV1().Roles(ns).Get(ctx, "secret-reader", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused Role was stored anyway: %v", err)
	}

	// What the user holds, it may grant; and it may not widen that role either.
	_, err = roles.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "role-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{})
	must(t, "creating a Role granting only what the user holds", err)
	r, err := roles.Get(ctx, "role-reader", metav1.GetOptions{})
	must(t, "reading it back", err)
	r.Rules = append(r.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list"}})
	_, err = roles.Update(ctx, r, metav1.UpdateOptions{})
	expectStatus(t, "widening a Role to secrets", err, 403, "is attempting to grant RBAC permissions not currently held",
		`{APIGroups:[""], Resources:["secrets"], Verbs:["get" "list"]}`)
	_, err = roles.Patch(ctx, "role-reader", types.JSONPatchType,
		[]byte(`[{"op":"add","path":"/rules/-","value":{"apiGroups":[""],"resources":["pods"],"verbs":["delete"]}}]`), metav1.PatchOptions{})
	expectStatus(t, "patching a Role to delete pods", err, 403, `{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}`)

	// Once the user holds get secrets, it may grant it.
	grantInNamespace(t, ctx, in, ns, "secret-getter", user,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}})
	eventually(t, ctx, 30*time.Second, "creating secret-reader once the user may get secrets", func(ctx context.Context) (bool, error) {
		return true, createRole(secretReader)(ctx)
	})

	// Or, with escalate on roles, anything.
	podDeleter := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-deleter"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"delete", "deletecollection"}}},
	}
	_, err = roles.Create(ctx, podDeleter, metav1.CreateOptions{})
	expectStatus(t, "creating a Role granting delete pods", err, 403, `{APIGroups:[""], Resources:["pods"], Verbs:["delete" "deletecollection"]}`)
	grantInNamespace(t, ctx, in, ns, "role-escalator", user,
		rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles"}, Verbs: []string{"escalate"}})
	eventually(t, ctx, 30*time.Second, "creating pod-deleter once the user may escalate roles", func(ctx context.Context) (bool, error) {
		return true, createRole(podDeleter)(ctx)
	})
}

// TestRBACEscalationBindings checks privilege escalation prevention for bindings: a user who may create
// role bindings may bind roles whose permissions it holds, and cluster-admin only once it may bind it.
func TestRBACEscalationBindings(t *testing.T) {
	in, ctx, ns := setup(t)
	const user = "e2e-rbac-binder"
	binder := newIdentity(t, in, user)
	bindings := binder.client.RbacV1().RoleBindings(ns)
	grantInNamespace(t, ctx, in, ns, "binding-writer", user,
		rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"}, Verbs: []string{"create"}})
	bindingTo := func(name, kind, role string) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "e2e-rbac-dana"}},
		}
	}
	create := func(b *rbacv1.RoleBinding) func(ctx context.Context) error {
		return func(ctx context.Context) error { _, err := bindings.Create(ctx, b, metav1.CreateOptions{}); return err }
	}

	err := untilEscalationChecked(t, ctx, "the binding-writer binding in force", create(bindingTo("dana-admin", "ClusterRole", "cluster-admin")))
	expectStatus(t, "binding cluster-admin", err, 403,
		`rolebindings.rbac.authorization.k8s.io "dana-admin" is forbidden: user "`+user+`" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:`,
		`{APIGroups:["*"], Resources:["*"], Verbs:["*"]}`, `{NonResourceURLs:["*"], Verbs:["*"]}`)
	// A role whose every permission the user holds, it may bind without bind.
	must(t, "binding a Role the user's own permissions cover", create(bindingTo("dana-writes-bindings", "Role", "binding-writer"))(ctx))
	err = create(bindingTo("dana-missing", "Role", "no-such-role"))(ctx)
	expectStatus(t, "binding a Role that does not exist", err, 404, `roles.rbac.authorization.k8s.io "no-such-role" not found`)

	// bind on cluster-admin, and on nothing else.
	grantInNamespace(t, ctx, in, ns, "admin-binder", user, rbacv1.PolicyRule{
		APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, ResourceNames: []string{"cluster-admin"}, Verbs: []string{"bind"},
	})
	eventually(t, ctx, 30*time.Second, "binding cluster-admin once the user may bind it", func(ctx context.Context) (bool, error) {
		return true, create(bindingTo("dana-admin", "ClusterRole", "cluster-admin"))(ctx)
	})
	err = create(bindingTo("dana-controllers", "ClusterRole", "rayctl:controllers"))(ctx)
	expectStatus(t, "binding another ClusterRole", err, 403, "is attempting to grant RBAC permissions not currently held")
	// The grant is for this namespace's RoleBindings only.
	other := newNamespace(t, ctx, in)
	_, err = in.Client.RbacV1().RoleBindings(other).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "binding-writer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "e2e-rbac-binding-writer"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}, metav1.CreateOptions{})
	must(t, "binding the user in another namespace", err)
	_, err = in.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-rbac-binding-writer"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"}, Verbs: []string{"create"}}},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		must(t, "creating ClusterRole e2e-rbac-binding-writer", err)
	}
	err = untilEscalationChecked(t, ctx, "the user's binding in the other namespace in force", func(ctx context.Context) error {
		_, err := binder.client.RbacV1().RoleBindings(other).Create(ctx, bindingTo("dana-admin", "ClusterRole", "cluster-admin"), metav1.CreateOptions{})
		return err
	})
	expectStatus(t, "binding cluster-admin in another namespace", err, 403, "is attempting to grant RBAC permissions not currently held")
}

// TestRBACNodeRestriction checks that a node identity writes only its own Node, Lease and pods: RBAC
// grants every node the same, and the NodeRestriction admission plugin narrows it.
func TestRBACNodeRestriction(t *testing.T) {
	in, ctx, ns := setup(t)
	nodeA, nodeB := ns+"-a", ns+"-b"
	a := newIdentity(t, in, "system:node:"+nodeA, "system:nodes")
	// Nodes no kubelet runs, unschedulable so that nothing lands on them.
	fakeNodeObject := func(name string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"e2e.rayctl.io/test": "true"}}, Spec: corev1.NodeSpec{Unschedulable: true}}
	}
	t.Cleanup(func() {
		ctx := context.Background()
		for _, n := range []string{nodeA, nodeB} {
			_ = in.Client.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{})
		}
		_ = in.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, nodeA, metav1.DeleteOptions{})
	})
	_, err := in.Client.CoreV1().Nodes().Create(ctx, fakeNodeObject(nodeB), metav1.CreateOptions{})
	must(t, "creating node B", err)

	// Node A registers itself, but not another node.
	_, err = a.client.CoreV1().Nodes().Create(ctx, fakeNodeObject(ns+"-c"), metav1.CreateOptions{})
	expectStatus(t, "node A registers node C", err, 403, `node "`+nodeA+`" is not allowed to modify node "`+ns+`-c"`)
	_, err = a.client.CoreV1().Nodes().Create(ctx, fakeNodeObject(nodeA), metav1.CreateOptions{})
	must(t, "node A registers itself", err)

	// Its own Node and status, yes; node B's, no.
	labelPatch := []byte(`{"metadata":{"labels":{"e2e.rayctl.io/touched":"yes"}}}`)
	_, err = a.client.CoreV1().Nodes().Patch(ctx, nodeA, types.MergePatchType, labelPatch, metav1.PatchOptions{})
	must(t, "node A patches its Node", err)
	nb, err := in.Client.CoreV1().Nodes().Get(ctx, nodeB, metav1.GetOptions{})
	must(t, "reading node B", err)
	nb.Labels["e2e.rayctl.io/touched"] = "yes"
	_, err = a.client.CoreV1().Nodes().Update(ctx, nb, metav1.UpdateOptions{})
	expectStatus(t, "node A updates node B", err, 403, `nodes "`+nodeB+`" is forbidden: node "`+nodeA+`" is not allowed to modify node "`+nodeB+`"`)
	statusPatch := []byte(`{"status":{"conditions":[{"type":"e2e.rayctl.io/Checked","status":"True"}]}}`)
	_, err = a.client.CoreV1().Nodes().Patch(ctx, nodeB, types.StrategicMergePatchType, statusPatch, metav1.PatchOptions{}, "status")
	expectStatus(t, "node A patches node B's status", err, 403, `is not allowed to modify node "`+nodeB+`"`)
	_, err = a.client.CoreV1().Nodes().Patch(ctx, nodeA, types.StrategicMergePatchType, statusPatch, metav1.PatchOptions{}, "status")
	must(t, "node A patches its own status", err)
	if got, err := in.Client.CoreV1().Nodes().Get(ctx, nodeB, metav1.GetOptions{}); err != nil || got.Labels["e2e.rayctl.io/touched"] != "" || len(got.Status.Conditions) != 0 {
		t.Errorf("node B changed under node A's refused writes: %v %v %v", err, got.Labels, got.Status.Conditions)
	}

	// Pods: the status of its own, not of node B's; nor may it delete node B's or create pods for it.
	podOn := func(name, node string) *corev1.Pod {
		p := boundPod(name)
		p.Spec.NodeName = node
		return p
	}
	for name, node := range map[string]string{"on-a": nodeA, "on-b": nodeB} {
		_, err := in.Client.CoreV1().Pods(ns).Create(ctx, podOn(name, node), metav1.CreateOptions{})
		must(t, "creating pod "+name, err)
	}
	podStatus := []byte(`{"status":{"conditions":[{"type":"e2e.rayctl.io/Checked","status":"True"}]}}`)
	_, err = a.client.CoreV1().Pods(ns).Patch(ctx, "on-a", types.StrategicMergePatchType, podStatus, metav1.PatchOptions{}, "status")
	must(t, "node A patches the status of its pod", err)
	_, err = a.client.CoreV1().Pods(ns).Patch(ctx, "on-b", types.StrategicMergePatchType, podStatus, metav1.PatchOptions{}, "status")
	expectStatus(t, "node A patches the status of node B's pod", err, 403,
		`pods "on-b" is forbidden: node "`+nodeA+`" can only update the status of pods with spec.nodeName set to itself, not of a pod bound to node "`+nodeB+`"`)
	onB, err := in.Client.CoreV1().Pods(ns).Get(ctx, "on-b", metav1.GetOptions{})
	must(t, "reading pod on-b", err)
	onB.Status.Phase = corev1.PodFailed
	_, err = a.client.CoreV1().Pods(ns).UpdateStatus(ctx, onB, metav1.UpdateOptions{})
	expectStatus(t, "node A updates the status of node B's pod", err, 403, "can only update the status of pods with spec.nodeName set to itself")
	_, err = a.client.CoreV1().Pods(ns).Patch(ctx, "on-a", types.StrategicMergePatchType,
		[]byte(`{"metadata":{"labels":{"x":"y"}},"status":{"message":"m"}}`), metav1.PatchOptions{}, "status")
	expectStatus(t, "node A relabels its pod through status", err, 403, "cannot update labels through pod status")
	err = a.client.CoreV1().Pods(ns).Delete(ctx, "on-b", metav1.DeleteOptions{})
	expectStatus(t, "node A deletes node B's pod", err, 403, `can only delete pods with spec.nodeName set to itself, not bound to node "`+nodeB+`"`)
	_, err = a.client.CoreV1().Pods(ns).Create(ctx, podOn("for-b", nodeB), metav1.CreateOptions{})
	expectStatus(t, "node A creates a pod for node B", err, 403, "can only create pods with spec.nodeName set to itself")
	got, err := in.Client.CoreV1().Pods(ns).Get(ctx, "on-b", metav1.GetOptions{})
	must(t, "reading pod on-b", err)
	if got.Status.Phase == corev1.PodFailed || len(got.Status.Conditions) != 0 || got.DeletionTimestamp != nil {
		t.Errorf("pod on-b changed under node A's refused writes: %+v, deleting at %v", got.Status, got.DeletionTimestamp)
	}
	zero := int64(0)
	must(t, "node A deletes its own pod", a.client.CoreV1().Pods(ns).Delete(ctx, "on-a", metav1.DeleteOptions{GracePeriodSeconds: &zero}))

	// Leases: its own in kube-node-lease only.
	lease := func(name string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: coordinationv1.LeaseSpec{HolderIdentity: &name}}
	}
	_, err = a.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, lease(nodeB), metav1.CreateOptions{})
	expectStatus(t, "node A creates node B's lease", err, 403, `node "`+nodeA+`" can only write its own lease`)
	_, err = a.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, lease(nodeA), metav1.CreateOptions{})
	must(t, "node A creates its lease", err)

	// Events stay open to nodes.
	_, err = a.client.CoreV1().Events(ns).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: "e2e-"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "on-b"},
		Reason:         "Checked", Message: "node A reports", Type: corev1.EventTypeNormal,
		Source: corev1.EventSource{Component: "kubelet", Host: nodeA},
	}, metav1.CreateOptions{})
	must(t, "node A records an event about node B's pod", err)
}

// TestRBACNodeAuthorizer checks that a node reads only the Secrets, ConfigMaps and ServiceAccounts of pods
// bound to it, one by name, and creates no pod but a mirror pod: holding a kubelet's certificate must not
// open every Secret, nor let it start a hostPath pod of its own choosing.
func TestRBACNodeAuthorizer(t *testing.T) {
	in, ctx, ns := setup(t)
	nodeA, nodeB := ns+"-a", ns+"-b"
	a := newIdentity(t, in, "system:node:"+nodeA, "system:nodes")
	for _, name := range []string{"used", "unused", "on-b"} {
		_, err := in.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, StringData: map[string]string{"k": name}}, metav1.CreateOptions{})
		must(t, "creating secret "+name, err)
		_, err = in.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": name}}, metav1.CreateOptions{})
		must(t, "creating config map "+name, err)
	}
	podUsing := func(name, node, ref string) *corev1.Pod {
		p := boundPod(name)
		p.Spec.NodeName = node
		p.Spec.Volumes = []corev1.Volume{
			{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: ref}}},
			{Name: "c", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: ref}}}},
		}
		return p
	}
	_, err := in.Client.CoreV1().Pods(ns).Create(ctx, podUsing("on-a", nodeA, "used"), metav1.CreateOptions{})
	must(t, "creating a pod on node A", err)
	_, err = in.Client.CoreV1().Pods(ns).Create(ctx, podUsing("on-b", nodeB, "on-b"), metav1.CreateOptions{})
	must(t, "creating a pod on node B", err)

	s, err := a.client.CoreV1().Secrets(ns).Get(ctx, "used", metav1.GetOptions{})
	must(t, "node A reads the secret its pod mounts", err)
	if string(s.Data["k"]) != "used" {
		t.Errorf("secret used holds %q", s.Data["k"])
	}
	_, err = a.client.CoreV1().ConfigMaps(ns).Get(ctx, "used", metav1.GetOptions{})
	must(t, "node A reads the config map its pod mounts", err)
	_, err = a.client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("node A reads its pod's service account: %v", err)
	}
	for _, name := range []string{"unused", "on-b"} {
		_, err = a.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		expectStatus(t, "node A reads secret "+name, err, 403, `no pod bound to node "`+nodeA+`" in namespace "`+ns+`" uses secret "`+name+`"`)
		_, err = a.client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		expectStatus(t, "node A reads config map "+name, err, 403, `uses configmap "`+name+`"`)
	}
	_, err = a.client.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
	expectStatus(t, "node A lists every secret", err, 403, "one by name, not list them all")
	_, err = a.client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	expectStatus(t, "node A lists the namespace's secrets", err, 403, "one by name")
	_, err = a.client.CoreV1().Secrets(ns).Watch(ctx, metav1.ListOptions{})
	expectStatus(t, "node A watches secrets", err, 403, "one by name")
	_, err = a.client.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{})
	expectStatus(t, "node A updates a secret its pod uses", err, 403, "may only read secrets")
	// Once the pod is gone, so is the access: as soon as the authorizer's pod cache hears of the deletion
	// (the cache answers first, as Kubernetes' node authorizer answers from its informer-fed graph, so a
	// read in the moment between the DELETE and its watch event may still be allowed).
	zero := int64(0)
	must(t, "deleting pod on-a", in.Client.CoreV1().Pods(ns).Delete(ctx, "on-a", metav1.DeleteOptions{GracePeriodSeconds: &zero}))
	eventually(t, ctx, 30*time.Second, "node A loses the secret of its deleted pod", func(ctx context.Context) (bool, error) {
		_, err := a.client.CoreV1().Secrets(ns).Get(ctx, "used", metav1.GetOptions{})
		return apierrors.IsForbidden(err), nil
	})
	_, err = a.client.CoreV1().Secrets(ns).Get(ctx, "used", metav1.GetOptions{})
	expectStatus(t, "node A reads the secret of a deleted pod", err, 403, "no pod bound to node")

	// A pod of its own: only a mirror pod, and one that mounts no secret.
	hostRoot := boundPod("host-root")
	hostRoot.Spec.NodeName = nodeA
	hostRoot.Spec.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
	_, err = a.client.CoreV1().Pods(ns).Create(ctx, hostRoot, metav1.CreateOptions{})
	expectStatus(t, "node A creates a hostPath pod", err, 403, `node "`+nodeA+`" can only create mirror pods`)
	sneaky := podUsing("mirror-with-secret", nodeA, "unused")
	sneaky.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
	_, err = a.client.CoreV1().Pods(ns).Create(ctx, sneaky, metav1.CreateOptions{})
	expectStatus(t, "node A creates a mirror pod that mounts a secret", err, 403, `cannot create a mirror pod that uses secret "unused"`)
	mirror := boundPod("mirror")
	mirror.Spec.NodeName = nodeA
	mirror.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
	_, err = a.client.CoreV1().Pods(ns).Create(ctx, mirror, metav1.CreateOptions{})
	must(t, "node A creates a mirror pod of its own", err)
}
