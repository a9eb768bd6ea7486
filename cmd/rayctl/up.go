package main

import (
	"context"
	"crypto/ecdsa"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/klog/v2"

	"github.com/rayctl/rayctl/configs"
	"github.com/rayctl/rayctl/pkg/apiserver"
	"github.com/rayctl/rayctl/pkg/apiserver/chainaudit"
	"github.com/rayctl/rayctl/pkg/apiserver/etcd"
	"github.com/rayctl/rayctl/pkg/apiserver/kubeconfig"
	"github.com/rayctl/rayctl/pkg/apiserver/pki"
	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/chain/chainhttp"
	"github.com/rayctl/rayctl/pkg/datadir"
	"github.com/rayctl/rayctl/pkg/instance"
	"github.com/rayctl/rayctl/pkg/kubelet/node"
	"github.com/rayctl/rayctl/pkg/runtime/preload"
	"github.com/rayctl/rayctl/pkg/runtime/selector"
)

type upOptions struct {
	*globalFlags
	port    int
	detach  bool
	runtime string
	podCIDR string
	bridge  string
	ctrl    controllerFlags
	// nodeName names this machine's Node.
	nodeName string
	// nodeCapacity overrides what the Node advertises (--node-capacity cpu=8,memory=16Gi).
	nodeCapacity map[string]string
	// kubelet runs this machine's kubelet and the binder; off, pods stay unscheduled (tests that play
	// the kubelet themselves turn it off).
	kubelet bool
	// chainBuffer is the number of trigger-chain events kept (0 turns the recorder off).
	chainBuffer int
	// recorder records the trigger chain; nil when off.
	recorder *chain.Recorder
	// etcdQuota bounds etcd's database in bytes (0: etcd's default).
	etcdQuota int64
	// ray says what runs Ray's images: auto, host or sim; rayPath is an explicit host `ray`.
	ray, rayPath string
	// gatewayAPI installs the Gateway API's CRDs beside the Ray ones.
	gatewayAPI bool
}

// crdGroups are the groups whose CRDs rayctl installs at start.
func (o *upOptions) crdGroups() []string {
	if o.gatewayAPI {
		return []string{configs.RayGroup, configs.GatewayGroup}
	}
	return []string{configs.RayGroup}
}

func newUpCommand(g *globalFlags) *cobra.Command {
	o := &upOptions{globalFlags: g}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start the control plane in the foreground (Ctrl-C stops it), or in the background with --detach",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// Refused before anything starts, --detach or not.
			if _, err := node.ParseCapacity(o.nodeCapacity); err != nil {
				return fmt.Errorf("--node-capacity %w", err)
			}
			if o.detach {
				return detach(cmd.OutOrStdout(), o)
			}
			return up(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	cmd.Flags().IntVar(&o.port, "port", 6443, "API server port on 127.0.0.1 (0 picks a free one and writes it into the kubeconfig)")
	cmd.Flags().BoolVar(&o.detach, "detach", false, "start in the background and return once ready; rayctl down stops it")
	cmd.Flags().StringVar(&o.runtime, "runtime", "auto", "container runtime: auto (process when the host's Ray runs Ray's images, else containerd if present, else process), containerd, process, or fake (benchmarks only)")
	cmd.Flags().StringVar(&o.ray, "ray", selector.RayAuto, "what runs Ray's images (rayproject/ray…): auto (the host's Ray when found, else the images on containerd, else raysim), host (the host's Ray, on the process runtime, or fail), image (containerd pulls and runs them), or sim (raysim, on the process runtime)")
	cmd.Flags().StringVar(&o.rayPath, "ray-path", "", "the host's ray executable (default: the venv that make ray makes beside rayctl, then ray on PATH)")
	cmd.Flags().StringVar(&o.podCIDR, "pod-cidr", "10.244.0.0/16", "the range pod IPs come from")
	cmd.Flags().StringVar(&o.bridge, "bridge", "rayctl0", "the Linux bridge pods attach to")
	cmd.Flags().StringVar(&o.nodeName, "node-name", defaultNodeName(), "the name of this machine's Node")
	cmd.Flags().StringToStringVar(&o.nodeCapacity, "node-capacity", nil, "what the Node advertises instead of the host's measure, e.g. cpu=8,memory=16Gi (more than the host has lets samples sized for a bigger machine schedule, and overcommits it)")
	cmd.Flags().BoolVar(&o.kubelet, "kubelet", true, "run this machine's kubelet and the binder that schedules pods onto it")
	cmd.Flags().BoolVar(&o.gatewayAPI, "gateway-api", false, "also serve the Gateway API (gateway.networking.k8s.io: GatewayClass, Gateway, HTTPRoute, GRPCRoute, ReferenceGrant) as CRDs, stored and validated, no controller acting on them; off by default, as on kind, since they cost every start CPU and memory (once installed they stay: deleting a CRD deletes its objects)")
	cmd.Flags().Int64Var(&o.etcdQuota, "etcd-quota-bytes", 0, "etcd's database quota in bytes (0: etcd's default, 2 GiB); over it, writes fail with an out-of-space error until objects are deleted")
	cmd.Flags().StringSliceVar(&o.ctrl.controllers, "controllers", []string{"all"}, "Ray controllers to run: all, none (leave ray.io to an external operator such as KubeRay), or names ("+strings.Join(rayControllers, ", ")+"; -name leaves one out)")
	cmd.Flags().StringSliceVar(&o.ctrl.kubeControllers, "kube-controllers", []string{"all"}, "kube-controller-manager controllers to run: all, none, or names ("+strings.Join(kubeControllers, ", ")+"; -name leaves one out)")
	cmd.Flags().StringSliceVar(&o.ctrl.watchNamespaces, "watch-namespace", nil, "namespaces the Ray controllers watch (default: all)")
	cmd.Flags().IntVar(&o.ctrl.reconcileConcurrency, "reconcile-concurrency", 1, "concurrent reconciles per Ray controller")
	cmd.Flags().StringVar(&o.ctrl.metricsAddr, "metrics-bind-address", "0", "where the Ray controllers serve Prometheus metrics, e.g. 127.0.0.1:8085 (0 = off; :8080 is Ray's metrics port)")
	cmd.Flags().StringVar(&o.ctrl.healthAddr, "health-probe-bind-address", "0", "where the Ray controllers serve /healthz and /readyz, e.g. 127.0.0.1:8086 (0 = off)")
	cmd.Flags().IntVar(&o.chainBuffer, "chain-buffer", chain.DefaultSize, "trigger-chain events kept for rayctl trace and rayctl diagnose (0 turns the recorder off)")
	cmd.Flags().BoolVar(&o.ctrl.leaderElect, "leader-elect", true, "hold a Lease before running controllers, so two rayctl instances on one API server never both act")
	return cmd
}

// component times one start-up step and prints its line.
type component struct {
	out   io.Writer
	start time.Time
	times map[string]int64
}

func (c *component) step(name string, f func() (string, error)) error {
	t := time.Now()
	detail, err := f()
	ms := time.Since(t).Milliseconds()
	if err != nil {
		fmt.Fprintf(c.out, "  %-10s failed after %d ms\n", name, ms)
		return fmt.Errorf("%s: %w", name, err)
	}
	c.times[name] = ms
	fmt.Fprintf(c.out, "  %-10s %5d ms  %s\n", name, ms, detail)
	return nil
}

// Until rayctl up is ready the garbage collector runs at startupGCPercent (GOGC), but no later than
// when the heap reaches startupMemoryLimit (a soft limit, as GOMEMLIMIT): less collecting, a bounded peak.
const (
	startupGCPercent   = 400
	startupMemoryLimit = 384 << 20
)

// up runs the control plane until SIGINT or SIGTERM, then stops it in reverse order.
func up(parent context.Context, out io.Writer, o *upOptions) error {
	started := time.Now()
	// Start-up allocates much and keeps little (CRD schemas decoded, converted and compiled, OpenAPI
	// specs built): collecting less often until ready saves a large share of its CPU on small machines.
	gcPercent, memLimit := debug.SetGCPercent(startupGCPercent), debug.SetMemoryLimit(startupMemoryLimit)
	restoreGC := func() { debug.SetGCPercent(gcPercent); debug.SetMemoryLimit(memLimit) }
	defer restoreGC() // an early return
	dir, err := datadir.Open(o.dataDir)
	if err != nil {
		return err
	}
	if err := dir.Lock(); err != nil {
		return err
	}
	defer dir.Unlock()

	logFile, err := os.OpenFile(dir.Join("rayctl.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	logger := redirectLogs(logFile)

	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()

	fmt.Fprintf(out, "rayctl up (data dir %s)\n", dir.Path)
	c := &component{out: out, start: started, times: map[string]int64{}}

	// Finding the host's Ray starts Python (a second or two the first time): it runs beside the
	// control plane's start and is awaited only by the runtime.
	foundRay := findRay(ctx, o, dir)

	var ca *pki.Authority
	var serving, loopback, admin, kubeletClient *pki.KeyPair
	var etcdCreds *etcd.Credentials
	var saKey *ecdsa.PrivateKey
	if err := c.step("pki", func() (string, error) {
		var err error
		if ca, err = pki.LoadOrCreate(dir.Join("pki")); err != nil {
			return "", damaged(dir, err)
		}
		hosts, ips, err := apiServerSANs(o.podCIDR)
		if err != nil {
			return "", err
		}
		if serving, err = ca.Serving("apiserver", hosts, ips); err != nil {
			return "", err
		}
		if saKey, err = ca.SigningKey("sa"); err != nil {
			return "", damaged(dir, err)
		}
		if etcdCreds, err = etcd.IssueCredentials(dir.Join("pki", "etcd"), dir.Join("pki")); err != nil {
			return "", damaged(dir, err)
		}
		if loopback, err = ca.Client("apiserver-loopback", "system:apiserver", []string{"system:masters"}); err != nil {
			return "", err
		}
		if admin, err = ca.Client("admin", "rayctl-admin", []string{"system:masters"}); err != nil {
			return "", err
		}
		if kubeletClient, err = ca.Client("apiserver-kubelet-client", kubeletClientUser, nil); err != nil {
			return "", err
		}
		return dir.Join("pki"), nil
	}); err != nil {
		return err
	}

	var store *etcd.Server
	if err := c.step("etcd", func() (string, error) {
		var err error
		store, err = etcd.Start(ctx, etcdCreds.ServerConfig(etcd.Config{
			Dir: dir.Join("etcd"), Logger: logger.Named("etcd"), RequireData: dir.Initialized(), Fatal: etcdFatal(dir, os.Stderr),
			QuotaBackendBytes: o.etcdQuota,
		}))
		if err != nil {
			return "", damaged(dir, err)
		}
		return store.Endpoint, dir.MarkInitialized()
	}); err != nil {
		return err
	}
	defer store.Close()

	crds, err := configs.CRDManifests(o.crdGroups()...)
	if err != nil {
		return err
	}
	var server *apiserver.Server
	serverDone := make(chan error, 1)
	serverCtx, stopServer := context.WithCancel(context.Background())
	defer func() {
		stopServer()
		if server != nil {
			<-serverDone
		}
	}()
	if err := c.step("apiserver", func() (string, error) {
		var err error
		cfg := apiserver.Config{
			Port: o.port, CA: ca, Serving: serving, Loopback: loopback, KubeletClient: kubeletClient, ServiceAccountKey: saKey,
			EtcdEndpoint: store.Endpoint, EtcdClient: etcdCreds.APIServerClient, EtcdCAFile: etcdCreds.CA.CertFile(), CRDs: crds,
			// etcd-readiness (the API server's own) reads through etcd at most every second and waits up to
			// 2 s; this one says at once when raft has no leader.
			ReadyChecks: []healthz.HealthChecker{healthz.NamedCheck("etcd-leader", func(*http.Request) error { return store.HasLeader() })},
		}
		if o.chainBuffer > 0 {
			o.recorder = chain.New(o.chainBuffer)
			cfg.Audit, cfg.AuditPolicy = chainaudit.Backend(o.recorder), chainaudit.Policy()
			cfg.Debug = map[string]http.Handler{chainhttp.PathPrefix: chainhttp.Handler(o.recorder)}
			cfg.LongRunning = chainhttp.IsLongRunning
		}
		server, err = apiserver.New(cfg)
		if err != nil {
			return "", err
		}
		go func() { serverDone <- server.Run(serverCtx) }()
		readyCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		errc := make(chan error, 1)
		go func() { errc <- apiserver.WaitReady(readyCtx, server.LoopbackConfig) }()
		select {
		case err := <-errc:
			if err != nil {
				return "", fmt.Errorf("not ready: %w (see %s)", err, dir.Join("rayctl.log"))
			}
		case err := <-serverDone:
			server = nil
			return "", fmt.Errorf("stopped: %v (see %s)", err, dir.Join("rayctl.log"))
		}
		return "https://" + server.Addr + fmt.Sprintf(" (%d CRDs established)", len(crds)), nil
	}); err != nil {
		return err
	}

	var rt *selector.Choice
	var images *preload.Runtime
	ray, rayErr := foundRay()
	if rayErr != nil {
		return rayErr
	}
	if err := c.step("runtime", func() (string, error) {
		var err error
		if err := dir.WriteNodeConfig(datadir.NodeConfig{Runtime: o.runtime, PodCIDR: o.podCIDR, Bridge: o.bridge}); err != nil {
			return "", err
		}
		rt, images, err = startRuntime(ctx, dir, o, ray, out, logger.Named("runtime"))
		if err != nil {
			return "", err
		}
		// The runtime chosen, not "auto": `down --purge` must find it whatever auto would take then.
		if err := dir.WriteNodeConfig(datadir.NodeConfig{Runtime: rt.Name, PodCIDR: o.podCIDR, Bridge: o.bridge}); err != nil {
			return "", err
		}
		return rt.Reason, nil
	}); err != nil {
		return err
	}
	defer rt.Close()
	if err := c.step("ray", func() (string, error) { return rayLine(rt, ray, o.ray), nil }); err != nil {
		return err
	}

	serverURL := "https://" + server.Addr
	// Components talk to the API server only; they stop before it does.
	compCtx, stopComponents := context.WithCancel(context.Background())
	var components sync.WaitGroup
	stopAll := func() {
		stopComponents()
		components.Wait()
	}
	defer stopAll()

	var podAPI podAPIAddress
	if err := c.step("pod-api", func() (string, error) {
		var err error
		podAPI.host, podAPI.port, err = servePods(compCtx, server, rt)
		if err != nil {
			return "", err
		}
		return "pods reach the API server at https://" + podAPI.String() + " (default/kubernetes)", nil
	}); err != nil {
		return err
	}

	var clusterDNS []string
	if err := c.step("dns", func() (string, error) {
		var addrs string
		var err error
		clusterDNS, addrs, err = startDNS(compCtx, components.Go, ca, serverURL, rt, logger.Named("dns"))
		return addrs, err
	}); err != nil {
		return err
	}

	if err := c.step("kubelet", func() (string, error) {
		if !o.kubelet {
			return "off (--kubelet=false): pods stay unscheduled", nil
		}
		kl, err := startNode(compCtx, components.Go, ca, serverURL, dir, o, images, clusterDNS, podAPI, out, logger.Named("kubelet"))
		if err != nil {
			return "", err
		}
		return "node " + o.nodeName + ", API " + kl.APIAddr(), nil
	}); err != nil {
		return err
	}

	if err := c.step("controllers", func() (string, error) {
		ctrlFlags := o.ctrl
		if o.kubelet {
			// The node's pods need placing: the binder, as the scheduler.
			ctrlFlags.insufficientHint = insufficientHint(o.nodeCapacity)
			ctrlFlags.scheduler = true
		}
		managers, names, err := controllerManagers(ca, serverURL, dir, ctrlFlags, o.recorder, rt.HostRay, logger)
		if err != nil {
			return "", err
		}
		for _, m := range managers {
			components.Go(func() { m.run(compCtx, logger) })
		}
		if len(names) == 0 {
			return "none", nil
		}
		return strings.Join(names, ", "), nil
	}); err != nil {
		return err
	}
	if err := kubeconfig.Write(dir.Kubeconfig(), kubeconfig.Build(serverURL, ca.CertPEM(), admin)); err != nil {
		return err
	}
	readyMs := time.Since(started).Milliseconds()
	if err := dir.WriteState(datadir.State{PID: os.Getpid(), Server: serverURL, ReadyMillis: readyMs, Components: c.times,
		Runtime: rt.Name, ContainerdSocket: rt.Address}); err != nil {
		return err
	}
	fmt.Fprintf(out, "ready in %d ms\n", readyMs)
	fmt.Fprintf(out, "kubeconfig: %s\n", dir.Kubeconfig())
	fmt.Fprintf(out, "next: rayctl kubectl apply -f configs/samples/raycluster.yaml   (then: rayctl kubectl get rayclusters,pods)\n")
	logger.Info("ready", zap.Int64("ms", readyMs), zap.String("server", serverURL))
	// Start-up builds large transient structures (CRD schemas, OpenAPI specs); hand their memory back
	// to the system now rather than whenever the scavenger gets to it.
	restoreGC()
	go func() {
		time.Sleep(time.Second)
		debug.FreeOSMemory()
	}()

	select {
	case <-ctx.Done():
		fmt.Fprintln(out, "stopping")
	case err := <-serverDone:
		server = nil
		return fmt.Errorf("the API server stopped: %v", err)
	case err := <-store.Err():
		return fmt.Errorf("etcd failed: %v", err)
	case err := <-rt.Failed:
		return fmt.Errorf("%v; stopping (once containerd runs again, `rayctl up` re-adopts the pods' containers)", err)
	}
	os.Remove(dir.Join("rayctl.state"))
	stopAll()
	stopServer()
	<-serverDone
	server = nil
	store.Close()
	fmt.Fprintln(out, "stopped")
	return nil
}

// redirectLogs sends klog (the API server's logs) and a zap logger (etcd's) to w.
func redirectLogs(w io.Writer) *zap.Logger {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	_ = fs.Set("v", os.Getenv("RAYCTL_V"))
	// One writer for every severity: with one_output each entry is written once, not once per level.
	_ = fs.Set("one_output", "true")
	klog.SetOutput(w)
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(w), zap.InfoLevel)
	return zap.New(core)
}

// detach starts `rayctl up` again as a background process and waits until it is ready.
func detach(out io.Writer, o *upOptions) error {
	p, err := startDetached(context.Background(), o.dataDir, detachedArgs(os.Args))
	if err != nil {
		return err
	}
	out.Write([]byte(p.Text()))
	fmt.Fprintf(out, "running in the background (pid %d); `rayctl down` stops it\n", p.Pid())
	return nil
}

// startDetached starts `rayctl up args...` on dataDir (args name no --data-dir) as a background
// process in a session of its own, its output in the data dir's rayctl.out, and waits until it is
// ready. A rayctl already running there is refused.
func startDetached(ctx context.Context, dataDir string, args []string) (*instance.Process, error) {
	dir, err := datadir.Open(dataDir)
	if err != nil {
		return nil, err
	}
	if st, err := dir.ReadState(); err == nil {
		return nil, fmt.Errorf("rayctl is already running in %s (pid %d, %s)", dir.Path, st.PID, st.Server)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(dir.Join("rayctl.out"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	return instance.Start(ctx, instance.Options{Binary: self, DataDir: dir.Path, Args: args, Log: logFile, Detach: true})
}

// detachedArgs are the arguments of this `rayctl up --detach` without --detach, for the background child.
func detachedArgs(args []string) []string {
	var out []string
	seenUp := false
	for _, a := range args[1:] {
		if !seenUp && a == "up" {
			seenUp = true
			continue
		}
		if a == "--detach" || a == "--detach=true" {
			continue
		}
		out = append(out, a)
	}
	return out
}
