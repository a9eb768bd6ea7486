package tokenreview_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

// TestTokenReview runs a control plane (`rayctl up`, no kubelet) and reviews tokens it issued through
// its API server over HTTPS, as Ray's Kubernetes-delegated authentication does: a service account's
// token is authenticated as the account (with its groups and the audience asked about), one for
// another audience only when that audience is asked about, a token of a deleted account or garbage is
// not (with a reason), an empty one is refused with its field path. Reviewing needs a grant no one has
// by default (KubeRay's ray-authenticator ClusterRole gives it), and a SubjectAccessReview of Ray's
// custom verb ray:write on a RayCluster follows the RoleBindings as RBAC does for any verb.
func TestTokenReview(t *testing.T) {
	in := framework.StartTest(t, framework.ControlPlaneOnly()...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := kubernetes.NewForConfigOrDie(in.Config)
	const ns = "default"
	account := func(name string) {
		t.Helper()
		_, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	token := func(name string, audiences ...string) string {
		t.Helper()
		tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: audiences}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	review := func(c kubernetes.Interface, tok string, audiences ...string) (*authenticationv1.TokenReview, error) {
		return c.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
			Spec: authenticationv1.TokenReviewSpec{Token: tok, Audiences: audiences}}, metav1.CreateOptions{})
	}
	account("ray-head")
	account("alice")
	account("gone")

	t.Run("Authenticated", func(t *testing.T) {
		got, err := review(admin, token("alice"))
		if err != nil {
			t.Fatal(err)
		}
		u := got.Status.User
		if !got.Status.Authenticated || got.Status.Error != "" || u.Username != "system:serviceaccount:default:alice" || u.UID == "" ||
			!slices.Contains(u.Groups, "system:serviceaccounts") || !slices.Contains(u.Groups, "system:serviceaccounts:default") ||
			!slices.Contains(u.Groups, "system:authenticated") || len(got.Status.Audiences) != 1 {
			t.Errorf("review of alice's token: %+v", got.Status)
		}
	})
	t.Run("Audiences", func(t *testing.T) {
		tok := token("alice", "ray")
		if got, err := review(admin, tok); err != nil || got.Status.Authenticated || got.Status.Error == "" {
			t.Errorf("a token for audience ray, reviewed for the API server: %+v, %v; want not authenticated, with an error", got.Status, err)
		}
		got, err := review(admin, tok, "ray", "other")
		if err != nil || !got.Status.Authenticated || !slices.Equal(got.Status.Audiences, []string{"ray"}) {
			t.Errorf("a token for audience ray, reviewed for ray and other: %+v, %v; want authenticated for [ray]", got.Status, err)
		}
	})
	t.Run("NotAuthenticated", func(t *testing.T) {
		tok := token("gone")
		if err := admin.CoreV1().ServiceAccounts(ns).Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if got, err := review(admin, tok); err != nil || got.Status.Authenticated || !strings.Contains(got.Status.Error, "no longer exists") {
			t.Errorf("the token of a deleted account: %+v, %v; want not authenticated, the account gone", got.Status, err)
		}
		if got, err := review(admin, "not-a-token"); err != nil || got.Status.Authenticated || got.Status.User.Username != "" {
			t.Errorf("garbage: %+v, %v; want not authenticated", got.Status, err)
		}
		_, err := review(admin, "")
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.token") {
			t.Errorf("an empty token: %v; want 422 naming spec.token", err)
		}
	})
	// The head's own service account reviews callers once KubeRay's sample grants it (and nobody else).
	head := &rest.Config{Host: in.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAData: in.Config.CAData}, BearerToken: token("ray-head")}
	headClient := kubernetes.NewForConfigOrDie(head)
	sar := func(user string) (*authorizationv1.SubjectAccessReview, error) {
		return headClient.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   user,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Group: "ray.io", Resource: "rayclusters", Name: "ray-cluster-with-k8s-auth",
				Namespace: ns, Verb: "ray:write"}}}, metav1.CreateOptions{})
	}
	t.Run("NeedsAGrant", func(t *testing.T) {
		if _, err := review(headClient, token("alice")); !apierrors.IsForbidden(err) {
			t.Errorf("a service account without a grant reviews a token: %v; want 403", err)
		}
		if _, err := sar("system:serviceaccount:default:alice"); !apierrors.IsForbidden(err) {
			t.Errorf("a service account without a grant asks a SubjectAccessReview: %v; want 403", err)
		}
	})
	rbac := admin.RbacV1()
	if _, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "ray-authenticator"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "ray-writer"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"ray.io"}, Resources: []string{"rayclusters"}, Verbs: []string{"ray:write"}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sa := func(name string) []rbacv1.Subject {
		return []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}}
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ray-authenticator"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "ray-authenticator"}, Subjects: sa("ray-head")}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ray-writer"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "ray-writer"}, Subjects: sa("ray-head")}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Run("GrantedByTheSamplesRoles", func(t *testing.T) {
		// RBAC's informers see the new bindings shortly after they are written: wait on the answers, the
		// ClusterRoleBinding's (the head may review) and the RoleBinding's (the head may ray:write).
		alice := token("alice")
		framework.WaitFor(t, ctx, "the granted head reviews alice's token", func() (bool, error) {
			got, err := review(headClient, alice)
			return err == nil && got.Status.Authenticated, err
		})
		framework.WaitFor(t, ctx, "the RoleBinding lets the head ray:write the RayCluster", func() (bool, error) {
			got, err := sar("system:serviceaccount:default:ray-head")
			return err == nil && got.Status.Allowed, err
		})
		for _, tc := range []struct {
			user  string
			allow bool
		}{{"system:serviceaccount:default:ray-head", true}, {"system:serviceaccount:default:alice", false}} {
			got, err := sar(tc.user)
			if err != nil || got.Status.Allowed != tc.allow {
				t.Errorf("may %s ray:write the RayCluster? %v, %+v; want allowed=%v", tc.user, err, got, tc.allow)
			}
		}
	})
}
