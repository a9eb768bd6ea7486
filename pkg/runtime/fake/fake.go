// Package fake is a runtime.Runtime that runs nothing. Sandboxes get made-up IPs, images "pull"
// instantly, and containers move through created → running → exited on a script decided when each is
// created: how long it takes to start, how long it runs, and the exit code it ends with. Unless told
// otherwise, init containers exit 0 after InitRunFor and every other container runs until stopped
// (DefaultScript). Tests use it
// to drive the kubelet's logic and to inspect exactly what the kubelet asked for; scale benchmarks use
// it to run thousands of pods without processes.
//
// States are computed from timestamps when read, so the fake starts no goroutines and needs no
// shutdown.
package fake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/rayctl/rayctl/pkg/runtime"
)

// Script decides what one container does.
type Script struct {
	// StartDelay is how long the container stays created after StartContainer before it runs.
	StartDelay time.Duration
	// RunFor is how long it runs before exiting by itself; zero runs until stopped.
	RunFor time.Duration
	// ExitCode is the code it exits with when RunFor elapses.
	ExitCode int
	// Reason overrides the exit reason (e.g. "OOMKilled"); empty means Completed for 0, else Error.
	Reason string
	// CreateError and StartError make CreateContainer or StartContainer fail. A failed start leaves
	// the container exited with code 128 and reason StartError, as containerd reports it.
	CreateError, StartError error
	// StartErrorLeavesCreated makes a failed start leave the container created instead, as when the
	// runtime could not record the failure (its daemon gone at that moment).
	StartErrorLeavesCreated bool
	// Output lines are written to the container's log file when it starts (as stdout, CRI format).
	Output []string
}

// ScriptFunc picks the script of a container being created in sandbox.
type ScriptFunc func(sandbox *runtime.Sandbox, cfg runtime.ContainerConfig) Script

// InitRunFor is how long an init container runs under DefaultScript before it exits 0.
const InitRunFor = 100 * time.Millisecond

// DefaultScript starts every container at once; an init container (ContainerConfig.Init) exits 0 after
// InitRunFor, as a pod's set-up step that succeeds, and any other container runs until stopped.
func DefaultScript(_ *runtime.Sandbox, cfg runtime.ContainerConfig) Script {
	if cfg.Init {
		return Script{RunFor: InitRunFor}
	}
	return Script{}
}

// ExecFunc answers an Exec into a container: it may write to stdio and returns the exit code.
type ExecFunc func(c *Container, cmd []string, stdio runtime.ExecIO) (int, error)

// Options configure a fake runtime.
type Options struct {
	// Script decides each container's behaviour; nil is DefaultScript.
	Script ScriptFunc
	// Exec answers Exec calls; nil answers 0 to everything.
	Exec ExecFunc
	// SandboxIP gives a pod its IP; nil hands out 10.88.x.y addresses.
	SandboxIP func(cfg runtime.SandboxConfig) string
	// Images are present from the start.
	Images []string
	// PullError, when it returns an error for an image, makes pulling that image fail.
	PullError func(image string) error
}

// Container is the fake's record of one container.
type Container struct {
	// ID is its runtime id.
	ID string
	// Sandbox is the sandbox it was created in.
	Sandbox *runtime.Sandbox
	// Config is what CreateContainer was given.
	Config runtime.ContainerConfig
	// Script is its behaviour.
	Script Script
	// CreatedAt, StartRequestedAt and StoppedAt record the calls; zero when not made.
	CreatedAt, StartRequestedAt, StoppedAt time.Time
	// StopGrace is the grace period the first StopContainer call gave.
	StopGrace time.Duration
	// Removed is set by RemoveContainer (removed containers are kept in History only).
	Removed bool

	forcedExit *exit
}

type exit struct {
	at     time.Time
	code   int
	reason string
}

// Runtime is the fake runtime. Its zero value is not usable; call New.
type Runtime struct {
	opts Options

	mu         sync.Mutex
	sandboxes  map[string]*runtime.Sandbox
	containers map[string]*Container
	history    []*Container
	images     map[string]*runtime.Image
	pulls      map[string]int
	nextID     int
	nextIP     int
}

var _ runtime.Runtime = (*Runtime)(nil)

// New returns a fake runtime with no sandboxes or containers.
func New(opts Options) *Runtime {
	r := &Runtime{
		opts:       opts,
		sandboxes:  map[string]*runtime.Sandbox{},
		containers: map[string]*Container{},
		images:     map[string]*runtime.Image{},
		pulls:      map[string]int{},
	}
	for _, ref := range opts.Images {
		r.images[ref] = fakeImage(ref)
	}
	return r
}

// SetScript replaces the script function for containers created from now on.
func (r *Runtime) SetScript(f ScriptFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.opts.Script = f
}

// SetExec replaces the exec function.
func (r *Runtime) SetExec(f ExecFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.opts.Exec = f
}

func fakeImage(ref string) *runtime.Image {
	return &runtime.Image{Ref: ref, ID: fmt.Sprintf("sha256:%064x", hash(ref)), Size: 1 << 20}
}

func hash(s string) uint64 {
	var h uint64 = 14695981039346656037
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// Name returns "fake".
func (r *Runtime) Name() string { return "fake" }

// Version returns "fake://0.1".
func (r *Runtime) Version(ctx context.Context) (string, error) { return "fake://0.1", nil }

// RunSandbox records the sandbox and gives it an IP; for a known pod UID it returns the existing one.
func (r *Runtime) RunSandbox(ctx context.Context, cfg runtime.SandboxConfig) (*runtime.Sandbox, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sb, ok := r.sandboxes[cfg.PodUID]; ok {
		return copySandbox(sb), nil
	}
	ip := ""
	switch {
	case r.opts.SandboxIP != nil:
		ip = r.opts.SandboxIP(cfg)
	case cfg.HostNetwork:
		ip = "127.0.0.1"
	default:
		r.nextIP++
		ip = fmt.Sprintf("10.88.%d.%d", r.nextIP/250, r.nextIP%250+2)
	}
	sb := &runtime.Sandbox{PodUID: cfg.PodUID, IP: ip, Labels: copyMap(cfg.Labels), Config: cfg}
	if !cfg.HostNetwork {
		sb.NetNSPath = "/var/run/netns/fake-" + cfg.PodUID
	}
	if cfg.Dir != "" {
		sb.HostsPath = filepath.Join(cfg.Dir, "etc-hosts")
		sb.ResolvConfPath = filepath.Join(cfg.Dir, "resolv.conf")
		sb.HostnamePath = filepath.Join(cfg.Dir, "hostname")
	}
	r.sandboxes[cfg.PodUID] = sb
	return copySandbox(sb), nil
}

// RemoveSandbox forgets the pod's sandbox; it fails while containers of the pod remain.
func (r *Runtime) RemoveSandbox(ctx context.Context, podUID string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.containers {
		if c.Sandbox.PodUID == podUID {
			return fmt.Errorf("sandbox of pod %s still has container %s", podUID, c.ID)
		}
	}
	delete(r.sandboxes, podUID)
	return nil
}

// ListSandboxes returns the sandboxes, ordered by pod UID.
func (r *Runtime) ListSandboxes(ctx context.Context) ([]*runtime.Sandbox, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*runtime.Sandbox
	for _, sb := range r.sandboxes {
		out = append(out, copySandbox(sb))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PodUID < out[j].PodUID })
	return out, nil
}

// EnsureImage applies the pull policy: present images are returned unless the policy is Always,
// absent ones are "pulled" (counted in Pulls) unless the policy is Never.
func (r *Runtime) EnsureImage(ctx context.Context, image string, policy runtime.PullPolicy, progress func(string)) (*runtime.Image, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	img, present := r.images[image]
	if present && policy != runtime.PullAlways {
		return img, nil
	}
	if !present && policy == runtime.PullNever {
		return nil, fmt.Errorf("%s: %w", image, runtime.ErrImageNeverPull)
	}
	if r.opts.PullError != nil {
		if err := r.opts.PullError(image); err != nil {
			return nil, err
		}
	}
	r.pulls[image]++
	if progress != nil {
		progress("pulled " + image)
	}
	img = fakeImage(image)
	r.images[image] = img
	return img, nil
}

// ImportImage reads the tarball and names one image after its length; it exists for completeness.
func (r *Runtime) ImportImage(ctx context.Context, tarball io.Reader) ([]string, error) {
	n, err := io.Copy(io.Discard, tarball)
	if err != nil {
		return nil, err
	}
	ref := fmt.Sprintf("fake.local/imported:%d", n)
	r.mu.Lock()
	r.images[ref] = fakeImage(ref)
	r.mu.Unlock()
	return []string{ref}, nil
}

// ListImages lists the present images.
func (r *Runtime) ListImages(ctx context.Context) ([]*runtime.Image, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*runtime.Image
	for _, img := range r.images {
		c := *img
		out = append(out, &c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ref < out[j].Ref })
	return out, nil
}

// Pulls returns how many times image was pulled.
func (r *Runtime) Pulls(image string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pulls[image]
}

// CreateContainer records the container with its script.
func (r *Runtime) CreateContainer(ctx context.Context, sandbox *runtime.Sandbox, cfg runtime.ContainerConfig) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sb, ok := r.sandboxes[sandbox.PodUID]
	if !ok {
		return "", fmt.Errorf("sandbox of pod %s: %w", sandbox.PodUID, runtime.ErrNotFound)
	}
	scriptOf := r.opts.Script
	if scriptOf == nil {
		scriptOf = DefaultScript
	}
	script := scriptOf(copySandbox(sb), cfg)
	if script.CreateError != nil {
		return "", script.CreateError
	}
	r.nextID++
	c := &Container{
		ID:        fmt.Sprintf("fake%06d", r.nextID),
		Sandbox:   sb,
		Config:    copyConfig(cfg),
		Script:    script,
		CreatedAt: time.Now(),
	}
	r.containers[c.ID] = c
	r.history = append(r.history, c)
	return c.ID, nil
}

// StartContainer starts the clock on the container's script and writes its output lines to its log.
func (r *Runtime) StartContainer(ctx context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[id]
	if !ok {
		return fmt.Errorf("container %s: %w", id, runtime.ErrNotFound)
	}
	if !c.StartRequestedAt.IsZero() {
		return fmt.Errorf("container %s was already started", id)
	}
	if c.Script.StartError != nil {
		if !c.Script.StartErrorLeavesCreated {
			c.forcedExit = &exit{at: time.Now(), code: 128, reason: "StartError"}
		}
		return c.Script.StartError
	}
	c.StartRequestedAt = time.Now()
	if c.Config.LogPath != "" {
		if err := writeLog(c.Config.LogPath, c.Script.Output); err != nil {
			return err
		}
	}
	return nil
}

func writeLog(path string, lines []string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, l := range lines {
		if _, err := fmt.Fprintf(f, "%s stdout F %s\n", time.Now().UTC().Format(time.RFC3339Nano), l); err != nil {
			return err
		}
	}
	return nil
}

// StopContainer makes a running or created container exit now: 143 (SIGTERM) when it was running.
func (r *Runtime) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[id]
	if !ok {
		return fmt.Errorf("container %s: %w", id, runtime.ErrNotFound)
	}
	now := time.Now()
	st := c.status(now)
	if c.StoppedAt.IsZero() {
		c.StoppedAt, c.StopGrace = now, grace
	}
	switch st.State {
	case runtime.StateRunning:
		c.forcedExit = &exit{at: now, code: 143, reason: "Error"}
	case runtime.StateCreated:
		c.forcedExit = &exit{at: now, code: 0, reason: "Completed"}
	}
	return nil
}

// Exit makes a container exit now with code (as if its process ended); it is for tests.
func (r *Runtime) Exit(id string, code int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[id]
	if !ok {
		return fmt.Errorf("container %s: %w", id, runtime.ErrNotFound)
	}
	if c.status(time.Now()).State != runtime.StateExited {
		reason := "Completed"
		if code != 0 {
			reason = "Error"
		}
		c.forcedExit = &exit{at: time.Now(), code: code, reason: reason}
	}
	return nil
}

// RemoveContainer forgets a container that is not running.
func (r *Runtime) RemoveContainer(ctx context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[id]
	if !ok {
		return fmt.Errorf("container %s: %w", id, runtime.ErrNotFound)
	}
	if c.status(time.Now()).State == runtime.StateRunning {
		return fmt.Errorf("container %s is running", id)
	}
	c.Removed = true
	delete(r.containers, id)
	return nil
}

// ContainerStatus reports a container's state as of now.
func (r *Runtime) ContainerStatus(ctx context.Context, id string) (*runtime.ContainerStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[id]
	if !ok {
		return nil, fmt.Errorf("container %s: %w", id, runtime.ErrNotFound)
	}
	return c.status(time.Now()), nil
}

// ListContainers reports every container not removed, ordered by id.
func (r *Runtime) ListContainers(ctx context.Context) ([]*runtime.ContainerStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	var out []*runtime.ContainerStatus
	for _, c := range r.containers {
		out = append(out, c.status(now))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Exec answers through Options.Exec; exec into a container that is not running fails.
func (r *Runtime) Exec(ctx context.Context, id string, cmd []string, stdio runtime.ExecIO) (int, error) {
	r.mu.Lock()
	c, ok := r.containers[id]
	var snapshot Container
	if ok {
		snapshot = *c
	}
	running := ok && c.status(time.Now()).State == runtime.StateRunning
	f := r.opts.Exec
	r.mu.Unlock()
	if !ok {
		return -1, fmt.Errorf("container %s: %w", id, runtime.ErrNotFound)
	}
	if !running {
		return -1, fmt.Errorf("container %s is not running", id)
	}
	if f == nil {
		return 0, nil
	}
	return f(&snapshot, cmd, stdio)
}

// Close does nothing; the fake's state stays, as a real runtime's containers keep running.
func (r *Runtime) Close() error { return nil }

// History returns every container ever created, removed ones included, in creation order.
func (r *Runtime) History() []Container {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Container, len(r.history))
	for i, c := range r.history {
		out[i] = *c
	}
	return out
}

// Find returns the containers (removed ones included) of the pod with this UID and container name,
// in creation order.
func (r *Runtime) Find(podUID, name string) []Container {
	var out []Container
	for _, c := range r.History() {
		if c.Sandbox.PodUID == podUID && c.Config.Name == name {
			out = append(out, c)
		}
	}
	return out
}

// ErrNoContainer is returned by Latest when a pod has no container of that name.
var ErrNoContainer = errors.New("no such container")

// Latest returns the newest container of a pod with this name.
func (r *Runtime) Latest(podUID, name string) (Container, error) {
	cs := r.Find(podUID, name)
	if len(cs) == 0 {
		return Container{}, ErrNoContainer
	}
	return cs[len(cs)-1], nil
}

// status computes c's state at now; r.mu must be held.
func (c *Container) status(now time.Time) *runtime.ContainerStatus {
	st := &runtime.ContainerStatus{
		ID:        c.ID,
		PodUID:    c.Sandbox.PodUID,
		Name:      c.Config.Name,
		Attempt:   c.Config.Attempt,
		Image:     c.Config.Image,
		ImageID:   fakeImage(c.Config.Image).ID,
		State:     runtime.StateCreated,
		CreatedAt: c.CreatedAt,
		Labels:    copyMap(c.Config.Labels),
		LogPath:   c.Config.LogPath,
	}
	var startedAt time.Time
	if !c.StartRequestedAt.IsZero() {
		startedAt = c.StartRequestedAt.Add(c.Script.StartDelay)
	}
	naturalEnd := time.Time{}
	if !startedAt.IsZero() && c.Script.RunFor > 0 {
		naturalEnd = startedAt.Add(c.Script.RunFor)
	}
	end, code, reason := time.Time{}, 0, ""
	if !naturalEnd.IsZero() && !now.Before(naturalEnd) {
		end, code, reason = naturalEnd, c.Script.ExitCode, c.Script.Reason
	}
	if f := c.forcedExit; f != nil && (end.IsZero() || f.at.Before(end)) {
		end, code, reason = f.at, f.code, f.reason
	}
	switch {
	case !end.IsZero():
		st.State = runtime.StateExited
		st.FinishedAt = end
		if !startedAt.IsZero() && !startedAt.After(end) {
			st.StartedAt = startedAt
		}
		st.ExitCode = code
		if reason == "" {
			reason = "Completed"
			if code != 0 {
				reason = "Error"
			}
		}
		st.Reason = reason
	case !startedAt.IsZero() && !now.Before(startedAt):
		st.State = runtime.StateRunning
		st.StartedAt = startedAt
	}
	return st
}

func copySandbox(sb *runtime.Sandbox) *runtime.Sandbox {
	c := *sb
	c.Labels = copyMap(sb.Labels)
	return &c
}

func copyConfig(cfg runtime.ContainerConfig) runtime.ContainerConfig {
	cfg.Command = append([]string(nil), cfg.Command...)
	cfg.Args = append([]string(nil), cfg.Args...)
	cfg.Env = append([]runtime.EnvVar(nil), cfg.Env...)
	cfg.Mounts = append([]runtime.Mount(nil), cfg.Mounts...)
	cfg.Labels = copyMap(cfg.Labels)
	return cfg
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
