package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rayctl/rayctl/pkg/rayports"
	"github.com/rayctl/rayctl/test/e2e/framework"
)

// TestHostNetworkMode runs rayctl with --pod-network=host, the mode of machines where no user namespace
// can be made (macOS; Linux distributions that restrict them): pods share the host's network, and each
// Ray pod has a block of ports of its own on the host's loopback.
//
// As root (the mode forced on Linux; pods still run as the pod user, with their volumes mounted),
// KubeRay's shape of RayJob (a head and a worker, both declaring Ray's ports, its script in a ConfigMap
// volume) completes on real Ray, two clusters with workers run beside it, each head Service targets its
// head's block, `kubectl port-forward` then `ray job submit` works from the host, and Ray's Jobs API
// listens on the loopback only. As an ordinary user (the laptop's case), a RayJob of that shape whose
// entrypoint needs no volume (no mount can be made there: volumes are directories reached by their host
// paths) completes, and the port-forward works too.
func TestHostNetworkMode(t *testing.T) {
	t.Run("Root", func(t *testing.T) {
		hostRay(t)
		in := framework.StartTest(t, "--runtime", "process", "--pod-network=host")
		hostNetworkRayJob(t, in, "")
	})
	t.Run("OrdinaryUser", func(t *testing.T) {
		in := startLaptop(t, framework.TestContext(t, 2*time.Minute), "--pod-network=host")
		hostNetworkRayJob(t, in, "python -c \"import ray; ray.init(); print('nodes:', len([n for n in ray.nodes() if n['Alive']]))\"")
	})
}

// hostNetworkRayJob runs the RayJob sample (with entrypoint, when set) on in, started with
// --pod-network=host, and checks what TestHostNetworkMode says; root's instance runs the lot.
func hostNetworkRayJob(t *testing.T, in *framework.Instance, entrypoint string) {
	if out := in.Output.String(); !strings.Contains(out, "pods: the host's network (--pod-network=host)") || !strings.Contains(out, "requires its token") {
		t.Fatalf("rayctl up --pod-network=host does not say pods share the host's network, and what that means for Ray:\n%s", out)
	}
	// realRaySetup makes the test parallel once it holds a slot for real Ray: the test's deadline starts
	// after it, not while it waits for the sequential tests and the slot.
	e := realRaySetup(t, in)
	ctx := framework.TestContext(t, 15*time.Minute)
	job := realJob(t, "hostnet", rayv1.K8sJobMode)
	if entrypoint != "" {
		job.Spec.Entrypoint = entrypoint
	}
	_, err := e.ray.RayV1().RayJobs(e.ns).Create(e.ctx, job, metav1.CreateOptions{})
	must(t, "creating the RayJob", err)
	job = e.waitRealJob(t, "hostnet")
	if s := job.Status; s.JobDeploymentStatus != rayv1.JobDeploymentStatusComplete || s.JobStatus != rayv1.JobStatusSucceeded {
		t.Fatalf("RayJob ended %q/%q (reason %q, message %q); want Complete, SUCCEEDED", s.JobDeploymentStatus, s.JobStatus, s.Reason, s.Message)
	}
	cluster := job.Status.RayClusterName
	head := e.liveHead(t, cluster)
	headBlock, ok := rayports.FromAnnotations(head.Annotations)
	if !ok {
		t.Fatalf("the head pod records no block of ports: %v", head.Annotations)
	}

	t.Run("EachPodItsOwnPorts", func(t *testing.T) {
		pods, err := e.clusterPods(ctx, cluster, "")
		must(t, "listing the cluster's pods", err)
		checkBlocks(t, pods, map[rayports.Block]string{})
		svc, err := in.Client.CoreV1().Services(e.ns).Get(ctx, cluster+"-head-svc", metav1.GetOptions{})
		must(t, "reading the head Service", err)
		for _, p := range svc.Spec.Ports {
			if p.Name == "dashboard" && (p.Port != 8265 || p.TargetPort.IntVal != headBlock.Port(rayports.Dashboard)) {
				t.Errorf("the head Service's dashboard port %d targets %s, want 8265 to %d", p.Port, p.TargetPort.String(), headBlock.Port(rayports.Dashboard))
			}
		}
		c, err := e.ray.RayV1().RayClusters(e.ns).Get(ctx, cluster, metav1.GetOptions{})
		must(t, "reading the RayCluster", err)
		if got := c.Status.Endpoints["dashboard"]; got != strconv.Itoa(int(headBlock.Port(rayports.Dashboard))) {
			t.Errorf("status.endpoints.dashboard = %q, want the head's %d", got, headBlock.Port(rayports.Dashboard))
		}
	})

	t.Run("PortForwardAndRayJobSubmit", func(t *testing.T) {
		// As root each container has a UTS namespace of its own, named after its pod; an ordinary
		// user's containers are host processes.
		host := head.Name
		if in.Credential != nil {
			var err error
			host, err = os.Hostname()
			must(t, "the host's name", err)
		}
		portForwardAndSubmit(t, ctx, in, e, cluster, host)
	})

	// Every local user reaches the host's loopback, so there the cluster's Ray requires its token.
	t.Run("NoDoorForOtherUsers", func(t *testing.T) { hostNetworkDoor(t, ctx, head, headBlock, true) })
	if in.Credential != nil {
		return
	}

	// Two more clusters with workers beside the first: no two Ray pods share a port.
	t.Run("ClustersSideBySide", func(t *testing.T) {
		for _, name := range []string{"left", "right"} {
			e.createCluster(t, sampleCluster(t, name))
		}
		var all []corev1.Pod
		for _, name := range []string{"left", "right"} {
			_, h, workers := e.waitClusterReady(t, name, 1)
			all = append(append(all, *h), workers...)
		}
		pods, err := e.clusterPods(ctx, cluster, "")
		must(t, "listing the first cluster's pods", err)
		checkBlocks(t, append(all, pods...), map[rayports.Block]string{})
		// raysim's heads require their token too (its GCS speaks HTTP, not Ray's gRPC: no driver).
		left := all[0]
		block, _ := rayports.FromAnnotations(left.Annotations)
		hostNetworkDoor(t, ctx, &left, block, false)
	})

	// Ray's Jobs API (the dashboard, which runs any command) listens on the host's loopback only. The
	// table of every listener of the pods is in the log.
	t.Run("JobsAPIOnLoopbackOnly", func(t *testing.T) {
		listening, err := listeningTCP()
		must(t, "reading the host's TCP listeners", err)
		dashboard := strconv.Itoa(int(headBlock.Port(rayports.Dashboard)))
		var table []string
		found := false
		for _, pid := range descendants(in.Cmd.Process.Pid) {
			for _, inode := range socketInodes(pid) {
				addr, ok := listening[inode]
				if !ok {
					continue
				}
				table = append(table, fmt.Sprintf("%-24s pid %d (%s)", addr, pid, comm(pid)))
				host, port, _ := net.SplitHostPort(addr)
				if port != dashboard {
					continue
				}
				found = true
				if !net.ParseIP(host).IsLoopback() {
					t.Errorf("the head's dashboard listens on %s (pid %d, %s)", addr, pid, comm(pid))
				}
			}
		}
		sort.Strings(table)
		t.Logf("listeners of rayctl and its pods with --pod-network=host:\n%s", strings.Join(table, "\n"))
		if !found {
			t.Errorf("no listener on the head's dashboard port %s", dashboard)
		}
	})
}

// attack is what another local user tries against a Ray head on the host's network: the dashboard's
// and the agent's Jobs APIs on every address they listen on, then a driver through the GCS. It prints
// one line per try.
const attack = `
import json, sys, urllib.request, urllib.error
gcs, urls = sys.argv[1], sys.argv[2:]
if gcs == "-":
    urls, gcs = urls, None
for url in urls:
    req = urllib.request.Request(url, data=json.dumps({"entrypoint": "echo PWNED"}).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            print(url, "HTTP", r.status)
    except urllib.error.HTTPError as e:
        print(url, "HTTP", e.code)
    except Exception as e:
        print(url, "no answer:", type(e).__name__)
if gcs is None:
    sys.exit(0)
import ray
try:
    ray.init(address=gcs, log_to_driver=False)
    print("PWNED: a task ran:", ray.get(ray.remote(lambda: 1).remote(), timeout=60))
except BaseException as e:
    print("driver refused:", type(e).__name__, str(e).splitlines()[0][:200] if str(e) else "")
`

// hostNetworkDoor has another local user (nobody), without the cluster's token, try to run a job on
// head (on block): each Jobs API must answer 401 or 403 (or nothing), and, with driver, a Ray driver
// through the GCS must not run a task.
func hostNetworkDoor(t *testing.T, ctx context.Context, head *corev1.Pod, block rayports.Block, driver bool) {
	local, err := localAddrs()
	must(t, "this host's addresses", err)
	urls := []string{fmt.Sprintf("http://127.0.0.1:%d/api/jobs/", block.Port(rayports.Dashboard))}
	for a := range local {
		if ip := net.ParseIP(a); ip != nil && ip.To4() != nil {
			urls = append(urls, fmt.Sprintf("http://%s:%d/api/job_agent/jobs/", a, block.Port(rayports.AgentListen)))
		}
	}
	sort.Strings(urls)
	tmp, err := os.MkdirTemp("", "rayctl-attacker-")
	must(t, "a home for the attacker", err)
	t.Cleanup(func() { os.RemoveAll(tmp) })
	must(t, "opening the attacker's home", os.Chmod(tmp, 0o777))
	actx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	nobody := &syscall.Credential{Uid: unprivileged, Gid: unprivileged}
	python := filepath.Join(filepath.Dir(hostRay(t)), "python")
	gcs := "-"
	if driver {
		gcs = net.JoinHostPort("127.0.0.1", strconv.Itoa(int(block.Port(rayports.GCS))))
	}
	out, _ := asUser(actx, nobody, []string{"HOME=" + tmp, "RAY_TMPDIR=" + tmp, "RAY_USAGE_STATS_ENABLED=0"}, python,
		append([]string{"-u", "-c", attack, gcs}, urls...)...)
	t.Logf("another local user (uid %d) against head %s without its token:\n%s", unprivileged, head.Name, out)
	if strings.Contains(out, "PWNED") {
		t.Errorf("another local user ran a task on the cluster")
	}
	if driver && !strings.Contains(out, "driver refused") {
		t.Errorf("the attacker's driver did not end refused")
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[1] == "HTTP" && f[2] != "401" && f[2] != "403" {
			t.Errorf("a Jobs API answered another local user: %s", line)
		}
	}
}

// checkBlocks fails unless every pod of pods is a Ray pod on 127.0.0.1 with a block of ports no other
// pod of pods (or of seen) has.
func checkBlocks(t *testing.T, pods []corev1.Pod, seen map[rayports.Block]string) {
	t.Helper()
	for _, p := range pods {
		b, ok := rayports.FromAnnotations(p.Annotations)
		if !ok {
			t.Errorf("pod %s records no block of ports: %v", p.Name, p.Annotations)
			continue
		}
		if other, dup := seen[b]; dup {
			t.Errorf("pods %s and %s have the same block %s", p.Name, other, rayports.Describe(b))
		}
		seen[b] = p.Name
		if p.Status.PodIP != "127.0.0.1" {
			t.Errorf("pod %s on the host's network has IP %q, want 127.0.0.1", p.Name, p.Status.PodIP)
		}
	}
}
