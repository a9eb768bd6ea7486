// Package framework starts `rayctl up` as a separate process for end-to-end tests (through pkg/instance,
// the harness bench and `rayctl up --detach` share) and hands tests the clients to reach it: client-go,
// a REST config, and the real kubectl built into rayctl.
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
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/rayctl/rayctl/pkg/instance"
	"github.com/rayctl/rayctl/pkg/runtime/containerd"
)

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// Binary returns the rayctl binary under test: $RAYCTL_BIN (as `make test` sets it), else one built once
// per test process with `make build`, as _output/e2e/rayctl of this checkout. Test processes of several
// packages may build at once: each writes its own file and renames it into place (one rename replaces
// another whole, and a process already running a replaced file keeps it), so a build never leaves a
// copy behind, as one in a temporary directory of its own per process did.
func Binary() (string, error) {
	buildOnce.Do(func() {
		if b := os.Getenv("RAYCTL_BIN"); b != "" {
			binary, buildErr = filepath.Abs(b)
			return
		}
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..", "..")
		dir := filepath.Join(root, "_output", "e2e")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			buildErr = err
			return
		}
		built := filepath.Join(dir, fmt.Sprintf("rayctl.%d", os.Getpid()))
		// The Makefile's build stamps the Kubernetes version in, as users' binaries have it.
		cmd := exec.Command("make", "-s", "build", "RAYCTL="+built)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			_ = os.Remove(built)
			buildErr = fmt.Errorf("building rayctl: %v\n%s", err, out)
			return
		}
		binary = filepath.Join(dir, "rayctl")
		if err := os.Rename(built, binary); err != nil {
			_ = os.Remove(built)
			buildErr = err
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
	Env []string
	// Credential, when set, runs rayctl as that user (see StartAs).
	Credential *syscall.Credential
	proc       *instance.Process
}

// SyncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type SyncBuffer = instance.Buffer

// Start runs `rayctl up --port 0` on dataDir (a new temporary one when empty) and waits until it is ready.
func Start(dataDir string, extraArgs ...string) (*Instance, error) {
	if dataDir == "" {
		d, err := os.MkdirTemp("", "rayctl-e2e-")
		if err != nil {
			return nil, err
		}
		dataDir = d
	}
	in := &Instance{DataDir: dataDir, Kubeconfig: filepath.Join(dataDir, "kubeconfig"), ExtraArgs: withRuntime(instance.OwnNetwork(extraArgs))}
	return in, in.Restart()
}

// StartAs is Start with rayctl run as the user cred names, on a new data dir that user owns. The binary
// must be one that user may run (a copy outside directories closed to it: see UserBinary).
func StartAs(cred *syscall.Credential, extraArgs ...string) (*Instance, error) {
	dataDir, err := os.MkdirTemp("", "rayctl-e2e-user-")
	if err != nil {
		return nil, err
	}
	if err := os.Chown(dataDir, int(cred.Uid), int(cred.Gid)); err != nil {
		return nil, err
	}
	in := &Instance{DataDir: dataDir, Kubeconfig: filepath.Join(dataDir, "kubeconfig"), ExtraArgs: instance.OwnNetwork(extraArgs),
		Credential: cred, Env: []string{"HOME=" + dataDir}}
	return in, in.Restart()
}

// Restart starts the process again on the same data dir (after Stop or Kill) and waits until ready.
func (in *Instance) Restart() error {
	bin, err := Binary()
	if err != nil {
		return err
	}
	os.Remove(filepath.Join(in.DataDir, "rayctl.state"))
	p, err := instance.Start(context.Background(), instance.Options{Binary: bin, DataDir: in.DataDir,
		Args: append([]string{"--port", "0"}, in.ExtraArgs...), Env: in.Env, Credential: in.Credential})
	if err != nil {
		return err
	}
	in.proc, in.Output, in.Cmd = p, p.Output, p.Cmd
	if in.Config, err = p.RESTConfig(200, 400); err != nil {
		return err
	}
	in.Client, err = kubernetes.NewForConfig(in.Config)
	return err
}

// Stop sends SIGTERM and waits for a clean exit.
func (in *Instance) Stop() error {
	if in.proc == nil {
		return nil
	}
	return in.proc.Stop(time.Minute)
}

// Kill ends the process with SIGKILL, as a crash would, and waits for it to be gone.
func (in *Instance) Kill() {
	if in.proc != nil {
		in.proc.Kill()
	}
}

// Exited reports whether the process has ended.
func (in *Instance) Exited() <-chan struct{} {
	if in.proc == nil {
		return nil
	}
	return in.proc.Exited()
}

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

// Rayctl runs `rayctl args...` with the instance's data dir, as the instance's user, and returns
// combined output and the error.
func (in *Instance) Rayctl(ctx context.Context, args ...string) (string, error) {
	bin, err := Binary()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, bin, append(args, "--data-dir", in.DataDir)...)
	if in.Credential != nil {
		cmd.Env = append(os.Environ(), in.Env...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: in.Credential}
	}
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
	if ns := in.NodeNetNS(); ns != "" {
		// A namespace left mounted outlives the data dir, and its bridge's subnet may be handed to a
		// later instance.
		t.Errorf("after the purge, the instance's node network namespace is still mounted (unmounted now): %s", ns)
		if err := unmountDetached(ns); err != nil {
			t.Log(err)
		}
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
	if instance.HasFlag(args, "--runtime") || instance.HasFlag(args, "--ray") || !containerd.Available() || os.Geteuid() != 0 {
		return args
	}
	return append(args, "--runtime=containerd")
}

// NetworkArgs are `rayctl up` arguments that give an instance started by hand (not through Start) a pod
// network of its own, and the runtime Start would name.
func NetworkArgs() []string { return withRuntime(instance.OwnNetwork(nil)) }

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
