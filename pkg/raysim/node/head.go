package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/rayctl/rayctl/pkg/raysim/auth"
	"github.com/rayctl/rayctl/pkg/raysim/dashboard"
	"github.com/rayctl/rayctl/pkg/raysim/gcs"
	"github.com/rayctl/rayctl/pkg/raysim/jobs"
	"github.com/rayctl/rayctl/pkg/raysim/resource"
	"github.com/rayctl/rayctl/pkg/raysim/serve"
)

// HeadConfig configures a head node. Ports set to 0 are picked free.
type HeadConfig struct {
	// BindHost is the address the GCS, agent and metrics ports listen on;
	// empty means all interfaces.
	BindHost string
	// DashboardHost is the address the dashboard listens on; empty means BindHost.
	DashboardHost string
	// NodeIP is the address advertised for the node; empty means detected.
	NodeIP string
	// NodeTypeName is the node's type as `ray status` counts it (KubeRay's group name).
	NodeTypeName string
	// Ports: GCS (6379 in Ray), dashboard (8265), agent (52365), metrics (8080).
	GCSPort, DashboardPort, AgentPort, MetricsPort int
	// ServePort is where Serve's HTTP proxy listens (on BindHost) when a deployed config's
	// http_options name no port (8000 in Ray); 0 picks a free port. The proxy starts with the first
	// deploy, as Ray's does; -1 runs no proxy.
	ServePort int
	// Resources are the head's own resources (CPU, GPU, memory, custom).
	Resources resource.Set
	// TempDir holds the session directory (job logs) and raysim/head.json;
	// empty means /tmp/ray.
	TempDir string
	// WriteInfo makes the head write <TempDir>/raysim/head.json.
	WriteInfo bool
	// NodeTimeout is how long a worker may miss heartbeats before it is dead.
	NodeTimeout time.Duration
	// HeartbeatPeriod is how often workers are told to send heartbeats.
	HeartbeatPeriod time.Duration
	// StopGrace is the job stop grace period (SIGTERM to SIGKILL); 0 = default.
	StopGrace time.Duration
	// Version is the raysim version reported by /api/version.
	Version string
	// AuthToken, when set, is the cluster's token (Ray's RAY_AUTH_MODE=token): the GCS, the
	// dashboard and the agent refuse callers without it, but for the dashboard's and the agent's
	// open paths (health checks). The metrics page and Serve's proxy stay open, as in Ray. Empty
	// means no authentication.
	AuthToken string
	// AuthCheck, when set, decides instead of AuthToken which tokens callers may present (Ray's
	// Kubernetes-delegated token authentication, auth.K8sReviewer).
	AuthCheck auth.Check
	// Logf receives the head's log lines; nil discards them.
	Logf func(format string, args ...any)
}

// Head is a running head node.
type Head struct {
	cfg     HeadConfig
	nodeID  string
	nodeIP  string
	session string
	sessDir string
	table   *gcs.Table
	jobs    *jobs.Manager
	serve   *serve.Serve
	proxy   lateServer
	servers []*http.Server
	addrs   map[string]string
	stop    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
}

// StartHead binds every port, registers the head in its own node table and
// starts serving. Close stops it (and kills running jobs).
func StartHead(cfg HeadConfig) (*Head, error) {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.NodeTimeout <= 0 {
		cfg.NodeTimeout = 30 * time.Second
	}
	if cfg.HeartbeatPeriod <= 0 {
		cfg.HeartbeatPeriod = time.Second
	}
	if cfg.DashboardHost == "" {
		cfg.DashboardHost = cfg.BindHost
	}
	if cfg.NodeIP == "" {
		cfg.NodeIP = DetectNodeIP()
	}
	h := &Head{cfg: cfg, nodeID: gcs.NewNodeID(), nodeIP: cfg.NodeIP, addrs: map[string]string{}, stop: make(chan struct{})}

	var err error
	h.session, h.sessDir, err = newSessionDir(cfg.TempDir)
	if err != nil {
		return nil, fmt.Errorf("session directory: %w", err)
	}

	type bind struct {
		name, host string
		port       int
	}
	binds := []bind{{"gcs", cfg.BindHost, cfg.GCSPort}, {"dashboard", cfg.DashboardHost, cfg.DashboardPort}, {"agent", cfg.BindHost, cfg.AgentPort}, {"metrics", cfg.BindHost, cfg.MetricsPort}}
	lis := map[string]net.Listener{}
	for _, b := range binds {
		l, err := listen(b.name, b.host, b.port)
		if err != nil {
			for _, l := range lis {
				l.Close()
			}
			return nil, err
		}
		lis[b.name] = l
		h.addrs[b.name] = advertise(l, b.host, h.nodeIP)
	}

	h.table = gcs.NewTable(cfg.NodeTimeout, nil)
	total := cfg.Resources.Clone()
	total["node:"+h.nodeIP] = 1
	total["node:__internal_head__"] = 1
	h.table.Register(gcs.NodeInfo{NodeID: h.nodeID, NodeIP: h.nodeIP, IsHead: true, Total: total,
		AgentPort: port(lis["agent"]), MetricsPort: port(lis["metrics"]), Hostname: hostname(), InstanceID: instanceID(), RaysimVersion: cfg.Version,
		NodeTypeName: cfg.NodeTypeName})

	h.jobs = jobs.NewManager(jobs.Config{
		LogDir:       filepath.Join(h.sessDir, "logs"),
		Cluster:      h.table,
		Env:          []string{"RAY_ADDRESS=" + h.addrs["gcs"]},
		NodeID:       h.nodeID,
		NodeIP:       h.nodeIP,
		AgentAddress: "http://" + h.addrs["agent"],
		StopGrace:    cfg.StopGrace,
		Logf:         cfg.Logf,
	})
	h.table.SetOnChange(h.jobs.Kick)

	h.serve = &serve.Serve{Node: serve.Node{ID: h.nodeID, IP: h.nodeIP}, DefaultPort: cfg.ServePort}
	if cfg.ServePort >= 0 {
		h.serve.Listen = func(port int) (int, error) {
			return h.proxy.start("serve", cfg.BindHost, port, h.serve.ProxyHandler(), cfg.Logf)
		}
	}
	dash := &dashboard.Head{Jobs: h.jobs, Nodes: h.table, Serve: h.serve, Version: jobs.VersionResponse{
		Version: jobs.APIVersion, RayVersion: jobs.ReportedRayVersion(cfg.Version), RayCommit: "raysim", SessionName: h.session,
	}, TokenAuth: cfg.AuthToken != "" || cfg.AuthCheck != nil}
	check := cfg.AuthCheck
	if check == nil {
		check = auth.Equal(cfg.AuthToken)
	}
	agent := &dashboard.Agent{Healthy: func() bool { return true }}
	handlers := map[string]http.Handler{
		"gcs":       auth.Require(check, auth.Paths{})(gcs.Handler(h.table, h.clusterInfo, h.jobs.PendingDemands)),
		"dashboard": auth.Require(check, auth.DashboardOpen)(dash.Handler()),
		"agent":     auth.Require(check, auth.AgentOpen)(agent.Handler()),
		"metrics":   dashboard.MetricsHandler(func() []dashboard.Metric { return headMetrics(dash) }),
	}
	for name, l := range lis {
		srv := &http.Server{Handler: handlers[name], ReadHeaderTimeout: 10 * time.Second}
		h.servers = append(h.servers, srv)
		h.wg.Add(1)
		go func(l net.Listener) {
			defer h.wg.Done()
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				cfg.Logf("%s server: %v", name, err)
			}
		}(l)
	}
	h.wg.Add(1)
	go func() { defer h.wg.Done(); h.table.RunReaper(h.stop) }()

	if cfg.WriteInfo {
		if err := WriteHeadInfo(cfg.TempDir, h.Info()); err != nil {
			h.Close()
			return nil, fmt.Errorf("writing head info: %w", err)
		}
	}
	cfg.Logf("raysim head %s up: GCS %s, dashboard %s, agent %s, metrics %s, resources %s",
		h.nodeID[:8], h.addrs["gcs"], h.DashboardURL(), h.addrs["agent"], h.addrs["metrics"], total)
	return h, nil
}

func port(l net.Listener) int { return l.Addr().(*net.TCPAddr).Port }

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// instanceID is the node's cloud instance: $RAY_CLOUD_INSTANCE_ID (KubeRay sets the Pod's name), else
// the hostname. The autoscaler maps nodes to Pods by it.
func instanceID() string {
	if id := os.Getenv("RAY_CLOUD_INSTANCE_ID"); id != "" {
		return id
	}
	return hostname()
}

func (h *Head) clusterInfo() gcs.ClusterInfo {
	return gcs.ClusterInfo{SessionName: h.session, GCSAddress: h.addrs["gcs"], DashboardURL: h.DashboardURL(),
		HeadNodeID: h.nodeID, RaysimVersion: h.cfg.Version, HeartbeatPeriodMs: h.cfg.HeartbeatPeriod.Milliseconds()}
}

// GCSAddress is the host:port workers and `ray health-check` use.
func (h *Head) GCSAddress() string { return h.addrs["gcs"] }

// DashboardURL is the dashboard's base URL (Jobs API).
func (h *Head) DashboardURL() string { return "http://" + h.addrs["dashboard"] }

// AgentAddress is the head agent's host:port.
func (h *Head) AgentAddress() string { return h.addrs["agent"] }

// ServeURL is Serve's HTTP proxy (http://host:port), or "" before a config started it.
func (h *Head) ServeURL() string {
	if p := h.proxy.started(); p != 0 {
		return "http://" + net.JoinHostPort(h.nodeIP, fmt.Sprint(p))
	}
	return ""
}

// MetricsAddress is the metrics page's host:port.
func (h *Head) MetricsAddress() string { return h.addrs["metrics"] }

// NodeID is the head's node id.
func (h *Head) NodeID() string { return h.nodeID }

// SessionDir is this head's session directory (job logs under logs/).
func (h *Head) SessionDir() string { return h.sessDir }

// Jobs is the head's job manager.
func (h *Head) Jobs() *jobs.Manager { return h.jobs }

// Table is the head's GCS node table.
func (h *Head) Table() *gcs.Table { return h.table }

// Info describes the head for head.json.
func (h *Head) Info() HeadInfo {
	return HeadInfo{PID: os.Getpid(), NodeID: h.nodeID, NodeIP: h.nodeIP, SessionName: h.session, SessionDir: h.sessDir,
		GCSAddress: h.addrs["gcs"], DashboardURL: h.DashboardURL(), AgentAddress: h.addrs["agent"],
		MetricsAddress: h.addrs["metrics"], StartedUnixMsec: time.Now().UnixMilli()}
}

// Close stops serving, kills running jobs and removes head.json.
func (h *Head) Close() error {
	h.once.Do(func() {
		close(h.stop)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		for _, s := range h.servers {
			_ = s.Shutdown(ctx)
			_ = s.Close()
		}
		h.proxy.close()
		h.jobs.Close()
		h.wg.Wait()
		if h.cfg.WriteInfo {
			RemoveHeadInfo(h.cfg.TempDir, os.Getpid())
		}
	})
	return nil
}

func headMetrics(d *dashboard.Head) []dashboard.Metric {
	st := d.Status()
	out := []dashboard.Metric{
		{Name: "raysim_cluster_nodes", Help: "Nodes known to the GCS, by state.", Labels: map[string]string{"state": "ALIVE"}, Value: float64(st.ActiveNodes)},
		{Name: "raysim_cluster_nodes", Help: "Nodes known to the GCS, by state.", Labels: map[string]string{"state": "DEAD"}, Value: float64(st.DeadNodes)},
	}
	names := resource.Set{}
	for k := range st.Usage {
		names[k] = 0
	}
	for _, k := range names.Names() {
		out = append(out, dashboard.Metric{Name: "raysim_cluster_resources_total", Help: "Total resources of the alive nodes.", Labels: map[string]string{"resource": k}, Value: st.Usage[k][1]})
	}
	for _, k := range names.Names() {
		out = append(out, dashboard.Metric{Name: "raysim_cluster_resources_used", Help: "Resources held by running jobs' entrypoints.", Labels: map[string]string{"resource": k}, Value: st.Usage[k][0]})
	}
	for _, s := range []jobs.Status{jobs.StatusPending, jobs.StatusRunning, jobs.StatusSucceeded, jobs.StatusFailed, jobs.StatusStopped} {
		out = append(out, dashboard.Metric{Name: "raysim_jobs", Help: "Submitted jobs, by status.", Labels: map[string]string{"status": string(s)}, Value: float64(st.Jobs[s])})
	}
	return out
}
