package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/rayctl/rayctl/pkg/datadir"
	"github.com/rayctl/rayctl/pkg/kubelet/volume"
	"github.com/rayctl/rayctl/pkg/runtime"
	"github.com/rayctl/rayctl/pkg/runtime/network"
	"github.com/rayctl/rayctl/pkg/runtime/selector"
)

// errFakeRuntime says the data dir runs the fake runtime, which has no containers to reach.
var errFakeRuntime = errors.New("no container runtime")

// openRuntime reaches the container runtime of a data dir: the running instance's (through its
// containerd socket), else the one recorded for it (a private containerd is started for the occasion).
// The caller must Close the choice.
func openRuntime(ctx context.Context, dir *datadir.Dir) (*selector.Choice, error) {
	cfg, ok := dir.ReadNodeConfig()
	if !ok {
		cfg = datadir.NodeConfig{Runtime: selector.Auto}
	}
	opts := selector.Options{DataDir: dir.Path, Network: network.Config{Bridge: cfg.Bridge, CIDR: cfg.PodCIDR}}
	name := cfg.Runtime
	if st, err := dir.ReadState(); err == nil {
		switch {
		case st.ContainerdSocket != "":
			name, opts.SystemSocket = selector.Containerd, st.ContainerdSocket
		case st.Runtime != "":
			name = st.Runtime
		}
	} else if !errors.Is(err, datadir.ErrNotRunning) {
		return nil, err
	}
	if name == selector.Fake {
		return nil, fmt.Errorf("%w: the fake runtime of %s holds no images or containers", errFakeRuntime, dir.Path)
	}
	return selector.Select(ctx, name, opts)
}

// purgeRuntime removes every container, sandbox, pod network namespace and IP the data dir's runtime
// holds, and the pod bridge.
func purgeRuntime(ctx context.Context, dir *datadir.Dir) (string, error) {
	choice, err := openRuntime(ctx, dir)
	if errors.Is(err, errFakeRuntime) {
		// No containers, sandboxes or pod networks: only the pods' volumes and logs.
		n, err := purgePodDirs(dir)
		return fmt.Sprintf("removed the volumes and logs of %d pods (fake runtime: no containers)", n), err
	}
	if err != nil {
		return "", err
	}
	defer choice.Close()
	rt := choice.Runtime
	containers, err := rt.ListContainers(ctx)
	if err != nil {
		return "", err
	}
	var errs []error
	for _, c := range containers {
		errs = append(errs, rt.StopContainer(ctx, c.ID, 0), rt.RemoveContainer(ctx, c.ID))
	}
	sandboxes, err := rt.ListSandboxes(ctx)
	if err != nil {
		return "", err
	}
	for _, sb := range sandboxes {
		errs = append(errs, rt.RemoveSandbox(ctx, sb.PodUID))
	}
	if choice.Network != nil {
		_, err := choice.Network.Cleanup(nil)
		errs = append(errs, err, choice.Network.RemoveBridge())
	}
	_, err = purgePodDirs(dir)
	errs = append(errs, err)
	summary := fmt.Sprintf("removed %d containers and %d pod sandboxes (%s)", len(containers), len(sandboxes), choice.Name)
	// Last, what a crash left outside the runtime's records (tasks never started, shims containerd lost,
	// snapshots without a container, cgroups).
	if sw, ok := rt.(runtime.Sweeper); ok {
		swept, err := sw.Sweep(ctx, nil)
		errs = append(errs, err)
		if len(swept) > 0 {
			summary += "; also removed " + strings.Join(swept, ", ")
		}
	}
	return summary, errors.Join(errs...)
}

// purgePodDirs unmounts and removes every pod's directory: its volumes (tmpfs emptyDirs and /dev/shm
// are mounts) and logs. It returns how many pods it found.
func purgePodDirs(dir *datadir.Dir) (int, error) {
	pods, _ := os.ReadDir(dir.Join("pods"))
	var errs []error
	for _, p := range pods {
		errs = append(errs, volume.Teardown(dir.Join("pods", p.Name(), "volumes")), os.RemoveAll(dir.Join("pods", p.Name())))
	}
	return len(pods), errors.Join(errs...)
}
