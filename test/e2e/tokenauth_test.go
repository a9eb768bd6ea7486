package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

// authSample is KubeRay's RayCluster with Ray's token authentication (spec.authOptions.mode token): a
// head with the autoscaler and a worker, 4 CPUs and 8 GiB each.
const authSample = "ray-cluster.auth.yaml"

// TestTokenAuth runs KubeRay's ray-cluster.auth.yaml unchanged on real Ray and, with raysim's image and
// another name, on raysim, side by side on one rayctl (whose node advertises room for the sample's
// requests). On each side the cluster gets its token Secret, owned by it, and every container of Ray's
// (head, autoscaler, worker, the worker's GCS wait) reads the token from it; `rayctl get token` prints it;
// the dashboard refuses a job submission without the token (401) or with another (403) as Ray 2.60 does
// (compared case by case, raysim against Ray); Ray's own `ray job submit` from the host through `rayctl
// kubectl port-forward` is refused without RAY_AUTH_TOKEN and runs with it; and a RayJob run on the
// cluster completes, its controller and its submitter sending the token. Then, on raysim: KubeRay's
// ray-cluster.auth.secret-ref.yaml uses the user's Secret; a RayService's cluster with a token gets Ready,
// its controller sending the token too; `rayctl demo` of an HTTPMode RayJob on such a cluster shows the
// job's log, read from the dashboard with the token; and `rayctl get token` refuses a cluster without
// token authentication. (enableK8sTokenAuth: TestK8sTokenAuth.)
func TestTokenAuth(t *testing.T) {
	in, e := startAuthTest(t)

	e.applySample(t, authSample)
	kubectl(t, e.ctx, in, e.ns, authSampleOnRaysim(t, authSample, "raysim-cluster-with-auth"), "apply", "-f", "-")

	targets := e.readyHeads(t, "ray-cluster-with-auth", "raysim-cluster-with-auth")
	tokens := map[string]string{}
	for _, r := range targets {
		tokens[r.name] = authSecretToken(t, e, r.name)
	}
	t.Run("Conformance", func(t *testing.T) {
		compareSides(t, targets[0], targets[1], authConformanceCases(tokens))
	})
	for _, r := range targets {
		t.Run(r.name, func(t *testing.T) {
			token := tokens[r.name]
			t.Run("ContainersReadTheSecret", func(t *testing.T) { checkAuthEnv(t, e, r.name) })
			t.Run("RayctlGetToken", func(t *testing.T) {
				out, err := in.Rayctl(e.ctx, "get", "token", r.name, "-n", e.ns)
				if err != nil || out != token {
					t.Errorf("rayctl get token %s: %v %q, want the Secret's token %q and nothing else", r.name, err, out, token)
				}
			})
			t.Run("RayJobSubmitThroughPortForward", func(t *testing.T) { submitWithToken(t, e, r.name, token) })
			t.Run("RayJob", func(t *testing.T) { rayJobOnAuthCluster(t, e, r.name) })
		})
	}
	// KubeRay's ray-cluster.auth.secret-ref.yaml on raysim: the user's Secret holds the token; none is made.
	t.Run("SecretName", func(t *testing.T) {
		kubectl(t, e.ctx, in, e.ns, authSampleOnRaysim(t, "ray-cluster.auth.secret-ref.yaml", "secret-ref"), "apply", "-f", "-")
		_, head, _ := e.waitClusterReady(t, "secret-ref", 1)
		if _, err := in.Client.CoreV1().Secrets(e.ns).Get(e.ctx, "secret-ref", metav1.GetOptions{}); err == nil {
			t.Error("a Secret of the cluster's name was made beside the one secretName names")
		}
		const token = "super-secret-example-token"
		if out, err := in.Rayctl(e.ctx, "get", "token", "secret-ref", "-n", e.ns); err != nil || out != token {
			t.Errorf("rayctl get token secret-ref: %v %q, want the token of Secret ray-cluster-token", err, out)
		}
		wantTokenRequired(t, e, head, token)
	})
	// A RayService whose cluster requires a token: the controller deploys the Serve config and reads the
	// applications' status with it.
	t.Run("RayService", func(t *testing.T) {
		rs := &rayv1.RayService{}
		loadSample(t, "rayservice.yaml", rs)
		rs.Spec.RayClusterSpec.RayVersion = "2.60.0"
		rs.Spec.RayClusterSpec.AuthOptions = &rayv1.AuthOptions{Mode: rayv1.AuthModeToken}
		_, err := e.ray.RayV1().RayServices(e.ns).Create(e.ctx, rs, metav1.CreateOptions{})
		must(t, "creating the RayService", err)
		got := e.waitService(t, rs.Name, "Ready with its applications RUNNING", 2*time.Minute, serviceReady)
		authSecretToken(t, e, got.Status.ActiveServiceStatus.RayClusterName)
	})
	// rayctl demo runs an HTTPMode RayJob whose cluster requires a token (the controller submits with it)
	// and shows the job's log, read from the dashboard through the API server with the token.
	t.Run("RayctlDemo", func(t *testing.T) {
		b, err := os.ReadFile(samplePath("rayjob-http.yaml"))
		must(t, "reading rayjob-http.yaml", err)
		job := strings.Replace(string(b), `rayVersion: "2.46.0"`, "rayVersion: \"2.60.0\"\n    authOptions: {mode: token}", 1)
		file := filepath.Join(t.TempDir(), "rayjob-auth.yaml")
		must(t, "writing the RayJob", os.WriteFile(file, []byte(job), 0o644))
		out, err := in.Rayctl(e.ctx, "demo", "-f", file, "-n", e.ns)
		if err != nil || !regexp.MustCompile(`(?m)^  logs +hello from ray job$`).MatchString(out) {
			t.Errorf("rayctl demo of a RayJob whose cluster requires a token: %v\n%s\nwant its log line (hello from ray job)", err, out)
		}
	})
	t.Run("RayctlGetTokenOfAnOpenCluster", func(t *testing.T) {
		kubectl(t, e.ctx, in, e.ns, fmt.Sprintf(conformanceCluster, "open", simImage), "apply", "-f", "-")
		out, err := in.Rayctl(e.ctx, "get", "token", "open", "-n", e.ns)
		if err == nil || !strings.Contains(out, "does not use token authentication") {
			t.Errorf("rayctl get token of a cluster without authOptions: %v %q, want a refusal saying why", err, out)
		}
	})
}

// startAuthTest starts rayctl for a test of Ray's authentication on real Ray and raysim side by side: the
// process runtime, host Ray, a node with room for two of KubeRay's auth samples (4 CPUs and 8 GiB a pod),
// one of the real-Ray slots, and 15 minutes.
func startAuthTest(t *testing.T) (*framework.Instance, *rayEnv) {
	hostRay(t)
	in := framework.StartTest(t, "--runtime", "process", "--node-capacity", "cpu=48,memory=96Gi")
	e := raySetup(t, in)
	realRaySlots <- struct{}{}
	t.Cleanup(func() { <-realRaySlots })
	e.ctx = framework.TestContext(t, 15*time.Minute)
	return in, e
}

// readyHeads waits for each RayCluster of names to be ready with its one worker and returns its head.
func (e *rayEnv) readyHeads(t *testing.T, names ...string) []*rayTarget {
	var targets []*rayTarget
	for _, name := range names {
		_, head, _ := e.waitClusterReady(t, name, 1)
		targets = append(targets, &rayTarget{name: name, e: e, pod: head.Name, ip: head.Status.PodIP})
	}
	return targets
}

// wantTokenRequired checks that head's dashboard refuses the job list without a token (401) and serves it
// with token.
func wantTokenRequired(t *testing.T, e *rayEnv, head *corev1.Pod, token string) {
	t.Helper()
	r := &rayTarget{name: head.Name, e: e, pod: head.Name, ip: head.Status.PodIP}
	if code, body := r.httpWith(t, http.MethodGet, "/api/jobs/", "", nil); code != http.StatusUnauthorized {
		t.Errorf("the job list without a token: HTTP %d %s, want 401", code, body)
	}
	if code, body := r.httpWith(t, http.MethodGet, "/api/jobs/", "", http.Header{"Authorization": {"Bearer " + token}}); code != http.StatusOK {
		t.Errorf("the job list with the Secret's token: HTTP %d %s, want 200", code, body)
	}
}

// authSampleOnRaysim is one of KubeRay's auth samples with raysim's image for Ray's, its RayCluster named name.
func authSampleOnRaysim(t *testing.T, sample, name string) string {
	t.Helper()
	b, err := os.ReadFile(kubeRaySample(t, sample))
	must(t, "reading "+sample, err)
	return strings.ReplaceAll(strings.ReplaceAll(string(b), "rayproject/ray:2.53.0", simImage), "name: ray-cluster-with-auth", "name: "+name)
}

// authSecretToken checks the Secret of cluster's token as KubeRay makes it (named after the cluster, the
// token under auth_token, labelled with the cluster and controlled by it) and returns the token.
func authSecretToken(t *testing.T, e *rayEnv, cluster string) string {
	t.Helper()
	s, err := e.in.Client.CoreV1().Secrets(e.ns).Get(e.ctx, cluster, metav1.GetOptions{})
	must(t, "reading the Secret of "+cluster+"'s token", err)
	c, err := e.ray.RayV1().RayClusters(e.ns).Get(e.ctx, cluster, metav1.GetOptions{})
	must(t, "reading RayCluster "+cluster, err)
	if owner := metav1.GetControllerOf(s); owner == nil || owner.Kind != "RayCluster" || owner.UID != c.UID {
		t.Errorf("Secret %s is controlled by %+v, want RayCluster %s (%s)", s.Name, owner, cluster, c.UID)
	}
	if s.Labels["ray.io/cluster"] != cluster {
		t.Errorf("Secret %s's labels %v lack ray.io/cluster=%s", s.Name, s.Labels, cluster)
	}
	token := string(s.Data["auth_token"])
	if len(token) < 32 {
		t.Fatalf("Secret %s's auth_token is %q, want a random token", s.Name, token)
	}
	return token
}

// checkAuthEnv checks that every container of cluster's pods that runs Ray or talks to it has
// RAY_AUTH_MODE=token and RAY_AUTH_TOKEN from the cluster's Secret.
func checkAuthEnv(t *testing.T, e *rayEnv, cluster string) {
	pods, err := e.clusterPods(e.ctx, cluster, "")
	must(t, "listing "+cluster+"'s pods", err)
	want := map[string][]string{"head": {"ray-head", "autoscaler"}, "worker": {"wait-gcs-ready", "ray-worker"}}
	for _, p := range pods {
		byName := map[string]corev1.Container{}
		for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
			byName[c.Name] = c
		}
		for _, name := range want[p.Labels["ray.io/node-type"]] {
			c, ok := byName[name]
			if !ok {
				t.Errorf("pod %s has no container %s", p.Name, name)
				continue
			}
			var mode, token *corev1.EnvVar
			for i := range c.Env {
				switch c.Env[i].Name {
				case "RAY_AUTH_MODE":
					mode = &c.Env[i]
				case "RAY_AUTH_TOKEN":
					token = &c.Env[i]
				}
			}
			if mode == nil || mode.Value != "token" {
				t.Errorf("pod %s, container %s: RAY_AUTH_MODE %+v, want token", p.Name, name, mode)
			}
			if token == nil || token.ValueFrom == nil || token.ValueFrom.SecretKeyRef == nil ||
				token.ValueFrom.SecretKeyRef.Name != cluster || token.ValueFrom.SecretKeyRef.Key != "auth_token" {
				t.Errorf("pod %s, container %s: RAY_AUTH_TOKEN %+v, want it from Secret %s, key auth_token", p.Name, name, token, cluster)
			}
		}
	}
}

// authConformanceCases are the observations of Ray's token authentication made on both sides: the
// dashboard's answers with and without the token (tokens holds each side's, by cluster name), and
// Ray's CLI in the head without it (RAY_ADDRESS, the head's GCS, unset: Ray's job client prefers it to
// --address).
func authConformanceCases(tokens map[string]string) []conformanceCase {
	bearer := func(r *rayTarget) string { return "Bearer " + tokens[r.name] }
	answer := func(t *testing.T, r *rayTarget, method, path, body string, header http.Header) string {
		code, out := r.httpWith(t, method, path, body, header)
		return fmt.Sprintf("HTTP %d\n%s", code, out)
	}
	const job = `{"entrypoint": "echo never"}`
	return []conformanceCase{
		{name: "a submission without a token", run: func(t *testing.T, r *rayTarget) string {
			return answer(t, r, http.MethodPost, "/api/jobs/", job, nil)
		}},
		{name: "a submission with another token", run: func(t *testing.T, r *rayTarget) string {
			return answer(t, r, http.MethodPost, "/api/jobs/", job, http.Header{"Authorization": {"Bearer not-the-token"}})
		}},
		{name: "the token without Bearer", run: func(t *testing.T, r *rayTarget) string {
			return answer(t, r, http.MethodPost, "/api/jobs/", job, http.Header{"Authorization": {tokens[r.name]}})
		}},
		{name: "the job list without a token", run: func(t *testing.T, r *rayTarget) string {
			return answer(t, r, http.MethodGet, "/api/jobs/", "", nil)
		}},
		{name: "the job list with the token", run: func(t *testing.T, r *rayTarget) string {
			code, _ := r.httpWith(t, http.MethodGet, "/api/jobs/", "", http.Header{"Authorization": {bearer(r)}})
			return fmt.Sprintf("HTTP %d", code)
		}},
		{name: "X-Ray-Authorization with the token", run: func(t *testing.T, r *rayTarget) string {
			code, _ := r.httpWith(t, http.MethodGet, "/api/jobs/", "", http.Header{"X-Ray-Authorization": {bearer(r)}})
			return fmt.Sprintf("HTTP %d", code)
		}},
		{name: "the cookie with the token", run: func(t *testing.T, r *rayTarget) string {
			code, _ := r.httpWith(t, http.MethodGet, "/api/jobs/", "", http.Header{"Cookie": {"ray-authentication-token=" + tokens[r.name]}})
			return fmt.Sprintf("HTTP %d", code)
		}},
		{name: "authentication_mode without a token", run: func(t *testing.T, r *rayTarget) string {
			return apiCall(t, r, http.MethodGet, "/api/authentication_mode", "")
		}},
		{name: "gcs_healthz without a token", run: func(t *testing.T, r *rayTarget) string {
			return answer(t, r, http.MethodGet, "/api/gcs_healthz", "", nil)
		}},
		{name: "ray job list without a token", run: func(t *testing.T, r *rayTarget) string {
			return cliFails(t, r, "env -u RAY_ADDRESS RAY_AUTH_MODE=disabled RAY_AUTH_TOKEN= ray job list --address http://127.0.0.1:8265",
				"Authentication required: Unauthorized: Missing authentication token")
		}},
		{name: "ray job list with another token", run: func(t *testing.T, r *rayTarget) string {
			return cliFails(t, r, "env -u RAY_ADDRESS RAY_AUTH_TOKEN=not-the-token ray job list --address http://127.0.0.1:8265",
				"Authentication failed: Forbidden: Invalid authentication token")
		}},
	}
}

// submitWithToken runs Ray's own `ray job submit` on the host through `rayctl kubectl port-forward` to
// cluster's dashboard: sending no token it is refused, with RAY_AUTH_TOKEN (as `rayctl get token` prints
// it) the job runs.
func submitWithToken(t *testing.T, e *rayEnv, cluster, token string) {
	port, pfOut := portForwardDashboard(t, e.ctx, e.in, e.ns, cluster)
	submit := func(env ...string) (string, error) {
		return asUser(e.ctx, e.in.Credential, append(userEnv(e.in), env...), hostRay(t), "job", "submit",
			"--address", fmt.Sprintf("http://127.0.0.1:%d", port), "--", "echo", "token-accepted")
	}
	if out, err := submit("RAY_AUTH_MODE=disabled"); err == nil || !strings.Contains(out, "Unauthorized: Missing authentication token") {
		t.Errorf("ray job submit without a token: %v\n%s\nwant a refusal (401)", err, out)
	}
	out, err := submit("RAY_AUTH_MODE=token", "RAY_AUTH_TOKEN="+token)
	if err != nil || !strings.Contains(out, "token-accepted") || !strings.Contains(out, "succeeded") {
		t.Errorf("ray job submit with RAY_AUTH_TOKEN: %v\n%s\nport-forward said:\n%s", err, out, pfOut.String())
	}
}

// rayJobOnAuthCluster runs a RayJob (K8sJobMode) on cluster through spec.clusterSelector and checks it
// completes: the controller reads the job's status with the token, and its submitter Job (`ray job
// submit`) gets the token from the cluster's Secret.
func rayJobOnAuthCluster(t *testing.T, e *rayEnv, cluster string) {
	job := &rayv1.RayJob{
		ObjectMeta: metav1.ObjectMeta{Name: cluster + "-job"},
		Spec: rayv1.RayJobSpec{
			Entrypoint:      "echo the job ran with the token",
			ClusterSelector: map[string]string{"ray.io/cluster": cluster},
			SubmissionMode:  rayv1.K8sJobMode,
		},
	}
	_, err := e.ray.RayV1().RayJobs(e.ns).Create(e.ctx, job, metav1.CreateOptions{})
	must(t, "creating the RayJob", err)
	got := e.waitRealJob(t, job.Name)
	if s := got.Status; s.JobDeploymentStatus != rayv1.JobDeploymentStatusComplete || s.JobStatus != rayv1.JobStatusSucceeded {
		t.Fatalf("RayJob on %s ended %q/%q (reason %q, message %q); want Complete, SUCCEEDED", cluster, s.JobDeploymentStatus, s.JobStatus, s.Reason, s.Message)
	}
	logs, stderr, err := e.in.Kubectl(e.ctx, "", "logs", "-n", e.ns, "job/"+job.Name)
	must(t, "the submitter's log: "+stderr, err)
	if !strings.Contains(logs, "the job ran with the token") {
		t.Errorf("the submitter's log lacks the job's output:\n%s", logs)
	}
	pods, err := e.in.Client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: "job-name=" + job.Name})
	must(t, "listing the submitter's pods", err)
	for _, p := range pods.Items {
		var found bool
		for _, v := range p.Spec.Containers[0].Env {
			found = found || (v.Name == "RAY_AUTH_TOKEN" && v.ValueFrom != nil && v.ValueFrom.SecretKeyRef != nil && v.ValueFrom.SecretKeyRef.Name == cluster)
		}
		if !found {
			t.Errorf("submitter pod %s does not read RAY_AUTH_TOKEN from Secret %s: %+v", p.Name, cluster, p.Spec.Containers[0].Env)
		}
	}
}
