// Package controlplane is `rayctl up` as a library: it starts, in one place and in order, the
// components of one rayctl control plane on a data dir (certificates, etcd, the API server, the
// container runtime, the pods' way to the API server, cluster DNS, the kubelet and the controller
// managers), prints a line per component with the time it took, says when it is ready, and stops them
// in reverse order. It is the one place that wires them together: the API server and the kubelet know
// nothing of Ray, the controllers nothing of the runtime, and each reaches the others only through the
// API server, under an identity of its own. cmd/rayctl turns flags into a Config.
//
//	cp, err := controlplane.New(cfg)
//	err = cp.Run(ctx) // ready once "ready in N ms" is printed; returns after ctx ends and all stopped
package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/rayctl/rayctl/configs"
	"github.com/rayctl/rayctl/pkg/apiserver"
	"github.com/rayctl/rayctl/pkg/apiserver/etcd"
	"github.com/rayctl/rayctl/pkg/apiserver/kubeconfig"
	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/datadir"
	"github.com/rayctl/rayctl/pkg/runtime/hostray"
	"github.com/rayctl/rayctl/pkg/runtime/network"
	"github.com/rayctl/rayctl/pkg/runtime/network/egress"
	"github.com/rayctl/rayctl/pkg/runtime/preload"
	"github.com/rayctl/rayctl/pkg/runtime/selector"
	"github.com/rayctl/rayctl/pkg/selfpages"
	"github.com/rayctl/rayctl/pkg/userns"
)

// Config is everything a control plane needs; `rayctl up`'s flags fill it.
type Config struct {
	// DataDir holds the control plane's state (see pkg/datadir).
	DataDir string
	// Port is the API server's port on 127.0.0.1 (0 picks a free one).
	Port int
	// Runtime names the container runtime: auto, containerd, process or fake.
	Runtime string
	// Ray says what runs Ray's images (selector.RayAuto, RayHost, RayImage, RaySim); RayPath is an
	// explicit host `ray` ("" looks for one).
	Ray, RayPath string
	// PodCIDR is the range pod IPs come from; Bridge the Linux bridge pods attach to.
	PodCIDR, Bridge string
	// PodNetwork is PodNetworkAuto (also when empty), PodNetworkSandbox or PodNetworkHost: see
	// DecideSandbox.
	PodNetwork string
	// PodEgress is egress.Auto (also when empty), egress.On or egress.Off: whether pods reach beyond the
	// node (see package egress).
	PodEgress string
	// NodeName names this machine's Node.
	NodeName string
	// NodeCapacity overrides what the Node advertises (cpu=8, memory=16Gi).
	NodeCapacity map[string]string
	// Nodes are more nodes on this machine, each "NAME" or "NAME:cpu=4,nvidia.com/gpu=1" (--node);
	// NodeLabels ("NAME:key=value,…") and NodeTaints ("NAME:key=value:NoSchedule,…") give any node,
	// the first included, labels and taints (see node.Specs).
	Nodes, NodeLabels, NodeTaints []string
	// SimulatedNodes adds simulated nodes, "COUNT" or "COUNT:cpu=32,memory=128Gi" (--simulated-nodes):
	// their pods go Running and Ready without a process, for scheduling and controller behaviour at scale.
	SimulatedNodes string
	// Kubelet runs this machine's kubelet and the binder that schedules pods onto it; off, pods stay
	// unscheduled.
	Kubelet bool
	// GatewayAPI installs the Gateway API's CRDs beside the Ray ones.
	GatewayAPI bool
	// EtcdQuota bounds etcd's database in bytes (0: etcd's default).
	EtcdQuota int64
	// ChainBuffer is the number of trigger-chain events kept (0 turns the recorder off).
	ChainBuffer int
	// Controllers says which controllers run and how.
	Controllers Controllers
	// Version is rayctl's version, written into the raysim image.
	Version string
	// StartupCPUProfile, when set, is a file that receives a CPU profile of the start-up, from Start to
	// ready (go tool pprof reads it): where the start-up's CPU goes.
	StartupCPUProfile string
	// Out receives the start-up lines and what happens to the runtime later; Err what makes the
	// process exit (etcd failing for good). Nil: discarded, and os.Stderr.
	Out, Err io.Writer
}

// Controllers are the controller managers' settings, named like KubeRay's operator flags.
type Controllers struct {
	// Ray and Kube select the Ray controllers and kube-controller-manager's (see RayControllers,
	// KubeControllers and manager.Registry.Select): all, none, names, -name.
	Ray, Kube []string
	// WatchNamespaces limits the Ray controllers to these namespaces (empty: all).
	WatchNamespaces []string
	// ReconcileConcurrency is the number of concurrent reconciles per Ray controller.
	ReconcileConcurrency int
	// LeaderElect makes each manager hold a Lease before running controllers.
	LeaderElect bool
	// MetricsAddr and HealthAddr are where the Ray controllers serve metrics and health probes ("0": off).
	MetricsAddr, HealthAddr string
}

// Startup is the start-up's breakdown, known once the control plane is ready.
type Startup struct {
	// Ready is the time from Start to ready.
	Ready time.Duration
	// Components holds each component's start-up time in milliseconds, by the name its line shows.
	Components map[string]int64
	// Server is the API server's URL; Kubeconfig the path of the admin kubeconfig.
	Server, Kubeconfig string
}

// ControlPlane is one control plane on one data dir: New, then Start (or Run), then Stop.
type ControlPlane struct {
	cfg     Config
	out     io.Writer
	started time.Time
	times   map[string]int64
	ready   chan struct{}
	startup Startup
	stopped bool

	dir       *datadir.Dir
	locked    bool
	logFile   *os.File
	logger    *zap.Logger
	restoreGC func()
	recorder  *chain.Recorder

	certs      *certificates
	store      *etcd.Server
	server     *apiserver.Server
	serverDone chan error
	stopServer context.CancelFunc
	ray        *hostray.Ray
	sandbox    Sandbox
	rt         *selector.Choice
	podNet     atomic.Pointer[network.Manager] // the pod network, once the runtime is chosen
	images     *preload.Runtime
	podAPI     podAPIAddress
	egress     *egress.Egress // pods' way out, where they have a network of their own
	clusterDNS []string
	// policyEnforced says the NetworkPolicy enforcer runs (the "netpolicy" step).
	policyEnforced bool

	// Components talk to the API server only; they stop before it does.
	compCtx        context.Context
	stopComponents context.CancelFunc
	components     sync.WaitGroup
}

// New checks cfg; nothing starts until Start.
func New(cfg Config) (*ControlPlane, error) {
	if err := egress.CheckMode(cfg.PodEgress); err != nil {
		return nil, err
	}
	if _, err := cfg.nodeSpecs(); err != nil {
		return nil, err
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.Err == nil {
		cfg.Err = os.Stderr
	}
	return &ControlPlane{cfg: cfg, out: cfg.Out, times: map[string]int64{}, ready: make(chan struct{}), restoreGC: func() {}}, nil
}

// Until ready the garbage collector runs at startupGCPercent (GOGC), but no later than when the heap
// reaches startupMemoryLimit (a soft limit, as GOMEMLIMIT): less collecting, a bounded peak.
const (
	startupGCPercent   = 400
	startupMemoryLimit = 384 << 20
)

// Start starts every component in order, printing a line for each, and returns once the control plane
// is ready (having printed "ready in N ms"), or with the first error, everything started so far
// stopped again. ctx is the control plane's life: the runtime and etcd watch it.
func (cp *ControlPlane) Start(ctx context.Context) (err error) {
	cp.started = time.Now()
	// Started before anything else changes, so that a profile that cannot be written leaves nothing to
	// undo.
	stopProfile, err := startCPUProfile(cp.cfg.StartupCPUProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	// Start-up allocates much and keeps little (CRD schemas decoded, converted and compiled, OpenAPI
	// specs built): collecting less often until ready saves a large share of its CPU on small machines.
	gcPercent, memLimit := debug.SetGCPercent(startupGCPercent), debug.SetMemoryLimit(startupMemoryLimit)
	cp.restoreGC = func() { debug.SetGCPercent(gcPercent); debug.SetMemoryLimit(memLimit) }
	defer func() {
		if err != nil {
			cp.shutdown()
		}
	}()
	if cp.sandbox, err = DecideSandbox(cp.cfg.PodNetwork); err != nil {
		return err
	}
	if cp.sandbox.Reexec {
		return errors.New("rayctl must run again inside a user namespace of its own first (userns.Reexec) to give pods network namespaces")
	}
	if cp.sandbox.Mode == SandboxRootless {
		// What rayctl mounts (namespace files, volumes) stays in its own mount namespace.
		if err := userns.PrivateMounts(); err != nil {
			return err
		}
	}
	if err := cp.openDataDir(); err != nil {
		return err
	}
	fmt.Fprintf(cp.out, "rayctl up (data dir %s)\n", cp.dir.Path)
	fmt.Fprintf(cp.out, "  %-10s %s\n", "sandbox", cp.sandbox.Why)
	if cp.sandbox.Mode == SandboxHost {
		// What changes for Ray's pods there (docs/sandbox.md, Host network).
		fmt.Fprintf(cp.out, "  %-10s %s\n", "", "Ray pods get ports of their own (20000 up) and each RayCluster's Ray requires its token: "+
			"RAY_AUTH_MODE=token RAY_AUTH_TOKEN=$(rayctl get token CLUSTER)")
	}
	// Finding the host's Ray starts Python (a second or two the first time): it runs beside the
	// control plane's start and is awaited only by the runtime.
	foundRay := findRay(ctx, cp.cfg, cp.dir)
	if err := cp.step("pki", cp.issueCertificates); err != nil {
		return err
	}
	// The API server reads the CRDs' manifests when it installs them, and again when it first needs their
	// pod template schema: they are not kept in between.
	groups := cp.crdGroups()
	crds := func() ([][]byte, error) { return configs.CRDManifests(groups...) }
	var built <-chan builtServer
	if err := cp.step("etcd", func() (string, error) {
		var err error
		if built, err = cp.startEtcd(ctx, crds); err != nil {
			return "", err
		}
		return cp.store.Endpoint, nil
	}); err != nil {
		return err
	}
	// The container runtime needs nothing of the API server until it publishes its RuntimeClasses: it is
	// chosen and started (a private containerd, the node's network) while the server starts, the wait
	// for the server's readiness (its post-start hooks) leaving a core free.
	cp.compCtx, cp.stopComponents = context.WithCancel(context.Background())
	serving := make(chan struct{})
	if err := cp.parallelSteps(
		namedStep{"apiserver", func() (string, error) {
			detail, err := cp.startAPIServer(ctx, <-built, configs.CRDCount(groups...))
			if err == nil {
				close(serving)
			}
			return detail, err
		}},
		namedStep{"runtime", func() (string, error) { return cp.startRuntime(ctx, foundRay, serving) }},
	); err != nil {
		return err
	}
	for _, s := range []namedStep{
		{"ray", func() (string, error) { return rayLine(cp.rt, cp.ray, cp.cfg.Ray), nil }},
		{"pod-api", cp.servePods},
		{"egress", cp.startEgress},
		{"dns", cp.startDNS},
		{"netpolicy", cp.startNetworkPolicy},
		{"services", cp.startServices},
	} {
		if err := cp.step(s.name, s.run); err != nil {
			return err
		}
	}
	// The kubelet and the controller managers know nothing of each other (each talks to the API server
	// only): they start side by side. One after another, the node's registration and the managers'
	// first requests were two serial waits on the API server of a warm start.
	if err := cp.parallelSteps(namedStep{"kubelet", cp.startNode}, namedStep{"controllers", cp.startControllers}); err != nil {
		return err
	}
	return cp.markReady()
}

// namedStep is a start-up step and the name its line shows.
type namedStep struct {
	name string
	run  func() (string, error)
}

// parallelSteps runs independent steps at once, each timed from the common start, and prints their
// lines in the order given once all have returned. A step that fails stops the components so far (so that no
// other waits for long), and its error is returned.
func (cp *ControlPlane) parallelSteps(steps ...namedStep) error {
	type outcome struct {
		detail string
		ms     int64
		err    error
	}
	outs := make([]outcome, len(steps))
	t := time.Now()
	var wg sync.WaitGroup
	for i, s := range steps {
		wg.Go(func() {
			detail, err := s.run()
			outs[i] = outcome{detail, time.Since(t).Milliseconds(), err}
			if err != nil {
				// Logged as it happens: the line printed later names only the first cause.
				cp.logger.Error("start-up step failed", zap.String("step", s.name), zap.Error(err))
				cp.stopComponents()
			}
		})
	}
	wg.Wait()
	var first error
	for i, s := range steps {
		err := cp.report(s.name, outs[i].detail, outs[i].ms, outs[i].err)
		// A step that failed because another one stopped the components is not the cause.
		if err != nil && (first == nil || errors.Is(first, context.Canceled)) {
			first = err
		}
	}
	return first
}

// step times one start-up step and prints its line.
func (cp *ControlPlane) step(name string, f func() (string, error)) error {
	t := time.Now()
	detail, err := f()
	return cp.report(name, detail, time.Since(t).Milliseconds(), err)
}

// report prints a finished step's line and keeps its time; a failed step's error comes back named after
// the step.
func (cp *ControlPlane) report(name, detail string, ms int64, err error) error {
	if err != nil {
		fmt.Fprintf(cp.out, "  %-10s failed after %d ms\n", name, ms)
		return fmt.Errorf("%s: %w", name, err)
	}
	cp.times[name] = ms
	fmt.Fprintf(cp.out, "  %-10s %5d ms  %s\n", name, ms, detail)
	return nil
}

// openDataDir opens and locks the data dir and sends the logs to its rayctl.log.
func (cp *ControlPlane) openDataDir() error {
	dir, err := datadir.Open(cp.cfg.DataDir)
	if err != nil {
		return err
	}
	if err := dir.Lock(); err != nil {
		return err
	}
	cp.dir, cp.locked = dir, true
	if cp.logFile, err = os.OpenFile(dir.Join("rayctl.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
		return err
	}
	cp.logger = redirectLogs(cp.logFile)
	return nil
}

// crdGroups are the groups whose CRDs the control plane installs at start.
func (cp *ControlPlane) crdGroups() []string {
	if cp.cfg.GatewayAPI {
		return []string{configs.RayGroup, configs.GatewayGroup}
	}
	return []string{configs.RayGroup}
}

// markReady writes the admin kubeconfig and the data dir's state, says so, and hands start-up's
// memory back.
func (cp *ControlPlane) markReady() error {
	serverURL := "https://" + cp.server.Addr
	if err := kubeconfig.Write(cp.dir.Kubeconfig(), kubeconfig.Build(serverURL, cp.certs.ca.CertPEM(), cp.certs.admin)); err != nil {
		return err
	}
	readyMs := time.Since(cp.started).Milliseconds()
	state := datadir.State{PID: os.Getpid(), Server: serverURL, ReadyMillis: readyMs, Components: cp.times,
		Runtime: cp.rt.Name, ContainerdSocket: cp.rt.Address, Sandbox: cp.sandbox.Why}
	if err := cp.dir.WriteState(state); err != nil {
		return err
	}
	cp.startup = Startup{Ready: time.Duration(readyMs) * time.Millisecond, Components: cp.times, Server: serverURL, Kubeconfig: cp.dir.Kubeconfig()}
	// After the state file, which pkg/instance reads once it sees this line.
	fmt.Fprintln(cp.out, state.ReadyLine())
	fmt.Fprintf(cp.out, "kubeconfig: %s\n", cp.dir.Kubeconfig())
	fmt.Fprintf(cp.out, "next: rayctl kubectl apply -f configs/samples/raycluster.yaml   (then: rayctl kubectl get rayclusters,pods)\n")
	cp.logger.Info("ready", zap.Int64("ms", readyMs), zap.String("server", serverURL))
	// Start-up builds large transient structures (CRD schemas, OpenAPI specs); hand their memory back
	// to the system now rather than whenever the scavenger gets to it, and later whenever quiet
	// (memory.go).
	cp.restoreGC()
	cp.run(func(ctx context.Context) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		returnHeap()
		if dropBinaryPagesWhenQuiet {
			_, _ = selfpages.Drop()
		}
		returnMemoryWhenQuiet(ctx)
	})
	close(cp.ready)
	return nil
}

// Ready is closed once Start has succeeded.
func (cp *ControlPlane) Ready() <-chan struct{} { return cp.ready }

// Startup is the start-up's breakdown; valid once Ready is closed.
func (cp *ControlPlane) Startup() Startup { return cp.startup }

// Wait blocks until ctx ends (nil) or a component fails for good (its error): the API server or etcd
// stopped, or a private containerd that is no longer restarted. Call it once, after Start.
func (cp *ControlPlane) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-cp.serverDone:
		cp.server = nil
		return fmt.Errorf("the API server stopped: %v", err)
	case err := <-cp.store.Err():
		return fmt.Errorf("etcd failed: %v", err)
	case err := <-cp.rt.Failed:
		return fmt.Errorf("%v; stopping (once containerd runs again, `rayctl up` re-adopts the pods' containers)", err)
	}
}

// Stop stops a ready control plane cleanly: the data dir no longer says it runs, the components stop,
// then the API server, etcd and the runtime; it prints "stopped". It does nothing before Start has
// succeeded (a failed Start has stopped what it started), and nothing the second time.
func (cp *ControlPlane) Stop() {
	select {
	case <-cp.ready:
	default:
		return
	}
	if cp.stopped {
		return
	}
	cp.stopped = true
	os.Remove(cp.dir.Join("rayctl.state"))
	cp.stopAll()
	fmt.Fprintln(cp.out, "stopped")
	cp.shutdown()
}

// Run starts the control plane and runs it until ctx ends ("stopping", then Stop) or a component fails
// (everything stopped, its error returned).
func (cp *ControlPlane) Run(ctx context.Context) error {
	if err := cp.Start(ctx); err != nil {
		return err
	}
	if err := cp.Wait(ctx); err != nil {
		cp.shutdown()
		return err
	}
	fmt.Fprintln(cp.out, "stopping")
	cp.Stop()
	return nil
}

// stopAll stops the components, then the API server, then etcd: what the "stopped" line waits for.
func (cp *ControlPlane) stopAll() {
	if cp.stopComponents != nil {
		cp.stopComponents()
		cp.components.Wait()
	}
	if cp.stopServer != nil {
		cp.stopServer()
		if cp.server != nil {
			<-cp.serverDone
			cp.server = nil
		}
	}
	if cp.store != nil {
		cp.store.Close()
	}
}

// shutdown stops whatever started, in reverse order, and lets go of the data dir. It may run twice.
func (cp *ControlPlane) shutdown() {
	cp.stopAll()
	cp.stopEgress()
	if cp.rt != nil {
		cp.rt.Close()
		if cp.rt.Network != nil {
			// With no pod left the node namespace goes too, so nothing of rayctl stays mounted.
			if err := cp.rt.Network.RemoveNodeIfUnused(); err != nil {
				cp.logger.Warn("removing the node network namespace", zap.Error(err))
			}
		}
		cp.rt = nil
	}
	if cp.logFile != nil {
		cp.logFile.Close()
		cp.logFile = nil
	}
	if cp.locked {
		cp.dir.Unlock()
		cp.locked = false
	}
	cp.restoreGC()
}

// run runs f as one of the components, which stop (their context ends) before the API server does.
func (cp *ControlPlane) run(f func(ctx context.Context)) {
	cp.components.Go(func() { f(cp.compCtx) })
}

// runLogged runs a component as run does; an error it stops with before Stop is logged under name.
func (cp *ControlPlane) runLogged(name string, f func(ctx context.Context) error) {
	logger := cp.logger.Named(name)
	cp.run(func(ctx context.Context) {
		if err := f(ctx); err != nil && ctx.Err() == nil {
			logger.Error(name+" stopped", zap.Error(err))
		}
	})
}

// startCPUProfile starts a CPU profile into the file at path (nothing when path is empty); the
// function returned stops it and closes the file.
func startCPUProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("the start-up CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("the start-up CPU profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
