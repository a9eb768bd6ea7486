package e2e

// Pods' way out of the node (package egress): KubeRay's flagship RayJob sample, whose runtime env
// pip-installs packages from PyPI, completes unchanged on real Ray; with --pod-egress=off the same RayJob
// fails soon, saying which flag made it fail; a pod reaches the world but not the host's own services.

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rayctl/rayctl/pkg/controllers/ray/rayjob"
	"github.com/rayctl/rayctl/test/e2e/framework"
)

// kubeRaySample is the path of one of KubeRay's own samples (config/samples) in the module rayctl builds
// against, as KubeRay ships it.
func kubeRaySample(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/ray-project/kuberay/ray-operator").Output()
	must(t, "finding KubeRay's module", err)
	p := filepath.Join(strings.TrimSpace(string(out)), "config", "samples", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("KubeRay's sample %s: %v", name, err)
	}
	return p
}

// applySample runs `kubectl apply -f` of a KubeRay sample, unchanged, in e's namespace.
func (e *rayEnv) applySample(t *testing.T, name string) {
	t.Helper()
	out, stderr, err := e.in.Kubectl(e.ctx, "", "apply", "-n", e.ns, "-f", kubeRaySample(t, name))
	must(t, "kubectl apply "+name+": "+out+stderr, err)
}

// (KubeRaySampleWithPip) KubeRay's ray-job.sample.yaml, unchanged: its runtime env pip-installs requests
// and pendulum from PyPI in the pods; the RayJob completes, and the driver's output (it counts to 5 with
// the runtime env's counter name) is in the submitter's log.
func testKubeRaySampleWithPip(t *testing.T, e *rayEnv) {
	// The sample brings its own ConfigMap, of the name realRaySetup's has: that one goes first, or the
	// head could mount it before the apply replaces its script.
	must(t, "deleting realRaySetup's ConfigMap", e.in.Client.CoreV1().ConfigMaps(e.ns).Delete(e.ctx, "ray-job-code-sample", metav1.DeleteOptions{}))
	start := time.Now()
	e.applySample(t, "ray-job.sample.yaml")
	job := e.waitRealJob(t, "rayjob-sample")
	if s := job.Status; s.JobDeploymentStatus != rayv1.JobDeploymentStatusComplete || s.JobStatus != rayv1.JobStatusSucceeded {
		e.dump(t, e.ctx)
		t.Fatalf("ray-job.sample.yaml ended %q/%q (reason %q, message %q); want Complete, SUCCEEDED", s.JobDeploymentStatus, s.JobStatus, s.Reason, s.Message)
	}
	t.Logf("ray-job.sample.yaml: Complete in %s", time.Since(start).Round(time.Second))
	logs, stderr, err := e.in.Kubectl(e.ctx, "", "logs", "-n", e.ns, "job/rayjob-sample")
	must(t, "the submitter's log: "+stderr, err)
	if !strings.Contains(logs, "test_counter got 5") {
		t.Errorf("the submitter's log lacks the driver's output:\n%s", logs)
	}
	// The same head pod reaches the world but none of the host's own services.
	head := e.liveHead(t, job.Status.RayClusterName)
	podReachesNotTheHost(t, e, head)
}

// podReachesNotTheHost listens on each of the host's own addresses (not loopback) and checks that a
// connection from the pod to it is refused, while the pod reaches PyPI.
func podReachesNotTheHost(t *testing.T, e *rayEnv, head *corev1.Pod) {
	t.Helper()
	local, err := localAddrs()
	must(t, "this host's addresses", err)
	for addr := range local {
		ip := net.ParseIP(addr)
		if ip == nil || ip.To4() == nil || ip.IsLoopback() || strings.HasPrefix(addr, "10.244.") {
			continue
		}
		ln, err := net.Listen("tcp4", net.JoinHostPort(addr, "0"))
		if err != nil {
			continue
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				fmt.Fprintln(c, "the host")
				c.Close()
			}
		}()
		out := e.headExec(t, head, "python", "-c", dialScript(ln.Addr().String()))
		ln.Close()
		if !strings.Contains(out, "refused") {
			t.Errorf("a pod dialing the host's own %s: %q, want a refusal", ln.Addr(), strings.TrimSpace(out))
		}
	}
	out := e.headExec(t, head, "python", "-c", "import urllib.request; print(urllib.request.urlopen('https://pypi.org/simple/requests/', timeout=30).status)")
	if strings.TrimSpace(out) != "200" {
		t.Errorf("PyPI from a pod: %q, want 200", strings.TrimSpace(out))
	}
}

// dialScript is Python that connects to addr and prints what the other side says, or "refused".
func dialScript(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	return fmt.Sprintf(`import socket
try:
    s = socket.create_connection((%q, %s), timeout=10)
    print(s.recv(100).decode().strip())
except ConnectionRefusedError:
    print("refused")
except Exception as e:
    print(type(e).__name__, e)
`, host, port)
}

// TestPodEgressOff: `rayctl up --pod-egress=off` says pods are offline; KubeRay's ray-job.sample.yaml then
// fails (its pip install cannot reach PyPI) with a message that names the flag, and a pod's connection out
// is refused at once rather than left to hang.
func TestPodEgressOff(t *testing.T) {
	// realRaySetup makes the test parallel once it holds a slot for real Ray.
	hostRay(t)
	// Capacity is not what this tests: the sample's head, worker and submitter fit whatever the machine.
	in, err := framework.Start("", "--runtime", "process", "--pod-egress=off", "--node-capacity", "cpu=8,memory=16Gi")
	if in != nil {
		t.Cleanup(func() { in.Cleanup(t) })
	}
	must(t, "rayctl up --pod-egress=off", err)
	if line := startupLine(in, "egress"); !strings.Contains(line, "off (--pod-egress=off)") {
		t.Fatalf("rayctl up --pod-egress=off says %q", line)
	}
	e := realRaySetup(t, in)
	e.applySample(t, "ray-job.sample.yaml")
	job := e.waitRealJob(t, "rayjob-sample")
	s := job.Status
	if s.JobDeploymentStatus != rayv1.JobDeploymentStatusFailed || s.JobStatus != rayv1.JobStatusFailed {
		t.Fatalf("ray-job.sample.yaml offline ended %q/%q (message %q); want Failed, FAILED", s.JobDeploymentStatus, s.JobStatus, s.Message)
	}
	if !strings.HasPrefix(s.Message, rayjob.OfflineNote) || !strings.Contains(s.Message, "--pod-egress=off") {
		t.Errorf("the failed RayJob's message does not name the flag: %q", s.Message)
	}
	if !strings.Contains(s.Message, "requests==2.26.0") {
		t.Errorf("the failed RayJob's message lacks what Ray says (pip's error): %q", s.Message)
	}
	if s.EndTime != nil {
		t.Logf("offline ray-job.sample.yaml: Failed %s after creation", s.EndTime.Sub(job.CreationTimestamp.Time).Round(time.Second))
	}

	head := e.liveHead(t, job.Status.RayClusterName)
	out := e.headExec(t, head, "python", "-c", dialScript("192.0.2.1:443"))
	if strings.TrimSpace(out) != "refused" {
		t.Errorf("a connection out of an offline pod: %q, want refused at once", strings.TrimSpace(out))
	}
	out = e.headExec(t, head, "python", "-c", `import socket
try:
    socket.gethostbyname("pypi.org"); print("resolved")
except socket.gaierror as e:
    print("no name")`)
	if strings.TrimSpace(out) != "no name" {
		t.Errorf("pypi.org from an offline pod: %q, want no name", strings.TrimSpace(out))
	}
}
