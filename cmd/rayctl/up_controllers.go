package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rayctl/rayctl/pkg/apiserver/pki"
	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/controllers/binder"
	"github.com/rayctl/rayctl/pkg/controllers/daemonset"
	"github.com/rayctl/rayctl/pkg/controllers/deployment"
	"github.com/rayctl/rayctl/pkg/controllers/endpoints"
	"github.com/rayctl/rayctl/pkg/controllers/fieldwarnings"
	"github.com/rayctl/rayctl/pkg/controllers/gc"
	"github.com/rayctl/rayctl/pkg/controllers/job"
	"github.com/rayctl/rayctl/pkg/controllers/localpath"
	"github.com/rayctl/rayctl/pkg/controllers/manager"
	"github.com/rayctl/rayctl/pkg/controllers/namespace"
	"github.com/rayctl/rayctl/pkg/controllers/nodataplane"
	"github.com/rayctl/rayctl/pkg/controllers/raycluster"
	"github.com/rayctl/rayctl/pkg/controllers/raycronjob"
	"github.com/rayctl/rayctl/pkg/controllers/rayjob"
	"github.com/rayctl/rayctl/pkg/controllers/rayservice"
	"github.com/rayctl/rayctl/pkg/controllers/replicaset"
	"github.com/rayctl/rayctl/pkg/controllers/rootca"
	"github.com/rayctl/rayctl/pkg/controllers/serviceaccount"
	"github.com/rayctl/rayctl/pkg/controllers/statefulset"
	"github.com/rayctl/rayctl/pkg/datadir"
	"github.com/rayctl/rayctl/pkg/runtime/hostray"
)

// The two controller managers of `rayctl up`, as on a real cluster: KubeRay's operator (the Ray
// controllers, identity rayctl:controllers) and the part of kube-controller-manager that rayctl needs
// (identity system:kube-controller-manager). `--controllers=none` leaves the Ray API to an external
// operator such as KubeRay itself, while Jobs, garbage collection and namespaces keep working.
var (
	rayControllers  = []string{raycluster.Name, rayjob.Name, rayservice.Name, raycronjob.Name, fieldwarnings.Name}
	kubeControllers = []string{job.Name, gc.Name, namespace.Name, serviceaccount.Name, rootca.Name, endpoints.Name,
		deployment.Name, replicaset.Name, statefulset.Name, daemonset.Name, localpath.Name, nodataplane.Name}
)

// kubeControllerManagerUser is the kube-controller-manager identity, bound in configs/rbac.
const kubeControllerManagerUser = "system:kube-controller-manager"

// controllerFlags are `rayctl up`'s controller options, named like KubeRay's operator flags.
type controllerFlags struct {
	controllers          []string
	kubeControllers      []string
	watchNamespaces      []string
	reconcileConcurrency int
	leaderElect          bool
	metricsAddr          string
	healthAddr           string
	// scheduler runs the binder (with --kubelet), with insufficientHint in its FailedScheduling events.
	scheduler        bool
	insufficientHint string
}

func init() {
	manager.Register(raycluster.Name, raycluster.Setup)
	manager.Register(rayjob.Name, rayjob.Setup)
	manager.Register(rayservice.Name, rayservice.Setup)
	manager.Register(raycronjob.Name, raycronjob.Setup)
	manager.Register(fieldwarnings.Name, fieldwarnings.Setup)
	manager.Register(job.Name, job.Setup)
	manager.Register(deployment.Name, deployment.Setup)
	manager.Register(replicaset.Name, replicaset.Setup)
	manager.Register(statefulset.Name, statefulset.Setup)
	manager.Register(daemonset.Name, daemonset.Setup)
	manager.Register(gc.Name, gc.Setup)
	manager.Register(namespace.Name, namespace.Setup)
	manager.Register(serviceaccount.Name, serviceaccount.Setup)
	manager.Register(rootca.Name, rootca.Setup)
	manager.Register(localpath.Name, localpath.Setup)
	manager.Register(nodataplane.Name, nodataplane.Setup)
	manager.Register(endpoints.Name, endpoints.Setup)
	manager.Register(binder.Name, binder.Setup)
}

// selectControllers reads a --controllers style list against one group: "all" (or "*"), "none", names,
// and "-name" to leave one out.
func selectControllers(spec []string, group []string) ([]string, error) {
	var out []string
	for _, item := range spec {
		item = strings.TrimSpace(item)
		switch {
		case item == "" || item == "none":
		case item == "all" || item == "*":
			for _, n := range group {
				if !slices.Contains(out, n) {
					out = append(out, n)
				}
			}
		case strings.HasPrefix(item, "-"):
			name := item[1:]
			if !slices.Contains(group, name) {
				return nil, fmt.Errorf("unknown controller %q (known: %s)", name, strings.Join(group, ", "))
			}
			out = slices.DeleteFunc(out, func(n string) bool { return n == name })
		default:
			if !slices.Contains(group, item) {
				return nil, fmt.Errorf("unknown controller %q (known: %s)", item, strings.Join(group, ", "))
			}
			if !slices.Contains(out, item) {
				out = append(out, item)
			}
		}
	}
	return out, nil
}

// identityConfig is a client config for one component, authenticated by its own client certificate.
func identityConfig(ca *pki.Authority, serverURL, certName, user string, groups []string) (*rest.Config, error) {
	kp, err := ca.Client(certName, user, groups)
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host:            serverURL,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca.CertPEM(), CertData: kp.CertPEM, KeyData: kp.KeyPEM},
		QPS:             100,
		Burst:           200,
	}, nil
}

// controllerManagers builds the managers the flags ask for (none when nothing is selected): the Ray
// controllers', kube-controller-manager's, and the scheduler's (the binder, under the scheduler's
// identity; it is not one of the listed controller names).
// hostRay is the host's Ray the node runs Ray's images on (nil: none).
func controllerManagers(ca *pki.Authority, serverURL string, dir *datadir.Dir, f controllerFlags, rec *chain.Recorder, hostRay *hostray.Ray, logger *zap.Logger) ([]*controllerManager, []string, error) {
	type spec struct {
		name, cert, user, leaseID string
		controllers               []string
		ray                       bool
		// scheduler: the binder's manager, which holds no Lease (the binder never did) and whose
		// controller is not one of those --controllers and --kube-controllers name.
		scheduler bool
	}
	var schedNames []string
	if f.scheduler {
		schedNames = []string{binder.Name}
	}
	rayNames, err := selectControllers(f.controllers, rayControllers)
	if err != nil {
		return nil, nil, err
	}
	kubeNames, err := selectControllers(f.kubeControllers, kubeControllers)
	if err != nil {
		return nil, nil, err
	}
	var managers []*controllerManager
	var all []string
	for _, s := range []spec{
		{"ray-controllers", "controllers", manager.Identity, "rayctl-controllers", rayNames, true, false},
		{"kube-controllers", "kube-controller-manager", kubeControllerManagerUser, "rayctl-kube-controllers", kubeNames, false, false},
		{"scheduler", "scheduler", "system:kube-scheduler", "", schedNames, false, true},
	} {
		if len(s.controllers) == 0 {
			continue
		}
		cfg, err := identityConfig(ca, serverURL, s.cert, s.user, nil)
		if err != nil {
			return nil, nil, err
		}
		opts := manager.DefaultOptions()
		opts.Controllers = s.controllers
		opts.LeaderElection = f.leaderElect && !s.scheduler
		opts.LeaderElectionID = s.leaseID
		opts.LeaderElectionIdentity = leaderIdentity(dir)
		opts.Logger = zapr.NewLogger(logger.Named(s.name))
		if rec != nil {
			opts.Sink = rec
		}
		opts.RootCA = ca.CertPEM()
		if !s.ray {
			opts.VolumesDir = dir.Join("volumes")
			opts.InsufficientHint = f.insufficientHint
		}
		if s.ray {
			// Like KubeRay's operator: only Ray's own Pods and submitter Jobs in the cache, and only the
			// watched namespaces.
			opts.PodSelector = manager.RayPodSelector
			opts.JobSelector = manager.KubeRayJobSelector
			opts.WatchNamespaces = f.watchNamespaces
			opts.MetricsAddr, opts.HealthAddr = f.metricsAddr, f.healthAddr
			if hostRay != nil {
				opts.HostRayVersion = func(image string) string {
					if hostray.RunsImage(image) {
						return hostRay.Version
					}
					return ""
				}
			}
			if f.reconcileConcurrency > 0 {
				opts.ReconcileConcurrency = f.reconcileConcurrency
			}
		} else {
			// The root CA publisher's ConfigMaps are the only ones kube-controller-manager's share reads.
			opts.CacheByObject = map[client.Object]cache.ByObject{
				&corev1.ConfigMap{}: {Field: fields.OneTermEqualSelector("metadata.name", rootca.ConfigMapName)},
			}
		}
		build := func() (*manager.Manager, error) {
			m, err := manager.New(cfg, opts)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", s.name, err)
			}
			for name, h := range m.Hooks {
				info := chain.ControllerInfo{Name: name, Kind: h.Kind(), Manager: s.name, Identity: s.user, Watches: h.Watches()}
				if s.ray {
					info.WatchNamespaces = f.watchNamespaces
					info.LabelSelectors = map[string]string{"Pod": opts.PodSelector, "Job": opts.JobSelector}
				}
				rec.Register(info, h.Stats)
			}
			return m, nil
		}
		m, err := build()
		if err != nil {
			return nil, nil, err
		}
		managers = append(managers, &controllerManager{name: s.name, first: m, build: build})
		if !s.scheduler {
			all = append(all, s.controllers...)
		}
	}
	return managers, all, nil
}

// controllerManager is one controller manager of `rayctl up` and how to build it anew: a manager starts
// only once.
type controllerManager struct {
	name  string
	first *manager.Manager
	build func() (*manager.Manager, error)
}

// run runs the manager until ctx ends. A manager that stops on its own is built anew and started again
// after a pause (1 s, doubling to 30 s): it stops when it loses its leader Lease, which happens when the
// API server cannot write for a while (etcd out of space, say), and its controllers must come back once
// writes work again.
func (c *controllerManager) run(ctx context.Context, logger *zap.Logger) {
	m, pause := c.first, time.Second
	for {
		started := time.Now()
		err := m.Start(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > 5*time.Minute {
			pause = time.Second
		}
		logger.Error("controller manager stopped; starting it again", zap.String("manager", c.name), zap.Error(err), zap.Duration("after", pause))
		for m = nil; m == nil; {
			select {
			case <-ctx.Done():
				return
			case <-time.After(pause):
			}
			pause = min(2*pause, 30*time.Second)
			if m, err = c.build(); err != nil {
				logger.Error("rebuilding a controller manager", zap.String("manager", c.name), zap.Error(err))
			}
		}
	}
}

// leaderIdentity is stable per host and data dir, so a restarted rayctl reclaims its own lease at once.
func leaderIdentity(dir *datadir.Dir) string {
	host, _ := os.Hostname()
	sum := sha256.Sum256([]byte(dir.Path))
	return host + "_" + hex.EncodeToString(sum[:6])
}
