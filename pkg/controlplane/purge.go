package controlplane

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/rayctl/rayctl/pkg/datadir"
	"github.com/rayctl/rayctl/pkg/kubelet"
	"github.com/rayctl/rayctl/pkg/runtime"
	"github.com/rayctl/rayctl/pkg/runtime/fake"
	"github.com/rayctl/rayctl/pkg/runtime/network"
	"github.com/rayctl/rayctl/pkg/runtime/selector"
	"github.com/rayctl/rayctl/pkg/userns"
)

// errFakeRuntime says the data dir runs the fake runtime, which has no containers to reach.
var errFakeRuntime = errors.New("no container runtime")

// OpenRuntime reaches the container runtime of a data dir: the running instance's (through its
// containerd socket), else the one recorded for it (a private containerd is started for the occasion).
// The caller must Close the choice. The fake runtime is an error: it keeps no images or containers.
func OpenRuntime(ctx context.Context, dir *datadir.Dir) (*selector.Choice, error) {
	cfg, ok := dir.ReadNodeConfig()
	if !ok {
		cfg = datadir.NodeConfig{Runtime: selector.Auto}
	}
	opts := selector.Options{DataDir: dir.Path, Network: network.Config{Bridge: cfg.Bridge, CIDR: cfg.PodCIDR}, Rootless: userns.Inside()}
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

// Purge removes, with the control plane stopped, every pod the data dir's node holds (containers,
// sandboxes, volumes and logs, as the kubelet removes a pod: kubelet.Purge), then the pod network
// namespaces, IPs and bridge, and last what a crash left outside the runtime's records. It says what
// it removed.
func Purge(ctx context.Context, dir *datadir.Dir) (string, error) {
	choice, err := OpenRuntime(ctx, dir)
	// The simulated nodes' pods ran on a fake runtime: only their volumes and logs are left.
	if _, err := kubelet.Purge(ctx, fake.New(fake.Options{}), dir.Join(simulatedPodsDir)); err != nil {
		return "", err
	}
	if errors.Is(err, errFakeRuntime) {
		// No containers, sandboxes or pod networks: only the pods' volumes and logs.
		n, err := kubelet.Purge(ctx, fake.New(fake.Options{}), dir.Join("pods"))
		return fmt.Sprintf("removed the volumes and logs of %d pods (fake runtime: no containers)", n.PodDirs), err
	}
	if err != nil {
		return "", err
	}
	defer choice.Close()
	n, err := kubelet.Purge(ctx, choice.Runtime, dir.Join("pods"))
	errs := []error{err}
	if choice.Network != nil {
		_, err := choice.Network.Cleanup(nil)
		errs = append(errs, err, choice.Network.RemoveBridge())
	}
	summary := fmt.Sprintf("removed %d containers and %d pod sandboxes (%s)", n.Containers, n.Sandboxes, choice.Name)
	// Last, what a crash left outside the runtime's records (tasks never started, shims containerd lost,
	// snapshots without a container, cgroups).
	if sw, ok := choice.Runtime.(runtime.Sweeper); ok {
		swept, err := sw.Sweep(ctx, nil)
		errs = append(errs, err)
		if len(swept) > 0 {
			summary += "; also removed " + strings.Join(swept, ", ")
		}
	}
	return summary, errors.Join(errs...)
}
