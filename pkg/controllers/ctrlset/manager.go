// Package ctrlset is rayctl's set of controllers: the registry they plug into by name and group, the Env
// each one's Setup gets, and the controller-runtime manager that runs a selection of them inside `rayctl
// up`, configured the way KubeRay's operator configures its own: a shared informer cache (optionally
// limited to some namespaces), leader election on a Lease, one event recorder per controller, and a
// registry from which --controllers picks what runs.
//
// Controllers plug in by name, in the group of the manager they run in (pkg/controlplane does this):
//
//	ctrlset.Default.RegisterIn("ray", raycluster.Name, raycluster.Setup)
//	m, err := ctrlset.New(cfg, opts) // adds the controllers opts.Controllers selects
//	err = m.Start(ctx)
package ctrlset

import (
	"context"
	"fmt"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"net"
	"reflect"
	"sort"
	"time"

	"github.com/go-logr/logr"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/controllers/chainhooks"
	"github.com/rayctl/rayctl/pkg/rayparams"
)

// Identity is the user name the controllers authenticate as in production (their client certificate's CN).
const Identity = "rayctl:controllers"

// Label selectors for narrowing the shared cache, as KubeRay's operator narrows its own. See Options.PodSelector.
const (
	// RayPodSelector selects the Pods the Ray controllers create (KubeRay's managercache selector).
	RayPodSelector = rayparams.LabelNodeType + " in (head,worker,redis-cleanup)"
	// KubeRayJobSelector selects the batch Jobs the RayJob controller creates (KubeRay's Job selector).
	KubeRayJobSelector = rayparams.LabelCreatedBy + "=" + rayparams.CreatedBy
)

// Options configures the manager. Start from DefaultOptions.
type Options struct {
	// Controllers selects the controllers to run (see Registry.Select): "all" (the default), "none",
	// names, and "-name" to leave one out. `--controllers=none` leaves the field to an external operator.
	Controllers []string
	// Registry holds the controllers to choose from; nil means Default.
	Registry *Registry
	// WatchNamespaces limits the cache (and so every controller) to these namespaces; empty means all.
	WatchNamespaces []string
	// ReconcileConcurrency is each controller's MaxConcurrentReconciles (KubeRay's default: 1).
	ReconcileConcurrency int
	// LeaderElection makes the manager hold a Lease before running controllers, so that two
	// `rayctl up` processes on one data dir (or an external KubeRay using the same Lease) never both act.
	LeaderElection bool
	// LeaderElectionNamespace and LeaderElectionID name the Lease (kube-system/rayctl-controllers).
	LeaderElectionNamespace, LeaderElectionID string
	// LeaderElectionIdentity is this manager's holder identity in the Lease. Empty means a new random
	// one per start (controller-runtime's default); rayctl passes one stable per data dir, so after a
	// crash the restarted instance reclaims its own lease at once.
	LeaderElectionIdentity string
	// MetricsAddr and HealthAddr are the bind addresses of the metrics and health-probe servers;
	// "0" (or "") disables them. They are off by default: on a laptop :8080 is Ray's metrics port.
	MetricsAddr, HealthAddr string
	// RequeueAfter is the short requeue after a change (KubeRay: 2 s).
	RequeueAfter time.Duration
	// ResyncPeriod is the long unconditional requeue (KubeRay's RAYCLUSTER_DEFAULT_REQUEUE_SECONDS: 300 s).
	ResyncPeriod time.Duration
	// QPS and Burst limit the manager's client (KubeRay's defaults: 100 and 200).
	QPS   float32
	Burst int
	// PodSelector, when set, limits the Pods the shared cache holds (label selector syntax).
	//
	// Empty by default, on purpose. KubeRay's operator may narrow Pods to RayPodSelector because it
	// only ever reads Ray pods, but rayctl's batch Job controller runs in the same manager and must see
	// the Pods of every Job (selected by `job-name`). A cache selector is one label selector per kind,
	// and selectors only AND their requirements, so "ray.io/node-type in (head,worker) OR job-name
	// exists" cannot be expressed. Rather than giving the Job controller a second cache (a second
	// Pod watch on the API server, and two views of one Pod that can disagree), the shared cache holds
	// all Pods. Set RayPodSelector when the Job controller is not selected.
	PodSelector string
	// JobSelector, when set, limits the batch Jobs the shared cache holds. Empty by default for the
	// same reason: the Job controller reconciles every Job, not only those KubeRay creates
	// (KubeRayJobSelector).
	JobSelector string
	// CacheByObject adds per-kind cache settings (selectors, field selectors) for other kinds.
	CacheByObject map[client.Object]cache.ByObject
	// Sink receives every controller's trigger chain (the chain recorder); nil for none.
	Sink chain.Sink
	// HostRayVersion is passed to the controllers as Env.HostRayVersion (nil: no node runs a host Ray).
	HostRayVersion func(image string) string
	// RootCA is passed to the controllers as Env.RootCA.
	RootCA []byte
	// VolumesDir is passed to the controllers as Env.VolumesDir.
	VolumesDir string
	// PodDial is passed to the controllers as Env.PodDial.
	PodDial func(ctx context.Context, network, addr string) (net.Conn, error)
	// HostNetworkPods is passed to the controllers as Env.HostNetworkPods.
	HostNetworkPods bool
	// PodMountsUnplaced is passed to the controllers as Env.PodMountsUnplaced.
	PodMountsUnplaced bool
	// OfflinePods is passed to the controllers as Env.OfflinePods.
	OfflinePods bool
	// NetworkPolicyEnforced is passed to the controllers as Env.NetworkPolicyEnforced.
	NetworkPolicyEnforced bool
	// InsufficientHint is passed to the controllers as Env.InsufficientHint.
	InsufficientHint string
	// Logger is the manager's logger; the zero value discards.
	Logger logr.Logger
}

// DefaultOptions returns the defaults described on Options.
func DefaultOptions() Options {
	return Options{
		Controllers:             []string{"all"},
		ReconcileConcurrency:    1,
		LeaderElection:          true,
		LeaderElectionNamespace: "kube-system",
		LeaderElectionID:        "rayctl-controllers",
		MetricsAddr:             "0",
		HealthAddr:              "0",
		RequeueAfter:            2 * time.Second,
		ResyncPeriod:            300 * time.Second,
		QPS:                     100,
		Burst:                   200,
	}
}

// Scheme returns a scheme with the client-go kinds, ray.io/v1 and gateway.networking.k8s.io/v1.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(rayv1.AddToScheme(s))
	utilruntime.Must(gwv1.Install(s))
	return s
}

// Manager is the controller-runtime manager with the controllers that were selected.
type Manager struct {
	ctrl.Manager
	// Controllers are the names of the controllers added, sorted.
	Controllers []string
	// Hooks are the controllers' chain hooks by name: their watches, key kinds and queue statistics. The
	// hooks a controller makes with chainhooks.Hooks.Sub report their hops but are not listed here:
	// diagnose takes the listed controller of a kind (RayCluster, RayJob) for the one that reconciles it.
	Hooks map[string]*chainhooks.Hooks
}

// New builds the manager on cfg (which it copies) and adds the controllers opts selects. Nothing runs
// until Start.
func New(cfg *rest.Config, opts Options) (*Manager, error) {
	def := DefaultOptions()
	if opts.ReconcileConcurrency <= 0 {
		opts.ReconcileConcurrency = def.ReconcileConcurrency
	}
	if opts.RequeueAfter <= 0 {
		opts.RequeueAfter = def.RequeueAfter
	}
	if opts.ResyncPeriod <= 0 {
		opts.ResyncPeriod = def.ResyncPeriod
	}
	if opts.LeaderElectionNamespace == "" {
		opts.LeaderElectionNamespace = def.LeaderElectionNamespace
	}
	if opts.LeaderElectionID == "" {
		opts.LeaderElectionID = def.LeaderElectionID
	}
	if opts.Registry == nil {
		opts.Registry = Default
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	names, err := opts.Registry.Select(opts.Controllers)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	cacheOpts, err := cacheOptions(opts)
	if err != nil {
		return nil, err
	}

	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "rayctl-controllers"
	if opts.QPS > 0 {
		cfg.QPS, cfg.Burst = opts.QPS, opts.Burst
	}
	// controller-runtime complains (with a stack trace, after 30 s) if its global logger is never set;
	// give it ours.
	ctrllog.SetLogger(opts.Logger)

	var lock resourcelock.Interface
	if opts.LeaderElection && opts.LeaderElectionIdentity != "" {
		if lock, err = leaseLock(cfg, opts); err != nil {
			return nil, err
		}
	}

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		LeaderElectionResourceLockInterface: lock,
		Scheme:                              Scheme(),
		Cache:                               cacheOpts,
		Metrics:                             metricsserver.Options{BindAddress: addr(opts.MetricsAddr)},
		HealthProbeBindAddress:              addr(opts.HealthAddr),
		LeaderElection:                      opts.LeaderElection,
		LeaderElectionNamespace:             opts.LeaderElectionNamespace,
		LeaderElectionID:                    opts.LeaderElectionID,
		LeaderElectionReleaseOnCancel:       true, // rayctl exits right after the manager stops
		Logger:                              opts.Logger,
		// Several managers may live in one process (tests, a restart in place); controller names are
		// unique within a manager by construction (the registry).
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, err
	}
	if addr(opts.HealthAddr) != "0" {
		if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
			return nil, err
		}
		if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
			return nil, err
		}
	}
	events, err := newEventRecorders(cfg, mgr.GetScheme(), opts.Logger.WithName("events"))
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(events); err != nil {
		return nil, err
	}
	hooks := map[string]*chainhooks.Hooks{}
	for _, name := range names {
		env := Env{
			Name:                 name,
			ReconcileConcurrency: opts.ReconcileConcurrency,
			RequeueAfter:         opts.RequeueAfter,
			ResyncPeriod:         opts.ResyncPeriod,
			// core/v1 Events (not events.k8s.io) because `kubectl describe` reads those, as with KubeRay.
			Recorder:              events.For(name + "-controller"),
			EventRecorderFor:      events.For,
			Hooks:                 chainhooks.New(name, opts.Sink),
			HostRayVersion:        opts.HostRayVersion,
			RootCA:                opts.RootCA,
			VolumesDir:            opts.VolumesDir,
			PodDial:               opts.PodDial,
			HostNetworkPods:       opts.HostNetworkPods,
			PodMountsUnplaced:     opts.PodMountsUnplaced,
			OfflinePods:           opts.OfflinePods,
			NetworkPolicyEnforced: opts.NetworkPolicyEnforced,

			InsufficientHint: opts.InsufficientHint,
		}
		hooks[name] = env.Hooks
		if err := opts.Registry.setup(name)(mgr, env.Complete(mgr)); err != nil {
			return nil, fmt.Errorf("controller %s: %w", name, err)
		}
	}
	return &Manager{Manager: mgr, Controllers: names, Hooks: hooks}, nil
}

// leaseLock is the leader-election Lease held under opts.LeaderElectionIdentity. A stable identity lets a
// restarted rayctl take its own lease back at once instead of waiting for it to expire.
func leaseLock(cfg *rest.Config, opts Options) (resourcelock.Interface, error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return resourcelock.New(resourcelock.LeasesResourceLock, opts.LeaderElectionNamespace, opts.LeaderElectionID,
		client.CoreV1(), client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: opts.LeaderElectionIdentity})
}

func addr(a string) string {
	if a == "" {
		return "0"
	}
	return a
}

// cacheOptions are the shared cache's options. Its objects are kept without their managedFields: no
// controller reads them (server-side apply sends only the fields it owns, and an update or patch
// without managedFields leaves the stored ones as they are), and on a Pod they are a large part of
// the object, kept once per manager.
func cacheOptions(opts Options) (cache.Options, error) {
	co := cache.Options{DefaultTransform: cache.TransformStripManagedFields()}
	if len(opts.WatchNamespaces) > 0 {
		co.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range opts.WatchNamespaces {
			co.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	// Keyed by Go type: controller-runtime keys ByObject by object pointer, so two entries for one kind
	// would both apply; CacheByObject wins over the selector options.
	byType := map[reflect.Type]cacheEntry{}
	for obj, sel := range map[client.Object]string{&corev1.Pod{}: opts.PodSelector, &batchv1.Job{}: opts.JobSelector} {
		if sel == "" {
			continue
		}
		s, err := labels.Parse(sel)
		if err != nil {
			return co, fmt.Errorf("cache selector %q: %w", sel, err)
		}
		byType[reflect.TypeOf(obj)] = cacheEntry{obj, cache.ByObject{Label: s}}
	}
	for obj, b := range opts.CacheByObject {
		byType[reflect.TypeOf(obj)] = cacheEntry{obj, b}
	}
	if len(byType) > 0 {
		co.ByObject = map[client.Object]cache.ByObject{}
		for _, e := range byType {
			co.ByObject[e.obj] = e.by
		}
	}
	return co, nil
}

type cacheEntry struct {
	obj client.Object
	by  cache.ByObject
}
