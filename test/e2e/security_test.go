package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAnonymous checks that a client without a certificate is refused everywhere but the health and
// version endpoints.
func TestAnonymous(t *testing.T) {
	t.Parallel()
	in := shared(t)
	ctx := testContext(t)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(in.Config.CAData) {
		t.Fatal("the kubeconfig carries no CA certificate")
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	get := func(path string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, in.Config.Host+path, nil)
		must(t, "request", err)
		resp, err := client.Do(req)
		must(t, "GET "+path, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	for _, p := range []string{"/api", "/api/v1/namespaces", "/apis", "/apis/ray.io/v1/rayclusters", "/api/v1/namespaces/default/secrets", "/openapi/v2", "/metrics",
		"/debug/chain/events", "/debug/chain/controllers"} {
		if code, body := get(p); code != http.StatusUnauthorized {
			t.Errorf("anonymous GET %s = %d, want 401 (%.200s)", p, code, body)
		}
	}
	for _, p := range []string{"/healthz", "/livez", "/readyz", "/version"} {
		if code, body := get(p); code != http.StatusOK {
			t.Errorf("anonymous GET %s = %d, want 200 (%.200s)", p, code, body)
		}
	}
	_, body := get("/version")
	var v struct {
		GitVersion string `json:"gitVersion"`
		Major      string `json:"major"`
		Minor      string `json:"minor"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("/version: %v (%s)", err, body)
	}
	if v.GitVersion != "v1.37.2" || v.Major != "1" || v.Minor != "37" {
		t.Errorf("/version = %+v, want gitVersion v1.37.2, major 1, minor 37", v)
	}
	// client-go reads the same.
	sv, err := in.Client.Discovery().ServerVersion()
	must(t, "discovery ServerVersion", err)
	if sv.GitVersion != "v1.37.2" {
		t.Errorf("ServerVersion().GitVersion = %q", sv.GitVersion)
	}
	// A certificate from another CA is no better than none.
	other := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := other.Get(in.Config.Host + "/api")
	must(t, "GET /api without verifying the server", err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("anonymous GET /api (no server verification) = %d, want 401", resp.StatusCode)
	}
}

// TestWhoAmIAndCanI checks the admin identity through kubectl and access reviews.
func TestWhoAmIAndCanI(t *testing.T) {
	t.Parallel()
	in := shared(t)
	ctx := testContext(t)
	out, errOut, err := in.Kubectl(ctx, "", "auth", "whoami")
	if err != nil {
		t.Fatalf("kubectl auth whoami: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, "rayctl-admin") || !strings.Contains(out, "system:masters") {
		t.Errorf("kubectl auth whoami:\n%s\nwant the admin user and system:masters", out)
	}
	for _, args := range [][]string{{"create", "pods"}, {"delete", "rayclusters.ray.io", "-A"}, {"*", "*"}} {
		out, errOut, err := in.Kubectl(ctx, "", append([]string{"auth", "can-i"}, args...)...)
		if err != nil || strings.TrimSpace(out) != "yes" {
			t.Errorf("kubectl auth can-i %v = %q (%v %s), want yes", args, out, err, errOut)
		}
	}
	// Someone with no bindings may not.
	sar, err := in.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "e2e-nobody",
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "default", Verb: "create", Resource: "pods"},
		},
	}, metav1.CreateOptions{})
	must(t, "SubjectAccessReview", err)
	if sar.Status.Allowed {
		t.Errorf("an unbound user may create pods: %+v", sar.Status)
	}
	sar, err = in.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "someone", Groups: []string{"system:masters"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "default", Verb: "create", Resource: "pods"},
		},
	}, metav1.CreateOptions{})
	must(t, "SubjectAccessReview", err)
	if !sar.Status.Allowed {
		t.Errorf("system:masters may not create pods: %+v", sar.Status)
	}
}

// TestFileModes checks that secrets on disk are readable by their owner only.
func TestFileModes(t *testing.T) {
	t.Parallel()
	in := shared(t)
	check := func(path string, want fs.FileMode) {
		t.Helper()
		st, err := os.Stat(path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			return
		}
		if got := st.Mode().Perm(); got != want {
			t.Errorf("%s mode %#o, want %#o", path, got, want)
		}
	}
	check(in.DataDir, 0o700)
	check(in.Kubeconfig, 0o600)
	keys := 0
	err := filepath.WalkDir(filepath.Join(in.DataDir, "pki"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasSuffix(path, ".key") {
			keys++
			check(path, 0o600)
		}
		return nil
	})
	must(t, "walking pki", err)
	if keys == 0 {
		t.Error("no *.key files under pki/")
	}
}

// TestLoopbackOnly checks that the API server listens on 127.0.0.1 and on no other address.
func TestLoopbackOnly(t *testing.T) {
	t.Parallel()
	in := shared(t)
	u, err := url.Parse(in.Config.Host)
	must(t, "parsing the kubeconfig server", err)
	host, port, err := net.SplitHostPort(u.Host)
	must(t, "server host:port", err)
	if u.Scheme != "https" || host != "127.0.0.1" {
		t.Errorf("kubeconfig server %s, want https://127.0.0.1:<port>", in.Config.Host)
	}
	addrs, err := net.InterfaceAddrs()
	must(t, "interface addresses", err)
	tried := 0
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLoopback() || ipn.IP.IsLinkLocalUnicast() {
			continue
		}
		tried++
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(ipn.IP.String(), port), 3*time.Second)
		if err == nil {
			conn.Close()
			t.Errorf("the API server port %s answers on %s, want loopback only", port, ipn.IP)
		}
	}
	t.Logf("checked %d non-loopback addresses", tried)
}
