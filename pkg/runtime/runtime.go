// Package runtime is the seam between rayctl's kubelet and whatever runs containers. The kubelet speaks
// only this interface; its implementations sit in sibling folders and are chosen by name
// (`rayctl up --runtime=containerd|process|fake`):
//
//   - containerd: real containers through the containerd v2 client (a netns per pod);
//   - process: each container a host process (laptops without containerd);
//   - fake: no processes, containers just report running (scale benchmarks only).
//
// The shape follows the Container Runtime Interface, cut down to what the kubelet uses: a pod sandbox
// (network namespace, IP, hostname, DNS files), images, and containers with logs and exec.
package runtime

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"
)

// Sweeper is a Runtime that can find and remove what a crash left outside its own records: the
// remains of a container whose creation or start was cut short (a task never started, a snapshot
// without a container, a process containerd lost track of), and pod networks of pods that no longer
// exist. The kubelet sweeps before it starts re-adopting pods; `rayctl down --purge` sweeps last.
type Sweeper interface {
	// Sweep removes those remains, and the network namespaces, IPs and sandbox records of pods not in
	// live (nil: of every pod). Nothing may create containers meanwhile. It returns what it removed,
	// one short phrase per kind ("2 shims").
	Sweep(ctx context.Context, live map[string]bool) ([]string, error)
}

// Runtime runs pods' containers on this node.
type Runtime interface {
	// Name names the implementation ("containerd", "process", "fake").
	Name() string
	// Version describes the runtime, e.g. "containerd://1.6.20", for the Node's nodeInfo.
	Version(ctx context.Context) (string, error)

	// RunSandbox makes (or, for the same pod UID, returns the existing) sandbox of a pod: its network
	// namespace with an IP, its hostname, and its /etc/hosts and /etc/resolv.conf.
	RunSandbox(ctx context.Context, cfg SandboxConfig) (*Sandbox, error)
	// RemoveSandbox releases everything RunSandbox made for the pod (netns, IP, files). Containers must
	// have been removed first. Removing a missing sandbox is not an error.
	RemoveSandbox(ctx context.Context, podUID string) error
	// ListSandboxes returns the sandboxes that exist, for re-adoption after a restart.
	ListSandboxes(ctx context.Context) ([]*Sandbox, error)

	// EnsureImage makes image available per policy, reporting progress lines, and returns it.
	EnsureImage(ctx context.Context, image string, policy PullPolicy, progress func(string)) (*Image, error)
	// ImportImage loads an OCI or docker image tarball and returns the image names it holds.
	ImportImage(ctx context.Context, tarball io.Reader) ([]string, error)
	// ListImages lists the images present.
	ListImages(ctx context.Context) ([]*Image, error)

	// CreateContainer creates (but does not start) a container in a sandbox.
	CreateContainer(ctx context.Context, sandbox *Sandbox, cfg ContainerConfig) (string, error)
	// StartContainer starts a created container.
	StartContainer(ctx context.Context, id string) error
	// StopContainer sends SIGTERM (or the image's stop signal), waits up to grace, then SIGKILL.
	// Stopping a stopped container is not an error.
	StopContainer(ctx context.Context, id string, grace time.Duration) error
	// RemoveContainer removes a stopped container and its writable layer.
	RemoveContainer(ctx context.Context, id string) error
	// ContainerStatus reports one container.
	ContainerStatus(ctx context.Context, id string) (*ContainerStatus, error)
	// ListContainers reports every container the runtime holds for rayctl (running or not).
	ListContainers(ctx context.Context) ([]*ContainerStatus, error)
	// Exec runs cmd inside a running container and returns its exit code.
	Exec(ctx context.Context, id string, cmd []string, stdio ExecIO) (int, error)

	// Close releases the runtime's connections (containers keep running).
	Close() error
}

// ExitNotifier is a Runtime that tells the kubelet when a container exits, so that the kubelet need not
// wait for its next relist to notice (Kubernetes' Evented PLEG hears the same from CRI container events).
// A relist remains the authority; a notification only makes it come sooner.
type ExitNotifier interface {
	// NotifyExits has fn called with a container's ID each time one exits, once its exit is recorded
	// (ContainerStatus and ListContainers already report it exited). fn must not block.
	NotifyExits(fn func(id string))
}

// Exits is the part of a Runtime that keeps the functions ExitNotifier registers; embed it and call
// Exited after recording a container's exit.
type Exits struct {
	mu  sync.Mutex
	fns []func(id string)
}

// NotifyExits registers fn (ExitNotifier).
func (e *Exits) NotifyExits(fn func(id string)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fns = append(e.fns, fn)
}

// Exited tells every registered function that container id has exited.
func (e *Exits) Exited(id string) {
	e.mu.Lock()
	fns := e.fns
	e.mu.Unlock()
	for _, fn := range fns {
		fn(id)
	}
}

// podKey is the context key of WithPod.
type podKey struct{}

// WithPod returns ctx marked as acting for the pod podUID. The kubelet marks its image calls
// (EnsureImage, ListImages) so, as CRI's PullImage request carries the pod's sandbox config: a runtime
// that runs each pod on one of several then asks the pod's own.
func WithPod(ctx context.Context, podUID string) context.Context {
	return context.WithValue(ctx, podKey{}, podUID)
}

// PodOf is the pod UID WithPod marked ctx with, or "".
func PodOf(ctx context.Context) string {
	uid, _ := ctx.Value(podKey{}).(string)
	return uid
}

// ErrNotFound is returned (wrapped) for a sandbox, container or image that does not exist.
var ErrNotFound = errors.New("not found")

// PullPolicy is a container's imagePullPolicy.
type PullPolicy string

// Pull policies, as in the Pod API.
const (
	PullAlways       PullPolicy = "Always"
	PullIfNotPresent PullPolicy = "IfNotPresent"
	PullNever        PullPolicy = "Never"
)

// ErrImageNeverPull says the image is absent and the policy forbids pulling it.
var ErrImageNeverPull = errors.New("image is not present and pull policy is Never")

// Image is an image present in the runtime.
type Image struct {
	// Ref is the name it was asked for or imported as, e.g. "rayctl.local/raysim:1.0".
	Ref string
	// ID is the image's digest, as the Pod status' imageID shows it.
	ID string
	// Size is the unpacked size in bytes, when known.
	Size int64
	// Entrypoint and Cmd are the image config's defaults; WorkingDir, Env and User likewise.
	Entrypoint, Cmd, Env []string
	WorkingDir, User     string
	// Notes are what the runtime tells the user about running this image here (the kubelet posts each
	// as an event of the pod): e.g. that a stand-in runs it, or a program of another version.
	Notes []Note `json:"-"`
}

// Argv is the process a container of img runs, by the Pod API's rules: command replaces the image's
// Entrypoint (and drops its Cmd), args replaces Cmd.
func (img *Image) Argv(command, args []string) []string {
	entry, cmd := img.Entrypoint, img.Cmd
	if len(command) > 0 {
		entry, cmd = command, nil
	}
	if len(args) > 0 {
		cmd = args
	}
	return append(append([]string{}, entry...), cmd...)
}

// Note is one thing a runtime tells about an image, as a pod event would say it.
type Note struct {
	// Warning marks a note the user should act on (a Warning event); else it is Normal.
	Warning bool
	// Reason is a short CamelCase word; Message the sentence.
	Reason, Message string
}

// SandboxConfig describes a pod's sandbox.
type SandboxConfig struct {
	// PodUID, Namespace and Name identify the pod.
	PodUID, Namespace, Name string
	// Hostname is the pod's hostname (spec.hostname or the pod name); Subdomain its spec.subdomain.
	Hostname, Subdomain string
	// HostNetwork puts the pod in the host's network namespace.
	HostNetwork bool
	// ShareProcessNamespace gives the pod's containers one PID namespace (spec.shareProcessNamespace);
	// otherwise each container has its own, where a runtime isolates processes.
	ShareProcessNamespace bool
	// DNS holds the resolv.conf contents to give the pod (nameservers, searches, options).
	DNS DNSConfig
	// HostAliases are extra /etc/hosts lines.
	HostAliases []HostAlias
	// Dir is a directory of the pod's own (logs, volumes) the runtime may write sandbox files into.
	Dir string
	// Labels are recorded with the sandbox and returned by ListSandboxes.
	Labels map[string]string
	// Ports are the ports the pod's containers declare (spec.containers[].ports). Where pods share the
	// host's network, no two pods may declare one port.
	Ports []Port `json:",omitempty"`
	// RuntimeHandler is the handler of the RuntimeClass the pod's spec.runtimeClassName names ("" when
	// it names none), and Images the images of its init containers and containers, in order. A runtime
	// that runs each pod on one of several (package perpod) chooses by them, as a CRI runtime chooses
	// by the RunPodSandbox request's runtime handler; the others need not look at them.
	RuntimeHandler string   `json:",omitempty"`
	Images         []string `json:",omitempty"`
}

// Port is a port a container declares.
type Port struct {
	// Container is the declaring container; Name the port's name, if any.
	Container, Name string
	// Port is the containerPort; Protocol "TCP" (when empty), "UDP" or "SCTP".
	Port     int32
	Protocol string `json:",omitempty"`
}

// ErrPortHeld says (wrapped) that a pod sharing the host's network declares a port that another pod or
// program on the host holds.
var ErrPortHeld = errors.New("port held")

// DNSConfig is a pod's resolv.conf.
type DNSConfig struct {
	Nameservers, Searches, Options []string
}

// HostAlias is one extra /etc/hosts entry.
type HostAlias struct {
	IP        string
	Hostnames []string
}

// Sandbox is a pod's running sandbox.
type Sandbox struct {
	// PodUID identifies the pod.
	PodUID string
	// IP is the pod's IP (the host's for host-network pods).
	IP string
	// NetNSPath is the network namespace's path, empty for the host's.
	NetNSPath string
	// HostsPath, ResolvConfPath and HostnamePath are files to mount at /etc/hosts, /etc/resolv.conf
	// and /etc/hostname.
	HostsPath, ResolvConfPath, HostnamePath string
	// Labels are those given at creation.
	Labels map[string]string
	// Config is the configuration the sandbox was made with.
	Config SandboxConfig
}

// ContainerConfig describes one container.
type ContainerConfig struct {
	// Name is the container's name in the pod; Attempt counts restarts (0 first).
	Name    string
	Attempt int
	// Init marks one of the pod's init containers: it runs to completion, and the pod's containers
	// wait until it has exited 0. Runtimes that run processes need not look at it.
	Init bool
	// Image is the image reference (as ensured by EnsureImage).
	Image string
	// Command and Args are already expanded ($(VAR) resolved); empty means the image's defaults.
	Command, Args []string
	// Env is the final environment, in order.
	Env []EnvVar
	// WorkingDir is the working directory; empty means the image's.
	WorkingDir string
	// Mounts are bind mounts from host paths (volumes, the sandbox's DNS files).
	Mounts []Mount
	// LogPath is the file the container's stdout and stderr go to, in the CRI log format
	// ("<RFC3339Nano> stdout|stderr F <line>").
	LogPath string
	// Resources are the container's limits.
	Resources Resources
	// TTY and Stdin ask for a terminal and an open stdin.
	TTY, Stdin bool
	// Labels are recorded with the container and returned by ContainerStatus (the kubelet stores the
	// pod UID, container name and attempt there to re-adopt after a restart).
	Labels map[string]string
	// RunAsUser and RunAsGroup, when set, run the process as that user and group.
	RunAsUser, RunAsGroup *int64
	// Privileged runs without confinement.
	Privileged bool
}

// EnvVar is one environment variable.
type EnvVar struct {
	Name, Value string
}

// Mount is a bind mount of HostPath at ContainerPath.
type Mount struct {
	HostPath, ContainerPath string
	ReadOnly                bool
}

// Resources are a container's limits: CPU in millicores, memory in bytes; zero means unlimited.
// CPUShares come from the request.
type Resources struct {
	CPUMillis   int64
	MemoryBytes int64
	CPUShares   int64
}

// ContainerState is where a container is in its life.
type ContainerState string

// Container states.
const (
	StateCreated ContainerState = "created"
	StateRunning ContainerState = "running"
	StateExited  ContainerState = "exited"
	StateUnknown ContainerState = "unknown"
)

// ContainerStatus is what the runtime knows of a container.
type ContainerStatus struct {
	// ID is the runtime's container id; the Pod status shows it as "<runtime>://<id>".
	ID string
	// PodUID and Name come from the labels; Attempt too.
	PodUID, Name string
	Attempt      int
	// Image is the reference the container was made from; ImageID its digest.
	Image, ImageID string
	// State is the container's state.
	State ContainerState
	// CreatedAt, StartedAt and FinishedAt are zero when not reached.
	CreatedAt, StartedAt, FinishedAt time.Time
	// ExitCode is meaningful once exited.
	ExitCode int
	// Reason is "OOMKilled" when the memory limit killed it, "Error" or "Completed" otherwise, once exited.
	Reason string
	// Message gives details, e.g. why it could not start.
	Message string
	// Labels are those given at creation.
	Labels map[string]string
	// LogPath is the container's log file.
	LogPath string
	// Runtime names the runtime that runs the container where one runtime routes pods to several
	// (the Pod status' containerID then reads "<Runtime>://<ID>"); empty: the Runtime's Name.
	Runtime string `json:",omitempty"`
}

// ExecIO connects an exec'd process.
type ExecIO struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	TTY            bool
	// Resize, when set with TTY, delivers terminal size changes.
	Resize <-chan TerminalSize
}

// TerminalSize is a terminal's width and height in characters.
type TerminalSize struct {
	Width, Height uint16
}
