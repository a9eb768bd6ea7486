package node

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/rayctl/rayctl/pkg/raysim/gcs"
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
