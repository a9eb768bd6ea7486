package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"

	"go.uber.org/zap"

	"github.com/rayctl/rayctl/pkg/datadir"
	"github.com/rayctl/rayctl/pkg/runtime"
	"github.com/rayctl/rayctl/pkg/runtime/fake"
	"github.com/rayctl/rayctl/pkg/runtime/hostray"
	"github.com/rayctl/rayctl/pkg/runtime/image"
	"github.com/rayctl/rayctl/pkg/runtime/network"
	"github.com/rayctl/rayctl/pkg/runtime/preload"
	"github.com/rayctl/rayctl/pkg/runtime/selector"
)

// SimImageRef is the raysim image every `rayctl up` loads into its runtime; the samples use it.
const SimImageRef = "rayctl.local/raysim:latest"

// startRuntime picks the container runtime and starts loading the raysim image into it. What happens to
// a private containerd later (it died, it was restarted) is printed to out and logged.
func startRuntime(ctx context.Context, dir *datadir.Dir, o *upOptions, ray *hostray.Ray, out io.Writer, logger *zap.Logger) (*selector.Choice, *preload.Runtime, error) {
	choice, err := selector.Select(ctx, o.runtime, selector.Options{
		DataDir: dir.Path,
		Ray:     o.ray,
		HostRay: ray,
		Network: network.Config{Bridge: o.bridge, CIDR: o.podCIDR},
		NewFake: func() (runtime.Runtime, error) {
			return fake.New(fake.Options{Images: []string{SimImageRef}}), nil
		},
		Logf: func(format string, args ...any) {
			msg := fmt.Sprintf(format, args...)
			fmt.Fprintf(out, "runtime: %s\n", msg)
			logger.Warn(msg)
		},
	})
	if err != nil {
		return nil, nil, err
	}
	if choice.Name == selector.Fake {
		return choice, preload.Start(ctx, choice.Runtime), nil
	}
	return choice, preload.Start(ctx, choice.Runtime, simImage(dir)), nil
}

// simImage builds the raysim image from this very binary, unless the runtime already holds the image
// made from it (recorded by the binary's size and modification time).
func simImage(dir *datadir.Dir) preload.Image {
	self, _ := os.Executable()
	marker := dir.Join("raysim-image")
	key := ""
	if st, err := os.Stat(self); err == nil {
		key = fmt.Sprintf("%s %s %d %d\n", SimImageRef, self, st.Size(), st.ModTime().UnixNano())
	}
	return preload.Image{
		Ref: SimImageRef,
		Present: func(ctx context.Context, rt runtime.Runtime) bool {
			if b, err := os.ReadFile(marker); err != nil || string(b) != key {
				return false
			}
			images, err := rt.ListImages(ctx)
			return err == nil && slices.ContainsFunc(images, func(i *runtime.Image) bool { return i.Ref == SimImageRef })
		},
		Write: func(w io.Writer) error {
			_, err := image.BuildSimImage(w, image.SimImageOptions{RayBinary: self, Version: Version, Ref: SimImageRef})
			return err
		},
		Loaded: func() { _ = os.WriteFile(marker, []byte(key), 0o600) },
	}
}
