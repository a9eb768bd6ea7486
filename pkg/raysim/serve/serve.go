package serve

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"
)

// Application and deployment states, as Ray reports them.
const (
	StatusDeploying = "DEPLOYING"
	StatusRunning   = "RUNNING"
	StatusDeleting  = "DELETING"
	StatusHealthy   = "HEALTHY"
	StatusUpdating  = "UPDATING"
)

// DefaultDeployTime is how long an application stays DEPLOYING.
const DefaultDeployTime = 500 * time.Millisecond

// Node is where the replicas and the proxy run (the head, in raysim).
type Node struct {
	// ID and IP identify the node.
	ID, IP string
}

// Serve is one cluster's Serve instance. The zero value is not started; Deploy starts it.
type Serve struct {
	// Node is the node the controller, proxy and replicas report.
	Node Node
	// DefaultPort is the proxy's port when a config's http_options name none (Ray's is 8000).
	DefaultPort int
	// Listen starts the HTTP proxy on a port (0: any) and returns the port it got; Deploy calls it
	// once, for the first config, as Ray starts its proxies with Serve. Nil means the proxy is served
	// elsewhere (tests) on DefaultPort.
	Listen func(port int) (int, error)
	// DeployTime is how long an application stays DEPLOYING; 0 means DefaultDeployTime.
	DeployTime time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu      sync.Mutex
	started bool
	port    int
	config  *Config
	apps    map[string]*app
}

// app is one deployed application.
type app struct {
	cfg        AppConfig
	deployedAt time.Time
	// served says the application ran once, so it keeps answering while a new version deploys.
	served bool
}

func (s *Serve) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Serve) deployTime() time.Duration {
	if s.DeployTime > 0 {
		return s.DeployTime
	}
	return DefaultDeployTime
}

// Started reports whether a config was deployed (and not deleted since): Ray's proxies run then.
func (s *Serve) Started() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

// Deploy applies a whole config: new or changed applications (re)deploy, the ones it leaves out are
// deleted, unchanged ones stay as they are.
//
// The first deploy starts the proxy on http_options.port (else DefaultPort); as in Ray, a later
// config's HTTP options do not move a running proxy. An error is a proxy that cannot listen.
func (s *Serve) Deploy(c *Config) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.port == 0 {
		port := s.DefaultPort
		if c.HTTPOptions != nil && c.HTTPOptions.Port != nil {
			port = *c.HTTPOptions.Port
		}
		if s.Listen != nil {
			got, err := s.Listen(port)
			if err != nil {
				return fmt.Errorf("Serve's HTTP proxy cannot start: %w", err)
			}
			port = got
		}
		s.port = port
	}
	now := s.now()
	old := s.apps
	s.apps = map[string]*app{}
	for _, a := range c.Applications {
		prev := old[a.Name]
		if prev != nil && reflect.DeepEqual(prev.cfg, a) {
			s.apps[a.Name] = prev
			continue
		}
		n := &app{cfg: a, deployedAt: now}
		if prev != nil {
			n.served = prev.served && s.running(prev, now)
		}
		s.apps[a.Name] = n
	}
	s.config, s.started = c, true
	return nil
}

// Delete shuts Serve down: every application goes away and the proxy stops answering.
func (s *Serve) Delete() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apps, s.config, s.started = nil, nil, false
}

// running reports whether a's deploy time has passed; the caller holds mu.
func (s *Serve) running(a *app, now time.Time) bool {
	if !now.Before(a.deployedAt.Add(s.deployTime())) {
		a.served = true
		return true
	}
	return false
}

// Details is GET /api/serve/applications/'s answer, in the shape of Ray's ServeInstanceDetails.
func (s *Serve) Details() map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		return map[string]any{"controller_info": map[string]any{}, "proxies": map[string]any{}, "applications": map[string]any{}, "target_capacity": nil}
	}
	now := s.now()
	apps := map[string]any{}
	for name, a := range s.apps {
		apps[name] = s.appDetails(a, now)
	}
	host, port := "0.0.0.0", s.port
	if h := s.config.HTTPOptions; h != nil && h.Host != "" {
		host = h.Host
	}
	location := s.config.ProxyLocation
	if location == "" {
		location = "EveryNode"
	}
	return map[string]any{
		"controller_info": s.actor("SERVE_CONTROLLER_ACTOR"),
		"proxy_location":  location,
		"http_options":    map[string]any{"host": host, "port": port, "root_path": "", "request_timeout_s": nil, "keep_alive_timeout_s": 90},
		"grpc_options":    map[string]any{"port": 9000, "grpc_servicer_functions": []string{}},
		"proxies": map[string]any{s.Node.ID: merge(s.actor("SERVE_PROXY_ACTOR-"+s.Node.ID), map[string]any{
			"status": "HEALTHY",
		})},
		"deploy_mode":     "MULTI_APP",
		"applications":    apps,
		"target_capacity": s.config.TargetCapacity,
	}
}

func (s *Serve) actor(name string) map[string]any {
	return map[string]any{"node_id": s.Node.ID, "node_ip": s.Node.IP, "actor_id": pseudoID(name), "actor_name": name,
		"worker_id": pseudoID("worker-" + name), "log_file_path": "/serve/" + strings.ToLower(name) + ".log"}
}

func merge(a, b map[string]any) map[string]any {
	for k, v := range b {
		a[k] = v
	}
	return a
}

// pseudoID is a stable hex id for a name (raysim has no actors).
func pseudoID(name string) string {
	var h uint64 = 14695981039346656037
	for i := 0; i < len(name); i++ {
		h = (h ^ uint64(name[i])) * 1099511628211
	}
	return fmt.Sprintf("%016x%016x", h, h*31+7)[:28]
}

// appDetails is one application's ApplicationDetails; the caller holds mu.
func (s *Serve) appDetails(a *app, now time.Time) map[string]any {
	status, depStatus, replicaState := StatusDeploying, StatusUpdating, "STARTING"
	if s.running(a, now) {
		status, depStatus, replicaState = StatusRunning, StatusHealthy, "RUNNING"
	}
	deployments := map[string]any{}
	byName := map[string]DeploymentConfig{}
	for _, d := range a.cfg.Deployments {
		byName[d.Name] = d
	}
	for _, name := range a.cfg.deploymentNames() {
		d := byName[name]
		d.Name = name
		n := d.replicas()
		replicas := make([]map[string]any, 0, n)
		for i := 0; i < n; i++ {
			id := pseudoID(fmt.Sprintf("%s#%s#%d#%d", a.cfg.Name, name, a.deployedAt.UnixNano(), i))
			replicas = append(replicas, merge(s.actor(fmt.Sprintf("SERVE_REPLICA::%s#%s#%s", a.cfg.Name, name, id[:8])), map[string]any{
				"replica_id": id[:8], "state": replicaState, "pid": nil, "start_time_s": float64(a.deployedAt.UnixMilli()) / 1000,
			}))
		}
		trigger := "CONFIG_UPDATE_STARTED"
		if depStatus == StatusHealthy {
			trigger = "CONFIG_UPDATE_COMPLETED"
		}
		deployments[name] = map[string]any{
			"name": name, "status": depStatus, "status_trigger": trigger, "message": "",
			"deployment_config":   map[string]any{"name": name, "num_replicas": n, "user_config": d.UserConfig, "ray_actor_options": d.RayActorOptions},
			"target_num_replicas": n, "required_resources": map[string]any{"CPU": 1}, "replicas": replicas,
		}
	}
	var route any
	if a.cfg.RoutePrefix != nil {
		route = *a.cfg.RoutePrefix
	}
	return map[string]any{
		"name": a.cfg.Name, "route_prefix": route, "docs_path": nil, "status": status, "message": "",
		"last_deployed_time_s": float64(a.deployedAt.UnixMilli()) / 1000, "deployed_app_config": a.cfg,
		"source": "declarative", "deployments": deployments,
	}
}

// route returns the application serving path (the longest route prefix that matches), or nil.
func (s *Serve) route(path string) *app {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var best *app
	for _, a := range s.apps {
		if a.cfg.RoutePrefix == nil || !(a.served || s.running(a, now)) {
			continue
		}
		p := *a.cfg.RoutePrefix
		if p == "/" || path == p || strings.HasPrefix(path, p+"/") {
			if best == nil || len(p) > len(*best.cfg.RoutePrefix) {
				best = a
			}
		}
	}
	return best
}

// routes is GET /-/routes: route prefix → application name.
func (s *Serve) routes() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for _, a := range s.apps {
		if a.cfg.RoutePrefix != nil {
			out[*a.cfg.RoutePrefix] = a.cfg.Name
		}
	}
	return out
}

// ProxyHandler is the HTTP proxy (port 8000): /-/healthz, /-/routes, and each application's
// route prefix answered with "raysim serve: app=<name> route=<prefix> path=<path>".
func (s *Serve) ProxyHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !s.Started() {
			http.Error(w, "Serve is not running on this cluster: no config was deployed", http.StatusServiceUnavailable)
			return
		}
		switch r.URL.Path {
		case "/-/healthz":
			fmt.Fprint(w, "success")
			return
		case "/-/routes":
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(s.routes())
			return
		}
		a := s.route(r.URL.Path)
		if a == nil {
			http.Error(w, fmt.Sprintf("Path '%s' not found. Ping http://.../-/routes for available routes.", r.URL.Path), http.StatusNotFound)
			return
		}
		fmt.Fprintf(w, "raysim serve: app=%s route=%s path=%s\n", a.cfg.Name, *a.cfg.RoutePrefix, r.URL.Path)
	})
}
