package controlplane

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"github.com/go-logr/zapr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
	"github.com/rayctl/rayctl/pkg/controllers/kube/daemonset"
	"github.com/rayctl/rayctl/pkg/controllers/kube/deployment"
	"github.com/rayctl/rayctl/pkg/controllers/kube/endpoints"
	"github.com/rayctl/rayctl/pkg/controllers/kube/gc"
	"github.com/rayctl/rayctl/pkg/controllers/kube/job"
	"github.com/rayctl/rayctl/pkg/controllers/kube/localpath"
	"github.com/rayctl/rayctl/pkg/controllers/kube/namespace"
	"github.com/rayctl/rayctl/pkg/controllers/kube/nodataplane"
	"github.com/rayctl/rayctl/pkg/controllers/kube/replicaset"
	"github.com/rayctl/rayctl/pkg/controllers/kube/rootca"
	"github.com/rayctl/rayctl/pkg/controllers/kube/serviceaccount"
	"github.com/rayctl/rayctl/pkg/controllers/kube/statefulset"
	"github.com/rayctl/rayctl/pkg/controllers/ray/fieldwarnings"
	"github.com/rayctl/rayctl/pkg/controllers/ray/gateway"
	"github.com/rayctl/rayctl/pkg/controllers/ray/raycluster"
	"github.com/rayctl/rayctl/pkg/controllers/ray/raycronjob"
	"github.com/rayctl/rayctl/pkg/controllers/ray/rayjob"
	"github.com/rayctl/rayctl/pkg/controllers/ray/rayservice"
	"github.com/rayctl/rayctl/pkg/controllers/scheduler/binder"
	"github.com/rayctl/rayctl/pkg/datadir"
	"github.com/rayctl/rayctl/pkg/runtime/hostray"
)

// The controller managers of a control plane, as on a real cluster: KubeRay's operator (the Ray
// controllers, identity rayctl:controllers), the part of kube-controller-manager that rayctl needs
// (identity system:kube-controller-manager), and the scheduler (the binder, identity
// system:kube-scheduler, with the kubelet). Controllers.Ray = none leaves the Ray API to an external
// operator such as KubeRay itself, while Jobs, garbage collection and namespaces keep working. Each
// controller is registered once, in ctrlset.Default, in its manager's group; the order here is the
// order the start-up line and the flags' help name them in.
const (
	groupRay       = "ray"
	groupKube      = "kube"
	groupScheduler = "scheduler"
)

func init() {
	for _, c := range []struct {
		group, name string
		setup       ctrlset.SetupFunc
	}{
		{groupRay, raycluster.Name, raycluster.Setup},
		{groupRay, raycluster.NetworkPolicyName, raycluster.SetupNetworkPolicy},
		{groupRay, rayjob.Name, rayjob.Setup},
		{groupRay, rayservice.Name, rayservice.Setup},
		{groupRay, raycronjob.Name, raycronjob.Setup},
		{groupRay, fieldwarnings.Name, fieldwarnings.Setup},
		{groupRay, gateway.Name, gateway.Options{ProxyImage: SimImageRef}.Setup},
		{groupKube, job.Name, job.Setup},
		{groupKube, gc.Name, gc.Setup},
		{groupKube, namespace.Name, namespace.Setup},
		{groupKube, serviceaccount.Name, serviceaccount.Setup},
		{groupKube, rootca.Name, rootca.Setup},
		{groupKube, endpoints.Name, endpoints.Setup},
		{groupKube, deployment.Name, deployment.Setup},
		{groupKube, replicaset.Name, replicaset.Setup},
		{groupKube, statefulset.Name, statefulset.Setup},
		{groupKube, daemonset.Name, daemonset.Setup},
		{groupKube, localpath.Name, localpath.Setup},
		{groupKube, nodataplane.Name, nodataplane.Setup},
		{groupScheduler, binder.Name, binder.Setup},
	} {
		ctrlset.Default.RegisterIn(c.group, c.name, c.setup)
	}
}

// RayControllers are the names Controllers.Ray chooses from.
func RayControllers() []string { return ctrlset.Default.Group(groupRay) }

// KubeControllers are the names Controllers.Kube chooses from.
func KubeControllers() []string { return ctrlset.Default.Group(groupKube) }

// kubeControllerManagerUser is the kube-controller-manager identity, bound in configs/rbac.
const kubeControllerManagerUser = "system:kube-controller-manager"

// managerSpec is one controller manager: its name, identity, Lease and controllers.
type managerSpec struct {
	name, cert, user, leaseID string
	controllers               []string
	ray                       bool
	// scheduler: the binder's manager, which holds no Lease (the binder never did) and whose
	// controller is not one of those Controllers.Ray and Controllers.Kube name.
	scheduler bool
}

// startControllers is the "controllers" step: it builds the managers Config.Controllers asks for (none
// when nothing is selected), then runs each until Stop, built anew when it stops on its own.
func (cp *ControlPlane) startControllers() (string, error) {
	f := cp.cfg.Controllers
	reg := ctrlset.Default
	rayNames, err := reg.Select(f.Ray, groupRay)
	if err != nil {
		return "", err
	}
	kubeNames, err := reg.Select(f.Kube, groupKube)
	if err != nil {
		return "", err
	}
	var schedNames []string
	if cp.cfg.Kubelet {
		// The node's pods need placing: the binder, as the scheduler.
		schedNames = reg.Group(groupScheduler)
	}
	var all []string
	var managers []*ctrlset.Restarting
	for _, s := range []managerSpec{
		{"ray-controllers", "controllers", ctrlset.Identity, "rayctl-controllers", rayNames, true, false},
		{"kube-controllers", "kube-controller-manager", kubeControllerManagerUser, "rayctl-kube-controllers", kubeNames, false, false},
		{"scheduler", "scheduler", "system:kube-scheduler", "", schedNames, false, true},
	} {
		if len(s.controllers) == 0 {
			continue
		}
		m, err := cp.controllerManager(s)
		if err != nil {
			return "", err
		}
		managers = append(managers, m)
		if !s.scheduler {
			all = append(all, s.controllers...)
		}
	}
	for _, m := range managers {
		cp.run(m.Run)
	}
	return controllerLine(all), nil
}

// controllerManager builds the manager s names, under its own identity, and says how to build it anew.
func (cp *ControlPlane) controllerManager(s managerSpec) (*ctrlset.Restarting, error) {
	cfg, err := cp.identityConfig(s.cert, s.user, nil)
	if err != nil {
		return nil, err
	}
	opts := cp.managerOptions(s)
	build := func() (*ctrlset.Manager, error) {
		m, err := ctrlset.New(cfg, opts)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		for name, h := range m.Hooks {
			info := chain.ControllerInfo{Name: name, Kind: h.Kind(), Manager: s.name, Identity: s.user, Watches: h.Watches()}
			if s.ray {
				info.WatchNamespaces = opts.WatchNamespaces
				info.LabelSelectors = map[string]string{"Pod": opts.PodSelector, "Job": opts.JobSelector}
			}
			cp.recorder.Register(info, h.Stats)
		}
		return m, nil
	}
	first, err := build()
	if err != nil {
		return nil, err
	}
	return &ctrlset.Restarting{Name: s.name, First: first, Build: build, Logger: zapr.NewLogger(cp.logger)}, nil
}

// managerOptions are the options of the manager s names.
func (cp *ControlPlane) managerOptions(s managerSpec) ctrlset.Options {
	f := cp.cfg.Controllers
	opts := ctrlset.DefaultOptions()
	opts.Controllers = s.controllers
	opts.LeaderElection = f.LeaderElect && !s.scheduler
	opts.LeaderElectionID = s.leaseID
	opts.LeaderElectionIdentity = leaderIdentity(cp.dir)
	opts.Logger = zapr.NewLogger(cp.logger.Named(s.name))
	if cp.recorder != nil {
		opts.Sink = cp.recorder
	}
	opts.RootCA = cp.certs.ca.CertPEM()
	opts.NetworkPolicyEnforced = cp.policyEnforced
	if !s.ray {
		opts.VolumesDir = cp.dir.Join("volumes")
		if cp.cfg.Kubelet {
			opts.InsufficientHint = insufficientHint(cp.cfg.NodeCapacity, len(cp.cfg.Nodes) > 0 || cp.cfg.SimulatedNodes != "")
		}
		// The root CA publisher's ConfigMaps are the only ones kube-controller-manager's share reads.
		opts.CacheByObject = map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Field: fields.OneTermEqualSelector("metadata.name", rootca.ConfigMapName)},
		}
		return opts
	}
	// Like KubeRay's operator: only Ray's own Pods and submitter Jobs in the cache, and only the
	// watched namespaces.
	opts.PodSelector = ctrlset.RayPodSelector
	opts.JobSelector = ctrlset.KubeRayJobSelector
	opts.WatchNamespaces = f.WatchNamespaces
	opts.MetricsAddr, opts.HealthAddr = f.MetricsAddr, f.HealthAddr
	opts.PodDial = cp.dialPods
	opts.HostNetworkPods = cp.sandbox.Mode == SandboxHost
	if iso, ok := cp.rt.Runtime.(interface{ Isolated() bool }); ok {
		opts.PodMountsUnplaced = !iso.Isolated()
	}
	opts.OfflinePods = cp.podsOffline()
	if hostRay := cp.rt.HostRay; hostRay != nil {
		opts.HostRayVersion = func(image string) string {
			if hostray.RunsImage(image) {
				return hostRay.Version
			}
			return ""
		}
	}
	if f.ReconcileConcurrency > 0 {
		opts.ReconcileConcurrency = f.ReconcileConcurrency
	}
	return opts
}

// controllerLine is the "controllers" line's detail: the controllers started, or none.
func controllerLine(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}

// leaderIdentity is stable per host and data dir, so a restarted rayctl reclaims its own lease at once.
func leaderIdentity(dir *datadir.Dir) string {
	host, _ := os.Hostname()
	sum := sha256.Sum256([]byte(dir.Path))
	return host + "_" + hex.EncodeToString(sum[:6])
}
