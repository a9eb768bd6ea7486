package auth

import (
	"context"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

// k8sRoles is what KubeRay's ray-cluster.kubernetes.auth.yaml grants, for accounts head (reviews tokens)
// and writer (ray:write on the namespace's RayClusters).
const k8sRoles = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: ray-authenticator}
rules:
- {apiGroups: [authentication.k8s.io], resources: [tokenreviews], verbs: [create]}
- {apiGroups: [authorization.k8s.io], resources: [subjectaccessreviews], verbs: [create]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: ray-writer}
rules:
- {apiGroups: [ray.io], resources: [rayclusters], verbs: ["ray:write"]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: ray-authenticator}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ray-authenticator}
subjects: [{kind: ServiceAccount, name: head, namespace: default}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: ray-writer, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ray-writer}
subjects: [{kind: ServiceAccount, name: writer, namespace: default}]
`

// TestK8sReviewer reviews tokens as a raysim node with RAY_ENABLE_K8S_TOKEN_AUTH does, through a real API
// server (`rayctl up`, no kubelet) with the head's service account token: the token of an account with
// ray:write on the RayCluster is taken, and remembered for K8sCacheTTL (taken after its binding is gone,
// refused once the time has passed); one without ray:write, garbage, and any token when the node does not
// know its cluster are refused.
func TestK8sReviewer(t *testing.T) {
	in := framework.StartTest(t, framework.ControlPlaneOnly()...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := kubernetes.NewForConfigOrDie(in.Config)
	token := func(name string) string {
		t.Helper()
		if _, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := admin.CoreV1().ServiceAccounts("default").CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	if out, stderr, err := in.Kubectl(ctx, k8sRoles, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s%s", err, out, stderr)
	}
	head, writer, reader := token("head"), token("writer"), token("reader")
	// RBAC's informers see the new bindings shortly after they are written: wait until the API server
	// answers with them before asserting on the reviewer.
	allowed := func(user string, attrs *authorizationv1.ResourceAttributes) func() (bool, error) {
		return func() (bool, error) {
			sar, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: user, ResourceAttributes: attrs}}, metav1.CreateOptions{})
			return err == nil && sar.Status.Allowed, err
		}
	}
	framework.WaitFor(t, ctx, "the head may review tokens", allowed("system:serviceaccount:default:head",
		&authorizationv1.ResourceAttributes{Group: "authentication.k8s.io", Resource: "tokenreviews", Verb: "create"}))
	framework.WaitFor(t, ctx, "the writer may ray:write the RayCluster", allowed("system:serviceaccount:default:writer",
		&authorizationv1.ResourceAttributes{Group: "ray.io", Resource: "rayclusters", Namespace: "default", Name: "ray-cluster-with-k8s-auth", Verb: K8sVerb}))
	cfg := &rest.Config{Host: in.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAData: in.Config.CAData}, BearerToken: head}
	env := map[string]string{"RAY_CLUSTER_NAME": "ray-cluster-with-k8s-auth", "RAY_CLUSTER_NAMESPACE": "default"}
	r := NewK8sReviewer(func(k string) string { return env[k] }, cfg, t.Logf)
	now := time.Now()
	r.now = func() time.Time { return now }
	for _, tc := range []struct {
		name, token string
		want        bool
	}{{"writer", writer, true}, {"reader", reader, false}, {"garbage", "not-a-token", false}} {
		if got := r.Allowed(ctx, tc.token); got != tc.want {
			t.Errorf("%s's token: allowed %v, want %v", tc.name, got, tc.want)
		}
	}
	blind := NewK8sReviewer(func(string) string { return "" }, cfg, t.Logf)
	if blind.Allowed(ctx, writer) {
		t.Error("a node without RAY_CLUSTER_NAME and RAY_CLUSTER_NAMESPACE took a token")
	}
	if err := admin.RbacV1().RoleBindings("default").Delete(ctx, "ray-writer", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if !r.Allowed(ctx, writer) {
		t.Error("the writer's token, within K8sCacheTTL of its review: refused, want taken (remembered)")
	}
	// RBAC's informers see the deleted binding shortly after it is written: wait on the answer, moving
	// past K8sCacheTTL before each look.
	framework.WaitFor(t, ctx, "the writer's token, its binding gone and K8sCacheTTL passed: refused", func() (bool, error) {
		now = now.Add(K8sCacheTTL + time.Second)
		return !r.Allowed(ctx, writer), nil
	})
}

// TestK8sReviewerHungAPIServer: an API server that takes connections and never answers refuses the token
// once K8sReviewTimeout (here shortened) has passed, rather than holding the caller's request for ever.
func TestK8sReviewerHungAPIServer(t *testing.T) {
	env := map[string]string{"RAY_CLUSTER_NAME": "c", "RAY_CLUSTER_NAMESPACE": "default"}
	r := NewK8sReviewer(func(k string) string { return env[k] }, &rest.Config{Host: "http://" + framework.SilentServer(t)}, t.Logf)
	r.timeout = 100 * time.Millisecond
	done := make(chan bool, 1)
	go func() { done <- r.Allowed(context.Background(), "a-token") }()
	select {
	case ok := <-done:
		if ok {
			t.Error("a token the API server never answered about: taken")
		}
	case <-time.After(time.Minute):
		t.Fatal("the review of a hung API server did not end")
	}
}

// TestK8sReviewerForgets: remembering a token forgets the tokens remembered more than K8sCacheTTL ago.
func TestK8sReviewerForgets(t *testing.T) {
	now := time.Now()
	r := &K8sReviewer{now: func() time.Time { return now }, allowed: map[string]time.Time{}}
	r.remember("old")
	now = now.Add(K8sCacheTTL / 2)
	r.remember("recent")
	now = now.Add(K8sCacheTTL/2 + time.Second)
	r.remember("new")
	if _, ok := r.allowed["old"]; ok || len(r.allowed) != 2 {
		t.Errorf("remembered %v; want recent and new", r.allowed)
	}
}
