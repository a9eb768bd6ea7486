package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

// kubectl runs the built-in kubectl in namespace ns and fails the test if it fails.
func kubectl(t *testing.T, ctx context.Context, in *framework.Instance, ns, stdin string, args ...string) string {
	t.Helper()
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	out, errOut, err := in.Kubectl(ctx, stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// lines splits output into its non-empty, trimmed lines.
func lines(out string) []string {
	var ls []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			ls = append(ls, l)
		}
	}
	return ls
}

const appManifests = `apiVersion: v1
kind: ConfigMap
metadata:
  name: app
  labels: {app: demo}
data:
  greeting: hello
---
apiVersion: v1
kind: Service
metadata:
  name: app
  labels: {app: demo}
spec:
  selector: {app: demo}
  ports:
  - name: http
    port: 80
    targetPort: 8080
`

// TestKubectlApply applies manifests from stdin client-side and server-side.
func TestKubectlApply(t *testing.T) {
	in, ctx, ns := setup(t)
	out := kubectl(t, ctx, in, ns, appManifests, "apply", "-f", "-")
	for _, want := range []string{"configmap/app created", "service/app created"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl apply output %q lacks %q", out, want)
		}
	}
	out = kubectl(t, ctx, in, ns, appManifests, "apply", "-f", "-")
	if !strings.Contains(out, "configmap/app unchanged") || !strings.Contains(out, "service/app unchanged") {
		t.Errorf("re-apply output %q, want unchanged", out)
	}
	out = kubectl(t, ctx, in, ns, strings.Replace(appManifests, "greeting: hello", "greeting: bonjour", 1), "apply", "-f", "-")
	if !strings.Contains(out, "configmap/app configured") {
		t.Errorf("apply of a change: %q, want configmap/app configured", out)
	}
	cm, err := in.Client.CoreV1().ConfigMaps(ns).Get(ctx, "app", metav1.GetOptions{})
	must(t, "get", err)
	if cm.Data["greeting"] != "bonjour" || cm.Annotations[corev1.LastAppliedConfigAnnotation] == "" {
		t.Errorf("after apply: data %v, last-applied annotation present: %v", cm.Data, cm.Annotations[corev1.LastAppliedConfigAnnotation] != "")
	}

	ssa := strings.ReplaceAll(appManifests, "name: app\n", "name: ssa\n")
	out = kubectl(t, ctx, in, ns, ssa, "apply", "--server-side", "-f", "-")
	if !strings.Contains(out, "configmap/ssa serverside-applied") || !strings.Contains(out, "service/ssa serverside-applied") {
		t.Errorf("kubectl apply --server-side: %q", out)
	}
	cm, err = in.Client.CoreV1().ConfigMaps(ns).Get(ctx, "ssa", metav1.GetOptions{})
	must(t, "get", err)
	found := false
	for _, mf := range cm.ManagedFields {
		found = found || (mf.Manager == "kubectl" && mf.Operation == metav1.ManagedFieldsOperationApply)
	}
	if !found {
		t.Errorf("managedFields lack kubectl's Apply: %+v", cm.ManagedFields)
	}
	// Another manager taking a field conflicts; kubectl says so and exits non-zero.
	_, errOut, err := in.Kubectl(ctx, strings.Replace(ssa, "greeting: hello", "greeting: hi", 1), "-n", ns, "apply", "--server-side", "--field-manager", "other", "-f", "-")
	if err == nil || !strings.Contains(errOut, "conflict") {
		t.Errorf("conflicting server-side apply: err %v, stderr %q; want a conflict", err, errOut)
	}
	out = kubectl(t, ctx, in, ns, strings.Replace(ssa, "greeting: hello", "greeting: hi", 1), "apply", "--server-side", "--field-manager", "other", "--force-conflicts", "-f", "-")
	if !strings.Contains(out, "serverside-applied") {
		t.Errorf("forced server-side apply: %q", out)
	}
	// A RayCluster applies like anything else.
	out = kubectl(t, ctx, in, ns, rayClusterYAML, "apply", "-f", "-")
	if !strings.Contains(out, "raycluster.ray.io/raycluster-kuberay created") {
		t.Errorf("apply RayCluster: %q", out)
	}
	out = kubectl(t, ctx, in, ns, "", "get", "rayclusters", "-o", "name")
	if strings.TrimSpace(out) != "raycluster.ray.io/raycluster-kuberay" {
		t.Errorf("get rayclusters -o name: %q", out)
	}
}

// TestKubectlGetWide checks kubectl's pod table, which needs the server's table printers.
func TestKubectlGetWide(t *testing.T) {
	in, ctx, ns := setup(t)
	p, err := in.Client.CoreV1().Pods(ns).Create(ctx, boundPod("wide"), metav1.CreateOptions{})
	must(t, "create pod", err)
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIP = "10.244.3.4"
	p.Status.PodIPs = []corev1.PodIP{{IP: "10.244.3.4"}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", Ready: true, Image: "busybox:1.36", RestartCount: 2, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
	_, err = in.Client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	must(t, "update status", err)
	out := kubectl(t, ctx, in, ns, "", "get", "pods", "-o", "wide")
	ls := lines(out)
	if len(ls) != 2 {
		t.Fatalf("kubectl get pods -o wide: want a header and one row, got:\n%s", out)
	}
	header := strings.Fields(ls[0])
	for _, col := range []string{"NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"} {
		if !slices.Contains(header, col) {
			t.Errorf("kubectl get pods -o wide: header %q lacks column %s", ls[0], col)
		}
	}
	if !regexp.MustCompile(`^NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\s+IP\s+NODE\b`).MatchString(ls[0]) {
		t.Errorf("kubectl get pods -o wide: header %q, want NAME READY STATUS RESTARTS AGE IP NODE …", ls[0])
	}
	row := strings.Fields(ls[1])
	for _, cell := range []string{"wide", "1/1", "Running", "2", "10.244.3.4", fakeNode} {
		if !slices.Contains(row, cell) {
			t.Errorf("kubectl get pods -o wide: row %q lacks %q", ls[1], cell)
		}
	}
	// Services and jobs print their own columns too.
	_, err = in.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "wide"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	must(t, "create service", err)
	out = kubectl(t, ctx, in, ns, "", "get", "services")
	if ls := lines(out); len(ls) != 2 || !regexp.MustCompile(`^NAME\s+TYPE\s+CLUSTER-IP\s+EXTERNAL-IP\s+PORT\(S\)\s+AGE`).MatchString(ls[0]) || !strings.Contains(ls[1], "ClusterIP") || !strings.Contains(ls[1], "80/TCP") {
		t.Errorf("kubectl get services:\n%s\nwant NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE and a ClusterIP row with 80/TCP", out)
	}
}

// TestKubectlDescribeExplain checks describe (which also reads the pod's events) and explain (which reads
// the OpenAPI schema of built-in kinds and CRDs).
func TestKubectlDescribeExplain(t *testing.T) {
	in, ctx, ns := setup(t)
	p, err := in.Client.CoreV1().Pods(ns).Create(ctx, boundPod("described"), metav1.CreateOptions{})
	must(t, "create pod", err)
	_, err = in.Client.CoreV1().Events(ns).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: "described-"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "described", UID: p.UID, APIVersion: "v1"},
		Reason:         "E2EReason", Message: "an event for describe", Type: corev1.EventTypeNormal,
		Source: corev1.EventSource{Component: "e2e"}, Count: 1,
		FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(),
	}, metav1.CreateOptions{})
	must(t, "create event", err)
	out := kubectl(t, ctx, in, ns, "", "describe", "pod", "described")
	for _, re := range []string{`Name:\s+described`, `Namespace:\s+` + ns, `Node:\s+` + fakeNode, `Containers:`, `Image:\s+busybox:1.36`, `Status:\s+Pending`, `E2EReason`, `an event for describe`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("kubectl describe pod lacks %s:\n%s", re, out)
		}
	}
	out = kubectl(t, ctx, in, "", "", "explain", "pod.spec")
	for _, want := range []string{"KIND:", "Pod", "FIELD:", "spec", "containers", "restartPolicy"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl explain pod.spec lacks %q:\n%.2000s", want, out)
		}
	}
	out = kubectl(t, ctx, in, "", "", "explain", "raycluster.spec")
	for _, want := range []string{"RayCluster", "GROUP:", "ray.io", "headGroupSpec", "workerGroupSpecs"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl explain raycluster.spec lacks %q:\n%.2000s", want, out)
		}
	}
	// The OpenAPI v2 document (built when first asked for) has the built-in kinds and, merged into it by
	// apiextensions, the custom resources, as kube-apiserver's has.
	var v2 struct {
		Definitions map[string]json.RawMessage `json:"definitions"`
	}
	must(t, "decode /openapi/v2", json.Unmarshal([]byte(kubectl(t, ctx, in, "", "", "get", "--raw", "/openapi/v2")), &v2))
	for _, want := range []string{"io.k8s.api.core.v1.Pod", "io.ray.v1.RayCluster", "io.ray.v1.RayJob"} {
		if _, ok := v2.Definitions[want]; !ok {
			t.Errorf("/openapi/v2 has no definition %s (%d definitions)", want, len(v2.Definitions))
		}
	}
}

// TestKubectlWait waits for a condition that a status patch makes true.
func TestKubectlWait(t *testing.T) {
	in, ctx, ns := setup(t)
	for _, name := range []string{"becomes-ready", "never-ready"} {
		_, err := in.Client.CoreV1().Pods(ns).Create(ctx, boundPod(name), metav1.CreateOptions{})
		must(t, "create pod", err)
	}
	type result struct {
		out, errOut string
		err         error
	}
	done := make(chan result, 1)
	go func() {
		out, errOut, err := in.Kubectl(ctx, "", "-n", ns, "wait", "--for=condition=Ready", "pod/becomes-ready", "--timeout=90s")
		done <- result{out, errOut, err}
	}()
	kubectl(t, ctx, in, ns, "", "patch", "pod", "becomes-ready", "--subresource=status", "--type=merge",
		"-p", `{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}`)
	r := <-done
	if r.err != nil || !strings.Contains(r.out, "pod/becomes-ready condition met") {
		t.Errorf("kubectl wait --for=condition=Ready: %v\n%s\n%s", r.err, r.out, r.errOut)
	}
	_, errOut, err := in.Kubectl(ctx, "", "-n", ns, "wait", "--for=condition=Ready", "pod/never-ready", "--timeout=1s")
	if err == nil || !strings.Contains(errOut, "timed out") {
		t.Errorf("kubectl wait on a pod that never becomes ready: err %v, stderr %q; want a time-out", err, errOut)
	}
	out := kubectl(t, ctx, in, ns, "", "wait", "--for=jsonpath={.status.phase}=Running", "pod/becomes-ready", "--timeout=30s")
	if !strings.Contains(out, "condition met") {
		t.Errorf("kubectl wait --for=jsonpath: %q", out)
	}
}

// TestKubectlDeleteEdit checks kubectl delete (including force-deleting a pod bound to a node) and
// kubectl edit with a scripted editor.
func TestKubectlDeleteEdit(t *testing.T) {
	in, ctx, ns := setup(t)
	kubectl(t, ctx, in, ns, appManifests, "apply", "-f", "-")

	out, errOut, err := in.KubectlEnv(ctx, []string{"KUBE_EDITOR=sed -i s/hello/edited/"}, "", "-n", ns, "edit", "configmap", "app")
	if err != nil || !strings.Contains(out, "configmap/app edited") {
		t.Errorf("kubectl edit: %v\n%s\n%s", err, out, errOut)
	}
	cm, err := in.Client.CoreV1().ConfigMaps(ns).Get(ctx, "app", metav1.GetOptions{})
	must(t, "get", err)
	if cm.Data["greeting"] != "edited" {
		t.Errorf("after kubectl edit: data %v, want greeting=edited", cm.Data)
	}

	out = kubectl(t, ctx, in, ns, "", "delete", "configmap", "app")
	if !strings.Contains(out, `configmap "app" deleted`) {
		t.Errorf("kubectl delete configmap: %q", out)
	}
	_, errOut, err = in.Kubectl(ctx, "", "-n", ns, "get", "configmap", "app")
	if err == nil || !strings.Contains(errOut, "NotFound") {
		t.Errorf("kubectl get of a deleted configmap: err %v, stderr %q; want NotFound", err, errOut)
	}
	out = kubectl(t, ctx, in, ns, "", "delete", "service", "app", "--wait")
	if !strings.Contains(out, `service "app" deleted`) {
		t.Errorf("kubectl delete service: %q", out)
	}

	_, err = in.Client.CoreV1().Pods(ns).Create(ctx, boundPod("forced"), metav1.CreateOptions{})
	must(t, "create pod", err)
	out, errOut, err = in.Kubectl(ctx, "", "-n", ns, "delete", "pod", "forced", "--grace-period=0", "--force")
	if err != nil || !strings.Contains(out, `pod "forced" force deleted`) {
		t.Errorf("kubectl delete pod --force: %v\n%s\n%s", err, out, errOut)
	}
	_, err = in.Client.CoreV1().Pods(ns).Get(ctx, "forced", metav1.GetOptions{})
	expectStatus(t, "get a force-deleted pod", err, 404)

	_, err = in.Client.CoreV1().Pods(ns).Create(ctx, unscheduledPod("plain"), metav1.CreateOptions{})
	must(t, "create pod", err)
	out = kubectl(t, ctx, in, ns, "", "delete", "pod", "plain", "--timeout=60s")
	if !strings.Contains(out, `pod "plain" deleted`) {
		t.Errorf("kubectl delete pod: %q", out)
	}
}

// TestKubectlSelectors checks kubectl get with -l, --field-selector, and `get all`.
func TestKubectlSelectors(t *testing.T) {
	in, ctx, ns := setup(t)
	for i, tier := range []string{"web", "web", "db"} {
		p := boundPod(fmt.Sprintf("p%d", i))
		p.Labels = map[string]string{"tier": tier}
		_, err := in.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		must(t, "create pod", err)
	}
	_, err := in.Client.CoreV1().Pods(ns).Patch(ctx, "p1", "application/merge-patch+json", []byte(`{"status":{"phase":"Running"}}`), metav1.PatchOptions{}, "status")
	must(t, "patch status", err)

	if got := lines(kubectl(t, ctx, in, ns, "", "get", "pods", "-l", "tier=web", "-o", "name")); !slices.Equal(got, []string{"pod/p0", "pod/p1"}) {
		t.Errorf("kubectl get pods -l tier=web = %v", got)
	}
	if got := lines(kubectl(t, ctx, in, ns, "", "get", "pods", "-l", "tier in (db)", "-o", "name")); !slices.Equal(got, []string{"pod/p2"}) {
		t.Errorf("kubectl get pods -l 'tier in (db)' = %v", got)
	}
	if got := lines(kubectl(t, ctx, in, ns, "", "get", "pods", "--field-selector", "status.phase=Running", "-o", "name")); !slices.Equal(got, []string{"pod/p1"}) {
		t.Errorf("kubectl get pods --field-selector status.phase=Running = %v", got)
	}
	if got := lines(kubectl(t, ctx, in, ns, "", "get", "pods", "--field-selector", "status.phase!=Running,spec.nodeName="+fakeNode, "-l", "tier=web", "-o", "name")); !slices.Equal(got, []string{"pod/p0"}) {
		t.Errorf("kubectl get pods with both selectors = %v", got)
	}
	_, errOut, err := in.Kubectl(ctx, "", "-n", ns, "get", "pods", "--field-selector", "spec.bogus=1")
	if err == nil || !strings.Contains(errOut, "BadRequest") {
		t.Errorf("kubectl get pods --field-selector spec.bogus=1: err %v stderr %q, want BadRequest", err, errOut)
	}
	out, errOut, err := in.Kubectl(ctx, "", "-n", ns, "get", "pods", "-l", "tier=none")
	if err != nil || !strings.Contains(out+errOut, "No resources found") {
		t.Errorf("kubectl get pods -l tier=none: %v %q %q", err, out, errOut)
	}

	_, err = in.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	must(t, "create service", err)
	_, err = in.Client.BatchV1().Jobs(ns).Create(ctx, testJob("job"), metav1.CreateOptions{})
	must(t, "create job", err)
	_, err = in.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "not-in-all"}}, metav1.CreateOptions{})
	must(t, "create configmap", err)
	got := lines(kubectl(t, ctx, in, ns, "", "get", "all", "-o", "name"))
	for _, want := range []string{"pod/p0", "pod/p1", "pod/p2", "service/svc", "job.batch/job"} {
		if !slices.Contains(got, want) {
			t.Errorf("kubectl get all lacks %s: %v", want, got)
		}
	}
	if slices.Contains(got, "configmap/not-in-all") {
		t.Errorf("kubectl get all lists configmaps: %v", got)
	}
	out = kubectl(t, ctx, in, ns, "", "get", "all")
	for _, want := range []string{"pod/p0", "service/svc", "job.batch/job"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get all (table) lacks %s:\n%s", want, out)
		}
	}
}

// TestKubectlVersion checks that kubectl reports client and server versions without error.
func TestKubectlVersion(t *testing.T) {
	t.Parallel()
	in := shared(t)
	ctx := testContext(t)
	out, errOut, err := in.Kubectl(ctx, "", "version")
	if !strings.Contains(out, "Server Version: v1.37.2") {
		t.Errorf("kubectl version lacks the server version v1.37.2:\n%s\n%s", out, errOut)
	}
	if err != nil {
		t.Errorf("kubectl version failed (is the binary built without version stamps?): %v\n%s\n%s", err, out, errOut)
	}
}

// TestKubeconfigMerge checks `rayctl kubeconfig --merge --into` on an existing kubeconfig and a new file.
func TestKubeconfigMerge(t *testing.T) {
	t.Parallel()
	in := shared(t)
	ctx := testContext(t)
	dir := t.TempDir()

	out, err := in.Rayctl(ctx, "kubeconfig")
	if err != nil || strings.TrimSpace(out) != in.Kubeconfig {
		t.Errorf("rayctl kubeconfig = %q (%v), want %s", out, err, in.Kubeconfig)
	}

	existing := filepath.Join(dir, "config")
	must(t, "write", os.WriteFile(existing, []byte(`apiVersion: v1
kind: Config
clusters:
- name: other
  cluster: {server: "https://other.example:6443"}
users:
- name: other
  user: {token: abc}
contexts:
- name: other
  context: {cluster: other, user: other}
current-context: other
`), 0o600))
	out, err = in.Rayctl(ctx, "kubeconfig", "--merge", "--into", existing)
	if err != nil {
		t.Fatalf("rayctl kubeconfig --merge: %v\n%s", err, out)
	}
	cfg, err := clientcmd.LoadFromFile(existing)
	must(t, "load merged kubeconfig", err)
	if cfg.Contexts["rayctl"] == nil || cfg.Contexts["other"] == nil || cfg.Clusters["other"] == nil {
		t.Errorf("merged kubeconfig contexts %v clusters %v, want rayctl and other", keys(cfg.Contexts), keys(cfg.Clusters))
	}
	if cfg.CurrentContext != "other" {
		t.Errorf("merge changed current-context to %q", cfg.CurrentContext)
	}
	bin, err := framework.Binary()
	must(t, "binary", err)
	b, err := exec.CommandContext(ctx, bin, "kubectl", "--kubeconfig", existing, "--context", "rayctl", "get", "namespace", "kube-system", "-o", "name").CombinedOutput()
	if err != nil || strings.TrimSpace(string(b)) != "namespace/kube-system" {
		t.Errorf("kubectl --context rayctl with the merged kubeconfig: %v\n%s", err, b)
	}

	fresh := filepath.Join(dir, "sub", "new-config")
	out, err = in.Rayctl(ctx, "kubeconfig", "--merge", "--into", fresh)
	if err != nil {
		t.Fatalf("rayctl kubeconfig --merge into a new file: %v\n%s", err, out)
	}
	st, err := os.Stat(fresh)
	must(t, "stat", err)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("new merged kubeconfig mode %#o, want 0600 (it holds the admin key)", st.Mode().Perm())
	}
	cfg, err = clientcmd.LoadFromFile(fresh)
	must(t, "load", err)
	if cfg.CurrentContext != "rayctl" || cfg.Contexts["rayctl"] == nil {
		t.Errorf("new kubeconfig: current-context %q contexts %v", cfg.CurrentContext, keys(cfg.Contexts))
	}
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
