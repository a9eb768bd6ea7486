package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	satoken "github.com/rayctl/rayctl/pkg/apiserver/auth/serviceaccount"
	"github.com/rayctl/rayctl/test/e2e/framework"
)

// saDir is where every container finds its service account's token, the cluster CA and its namespace.
const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// TestInClusterClients runs kubectl inside a pod (the rayctl binary of the raysim image, /usr/bin/rayctl, called as kubectl,
// which falls back to in-cluster configuration) on its own network namespace on the pod bridge: it reaches
// the API server through KUBERNETES_SERVICE_HOST/PORT and through kubernetes.default, with the projected
// token and CA, and is held to its ServiceAccount's Role. Then the token API and the authenticator's
// refusals, from outside: TokenRequest through client-go, garbage and expired tokens, a deleted
// ServiceAccount's tokens.
func TestInClusterClients(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("pods get a network of their own only as root; elsewhere they share the host's and use the loopback listener")
	}
	in, ctx, ns := nodeSetup(t)
	c := in.Client
	_, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader"}}, metav1.CreateOptions{})
	must(t, "creating the ServiceAccount", err)
	_, err = c.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}}}, metav1.CreateOptions{})
	must(t, "creating the Role", err)
	_, err = c.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "reader", Namespace: ns}}}, metav1.CreateOptions{})
	must(t, "creating the RoleBinding", err)

	pod := nodePod("client", corev1.RestartPolicyAlways, 0, nodeSh("c", "ln -s /usr/bin/rayctl /tmp/kubectl && exec sleep 3600"))
	pod.Spec.ServiceAccountName = "reader"
	running, _ := nodeStartPod(t, ctx, in, ns, pod)
	// inPod runs script in the pod's container; it returns stdout, and stderr with the error.
	inPod := func(script string) (string, string, error) {
		return in.Kubectl(ctx, "", "exec", "-n", ns, "client", "--", "sh", "-c", script)
	}
	mustInPod := func(what, script string) string {
		t.Helper()
		out, errOut, err := inPod(script)
		if err != nil {
			t.Fatalf("%s: %v\n%s%s", what, err, out, errOut)
		}
		return strings.TrimSpace(out)
	}

	t.Run("the pod's service-account volume and environment", func(t *testing.T) {
		if got := mustInPod("reading the namespace file", "cat "+saDir+"/namespace"); got != ns {
			t.Errorf("namespace file %q, want %q", got, ns)
		}
		if got := mustInPod("reading ca.crt", "cat "+saDir+"/ca.crt"); got != strings.TrimSpace(string(in.Config.CAData)) {
			t.Errorf("ca.crt is not the cluster CA:\n%s", got)
		}
		if got := mustInPod("reading the token", "cat "+saDir+"/token"); strings.Count(got, ".") != 2 {
			t.Errorf("the token file holds no JWT: %q", got)
		}
		env := mustInPod("reading the environment", "echo $KUBERNETES_SERVICE_HOST $KUBERNETES_SERVICE_PORT $KUBERNETES_PORT")
		f := strings.Fields(env)
		if len(f) != 3 || f[1] != "443" || f[2] != "tcp://"+f[0]+":443" {
			t.Fatalf("KUBERNETES_SERVICE_HOST, _PORT, KUBERNETES_PORT = %q", env)
		}
		var mounted bool
		for _, v := range running.Spec.Volumes {
			mounted = mounted || (strings.HasPrefix(v.Name, "kube-api-access-") && v.Projected != nil)
		}
		if !mounted {
			t.Errorf("the pod has no kube-api-access volume: %+v", running.Spec.Volumes)
		}
	})

	t.Run("in-cluster kubectl is held to its Role", func(t *testing.T) {
		if got := mustInPod("kubectl auth whoami", "/tmp/kubectl auth whoami -o jsonpath='{.status.userInfo.username}'"); got != "system:serviceaccount:"+ns+":reader" {
			t.Errorf("whoami: %q", got)
		}
		if got := mustInPod("kubectl get pods", "/tmp/kubectl get pods -o name"); got != "pod/client" {
			t.Errorf("get pods: %q", got)
		}
		for _, args := range []string{"get secrets", "get pods -n default"} {
			out, errOut, err := inPod("/tmp/kubectl " + args)
			if err == nil || !strings.Contains(errOut, "Forbidden") || !strings.Contains(errOut, "system:serviceaccount:"+ns+":reader") {
				t.Errorf("kubectl %s: want Forbidden for the ServiceAccount, got %v\n%s%s", args, err, out, errOut)
			}
		}
	})

	t.Run("kubernetes.default resolves and answers with a certificate that names it", func(t *testing.T) {
		for _, server := range []string{"https://kubernetes.default:443", "https://kubernetes.default.svc", "https://kubernetes.default.svc.cluster.local"} {
			got := mustInPod("kubectl --server "+server, "/tmp/kubectl --server "+server+" --token \"$(cat "+saDir+"/token)\" --certificate-authority "+saDir+"/ca.crt get pods -o name")
			if got != "pod/client" {
				t.Errorf("through %s: %q", server, got)
			}
		}
	})

	// asToken is a client of the API server (from the host) with a bearer token and no certificate.
	asToken := func(token string) kubernetes.Interface {
		cfg := &rest.Config{Host: in.Config.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: in.Config.CAData}}
		cs, err := kubernetes.NewForConfig(cfg)
		must(t, "a token client", err)
		return cs
	}
	wantUnauthorized := func(t *testing.T, what string, client kubernetes.Interface) {
		t.Helper()
		_, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if !apierrors.IsUnauthorized(err) {
			t.Errorf("%s: want 401, got %v", what, err)
		}
	}

	seconds := int64(600)
	tr, err := c.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "reader", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
	must(t, "TokenRequest", err)

	t.Run("TokenRequest", func(t *testing.T) {
		if left := time.Until(tr.Status.ExpirationTimestamp.Time); left < 9*time.Minute || left > 11*time.Minute {
			t.Errorf("the token expires in %s, want 10m", left)
		}
		review, err := asToken(tr.Status.Token).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		must(t, "SelfSubjectReview with the token", err)
		if u := review.Status.UserInfo; u.Username != "system:serviceaccount:"+ns+":reader" || !strings.Contains(strings.Join(u.Groups, ","), "system:serviceaccounts:"+ns) {
			t.Errorf("SelfSubjectReview: %+v", u)
		}
		short := int64(60)
		_, err = c.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "reader", &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &short}}, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.expirationSeconds") {
			t.Errorf("a 60 s token: want 422 naming spec.expirationSeconds, got %v", err)
		}
		_, err = c.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "nobody", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("a token of a missing ServiceAccount: want 404, got %v", err)
		}
	})

	t.Run("garbage and expired tokens get 401", func(t *testing.T) {
		wantUnauthorized(t, "a garbage token", asToken("garbage"))
		wantUnauthorized(t, "a JWT-shaped garbage token", asToken("eyJhbGciOiJFUzI1NiJ9.e30.c2lnbmF0dXJl"))
		sa, err := c.CoreV1().ServiceAccounts(ns).Get(ctx, "reader", metav1.GetOptions{})
		must(t, "reading the ServiceAccount", err)
		expired, _, err := (&satoken.Issuer{Key: signingKey(t, in), Now: func() time.Time { return time.Now().Add(-2 * time.Hour) }}).
			Issue(satoken.Request{ServiceAccount: sa, Lifetime: time.Hour})
		must(t, "signing an expired token", err)
		wantUnauthorized(t, "an expired token", asToken(expired))
		// The same, raw: a 401 Status, never a 500.
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, in.Config.Host+"/api/v1/namespaces/"+ns+"/pods", nil)
		req.Header.Set("Authorization", "Bearer "+expired)
		hc, err := rest.HTTPClientFor(&rest.Config{Host: in.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAData: in.Config.CAData}})
		must(t, "an HTTP client", err)
		res, err := hc.Do(req)
		must(t, "GET with an expired token", err)
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Errorf("expired token: HTTP %d, want 401", res.StatusCode)
		}
	})

	t.Run("a deleted ServiceAccount's tokens stop working", func(t *testing.T) {
		must(t, "deleting the ServiceAccount", c.CoreV1().ServiceAccounts(ns).Delete(ctx, "reader", metav1.DeleteOptions{}))
		wantUnauthorized(t, "the TokenRequest token", asToken(tr.Status.Token))
		out, errOut, err := inPod("/tmp/kubectl get pods -o name")
		if err == nil || !strings.Contains(errOut, "Unauthorized") {
			t.Errorf("in-cluster kubectl after the ServiceAccount's deletion: want Unauthorized, got %v\n%s%s", err, out, errOut)
		}
	})
}

// signingKey reads the instance's service-account signing key (the test runs as the data dir's owner).
func signingKey(t *testing.T, in *framework.Instance) *ecdsa.PrivateKey {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(in.DataDir, "pki", "sa.key"))
	must(t, "reading pki/sa.key", err)
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatal("pki/sa.key is not PEM")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	must(t, "parsing pki/sa.key", err)
	return k.(*ecdsa.PrivateKey)
}

// TestKubernetesEndpointsNoWarningsInLog: the API server keeps default/kubernetes's Endpoints (re-checked
// every 10 s) and rayctl's controllers and caches read Endpoints, all on purpose; the API server's
// deprecation warning for v1 Endpoints is for the API's users, and rayctl.log (a line every 10 s before)
// carries none of it. A user's own client still gets the warning.
func TestKubernetesEndpointsNoWarningsInLog(t *testing.T) {
	in, ctx, _ := setup(t)
	framework.WaitFor(t, ctx, "default/kubernetes's Endpoints", func() (bool, error) {
		_, err := in.Client.CoreV1().Endpoints(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	// One more pass of the API server's check of the kubernetes Service, Endpoints and EndpointSlice.
	time.Sleep(11 * time.Second)
	b, err := os.ReadFile(filepath.Join(in.DataDir, "rayctl.log"))
	framework.Must(t, "reading rayctl.log", err)
	for line := range strings.Lines(string(b)) {
		if strings.Contains(line, "Endpoints is deprecated") {
			t.Fatalf("rayctl.log has the API server's deprecation warning to one of rayctl's own clients: %s", line)
		}
	}

	// A user's client is warned.
	warned := &warningTexts{}
	cfg := rest.CopyConfig(in.Config)
	cfg.WarningHandlerWithContext = warned
	user, err := kubernetes.NewForConfig(cfg)
	framework.Must(t, "a client", err)
	_, err = user.CoreV1().Endpoints(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	framework.Must(t, "getting default/kubernetes's Endpoints", err)
	if len(warned.texts) != 1 || !strings.HasPrefix(warned.texts[0], "v1 Endpoints is deprecated") {
		t.Errorf("a user's GET of v1 Endpoints was warned %q, want the deprecation", warned.texts)
	}
}

// warningTexts is a warning handler that keeps each warning's text.
type warningTexts struct{ texts []string }

func (w *warningTexts) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.texts = append(w.texts, text)
}
