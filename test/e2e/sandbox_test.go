package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

// laptopUID is the ordinary user the rootless tests run rayctl as, as a developer runs it on a laptop:
// no account of this machine has that uid, and it is neither root nor nobody (the other local user the
// door probes run as).
const laptopUID = 4242

// laptopUser is laptopUID's credential, with no supplementary groups.
var laptopUser = &syscall.Credential{Uid: laptopUID, Gid: laptopUID, NoSetGroups: false}

// asUser runs name args as cred with env (and a PATH) and returns its combined output.
func asUser(ctx context.Context, cred *syscall.Credential, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}, env...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// mustReach fails the test unless cred may run each of paths (every directory above them searchable):
// the rootless tests run the repository's rayctl and Ray venv as that user.
func mustReach(t *testing.T, ctx context.Context, cred *syscall.Credential, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if out, err := asUser(ctx, cred, nil, "/bin/sh", "-c", `test -x "$1"`, "sh", p); err != nil {
			t.Fatalf("uid %d cannot run %s (%v %s): every directory above it must be searchable by other users (chmod o+x); .ci/run sees to it for CI's clone", cred.Uid, p, err, out)
		}
	}
}

// startLaptop starts `rayctl up` as laptopUser beside the repository's Ray venv, with extraArgs, and says
// which sandbox it runs.
func startLaptop(t *testing.T, ctx context.Context, extraArgs ...string) *framework.Instance {
	t.Helper()
	bin, err := framework.Binary()
	must(t, "the rayctl binary", err)
	ray := hostRay(t)
	mustReach(t, ctx, laptopUser, bin, ray, filepath.Join(filepath.Dir(ray), "python3"))
	in, err := framework.StartAs(laptopUser, extraArgs...)
	if in != nil {
		t.Cleanup(func() { in.Cleanup(t) })
	}
	must(t, "rayctl up as uid "+strconv.Itoa(laptopUID), err)
	return in
}

// TestLaptop runs rayctl as an ordinary user, as a developer does on a laptop: rayctl makes a user
// namespace of its own, its node network namespace in it and a network namespace per pod, so KubeRay's
// shape of RayJob (a head and a worker, both declaring Ray's ports) completes on real Ray, two more
// RayClusters with workers run beside it, cluster DNS answers pods, `kubectl port-forward` then `ray job
// submit` from the host works, nothing of Ray listens on the host, and a pod cannot write the host's
// files.
func TestLaptop(t *testing.T) {
	in := startLaptop(t, framework.TestContext(t, 2*time.Minute))
	out := in.Output.String()
	if !strings.Contains(out, "inside rayctl's user namespace (rootless)") {
		t.Fatalf("rayctl up as uid %d does not say it runs rootless:\n%s", laptopUID, out)
	}
	if st, err := in.State(); err != nil || !strings.Contains(fmt.Sprint(st["sandbox"]), "rootless") {
		t.Errorf("rayctl.state's sandbox = %v (%v), want the rootless one", st["sandbox"], err)
	}
	// rayctl's files are the user's, and no process of it is root.
	fi, err := os.Stat(in.Kubeconfig)
	must(t, "the kubeconfig", err)
	if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != laptopUID {
		t.Errorf("the kubeconfig belongs to uid %d, want %d", uid, laptopUID)
	}
	// realRaySetup makes the test parallel once it holds a slot for real Ray: the test's deadline starts
	// after it, not while it waits for the sequential tests and the slot.
	e := realRaySetup(t, in)
	ctx := framework.TestContext(t, 15*time.Minute)

	// KubeRay's ray-job.sample.yaml shape, on real Ray, head and worker each with a namespace of its own.
	_, err = e.ray.RayV1().RayJobs(e.ns).Create(e.ctx, realJob(t, "laptop", rayv1.K8sJobMode), metav1.CreateOptions{})
	must(t, "creating the RayJob", err)
	job := e.waitRealJob(t, "laptop")
	if s := job.Status; s.JobDeploymentStatus != rayv1.JobDeploymentStatusComplete || s.JobStatus != rayv1.JobStatusSucceeded {
		t.Fatalf("RayJob ended %q/%q (reason %q, message %q); want Complete, SUCCEEDED", s.JobDeploymentStatus, s.JobStatus, s.Reason, s.Message)
	}
	cluster := job.Status.RayClusterName
	head := e.liveHead(t, cluster)
	for _, pid := range descendants(in.Cmd.Process.Pid) {
		if uid, ok := procUID(pid); ok && uid == 0 {
			t.Errorf("pid %d (%s), below rayctl, runs as root", pid, comm(pid))
		}
	}

	// From the host, as the user: port-forward to the head's Service, then Ray's own CLI.
	t.Run("PortForwardAndRayJobSubmit", func(t *testing.T) { portForwardAndSubmit(t, ctx, in, e, cluster, head.Name) })

	// Two more clusters with workers beside the first: every pod has its own ports.
	t.Run("ClustersSideBySide", func(t *testing.T) {
		for _, name := range []string{"left", "right"} {
			e.createCluster(t, sampleCluster(t, name))
		}
		ips := map[string]string{head.Status.PodIP: head.Name}
		for _, name := range []string{"left", "right"} {
			_, h, workers := e.waitClusterReady(t, name, 1)
			for _, p := range append([]corev1.Pod{*h}, workers...) {
				if other, dup := ips[p.Status.PodIP]; dup || net.ParseIP(p.Status.PodIP) == nil {
					t.Errorf("pod %s has IP %q, as %s", p.Name, p.Status.PodIP, other)
				}
				ips[p.Status.PodIP] = p.Name
			}
		}
	})

	// Cluster DNS answers from a pod: the real cluster's head Service is its head pod.
	t.Run("ClusterDNS", func(t *testing.T) {
		name := cluster + "-head-svc." + e.ns + ".svc.cluster.local"
		out := e.headExec(t, head, "python", "-c", "import socket; print(socket.gethostbyname('"+name+"'))")
		if strings.TrimSpace(out) != head.Status.PodIP {
			t.Errorf("%s resolves to %q in a pod, want the head's %s", name, strings.TrimSpace(out), head.Status.PodIP)
		}
	})

	t.Run("PodCannotWriteTheHost", func(t *testing.T) { podCannotWriteTheHost(t, ctx, in, e.ns) })

	// Pods reach the world through slirp4netns, run as the user, but none of the host's own services.
	t.Run("Egress", func(t *testing.T) {
		if line := startupLine(in, "egress"); !strings.Contains(line, " ms  on: ") {
			t.Fatalf("rayctl up as uid %d: egress %q, want on (slirp4netns needs /dev/net/tun mode 0666, as Debian ships it)", laptopUID, line)
		}
		podReachesNotTheHost(t, e, head)
	})

	t.Run("NoDoorForOtherUsers", func(t *testing.T) {
		addrs, _ := probeListeners(t, ctx, in)
		for _, a := range addrs {
			if _, port, _ := net.SplitHostPort(a); port == "8265" || port == "6379" || port == "52365" || port == "8080" {
				t.Errorf("Ray's port %s listens in the host's network namespace", a)
			}
		}
		// Without the kubeconfig (the data dir is the user's alone) another user has no credential to
		// reach the cluster, and the pod network has no address on the host to reach a pod by.
		if out, err := asUser(ctx, &syscall.Credential{Uid: unprivileged, Gid: unprivileged}, nil, "/bin/cat", in.Kubeconfig); err == nil {
			t.Errorf("another local user read the kubeconfig:\n%s", out)
		}
		local, err := localAddrs()
		must(t, "this host's addresses", err)
		if gw := gatewayOf(head.Status.PodIP, local); gw != "" {
			t.Errorf("the host has the address %s beside the pod's %s", gw, head.Status.PodIP)
		}
	})
}

// portForwardAndSubmit runs, on the host as the user who started the instance, `kubectl port-forward
// svc/<cluster>-head-svc PORT:8265`, then Ray's own `ray job submit` through it (with the cluster's
// token, read from its Secret, when its Ray requires one), and checks the job ran on a host named
// hostname.
func portForwardAndSubmit(t *testing.T, ctx context.Context, in *framework.Instance, e *rayEnv, cluster, hostname string) {
	env := userEnv(in)
	if token := clusterToken(t, ctx, e, cluster); token != "" {
		env = append(env, "RAY_AUTH_MODE=token", "RAY_AUTH_TOKEN="+token)
	}
	port, pfOut := portForwardDashboard(t, ctx, in, e.ns, cluster)
	out, err := asUser(ctx, in.Credential, env, hostRay(t), "job", "submit", "--address", fmt.Sprintf("http://127.0.0.1:%d", port), "--",
		"python", "-c", "import ray, socket; ray.init(); print('submitted from the host ran in', socket.gethostname())")
	if err != nil || !strings.Contains(out, "submitted from the host ran in "+hostname) {
		t.Fatalf("ray job submit through kubectl port-forward: %v\n%s\nport-forward said:\n%s", err, out, pfOut.String())
	}
}

// userEnv is the environment of the user who started in, for commands run on the host as that user.
func userEnv(in *framework.Instance) []string {
	return []string{"KUBECONFIG=" + in.Kubeconfig, "HOME=" + in.DataDir, "USER=laptop"}
}

// portForwardDashboard runs, on the host as the user who started in, `kubectl port-forward
// svc/<cluster>-head-svc PORT:8265` until the test ends, and returns the local port once it forwards,
// with what port-forward says.
func portForwardDashboard(t *testing.T, ctx context.Context, in *framework.Instance, ns, cluster string) (int, *framework.SyncBuffer) {
	t.Helper()
	port := freePort(t)
	bin, _ := framework.Binary()
	pf := exec.CommandContext(ctx, bin, "kubectl", "-n", ns, "port-forward", "svc/"+cluster+"-head-svc", fmt.Sprintf("%d:8265", port))
	pf.Env = append([]string{"PATH=/usr/bin:/bin"}, userEnv(in)...)
	pf.SysProcAttr = &syscall.SysProcAttr{Credential: in.Credential}
	pfOut := &framework.SyncBuffer{}
	pf.Stdout, pf.Stderr = pfOut, pfOut
	must(t, "kubectl port-forward", pf.Start())
	t.Cleanup(func() { _ = pf.Process.Kill(); _ = pf.Wait() })
	framework.WaitFor(t, ctx, "the port-forward to listen", func() (bool, error) {
		return strings.Contains(pfOut.String(), "Forwarding from"), nil
	})
	return port, pfOut
}

// clusterToken is the token of a cluster whose Ray requires one (its Secret, as `kubectl get secret`
// shows it to the user), else "".
func clusterToken(t *testing.T, ctx context.Context, e *rayEnv, cluster string) string {
	t.Helper()
	s, err := e.in.Client.CoreV1().Secrets(e.ns).Get(ctx, cluster, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	must(t, "reading the cluster's Secret", err)
	return string(s.Data["auth_token"])
}

// TestRootPodsAreNotRoot: as root, the process runtime's containers run as the instance's unprivileged
// pod user and see the host read-only outside their volumes, in a network namespace each and on the
// host's network alike: a job submitted to a pod cannot write a host path (the hole that let another
// local user become root).
func TestRootPodsAreNotRoot(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, podNetwork, says string }{
		{"NodeNamespace", "auto", "in rayctl's node namespace (root"},
		{"HostNetwork", "host", "the host's network (--pod-network=host)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := framework.TestContext(t, 5*time.Minute)
			in, err := framework.Start("", "--runtime", "process", "--ray", "sim", "--controllers", "none", "--pod-network", tc.podNetwork)
			if in != nil {
				t.Cleanup(func() { in.Cleanup(t) })
			}
			must(t, "rayctl up --runtime process --pod-network "+tc.podNetwork, err)
			if !strings.Contains(in.Output.String(), tc.says) {
				t.Errorf("rayctl up does not say %q:\n%s", tc.says, in.Output.String())
			}
			podCannotWriteTheHost(t, ctx, in, newNamespace(t, ctx, in))
		})
	}
}

// podCannotWriteTheHost runs a pod that tries to write a host path outside its volumes and reports who
// it is; the write must fail, leave nothing, and the pod must not be root on the host.
func podCannotWriteTheHost(t *testing.T, ctx context.Context, in *framework.Instance, ns string) {
	t.Helper()
	target := filepath.Join("/var/tmp", "rayctl-door-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	t.Cleanup(func() { os.Remove(target) })
	pod := nodePod("writer", corev1.RestartPolicyNever, 0, nodeSh("w",
		`touch `+target+` 2>&1; echo "touch=$?"; echo "uid=$(id -u)"; touch /tmp/mine && echo tmp=ok`))
	// On the process runtime, whose containers see the host's filesystem (read-only); one on containerd
	// has a root of its own, where writing is its own business.
	pod.Spec.RuntimeClassName = ptr.To("process")
	nodeCreatePod(t, ctx, in, ns, pod)
	var logs string
	framework.WaitFor(t, ctx, "the writer pod's output", func() (bool, error) {
		out, _, err := in.Kubectl(ctx, "", "logs", "-n", ns, "writer")
		logs = out
		return err == nil && strings.Contains(out, "tmp="), nil
	})
	if _, err := os.Stat(target); err == nil {
		t.Fatalf("a pod wrote %s on the host:\n%s", target, logs)
	}
	if strings.Contains(logs, "touch=0") {
		t.Errorf("touch %s succeeded in the pod:\n%s", target, logs)
	}
	if !strings.Contains(logs, "tmp=ok") {
		t.Errorf("the pod could not write its own /tmp:\n%s", logs)
	}
	// In the rootless sandbox uid 0 in the pod is the user who started rayctl; as root it is the pod user.
	if in.Credential == nil && strings.Contains(logs, "uid=0\n") {
		t.Errorf("the pod runs as root:\n%s", logs)
	}
	t.Logf("pod's output:\n%s", logs)
}

// procUID is the real uid pid runs as, as the host sees it.
func procUID(pid int) (uint32, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				u, err := strconv.ParseUint(f[0], 10, 32)
				return uint32(u), err == nil
			}
		}
	}
	return 0, false
}

// freePort is a TCP port free on the host's loopback now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	must(t, "a free port", err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
