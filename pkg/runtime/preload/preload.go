// Package preload puts images into a Runtime in the background — rayctl's own raysim image, so samples
// run offline with no extra step — and makes any pull of such an image wait until it is in, instead of
// failing against a registry that does not exist.
package preload

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/rayctl/rayctl/pkg/runtime"
)

// Image is one image to load: its reference and how to get its tarball.
type Image struct {
	// Ref is the name the tarball gives the image, e.g. "rayctl.local/raysim:latest".
	Ref string
	// Present reports whether the runtime already holds this very image, so loading can be skipped.
	Present func(ctx context.Context, rt runtime.Runtime) bool
	// Write writes the image tarball to w.
	Write func(w io.Writer) error
	// Loaded is called after a successful load (e.g. to record what was loaded).
	Loaded func()
}

// Runtime is a runtime.Runtime whose EnsureImage waits for the preloaded images.
type Runtime struct {
	runtime.Runtime
	refs map[string]bool
	done chan struct{}
	mu   sync.Mutex
	err  error
}

// Start begins loading images into rt and returns rt wrapped so that pulls of those images wait.
func Start(ctx context.Context, rt runtime.Runtime, images ...Image) *Runtime {
	r := &Runtime{Runtime: rt, refs: map[string]bool{}, done: make(chan struct{})}
	for _, img := range images {
		r.refs[img.Ref] = true
	}
	go func() {
		defer close(r.done)
		for _, img := range images {
			if err := load(ctx, rt, img); err != nil {
				r.mu.Lock()
				r.err = fmt.Errorf("loading %s: %w", img.Ref, err)
				r.mu.Unlock()
				return
			}
		}
	}()
	return r
}

func load(ctx context.Context, rt runtime.Runtime, img Image) error {
	if img.Present != nil && img.Present(ctx, rt) {
		return nil
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(img.Write(pw)) }()
	_, err := rt.ImportImage(ctx, pr)
	pr.CloseWithError(err)
	if err == nil && img.Loaded != nil {
		img.Loaded()
	}
	return err
}

// Wait returns when loading has ended, with its error.
func (r *Runtime) Wait(ctx context.Context) error {
	select {
	case <-r.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// EnsureImage waits for the preload when image is one of the preloaded ones, then asks the runtime.
func (r *Runtime) EnsureImage(ctx context.Context, image string, policy runtime.PullPolicy, progress func(string)) (*runtime.Image, error) {
	if r.refs[image] {
		if err := r.Wait(ctx); err != nil {
			return nil, err
		}
	}
	return r.Runtime.EnsureImage(ctx, image, policy, progress)
}

// Sweep is the wrapped runtime's (see runtime.Sweeper); a runtime that cannot sweep has nothing to
// remove. Images being loaded meanwhile are safe: they are loaded under leases of this process.
func (r *Runtime) Sweep(ctx context.Context, live map[string]bool) ([]string, error) {
	if sw, ok := r.Runtime.(runtime.Sweeper); ok {
		return sw.Sweep(ctx, live)
	}
	return nil, nil
}

// NotifyExits is the wrapped runtime's (see runtime.ExitNotifier); with a runtime that cannot tell of
// exits, fn is never called and the kubelet's relist notices them.
func (r *Runtime) NotifyExits(fn func(id string)) {
	if n, ok := r.Runtime.(runtime.ExitNotifier); ok {
		n.NotifyExits(fn)
	}
}
