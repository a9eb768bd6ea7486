package controlplane

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/server/healthz"

	"github.com/rayctl/rayctl/pkg/apiserver"
	"github.com/rayctl/rayctl/pkg/apiserver/chainaudit"
	"github.com/rayctl/rayctl/pkg/apiserver/etcd"
	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/chain/chainhttp"
)

// startEtcd is the "etcd" step: the embedded etcd on the data dir, which it marks initialized. While
// the member elects itself and serves (tens of milliseconds of waiting), the API server with crds is
// built beside it (see buildAPIServer), its clients waiting for etcd to answer: the channel returned
// gives it.
func (cp *ControlPlane) startEtcd(ctx context.Context, crds func() ([][]byte, error)) (<-chan builtServer, error) {
	store, err := etcd.Launch(cp.certs.etcd.ServerConfig(etcd.Config{
		Dir: cp.dir.Join("etcd"), Logger: cp.logger.Named("etcd"), RequireData: cp.dir.Initialized(), Fatal: etcdFatal(cp.dir, cp.cfg.Err),
		QuotaBackendBytes: cp.cfg.EtcdQuota,
	}))
	if err != nil {
		return nil, damaged(cp.dir, err)
	}
	built := make(chan builtServer, 1)
	go func() {
		server, err := cp.buildAPIServer(store, crds)
		built <- builtServer{server, err}
	}()
	if err := store.WaitServing(ctx); err != nil {
		// etcd has stopped; the server built on it never runs.
		if b := <-built; b.err == nil {
			b.server.Close()
		}
		return nil, damaged(cp.dir, err)
	}
	cp.store = store
	return built, cp.dir.MarkInitialized()
}

// builtServer is buildAPIServer's outcome.
type builtServer struct {
	server *apiserver.Server
	err    error
}

// buildAPIServer builds the API server on store, with crds installed and the chain recorder (when on)
// as its audit backend and watching its watches' deliveries; nothing runs until startAPIServer.
func (cp *ControlPlane) buildAPIServer(store *etcd.Server, crds func() ([][]byte, error)) (*apiserver.Server, error) {
	c := cp.certs
	cfg := apiserver.Config{
		Port: cp.cfg.Port, CA: c.ca, Serving: c.serving, Loopback: c.loopback, KubeletClient: c.kubeletClient, ServiceAccountKey: c.saKey,
		EtcdEndpoint: store.Endpoint, EtcdClient: c.etcd.APIServerClient, EtcdCAFile: c.etcd.CA.CertFile(), EtcdLogger: cp.logger.Named("etcd-client"),
		CRDs: crds,
		// etcd-readiness (the API server's own) reads through etcd at most every second and waits up to
		// 2 s; this one says at once when raft has no leader.
		ReadyChecks: []healthz.HealthChecker{healthz.NamedCheck("etcd-leader", func(*http.Request) error { return store.HasLeader() })},
		PodDial:     cp.dialPods,
	}
	if cp.cfg.ChainBuffer > 0 {
		cp.recorder = chain.New(cp.cfg.ChainBuffer)
		cfg.Audit, cfg.AuditPolicy = chainaudit.Backend(cp.recorder), chainaudit.Policy()
		cfg.WrapStorage = func(g generic.RESTOptionsGetter) generic.RESTOptionsGetter { return chainaudit.Watches(cp.recorder, g) }
		cfg.WrapHandler = chainaudit.WithUserAgent
		cfg.Debug = map[string]http.Handler{chainhttp.PathPrefix: chainhttp.Handler(cp.recorder)}
		cfg.LongRunning = chainhttp.IsLongRunning
	}
	return apiserver.New(cfg)
}

// startAPIServer is the "apiserver" step: it runs the server built (with its crds installed, count of
// them) until Stop, and returns once the server is ready.
func (cp *ControlPlane) startAPIServer(ctx context.Context, built builtServer, crds int) (string, error) {
	if built.err != nil {
		return "", built.err
	}
	server := built.server
	var serverCtx context.Context
	serverCtx, cp.stopServer = context.WithCancel(context.Background())
	cp.server, cp.serverDone = server, make(chan error, 1)
	go func() { cp.serverDone <- server.Run(serverCtx) }()
	// Waited for even when the step beside this one failed: stopping the server while its post-start hooks
	// run ends the process (k8s.io/apiserver treats a hook's error as fatal), not with the step's error.
	readyCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- apiserver.WaitReady(readyCtx, server.LoopbackConfig) }()
	select {
	case err := <-errc:
		if err != nil {
			return "", fmt.Errorf("not ready: %w (see %s)", err, cp.dir.Join("rayctl.log"))
		}
	case err := <-cp.serverDone:
		cp.server = nil
		return "", fmt.Errorf("stopped: %v (see %s)", err, cp.dir.Join("rayctl.log"))
	}
	return cp.serverURL() + fmt.Sprintf(" (%d CRDs established)", crds), nil
}
