package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rayctl/rayctl/pkg/diagnose"
	"github.com/rayctl/rayctl/test/e2e/framework"
)

// TestRayctlCommandsFollowKubeconfig: rayctl's own commands find the cluster and namespace as kubectl
// does. With --kubeconfig and --context naming a context whose namespace holds the pod, `rayctl
// diagnose pod/NAME` and `rayctl trace pod/NAME` look there without -n and without a data dir of a running
// rayctl; $KUBECONFIG does the same with its current context; with neither, an empty data dir is
// refused saying how to name a cluster.
func TestRayctlCommandsFollowKubeconfig(t *testing.T) {
	t.Parallel()
	in := shared(t)
	ctx := testContext(t)
	ns := newNamespace(t, ctx, in)
	pod := nodePod("looked-at", corev1.RestartPolicyNever, 0, nodeSh("c", "sleep 300"))
	_, err := in.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	must(t, "creating the pod", err)

	cfg, err := clientcmd.LoadFromFile(in.Kubeconfig)
	must(t, "reading the kubeconfig", err)
	team := cfg.Contexts[cfg.CurrentContext].DeepCopy()
	team.Namespace = ns
	cfg.Contexts["team"] = team
	withFlag := filepath.Join(t.TempDir(), "kubeconfig")
	must(t, "writing a kubeconfig with a team context", clientcmd.WriteToFile(*cfg, withFlag))
	cfg.CurrentContext = "team"
	viaEnv := filepath.Join(t.TempDir(), "kubeconfig")
	must(t, "writing a kubeconfig whose current context is team", clientcmd.WriteToFile(*cfg, viaEnv))
	empty := t.TempDir()

	run := func(env []string, args ...string) (string, error) {
		bin, err := framework.Binary()
		must(t, "the rayctl binary", err)
		cmd := exec.CommandContext(ctx, bin, append(args, "--data-dir", empty)...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	diagnosed := func(how string, env []string, args ...string) {
		t.Helper()
		out, err := run(env, append([]string{"diagnose", "pod/looked-at", "-o", "json"}, args...)...)
		if err != nil {
			t.Fatalf("%s: rayctl diagnose: %v\n%s", how, err, out)
		}
		var r diagnose.Report
		must(t, "decoding the report", json.Unmarshal([]byte(out), &r))
		if r.Object.Namespace != ns || r.Object.Name != "looked-at" {
			t.Errorf("%s: diagnose read %+v, want pod %s/looked-at", how, r.Object, ns)
		}
	}
	diagnosed("--kubeconfig --context team", []string{"KUBECONFIG="}, "--kubeconfig", withFlag, "--context", "team")
	diagnosed("KUBECONFIG", []string{"KUBECONFIG=" + viaEnv})

	// trace names the object it looked for, hops recorded or not: the namespace is the context's.
	if out, _ := run([]string{"KUBECONFIG="}, "trace", "pod/looked-at", "--kubeconfig", withFlag, "--context", "team"); !strings.Contains(out, ns+"/looked-at") {
		t.Errorf("rayctl trace pod/looked-at --context team says %q, want it to look in %s", out, ns)
	}

	out, err := run([]string{"KUBECONFIG="}, "diagnose", "pod/looked-at")
	if err == nil || !strings.Contains(out, "rayctl is not running on "+empty) || !strings.Contains(out, "--kubeconfig") {
		t.Errorf("rayctl diagnose on an empty data dir without a kubeconfig: %v\n%s\nwant a refusal naming --kubeconfig", err, out)
	}
}
