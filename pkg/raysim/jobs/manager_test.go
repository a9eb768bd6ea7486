package jobs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayctl/rayctl/pkg/raysim/resource"
)

// waitFor polls cond until it holds or the deadline passes.
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

// fakeCluster is one node with a fixed amount of resources.
type fakeCluster struct {
	mu   sync.Mutex
	free resource.Set
}

func (c *fakeCluster) Reserve(req resource.Set) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.free.Fits(req) {
		return "", false
	}
	c.free.Sub(req)
	return "node-1", true
}

func (c *fakeCluster) Release(_ string, req resource.Set) {
	c.mu.Lock()
	c.free.Add(req)
	c.mu.Unlock()
}

func (c *fakeCluster) grow(r resource.Set) {
	c.mu.Lock()
	c.free.Add(r)
	c.mu.Unlock()
}

func newTestManager(t *testing.T, cl Cluster) *Manager {
	t.Helper()
	m := NewManager(Config{LogDir: t.TempDir(), Cluster: cl, NodeID: "head-node", NodeIP: "127.0.0.1",
		AgentAddress: "http://127.0.0.1:1", Env: []string{"RAY_ADDRESS=127.0.0.1:6379"}, StopGrace: 500 * time.Millisecond})
	t.Cleanup(m.Close)
	return m
}

func waitStatus(t *testing.T, m *Manager, id string, want Status) Details {
	t.Helper()
	var d Details
	waitFor(t, 20*time.Second, "job "+id+" to be "+string(want), func() bool {
		var err error
		d, err = m.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		return d.Status == want
	})
	return d
}

func f64(v float64) *float64 { return &v }

func TestJobSucceeds(t *testing.T) {
	m := newTestManager(t, nil)
	resp, err := m.Submit(SubmitRequest{
		Entrypoint:   `echo "id=$RAY_JOB_SUBMISSION_ID addr=$RAY_ADDRESS greeting=$GREETING"; echo to-stderr >&2`,
		SubmissionID: "ok-1",
		RuntimeEnv:   map[string]any{"env_vars": map[string]any{"GREETING": "hi"}},
		Metadata:     map[string]string{"owner": "test"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.SubmissionID != "ok-1" || resp.JobID != "ok-1" {
		t.Fatalf("submit response %+v", resp)
	}
	d := waitStatus(t, m, "ok-1", StatusSucceeded)
	if d.DriverExitCode == nil || *d.DriverExitCode != 0 {
		t.Fatalf("driver_exit_code = %v, want 0", d.DriverExitCode)
	}
	if d.StartTime == nil || d.EndTime == nil || *d.EndTime < *d.StartTime {
		t.Fatalf("start/end times %v %v", d.StartTime, d.EndTime)
	}
	// A shell entrypoint connects no Ray driver: as in Ray, job_id and driver_info stay null.
	if d.Type != TypeSubmission || d.DriverNodeID == nil || *d.DriverNodeID != "head-node" || d.JobID != nil || d.DriverInfo != nil {
		t.Fatalf("details %+v", d)
	}
	logs, err := m.Logs("ok-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"id=ok-1", "addr=127.0.0.1:6379", "greeting=hi", "to-stderr"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs %q lack %q", logs, want)
		}
	}
}

func TestJobFailsWithExitCode(t *testing.T) {
	m := newTestManager(t, nil)
	if _, err := m.Submit(SubmitRequest{Entrypoint: "echo about to fail; exit 7", SubmissionID: "bad-1"}); err != nil {
		t.Fatal(err)
	}
	d := waitStatus(t, m, "bad-1", StatusFailed)
	if d.DriverExitCode == nil || *d.DriverExitCode != 7 {
		t.Fatalf("driver_exit_code = %v, want 7", d.DriverExitCode)
	}
	if d.ErrorType == nil || *d.ErrorType != ErrorTypeEntrypointFailed {
		t.Fatalf("error_type = %v", d.ErrorType)
	}
	if d.Message == nil || !strings.Contains(*d.Message, "exit code 7") || !strings.Contains(*d.Message, "about to fail") {
		t.Fatalf("message = %v", d.Message)
	}
}

func TestDuplicateSubmissionID(t *testing.T) {
	m := newTestManager(t, nil)
	if _, err := m.Submit(SubmitRequest{Entrypoint: "true", SubmissionID: "dup"}); err != nil {
		t.Fatal(err)
	}
	_, err := m.Submit(SubmitRequest{Entrypoint: "true", SubmissionID: "dup"})
	var de *DuplicateError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "Please use a different submission_id") {
		t.Fatalf("second submit: %v", err)
	}
	// Generated ids are unique and Ray-shaped.
	r1, _ := m.Submit(SubmitRequest{Entrypoint: "true"})
	r2, _ := m.Submit(SubmitRequest{Entrypoint: "true"})
	if r1.SubmissionID == r2.SubmissionID || !strings.HasPrefix(r1.SubmissionID, "raysubmit_") {
		t.Fatalf("generated ids %q %q", r1.SubmissionID, r2.SubmissionID)
	}
}

func TestStopRunningJob(t *testing.T) {
	m := newTestManager(t, nil)
	marker := filepath.Join(t.TempDir(), "started")
	if _, err := m.Submit(SubmitRequest{Entrypoint: "touch " + marker + "; exec sleep 300", SubmissionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, m, "s1", StatusRunning)
	waitFor(t, 10*time.Second, "entrypoint to start", func() bool { _, err := os.Stat(marker); return err == nil })
	stopped, err := m.Stop("s1")
	if err != nil || !stopped {
		t.Fatalf("stop: %v %v", stopped, err)
	}
	d := waitStatus(t, m, "s1", StatusStopped)
	if d.EndTime == nil || d.DriverExitCode != nil {
		t.Fatalf("stopped job details %+v", d)
	}
	if stopped, err := m.Stop("s1"); err != nil || stopped {
		t.Fatalf("stopping a stopped job: %v %v", stopped, err)
	}
}

func TestStopEscalatesToSIGKILL(t *testing.T) {
	m := newTestManager(t, nil)
	marker := filepath.Join(t.TempDir(), "trapped")
	// The shell ignores SIGTERM, so only the SIGKILL after the grace period ends it.
	if _, err := m.Submit(SubmitRequest{Entrypoint: "trap '' TERM; touch " + marker + "; while :; do sleep 0.05; done", SubmissionID: "stubborn"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "entrypoint to trap SIGTERM", func() bool { _, err := os.Stat(marker); return err == nil })
	if _, err := m.Stop("stubborn"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, m, "stubborn", StatusStopped)
}

func TestPendingUntilResourcesFree(t *testing.T) {
	cl := &fakeCluster{free: resource.Set{"CPU": 1}}
	m := newTestManager(t, cl)
	release := filepath.Join(t.TempDir(), "release")
	hold := "while [ ! -e " + release + " ]; do sleep 0.05; done"
	if _, err := m.Submit(SubmitRequest{Entrypoint: hold, SubmissionID: "first", EntrypointNumCPUs: f64(1)}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, m, "first", StatusRunning)
	if _, err := m.Submit(SubmitRequest{Entrypoint: "echo second", SubmissionID: "second", EntrypointNumCPUs: f64(1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Submit(SubmitRequest{Entrypoint: "echo gpu", SubmissionID: "gpu", EntrypointNumGPUs: f64(1)}); err != nil {
		t.Fatal(err)
	}
	// A job asking for nothing is not held back by the others.
	if _, err := m.Submit(SubmitRequest{Entrypoint: "true", SubmissionID: "free"}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, m, "free", StatusSucceeded)
	d, _ := m.Get("second")
	if d.Status != StatusPending || d.Message == nil || !strings.Contains(*d.Message, "resources") {
		t.Fatalf("second job while CPU is held: %s %v", d.Status, d.Message)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, m, "first", StatusSucceeded)
	waitStatus(t, m, "second", StatusSucceeded)
	if d, _ := m.Get("gpu"); d.Status != StatusPending {
		t.Fatalf("gpu job is %s with no GPU in the cluster", d.Status)
	}
	cl.grow(resource.Set{"GPU": 1})
	m.Kick()
	waitStatus(t, m, "gpu", StatusSucceeded)
	// A pending job can be stopped.
	if _, err := m.Submit(SubmitRequest{Entrypoint: "true", SubmissionID: "never", EntrypointResources: map[string]float64{"TPU": 1}}); err != nil {
		t.Fatal(err)
	}
	if stopped, err := m.Stop("never"); err != nil || !stopped {
		t.Fatalf("stop pending: %v %v", stopped, err)
	}
	if d, _ := m.Get("never"); d.Status != StatusStopped {
		t.Fatalf("pending job after stop: %s", d.Status)
	}
}

func TestDelete(t *testing.T) {
	m := newTestManager(t, nil)
	if _, err := m.Submit(SubmitRequest{Entrypoint: "exec sleep 300", SubmissionID: "d1"}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, m, "d1", StatusRunning)
	var nt *NotTerminalError
	if _, err := m.Delete("d1"); !errors.As(err, &nt) {
		t.Fatalf("delete running job: %v", err)
	}
	_, _ = m.Stop("d1")
	waitStatus(t, m, "d1", StatusStopped)
	if ok, err := m.Delete("d1"); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	var nf *NotFoundError
	if _, err := m.Get("d1"); !errors.As(err, &nf) {
		t.Fatalf("get after delete: %v", err)
	}
}

func TestFollowStreamsUntilEnd(t *testing.T) {
	m := newTestManager(t, nil)
	if _, err := m.Submit(SubmitRequest{Entrypoint: "for i in 1 2 3; do echo line$i; sleep 0.1; done", SubmissionID: "f"}); err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	if err := m.Follow("f", nil, func(s string) error { got.WriteString(s); return nil }); err != nil {
		t.Fatal(err)
	}
	if got.String() != "line1\nline2\nline3\n" {
		t.Fatalf("followed logs %q", got.String())
	}
}

func TestCloseKillsRunningJobs(t *testing.T) {
	m := NewManager(Config{LogDir: t.TempDir()})
	pidFile := filepath.Join(t.TempDir(), "pid")
	if _, err := m.Submit(SubmitRequest{Entrypoint: "echo $$ > " + pidFile + "; exec sleep 300", SubmissionID: "c"}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, m, "c", StatusRunning)
	var pid string
	for pid == "" {
		b, _ := os.ReadFile(pidFile)
		pid = strings.TrimSpace(string(b))
		time.Sleep(10 * time.Millisecond)
	}
	m.Close()
	if _, err := m.Submit(SubmitRequest{Entrypoint: "true"}); err == nil {
		t.Fatal("submit after close succeeded")
	}
	if _, err := os.Stat("/proc/" + pid); err == nil {
		if b, _ := os.ReadFile("/proc/" + pid + "/stat"); !strings.Contains(string(b), ") Z") {
			t.Fatalf("entrypoint pid %s still alive after Close", pid)
		}
	}
}
