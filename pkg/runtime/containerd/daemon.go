// Package containerd holds rayctl's containerd plumbing. This file starts a
// private containerd daemon (its own root, state, sockets and FIFO dir under
// one directory, CRI plugin disabled) and imports local OCI image tarballs
// into it, under the rayctl namespace.
package containerd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	ctrd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
)

// Namespace is the containerd namespace rayctl keeps its images and containers in.
const Namespace = "rayctl"

// DefaultSnapshotter is the snapshotter images are unpacked for.
const DefaultSnapshotter = "overlayfs"

// maxSocketPath keeps unix socket paths under the kernel's 108-byte limit
// (with room for containerd's ".ttrpc" suffix).
const maxSocketPath = 100

// Daemon is a containerd process started by StartPrivate.
type Daemon struct {
	// Dir is the directory given to StartPrivate.
	Dir string
	// Address is the gRPC socket.
	Address string
	// FIFODir is where task I/O FIFOs should be created (cio.WithFIFODir):
	// containerd 1.6 would otherwise use /run/containerd/fifo.
	FIFODir string
	// LogPath receives containerd's output.
	LogPath string

	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
	sockDir string // a short directory for the sockets when Dir is too long
}

// Binary is the containerd executable StartPrivate runs; a bare name is
// looked up in PATH.
var Binary = "containerd"

// Available reports whether the containerd binary can be found.
func Available() bool {
	_, err := exec.LookPath(Binary)
	return err == nil
}

// StartPrivate writes a configuration under dir (root, state, sockets,
// FIFOs, the opt plugin's path, CRI disabled), starts containerd with it and
// waits until its socket answers. Stop ends it. It needs root, like any
// containerd that runs containers.
func StartPrivate(ctx context.Context, dir string) (*Daemon, error) {
	bin, err := exec.LookPath(Binary)
	if err != nil {
		return nil, fmt.Errorf("containerd is not installed (%w); on Debian: apt-get install -y containerd runc", err)
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	d := &Daemon{Dir: dir, FIFODir: filepath.Join(dir, "fifo"), LogPath: filepath.Join(dir, "containerd.log"), done: make(chan struct{})}
	for _, sub := range []string{"root", "state", "fifo", "opt"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o711); err != nil {
			return nil, err
		}
	}
	sockDir := dir
	if len(filepath.Join(dir, "containerd.sock")) > maxSocketPath {
		if sockDir, err = os.MkdirTemp("", "rayctl-ctrd-"); err != nil {
			return nil, err
		}
		d.sockDir = sockDir
	}
	d.Address = filepath.Join(sockDir, "containerd.sock")

	cfg := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri"]

[grpc]
  address = %q

[ttrpc]
  address = %q

[debug]
  level = "info"

[plugins."io.containerd.internal.v1.opt"]
  path = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), d.Address, d.Address+".ttrpc", filepath.Join(dir, "opt"))
	cfgPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	// A containerd left running by a rayctl that was killed (it sits in its own process group) still
	// holds this directory's database: stop it first. Containers keep running in their shims and the new
	// daemon picks them up.
	if err := stopOrphans(cfgPath, 15*time.Second); err != nil {
		return nil, err
	}
	_ = os.Remove(d.Address)

	logf, err := os.OpenFile(d.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	d.cmd = exec.Command(bin, "--config", cfgPath)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	// Its own process group: a terminal's Ctrl-C goes to rayctl, which stops it in order.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting containerd: %w", err)
	}
	go func() {
		d.waitErr = d.cmd.Wait()
		logf.Close()
		close(d.done)
	}()

	if err := d.waitReady(ctx, 60*time.Second); err != nil {
		_ = d.Stop()
		return nil, err
	}
	return d, nil
}

func (d *Daemon) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		select {
		case <-d.done:
			return fmt.Errorf("containerd exited during start-up (%v): %s", d.waitErr, d.logTail())
		default:
		}
		if _, err := os.Stat(d.Address); err == nil {
			last = d.ping(ctx)
			if last == nil {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("containerd did not answer on %s within %s (%v): %s", d.Address, timeout, last, d.logTail())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (d *Daemon) ping(ctx context.Context) error {
	c, err := ctrd.New(d.Address, ctrd.WithTimeout(2*time.Second), ctrd.WithDefaultNamespace(Namespace))
	if err != nil {
		return err
	}
	defer c.Close()
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = c.Version(pctx)
	return err
}

func (d *Daemon) logTail() string {
	b, _ := os.ReadFile(d.LogPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return strings.TrimSpace(string(b))
}

// Client connects to the daemon with rayctl's namespace as the default.
func (d *Daemon) Client() (*ctrd.Client, error) {
	return ctrd.New(d.Address, ctrd.WithDefaultNamespace(Namespace))
}

// Done is closed when the containerd process has exited.
func (d *Daemon) Done() <-chan struct{} { return d.done }

// Stop sends SIGTERM, waits up to 10 s, then SIGKILLs. Containers' shims
// outlive the daemon; delete tasks and containers before stopping it.
func (d *Daemon) Stop() error {
	if d.cmd == nil || d.cmd.Process == nil {
		return nil
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
	if d.sockDir != "" {
		_ = os.RemoveAll(d.sockDir)
	}
	var ee *exec.ExitError
	if d.waitErr != nil && !errors.As(d.waitErr, &ee) {
		return d.waitErr
	}
	return nil
}

// ImportImage imports an OCI image layout tar (such as the one
// image.BuildSimImage writes) into the client's namespace (rayctl's unless
// ctx names one) and unpacks it for the default snapshotter. It returns the
// names of the imported images.
func ImportImage(ctx context.Context, c *ctrd.Client, tarball io.Reader) ([]string, error) {
	if _, ok := namespaces.Namespace(ctx); !ok {
		ctx = namespaces.WithNamespace(ctx, Namespace)
	}
	imgs, err := c.Import(ctx, tarball)
	if err != nil {
		return nil, fmt.Errorf("importing image: %w", err)
	}
	var names []string
	for _, img := range imgs {
		image := ctrd.NewImage(c, img)
		if err := image.Unpack(ctx, DefaultSnapshotter); err != nil {
			return names, fmt.Errorf("unpacking %s: %w", img.Name, err)
		}
		names = append(names, img.Name)
	}
	return names, nil
}

// ImportImageFile is ImportImage for a file path.
func ImportImageFile(ctx context.Context, c *ctrd.Client, path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ImportImage(ctx, c, f)
}

// stopOrphans ends any containerd process started with --config cfgPath: SIGTERM, then SIGKILL after
// grace.
func stopOrphans(cfgPath string, grace time.Duration) error {
	pids := containerdPIDs(cfgPath)
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(grace)
	for _, pid := range pids {
		for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if syscall.Kill(pid, 0) == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	for _, pid := range pids {
		for i := 0; i < 250 && syscall.Kill(pid, 0) == nil; i++ {
			time.Sleep(20 * time.Millisecond)
		}
		if syscall.Kill(pid, 0) == nil {
			return fmt.Errorf("an earlier containerd (pid %d) for %s does not stop", pid, cfgPath)
		}
	}
	return nil
}

// containerdPIDs lists the processes whose command line has "--config cfgPath".
func containerdPIDs(cfgPath string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "--config" && args[i+1] == cfgPath {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}
