// Package framework starts `rayctl up` as a separate process for end-to-end tests and hands tests the
// clients to reach it: client-go, a REST config, and the real kubectl built into rayctl.
package framework

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rayctl/rayctl/pkg/runtime/containerd"
)

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// Binary returns the rayctl binary under test: $RAYCTL_BIN (as `make test` sets it), else one built once
// with `make build` into a temporary directory.
func Binary() (string, error) {
	buildOnce.Do(func() {
		if b := os.Getenv("RAYCTL_BIN"); b != "" {
			binary, buildErr = filepath.Abs(b)
			return
		}
		dir, err := os.MkdirTemp("", "rayctl-e2e-bin-")
		if err != nil {
			buildErr = err
			return
		}
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..", "..")
		binary = filepath.Join(dir, "rayctl")
		// The Makefile's build stamps the Kubernetes version in, as users' binaries have it.
		cmd := exec.Command("make", "-s", "build", "RAYCTL="+binary)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building rayctl: %v\n%s", err, out)
		}
	})
	return binary, buildErr
}

// Instance is one running `rayctl up` process.
type Instance struct {
	// DataDir is the instance's data dir.
	DataDir string
	// Kubeconfig is the admin kubeconfig's path.
	Kubeconfig string
	// Config is the admin REST config.
	Config *rest.Config
	// Client is an admin client-go clientset.
	Client kubernetes.Interface
	// Output holds what `rayctl up` printed.
	Output *SyncBuffer
	// Cmd is the running process.
	Cmd *exec.Cmd
	// ExtraArgs are passed to `rayctl up` on every (re)start.
	ExtraArgs []string
	// Env is added to the test process's environment for the next (re)starts ("KEY=value").
	Env    []string
	exited chan struct{}
}

// SyncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Start runs `rayctl up --port 0` on dataDir (a new temporary one when empty) and waits until it is ready.
func Start(dataDir string, extraArgs ...string) (*Instance, error) {
	if dataDir == "" {
		d, err := os.MkdirTemp("", "rayctl-e2e-")
		if err != nil {
			return nil, err
		}
		dataDir = d
	}
	in := &Instance{DataDir: dataDir, Kubeconfig: filepath.Join(dataDir, "kubeconfig"), ExtraArgs: withRuntime(withOwnNetwork(extraArgs))}
	return in, in.Restart()
}

// Restart starts the process again on the same data dir (after Stop or Kill) and waits until ready.
func (in *Instance) Restart() error {
	bin, err := Binary()
	if err != nil {
		return err
	}
	os.Remove(filepath.Join(in.DataDir, "rayctl.state"))
	in.Output = &SyncBuffer{}
	args := append([]string{"up", "--data-dir", in.DataDir, "--port", "0"}, in.ExtraArgs...)
	in.Cmd = exec.Command(bin, args...)
	in.Cmd.Stdout, in.Cmd.Stderr = in.Output, in.Output
	if len(in.Env) > 0 {
		in.Cmd.Env = append(os.Environ(), in.Env...)
	}
	in.Cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := in.Cmd.Start(); err != nil {
		return err
	}
	in.exited = make(chan struct{})
	go func() { in.Cmd.Wait(); close(in.exited) }()
	deadline := time.After(3 * time.Minute)
	// The line `rayctl up` prints once ready (not any text containing it: "address already in use").
	for !isReady(in.Output.String()) {
		select {
		case <-in.exited:
			return fmt.Errorf("rayctl up exited before ready:\n%s", in.Output.String())
		case <-deadline:
			in.Kill()
			return fmt.Errorf("rayctl up not ready after 3m:\n%s", in.Output.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", in.Kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 200, 400
	in.Config = cfg
	in.Client, err = kubernetes.NewForConfig(cfg)
	return err
}

// Stop sends SIGTERM and waits for a clean exit.
func (in *Instance) Stop() error {
	if in.Cmd == nil || in.Cmd.Process == nil {
		return nil
	}
	_ = in.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-in.exited:
		return nil
	case <-time.After(time.Minute):
		in.Kill()
		return fmt.Errorf("rayctl up did not stop within 1m")
	}
}

// Kill ends the process with SIGKILL, as a crash would, and waits for it to be gone.
func (in *Instance) Kill() {
	if in.Cmd == nil || in.Cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-in.Cmd.Process.Pid, syscall.SIGKILL)
	<-in.exited
}

// Exited reports whether the process has ended.
func (in *Instance) Exited() <-chan struct{} { return in.exited }

// Kubectl runs `rayctl kubectl args...` against the instance and returns stdout, stderr and the error.
func (in *Instance) Kubectl(ctx context.Context, stdin string, args ...string) (string, string, error) {
	return in.KubectlEnv(ctx, nil, stdin, args...)
}

// KubectlEnv is Kubectl with extra environment variables ("KEY=value", e.g. KUBE_EDITOR for `kubectl edit`)
// added to the test process's own.
func (in *Instance) KubectlEnv(ctx context.Context, env []string, stdin string, args ...string) (string, string, error) {
	bin, err := Binary()
	if err != nil {
		return "", "", err
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{"kubectl", "--kubeconfig", in.Kubeconfig}, args...)...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	err = cmd.Run()
	return stdout.String(), stderr.String(), err
}

// Rayctl runs `rayctl args...` with the instance's data dir and returns combined output and the error.
func (in *Instance) Rayctl(ctx context.Context, args ...string) (string, error) {
	bin, err := Binary()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, bin, append(args, "--data-dir", in.DataDir)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Cleanup stops the instance and removes its data dir; for t.Cleanup.
func (in *Instance) Cleanup(t testing.TB) {
	if err := in.Stop(); err != nil {
		t.Log(err)
	}
	if err := in.Purge(); err != nil {
		t.Log(err)
	}
	if left := KillLeftoverShims(in.DataDir); len(left) > 0 {
		t.Errorf("after the purge, containerd shims of the instance still ran (killed now): %s", strings.Join(left, "; "))
	}
	if t.Failed() {
		if b, err := os.ReadFile(filepath.Join(in.DataDir, "rayctl.log")); err == nil && len(b) > 0 {
			tail := b
			if len(tail) > 8000 {
				tail = tail[len(tail)-8000:]
			}
			t.Logf("rayctl.log tail:\n%s", tail)
		}
	}
	os.RemoveAll(in.DataDir)
}

// Purge removes what the instance's pods left on the host once it is stopped: pods' containers outlive
// a stop (the next start re-adopts them), so a test instance runs `rayctl down --purge`. Instances
// without a kubelet have nothing to purge.
func (in *Instance) Purge() error {
	for _, a := range in.ExtraArgs {
		if a == "--kubelet=false" {
			return nil
		}
	}
	if out, err := in.Rayctl(context.Background(), "down", "--purge"); err != nil {
		return fmt.Errorf("rayctl down --purge: %v\n%s", err, out)
	}
	return nil
}

// State reads the instance's rayctl.state.
func (in *Instance) State() (map[string]any, error) {
	b, err := os.ReadFile(filepath.Join(in.DataDir, "rayctl.state"))
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	return m, json.Unmarshal(b, &m)
}

// ControlPlaneOnly are `rayctl up` arguments for tests that run their own controllers or play the
// kubelet themselves: no Ray controllers, no kube-controller-manager controllers, no kubelet or binder.
// A test adds back what it relies on, e.g. append(ControlPlaneOnly(), "--kube-controllers=garbagecollector").
func ControlPlaneOnly() []string {
	return []string{"--controllers=none", "--kube-controllers=none", "--kubelet=false"}
}

// withRuntime names the runtime for an instance whose args name neither a runtime nor a Ray: containerd
// where it runs (root, installed), so that the suite runs on the same runtime whether or not the host has
// Ray (with `make ray`'s venv, --runtime=auto would take the process runtime). A test of auto's choice
// says --runtime=auto.
func withRuntime(args []string) []string {
	if hasFlag(args, "--runtime") || hasFlag(args, "--ray") || !containerd.Available() || os.Geteuid() != 0 {
		return args
	}
	return append(args, "--runtime=containerd")
}

// hasFlag reports whether args name flag, as "--flag value" or "--flag=value".
func hasFlag(args []string, flag string) bool {
	for _, a := range args {
		if a == flag || strings.HasPrefix(a, flag+"=") {
			return true
		}
	}
	return false
}

// withOwnNetwork gives an instance its own pod CIDR and bridge unless args name them, so instances
// running side by side (parallel tests, CI) never share a bridge or hand out the same pod IPs.
func withOwnNetwork(args []string) []string {
	out := append([]string{}, args...)
	cidr, bridge := nextNetwork()
	if !hasFlag(args, "--pod-cidr") {
		out = append(out, "--pod-cidr", cidr)
	}
	if !hasFlag(args, "--bridge") {
		out = append(out, "--bridge", bridge)
	}
	return out
}

// isReady reports whether `rayctl up`'s output has its "ready in N ms" line.
func isReady(out string) bool {
	return strings.HasPrefix(out, "ready in ") || strings.Contains(out, "\nready in ")
}

// networks counts the networks this process has tried; claimed holds the lock files of those it took.
var (
	networks  atomic.Uint32
	claimMu   sync.Mutex
	claimed   []*os.File
	netLocks  = filepath.Join(os.TempDir(), "rayctl-e2e-networks")
	netsInAll = uint32(8 * 256)
)

// nextNetwork returns a pod CIDR (a /24 in 10.200.0.0/13) and a bridge name that no other instance
// started by any test process on this machine has at the same time. Each test process claims a
// network with an flock on a file of its own under the temporary directory, held until it exits (the
// kernel lets go of it even when the process is killed); the search starts at an offset from the
// process id, so processes side by side seldom even try the same one.
func nextNetwork() (cidr, bridge string) {
	start := uint32(os.Getpid()) * 64
	var n uint32
	for range netsInAll {
		n = (start + networks.Add(1)) % netsInAll
		if claimNetwork(n) {
			break
		}
	}
	return fmt.Sprintf("10.%d.%d.0/24", 200+n/256, n%256), fmt.Sprintf("rte%04d", n)
}

// claimNetwork takes network n for this process unless another process holds it.
func claimNetwork(n uint32) bool {
	if err := os.MkdirAll(netLocks, 0o700); err != nil {
		return true // no lock directory: fall back on the offset alone
	}
	f, err := os.OpenFile(filepath.Join(netLocks, fmt.Sprintf("%04d.lock", n)), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	claimMu.Lock()
	claimed = append(claimed, f)
	claimMu.Unlock()
	return true
}

// NetworkArgs are `rayctl up` arguments that give an instance started by hand (not through Start) a pod
// network of its own, and the runtime Start would name.
func NetworkArgs() []string { return withRuntime(withOwnNetwork(nil)) }

// KillLeftoverShims kills every containerd shim serving a containerd under dataDir (a purged instance
// must have none: each is a container's task nobody deleted) and describes each one it found.
func KillLeftoverShims(dataDir string) []string {
	prefix := filepath.Join(dataDir, "containerd") + string(filepath.Separator)
	var found []string
	for _, sh := range containerd.Shims() {
		if !strings.HasPrefix(sh.Address, prefix) {
			continue
		}
		children := "no process"
		if len(sh.Children) > 0 {
			children = fmt.Sprintf("processes %v", sh.Children)
		}
		found = append(found, fmt.Sprintf("pid %d for container %s (%s in it)", sh.PID, sh.ID, children))
		_ = syscall.Kill(sh.PID, syscall.SIGKILL)
	}
	return found
}
