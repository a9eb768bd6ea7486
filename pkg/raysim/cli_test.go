package raysim

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rayctl/rayctl/pkg/raysim/node"
)

// The test binary doubles as the `ray` executable: with RAYSIM_TEST_AS_RAY=1
// it runs raysim's CLI (the daemon mode of `ray start` re-executes it too).
func TestMain(m *testing.M) {
	if os.Getenv("RAYSIM_TEST_AS_RAY") == "1" {
		os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

type cluster struct {
	t       *testing.T
	tempDir string
	env     []string
}

func newCluster(t *testing.T, extraEnv ...string) *cluster {
	t.Helper()
	dir := t.TempDir()
	env := append(os.Environ(), "RAYSIM_TEST_AS_RAY=1", "RAYSIM_BIND_HOST=127.0.0.1", "RAY_TMPDIR="+dir,
		"RAY_ADDRESS=", "RAY_API_SERVER_ADDRESS=", "RAY_DASHBOARD_ADDRESS=", "RAY_health_check_period_ms=100",
		"RAY_AUTH_MODE=", "RAY_AUTH_TOKEN=", "RAY_AUTH_TOKEN_PATH=")
	return &cluster{t: t, tempDir: dir, env: append(env, extraEnv...)}
}

type result struct {
	stdout, stderr string
	code           int
}

// ray runs one CLI command to completion.
func (c *cluster) ray(env []string, args ...string) result {
	c.t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append([]string{}, c.env...), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			c.t.Fatal(err)
		}
		return result{out.String(), errb.String(), code}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		c.t.Fatalf("ray %v did not finish; stdout %s stderr %s", args, out.String(), errb.String())
	}
	return result{}
}

// syncBuffer is a bytes.Buffer safe to read while a process writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type proc struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
}

// spawn starts a long-running CLI command (ray start --block).
func (c *cluster) spawn(env []string, args ...string) *proc {
	c.t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append([]string{}, c.env...), env...)
	p := &proc{cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	c.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if c.t.Failed() {
			c.t.Logf("output of %v:\n%s", args, p.out.String())
		}
	})
	return p
}

func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("process %v still running after %s", p.cmd.Args, timeout)
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		t.Fatal(p.err)
	}
	return 0
}

func freePorts() []string {
	return []string{"--port=0", "--dashboard-port=0", "--dashboard-agent-listen-port=0", "--metrics-export-port=0"}
}

// startHead runs `ray start --head --block` and waits until it is up.
func (c *cluster) startHead(extra ...string) (*proc, node.HeadInfo) {
	c.t.Helper()
	args := append([]string{"start", "--head", "--block", "--temp-dir=" + c.tempDir, "--num-cpus=1", "--dashboard-host=0.0.0.0"}, freePorts()...)
	p := c.spawn(nil, append(args, extra...)...)
	info, err := node.WaitHeadInfo(c.tempDir, p.cmd.Process.Pid, 30*time.Second)
	if err != nil {
		c.t.Fatalf("%v\n%s", err, p.out.String())
	}
	return p, info
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestHealthCheckExitCodes(t *testing.T) {
	c := newCluster(t)
	if r := c.ray([]string{"RAYSIM_HEALTH_CHECK_WAIT_S=1"}, "health-check", "--address", closedPort(t)); r.code != 1 {
		t.Fatalf("health-check of nothing: %+v", r)
	}
	head, info := c.startHead()
	if r := c.ray(nil, "health-check", "--address", info.GCSAddress); r.code != 0 {
		t.Fatalf("health-check of a live GCS: %+v", r)
	}
	if r := c.ray([]string{"RAY_ADDRESS=" + info.GCSAddress}, "health-check"); r.code != 0 {
		t.Fatalf("health-check through RAY_ADDRESS: %+v", r)
	}
	if r := c.ray(nil, "health-check", "--address="+info.GCSAddress, "--component=gcs", "--skip-version-check"); r.code != 0 {
		t.Fatalf("health-check with extra flags: %+v", r)
	}
	_ = head.cmd.Process.Signal(syscall.SIGTERM)
	if code := head.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("head exited %d on SIGTERM", code)
	}
	if r := c.ray([]string{"RAYSIM_HEALTH_CHECK_WAIT_S=1"}, "health-check", "--address", info.GCSAddress); r.code != 1 {
		t.Fatalf("health-check after the head stopped: %+v", r)
	}
}

// TestHealthCheckWaitsForTheGCS: as Ray's, a health-check started before the head waits for its GCS
// to come up and then succeeds (KubeRay's wait-gcs-ready init container starts beside the head).
func TestHealthCheckWaitsForTheGCS(t *testing.T) {
	c := newCluster(t)
	addr := closedPort(t)
	_, port, _ := net.SplitHostPort(addr)
	check := c.spawn(nil, "health-check", "--address", addr)
	time.Sleep(300 * time.Millisecond) // the check is refused at least once
	c.startHead("--port=" + port)
	if code := check.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("health-check begun before the head: exit %d\n%s", code, check.out.String())
	}
}

func TestJobSubmitNoWaitThenFollowLogs(t *testing.T) {
	c := newCluster(t)
	_, info := c.startHead()
	viaURL := []string{"RAY_ADDRESS=" + info.DashboardURL}

	r := c.ray(viaURL, "job", "submit", "--no-wait", "--submission-id=cli-1", "--runtime-env-json", `{"env_vars": {"WHO": "cli"}}`,
		"--", "sh", "-c", `for i in 1 2 3; do echo "$WHO $i"; sleep 0.2; done`)
	if r.code != 0 || !strings.Contains(r.stdout, "Job 'cli-1' submitted successfully") {
		t.Fatalf("submit --no-wait: %+v", r)
	}
	// The GCS address (no scheme) leads to the dashboard too. As in Ray, --follow ends with the job's
	// outcome.
	address := "Job submission server address: " + info.DashboardURL + "\n"
	r = c.ray(nil, "job", "logs", "--address", info.GCSAddress, "--follow", "cli-1")
	if want := address + "cli 1\ncli 2\ncli 3\n---------------------\nJob 'cli-1' succeeded\n---------------------\n"; r.code != 0 || r.stdout != want {
		t.Fatalf("logs --follow: %+v, want stdout %q", r, want)
	}
	r = c.ray(viaURL, "job", "status", "cli-1")
	if r.code != 0 || !strings.Contains(r.stdout, "Job 'cli-1' succeeded") {
		t.Fatalf("status: %+v", r)
	}
	r = c.ray([]string{"RAY_DASHBOARD_ADDRESS=" + info.DashboardURL}, "job", "logs", "cli-1")
	if r.code != 0 || r.stdout != address+"cli 1\ncli 2\ncli 3\n" {
		t.Fatalf("logs: %+v", r)
	}

	// Resubmitting the same id is refused in a way a client can recognise.
	r = c.ray(viaURL, "job", "submit", "--no-wait", "--submission-id=cli-1", "--", "true")
	if r.code != 1 || !strings.Contains(r.stderr, "Please use a different submission_id") {
		t.Fatalf("duplicate submit: %+v", r)
	}

	// Waiting on a failing job exits 1 and shows the exit code.
	r = c.ray(viaURL, "job", "submit", "--submission-id=cli-fail", "--", "sh", "-c", "echo broken; exit 5")
	if r.code != 1 || !strings.Contains(r.stdout, "broken") || !strings.Contains(r.stdout, "exit code 5") {
		t.Fatalf("failing submit: %+v", r)
	}

	// Stop, list, delete.
	r = c.ray(viaURL, "job", "submit", "--no-wait", "--submission-id=cli-long", "--entrypoint-num-cpus=0.5", "--", "sleep", "300")
	if r.code != 0 {
		t.Fatalf("submit long job: %+v", r)
	}
	r = c.ray(viaURL, "job", "stop", "cli-long")
	if r.code != 0 || !strings.Contains(r.stdout, "Job 'cli-long' was stopped") {
		t.Fatalf("stop: %+v", r)
	}
	r = c.ray(viaURL, "job", "list")
	if r.code != 0 || !strings.Contains(r.stdout, `submission_id='cli-long', driver_info=None, status=<JobStatus.STOPPED: 'STOPPED'>`) {
		t.Fatalf("list: %+v", r)
	}
	if r = c.ray(viaURL, "job", "delete", "cli-long"); r.code != 0 {
		t.Fatalf("delete: %+v", r)
	}
	if r = c.ray(viaURL, "job", "status", "cli-long"); r.code != 1 {
		t.Fatalf("status of a deleted job: %+v", r)
	}
	// With nothing set, the local head is found through the temp dir.
	if r = c.ray(nil, "job", "status", "cli-1"); r.code != 0 {
		t.Fatalf("status through the local head: %+v", r)
	}
}

// countAlive sums the node counts `ray status` lists as active or idle.
func countAlive(status string) int {
	n := 0
	for _, line := range strings.Split(status[strings.Index(status, "Active:"):strings.Index(status, "Pending:")], "\n") {
		var c int
		if _, err := fmt.Sscanf(line, " %d ", &c); err == nil {
			n += c
		}
	}
	return n
}

func TestWorkerJoinsAndLeavesStatus(t *testing.T) {
	c := newCluster(t)
	_, info := c.startHead()
	worker := c.spawn(nil, "start", "--address="+info.GCSAddress, "--block", "--num-cpus=2", "--num-gpus=1",
		"--resources", `{"Custom": 3}`, "--dashboard-agent-listen-port=0", "--metrics-export-port=0",
		"--temp-dir="+c.tempDir, "--object-store-memory=100000000", "--disable-usage-stats")
	var last result
	waitFor(t, 30*time.Second, "the worker to show up in ray status", func() bool {
		last = c.ray(nil, "status", "--address", info.GCSAddress)
		return last.code == 0 && countAlive(last.stdout) == 2
	})
	for _, want := range []string{"0.0/3.0 CPU", "0.0/1.0 GPU", "0.0/3.0 Custom", " object_store_memory\n", "Idle:\n 1 node_"} {
		if !strings.Contains(last.stdout, want) {
			t.Errorf("ray status lacks %q:\n%s", want, last.stdout)
		}
	}
	_ = worker.cmd.Process.Signal(syscall.SIGTERM)
	if code := worker.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("worker exited %d on SIGTERM:\n%s", code, worker.out.String())
	}
	last = c.ray(nil, "status")
	if last.code != 0 || countAlive(last.stdout) != 1 || !strings.Contains(last.stdout, ": NodeTerminated (instance_id: ") {
		t.Fatalf("status after the worker left: %+v", last)
	}
}

func TestWorkerExitsNonZeroWithoutHead(t *testing.T) {
	c := newCluster(t, "RAY_gcs_rpc_server_reconnect_timeout_s=1")
	head, info := c.startHead()
	worker := c.spawn(nil, "start", "--address="+info.GCSAddress, "--block", "--num-cpus=1",
		"--dashboard-agent-listen-port=0", "--metrics-export-port=0", "--temp-dir="+c.tempDir)
	waitFor(t, 30*time.Second, "the worker to register", func() bool {
		r := c.ray(nil, "status", "--address", info.GCSAddress)
		return r.code == 0 && countAlive(r.stdout) == 2
	})
	_ = head.cmd.Process.Kill()
	head.wait(t, 30*time.Second)
	if code := worker.wait(t, 30*time.Second); code == 0 {
		t.Fatalf("worker exited 0 after losing its head:\n%s", worker.out.String())
	}
	if !strings.Contains(worker.out.String(), "lost the head") {
		t.Errorf("worker output does not say why it exited:\n%s", worker.out.String())
	}
}

func TestWorkerGivesUpWhenNoHeadAppears(t *testing.T) {
	c := newCluster(t, "RAY_gcs_rpc_server_reconnect_timeout_s=1")
	r := c.ray(nil, "start", "--address="+closedPort(t), "--block", "--dashboard-agent-listen-port=0", "--metrics-export-port=0", "--temp-dir="+c.tempDir)
	if r.code == 0 {
		t.Fatalf("worker without a head exited 0: %+v", r)
	}
}

func TestStartInBackgroundAndStop(t *testing.T) {
	c := newCluster(t)
	args := append([]string{"start", "--head", "--temp-dir=" + c.tempDir, "--num-cpus=1"}, freePorts()...)
	r := c.ray(nil, args...)
	if r.code != 0 || !strings.Contains(r.stdout, "started in the background") {
		t.Fatalf("start without --block: %+v", r)
	}
	info, err := node.ReadHeadInfo(c.tempDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(info.PID, syscall.SIGKILL) })
	if r := c.ray(nil, "health-check"); r.code != 0 {
		t.Fatalf("health-check of the background head: %+v", r)
	}
	// A second head on the same temp dir is refused.
	if r := c.ray(nil, args...); r.code == 0 {
		t.Fatalf("second background head: %+v", r)
	}
	r = c.ray(nil, "stop", "--temp-dir="+c.tempDir)
	if r.code != 0 || !strings.Contains(r.stdout, "stopped 1") {
		t.Fatalf("stop: %+v", r)
	}
	if r := c.ray(nil, "health-check", "--address", info.GCSAddress); r.code != 1 {
		t.Fatalf("health-check after stop: %+v", r)
	}
	if files, _ := filepath.Glob(filepath.Join(node.StateDir(c.tempDir), "*.pid")); len(files) != 0 {
		t.Errorf("pid files left: %v", files)
	}
}

// TestStartFlagsAsRay holds `ray start` to Ray 2.60's click options: names as Ray spells them (an
// underscore or an unknown name is exit 2), a value only where the option takes one, values of the
// option's type; options raysim does not act on are accepted with a warning.
func TestStartFlagsAsRay(t *testing.T) {
	var warn bytes.Buffer
	sa, err := parseStart([]string{"--head", "--num-cpus=2", "--port", "7000", "--object-store-memory", "1000", "--block",
		"--include-dashboard=false", "--disable-usage-stats", "--dashboard-host=0.0.0.0", "--resources={\"a\": 1}",
		"--redis-shard-ports", "x", "-vv", "--log-style=record"}, &warn)
	if err != nil {
		t.Fatal(err)
	}
	f := sa.flagSet
	if !f.isSet("head") || !f.isSet("block") || f.str("num-cpus") != "2" || f.str("port") != "7000" || f.str("dashboard-host") != "0.0.0.0" ||
		f.str("resources") != `{"a": 1}` || f.str("include-dashboard") != "false" || f.str("verbose") != "2" {
		t.Fatalf("parsed %v", f.got)
	}
	for _, w := range []string{"--include-dashboard", "--redis-shard-ports", "--log-style"} {
		if !strings.Contains(warn.String(), "ignoring "+w) {
			t.Errorf("no warning for %s:\n%s", w, warn.String())
		}
	}
	if strings.Contains(warn.String(), "object-store-memory") || strings.Contains(warn.String(), "disable-usage-stats") {
		t.Errorf("a warning for an option raysim takes:\n%s", warn.String())
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--head", "--num_cpus=1"}, "No such option '--num_cpus'."},
		{[]string{"--head", "--bogus"}, "No such option '--bogus'."},
		{[]string{"--head=true"}, "Option '--head' does not take a value."},
		{[]string{"--port"}, "Option '--port' requires an argument."},
		{[]string{"--head", "--num-cpus=1.5"}, "Invalid value for '--num-cpus': '1.5' is not a valid integer."},
		{[]string{"--head", "--include-dashboard=maybe"}, "Invalid value for '--include-dashboard': 'maybe' is not a valid boolean. Recognized values: , 0, 1, f, false, n, no, off, on, t, true, y, yes"},
		{[]string{"--head", "--log-style=bad"}, "Invalid value for '--log-style': 'bad' is not one of 'auto', 'record', 'pretty'."},
		{[]string{"--head", "extra"}, "Got unexpected extra argument (extra)"},
	} {
		var out, errb bytes.Buffer
		if code := Main(append([]string{"start"}, tc.args...), &out, &errb); code != 2 || !strings.Contains(errb.String(), "Error: "+tc.want) {
			t.Errorf("ray start %v: exit %d, stderr %q; want 2 and %q", tc.args, code, errb.String(), tc.want)
		}
	}
	// --help wins over a value of the wrong type, as in click, but not over an unknown option.
	var out, errb bytes.Buffer
	if code := Main([]string{"start", "--num-cpus=1.5", "--help"}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "Usage: ray start [OPTIONS]") {
		t.Errorf("ray start --help: %d %q", code, out.String())
	}
	if code := Main([]string{"start", "--num_cpus=1", "--help"}, &out, &errb); code != 2 {
		t.Errorf("ray start --num_cpus=1 --help: %d, want 2", code)
	}
}

func TestShellJoinQuotesLikeShlex(t *testing.T) {
	got := shellJoin([]string{"python", "script.py", "--arg=val", "hello world", "it's", ""})
	want := `python script.py --arg=val 'hello world' 'it'"'"'s' ''`
	if got != want {
		t.Fatalf("shellJoin = %s, want %s", got, want)
	}
}

func TestMainUsageAndUnknownCommands(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main(nil, &out, &errb); code != 0 || !strings.Contains(out.String(), "raysim") {
		t.Fatalf("usage: %d %s", code, out.String())
	}
	if code := Main([]string{"memory"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "not supported") {
		t.Fatalf("unsupported command: %d %s", code, errb.String())
	}
	out.Reset()
	if code := Main([]string{"--version"}, &out, &errb); code != 0 || !strings.Contains(out.String(), Version) {
		t.Fatalf("version: %d %s", code, out.String())
	}
	if code := Main([]string{"start"}, &out, &errb); code != 2 {
		t.Fatalf("start with neither --head nor --address: %d", code)
	}
}
