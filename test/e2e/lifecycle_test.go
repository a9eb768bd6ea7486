package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

// startOwn starts an instance of the test's own and stops it when the test ends.
func startOwn(t *testing.T) *framework.Instance {
	t.Helper()
	in, err := framework.Start("")
	if err != nil {
		t.Fatalf("rayctl up: %v", err)
	}
	t.Cleanup(func() { in.Cleanup(t) })
	return in
}

// TestRestartKeepsObjects stops an instance cleanly and starts it again on the same data dir; every object
// is still there, with the same UID. A second `rayctl up` on the data dir in use is refused.
func TestRestartKeepsObjects(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	in := startOwn(t)
	ns := newNamespace(t, ctx, in)

	uids := map[string]types.UID{}
	for i := range 20 {
		cm, err := in.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%02d", i)},
			Data:       map[string]string{"i": strconv.Itoa(i)},
		}, metav1.CreateOptions{})
		must(t, "create", err)
		uids[cm.Name] = cm.UID
	}
	svc, err := in.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "kept"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	must(t, "create service", err)
	before, err := in.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	must(t, "list", err)

	t.Run("second up refused", func(t *testing.T) {
		bin, err := framework.Binary()
		must(t, "binary", err)
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		out, err := exec.CommandContext(cctx, bin, "up", "--data-dir", in.DataDir, "--port", "0").CombinedOutput()
		if cctx.Err() != nil {
			t.Fatalf("a second rayctl up on a data dir in use was still running after 20s:\n%s", out)
		}
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() == 0 {
			t.Errorf("a second rayctl up: err %v, want a non-zero exit\n%s", err, out)
		}
		pid := strconv.Itoa(in.Cmd.Process.Pid)
		if !strings.Contains(string(out), in.DataDir) || !strings.Contains(string(out), pid) {
			t.Errorf("the refusal should name the data dir %s and the holder's pid %s:\n%s", in.DataDir, pid, out)
		}
		// The first instance is unharmed.
		if _, err := in.Client.CoreV1().ConfigMaps(ns).Get(ctx, "cm-00", metav1.GetOptions{}); err != nil {
			t.Errorf("the running instance after a refused second up: %v", err)
		}
		select {
		case <-in.Exited():
			t.Fatal("the running instance exited")
		default:
		}
	})

	must(t, "stop", in.Stop())
	if code := in.Cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("rayctl up exit code after SIGTERM = %d, want 0\n%s", code, in.Output.String())
	}
	if _, err := os.Stat(in.DataDir + "/rayctl.state"); !os.IsNotExist(err) {
		t.Errorf("rayctl.state left after a clean stop: %v", err)
	}
	must(t, "restart", in.Restart())

	after, err := in.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	must(t, "list after restart", err)
	if len(withoutRootCA(after.Items)) != len(withoutRootCA(before.Items)) {
		t.Errorf("%d configmaps after restart, want %d", len(withoutRootCA(after.Items)), len(withoutRootCA(before.Items)))
	}
	for _, cm := range withoutRootCA(after.Items) {
		if uids[cm.Name] != cm.UID {
			t.Errorf("%s: uid %s after restart, want %s", cm.Name, cm.UID, uids[cm.Name])
		}
	}
	for name := range uids {
		if _, err := in.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("%s after restart: %v", name, err)
		}
	}
	got, err := in.Client.CoreV1().Services(ns).Get(ctx, "kept", metav1.GetOptions{})
	must(t, "get service after restart", err)
	if got.UID != svc.UID || got.Spec.ClusterIP != svc.Spec.ClusterIP {
		t.Errorf("service after restart: uid %s clusterIP %s, want %s %s", got.UID, got.Spec.ClusterIP, svc.UID, svc.Spec.ClusterIP)
	}
	// The ClusterIP is still taken after the restart.
	_, err = in.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "dup"}, Spec: corev1.ServiceSpec{ClusterIP: svc.Spec.ClusterIP, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	expectStatus(t, "requesting the ClusterIP of a service from before the restart", err, 422, "spec.clusterIPs[0]")
	// Writes go on, with resourceVersions after the old ones.
	cm, err := in.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "new"}}, metav1.CreateOptions{})
	must(t, "create after restart", err)
	if rvLess(cm.ResourceVersion, before.ResourceVersion) {
		t.Errorf("resourceVersion %s after restart is older than %s from before", cm.ResourceVersion, before.ResourceVersion)
	}
}

// TestKillKeepsAcknowledgedWrites kills rayctl with SIGKILL while clients write, restarts it, and finds every
// write the server acknowledged.
func TestKillKeepsAcknowledgedWrites(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	in := startOwn(t)
	ns := newNamespace(t, ctx, in)

	var mu sync.Mutex
	acked := map[string]types.UID{}
	client := in.Client
	writeCtx, stopWriting := context.WithCancel(ctx)
	defer stopWriting()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; writeCtx.Err() == nil; i++ {
				cm, err := client.CoreV1().ConfigMaps(ns).Create(writeCtx, &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("w%d-%d", w, i)},
					Data:       map[string]string{"v": strings.Repeat("x", 100)},
				}, metav1.CreateOptions{})
				if err != nil {
					return // the server is gone
				}
				mu.Lock()
				acked[cm.Name] = cm.UID
				mu.Unlock()
			}
		}()
	}
	eventually(t, ctx, time.Minute, "100 acknowledged writes", func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 100, nil
	})
	in.Kill()
	stopWriting()
	wg.Wait()
	mu.Lock()
	n := len(acked)
	mu.Unlock()
	t.Logf("%d writes acknowledged before SIGKILL", n)

	must(t, "restart after SIGKILL", in.Restart())
	list, err := in.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	must(t, "list after restart", err)
	found := map[string]types.UID{}
	for _, cm := range list.Items {
		found[cm.Name] = cm.UID
	}
	missing := 0
	for name, uid := range acked {
		if found[name] != uid {
			missing++
			if missing <= 5 {
				t.Errorf("acknowledged configmap %s (uid %s) after restart: found uid %q", name, uid, found[name])
			}
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d acknowledged writes lost", missing, n)
	}
	// The namespace and writes still work.
	_, err = in.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-crash"}}, metav1.CreateOptions{})
	must(t, "create after the crash", err)
}

// TestDetachStatusDown runs `rayctl up --detach`, checks `rayctl status`, and stops it with `rayctl down`.
func TestDetachStatusDown(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	bin, err := framework.Binary()
	must(t, "binary", err)
	dir := t.TempDir()
	rayctl := func(args ...string) (string, error) {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		b, err := exec.CommandContext(cctx, bin, append(args, "--data-dir", dir)...).CombinedOutput()
		return string(b), err
	}

	out, err := rayctl("status")
	if err == nil || !strings.Contains(out, "not running") {
		t.Errorf("rayctl status before up: err %v\n%s\nwant not running and a non-zero exit", err, out)
	}

	out, err = rayctl(append([]string{"up", "--detach", "--port", "0"}, framework.NetworkArgs()...)...)
	if err != nil {
		t.Fatalf("rayctl up --detach: %v\n%s", err, out)
	}
	m := regexpPID.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("rayctl up --detach does not say which pid runs in the background:\n%s", out)
	}
	pid, _ := strconv.Atoi(m[1])
	t.Cleanup(func() {
		if alive(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if !alive(pid) {
		t.Fatalf("the detached rayctl (pid %d) is not running", pid)
	}

	// Ready when it returns: the kubeconfig works at once.
	cfg, err := clientcmd.BuildConfigFromFlags("", dir+"/kubeconfig")
	must(t, "kubeconfig", err)
	client, err := kubernetes.NewForConfig(cfg)
	must(t, "client", err)
	if _, err := client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Errorf("the API server right after up --detach returned: %v", err)
	}

	out, err = rayctl("status")
	if err != nil || !strings.Contains(out, "running") || strings.Contains(out, "not running") || !strings.Contains(out, strconv.Itoa(pid)) {
		t.Errorf("rayctl status while running: err %v\n%s\nwant running, pid %d", err, out, pid)
	}
	if !strings.Contains(out, cfg.Host) {
		t.Errorf("rayctl status does not show the API server %s:\n%s", cfg.Host, out)
	}

	out, err = rayctl(append([]string{"up", "--detach", "--port", "0"}, framework.NetworkArgs()...)...)
	if err == nil || !strings.Contains(out, "already running") {
		t.Errorf("a second rayctl up --detach: err %v\n%s\nwant already running and a non-zero exit", err, out)
	}

	out, err = rayctl("down")
	if err != nil || !strings.Contains(out, "stopped") {
		t.Errorf("rayctl down: err %v\n%s", err, out)
	}
	if alive(pid) {
		t.Errorf("rayctl (pid %d) still running after rayctl down", pid)
	}
	out, err = rayctl("status")
	if err == nil || !strings.Contains(out, "not running") {
		t.Errorf("rayctl status after down: err %v\n%s\nwant not running and a non-zero exit", err, out)
	}
	out, err = rayctl("down")
	if err != nil || !strings.Contains(out, "not running") {
		t.Errorf("rayctl down when not running: err %v\n%s", err, out)
	}
}

var regexpPID = regexp.MustCompile(`pid (\d+)`)

// alive reports whether pid is a live process (a zombie counts as gone).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// TestVersion checks that `rayctl version` names the Kubernetes version it serves.
func TestVersion(t *testing.T) {
	t.Parallel()
	bin, err := framework.Binary()
	must(t, "binary", err)
	out, err := exec.CommandContext(testContext(t), bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("rayctl version: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "kubernetes v1.37.2") {
		t.Errorf("rayctl version:\n%s\nwant a line kubernetes v1.37.2", out)
	}
}

// TestFakeRuntimePurgeAndDeleteData runs a pod with a memory-backed volume (KubeRay's shared-mem) on the
// fake runtime, then `rayctl down --purge` and `--delete-data`: both succeed, nothing stays mounted
// under the data dir, and the data dir is gone.
func TestFakeRuntimePurgeAndDeleteData(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	in, err := framework.Start("", "--runtime", "fake")
	if err != nil {
		t.Fatalf("rayctl up --runtime fake: %v", err)
	}
	t.Cleanup(func() { in.Stop(); os.RemoveAll(in.DataDir) })
	ns := newNamespace(t, ctx, in)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "shm"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "rayproject/ray:2.60.0", VolumeMounts: []corev1.VolumeMount{{Name: "shared-mem", MountPath: "/dev/shm"}}}},
			Volumes:    []corev1.Volume{{Name: "shared-mem", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}},
		},
	}
	_, err = in.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	must(t, "creating the pod", err)
	framework.WaitFor(t, ctx, "the pod running", func() (bool, error) {
		p, err := in.Client.CoreV1().Pods(ns).Get(ctx, "shm", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, err
	})
	if mounts := mountsUnder(t, in.DataDir); len(mounts) == 0 {
		t.Error("the pod's memory-backed volume is not mounted under the data dir: the test would prove nothing")
	}
	must(t, "stopping rayctl", in.Stop())

	out, err := in.Rayctl(ctx, "down", "--purge")
	if err != nil {
		t.Fatalf("rayctl down --purge on the fake runtime: %v\n%s", err, out)
	}
	if mounts := mountsUnder(t, in.DataDir); len(mounts) > 0 {
		t.Errorf("after rayctl down --purge, still mounted under the data dir: %v", mounts)
	}
	out, err = in.Rayctl(ctx, "down", "--delete-data")
	if err != nil {
		t.Fatalf("rayctl down --delete-data on the fake runtime: %v\n%s", err, out)
	}
	if _, err := os.Stat(in.DataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the data dir is still there after --delete-data: %v\n%s", err, out)
	}
}

// mountsUnder lists the mount points under dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	must(t, "reading mountinfo", err)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	return out
}
