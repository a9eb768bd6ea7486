// Package perpod is a runtime.Runtime that runs each pod on one of several sibling runtimes, all on one
// pod network: Ray's images on the process runtime (the host's Ray, or raysim), every other image on
// containerd. The kubelet sees one runtime; each call goes to the sibling that owns the pod or
// container, and listings merge the siblings'.
//
// A pod's sibling is chosen once, when its sandbox is made (see Route): by the handler of the
// RuntimeClass its spec.runtimeClassName names, when it names one ("process" or "containerd"; any other
// handler fails the sandbox, as a CRI runtime refuses a handler it lacks), else by its images.
// The choice is written into the sandbox's labels (LabelRuntime), which the pod network keeps, so a
// restarted rayctl finds each pod's runtime again.
package perpod

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rayctl/rayctl/pkg/runtime"
	"github.com/rayctl/rayctl/pkg/runtime/hostray"
)

// LabelRuntime is the sandbox label that records which sibling runs the pod (its handler).
const LabelRuntime = "rayctl.io/runtime"

// ErrUnknownHandler is returned (wrapped) for a pod whose RuntimeClass's handler names no sibling.
var ErrUnknownHandler = errors.New("unknown runtime handler")

// Sibling is one runtime of the set and its handler name, which a RuntimeClass's handler gives to ask
// for it (as a Kubernetes RuntimeClass's handler names a CRI runtime handler).
type Sibling struct {
	// Handler is the name, e.g. "process" or "containerd".
	Handler string
	// Runtime runs the pods routed to it.
	Runtime runtime.Runtime
	// Runs says in a few words what it runs, for the unknown-class error ("Ray's images on the host's Ray").
	Runs string
}

// Runtime routes each pod to one Sibling.
type Runtime struct {
	// ray runs pods with a Ray image; images runs the rest.
	ray, images Sibling

	mu         sync.Mutex
	pods       map[string]*Sibling // pod UID → owner
	containers map[string]*Sibling // container ID → owner
}

// New makes a Runtime: ray runs the pods that have one of Ray's images (rayproject/ray…), images every
// other pod. Their handlers must differ.
func New(ray, images Sibling) (*Runtime, error) {
	if ray.Runtime == nil || images.Runtime == nil || ray.Handler == "" || images.Handler == "" {
		return nil, errors.New("perpod: two runtimes with handler names are required")
	}
	if ray.Handler == images.Handler {
		return nil, fmt.Errorf("perpod: both runtimes are named %q", ray.Handler)
	}
	return &Runtime{ray: ray, images: images, pods: map[string]*Sibling{}, containers: map[string]*Sibling{}}, nil
}

// siblings lists the runtimes, the default one (images) first.
func (r *Runtime) siblings() []*Sibling { return []*Sibling{&r.images, &r.ray} }

// Siblings returns the runtimes routed to, the default one first.
func (r *Runtime) Siblings() []Sibling { return []Sibling{r.images, r.ray} }

// Route says which sibling runs a pod with this sandbox config: the one its runtime handler names; else
// the Ray runtime when one of its images is Ray's (hostray.RunsImage: a pod of Ray's image with a
// sidecar of another runs on Ray's runtime, where Ray is); else the images runtime.
func (r *Runtime) Route(cfg runtime.SandboxConfig) (Sibling, error) {
	s, err := r.route(cfg)
	if err != nil {
		return Sibling{}, err
	}
	return *s, nil
}

func (r *Runtime) route(cfg runtime.SandboxConfig) (*Sibling, error) {
	if cfg.RuntimeHandler != "" {
		if s := r.byHandler(cfg.RuntimeHandler); s != nil {
			return s, nil
		}
		var known []string
		for _, s := range r.siblings() {
			known = append(known, fmt.Sprintf("%q (%s)", s.Handler, s.Runs))
		}
		return nil, fmt.Errorf("%w %q: this node's runtime handlers are %s", ErrUnknownHandler, cfg.RuntimeHandler, strings.Join(known, " and "))
	}
	if slices.ContainsFunc(cfg.Images, hostray.RunsImage) {
		return &r.ray, nil
	}
	return &r.images, nil
}

func (r *Runtime) byHandler(h string) *Sibling {
	for _, s := range r.siblings() {
		if s.Handler == h {
			return s
		}
	}
	return nil
}

// Name is the siblings' handlers joined, e.g. "containerd+process".
func (r *Runtime) Name() string { return r.images.Handler + "+" + r.ray.Handler }

// Version is the siblings' versions, e.g. "containerd://1.6.20,process://linux-netns".
func (r *Runtime) Version(ctx context.Context) (string, error) {
	var vs []string
	for _, s := range r.siblings() {
		v, err := s.Runtime.Version(ctx)
		if err != nil {
			return "", fmt.Errorf("%s: %w", s.Handler, err)
		}
		vs = append(vs, v)
	}
	return strings.Join(vs, ","), nil
}

// RunSandbox makes the pod's sandbox on the sibling Route picks (or on the one that already holds it).
func (r *Runtime) RunSandbox(ctx context.Context, cfg runtime.SandboxConfig) (*runtime.Sandbox, error) {
	s := r.podOwner(ctx, cfg.PodUID)
	if s == nil {
		var err error
		if s, err = r.route(cfg); err != nil {
			return nil, err
		}
	}
	labels := make(map[string]string, len(cfg.Labels)+1)
	for k, v := range cfg.Labels {
		labels[k] = v
	}
	labels[LabelRuntime] = s.Handler
	cfg.Labels = labels
	sb, err := s.Runtime.RunSandbox(ctx, cfg)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.pods[cfg.PodUID] = s
	r.mu.Unlock()
	return sb, nil
}

// RemoveSandbox removes the pod's sandbox on its sibling; where no sibling is known to own it, on every
// one (removing a missing sandbox is no error).
func (r *Runtime) RemoveSandbox(ctx context.Context, podUID string) error {
	owners := r.siblings()
	if s := r.podOwner(ctx, podUID); s != nil {
		owners = []*Sibling{s}
	}
	var errs []error
	for _, s := range owners {
		if err := s.Runtime.RemoveSandbox(ctx, podUID); err != nil && !errors.Is(err, runtime.ErrNotFound) {
			errs = append(errs, fmt.Errorf("%s: %w", s.Handler, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	r.mu.Lock()
	delete(r.pods, podUID)
	r.mu.Unlock()
	return nil
}

// ListSandboxes merges the siblings' sandboxes (one per pod: siblings that share a pod network may list
// the same ones) and learns each pod's owner from its LabelRuntime. A sandbox without one (made by a
// rayctl that ran one runtime) belongs to the sibling holding containers of its pod, else to the one
// Route picks for it.
func (r *Runtime) ListSandboxes(ctx context.Context) ([]*runtime.Sandbox, error) {
	var out, unlabeled []*runtime.Sandbox
	seen := map[string]bool{}
	for _, s := range r.siblings() {
		list, err := s.Runtime.ListSandboxes(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Handler, err)
		}
		for _, sb := range list {
			if seen[sb.PodUID] {
				continue
			}
			seen[sb.PodUID] = true
			out = append(out, sb)
			if owner := r.byHandler(sb.Labels[LabelRuntime]); owner != nil {
				r.mu.Lock()
				r.pods[sb.PodUID] = owner
				r.mu.Unlock()
			} else {
				unlabeled = append(unlabeled, sb)
			}
		}
	}
	if len(unlabeled) > 0 {
		r.adoptUnlabeled(ctx, unlabeled)
	}
	return out, nil
}

// adoptUnlabeled settles the owners of sandboxes without LabelRuntime (see ListSandboxes).
func (r *Runtime) adoptUnlabeled(ctx context.Context, sbs []*runtime.Sandbox) {
	holder := map[string]*Sibling{}
	for _, s := range r.siblings() {
		list, err := s.Runtime.ListContainers(ctx)
		if err != nil {
			continue
		}
		for _, c := range list {
			holder[c.PodUID] = s
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, sb := range sbs {
		owner := holder[sb.PodUID]
		if owner == nil {
			owner, _ = r.route(sb.Config)
		}
		if owner != nil {
			r.pods[sb.PodUID] = owner
		}
	}
}

// podOwner is the sibling that runs pod uid: known already, or read from the sandboxes' labels; nil when
// no sibling holds a sandbox of it.
func (r *Runtime) podOwner(ctx context.Context, uid string) *Sibling {
	r.mu.Lock()
	s := r.pods[uid]
	r.mu.Unlock()
	if s != nil || uid == "" {
		return s
	}
	if _, err := r.ListSandboxes(ctx); err != nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pods[uid]
}

// imageOwner is the sibling whose images a call with ctx is about: the pod's (runtime.WithPod), else the
// one a pod of only this image would run on.
func (r *Runtime) imageOwner(ctx context.Context, image string) *Sibling {
	if s := r.podOwner(ctx, runtime.PodOf(ctx)); s != nil {
		return s
	}
	s, _ := r.route(runtime.SandboxConfig{Images: []string{image}})
	return s
}

// EnsureImage makes image present on the sibling of the pod ctx is for (see imageOwner).
func (r *Runtime) EnsureImage(ctx context.Context, image string, policy runtime.PullPolicy, progress func(string)) (*runtime.Image, error) {
	return r.imageOwner(ctx, image).Runtime.EnsureImage(ctx, image, policy, progress)
}

// ImportImage loads the tarball into every sibling (any of them may run a pod of its images) and
// returns the names they hold.
func (r *Runtime) ImportImage(ctx context.Context, tarball io.Reader) ([]string, error) {
	f, err := os.CreateTemp("", "rayctl-image-*.tar")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if _, err := io.Copy(f, tarball); err != nil {
		return nil, fmt.Errorf("reading image tarball: %w", err)
	}
	var names []string
	for _, s := range r.siblings() {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
		got, err := s.Runtime.ImportImage(ctx, f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Handler, err)
		}
		for _, n := range got {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	return names, nil
}

// ListImages lists the images of the pod's sibling when ctx is for a pod (runtime.WithPod), else every
// sibling's, each reference once (the default sibling's first).
func (r *Runtime) ListImages(ctx context.Context) ([]*runtime.Image, error) {
	if s := r.podOwner(ctx, runtime.PodOf(ctx)); s != nil {
		return s.Runtime.ListImages(ctx)
	}
	var out []*runtime.Image
	seen := map[string]bool{}
	for _, s := range r.siblings() {
		list, err := s.Runtime.ListImages(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Handler, err)
		}
		for _, img := range list {
			if !seen[img.Ref] {
				seen[img.Ref] = true
				out = append(out, img)
			}
		}
	}
	return out, nil
}

// CreateContainer creates the container on the sibling that holds its sandbox.
func (r *Runtime) CreateContainer(ctx context.Context, sandbox *runtime.Sandbox, cfg runtime.ContainerConfig) (string, error) {
	s := r.podOwner(ctx, sandbox.PodUID)
	if s == nil {
		s = r.byHandler(sandbox.Labels[LabelRuntime])
	}
	if s == nil {
		return "", fmt.Errorf("pod %s has no sandbox on this node's runtimes: %w", sandbox.PodUID, runtime.ErrNotFound)
	}
	id, err := s.Runtime.CreateContainer(ctx, sandbox, cfg)
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	r.containers[id] = s
	r.mu.Unlock()
	return id, nil
}

// owner is the sibling holding container id: known already, else the first that reports it.
func (r *Runtime) owner(ctx context.Context, id string) (*Sibling, error) {
	r.mu.Lock()
	s := r.containers[id]
	r.mu.Unlock()
	if s != nil {
		return s, nil
	}
	for _, s := range r.siblings() {
		if _, err := s.Runtime.ContainerStatus(ctx, id); err == nil {
			r.mu.Lock()
			r.containers[id] = s
			r.mu.Unlock()
			return s, nil
		}
	}
	return nil, fmt.Errorf("container %s: %w", id, runtime.ErrNotFound)
}

// StartContainer starts the container on its sibling.
func (r *Runtime) StartContainer(ctx context.Context, id string) error {
	s, err := r.owner(ctx, id)
	if err != nil {
		return err
	}
	return s.Runtime.StartContainer(ctx, id)
}

// StopContainer stops the container on its sibling.
func (r *Runtime) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	s, err := r.owner(ctx, id)
	if err != nil {
		return err
	}
	return s.Runtime.StopContainer(ctx, id, grace)
}

// RemoveContainer removes the container from its sibling.
func (r *Runtime) RemoveContainer(ctx context.Context, id string) error {
	s, err := r.owner(ctx, id)
	if err != nil {
		return err
	}
	if err := s.Runtime.RemoveContainer(ctx, id); err != nil {
		return err
	}
	r.mu.Lock()
	delete(r.containers, id)
	r.mu.Unlock()
	return nil
}

// ContainerStatus reports the container as its sibling does, naming the sibling (Runtime).
func (r *Runtime) ContainerStatus(ctx context.Context, id string) (*runtime.ContainerStatus, error) {
	s, err := r.owner(ctx, id)
	if err != nil {
		return nil, err
	}
	st, err := s.Runtime.ContainerStatus(ctx, id)
	if err != nil {
		return nil, err
	}
	st.Runtime = s.Handler
	return st, nil
}

// ListContainers merges the siblings' containers, each naming its sibling (Runtime).
func (r *Runtime) ListContainers(ctx context.Context) ([]*runtime.ContainerStatus, error) {
	var out []*runtime.ContainerStatus
	for _, s := range r.siblings() {
		list, err := s.Runtime.ListContainers(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Handler, err)
		}
		r.mu.Lock()
		for _, c := range list {
			c.Runtime = s.Handler
			r.containers[c.ID] = s
		}
		r.mu.Unlock()
		out = append(out, list...)
	}
	return out, nil
}

// Exec runs cmd in the container on its sibling.
func (r *Runtime) Exec(ctx context.Context, id string, cmd []string, stdio runtime.ExecIO) (int, error) {
	s, err := r.owner(ctx, id)
	if err != nil {
		return 0, err
	}
	return s.Runtime.Exec(ctx, id, cmd, stdio)
}

// Sweep sweeps every sibling that can (runtime.Sweeper), each phrase naming its sibling.
func (r *Runtime) Sweep(ctx context.Context, live map[string]bool) ([]string, error) {
	var out []string
	var errs []error
	for _, s := range r.siblings() {
		sw, ok := s.Runtime.(runtime.Sweeper)
		if !ok {
			continue
		}
		got, err := sw.Sweep(ctx, live)
		for _, g := range got {
			out = append(out, g+" ("+s.Handler+")")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.Handler, err))
		}
	}
	return out, errors.Join(errs...)
}

// NotifyExits has fn told of every sibling's container exits (runtime.ExitNotifier); a sibling that
// cannot tell leaves its exits to the kubelet's relist.
func (r *Runtime) NotifyExits(fn func(id string)) {
	for _, s := range r.siblings() {
		if n, ok := s.Runtime.(runtime.ExitNotifier); ok {
			n.NotifyExits(fn)
		}
	}
}

// Close closes every sibling.
func (r *Runtime) Close() error {
	var errs []error
	for _, s := range r.siblings() {
		errs = append(errs, s.Runtime.Close())
	}
	return errors.Join(errs...)
}

var (
	_ runtime.Runtime      = (*Runtime)(nil)
	_ runtime.Sweeper      = (*Runtime)(nil)
	_ runtime.ExitNotifier = (*Runtime)(nil)
)
