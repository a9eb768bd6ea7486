package containerd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	ctrd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"google.golang.org/grpc"

	"github.com/rayctl/rayctl/pkg/runtime"
	"github.com/rayctl/rayctl/pkg/runtime/crilog"
	"github.com/rayctl/rayctl/pkg/runtime/network"
)

// Options says which containerd to use and how.
type Options struct {
	// Address is containerd's gRPC socket (Daemon.Address for a private one,
	// /run/containerd/containerd.sock for the system's). Required.
	Address string
	// FIFODir is where task I/O FIFOs are made (Daemon.FIFODir for a private
	// daemon). Required: containerd 1.6 would use /run/containerd/fifo.
	FIFODir string
	// Network gives pods their namespaces, IPs and DNS files. Required.
	Network *network.Manager
	// Namespace is the containerd namespace (Namespace when empty).
	Namespace string
	// Snapshotter unpacks images and makes container filesystems
	// (DefaultSnapshotter when empty).
	Snapshotter string
	// StateDir is the state directory of a containerd that serves this data dir alone (a private
	// Daemon's StateDir); empty for a shared one. With it, Sweep also finds what a killed rayctl left
	// outside containerd's records (shims, runc containers, bundles, mounts, old leases), and
	// containers' cgroups sit under a parent of this data dir's own (see CgroupParent).
	StateDir string
}

// Runtime runs pods' containers in containerd. Containers it makes carry
// labels that let a later Runtime on the same containerd re-adopt them.
type Runtime struct {
	client  *ctrd.Client
	ns      string
	snap    string
	fifoDir string
	net     *network.Manager
	address string
	// stateDir is Options.StateDir; cgroupParent holds the containers' cgroups.
	stateDir, cgroupParent string
	// noLimits, when set, says why containers get no cgroup and so no resource limits (rootless).
	noLimits string
	// started is when New connected: leases older than that are an earlier process's.
	started time.Time

	mu       sync.Mutex
	attached map[string]*attachment // container id → its log copier
	starting map[string]bool        // containers StartContainer is starting now

	// Exits tells of the exits the log copiers record.
	runtime.Exits
}

var (
	_ runtime.Runtime      = (*Runtime)(nil)
	_ runtime.ExitNotifier = (*Runtime)(nil)
)

// New connects to containerd at opts.Address, and picks up the output of
// containers a previous Runtime started that are still running.
func New(ctx context.Context, opts Options) (*Runtime, error) {
	if opts.Address == "" || opts.FIFODir == "" || opts.Network == nil {
		return nil, errors.New("containerd runtime: Address, FIFODir and Network are required")
	}
	if opts.Namespace == "" {
		opts.Namespace = Namespace
	}
	if opts.Snapshotter == "" {
		opts.Snapshotter = DefaultSnapshotter
	}
	if err := os.MkdirAll(opts.FIFODir, 0o711); err != nil {
		return nil, err
	}
	c, err := ctrd.New(opts.Address, ctrd.WithDefaultNamespace(opts.Namespace), ctrd.WithTimeout(10*time.Second))
	if err != nil {
		return nil, fmt.Errorf("connecting to containerd at %s: %w", opts.Address, err)
	}
	r := &Runtime{client: c, ns: opts.Namespace, snap: opts.Snapshotter, fifoDir: opts.FIFODir, net: opts.Network,
		address: opts.Address, stateDir: opts.StateDir, cgroupParent: CgroupParent(opts.Namespace, opts.StateDir),
		started: time.Now(), attached: map[string]*attachment{}, starting: map[string]bool{}, noLimits: rootlessLimits()}
	if _, err := r.Version(ctx); err != nil {
		c.Close()
		return nil, err
	}
	if err := r.readopt(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return r, nil
}

// Reconnect is for after containerd restarted (see Daemon.Supervise). Calls in flight are not cut
// off: the connection is kept, and only told to dial again at once rather than wait out its back-off.
// Reconnect returns once containerd answers, after attaching to the output and exit of any container
// nobody follows (trackers themselves wait again for their tasks' exits when containerd breaks their
// waits off, and their output never stops flowing).
func (r *Runtime) Reconnect(ctx context.Context) error {
	if conn, ok := r.client.Conn().(*grpc.ClientConn); ok {
		conn.ResetConnectBackoff()
	}
	deadline := time.Now().Add(reconnectTimeout)
	for {
		vctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := r.Version(vctx)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("reconnecting to containerd: no answer within %s: %w", reconnectTimeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return r.readopt(ctx)
}

// reconnectTimeout bounds how long Reconnect waits for containerd to answer.
const reconnectTimeout = 30 * time.Second

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Client is the underlying containerd client (its default namespace is the
// runtime's).
func (r *Runtime) Client() *ctrd.Client { return r.client }

func (r *Runtime) ctx(ctx context.Context) context.Context {
	return namespaces.WithNamespace(ctx, r.ns)
}

// Name is "containerd".
func (r *Runtime) Name() string { return "containerd" }

// Version is "containerd://<version>".
func (r *Runtime) Version(ctx context.Context) (string, error) {
	v, err := r.client.Version(r.ctx(ctx))
	if err != nil {
		return "", fmt.Errorf("containerd version: %w", err)
	}
	return "containerd://" + v.Version, nil
}

// RunSandbox sets the pod's network and DNS files up (see network.Manager).
func (r *Runtime) RunSandbox(ctx context.Context, cfg runtime.SandboxConfig) (*runtime.Sandbox, error) {
	return r.net.RunSandbox(cfg)
}

// RemoveSandbox tears the pod's network down.
func (r *Runtime) RemoveSandbox(ctx context.Context, podUID string) error {
	return r.net.RemoveSandbox(podUID)
}

// ListSandboxes lists the recorded sandboxes.
func (r *Runtime) ListSandboxes(ctx context.Context) ([]*runtime.Sandbox, error) {
	return r.net.ListSandboxes()
}

// Close stops copying output (containers keep running; their output waits
// in containerd's shims for the next Runtime) and closes the connection.
func (r *Runtime) Close() error {
	r.mu.Lock()
	all := r.attached
	r.attached = map[string]*attachment{}
	r.mu.Unlock()
	for _, a := range all {
		a.detach()
	}
	return r.client.Close()
}

// attachment copies one task's stdout and stderr into its CRI log file.
type attachment struct {
	io   cio.IO
	task ctrd.Task
	log  *crilog.File
	out  *crilog.Stream
	err  *crilog.Stream
	done chan struct{} // closed once the output is all written
	// waitCtx bounds the waits for the task's exit; cancelWait ends them.
	waitCtx    context.Context
	cancelWait context.CancelFunc
}

// detach stops copying without removing the FIFOs (a later Runtime
// attaches to them again).
func (a *attachment) detach() {
	a.cancelWait()
	a.io.Cancel()
	<-a.done
}
