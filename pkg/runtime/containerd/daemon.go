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
	"sync"
	"syscall"
	"time"

	ctrd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/rayctl/rayctl/pkg/procstop"
	"github.com/rayctl/rayctl/pkg/userns"
)

// Namespace is the containerd namespace rayctl keeps its images and containers in.
const Namespace = "rayctl"

// DefaultSnapshotter is the snapshotter images are unpacked for.
const DefaultSnapshotter = "overlayfs"

// The configuration file and the state directory of a private containerd, in the directory given to
// StartPrivate.
const (
	configFile  = "config.toml"
	stateSubdir = "state"
)

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
	// StateDir is containerd's state directory (task bundles live under it).
	StateDir string

	bin     string
	cfgPath string
	sockDir string // a short directory for the sockets when Dir is too long

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{}
	waitErr  error
	started  time.Time
	stopping bool // Stop was called: no more starts
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
// waits until its socket answers. Stop ends it. It needs root, or to run
// inside rayctl's user namespace (rootless), where /run becomes private to
// rayctl first: containerd's shims put their sockets in /run/containerd.
func StartPrivate(ctx context.Context, dir string) (*Daemon, error) {
	bin, err := exec.LookPath(Binary)
	if err != nil {
		return nil, fmt.Errorf("containerd is not installed (%w); on Debian: apt-get install -y containerd runc", err)
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	d := &Daemon{Dir: dir, FIFODir: filepath.Join(dir, "fifo"), LogPath: filepath.Join(dir, "containerd.log"),
		StateDir: filepath.Join(dir, stateSubdir), bin: bin}
	for _, sub := range []string{"root", "state", "fifo", "opt"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o711); err != nil {
			return nil, err
		}
	}
	if userns.Inside() {
		if err := privateRunDir(); err != nil {
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
`, filepath.Join(dir, "root"), d.StateDir, d.Address, d.Address+".ttrpc", filepath.Join(dir, "opt"))
	d.cfgPath = filepath.Join(dir, configFile)
	if err := os.WriteFile(d.cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	if err := d.start(ctx); err != nil {
		_ = d.Stop()
		return nil, err
	}
	return d, nil
}

// start runs containerd with the daemon's configuration and waits until it answers. A containerd left
// running by a rayctl that was killed (it sits in its own process group) still holds the directory's
// database: it is stopped first. Containers keep running in their shims and the new daemon picks them up.
func (d *Daemon) start(ctx context.Context) error {
	if err := stopOrphans(d.cfgPath, 15*time.Second); err != nil {
		return err
	}
	_ = os.Remove(d.Address)

	logf, err := os.OpenFile(d.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	d.mu.Lock()
	bin := d.bin
	d.mu.Unlock()
	cmd := exec.Command(bin, "--config", d.cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group: a terminal's Ctrl-C goes to rayctl, which stops it in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	done := make(chan struct{})
	d.mu.Lock()
	if d.stopping {
		d.mu.Unlock()
		logf.Close()
		return errors.New("containerd: stopped")
	}
	if err := cmd.Start(); err != nil {
		d.mu.Unlock()
		logf.Close()
		return fmt.Errorf("starting containerd: %w", err)
	}
	d.cmd, d.done, d.waitErr, d.started = cmd, done, nil, time.Now()
	d.mu.Unlock()
	go func() {
		err := cmd.Wait()
		logf.Close()
		d.mu.Lock()
		d.waitErr = err
		d.mu.Unlock()
		close(done)
	}()
	return d.waitReady(ctx, done, 60*time.Second)
}

func (d *Daemon) waitReady(ctx context.Context, done <-chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		select {
		case <-done:
			return fmt.Errorf("containerd exited during start-up (%v): %s", d.exitErr(), d.logTail())
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

// Done is closed when the containerd process last started has exited.
func (d *Daemon) Done() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.done
}

// Pid is the process id of the containerd last started.
func (d *Daemon) Pid() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil || d.cmd.Process == nil {
		return 0
	}
	return d.cmd.Process.Pid
}

// exitErr is how the containerd last started ended (nil while it runs or when it exited 0).
func (d *Daemon) exitErr() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.waitErr
}

// Stop sends SIGTERM, waits up to 10 s, then SIGKILLs. Containers' shims
// outlive the daemon; delete tasks and containers before stopping it. After
// Stop the daemon is not started again (see Supervise).
func (d *Daemon) Stop() error {
	d.mu.Lock()
	d.stopping = true
	cmd, done := d.cmd, d.done
	d.mu.Unlock()
	if d.sockDir != "" {
		defer os.RemoveAll(d.sockDir)
	}
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	procstop.Child(cmd.Process.Pid, false, done, 10*time.Second)
	if userns.Inside() {
		EndShims(d.StateDir) // rootless, containers end with rayctl (see EndShims)
	}
	var ee *exec.ExitError
	if err := d.exitErr(); err != nil && !errors.As(err, &ee) {
		return err
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
	_, _ = procstop.PIDs(pids, syscall.SIGTERM, grace, nil)
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
