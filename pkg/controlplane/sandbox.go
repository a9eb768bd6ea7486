package controlplane

import (
	"fmt"
	"os"
	goruntime "runtime"

	"github.com/rayctl/rayctl/pkg/datadir"
	"github.com/rayctl/rayctl/pkg/runtime/selector"
	"github.com/rayctl/rayctl/pkg/userns"
)

// What `rayctl up --pod-network=…` asks for.
const (
	// PodNetworkAuto is a network namespace per pod wherever one can be made, else the host's network.
	PodNetworkAuto = "auto"
	// PodNetworkSandbox is a network namespace per pod, or a refusal to start.
	PodNetworkSandbox = "sandbox"
	// PodNetworkHost makes pods share the host's network (what macOS and restricted Linux get).
	PodNetworkHost = "host"
)

// The sandbox modes of a node.
const (
	// SandboxRoot: rayctl runs as root; its node network namespace holds the pod bridge, every pod's
	// namespace and the listeners pods reach, and the host's namespace has no route into it.
	SandboxRoot = "root"
	// SandboxRootless: the same inside a user namespace of rayctl's own, where the user who started it
	// is root and nobody else is anyone.
	SandboxRootless = "rootless"
	// SandboxHost: pods share the host's network.
	SandboxHost = "host"
)

// Sandbox is how the node holds its pods, settled before anything starts: which mode, why, and whether
// rayctl must first run again inside a user namespace of its own.
type Sandbox struct {
	// Mode is SandboxRoot, SandboxRootless or SandboxHost.
	Mode string
	// Why says it in a line, for `rayctl up` and `rayctl status`.
	Why string
	// Reexec says that this process (not root) must run again inside a user namespace of its own
	// (userns.Reexec), where it is in Mode SandboxRootless.
	Reexec bool
}

// DecideSandbox settles the sandbox for --pod-network=podNetwork on this machine and this process.
func DecideSandbox(podNetwork string) (Sandbox, error) {
	inside := userns.Inside()
	return decideSandbox(podNetwork, goruntime.GOOS, os.Geteuid() == 0 && !inside, inside, userns.Supported)
}

// decideSandbox is DecideSandbox with the facts given: the OS, whether this process is the host's root,
// whether it already runs in rayctl's user namespace, and whether one can be made.
func decideSandbox(podNetwork, goos string, root, inside bool, supported func() error) (Sandbox, error) {
	const each = "pods: a network namespace each"
	switch podNetwork {
	case "", PodNetworkAuto, PodNetworkSandbox:
	case PodNetworkHost:
		return Sandbox{Mode: SandboxHost, Why: "pods: the host's network (--pod-network=host)"}, nil
	default:
		return Sandbox{}, fmt.Errorf("--pod-network=%q: want %s, %s or %s", podNetwork, PodNetworkAuto, PodNetworkSandbox, PodNetworkHost)
	}
	var why string
	switch {
	case goos != "linux":
		why = "network namespaces are Linux-only"
	case inside:
		return Sandbox{Mode: SandboxRootless, Why: each + ", inside rayctl's user namespace (rootless): nothing on the host reaches them"}, nil
	case root:
		return Sandbox{Mode: SandboxRoot, Why: each + ", in rayctl's node namespace (root; pod processes run as an unprivileged user): nothing on the host reaches them"}, nil
	default:
		err := supported()
		if err == nil {
			return Sandbox{Mode: SandboxRootless, Reexec: true}, nil
		}
		why = "no user namespace can be made here: " + err.Error()
	}
	if podNetwork == PodNetworkSandbox {
		return Sandbox{}, fmt.Errorf("--pod-network=sandbox: %s", why)
	}
	return Sandbox{Mode: SandboxHost, Why: "pods: the host's network (" + why + ")"}, nil
}

// EndRootless ends what a rayctl run inside a user namespace of its own (rootless) on dataDir left
// running once it has ended, however it ended: its private containerd, with the shims and containers
// of that containerd, which sit in namespaces no later rayctl can enter. Only the launcher can: it sits
// in the user namespace that holds the ended one's, as the user that owns it, so it may kill the
// containers' processes of the user's subordinate ids (a later rayctl, in a sibling namespace, may
// not). The launcher calls it before userns.Reexec (what a rayctl killed with its launcher left) and
// after it returns. It does nothing while another rayctl holds the data dir (a launcher whose rayctl
// was refused the data dir must not end the one that holds it).
func EndRootless(dataDir string) {
	dir, err := datadir.Open(dataDir)
	if err != nil || dir.Lock() != nil {
		return
	}
	defer dir.Unlock()
	selector.EndRootlessContainers(dir.Path)
}
