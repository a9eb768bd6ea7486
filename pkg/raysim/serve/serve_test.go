package serve

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestParseRefusesWhatRaysSchemaRefuses(t *testing.T) {
	for name, tc := range map[string]struct{ body, want string }{
		"no import_path":     {`{"applications":[{"name":"a","route_prefix":"/a"}]}`, "applications.0.import_path\n  Field required"},
		"bad import_path":    {`{"applications":[{"name":"a","import_path":"nodots"}]}`, "applications.0.import_path\n  Value error, Got invalid import path \"nodots\""},
		"two colons":         {`{"applications":[{"import_path":"a:b:c"}]}`, "at most one colon"},
		"duplicate names":    {`{"applications":[{"name":"a","import_path":"m.app","route_prefix":"/a"},{"name":"a","import_path":"m.app","route_prefix":"/b"}]}`, "Found multiple configs for application \"a\""},
		"duplicate routes":   {`{"applications":[{"name":"a","import_path":"m.app"},{"name":"b","import_path":"m.app"}]}`, "Found duplicate applications for route prefix \"/\""},
		"empty name":         {`{"applications":[{"name":"","import_path":"m.app"}]}`, "Application names must be nonempty"},
		"port in app":        {`{"applications":[{"import_path":"m.app","port":8001}]}`, "applications.0.port"},
		"not an object":      {`[1,2]`, "Input should be a valid JSON object"},
		"applications a map": {`{"applications":{"a":1}}`, "applications\n  Input should be a valid list"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.body))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse(%s) = %v; want an error containing %q", tc.body, err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "1 validation error for ServeDeploySchema") && !strings.Contains(name, "duplicate") {
				t.Errorf("error does not start as Ray's does: %q", err)
			}
		})
	}
}

// Ray's deploy schema does not check a route prefix's form (only the status it reports does).
func TestParseTakesAnyRoutePrefix(t *testing.T) {
	if _, err := Parse([]byte(`{"applications":[{"import_path":"m.app","route_prefix":"x"}]}`)); err != nil {
		t.Fatalf("a route prefix without a slash: %v, want it taken as Ray takes it", err)
	}
}

func TestDeployRunsAndRoutes(t *testing.T) {
	now := time.Unix(1000, 0)
	s := &Serve{Node: Node{ID: "n1", IP: "10.0.0.1"}, DefaultPort: 8000, Now: func() time.Time { return now }}
	proxy := httptest.NewServer(s.ProxyHandler())
	defer proxy.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(proxy.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/-/healthz"); code != http.StatusServiceUnavailable {
		t.Fatalf("healthz before any deploy: %d, want 503", code)
	}
	cfg, err := Parse([]byte(`{"applications":[{"name":"fruit","route_prefix":"/fruit","import_path":"fruit.deployment_graph",
		"deployments":[{"name":"MangoStand","num_replicas":2},{"name":"FruitMarket"}]},{"name":"math","route_prefix":"/calc","import_path":"conditional_dag:serve_dag"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Deploy(cfg); err != nil {
		t.Fatal(err)
	}
	apps := s.Details()["applications"].(map[string]any)
	if st := apps["fruit"].(map[string]any)["status"]; st != StatusDeploying {
		t.Fatalf("fresh app status %v, want DEPLOYING", st)
	}
	if code, _ := get("/fruit"); code != http.StatusNotFound {
		t.Fatalf("a DEPLOYING app answered: %d", code)
	}
	now = now.Add(time.Second)
	apps = s.Details()["applications"].(map[string]any)
	fruit := apps["fruit"].(map[string]any)
	if fruit["status"] != StatusRunning {
		t.Fatalf("status %v, want RUNNING", fruit["status"])
	}
	deps := fruit["deployments"].(map[string]any)
	mango := deps["MangoStand"].(map[string]any)
	if mango["status"] != StatusHealthy || len(mango["replicas"].([]map[string]any)) != 2 {
		t.Fatalf("MangoStand %v", mango)
	}
	if _, ok := apps["math"].(map[string]any)["deployments"].(map[string]any)["serve_dag"]; !ok {
		t.Fatalf("the deployment of an app without deployments is named after its import path: %v", apps["math"])
	}
	for path, want := range map[string]string{
		"/fruit":       "raysim serve: app=fruit route=/fruit path=/fruit\n",
		"/fruit/mango": "raysim serve: app=fruit route=/fruit path=/fruit/mango\n",
		"/calc":        "raysim serve: app=math route=/calc path=/calc\n",
	} {
		if code, body := get(path); code != http.StatusOK || body != want {
			t.Errorf("GET %s = %d %q, want 200 %q", path, code, body, want)
		}
	}
	if code, _ := get("/fruitless"); code != http.StatusNotFound {
		t.Errorf("GET /fruitless = %d, want 404", code)
	}
	if code, body := get("/-/healthz"); code != http.StatusOK || body != "success" {
		t.Errorf("healthz %d %q", code, body)
	}

	// A new config: math changes route (redeploys, keeps serving), fruit stays as it was, and an app left out goes.
	cfg2, _ := Parse([]byte(`{"applications":[{"name":"fruit","route_prefix":"/fruit","import_path":"fruit.deployment_graph",
		"deployments":[{"name":"MangoStand","num_replicas":2},{"name":"FruitMarket"}]},{"name":"math","route_prefix":"/math","import_path":"conditional_dag:serve_dag"}]}`))
	if err := s.Deploy(cfg2); err != nil {
		t.Fatal(err)
	}
	apps = s.Details()["applications"].(map[string]any)
	if apps["fruit"].(map[string]any)["status"] != StatusRunning || apps["math"].(map[string]any)["status"] != StatusDeploying {
		t.Fatalf("after a change: fruit %v, math %v", apps["fruit"].(map[string]any)["status"], apps["math"].(map[string]any)["status"])
	}
	if code, _ := get("/math"); code != http.StatusOK {
		t.Errorf("a redeploying app that ran before stops answering: %d", code)
	}
	s.Delete()
	if len(s.Details()["applications"].(map[string]any)) != 0 || s.Started() {
		t.Fatal("Delete left applications")
	}
}
