package containerd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	ctrd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"
	"github.com/distribution/reference"

	"github.com/rayctl/rayctl/pkg/runtime"
)

// LocalRegistry is the registry name of images that exist only locally
// (raysim's, and whatever `rayctl image load` brings): they are never pulled,
// so pull policy Always uses the local copy.
const LocalRegistry = "rayctl.local"

// NormalizeRef spells an image reference the way containerd stores it:
// "busybox" becomes "docker.io/library/busybox:latest".
func NormalizeRef(ref string) string {
	named, err := reference.ParseDockerRef(ref)
	if err != nil {
		return ref
	}
	return named.String()
}

// getImage finds ref as given or normalized.
func (r *Runtime) getImage(ctx context.Context, ref string) (ctrd.Image, error) {
	img, err := r.client.GetImage(ctx, NormalizeRef(ref))
	if errdefs.IsNotFound(err) && NormalizeRef(ref) != ref {
		img, err = r.client.GetImage(ctx, ref)
	}
	if errdefs.IsNotFound(err) {
		return nil, fmt.Errorf("image %s: %w", ref, runtime.ErrNotFound)
	}
	return img, err
}

// EnsureImage makes the image present per policy, pulling (and unpacking) it
// from its registry when needed. A failed pull comes back as an error saying
// "pulling image …: <containerd's reason>", what the kubelet shows as
// ErrImagePull.
func (r *Runtime) EnsureImage(ctx context.Context, ref string, policy runtime.PullPolicy, progress func(string)) (*runtime.Image, error) {
	ctx = r.ctx(ctx)
	if progress == nil {
		progress = func(string) {}
	}
	img, err := r.getImage(ctx, ref)
	present := err == nil
	if err != nil && !errors.Is(err, runtime.ErrNotFound) {
		return nil, err
	}
	local := strings.HasPrefix(NormalizeRef(ref), LocalRegistry+"/")
	switch {
	case present && (policy != runtime.PullAlways || local):
	case policy == runtime.PullNever:
		return nil, fmt.Errorf("image %s: %w", ref, runtime.ErrImageNeverPull)
	case local:
		return nil, fmt.Errorf("pulling image %s: %s images are never pulled; load it with `rayctl image load` (or `rayctl image build-sim` for raysim)", ref, LocalRegistry)
	default:
		progress("Pulling image " + ref)
		img, err = r.client.Pull(ctx, NormalizeRef(ref), ctrd.WithPullUnpack, ctrd.WithPullSnapshotter(r.snap))
		if err != nil {
			return nil, fmt.Errorf("pulling image %s: %w", ref, err)
		}
		progress("Pulled image " + ref)
	}
	if ok, err := img.IsUnpacked(ctx, r.snap); err == nil && !ok {
		progress("Unpacking image " + ref)
		if err := img.Unpack(ctx, r.snap); err != nil {
			return nil, fmt.Errorf("unpacking image %s: %w%s", ref, err, unmappedHint())
		}
	}
	d, err := describe(ctx, img, ref)
	if err == nil && r.noLimits != "" {
		d.Notes = append(d.Notes, runtime.Note{Reason: "LimitsNotEnforced", Message: r.noLimits})
	}
	return d, err
}

// describe turns a containerd image into the runtime's Image.
func describe(ctx context.Context, img ctrd.Image, ref string) (*runtime.Image, error) {
	spec, err := img.Spec(ctx)
	if err != nil {
		return nil, fmt.Errorf("image %s: reading its config: %w", ref, err)
	}
	size, _ := img.Size(ctx)
	return &runtime.Image{Ref: ref, ID: img.Target().Digest.String(), Size: size,
		Entrypoint: spec.Config.Entrypoint, Cmd: spec.Config.Cmd, Env: spec.Config.Env,
		WorkingDir: spec.Config.WorkingDir, User: spec.Config.User}, nil
}

// ImportImage loads an OCI (or docker) image tarball and unpacks it; the
// names come from the index's io.containerd.image.name annotations.
func (r *Runtime) ImportImage(ctx context.Context, tarball io.Reader) ([]string, error) {
	return ImportImage(r.ctx(ctx), r.client, tarball)
}

// ListImages lists the images of the runtime's namespace.
func (r *Runtime) ListImages(ctx context.Context) ([]*runtime.Image, error) {
	ctx = r.ctx(ctx)
	imgs, err := r.client.ListImages(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*runtime.Image, 0, len(imgs))
	for _, img := range imgs {
		d, err := describe(ctx, img, img.Name())
		if err != nil {
			// An image whose content is partly gone is listed by name alone.
			d = &runtime.Image{Ref: img.Name(), ID: img.Target().Digest.String()}
		}
		out = append(out, d)
	}
	return out, nil
}
