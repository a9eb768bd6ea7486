package e2e

// The port-forward and proxy tests: `kubectl port-forward` (WebSocket and SPDY) and `kubectl proxy`,
// services/proxy and pods/proxy, against raysim heads made by the sample RayCluster, through the API
// server to the kubelet (port-forward) or straight to the pod IP (proxy), with real kubectl processes
// and plain HTTP from the host.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

// bgKubectl is a long-running `rayctl kubectl` (port-forward, proxy) a test started.
type bgKubectl struct {
	cmd         *exec.Cmd
	out, errOut *framework.SyncBuffer
	done        chan struct{}
	err         error
}

// startKubectl starts `rayctl kubectl args...` against in with env added; it is interrupted (and
// waited for) when the test ends.
func startKubectl(t *testing.T, in *framework.Instance, env []string, args ...string) *bgKubectl {
	t.Helper()
	bin, err := framework.Binary()
	must(t, "finding the rayctl binary", err)
	k := &bgKubectl{out: &framework.SyncBuffer{}, errOut: &framework.SyncBuffer{}, done: make(chan struct{})}
	k.cmd = exec.Command(bin, append([]string{"kubectl", "--kubeconfig", in.Kubeconfig}, args...)...)
	k.cmd.Env = append(os.Environ(), env...)
	k.cmd.Stdout, k.cmd.Stderr = k.out, k.errOut
	must(t, "starting kubectl "+strings.Join(args, " "), k.cmd.Start())
	go func() {
		k.err = k.cmd.Wait()
		close(k.done)
	}()
	t.Cleanup(func() {
		_ = k.cmd.Process.Signal(os.Interrupt)
		select {
		case <-k.done:
		case <-time.After(30 * time.Second):
			_ = k.cmd.Process.Kill()
			<-k.done
		}
	})
	return k
}

// exited reports whether the process has ended.
func (k *bgKubectl) exited() bool {
	select {
	case <-k.done:
		return true
	default:
		return false
	}
}

// waitOutput waits until stdout matches re and returns its first group.
func (k *bgKubectl) waitOutput(t *testing.T, ctx context.Context, re *regexp.Regexp) string {
	t.Helper()
	var got string
	framework.WaitFor(t, ctx, "kubectl printing "+re.String(), func() (bool, error) {
		if m := re.FindStringSubmatch(k.out.String()); m != nil {
			got = m[1]
			return true, nil
		}
		if k.exited() {
			t.Fatalf("kubectl ended (%v) before printing %s; stdout:\n%s\nstderr:\n%s", k.err, re, k.out, k.errOut)
		}
		return false, nil
	})
	return got
}

// waitExit waits until the process ends and returns how it ended.
func (k *bgKubectl) waitExit(t *testing.T, ctx context.Context, what string) error {
	t.Helper()
	framework.WaitFor(t, ctx, what, func() (bool, error) { return k.exited(), nil })
	return k.err
}

var forwardingRE = regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> \d+`)

// portForward runs `kubectl port-forward target :remote` in ns (verbose enough to log which dialer it
// took) and returns it, with the local port it picked, once it forwards.
func portForward(t *testing.T, ctx context.Context, in *framework.Instance, ns string, env []string, target string, remote int) (*bgKubectl, int) {
	t.Helper()
	k := startKubectl(t, in, env, "-n", ns, "port-forward", target, ":"+strconv.Itoa(remote), "-v=4")
	port, err := strconv.Atoi(k.waitOutput(t, ctx, forwardingRE))
	must(t, "reading the local port", err)
	t.Cleanup(func() {
		if t.Failed() {
			how := "still running"
			if k.exited() {
				how = fmt.Sprintf("ended: %v", k.err)
			}
			t.Logf("kubectl port-forward %s (%s); stdout:\n%s\nstderr:\n%s", target, how, k.out, k.errOut)
		}
	})
	return k, port
}

// dialerLines are the lines of kubectl's verbose log that say how it connected.
func dialerLines(log string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "WebSocket") || strings.Contains(l, "fallback") || strings.Contains(l, "Upgrade") || strings.Contains(l, "portforward") {
			out = append(out, strings.TrimSpace(l))
		}
	}
	if len(out) == 0 {
		return "(no WebSocket or fallback lines: SPDY)"
	}
	return strings.Join(out, " | ")
}

// hostHTTP is a client for the host's loopback, ignoring any proxy in the environment.
var hostHTTP = &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 30 * time.Second}

// httpGet GETs url and returns the status and body.
func httpGet(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := hostHTTP.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// wantRayVersion GETs /api/version under base and checks it is the dashboard's answer.
func wantRayVersion(t *testing.T, ctx context.Context, base string) {
	t.Helper()
	code, body, err := httpGet(ctx, base+"/api/version")
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET %s/api/version: %d %q: %v", base, code, body, err)
	}
	wantVersionJSON(t, base, body)
}

// wantVersionJSON checks body is the dashboard's /api/version answer.
func wantVersionJSON(t *testing.T, what, body string) {
	t.Helper()
	var v struct {
		RayVersion string `json:"ray_version"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil || v.RayVersion == "" {
		t.Fatalf("%s/api/version: %q is not the dashboard's version (%v)", what, body, err)
	}
}

// raySubmit runs `rayctl ray job submit --address address -- echo hi` (raysim's ray CLI, from the host)
// and checks the job ran and said hi.
func raySubmit(t *testing.T, ctx context.Context, address string) {
	t.Helper()
	bin, err := framework.Binary()
	must(t, "finding the rayctl binary", err)
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(cctx, bin, "ray", "job", "submit", "--address", address, "--", "echo", "hi").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "\nhi\n") || !strings.Contains(string(out), "succeeded") {
		t.Fatalf("ray job submit --address %s: %v\n%s", address, err, out)
	}
}

// kubeletConns counts the host's established TCP connections from or to port (each connection on
// loopback counts twice, once per end).
func kubeletConns(port int32) (int, error) {
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	n := 0
	for _, f := range hostTCPFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return 0, err
		}
		hex := fmt.Sprintf(":%04X", port)
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 4 || fields[3] != "01" { // 01: ESTABLISHED
				continue
			}
			if strings.HasSuffix(fields[1], hex) || strings.HasSuffix(fields[2], hex) {
				n++
			}
		}
	}
	return n, nil
}

// kubeletPort is the port of the kubelet API of the instance's only node.
func kubeletPort(t *testing.T, ctx context.Context, in *framework.Instance) int32 {
	t.Helper()
	nodes, err := in.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	must(t, "listing nodes", err)
	if len(nodes.Items) != 1 || nodes.Items[0].Status.DaemonEndpoints.KubeletEndpoint.Port == 0 {
		t.Fatalf("want one node with a kubelet port, got %d nodes", len(nodes.Items))
	}
	return nodes.Items[0].Status.DaemonEndpoints.KubeletEndpoint.Port
}

// loopbackWeb serves "loopback only" on 127.0.0.1:8080 inside its pod: reachable only from within the
// pod's network namespace.
const loopbackWeb = "mkdir -p /tmp/www && echo 'loopback only' > /tmp/www/index.html && exec httpd -f -p 127.0.0.1:8080 -h /tmp/www"

// TestPortForward forwards local ports to a raysim head (pod/NAME and svc/NAME) over WebSocket and
// SPDY, several at once, to a port a pod binds on its loopback only, to a port nothing listens on, and
// to a pod that then goes away. It has an instance of its own, so that the kubelet's connections it
// counts are its own.
func TestPortForward(t *testing.T) {
	t.Parallel()
	in := framework.StartTest(t)
	e := newRayEnv(t, in)
	c := sampleCluster(t, "pf")
	c.Spec.WorkerGroupSpecs = nil
	e.createCluster(t, c)
	web := shContainer("web", loopbackWeb)
	// Ready once httpd listens, so that no forward meets a port not yet bound.
	web.ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"wget", "-T", "2", "-q", "-O-", "http://127.0.0.1:8080/"}}},
		PeriodSeconds: 1,
	}
	runPod(t, e.ctx, in, e.ns, "loopback", corev1.RestartPolicyAlways, web)
	_, head, _ := e.waitClusterReady(t, "pf", 0)
	waitPod(t, e.ctx, in, e.ns, "loopback", "is ready", runningReady)
	ctx := e.ctx

	t.Run("WebSocket", func(t *testing.T) {
		k, port := portForward(t, ctx, in, e.ns, nil, "pod/"+head.Name, 8265)
		base := fmt.Sprintf("http://127.0.0.1:%d", port)
		wantRayVersion(t, ctx, base)
		raySubmit(t, ctx, base)
		// kubectl tunnels SPDY over WebSocket first and falls back to SPDY only when that fails.
		log := k.errOut.String()
		if !strings.Contains(log, "WebSocket Upgrade") || strings.Contains(log, "fallback to secondary dialer") {
			t.Fatalf("kubectl did not forward over WebSocket; its log:\n%s", log)
		}
		t.Logf("kubectl's dialer: %s", dialerLines(log))
	})

	t.Run("SPDY", func(t *testing.T) {
		k, port := portForward(t, ctx, in, e.ns, []string{"KUBECTL_PORT_FORWARD_WEBSOCKETS=false"}, "pod/"+head.Name, 8265)
		base := fmt.Sprintf("http://127.0.0.1:%d", port)
		wantRayVersion(t, ctx, base)
		raySubmit(t, ctx, base)
		log := k.errOut.String()
		if strings.Contains(log, "WebSocket") {
			t.Fatalf("kubectl used WebSocket though told not to; its log:\n%s", log)
		}
		t.Logf("kubectl's dialer: %s", dialerLines(log))
	})

	t.Run("Service", func(t *testing.T) {
		_, port := portForward(t, ctx, in, e.ns, nil, "svc/pf-head-svc", 8265)
		base := fmt.Sprintf("http://127.0.0.1:%d", port)
		wantRayVersion(t, ctx, base)
		raySubmit(t, ctx, base)
	})

	t.Run("Concurrent", func(t *testing.T) {
		// Two kubectl processes, one of them forwarding two ports, each carrying requests at once.
		_, ws := portForward(t, ctx, in, e.ns, nil, "svc/pf-head-svc", 8265)
		k := startKubectl(t, in, []string{"KUBECTL_PORT_FORWARD_WEBSOCKETS=false"}, "-n", e.ns, "port-forward", "pod/"+head.Name, ":8265", ":52365")
		k.waitOutput(t, ctx, regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> 52365`))
		urls := []string{fmt.Sprintf("http://127.0.0.1:%d/api/version", ws)}
		for _, m := range regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> (\d+)`).FindAllStringSubmatch(k.out.String(), -1) {
			switch m[2] {
			case "8265":
				urls = append(urls, "http://127.0.0.1:"+m[1]+"/api/version")
			case "52365":
				urls = append(urls, "http://127.0.0.1:"+m[1]+"/api/healthz") // the agent's
			}
		}
		if len(urls) != 3 {
			t.Fatalf("want forwards of 8265 and 52365; kubectl printed:\n%s", k.out)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 4*len(urls))
		for range 4 {
			for _, u := range urls {
				wg.Add(1)
				go func() {
					defer wg.Done()
					code, body, err := httpGet(ctx, u)
					if err == nil && code != http.StatusOK {
						err = fmt.Errorf("%d %q", code, body)
					}
					if err != nil {
						errs <- fmt.Errorf("GET %s: %w", u, err)
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})

	t.Run("PodLoopback", func(t *testing.T) {
		// httpd listens on the pod's 127.0.0.1 only: the kubelet dials inside the pod's network namespace.
		_, port := portForward(t, ctx, in, e.ns, nil, "pod/loopback", 8080)
		code, body, err := httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/", port))
		if err != nil || code != http.StatusOK || body != "loopback only\n" {
			t.Fatalf("GET through the forward to the pod's loopback: %d %q: %v", code, body, err)
		}
		// With a network namespace of its own (containerd, or the process runtime as root), the pod's IP
		// does not answer on that port, even from the node: only a dial from inside the pod reaches it.
		pod, err := in.Client.CoreV1().Pods(e.ns).Get(ctx, "loopback", metav1.GetOptions{})
		must(t, "reading the pod", err)
		if ip := net.ParseIP(pod.Status.PodIP); ip != nil && !ip.IsLoopback() {
			if resp, err := in.PodHTTPClient(10 * time.Second).Get("http://" + net.JoinHostPort(pod.Status.PodIP, "8080") + "/"); err == nil {
				resp.Body.Close()
				t.Fatalf("the pod's IP %s answered %d on a port bound to the pod's loopback", pod.Status.PodIP, resp.StatusCode)
			}
		} else {
			t.Logf("the pod shares the host's network (IP %q): the forward dialed the host's loopback", pod.Status.PodIP)
		}
	})

	t.Run("HostNetwork", func(t *testing.T) {
		// A pod on the host's network has no namespace to enter: the kubelet dials the host's loopback.
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		must(t, "finding a free port", err)
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		script := fmt.Sprintf("mkdir -p /tmp/hw && echo 'host network' > /tmp/hw/index.html && exec httpd -f -p 127.0.0.1:%d -h /tmp/hw", port)
		termination := int64(1)
		_, err = in.Client.CoreV1().Pods(e.ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "hostweb"},
			Spec: corev1.PodSpec{
				HostNetwork:                   true,
				TerminationGracePeriodSeconds: &termination,
				Containers: []corev1.Container{{
					Name: "web", Image: simImage, ImagePullPolicy: corev1.PullNever, Command: []string{"sh", "-c", script},
				}},
			},
		}, metav1.CreateOptions{})
		must(t, "creating a host-network pod", err)
		waitPod(t, ctx, in, e.ns, "hostweb", "runs", allRunning)
		// Wait for httpd on the host itself: a forwarded connection refused would end kubectl.
		framework.WaitFor(t, ctx, "the host-network pod's httpd listening", func() (bool, error) {
			code, _, err := httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/", port))
			return err == nil && code == http.StatusOK, err
		})
		_, local := portForward(t, ctx, in, e.ns, nil, "pod/hostweb", port)
		code, body, err := httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/", local))
		if err != nil || code != http.StatusOK || body != "host network\n" {
			t.Fatalf("GET through the forward to a host-network pod: %d %q: %v", code, body, err)
		}
	})

	kport := kubeletPort(t, ctx, in)

	t.Run("PortNotListening", func(t *testing.T) {
		before, err := kubeletConns(kport)
		must(t, "counting kubelet connections", err)
		k, port := portForward(t, ctx, in, e.ns, nil, "pod/loopback", 9999)
		// The first connection is refused in the pod; kubectl reports it and ends, as on a cluster.
		code, body, err := httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/", port))
		if err == nil {
			t.Fatalf("GET through a forward to a closed port answered %d %q", code, body)
		}
		if err := k.waitExit(t, ctx, "kubectl port-forward to a closed port ending"); err == nil {
			t.Fatalf("kubectl port-forward to a closed port exited 0; stderr:\n%s", k.errOut)
		}
		if log := k.errOut.String(); !strings.Contains(log, "error forwarding port 9999") || !strings.Contains(log, "connection refused") || !strings.Contains(log, "lost connection to pod") {
			t.Fatalf("kubectl's error does not say the port is closed; stderr:\n%s", log)
		}
		framework.WaitFor(t, ctx, "the kubelet's connections back to what they were", func() (bool, error) {
			n, err := kubeletConns(kport)
			return n <= before, err
		})
	})

	t.Run("PodDeleted", func(t *testing.T) {
		before, err := kubeletConns(kport)
		must(t, "counting kubelet connections", err)
		k, port := portForward(t, ctx, in, e.ns, nil, "pod/loopback", 8080)
		if code, body, err := httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/", port)); err != nil || code != http.StatusOK {
			t.Fatalf("GET through the forward: %d %q: %v", code, body, err)
		}
		grace := int64(1)
		must(t, "deleting the pod", in.Client.CoreV1().Pods(e.ns).Delete(ctx, "loopback", metav1.DeleteOptions{GracePeriodSeconds: &grace}))
		// The kubelet ends the pod's forwards once the pod is gone from the node, and kubectl ends with them.
		if err := k.waitExit(t, ctx, "kubectl port-forward ending with its pod"); err == nil {
			t.Fatalf("kubectl port-forward exited 0 when its pod went; stderr:\n%s", k.errOut)
		}
		if log := k.errOut.String(); !strings.Contains(log, "lost connection to pod") {
			t.Fatalf("kubectl port-forward ended without saying it lost the pod; stderr:\n%s", log)
		}
		if code, _, err := httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/", port)); err == nil {
			t.Fatalf("the local port still answers (%d) after kubectl ended", code)
		}
		framework.WaitFor(t, ctx, "the kubelet's connections back to what they were", func() (bool, error) {
			n, err := kubeletConns(kport)
			return n <= before, err
		})
	})
}

var proxyServingRE = regexp.MustCompile(`Starting to serve on 127\.0\.0\.1:(\d+)`)

// rawStatus GETs path from the API server as the admin and returns the status code and the message of
// the Status it answered (the whole body when it is no Status).
func rawStatus(ctx context.Context, in *framework.Instance, path string) (int, string) {
	var code int
	body, _ := in.Client.CoreV1().RESTClient().Get().AbsPath(path).Do(ctx).StatusCode(&code).Raw()
	var st metav1.Status
	if json.Unmarshal(body, &st) == nil && st.Kind == "Status" {
		return code, st.Message
	}
	return code, string(body)
}

// TestProxy reaches a raysim head's dashboard through services/proxy and pods/proxy (port by number and
// by name, with and without a scheme), through `kubectl proxy`, and checks the answers to bad requests.
func TestProxy(t *testing.T) {
	e := raySetup(t, shared(t))
	in, ctx, ns := e.in, e.ctx, e.ns
	c := sampleCluster(t, "px")
	c.Spec.WorkerGroupSpecs = nil
	// No CPU asked for: the shared node's CPU is held by other tests' pods, and this test is about the
	// proxy, not scheduling.
	c.Spec.HeadGroupSpec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	e.createCluster(t, c)
	_, head, _ := e.waitClusterReady(t, "px", 0)
	base := "/api/v1/namespaces/" + ns

	t.Run("Service", func(t *testing.T) {
		for _, id := range []string{"px-head-svc:8265", "px-head-svc:dashboard", "http:px-head-svc:dashboard", "http:px-head-svc:8265"} {
			path := base + "/services/" + id + "/proxy/api/version"
			wantVersionJSON(t, path, kubectl(t, ctx, in, "", "", "get", "--raw", path))
		}
	})

	t.Run("Pod", func(t *testing.T) {
		for _, id := range []string{head.Name + ":8265", "http:" + head.Name + ":8265", head.Name + ":dashboard"} {
			path := base + "/pods/" + id + "/proxy/api/version"
			wantVersionJSON(t, path, kubectl(t, ctx, in, "", "", "get", "--raw", path))
		}
	})

	t.Run("KubectlProxy", func(t *testing.T) {
		k := startKubectl(t, in, nil, "proxy", "--port=0")
		port := k.waitOutput(t, ctx, proxyServingRE)
		svc := "http://127.0.0.1:" + port + base + "/services/px-head-svc:dashboard/proxy"
		wantRayVersion(t, ctx, svc)
		wantRayVersion(t, ctx, "http://127.0.0.1:"+port+base+"/pods/"+head.Name+":8265/proxy")
		// The Jobs API through the proxy path, as KubeRay's --use-kubernetes-proxy uses it.
		raySubmit(t, ctx, svc)
	})

	t.Run("BadInput", func(t *testing.T) {
		_, err := in.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "nobody"},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{"app": "nobody"},
				Ports:    []corev1.ServicePort{{Name: "http", Port: 80}},
			},
		}, metav1.CreateOptions{})
		must(t, "creating a service without endpoints", err)
		for _, tc := range []struct {
			path string
			code int
			msg  string
		}{
			{base + "/services/missing:80/proxy/", http.StatusNotFound, `services "missing" not found`},
			{base + "/services/nobody:80/proxy/", http.StatusServiceUnavailable, `no endpoints available for service "nobody"`},
			{base + "/services/px-head-svc:9999/proxy/", http.StatusServiceUnavailable, `no service port "9999" found for service "px-head-svc"`},
			{base + "/services/px-head-svc:nope/proxy/", http.StatusServiceUnavailable, `no service port "nope" found`},
			{base + "/services/ftp:px-head-svc:8265/proxy/", http.StatusBadRequest, "invalid service request"},
			{base + "/services/a:b:c:d/proxy/", http.StatusBadRequest, "invalid service request"},
			{base + "/pods/missing:80/proxy/", http.StatusNotFound, `pods "missing" not found`},
			{base + "/pods/" + head.Name + ":nope/proxy/", http.StatusBadRequest, `no container port named "nope"`},
			{base + "/pods/" + head.Name + ":70000/proxy/", http.StatusBadRequest, "not a valid port number"},
			{base + "/pods/" + head.Name + ":9999/proxy/", http.StatusServiceUnavailable, "error trying to reach service"},
		} {
			code, body := rawStatus(ctx, in, tc.path)
			if code != tc.code || !strings.Contains(body, tc.msg) {
				t.Errorf("GET %s: %d %q, want %d with %q", tc.path, code, body, tc.code, tc.msg)
			}
		}
		// Proxying and forwarding are rights of their own: an identity without them is refused.
		sa := "system:serviceaccount:" + ns + ":default"
		cfg := rest.CopyConfig(in.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: sa}
		rc, err := kubernetes.NewForConfig(cfg)
		must(t, "an impersonating client", err)
		for _, path := range []string{base + "/services/px-head-svc:8265/proxy/api/version", base + "/pods/" + head.Name + ":8265/proxy/api/version"} {
			var code int
			_ = rc.CoreV1().RESTClient().Get().AbsPath(path).Do(ctx).StatusCode(&code)
			if code != http.StatusForbidden {
				t.Errorf("GET %s as %s: %d, want 403", path, sa, code)
			}
		}
		pf := base + "/pods/" + head.Name + "/portforward"
		var code int
		_ = rc.CoreV1().RESTClient().Post().AbsPath(pf).Do(ctx).StatusCode(&code)
		if code != http.StatusForbidden {
			t.Errorf("POST %s as %s: %d, want 403", pf, sa, code)
		}
		// The admin may, but a request that does not ask for a stream upgrade is the client's mistake.
		code = 0
		_ = in.Client.CoreV1().RESTClient().Post().AbsPath(pf).Do(ctx).StatusCode(&code)
		if code != http.StatusBadRequest {
			t.Errorf("POST %s without an upgrade: %d, want 400", pf, code)
		}
		if _, errOut, err := in.Kubectl(ctx, "", "-n", ns, "--as", sa, "port-forward", "pod/"+head.Name, ":8265"); err == nil || !strings.Contains(errOut, "forbidden") {
			t.Errorf("kubectl port-forward as %s: %v\n%s", sa, err, errOut)
		}
		// A port-forward to a pod that does not exist fails at once, with kubectl's usual message.
		_, errOut, err := in.Kubectl(ctx, "", "-n", ns, "port-forward", "pod/missing", ":8265")
		if err == nil || !strings.Contains(errOut, `pods "missing" not found`) {
			t.Errorf("kubectl port-forward pod/missing: %v\n%s", err, errOut)
		}
	})
}
