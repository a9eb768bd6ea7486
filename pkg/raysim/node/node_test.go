package node

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayctl/rayctl/pkg/raysim/auth"
	"github.com/rayctl/rayctl/pkg/raysim/gcs"
	"github.com/rayctl/rayctl/pkg/raysim/internal/wsock"
	"github.com/rayctl/rayctl/pkg/raysim/jobs"
	"github.com/rayctl/rayctl/pkg/raysim/resource"
)

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testHead(t *testing.T, cfg HeadConfig) *Head {
	t.Helper()
	cfg.BindHost, cfg.NodeIP = "127.0.0.1", "127.0.0.1"
	if cfg.TempDir == "" {
		cfg.TempDir = t.TempDir()
	}
	h, err := StartHead(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func testWorker(t *testing.T, gcsAddr string, res resource.Set, reconnect time.Duration) *Worker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := StartWorker(ctx, WorkerConfig{GCSAddress: gcsAddr, BindHost: "127.0.0.1", Resources: res,
		HeartbeatPeriod: 50 * time.Millisecond, ReconnectTimeout: reconnect})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func alive(h *Head) (n int) {
	for _, x := range h.Table().Nodes() {
		if x.State == gcs.StateAlive {
			n++
		}
	}
	return n
}

func TestWorkerRegistersAndLeaves(t *testing.T) {
	h := testHead(t, HeadConfig{Resources: resource.Set{"CPU": 1}})
	w := testWorker(t, h.GCSAddress(), resource.Set{"CPU": 2, "GPU": 1}, 10*time.Second)
	if alive(h) != 2 {
		t.Fatalf("alive nodes after registration: %d", alive(h))
	}
	total, _ := h.Table().Totals()
	if total["CPU"] != 3 || total["GPU"] != 1 {
		t.Fatalf("cluster totals %v", total)
	}
	resp, err := http.Get("http://" + w.AgentAddress() + "/api/local_raylet_healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("worker agent health: %v %v", resp, err)
	}
	resp.Body.Close()
	w.Close()
	if w.Err() != nil {
		t.Fatalf("graceful leave ended with %v", w.Err())
	}
	if alive(h) != 1 {
		t.Fatalf("alive nodes after leave: %d", alive(h))
	}
	nodes := h.Table().Nodes()
	if nodes[1].State != gcs.StateDead || nodes[1].NodeID != w.NodeID() {
		t.Fatalf("left worker is not listed dead: %+v", nodes)
	}
}

func TestWorkerExitsWhenHeadIsGone(t *testing.T) {
	h := testHead(t, HeadConfig{})
	w := testWorker(t, h.GCSAddress(), resource.Set{"CPU": 1}, 300*time.Millisecond)
	h.Close()
	select {
	case <-w.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("worker kept running without its head")
	}
	if !errors.Is(w.Err(), ErrHeadLost) {
		t.Fatalf("worker ended with %v", w.Err())
	}
}

func TestWorkerExitsWhenGCSForgetsIt(t *testing.T) {
	h := testHead(t, HeadConfig{})
	w := testWorker(t, h.GCSAddress(), resource.Set{"CPU": 1}, time.Minute)
	// A GCS that declares the node dead (or restarted without it) answers 404.
	if err := h.Table().Leave(w.NodeID(), "test"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("worker kept running after the GCS forgot it")
	}
	if !errors.Is(w.Err(), ErrHeadLost) {
		t.Fatalf("worker ended with %v", w.Err())
	}
}

func TestSilentWorkerIsDeclaredDead(t *testing.T) {
	h := testHead(t, HeadConfig{NodeTimeout: 200 * time.Millisecond})
	// Register a node by hand that never sends a heartbeat.
	ctx := context.Background()
	if _, err := gcs.NewClient(h.GCSAddress()).Register(ctx, gcs.NodeInfo{NodeIP: "127.0.0.1", Total: resource.Set{"CPU": 1}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the silent node to be declared dead", func() bool { return alive(h) == 1 })
}

func TestJobPendingUntilWorkerBringsResources(t *testing.T) {
	h := testHead(t, HeadConfig{Resources: resource.Set{"CPU": 0}})
	c := jobs.NewClient(h.DashboardURL())
	ctx := context.Background()
	one := 1.0
	if _, err := c.Submit(ctx, jobs.SubmitRequest{Entrypoint: "echo ran", SubmissionID: "needs-cpu", EntrypointNumCPUs: &one}); err != nil {
		t.Fatal(err)
	}
	// Nothing in the cluster has a CPU: the job must stay PENDING.
	d, err := c.Get(ctx, "needs-cpu")
	if err != nil || d.Status != jobs.StatusPending {
		t.Fatalf("job with no CPU anywhere: %v %v", d.Status, err)
	}
	w := testWorker(t, h.GCSAddress(), resource.Set{"CPU": 1}, 10*time.Second)
	waitFor(t, 20*time.Second, "the job to succeed once a worker brings a CPU", func() bool {
		d, err = c.Get(ctx, "needs-cpu")
		return err == nil && d.Status == jobs.StatusSucceeded
	})
	if d.DriverNodeID == nil || *d.DriverNodeID != h.NodeID() {
		t.Errorf("entrypoint should run on the head, driver_node_id = %v", d.DriverNodeID)
	}
	_ = w
}

func TestHeadInfoFile(t *testing.T) {
	dir := t.TempDir()
	h := testHead(t, HeadConfig{TempDir: dir, WriteInfo: true})
	info, err := ReadHeadInfo(dir)
	if err != nil {
		t.Fatal(err)
	}
	if info.GCSAddress != h.GCSAddress() || info.DashboardURL != h.DashboardURL() {
		t.Fatalf("head info %+v", info)
	}
	h.Close()
	if _, err := ReadHeadInfo(dir); err == nil {
		t.Fatal("head info survives Close")
	}
}

// TestWorkerTokenRotation: a worker whose token is a service account token file (Kubernetes-delegated
// authentication) sends the token the kubelet wrote last, so its heartbeats go on being taken after the
// token it started with has expired.
func TestWorkerTokenRotation(t *testing.T) {
	var mu sync.Mutex
	valid := map[string]bool{"first": true}
	var seen []string
	check := func(_ context.Context, tok string) bool {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, tok)
		return valid[tok]
	}
	h := testHead(t, HeadConfig{Resources: resource.Set{"CPU": 1}, AuthCheck: check})
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("first"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := StartWorker(ctx, WorkerConfig{GCSAddress: h.GCSAddress(), BindHost: "127.0.0.1", Resources: resource.Set{"CPU": 1},
		HeartbeatPeriod: 50 * time.Millisecond, AuthToken: "first", AuthTokenSource: auth.NewFileToken(path, "").Token})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// The kubelet writes a new token while the old one is still good; then the old one expires.
	mu.Lock()
	valid["second-token"] = true
	mu.Unlock()
	if err := os.WriteFile(path, []byte("second-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the worker to send the rewritten token", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) > 0 && seen[len(seen)-1] == "second-token"
	})
	mu.Lock()
	delete(valid, "first")
	n := len(seen)
	mu.Unlock()
	waitFor(t, 10*time.Second, "more heartbeats after the first token expired", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) >= n+5
	})
	mu.Lock()
	for _, tok := range seen[n:] {
		if tok != "second-token" {
			t.Errorf("after the rewrite the worker sent %q", tok)
		}
	}
	mu.Unlock()
	select {
	case <-w.Done():
		t.Fatalf("the worker stopped: %v", w.Err())
	default:
	}
	if alive(h) != 2 {
		t.Errorf("alive nodes: %d, want 2", alive(h))
	}
}

// TestTokenAuth: a head with a token refuses a worker without it at once (no waiting out the
// reconnect timeout), takes one with it, and the worker's agent requires the token but for its
// health checks; the metrics pages stay open.
func TestTokenAuth(t *testing.T) {
	h := testHead(t, HeadConfig{Resources: resource.Set{"CPU": 1}, AuthToken: "tok"})
	for _, token := range []string{"", "wrong"} {
		start := time.Now()
		_, err := StartWorker(context.Background(), WorkerConfig{GCSAddress: h.GCSAddress(), BindHost: "127.0.0.1",
			Resources: resource.Set{"CPU": 1}, ReconnectTimeout: 20 * time.Second, AuthToken: token})
		if err == nil || time.Since(start) > 10*time.Second {
			t.Fatalf("worker with token %q: %v after %s", token, err, time.Since(start))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := StartWorker(ctx, WorkerConfig{GCSAddress: h.GCSAddress(), BindHost: "127.0.0.1", Resources: resource.Set{"CPU": 1},
		HeartbeatPeriod: 50 * time.Millisecond, AuthToken: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if alive(h) != 2 {
		t.Fatalf("alive nodes: %d", alive(h))
	}
	get := func(url, token string) int {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		url, token string
		want       int
	}{
		{"http://" + w.AgentAddress() + "/api/local_raylet_healthz", "", 200},
		{"http://" + w.AgentAddress() + "/api/healthz", "", 200},
		{"http://" + w.AgentAddress() + "/api/other", "", 401},
		{"http://" + w.AgentAddress() + "/api/other", "tok", 404},
		{"http://" + w.MetricsAddress() + "/metrics", "", 200},
		{"http://" + h.MetricsAddress() + "/metrics", "", 200},
		{"http://" + h.AgentAddress() + "/api/local_raylet_healthz", "", 200},
		{"http://" + h.GCSAddress() + gcs.PathPrefix + "/health", "", 401},
		{"http://" + h.GCSAddress() + gcs.PathPrefix + "/nodes", "wrong", 403},
		{"http://" + h.GCSAddress() + gcs.PathPrefix + "/nodes", "tok", 200},
		{h.DashboardURL() + "/api/gcs_healthz", "", 200},
		{h.DashboardURL() + "/api/version", "", 401},
		{h.DashboardURL() + "/api/version", "tok", 200},
	} {
		if got := get(tc.url, tc.token); got != tc.want {
			t.Errorf("GET %s with token %q: %d, want %d", tc.url, tc.token, got, tc.want)
		}
	}
	if r, err := http.Get(h.DashboardURL() + "/api/authentication_mode"); err != nil {
		t.Fatal(err)
	} else {
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != 200 || strings.TrimSpace(string(b)) != `{"authentication_mode":"token"}` {
			t.Errorf("/api/authentication_mode: %d %s", r.StatusCode, b)
		}
	}
	// A Jobs client with the token submits and follows the logs through the WebSocket.
	c := jobs.NewClient(h.DashboardURL())
	if _, err := c.List(ctx); err == nil {
		t.Fatal("listing jobs without the token succeeded")
	}
	c.Token = "tok"
	resp, err := c.Submit(ctx, jobs.SubmitRequest{Entrypoint: "echo authed"})
	if err != nil {
		t.Fatal(err)
	}
	var logs string
	if err := c.Tail(ctx, resp.SubmissionID, func(s string) { logs += s }); err != nil || logs != "authed\n" {
		t.Fatalf("tail: %q %v", logs, err)
	}
	// The tail's WebSocket handshake carries the token (Tail would fall back to polling without).
	u, _ := url.Parse(h.DashboardURL() + "/api/jobs/" + resp.SubmissionID + "/logs/tail")
	if _, err := wsock.Dial(ctx, u, nil); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("WebSocket without the token: %v", err)
	}
	conn, err := wsock.Dial(ctx, u, http.Header{"Authorization": {"Bearer tok"}})
	if err != nil {
		t.Fatalf("WebSocket with the token: %v", err)
	}
	conn.Close()
}
