package controlplane

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/rayctl/rayctl/pkg/datadir"
	"github.com/rayctl/rayctl/pkg/runtime"
	"github.com/rayctl/rayctl/pkg/runtime/fake"
	"github.com/rayctl/rayctl/pkg/runtime/hostray"
	"github.com/rayctl/rayctl/pkg/runtime/image"
	"github.com/rayctl/rayctl/pkg/runtime/network"
	"github.com/rayctl/rayctl/pkg/runtime/perpod"
	"github.com/rayctl/rayctl/pkg/runtime/preload"
	"github.com/rayctl/rayctl/pkg/runtime/selector"
)

// SimImageRef is the raysim image every `rayctl up` loads into its runtime; the samples use it.
const SimImageRef = "rayctl.local/raysim:latest"

// startRuntime is the "runtime" step: once foundRay says which Ray the host has, it picks the container
// runtime (recording the one chosen in the data dir) and starts loading the raysim image into it; once
// serving is closed (the API server is ready) it publishes the runtime's RuntimeClasses, so its time, taken
// from the start it shares with the API server's step, includes that wait. What happens to a private
// containerd later (it died, it was restarted) is printed to Config.Out and logged.
func (cp *ControlPlane) startRuntime(ctx context.Context, foundRay func() (*hostray.Ray, error), serving <-chan struct{}) (string, error) {
	var err error
	if cp.ray, err = foundRay(); err != nil {
		return "", err
	}
	// Nothing is started once the API server's step has failed (it stopped the components).
	if err := cp.compCtx.Err(); err != nil {
		return "", err
	}
	cfg, dir := cp.cfg, cp.dir
	if err := dir.WriteNodeConfig(datadir.NodeConfig{Runtime: cfg.Runtime, PodCIDR: cfg.PodCIDR, Bridge: cfg.Bridge}); err != nil {
		return "", err
	}
	logger := cp.logger.Named("runtime")
	choice, err := selector.Select(ctx, cfg.Runtime, selector.Options{
		DataDir:  dir.Path,
		Ray:      cfg.Ray,
		HostRay:  cp.ray,
		Network:  network.Config{Bridge: cfg.Bridge, CIDR: cfg.PodCIDR, HostOnly: cp.sandbox.Mode == SandboxHost},
		Rootless: cp.sandbox.Mode == SandboxRootless,
		NewFake: func() (runtime.Runtime, error) {
			return fake.New(fake.Options{Images: []string{SimImageRef}}), nil
		},
		Logf: func(format string, args ...any) {
			msg := fmt.Sprintf(format, args...)
			fmt.Fprintf(cp.out, "runtime: %s\n", msg)
			logger.Warn(msg)
		},
	})
	if err != nil {
		return "", err
	}
	cp.rt = choice
	if choice.Network != nil {
		// The node namespace, with the bridge, exists before anything listens in it for pods.
		if err := choice.Network.EnsureNode(); err != nil {
			return "", err
		}
		cp.podNet.Store(choice.Network)
	}
	if choice.Name == selector.Fake {
		cp.images = preload.Start(ctx, choice.Runtime)
	} else {
		// Building the image (a gzipped layer of raysim) took a tenth of a cold start's CPU when it ran
		// beside the start-up: it waits until ready. No pod can be created before that anyway.
		img := simImage(dir, cfg.Version, choice.Name)
		write := img.Write
		img.Write = func(w io.Writer) error {
			select {
			case <-cp.ready:
			case <-ctx.Done():
				return ctx.Err()
			}
			return write(w)
		}
		cp.images = preload.Start(ctx, choice.Runtime, img)
	}
	// The runtime chosen, not "auto": `down --purge` must find it whatever auto would take then.
	if err := dir.WriteNodeConfig(datadir.NodeConfig{Runtime: choice.Name, PodCIDR: cfg.PodCIDR, Bridge: cfg.Bridge}); err != nil {
		return "", err
	}
	select {
	case <-serving:
	case <-cp.compCtx.Done(): // the API server's step failed
		return "", cp.compCtx.Err()
	case <-ctx.Done():
		return "", ctx.Err()
	}
	client, err := kubernetes.NewForConfig(cp.server.LoopbackConfig)
	if err != nil {
		return "", err
	}
	handlers, err := publishRuntimeClasses(ctx, client, choice.Name)
	if err != nil {
		return "", err
	}
	return choice.Reason + runtimeClassLine(handlers), nil
}

// dialPods connects to a pod IP the way the node reaches pods: from inside the node network namespace
// (the host's has no route to pods), or from the host's where pods share it (and before the runtime
// is chosen, when no pod exists).
func (cp *ControlPlane) dialPods(ctx context.Context, network, addr string) (net.Conn, error) {
	if m := cp.podNet.Load(); m != nil {
		return m.DialContext(ctx, network, addr)
	}
	return (&net.Dialer{}).DialContext(ctx, network, addr)
}

// simImage builds the raysim image from simBinary and this very binary, unless the runtime already
// holds the image made from them (recorded by the binaries' paths, sizes and modification times, and
// the runtime's name). A runtime that runs each pod on one of several (package perpod) holds it when
// each of them does: any of them may run the image.
func simImage(dir *datadir.Dir, version, runtimeName string) preload.Image {
	rayctl, _ := os.Executable()
	self := simBinary(rayctl, version)
	marker := dir.Join("raysim-image")
	key := "runtime " + runtimeName + "\n"
	for _, bin := range slices.Compact([]string{self, rayctl}) {
		st, err := os.Stat(bin)
		if err != nil {
			key = ""
			break
		}
		key += fmt.Sprintf("%s %s %d %d\n", SimImageRef, bin, st.Size(), st.ModTime().UnixNano())
	}
	return preload.Image{
		Ref: SimImageRef,
		Present: func(ctx context.Context, rt runtime.Runtime) bool {
			if b, err := os.ReadFile(marker); err != nil || string(b) != key {
				return false
			}
			each := []runtime.Runtime{rt}
			if pp, ok := rt.(*perpod.Runtime); ok {
				each = each[:0]
				for _, s := range pp.Siblings() {
					each = append(each, s.Runtime)
				}
			}
			for _, rt := range each {
				images, err := rt.ListImages(ctx)
				if err != nil || !slices.ContainsFunc(images, func(i *runtime.Image) bool { return i.Ref == SimImageRef }) {
					return false
				}
			}
			return true
		},
		Write: func(w io.Writer) error {
			_, err := image.BuildSimImage(w, image.SimImageOptions{RayBinary: self, RayctlBinary: rayctlIfApart(rayctl, self), Version: version, Ref: SimImageRef})
			return err
		},
		Loaded: func() { _ = os.WriteFile(marker, []byte(key), 0o600) },
	}
}

// simBinary is what the raysim image carries as /usr/bin/ray: the raysim binary that `make build` puts
// beside rayctl (self) when it reports rayctl's own version, else rayctl itself, which is raysim too
// when invoked as `ray`. Each `ray` or `wget` a pod runs is a new process, several of them one after
// another on the way to a RayJob's completion; raysim alone starts in ~10 ms, rayctl in 0.1–0.2 s.
// An unversioned build ("dev") cannot tell a stale raysim from a fresh one and always uses rayctl.
func simBinary(self, version string) string {
	if self == "" || version == "" || version == "dev" {
		return self
	}
	sim := filepath.Join(filepath.Dir(self), "raysim")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, sim, "--version").Output()
	if err != nil || !strings.Contains(string(out), "version "+version+"+raysim") {
		return self
	}
	return sim
}

// rayctlIfApart is rayctl when the image's ray (sim) is another binary (it then goes in as
// /usr/bin/rayctl), else "".
func rayctlIfApart(rayctl, sim string) string {
	if sim == rayctl {
		return ""
	}
	return rayctl
}
