// Package process is the runtime for machines without containerd: each
// container is a host process (its own session and process group) whose
// stdout and stderr go to its log file in the CRI format.
//
// As root on Linux each container is also isolated as a container would be:
//   - a PID namespace of its own, whose PID 1 is a small init (this binary
//     re-executed, see containerInit) that mounts a fresh /proc, forwards
//     signals to the program, reaps orphans, and whose exit kills whatever
//     is left in the namespace; a pod with shareProcessNamespace has one
//     for all its containers instead, held by a pause process from
//     RunSandbox to RemoveSandbox;
//   - a private mount namespace, where its mounts are bind-mounted at their
//     container paths (and the sandbox's hosts, resolv.conf and hostname
//     files over /etc's), with a private /tmp (and, for Ray's images,
//     /home/ray) from rt/<container>/ under the pod dir, and raysim, where
//     `ray` must be raysim, at /tmp/.rayctl/bin/ray, first in PATH;
//   - a UTS namespace with the pod's hostname, and the pod's network
//     namespace from the network package, so every pod has its own IP;
//   - cgroup v1 memory and cpu cgroups from its limits, mounted over
//     /sys/fs/cgroup/{memory,cpu} inside, where Ray reads its limit.
//
// Who a container's processes are: as real root, rayctl gives Options.RunAs
// (see PodUser), an unprivileged user of the instance's own that is no host
// user's: every process of every container, exec'd ones included, runs as it
// whatever the image or the pod's runAsUser ask (runAsUser 0, or 1000, must
// not become host root or the host's user 1000). It is named in the
// container's /etc/passwd and /etc/group ("ray" in Ray's images, else
// "rayctl-pod"; a copy of the host's files with that line added), owns the
// container's home and works from it (Ray's images) or from /. Without RunAs
// a container runs as its runAsUser and runAsGroup, else as rayctl's own
// user: inside the user namespace of a rootless rayctl that is 0, the user
// who started rayctl, and ids that namespace does not map become 0 too, with
// a note in the container's status. There cgroups cannot be made either:
// limits are then not applied, and the status says so.
//
// An isolated container's missing mount targets and working dir are never
// made in the host's filesystem outside its own mounts: below one of its
// mounts (a volume, its private /tmp or home) they are made there, as a
// kubelet makes them in a volume, elsewhere on a tmpfs of its
// mount namespace that covers their nearest existing ancestor and shows that
// ancestor's entries as they were.
//
// With Options.ReadOnlyHost the host's filesystem is read-only inside an
// isolated container, save its writable mounts (volumes not mounted
// ReadOnly, the private /tmp and home, its cgroups), /dev and /proc: the
// pod's user may write nothing of the host's even where the host's modes
// would let it (/var/tmp, say), save in /dev/shm, which is still the host's.
// It holds against an unprivileged user; a container running as real root
// could undo it. ReadOnly mounts are read-only with everything mounted below
// them.
//
// Containers outlive the Runtime: a new one on the same state dir re-adopts
// those still running. With Options.ContainersEndWithRuntime (rootless,
// where the next rayctl cannot enter the namespaces of this one) Close stops
// them and New kills any left over.
//
// Elsewhere (not root, not Linux) pods share the host's processes, /tmp,
// network and hostname, limits are not applied, and a mount's ContainerPath
// is not honoured: only its HostPath exists, so programs must be given host
// paths.
//
// A container's environment is the image's and the pod's (with PATH,
// HOSTNAME and HOME), never rayctl's own.
//
// The image decides only which program runs: `ray` is raysim (this rayctl
// run as "ray") for raysim's image, and for rayproject/ray images when the
// host has no `ray`; everything else runs the host's programs by name, so
// with RunAs they must be where that user may read and run them (the host's
// Ray's virtual environment included). TTYs are not supported.
package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rayctl/rayctl/pkg/runtime"
	"github.com/rayctl/rayctl/pkg/runtime/hostray"
	"github.com/rayctl/rayctl/pkg/runtime/network"
)

// Options configures the process runtime.
type Options struct {
	// StateDir keeps container records, output FIFOs, the image list and a
	// bin dir with `ray`. Required.
	StateDir string
	// Network gives pods their sandboxes. Required; a HostOnly manager makes
	// every pod share the host's network.
	Network *network.Manager
	// RayBinary is raysim's executable, run with argv[0] "ray" (this rayctl,
	// os.Executable(), when empty).
	RayBinary string
	// HostRay runs Ray's images (rayproject/ray…): their `ray`, `python` and the rest come from it. Nil
	// means raysim stands in for Ray.
	HostRay *hostray.Ray
	// RunAs, when set, is the user every process of every container runs as
	// (exec'd ones too), whatever the image or the pod's runAsUser and
	// runAsGroup ask: a pod asking for uid 0, or for the uid of a host user
	// such as 1000, must not get that host user's rights. rayctl sets it
	// (to PodUser's) when it runs as real root. It must not be 0 and must be
	// mapped in rayctl's user namespace. Such a container sees itself named
	// in /etc/passwd and /etc/group ("ray" for Ray's images, else
	// "rayctl-pod"), owns its home, and reaches raysim and the host's Ray.
	// Nil keeps the pod's runAsUser (else uid 0): the mode of a rayctl
	// inside a user namespace of its own, where 0 is the user who started
	// it; ids that namespace does not map become 0 there, with a note in
	// the container's status. A runtime that is not isolated (root with a
	// HostOnly network) applies RunAs too, but its containers see host
	// paths: raysim's bin dir and Ray images' homes, under the data dir,
	// are then out of their reach.
	RunAs *User
	// ReadOnlyHost makes the host's filesystem read-only inside isolated
	// containers, save their writable mounts (volumes not mounted
	// ReadOnly, the private /tmp and home, their cgroups), /dev (with
	// /dev/shm) and their /proc. Mounts that were read-only already stay
	// so.
	ReadOnlyHost bool
	// ContainersEndWithRuntime makes containers live no longer than the
	// Runtime: New kills those a previous Runtime left running (they are
	// recorded exited, and say why) instead of re-adopting them, and Close
	// stops every running container (SIGTERM, then SIGKILL after 5 s) and
	// the pods' shared PID namespaces. For a rootless rayctl, whose user
	// namespace dies with it: the next one, in a namespace of its own,
	// cannot enter the namespaces its containers live in.
	ContainersEndWithRuntime bool
	// HiddenDirs are host dirs that isolated containers see as empty, read-only dirs: rayctl's data dir,
	// with its keys, its kubeconfig and the other pods' files and namespaces (the containers' own volumes,
	// sandbox files and log pipes reach them apart). Where containers run as the user who started rayctl
	// (rootless) the dir's modes alone would not keep them out.
	HiddenDirs []string
	// NotFoundHint, when set, ends the error of a container of an image other than Ray's or raysim's
	// whose program the host lacks: what would run that image (e.g. containerd, and why it does not).
	NotFoundHint string
}

// Runtime runs containers as host processes.
type Runtime struct {
	notFoundHint string
	dir          string
	binDir       string
	net          *network.Manager
	rayBinary    string
	hostRay      *hostray.Ray
	// isolated: containers get their own mount and UTS namespaces, and a network namespace each unless
	// the network is HostOnly (pods on the host's network: still not root, still a read-only host).
	isolated bool
	images   *imageStore
	// runAs, readOnlyHost and endWithRuntime are Options' RunAs, ReadOnlyHost
	// and ContainersEndWithRuntime; ids what rayctl's user namespace maps.
	runAs          *User
	readOnlyHost   bool
	hidden         []string
	endWithRuntime bool
	ids            idMaps

	mu   sync.Mutex
	live map[string]*watch // containers this Runtime watches
	// closed: Close was called; the containers belong to the next Runtime, and this one writes no
	// more of their records (a late write could bring back a record the next one removed).
	closed bool

	// Exits tells of the exits the watching goroutines record.
	runtime.Exits
}

var (
	_ runtime.Runtime      = (*Runtime)(nil)
	_ runtime.ExitNotifier = (*Runtime)(nil)
)

// watch follows one running container.
type watch struct {
	exited chan struct{}
	logs   sync.WaitGroup
	stop   chan struct{} // closed by Close: stop watching, leave the process
}

// Isolated reports whether containers get their own namespaces (root on Linux).
func (r *Runtime) Isolated() bool { return r.isolated }

// New prepares the state dir and re-adopts containers a previous Runtime
// started that still run (matched by pid and start time, so a reused pid is
// not mistaken for them).
func New(ctx context.Context, opts Options) (*Runtime, error) {
	if opts.StateDir == "" || opts.Network == nil {
		return nil, errors.New("process runtime: StateDir and Network are required")
	}
	if opts.RayBinary == "" {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		opts.RayBinary = self
	}
	dir, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, err
	}
	r := &Runtime{notFoundHint: opts.NotFoundHint, dir: dir, binDir: filepath.Join(dir, "bin"), net: opts.Network, rayBinary: opts.RayBinary, hostRay: opts.HostRay,
		isolated: goruntime.GOOS == "linux" && os.Geteuid() == 0,
		images:   newImageStore(dir), live: map[string]*watch{},
		runAs: opts.RunAs, readOnlyHost: opts.ReadOnlyHost, hidden: opts.HiddenDirs, endWithRuntime: opts.ContainersEndWithRuntime, ids: currentIDMaps()}
	if err := r.checkRunAs(); err != nil {
		return nil, err
	}
	for _, d := range []string{r.binDir, filepath.Join(dir, "containers")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	// `ray` in shell commands is raysim, and `rayctl` this binary (the Gateway's proxy pods run
	// `rayctl gateway-proxy`, as they do from the raysim image on containerd): links in the bin dir put
	// first in PATH.
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	for name, target := range map[string]string{"ray": r.rayBinary, "rayctl": self} {
		link := filepath.Join(r.binDir, name)
		if cur, err := os.Readlink(link); err != nil || cur != target {
			_ = os.Remove(link)
			if err := os.Symlink(target, link); err != nil {
				return nil, err
			}
		}
	}
	if err := r.readopt(); err != nil {
		return nil, err
	}
	if r.endWithRuntime { // after readopt, which records why each container ended
		r.killPodPIDNSs()
	}
	return r, nil
}

// checkRunAs refuses a RunAs that is root or that rayctl's user namespace
// cannot give to a process.
func (r *Runtime) checkRunAs() error {
	u := r.runAs
	switch {
	case u == nil:
		return nil
	case u.UID == 0 || u.GID == 0:
		return fmt.Errorf("process runtime: RunAs %d:%d is root's", u.UID, u.GID)
	case !r.ids.uids.has(u.UID) || !r.ids.gids.has(u.GID):
		return fmt.Errorf("process runtime: RunAs %d:%d is not mapped in rayctl's user namespace", u.UID, u.GID)
	}
	return nil
}

// Name is "process".
func (r *Runtime) Name() string { return "process" }

// Version says what the runtime is.
func (r *Runtime) Version(context.Context) (string, error) {
	mode := "host-network"
	if r.isolated {
		mode = "netns"
	}
	return "process://" + goruntime.GOOS + "-" + mode, nil
}

// RunSandbox sets the pod's network and DNS files up (see network.Manager)
// and, when isolated and its containers share a PID namespace, starts the
// process that holds it.
func (r *Runtime) RunSandbox(_ context.Context, cfg runtime.SandboxConfig) (*runtime.Sandbox, error) {
	sb, err := r.net.RunSandbox(cfg)
	if err != nil || !r.isolated || !cfg.ShareProcessNamespace {
		return sb, err
	}
	if err := r.startPodPIDNS(cfg.PodUID); err != nil {
		_ = r.net.RemoveSandbox(cfg.PodUID)
		return nil, err
	}
	return sb, nil
}

// RemoveSandbox ends the pod's shared PID namespace, if any, and tears its
// network down.
func (r *Runtime) RemoveSandbox(_ context.Context, podUID string) error {
	if err := r.stopPodPIDNS(podUID); err != nil {
		return err
	}
	return r.net.RemoveSandbox(podUID)
}

// ListSandboxes lists the recorded sandboxes.
func (r *Runtime) ListSandboxes(context.Context) ([]*runtime.Sandbox, error) {
	return r.net.ListSandboxes()
}

// Close stops watching containers; they keep running for the next Runtime,
// unless ContainersEndWithRuntime: then it stops them first.
func (r *Runtime) Close() error {
	if r.endWithRuntime {
		r.stopAll(endGrace)
		r.killPodPIDNSs()
	}
	r.mu.Lock()
	all := r.live
	r.live, r.closed = map[string]*watch{}, true
	r.mu.Unlock()
	for _, w := range all {
		close(w.stop)
	}
	return nil
}

// record is what the runtime keeps of a container, in
// <state dir>/containers/<id>.json.
type record struct {
	runtime.ContainerStatus
	// Program and Argv are what runs; Env and Dir its environment.
	Program   string
	Argv, Env []string
	Dir       string
	// Namespaces: the pod's netns (empty for the host's), hostname, mounts.
	NetNSPath, Hostname string
	Mounts              []runtime.Mount
	// Cgroups are the container's cgroups (HostPath) and where they are
	// mounted inside (ContainerPath); they are among Mounts too.
	Cgroups  []runtime.Mount
	UID, GID *int64
	// Pid and StartTicks (from /proc/<pid>/stat) identify the process.
	Pid        int
	StartTicks uint64
}

func (r *Runtime) recordPath(id string) string {
	return filepath.Join(r.dir, "containers", id+".json")
}

func (r *Runtime) fifoDir(id string) string {
	return filepath.Join(r.dir, "containers", id)
}

func (r *Runtime) load(id string) (*record, error) {
	b, err := os.ReadFile(r.recordPath(id))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("container %s: %w", id, runtime.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	rec := &record{}
	if err := json.Unmarshal(b, rec); err != nil {
		return nil, fmt.Errorf("container %s: %w", id, err)
	}
	return rec, nil
}

func (r *Runtime) save(rec *record) error {
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	p := r.recordPath(rec.ID)
	if err := os.WriteFile(p+".tmp", b, 0o644); err != nil {
		return err
	}
	return os.Rename(p+".tmp", p)
}

// update applies fn to the stored record under the lock.
func (r *Runtime) update(id string, fn func(*record)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.updateLocked(id, fn)
}

// updateLocked applies fn to the stored record; r.mu is held.
func (r *Runtime) updateLocked(id string, fn func(*record)) error {
	rec, err := r.load(id)
	if err != nil {
		return err
	}
	fn(rec)
	return r.save(rec)
}

// updateUnlessClosed is update, but writes nothing once Close was called: a process this Runtime
// started is still its child, so its end reaches this Runtime too, after the next one took over.
func (r *Runtime) updateUnlessClosed(id string, fn func(*record)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	return r.updateLocked(id, fn)
}

// ContainerStatus reports one container.
func (r *Runtime) ContainerStatus(_ context.Context, id string) (*runtime.ContainerStatus, error) {
	r.mu.Lock()
	rec, err := r.load(id)
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	s := rec.ContainerStatus
	return &s, nil
}

// ListContainers reports every container, sorted by creation.
func (r *Runtime) ListContainers(ctx context.Context) ([]*runtime.ContainerStatus, error) {
	entries, err := os.ReadDir(filepath.Join(r.dir, "containers"))
	if err != nil {
		return nil, err
	}
	var out []*runtime.ContainerStatus
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		s, err := r.ContainerStatus(ctx, id)
		if errors.Is(err, runtime.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

func exitReason(code int) string {
	if code == 0 {
		return "Completed"
	}
	return "Error"
}

func now() time.Time { return time.Now().UTC() }
