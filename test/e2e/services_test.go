package e2e

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/rayctl/rayctl/pkg/runtime/network"
	"github.com/rayctl/rayctl/test/e2e/framework"
)

// TestClusterIPServices: a Service whose port (80) differs from its targetPort (the head's port named
// "dashboard", 8265) reaches a RayCluster's dashboard through its ClusterIP and through its name, from
// a pod and from the node namespace, as kube-proxy makes it on a cluster; default/kubernetes answers on
// its ClusterIP too. It needs a pod network of rayctl's own (the node namespace): as root here, and
// (Rootless) as an ordinary user, in rayctl's user namespace, on raysim.
func TestClusterIPServices(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("pods get a network of their own only as root (or as a user namespace's root, which the Rootless case starts as root)")
	}
	t.Run("Root", func(t *testing.T) { clusterIPServices(t, shared(t)) })
	t.Run("Rootless", func(t *testing.T) {
		bin, err := framework.Binary()
		must(t, "the rayctl binary", err)
		ctx := framework.TestContext(t, time.Minute)
		mustReach(t, ctx, laptopUser, bin)
		in, err := framework.StartAs(laptopUser, "--ray", "sim")
		if in != nil {
			t.Cleanup(func() { in.Cleanup(t) })
		}
		must(t, "rayctl up --ray sim as uid "+strconv.Itoa(laptopUID), err)
		if !strings.Contains(in.Output.String(), "(rootless)") {
			t.Fatalf("rayctl up as uid %d does not run rootless:\n%s", laptopUID, in.Output.String())
		}
		clusterIPServices(t, in)
	})
}

func clusterIPServices(t *testing.T, in *framework.Instance) {
	if !strings.Contains(in.Output.String(), "ClusterIPs 10.96.0.0/16 carry traffic") {
		t.Fatalf("rayctl up does not say ClusterIPs carry traffic:\n%s", in.Output.String())
	}
	e := newRayEnv(t, in)
	e.createCluster(t, sampleCluster(t, "svc"))
	_, head, _ := e.waitClusterReady(t, "svc", 1)

	_, err := in.Client.CoreV1().Services(e.ns).Create(e.ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "dash"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"ray.io/cluster": "svc", "ray.io/node-type": "head"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("dashboard")}},
		},
	}, metav1.CreateOptions{})
	must(t, "creating Service dash", err)
	svc, err := in.Client.CoreV1().Services(e.ns).Get(e.ctx, "dash", metav1.GetOptions{})
	must(t, "reading Service dash", err)
	clusterIP := svc.Spec.ClusterIP

	client := nodePod("client", corev1.RestartPolicyNever, 0, nodeSh("c", "sleep 3600"))
	nodeCreatePod(t, e.ctx, in, e.ns, client)
	framework.WaitFor(t, e.ctx, "the client pod running", func() (bool, error) {
		p, err := in.Client.CoreV1().Pods(e.ns).Get(e.ctx, "client", metav1.GetOptions{})
		return err == nil && runningReady(p), err
	})

	// From the client pod: the ClusterIP, the short name and the full name, all on port 80.
	for _, host := range []string{clusterIP, "dash", "dash." + e.ns + ".svc.cluster.local"} {
		url := "http://" + host + "/api/gcs_healthz"
		var out, stderr string
		framework.WaitFor(t, e.ctx, "wget "+url+" in a pod", func() (bool, error) {
			var err error
			out, stderr, err = in.Kubectl(e.ctx, "", "exec", "-n", e.ns, "client", "--", "wget", "-q", "-T", "5", "-O-", url)
			return err == nil && strings.TrimSpace(out) == "success", nil
		})
		t.Logf("%s from a pod: %q %s", url, out, stderr)
	}
	// busybox's nslookup in an image; glibc's getent where pods run the host's programs (rootless).
	name := "dash." + e.ns + ".svc.cluster.local"
	lookup, _, err := in.Kubectl(e.ctx, "", "exec", "-n", e.ns, "client", "--", "sh", "-c", "nslookup "+name+" 2>/dev/null || getent hosts "+name)
	must(t, "looking the name up in the pod", err)
	if !strings.Contains(lookup, clusterIP) || strings.Contains(lookup, head.Status.PodIP) {
		t.Errorf("the Service's name resolves in a pod to:\n%s\nwant its ClusterIP %s, not the head's %s", lookup, clusterIP, head.Status.PodIP)
	}

	// A Service without a ready endpoint refuses at once.
	_, err = in.Client.CoreV1().Services(e.ns).Create(e.ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "nobody"},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "none"}, Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
	must(t, "creating Service nobody", err)
	framework.WaitFor(t, e.ctx, "the endpoint-less Service refusing", func() (bool, error) {
		_, stderr, err := in.Kubectl(e.ctx, "", "exec", "-n", e.ns, "client", "--", "wget", "-T", "5", "-O-", "http://nobody/")
		return err != nil && strings.Contains(stderr, "refused"), nil
	})

	// The API server through default/kubernetes' ClusterIP from a pod: plain HTTP to its TLS port gets the
	// server's 400, so the connection got there.
	_, stderr, _ := in.Kubectl(e.ctx, "", "exec", "-n", e.ns, "client", "--", "wget", "-T", "5", "-O-", "http://10.96.0.1:443/")
	if !strings.Contains(stderr, "400") {
		t.Errorf("plain HTTP to 10.96.0.1:443 from a pod: %q, want the API server's 400", stderr)
	}

	if in.NodeNetNS() == "" {
		return // the node namespace is mounted in rayctl's own mount namespace only (rootless)
	}
	// From the node namespace, where rayctl dials from.
	httpc := in.PodHTTPClient(10 * time.Second)
	resp, err := httpc.Get("http://" + clusterIP + ":80/api/gcs_healthz")
	must(t, "GET through the ClusterIP from the node namespace", err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "success" {
		t.Errorf("through the ClusterIP from the node: %d %q, want 200 success", resp.StatusCode, body)
	}

	// The API server through default/kubernetes' ClusterIP, from the node: TLS.
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	conn, err := in.DialPod(ctx, "tcp", net.JoinHostPort("10.96.0.1", "443"))
	must(t, "dialing 10.96.0.1:443 from the node namespace", err)
	tc := tls.Client(conn, &tls.Config{InsecureSkipVerify: true, ServerName: "kubernetes.default.svc"})
	if err := tc.HandshakeContext(ctx); err != nil {
		t.Errorf("TLS to the API server through 10.96.0.1: %v", err)
	} else if names := tc.ConnectionState().PeerCertificates[0].IPAddresses; len(names) == 0 {
		t.Errorf("the API server's certificate names no address")
	}
	tc.Close()
}

// TestClusterIPRulesGoAtStop: a clean stop with a pod still running keeps the node namespace (the pod's
// network lives there) but leaves no Service rule in it, nor the route to the service range; the next
// start writes them again.
func TestClusterIPRulesGoAtStop(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a node namespace mounted where the test can see it needs root")
	}
	in, err := framework.Start("", "--ray", "sim")
	if in != nil {
		t.Cleanup(func() { in.Cleanup(t) })
	}
	must(t, "rayctl up", err)
	ctx := framework.TestContext(t, 3*time.Minute)
	ns := newNamespace(t, ctx, in)
	nodeStartPod(t, ctx, in, ns, nodePod("stays", corev1.RestartPolicyAlways, 0, nodeSh("c", "exec sleep 3600")))
	nodeNS := in.NodeNetNS()
	if nodeNS == "" {
		t.Skip("no node namespace here: pods share the host's network")
	}
	inNode := func(name string, args ...string) (string, error) {
		var out []byte
		err := network.Do(nodeNS, func() (err error) {
			out, err = exec.Command(name, args...).CombinedOutput()
			return err
		})
		return string(out), err
	}
	route := func() string { out, _ := inNode("ip", "route", "show", "10.96.0.0/16"); return strings.TrimSpace(out) }
	if route() == "" {
		t.Fatal("no route to the service range in the node namespace while rayctl runs")
	}
	must(t, "stopping rayctl", in.Stop())
	if in.NodeNetNS() == "" {
		t.Fatal("the node namespace went at a stop with a pod running")
	}
	if r := route(); r != "" {
		t.Errorf("the route to the service range is left after a stop: %s", r)
	}
	if _, err := exec.LookPath("nft"); err == nil {
		if out, err := inNode("nft", "list", "table", "ip", "rayctl-services"); err == nil {
			t.Errorf("the table rayctl-services is left after a stop:\n%s", out)
		}
	}
	must(t, "starting again", in.Restart())
	framework.WaitFor(t, ctx, "the route back after a restart", func() (bool, error) { return route() != "", nil })
}
