package e2e

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

// k8sAuthSample is KubeRay's RayCluster with Kubernetes-delegated token authentication
// (authOptions.enableK8sTokenAuth), with its ServiceAccount and the roles Ray needs: ray-authenticator
// (TokenReviews and SubjectAccessReviews, bound cluster-wide to the account) and ray-writer (verb ray:write
// on rayclusters, bound in the namespace default). It names namespace default in its bindings, so it runs
// there.
const k8sAuthSample = "ray-cluster.kubernetes.auth.yaml"

// TestK8sTokenAuth runs KubeRay's ray-cluster.kubernetes.auth.yaml unchanged on real Ray and, with raysim's
// image and another name, on raysim, side by side in namespace default. Each cluster gets ready with no
// token Secret, its Ray containers set up as KubeRay v1.7 sets them (RAY_ENABLE_K8S_TOKEN_AUTH, the ray-token
// projection); its dashboard answers a job submission without a token 401, with a service account token
// whose account lacks ray:write or with garbage 403, and takes the token of the sample's account (bound to
// ray-writer), raysim as Ray (compared case by case); `rayctl get token` prints such a token (its
// --service-account another account's); and Ray's own `ray job submit` from the host through `rayctl
// kubectl port-forward` is refused without RAY_AUTH_TOKEN and with the other account's, and runs with it.
// The pods run in the process runtime as root, each in a mount namespace of its own where the kubelet
// mounts the service account token and CA at the paths Ray reads.
func TestK8sTokenAuth(t *testing.T) {
	in, e := startAuthTest(t)
	e.ns = "default"
	e.applySample(t, k8sAuthSample)
	b, err := os.ReadFile(kubeRaySample(t, k8sAuthSample))
	must(t, "reading "+k8sAuthSample, err)
	sim := strings.ReplaceAll(strings.Replace(string(b), "name: ray-cluster-with-k8s-auth", "name: raysim-cluster-with-k8s-auth", 1), "rayproject/ray:nightly", simImage)
	kubectl(t, e.ctx, in, e.ns, sim, "apply", "-f", "-")

	targets := e.readyHeads(t, "ray-cluster-with-k8s-auth", "raysim-cluster-with-k8s-auth")
	writer, reader := k8sAuthTokens(t, e, targets[0].name)
	t.Run("Conformance", func(t *testing.T) {
		compareSides(t, targets[0], targets[1], k8sAuthConformanceCases(writer, reader))
	})
	for _, r := range targets {
		t.Run(r.name, func(t *testing.T) { k8sAuthCluster(t, e, r.name, reader) })
	}
}

// TestK8sTokenAuthRootless runs KubeRay's ray-cluster.kubernetes.auth.yaml unchanged on real Ray under a
// rootless `rayctl up` (an ordinary user's, in rayctl's user namespace): there too each pod's mount
// namespace has the service account token and CA at the paths Ray reads, so the cluster gets ready and Ray
// answers as in TestK8sTokenAuth.
func TestK8sTokenAuthRootless(t *testing.T) {
	ctx := framework.TestContext(t, 15*time.Minute)
	in := startLaptop(t, ctx, "--node-capacity", "cpu=48,memory=96Gi")
	if !strings.Contains(in.Output.String(), "(rootless)") {
		t.Fatalf("rayctl up as uid %d does not run rootless:\n%s", laptopUID, in.Output.String())
	}
	realRaySlots <- struct{}{}
	t.Cleanup(func() { <-realRaySlots })
	e := newRayEnv(t, in)
	e.ctx, e.ns = ctx, "default"
	e.applySample(t, k8sAuthSample)
	const name = "ray-cluster-with-k8s-auth"
	e.waitClusterReady(t, name, 1)
	_, reader := k8sAuthTokens(t, e, name)
	k8sAuthCluster(t, e, name, reader)
}

// k8sAuthTokens returns, as `rayctl get token` issues them for cluster, a token of the sample's service
// account (writer, with ray:write) and of a new account ray-reader (without).
func k8sAuthTokens(t *testing.T, e *rayEnv, cluster string) (writer, reader string) {
	_, err := e.in.Client.CoreV1().ServiceAccounts(e.ns).Create(e.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "ray-reader"}}, metav1.CreateOptions{})
	must(t, "creating service account ray-reader", err)
	return k8sAuthToken(t, e, cluster), k8sAuthToken(t, e, cluster, "--service-account", "ray-reader")
}

// k8sAuthToken runs `rayctl get token cluster args...` and checks it printed a service account token.
func k8sAuthToken(t *testing.T, e *rayEnv, cluster string, args ...string) string {
	t.Helper()
	out, err := e.in.Rayctl(e.ctx, append([]string{"get", "token", cluster, "-n", e.ns}, args...)...)
	if err != nil || strings.Count(out, ".") != 2 || strings.ContainsAny(out, " \n") {
		t.Fatalf("rayctl get token %s %v: %v %q; want a service account token (a JWT) and nothing else", cluster, args, err, out)
	}
	return out
}

// k8sAuthCluster checks a ready cluster of KubeRay's ray-cluster.kubernetes.auth.yaml: no token Secret,
// its pods set up as KubeRay v1.7 sets them, and Ray's `ray job submit` from the host through `rayctl
// kubectl port-forward` refused without a token (401) and with reader's (403), and run with a token
// `rayctl get token` issues.
func k8sAuthCluster(t *testing.T, e *rayEnv, cluster, reader string) {
	t.Run("NoSecret", func(t *testing.T) {
		if _, err := e.in.Client.CoreV1().Secrets(e.ns).Get(e.ctx, cluster, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("Secret %s: %v; want none (Kubernetes checks the tokens)", cluster, err)
		}
	})
	t.Run("PodsSetUp", func(t *testing.T) { checkK8sAuthPods(t, e, cluster) })
	t.Run("RayJobSubmitThroughPortForward", func(t *testing.T) {
		port, pfOut := portForwardDashboard(t, e.ctx, e.in, e.ns, cluster)
		submit := func(env ...string) (string, error) {
			return asUser(e.ctx, e.in.Credential, append(userEnv(e.in), env...), hostRay(t), "job", "submit",
				"--address", fmt.Sprintf("http://127.0.0.1:%d", port), "--", "echo", "k8s-token-accepted")
		}
		if out, err := submit("RAY_AUTH_MODE=disabled"); err == nil || !strings.Contains(out, "Unauthorized: Missing authentication token") {
			t.Errorf("ray job submit without a token: %v\n%s\nwant a refusal (401)", err, out)
		}
		if out, err := submit("RAY_AUTH_MODE=token", "RAY_AUTH_TOKEN="+reader); err == nil || !strings.Contains(out, "Forbidden: Invalid authentication token") {
			t.Errorf("ray job submit with the token of an account without ray:write: %v\n%s\nwant a refusal (403)", err, out)
		}
		out, err := submit("RAY_AUTH_MODE=token", "RAY_AUTH_TOKEN="+k8sAuthToken(t, e, cluster))
		if err != nil || !strings.Contains(out, "k8s-token-accepted") || !strings.Contains(out, "succeeded") {
			t.Errorf("ray job submit with the token of the sample's account: %v\n%s\nport-forward said:\n%s", err, out, pfOut.String())
		}
	})
}

// k8sAuthConformanceCases are the dashboard's answers to callers of a cluster with Kubernetes-delegated
// token authentication: writer is the token of an account with ray:write on every RayCluster of the
// namespace, reader of one without.
func k8sAuthConformanceCases(writer, reader string) []conformanceCase {
	answer := func(t *testing.T, r *rayTarget, method, path, body string, header http.Header) string {
		code, out := r.httpWith(t, method, path, body, header)
		return fmt.Sprintf("HTTP %d\n%s", code, out)
	}
	bearer := func(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }
	const job = `{"entrypoint": "echo never"}`
	return []conformanceCase{
		{name: "a submission without a token", run: func(t *testing.T, r *rayTarget) string {
			return answer(t, r, http.MethodPost, "/api/jobs/", job, nil)
		}},
		{name: "a submission with a token Kubernetes does not know", run: func(t *testing.T, r *rayTarget) string {
			return answer(t, r, http.MethodPost, "/api/jobs/", job, bearer("not-a-token"))
		}},
		{name: "a submission by an account without ray:write", run: func(t *testing.T, r *rayTarget) string {
			return answer(t, r, http.MethodPost, "/api/jobs/", job, bearer(reader))
		}},
		{name: "the job list by an account without ray:write", run: func(t *testing.T, r *rayTarget) string {
			return answer(t, r, http.MethodGet, "/api/jobs/", "", bearer(reader))
		}},
		{name: "the job list by the sample's account", run: func(t *testing.T, r *rayTarget) string {
			code, _ := r.httpWith(t, http.MethodGet, "/api/jobs/", "", bearer(writer))
			return fmt.Sprintf("HTTP %d", code)
		}},
		{name: "X-Ray-Authorization by the sample's account", run: func(t *testing.T, r *rayTarget) string {
			code, _ := r.httpWith(t, http.MethodGet, "/api/jobs/", "", http.Header{"X-Ray-Authorization": {"Bearer " + writer}})
			return fmt.Sprintf("HTTP %d", code)
		}},
		{name: "gcs_healthz without a token", run: func(t *testing.T, r *rayTarget) string {
			return answer(t, r, http.MethodGet, "/api/gcs_healthz", "", nil)
		}},
	}
}

// checkK8sAuthPods checks that every Ray container of cluster's pods (and the worker's GCS wait) has
// RAY_AUTH_MODE=token, RAY_ENABLE_K8S_TOKEN_AUTH=true and the ray-token volume at Ray's path, no
// RAY_AUTH_TOKEN, and runs as the sample's service account.
func checkK8sAuthPods(t *testing.T, e *rayEnv, cluster string) {
	pods, err := e.clusterPods(e.ctx, cluster, "")
	must(t, "listing "+cluster+"'s pods", err)
	want := map[string][]string{"head": {"ray-head"}, "worker": {"wait-gcs-ready", "ray-worker"}}
	for _, p := range pods {
		if p.Spec.ServiceAccountName != "ray-cluster-with-k8s-auth" {
			t.Errorf("pod %s runs as service account %q", p.Name, p.Spec.ServiceAccountName)
		}
		byName := map[string]corev1.Container{}
		for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
			byName[c.Name] = c
		}
		for _, name := range want[p.Labels["ray.io/node-type"]] {
			c := byName[name]
			env := map[string]string{}
			for _, v := range c.Env {
				env[v.Name] = v.Value
			}
			_, token := env["RAY_AUTH_TOKEN"]
			var mounted bool
			for _, m := range c.VolumeMounts {
				mounted = mounted || (m.Name == "ray-token" && m.MountPath == "/var/run/secrets/ray.io/serviceaccount")
			}
			if env["RAY_AUTH_MODE"] != "token" || env["RAY_ENABLE_K8S_TOKEN_AUTH"] != "true" || token || !mounted {
				t.Errorf("pod %s, container %s: env %v, ray-token mounted %v", p.Name, name, env, mounted)
			}
		}
	}
}
