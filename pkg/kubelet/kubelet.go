// Package kubelet is rayctl's node agent. It registers the Node and keeps its Lease, watches the pods
// bound to the node (a field-selected informer, over the API server like any kubelet), runs each through
// a pod worker on a runtime.Runtime, writes their statuses back, records events, re-adopts the
// runtime's containers after a restart, and serves containers' logs and exec over HTTPS.
//
// One kubelet may serve several nodes on one runtime (rayctl up --node): each node has its own Node,
// Lease, identity, pod informer, status writer and events, as if it were its own kubelet, while the
// runtime's containers, their relisting and the kubelet API are shared, so that re-adopting the
// runtime's containers after a restart sees every node's pods at once.
package kubelet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/rayctl/rayctl/pkg/kubelet/devices"
	"github.com/rayctl/rayctl/pkg/kubelet/kubeletapi"
	"github.com/rayctl/rayctl/pkg/kubelet/node"
	"github.com/rayctl/rayctl/pkg/kubelet/podenv"
	"github.com/rayctl/rayctl/pkg/kubelet/podworker"
	"github.com/rayctl/rayctl/pkg/kubelet/probe"
	"github.com/rayctl/rayctl/pkg/kubelet/status"
	"github.com/rayctl/rayctl/pkg/runtime"
)

// EventQPS and EventBurst pace the kubelet's events, as a real kubelet's eventRecordQPS and eventBurst
// defaults do.
const (
	EventQPS   = 50
	EventBurst = 100
)

// Config configures a kubelet.
type Config struct {
	// NodeName is the Node this kubelet registers and runs pods for.
	NodeName string
	// RESTConfig reaches the API server; in production its identity is system:node:<name> in group
	// system:nodes.
	RESTConfig *rest.Config
	// Runtime runs the containers.
	Runtime runtime.Runtime
	// PodsDir holds a directory per pod, pods/<uid>/ (logs, volumes, sandbox files).
	PodsDir string
	// ClusterDNS are the nameservers of ClusterFirst pods; ClusterDomain their domain ("cluster.local").
	ClusterDNS    []string
	ClusterDomain string
	// HostResolvConf is the host's resolv.conf, for dnsPolicy Default (default /etc/resolv.conf).
	HostResolvConf string
	// APIServer is where pods reach the API server (the kubernetes Service's endpoint): every container
	// gets KUBERNETES_SERVICE_HOST and _PORT from it. Nil gives them none.
	APIServer *podenv.APIServer
	// KubernetesVersion is reported as the node's kubeletVersion, e.g. "v1.37.2".
	KubernetesVersion string
	// NodeIP is the node's InternalIP and the pods' hostIP (default 127.0.0.1).
	NodeIP string
	// NodeLabels are added to the Node's standard labels; NodeTaints are set on it.
	NodeLabels map[string]string
	NodeTaints []corev1.Taint
	// Capacity overrides the host's measured capacity where set.
	Capacity corev1.ResourceList
	// MoreNodes are further nodes this kubelet serves besides NodeName, on the same runtime.
	MoreNodes []NodeConfig
	// Simulated says the runtime runs no processes (the fake runtime of simulated nodes): every probe
	// passes without being tried.
	Simulated bool
	// CrashLoopBackOff paces container restarts and image pulls (default 10s doubling to 5m; tests
	// shorten it).
	CrashLoopBackOff podworker.BackoffConfig
	// RelistPeriod is how often the runtime's containers are listed to notice changes (default 1s).
	RelistPeriod time.Duration
	// ResyncPeriod is how often every pod is synced regardless (default 10s).
	ResyncPeriod time.Duration
	// NodeStatusInterval and LeaseInterval pace the Node's status and Lease (default 10s each).
	NodeStatusInterval, LeaseInterval time.Duration
	// Recorder, when set, records the kubelet's events instead of the kubelet's own broadcaster (whose
	// events go to the API server as reportingController "kubelet").
	Recorder record.EventRecorder
	// OnStatusWrite observes every pod status the kubelet writes, with the resourceVersion it got.
	OnStatusWrite status.WriteHook
	// API configures the kubelet API server; without a serving certificate it is not started.
	API APIConfig
}

// NodeConfig is one more node a kubelet serves.
type NodeConfig struct {
	// Name is the Node's name.
	Name string
	// RESTConfig reaches the API server as this node (system:node:<name> in production).
	RESTConfig *rest.Config
	// Labels are added to the Node's standard labels; Taints are set on it.
	Labels map[string]string
	Taints []corev1.Taint
	// Capacity overrides the host's measured capacity where set.
	Capacity corev1.ResourceList
}

// APIConfig configures the kubelet's HTTPS API (container logs and exec).
type APIConfig struct {
	// Addr is the listen address (default 127.0.0.1:0, a free port).
	Addr string
	// ServingCert is the server's certificate; ClientCAs verifies clients, which must present a
	// certificate chained to them.
	ServingCert *tls.Certificate
	ClientCAs   *x509.CertPool
	// AllowedUsers, when set, limits clients to certificates with these common names.
	AllowedUsers []string
}

// Kubelet is a running node agent.
type Kubelet struct {
	cfg Config
	// nodes are the nodes served, the first NodeName's.
	nodes    []*nodeState
	api      *kubeletapi.Server
	listener net.Listener

	mu      sync.Mutex
	workers map[types.UID]*podworker.Worker
	wg      sync.WaitGroup
	ready   chan struct{}
	// exited asks the relist loop to relist now: the runtime told of a container's exit.
	exited chan struct{}
}

// nodeState is one served node's part of the kubelet: what a kubelet of that node alone would hold.
type nodeState struct {
	cfg NodeConfig
	// hostname is the Node's Hostname address: this machine's for the first real node, the node's name
	// for the others, so that each reads as a machine of its own (kubectl get nodes -o wide).
	hostname    string
	client      kubernetes.Interface
	eventClient kubernetes.Interface
	statusMgr   *status.Manager
	sources     *sources
	deps        *podworker.Deps
	agent       *node.Agent
	devices     *devices.Manager
	informer    cache.SharedIndexInformer
	podLister   cache.Indexer
	// stopInformer stops the pod informer (no new workers); stop undoes all of startNode.
	stopInformer, stop func()
}

// New checks cfg and prepares a kubelet; Run starts it.
func New(cfg Config) (*Kubelet, error) {
	if cfg.NodeName == "" || cfg.RESTConfig == nil || cfg.Runtime == nil || cfg.PodsDir == "" {
		return nil, errors.New("kubelet: NodeName, RESTConfig, Runtime and PodsDir are required")
	}
	if cfg.ClusterDomain == "" {
		cfg.ClusterDomain = "cluster.local"
	}
	if cfg.HostResolvConf == "" {
		cfg.HostResolvConf = "/etc/resolv.conf"
	}
	if cfg.KubernetesVersion == "" {
		cfg.KubernetesVersion = "v0.0.0-unknown"
	}
	if cfg.NodeIP == "" {
		cfg.NodeIP = "127.0.0.1"
	}
	if cfg.CrashLoopBackOff.Initial <= 0 {
		cfg.CrashLoopBackOff = podworker.DefaultBackoff
	}
	if cfg.CrashLoopBackOff.Max < cfg.CrashLoopBackOff.Initial {
		cfg.CrashLoopBackOff.Max = cfg.CrashLoopBackOff.Initial
	}
	if cfg.RelistPeriod <= 0 {
		cfg.RelistPeriod = time.Second
	}
	if cfg.ResyncPeriod <= 0 {
		cfg.ResyncPeriod = 10 * time.Second
	}
	if err := os.MkdirAll(cfg.PodsDir, 0o755); err != nil {
		return nil, err
	}
	k := &Kubelet{cfg: cfg, workers: map[types.UID]*podworker.Worker{}, ready: make(chan struct{}), exited: make(chan struct{}, 1)}
	all := append([]NodeConfig{{Name: cfg.NodeName, RESTConfig: cfg.RESTConfig, Labels: cfg.NodeLabels, Taints: cfg.NodeTaints,
		Capacity: cfg.Capacity}}, cfg.MoreNodes...)
	seen := map[string]bool{}
	for _, nc := range all {
		if nc.Name == "" || nc.RESTConfig == nil || seen[nc.Name] {
			return nil, fmt.Errorf("kubelet: node %q: each node needs a name of its own and a RESTConfig", nc.Name)
		}
		seen[nc.Name] = true
		ns, err := newNodeState(cfg, nc)
		if err != nil {
			return nil, err
		}
		if len(k.nodes) > 0 || cfg.Simulated {
			ns.hostname = nc.Name
		}
		k.nodes = append(k.nodes, ns)
	}
	return k, nil
}

// newNodeState makes the clients of node nc.
func newNodeState(cfg Config, nc NodeConfig) (*nodeState, error) {
	rc := rest.CopyConfig(nc.RESTConfig)
	if rc.UserAgent == "" {
		rc.UserAgent = "kubelet/" + cfg.KubernetesVersion + " (rayctl)"
	}
	if rc.ContentType == "" {
		// Every kind the kubelet reads and writes is built in, so all of it speaks protobuf, as a real
		// kubelet's client does: the generated clients already do, and this covers the rest (its events).
		rc.ContentType = apiruntime.ContentTypeProtobuf
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	// Events go through a client of their own, paced as a real kubelet paces them (eventRecordQPS and
	// eventBurst): a burst of events then waits, or is dropped by the broadcaster, instead of holding up
	// the status writes behind it.
	ec := rest.CopyConfig(rc)
	ec.QPS, ec.Burst, ec.RateLimiter = EventQPS, EventBurst, nil
	eventClient, err := kubernetes.NewForConfig(ec)
	if err != nil {
		return nil, err
	}
	return &nodeState{cfg: nc, client: client, eventClient: eventClient, statusMgr: status.NewManager(client, cfg.OnStatusWrite),
		sources: newSources(client)}, nil
}

// Client returns the clientset of the kubelet's first node.
func (k *Kubelet) Client() kubernetes.Interface { return k.nodes[0].client }

// StatusManager returns the pod status writer of the kubelet's first node (its Writes count is useful
// to tests).
func (k *Kubelet) StatusManager() *status.Manager { return k.nodes[0].statusMgr }

// Ready is closed once the node is registered, existing containers re-adopted and pods being synced.
func (k *Kubelet) Ready() <-chan struct{} { return k.ready }

// APIAddr returns the kubelet API's address once Run has started it, else "".
func (k *Kubelet) APIAddr() string {
	if k.listener == nil {
		return ""
	}
	return k.listener.Addr().String()
}

// Run runs the kubelet until ctx ends. Containers keep running when it returns; the next kubelet
// re-adopts them.
func (k *Kubelet) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("node", k.cfg.NodeName)
	ctx = klog.NewContext(ctx, logger)
	rtVersion, err := k.cfg.Runtime.Version(ctx)
	if err != nil {
		return fmt.Errorf("runtime version: %w", err)
	}

	var port int32
	if k.cfg.API.ServingCert != nil {
		addr := k.cfg.API.Addr
		if addr == "" {
			addr = "127.0.0.1:0"
		}
		k.listener, err = net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("kubelet API: %w", err)
		}
		port = int32(k.listener.Addr().(*net.TCPAddr).Port)
		k.api = kubeletapi.New(kubeletapi.Config{
			ServingCert: *k.cfg.API.ServingCert, ClientCAs: k.cfg.API.ClientCAs, AllowedUsers: k.cfg.API.AllowedUsers,
			Pods: k, Runtime: k.cfg.Runtime,
		})
		go func() {
			if err := k.api.Serve(k.listener); err != nil && ctx.Err() == nil {
				logger.Error(err, "kubelet API stopped")
			}
		}()
		defer k.api.Close()
	}

	defer func() {
		for _, ns := range k.nodes {
			if ns.stop != nil {
				ns.stop()
			}
		}
	}()
	for _, ns := range k.nodes {
		if err := k.startNode(ctx, ns, rtVersion, port); err != nil {
			return err
		}
	}
	if err := k.adopt(ctx); err != nil {
		return fmt.Errorf("re-adopting containers: %w", err)
	}
	for _, ns := range k.nodes {
		_, err = ns.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { k.podChanged(ctx, ns, obj) },
			UpdateFunc: func(_, obj any) { k.podChanged(ctx, ns, obj) },
			DeleteFunc: func(obj any) { k.podDeleted(obj) },
		})
		if err != nil {
			return err
		}
	}
	close(k.ready)
	logger.Info("kubelet running", "runtime", rtVersion, "api", k.APIAddr(), "nodes", len(k.nodes))

	k.relistLoop(ctx)
	for _, ns := range k.nodes {
		ns.stopInformer()
	}
	k.wg.Wait()
	return nil
}

// startNode registers node ns, starts its lease and status heartbeat, its event recorder and its pod
// informer, and waits for the informer's first list; ns.stop undoes it all.
func (k *Kubelet) startNode(ctx context.Context, ns *nodeState, rtVersion string, port int32) error {
	logger := klog.FromContext(ctx).WithValues("node", ns.cfg.Name)
	ns.agent = node.New(node.Config{
		Name: ns.cfg.Name, Client: ns.client, KubeletVersion: k.cfg.KubernetesVersion, RuntimeVersion: rtVersion,
		KubeletPort: port, InternalIP: k.cfg.NodeIP, Hostname: ns.hostname, Labels: ns.cfg.Labels, Taints: ns.cfg.Taints, Capacity: ns.cfg.Capacity,
		StatusInterval: k.cfg.NodeStatusInterval, LeaseInterval: k.cfg.LeaseInterval,
	})
	for {
		err := ns.agent.Register(ctx)
		if err == nil {
			break
		}
		logger.Error(err, "registering the node; retrying")
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	nodeCtx, stopNode := context.WithCancel(klog.NewContext(ctx, logger))
	nodeDone := make(chan struct{})
	go func() { defer close(nodeDone); ns.agent.Run(nodeCtx) }()
	var stops []func()
	ns.stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	stops = append(stops, func() { stopNode(); <-nodeDone })

	recorder := k.cfg.Recorder
	if recorder == nil {
		broadcaster := record.NewBroadcaster(record.WithContext(ctx))
		broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: ns.eventClient.CoreV1().Events("")})
		stops = append(stops, broadcaster.Shutdown)
		recorder = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: ns.cfg.Name})
	}

	ns.devices = devices.New(ns.agent.Capacity())
	ns.deps = &podworker.Deps{
		NodeName: ns.cfg.Name, HostIP: k.cfg.NodeIP, Runtime: k.cfg.Runtime, Client: ns.client,
		Recorder: recorder, Status: ns.statusMgr, PodsDir: k.cfg.PodsDir,
		ClusterDNS: k.cfg.ClusterDNS, ClusterDomain: k.cfg.ClusterDomain, HostDNS: podworker.HostDNS(k.cfg.HostResolvConf),
		Allocatable: ns.agent.Capacity(), CrashBackoff: k.cfg.CrashLoopBackOff,
		Prober:       &probe.Prober{Runtime: k.cfg.Runtime, UserAgent: "kube-probe/" + k.cfg.KubernetesVersion, AlwaysSucceed: k.cfg.Simulated},
		ResyncPeriod: k.cfg.ResyncPeriod,
		APIServer:    k.cfg.APIServer,
		Devices:      ns.devices,
	}

	factory := informers.NewSharedInformerFactoryWithOptions(ns.client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", ns.cfg.Name).String()
	}), informers.WithTransform(dropManagedFields))
	ns.informer = factory.Core().V1().Pods().Informer()
	ns.podLister = ns.informer.GetIndexer()
	informerCtx, stopInformers := context.WithCancel(ctx)
	ns.stopInformer = stopInformers
	stops = append(stops, func() { stopInformers(); ns.sources.stop(); factory.Shutdown() })
	factory.Start(informerCtx.Done())
	if !cache.WaitFor(ctx, "", ns.informer.HasSyncedChecker()) {
		return ctx.Err()
	}
	return nil
}

// adopt starts a worker for every pod bound here, handing it the runtime's sandbox and containers of
// that pod, and removes the runtime's containers and sandboxes of pods that no longer exist. First, a
// runtime that can sweeps away what a crash left outside its records (see runtime.Sweeper), while no
// worker creates containers yet.
func (k *Kubelet) adopt(ctx context.Context) error {
	live := map[string]bool{}
	for _, ns := range k.nodes {
		for _, obj := range ns.podLister.List() {
			live[string(obj.(*corev1.Pod).UID)] = true
		}
	}
	if sw, ok := k.cfg.Runtime.(runtime.Sweeper); ok {
		removed, err := sw.Sweep(ctx, live)
		if err != nil {
			klog.FromContext(ctx).Error(err, "sweeping what a crash left in the runtime")
		}
		if len(removed) > 0 {
			klog.FromContext(ctx).Info("removed what an earlier run left in the runtime", "removed", strings.Join(removed, ", "))
		}
	}
	sandboxes, err := k.cfg.Runtime.ListSandboxes(ctx)
	if err != nil {
		return err
	}
	containers, err := k.cfg.Runtime.ListContainers(ctx)
	if err != nil {
		return err
	}
	byPod := map[string][]*runtime.ContainerStatus{}
	for _, c := range containers {
		uid, _, _ := podworker.Identity(c)
		byPod[uid] = append(byPod[uid], c)
	}
	sandboxOf := map[string]*runtime.Sandbox{}
	for _, s := range sandboxes {
		sandboxOf[podworker.SandboxPodUID(s)] = s
	}
	for _, ns := range k.nodes {
		for _, obj := range ns.podLister.List() {
			pod := obj.(*corev1.Pod)
			k.startWorker(ctx, ns, pod, sandboxOf[string(pod.UID)], byPod[string(pod.UID)])
		}
	}
	orphans := map[string]bool{}
	for uid := range byPod {
		orphans[uid] = true
	}
	for uid := range sandboxOf {
		orphans[uid] = true
	}
	for uid := range orphans {
		if live[uid] || uid == "" {
			continue
		}
		if err := podworker.Cleanup(ctx, k.cfg.Runtime, k.cfg.PodsDir, uid, byPod[uid]); err != nil {
			klog.FromContext(ctx).Error(err, "removing the containers of a pod that is gone", "podUID", uid)
		}
	}
	return nil
}

func (k *Kubelet) startWorker(ctx context.Context, ns *nodeState, pod *corev1.Pod, sandbox *runtime.Sandbox, adopted []*runtime.ContainerStatus) {
	deps := *ns.deps
	deps.Sources = ns.sources.forPod(pod.UID)
	w := podworker.New(&deps, pod, sandbox, adopted)
	k.mu.Lock()
	k.workers[pod.UID] = w
	k.mu.Unlock()
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		w.Run(ctx)
		ns.sources.release(pod.UID)
		ns.devices.Release(pod.UID)
		k.mu.Lock()
		if k.workers[pod.UID] == w {
			delete(k.workers, pod.UID)
		}
		k.mu.Unlock()
	}()
}

func (k *Kubelet) podChanged(ctx context.Context, ns *nodeState, obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	ns.statusMgr.Observe(pod)
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		ns.devices.Release(pod.UID) // a finished pod's devices are free for the next, as its resources are
	}
	k.mu.Lock()
	w := k.workers[pod.UID]
	k.mu.Unlock()
	if w != nil {
		w.Update(pod)
		return
	}
	if ctx.Err() != nil {
		return
	}
	k.startWorker(ctx, ns, pod, nil, nil)
}

func (k *Kubelet) podDeleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	k.mu.Lock()
	w := k.workers[pod.UID]
	k.mu.Unlock()
	if w != nil {
		w.Gone()
	}
}

// relistLoop lists the runtime's containers every RelistPeriod and wakes the workers of pods whose
// containers changed state (the kubelet's PLEG); containers of pods without a worker are removed.
// A runtime that tells of exits (runtime.ExitNotifier) has it relist at once, so that the next init
// container starts, or a finished pod's phase is written, as soon as a container exits rather than
// up to RelistPeriod later.
func (k *Kubelet) relistLoop(ctx context.Context) {
	type seen struct {
		state    runtime.ContainerState
		finished time.Time
	}
	last := map[string]seen{}
	if n, ok := k.cfg.Runtime.(runtime.ExitNotifier); ok {
		n.NotifyExits(func(string) {
			select {
			case k.exited <- struct{}{}:
			default: // a relist is already due; it will see this exit too
			}
		})
	}
	ticker := time.NewTicker(k.cfg.RelistPeriod)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-k.exited:
		}
		list, err := k.cfg.Runtime.ListContainers(ctx)
		if err != nil {
			if ctx.Err() == nil {
				klog.FromContext(ctx).Error(err, "listing containers")
			}
			continue
		}
		now := map[string]seen{}
		changed := map[string]bool{}
		for _, c := range list {
			s := seen{state: c.State, finished: c.FinishedAt}
			now[c.ID] = s
			if last[c.ID] != s {
				uid, _, _ := podworker.Identity(c)
				changed[uid] = true
			}
		}
		last = now
		k.mu.Lock()
		for uid := range changed {
			if w := k.workers[types.UID(uid)]; w != nil {
				w.Wake()
			}
		}
		k.mu.Unlock()
	}
}

// worker finds the worker of pod ns/name.
func (k *Kubelet) worker(ns, name string) *podworker.Worker {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, w := range k.workers {
		if p := w.Pod(); p.Namespace == ns && p.Name == name {
			return w
		}
	}
	return nil
}

// Container locates a container of a pod on this node and its logs (kubeletapi.Pods).
func (k *Kubelet) Container(ns, pod, container string) (kubeletapi.ContainerRef, error) {
	w := k.worker(ns, pod)
	if w == nil {
		return kubeletapi.ContainerRef{}, fmt.Errorf("pod %s/%s not found on this node: %w", ns, pod, kubeletapi.ErrNotFound)
	}
	ref, ok := w.Logs(container)
	if !ok {
		return kubeletapi.ContainerRef{}, fmt.Errorf("container %q in pod %q is waiting to start: %w", container, pod, kubeletapi.ErrNotFound)
	}
	return kubeletapi.ContainerRef{ID: ref.ContainerID, Running: ref.Running, LogPath: ref.LogPath, PreviousLogPath: ref.PreviousLogPath}, nil
}

// Network says where the ports of pod ns/name on this node are reached (kubeletapi.Pods).
func (k *Kubelet) Network(ns, pod string) (kubeletapi.PodNetwork, error) {
	w := k.worker(ns, pod)
	if w == nil {
		return kubeletapi.PodNetwork{}, fmt.Errorf("pod %s/%s not found on this node: %w", ns, pod, kubeletapi.ErrNotFound)
	}
	n, ok := w.Network()
	if !ok {
		return kubeletapi.PodNetwork{}, fmt.Errorf("pod %s/%s has no sandbox: %w", ns, pod, kubeletapi.ErrNotReady)
	}
	return kubeletapi.PodNetwork{UID: string(w.UID()), NetNSPath: n.NetNSPath, Gone: w.Done()}, nil
}

// dropManagedFields is the pod informer's transform: the kubelet never reads a pod's managedFields
// (it writes status patches built from status alone), which are a large part of a pod kept for as
// long as the pod lives.
func dropManagedFields(obj any) (any, error) {
	if pod, ok := obj.(*corev1.Pod); ok {
		pod.ManagedFields = nil
	}
	return obj, nil
}
