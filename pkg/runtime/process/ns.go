package process

import "github.com/rayctl/rayctl/pkg/runtime"

// nsSetup is a container's isolation: the pod's network namespace, its
// hostname (empty: the host's), its bind mounts (made in order), the
// container paths of the cgroups among them, which its init joins, and the
// pod's shared PID namespace (empty: a new one of its own), and whether the
// host's filesystem is read-only there save its writable mounts. Off Linux it
// is not applied: containers share the host's namespaces.
type nsSetup struct {
	netns        string
	hostname     string
	mounts       []runtime.Mount
	cgroups      []string
	pidns        string
	readOnlyHost bool
	hidden       []string
}
