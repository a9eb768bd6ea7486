package ctrlset

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/rayctl/rayctl/pkg/controllers/chainhooks"
)

// Env is what a controller's setup function gets besides the manager: its name, its share of the
// manager's Options, an event recorder and the chain hooks, all made for this controller. New and
// RunStandalone hand every Setup an Env whose Hooks, Recorder and EventRecorderFor are set (see
// Complete), so no controller checks them for nil.
type Env struct {
	// Name is the name the controller was registered under; use it as the controller's name.
	Name string
	// ReconcileConcurrency is the number of concurrent reconciles (MaxConcurrentReconciles).
	ReconcileConcurrency int
	// RequeueAfter is the short requeue after a change or an error (KubeRay: 2 s for RayCluster).
	RequeueAfter time.Duration
	// ResyncPeriod is the long unconditional requeue when nothing changed (KubeRay: 300 s).
	ResyncPeriod time.Duration
	// Recorder records core/v1 Events as this controller (the source component is Name + "-controller").
	Recorder record.EventRecorder
	// EventRecorderFor returns a recorder of core/v1 Events from another component name (the scheduler's
	// events come from its scheduler name).
	EventRecorderFor func(component string) record.EventRecorder
	// Hooks reports the controller's trigger chain to the manager's Sink.
	Hooks *chainhooks.Hooks
	// HostRayVersion, when set, says which version of the host's Ray runs a pod of image on this
	// node's runtime ("" when the image runs as itself, or raysim runs it): rayctl runs Ray's images
	// on the host's Ray, which may differ from what a RayCluster's spec.rayVersion says.
	HostRayVersion func(image string) string
	// RootCA is the cluster's CA certificate in PEM (the one that signs the API server's serving
	// certificate), which pods trust; the root CA publisher publishes it.
	RootCA []byte
	// VolumesDir is the host directory local volumes are provisioned under ("" where none are).
	VolumesDir string
	// PodDial connects to pod IPs (rayctl's dials inside the node network namespace, which the host's has
	// no route into): what controllers that call into pods (Ray's dashboard) dial with. Nil dials from this
	// process's own network.
	PodDial func(ctx context.Context, network, addr string) (net.Conn, error)
	// HostNetworkPods says the node's pods share the host's network (`rayctl up --pod-network=host`):
	// the RayCluster controller then gives each Ray pod a block of the host's loopback ports (rayports).
	HostNetworkPods bool
	// PodMountsUnplaced says a container's volumes are not mounted at their mountPaths (the host-process
	// runtime where it cannot give pods mount namespaces: not root, or not Linux): a program reading a
	// fixed path, as Ray reads its service account token, does not find the pod's file there.
	PodMountsUnplaced bool
	// OfflinePods says the node's pods reach nothing beyond it (`rayctl up --pod-egress=off`): a failed
	// Ray job's message then says so, since a job that downloads (pip, conda, remote working dirs) cannot.
	OfflinePods bool
	// NetworkPolicyEnforced says the pod network enforces NetworkPolicies (pkg/netpolicy runs): where it
	// does not (pods on the host's network, the fake runtime), policies are stored only.
	NetworkPolicyEnforced bool
	// InsufficientHint ends the scheduler's FailedScheduling event of a pod that does not fit for want of
	// a resource, saying what the user can do about it ("" for none).
	InsufficientHint string
}

// Complete returns e with what every controller relies on filled in where the caller left it out: chain
// hooks named after the controller that report to no sink, and mgr's core/v1 event recorders (Recorder
// as Name + "-controller"). New and RunStandalone call it; a test that calls a Setup itself may too.
func (e Env) Complete(mgr ctrl.Manager) Env {
	if e.Hooks == nil {
		e.Hooks = chainhooks.New(e.Name, nil)
	}
	if e.EventRecorderFor == nil {
		// core/v1 Events (not events.k8s.io) because `kubectl describe` reads those, as with KubeRay.
		e.EventRecorderFor = mgr.GetEventRecorderFor //nolint:staticcheck // core/v1 events
	}
	if e.Recorder == nil {
		e.Recorder = e.EventRecorderFor(e.Name + "-controller")
	}
	return e
}

// SetupFunc adds one controller to mgr: the one shape every controller's Setup has. A controller
// package exports `func Setup(mgr ctrl.Manager, env ctrlset.Env) error` (a Setup method on its Options
// type where tests set more than Env carries), and pkg/controlplane registers it by name, in the group
// of the manager it runs in:
//
//	ctrlset.Default.RegisterIn("ray", raycluster.Name, raycluster.Setup)
type SetupFunc func(mgr ctrl.Manager, env Env) error

// Registry maps controller names to their setup functions. Each controller belongs to a group (the
// manager it runs in: rayctl's Ray controllers, kube-controller-manager's, the scheduler's), and the
// registry keeps the order controllers were registered in.
type Registry struct {
	mu     sync.Mutex
	setups map[string]SetupFunc
	// order holds every name in registration order; group maps each name to its group.
	order []string
	group map[string]string
}

// Default is the registry pkg/controlplane registers every controller in and New reads unless
// Options.Registry is set.
var Default = &Registry{}

// Register adds a controller under name, in no group. It panics if name is empty, reserved ("all",
// "none", "*"), starts with "-", or is already registered: registration is a programming step, not
// user input.
func (r *Registry) Register(name string, setup SetupFunc) { r.RegisterIn("", name, setup) }

// RegisterIn adds a controller under name to group (see Group and Select). It panics as Register does.
func (r *Registry) RegisterIn(group, name string, setup SetupFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if name == "" || name == "all" || name == "none" || name == "*" || strings.HasPrefix(name, "-") {
		panic(fmt.Sprintf("controllers: invalid controller name %q", name))
	}
	if setup == nil {
		panic(fmt.Sprintf("controllers: nil setup for %q", name))
	}
	if r.setups == nil {
		r.setups, r.group = map[string]SetupFunc{}, map[string]string{}
	}
	if _, ok := r.setups[name]; ok {
		panic(fmt.Sprintf("controllers: %q registered twice", name))
	}
	r.setups[name], r.group[name] = setup, group
	r.order = append(r.order, name)
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
	names := r.Group()
	sort.Strings(names)
	return names
}

// Group returns the names registered in the groups named (every registered name when none is), in
// registration order.
func (r *Registry) Group(groups ...string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var names []string
	for _, n := range r.order {
		if len(groups) == 0 || slices.Contains(groups, r.group[n]) {
			names = append(names, n)
		}
	}
	return names
}

func (r *Registry) setup(name string) SetupFunc {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.setups[name]
}

// Select resolves a --controllers value against the controllers of the groups named (every registered
// controller when none is), the way kube-controller-manager reads its flag: "all" (or "*") is every
// one of them, "none" is none, "name" adds one, "-name" removes one ("all,-job"). An empty spec means
// "all", and so does a spec that only removes: "-job" is "all,-job", as the flags' help says ("-name
// leaves one out"), where kube-controller-manager would run nothing; blank entries are ignored. A name
// outside those groups is an error. The result is in registration order.
func (r *Registry) Select(spec []string, groups ...string) ([]string, error) {
	known := r.Group(groups...)
	if !slices.ContainsFunc(spec, func(s string) bool { return strings.TrimSpace(s) != "" }) {
		return known, nil // empty, or only blanks ("--controllers=,")
	}
	on := map[string]bool{}
	if onlyRemoves(spec) {
		for _, n := range known {
			on[n] = true
		}
	}
	for _, s := range spec {
		s = strings.TrimSpace(s)
		switch {
		case s == "":
		case s == "all" || s == "*":
			for _, n := range known {
				on[n] = true
			}
		case s == "none":
			clear(on)
		case strings.HasPrefix(s, "-"):
			if !slices.Contains(known, s[1:]) {
				return nil, fmt.Errorf("unknown controller %q (known: %s)", s[1:], strings.Join(known, ", "))
			}
			delete(on, s[1:])
		default:
			if !slices.Contains(known, s) {
				return nil, fmt.Errorf("unknown controller %q (known: %s)", s, strings.Join(known, ", "))
			}
			on[s] = true
		}
	}
	return slices.DeleteFunc(known, func(n string) bool { return !on[n] }), nil
}

// onlyRemoves reports whether every entry of spec is a "-name" (blank entries aside), and one is.
func onlyRemoves(spec []string) bool {
	removes := false
	for _, s := range spec {
		switch s = strings.TrimSpace(s); {
		case s == "":
		case strings.HasPrefix(s, "-"):
			removes = true
		default:
			return false
		}
	}
	return removes
}
