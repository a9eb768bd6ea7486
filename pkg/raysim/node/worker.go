package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rayctl/rayctl/pkg/raysim/auth"
	"github.com/rayctl/rayctl/pkg/raysim/dashboard"
	"github.com/rayctl/rayctl/pkg/raysim/gcs"
	"github.com/rayctl/rayctl/pkg/raysim/resource"
)

// WorkerConfig configures a worker node.
type WorkerConfig struct {
	// GCSAddress is the head's GCS host:port.
	GCSAddress string
	// BindHost is the address the agent and metrics ports listen on; empty = all.
	BindHost string
	// NodeIP is the advertised address; empty means the local address that
	// reaches the GCS.
	NodeIP string
	// NodeTypeName is the node's type as `ray status` counts it (KubeRay's group name).
	NodeTypeName string
	// AgentPort and MetricsPort; 0 picks free ports.
	AgentPort, MetricsPort int
	// ServePort, when set, runs a Serve HTTP proxy on this node once the head's proxy at HeadServePort
	// answers (Serve runs), passing requests on to it (raysim runs every replica on the head). A port
	// already taken is logged and the worker runs without a proxy.
	ServePort, HeadServePort int
	// Resources are the worker's resources.
	Resources resource.Set
	// HeartbeatPeriod overrides the period the GCS asks for.
	HeartbeatPeriod time.Duration
	// ReconnectTimeout is how long the worker waits for an unreachable GCS
	// (at start and later) before giving up, as a raylet does; 0 means 60 s.
	ReconnectTimeout time.Duration
	// Version is reported to the GCS.
	Version string
	// AuthToken, when set, is the cluster's token (Ray's RAY_AUTH_MODE=token): the worker sends it
	// to the GCS, and its agent refuses callers without it but for its health checks. Empty means
	// no authentication.
	AuthToken string
	// AuthCheck, when set, decides instead of AuthToken which tokens the agent's callers may present
	// (Ray's Kubernetes-delegated token authentication, auth.K8sReviewer).
	AuthCheck auth.Check
	// AuthTokenSource, when set, is asked for the token before each call to the GCS instead of sending
	// AuthToken (a service account token the kubelet rewrites before it expires, auth.Source).
	AuthTokenSource func() string
	// Logf receives log lines; nil discards them.
	Logf func(format string, args ...any)
}

// ErrHeadLost is wrapped by the error a worker ends with when its head is gone.
var ErrHeadLost = errors.New("lost the head node's GCS")

// Worker is a registered worker node.
type Worker struct {
	cfg     WorkerConfig
	client  *gcs.Client
	nodeID  string
	addrs   map[string]string
	servers []*http.Server
	proxy   lateServer
	healthy atomic.Bool

	done   chan struct{}
	err    error
	cancel context.CancelFunc
	once   sync.Once
	wg     sync.WaitGroup
}

// StartWorker waits for the GCS (up to the reconnect timeout), binds the
// agent and metrics ports, registers and starts heart-beating. The worker
// ends by itself (Done is closed, Err says why) when the head is lost.
func StartWorker(ctx context.Context, cfg WorkerConfig) (*Worker, error) {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.ReconnectTimeout <= 0 {
		cfg.ReconnectTimeout = 60 * time.Second
	}
	if cfg.NodeIP == "" {
		cfg.NodeIP = nodeIPToward(cfg.GCSAddress)
	}
	w := &Worker{cfg: cfg, client: gcs.NewClient(cfg.GCSAddress), addrs: map[string]string{}, done: make(chan struct{})}
	w.client.HTTP.Timeout = 3 * time.Second
	w.client.Token = cfg.AuthToken
	w.client.TokenSource = cfg.AuthTokenSource

	// Wait for the GCS, as a raylet does on start.
	deadline := time.Now().Add(cfg.ReconnectTimeout)
	for {
		err := w.client.Health(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if refused(err) {
			// Waiting does not help: the GCS wants another token (or one where none was sent).
			return nil, fmt.Errorf("the GCS at %s refused this node: %w (is RAY_AUTH_MODE=token set with the cluster's token?)", cfg.GCSAddress, err)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: GCS at %s did not answer within %s: %v", ErrHeadLost, cfg.GCSAddress, cfg.ReconnectTimeout, err)
		}
		cfg.Logf("waiting for the GCS at %s: %v", cfg.GCSAddress, err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}

	lis := map[string]net.Listener{}
	for _, b := range []struct {
		name string
		port int
	}{{"agent", cfg.AgentPort}, {"metrics", cfg.MetricsPort}} {
		l, err := listen(b.name, cfg.BindHost, b.port)
		if err != nil {
			for _, l := range lis {
				l.Close()
			}
			return nil, err
		}
		lis[b.name] = l
		w.addrs[b.name] = advertise(l, cfg.BindHost, cfg.NodeIP)
	}

	total := cfg.Resources.Clone()
	total["node:"+cfg.NodeIP] = 1
	reg, err := w.client.Register(ctx, gcs.NodeInfo{NodeIP: cfg.NodeIP, Total: total, AgentPort: port(lis["agent"]),
		MetricsPort: port(lis["metrics"]), Hostname: hostname(), InstanceID: instanceID(), RaysimVersion: cfg.Version, NodeTypeName: cfg.NodeTypeName})
	if err != nil {
		for _, l := range lis {
			l.Close()
		}
		return nil, fmt.Errorf("registering with the GCS at %s: %w", cfg.GCSAddress, err)
	}
	w.nodeID = reg.NodeID
	w.healthy.Store(true)
	period := cfg.HeartbeatPeriod
	if period <= 0 {
		period = time.Duration(reg.Info.HeartbeatPeriodMs) * time.Millisecond
	}
	if period <= 0 {
		period = time.Second
	}

	agent := &dashboard.Agent{Healthy: w.healthy.Load}
	check := cfg.AuthCheck
	if check == nil {
		check = auth.Equal(cfg.AuthToken)
	}
	handlers := map[string]http.Handler{
		"agent": auth.Require(check, auth.AgentOpen)(agent.Handler()),
		"metrics": dashboard.MetricsHandler(func() []dashboard.Metric {
			out := []dashboard.Metric{{Name: "raysim_node_registered", Help: "1 while the node is registered with a live GCS.", Value: b2f(w.healthy.Load())}}
			for _, k := range total.Names() {
				out = append(out, dashboard.Metric{Name: "raysim_node_resources_total", Help: "The node's resources.", Labels: map[string]string{"resource": k}, Value: total[k]})
			}
			return out
		}),
	}
	for name, l := range lis {
		srv := &http.Server{Handler: handlers[name], ReadHeaderTimeout: 10 * time.Second}
		w.servers = append(w.servers, srv)
		w.wg.Add(1)
		go func(l net.Listener) {
			defer w.wg.Done()
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				cfg.Logf("%s server: %v", name, err)
			}
		}(l)
	}
	cfg.Logf("raysim worker %s registered with GCS %s (session %s): agent %s, metrics %s, resources %s",
		w.nodeID[:8], cfg.GCSAddress, reg.Info.SessionName, w.addrs["agent"], w.addrs["metrics"], total)

	hbCtx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go w.heartbeat(hbCtx, period)
	if host, _, err := net.SplitHostPort(cfg.GCSAddress); err == nil && cfg.ServePort > 0 {
		w.wg.Add(1)
		go func() { defer w.wg.Done(); w.followHeadProxy(hbCtx, host) }()
	}
	return w, nil
}

// refused reports whether err is the GCS turning a caller away for its token (401 or 403).
func refused(err error) bool {
	var se *gcs.StatusError
	return errors.As(err, &se) && (se.Code == http.StatusUnauthorized || se.Code == http.StatusForbidden)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (w *Worker) heartbeat(ctx context.Context, period time.Duration) {
	lastOK := time.Now()
	tk := time.NewTicker(period)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		err := w.client.Heartbeat(ctx, w.nodeID)
		if ctx.Err() != nil {
			return
		}
		var se *gcs.StatusError
		switch {
		case err == nil:
			lastOK = time.Now()
		case errors.As(err, &se) && se.Code == http.StatusNotFound:
			w.fail(fmt.Errorf("%w: the GCS at %s no longer knows this node (it restarted or declared the node dead)", ErrHeadLost, w.cfg.GCSAddress))
			return
		case time.Since(lastOK) > w.cfg.ReconnectTimeout:
			w.fail(fmt.Errorf("%w: no answer from the GCS at %s for %s: %v", ErrHeadLost, w.cfg.GCSAddress, w.cfg.ReconnectTimeout, err))
			return
		default:
			w.cfg.Logf("heartbeat to %s failed (will retry): %v", w.cfg.GCSAddress, err)
		}
	}
}

func (w *Worker) fail(err error) {
	w.healthy.Store(false)
	w.shutdown(err, false)
}

func (w *Worker) shutdown(err error, leave bool) {
	w.once.Do(func() {
		w.err = err
		w.cancel()
		if leave {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if lerr := w.client.Leave(ctx, w.nodeID, "the node was stopped"); lerr != nil {
				w.cfg.Logf("deregistering from the GCS: %v", lerr)
			}
			cancel()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		for _, s := range w.servers {
			_ = s.Shutdown(ctx)
			_ = s.Close()
		}
		cancel()
		w.proxy.close()
		w.wg.Wait()
		close(w.done)
	})
}

// NodeID is the id the GCS gave the worker.
func (w *Worker) NodeID() string { return w.nodeID }

// AgentAddress is the worker agent's host:port.
func (w *Worker) AgentAddress() string { return w.addrs["agent"] }

// MetricsAddress is the worker's metrics host:port.
func (w *Worker) MetricsAddress() string { return w.addrs["metrics"] }

// Done is closed when the worker has stopped.
func (w *Worker) Done() <-chan struct{} { return w.done }

// Err is why the worker stopped: nil after Close, an error wrapping
// ErrHeadLost when the head went away.
func (w *Worker) Err() error {
	select {
	case <-w.done:
		return w.err
	default:
		return nil
	}
}

// Close leaves the cluster (deregisters from the GCS) and stops serving.
func (w *Worker) Close() error {
	w.shutdown(nil, true)
	return nil
}
