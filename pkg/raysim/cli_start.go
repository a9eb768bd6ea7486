package raysim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rayctl/rayctl/pkg/hostmem"
	"github.com/rayctl/rayctl/pkg/procstop"
	"github.com/rayctl/rayctl/pkg/raysim/auth"
	"github.com/rayctl/rayctl/pkg/raysim/gcs"
	"github.com/rayctl/rayctl/pkg/raysim/node"
	"github.com/rayctl/rayctl/pkg/raysim/resource"
)

// Ray's default ports.
const (
	defaultGCSPort       = 6379
	defaultDashboardPort = 8265
	// defaultServePort is Serve's HTTP proxy (http_options.port); raysim's nodes listen there from the start.
	defaultServePort   = 8000
	defaultAgentPort   = 52365
	defaultMetricsPort = 8080
)

// envDuration reads a Ray-style config override such as RAY_health_check_period_ms.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func cmdStart(args []string, stdout, stderr io.Writer) int {
	sa, err := parseStart(args, stderr)
	if err != nil {
		return startUsageError(stderr, err)
	}
	if sa.help {
		startHelp(stdout)
		return 0
	}
	f := sa.flagSet
	head := f.isSet("head")
	if !head && f.str("address") == "" {
		fmt.Fprintln(stderr, "raysim: ray start needs --head, or --address=HOST:PORT to join a cluster")
		return 2
	}
	if head && f.str("address") != "" {
		fmt.Fprintln(stderr, "raysim: ray start: --head and --address cannot be used together")
		return 2
	}
	// With RAY_AUTH_MODE=token a node needs the cluster's token: the head requires it of every
	// caller, a worker sends it to the GCS. Checked before going to the background, so that the
	// error is seen.
	// A service account token (Kubernetes-delegated authentication) is read again when the kubelet
	// rewrites it, before it expires.
	tokenSource, err := auth.Source(os.Getenv)
	if err != nil {
		fmt.Fprintln(stderr, "raysim:", err)
		return 1
	}
	token := tokenSource()
	if !f.isSet("block") {
		return daemonize(args, head, f.str("temp-dir"), stdout, stderr)
	}
	res, err := startResources(f)
	if err != nil {
		fmt.Fprintln(stderr, "raysim:", err)
		return 2
	}
	ports := map[string]int{}
	for name, def := range map[string]int{"port": defaultGCSPort, "dashboard-port": defaultDashboardPort,
		"dashboard-agent-listen-port": defaultAgentPort, "metrics-export-port": defaultMetricsPort} {
		if ports[name], err = f.intValue(name, def); err != nil {
			fmt.Fprintln(stderr, "raysim:", err)
			return 2
		}
	}
	tempDir := f.str("temp-dir")
	if tempDir == "" {
		tempDir = node.DefaultTempDir
	}
	logger := log.New(stderr, "raysim ", log.LstdFlags|log.Lmicroseconds)
	// With RAY_ENABLE_K8S_TOKEN_AUTH the API server decides which callers' tokens are taken.
	var check auth.Check
	if token != "" && auth.K8sMode(os.Getenv) {
		check = auth.NewK8sReviewer(os.Getenv, nil, logger.Printf).Check()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	period := time.Duration(envInt("RAY_health_check_period_ms", 1000)) * time.Millisecond
	bind := os.Getenv("RAYSIM_BIND_HOST")
	if head {
		dashHost := f.str("dashboard-host")
		if dashHost == "" {
			dashHost = "127.0.0.1"
		}
		if bind != "" && (dashHost == "0.0.0.0" || dashHost == "::") {
			dashHost = bind
		}
		if redis, ok := gcs.RedisFromEnv(os.Getenv); ok {
			// As in Ray, --redis-username and --redis-password (KubeRay passes $REDIS_USERNAME and
			// $REDIS_PASSWORD there) are the credentials.
			if f.isSet("redis-password") {
				redis.Username, redis.Password = f.str("redis-username"), f.str("redis-password")
			}
			// GCS fault tolerance: Ray's GCS does not come up without its Redis, so neither does this head.
			if err := redis.Wait(ctx, time.Second, 5*time.Second, logger.Printf); err != nil {
				logger.Printf("stopped waiting for Redis: %v", err)
				return 0
			}
			logger.Printf("GCS uses external Redis at %s (storage namespace %q); it answered PING. raysim keeps GCS state in memory, not in Redis.", redis.Address, redis.Namespace)
		}
		h, err := node.StartHead(node.HeadConfig{
			BindHost: bind, DashboardHost: dashHost, NodeIP: f.str("node-ip-address"), NodeTypeName: os.Getenv("RAY_NODE_TYPE_NAME"),
			GCSPort: ports["port"], DashboardPort: ports["dashboard-port"], AgentPort: ports["dashboard-agent-listen-port"], MetricsPort: ports["metrics-export-port"],
			ServePort: defaultServePort,
			Resources: res, TempDir: tempDir, WriteInfo: true,
			HeartbeatPeriod: period,
			NodeTimeout:     period * time.Duration(envInt("RAY_health_check_failure_threshold", 5)),
			Version:         Version, AuthToken: token, AuthCheck: check, Logf: logger.Printf,
		})
		if err != nil {
			fmt.Fprintln(stderr, "raysim: ray start --head:", err)
			return 1
		}
		pidFile := writePidFile(tempDir, "head")
		defer os.Remove(pidFile)
		printHeadBanner(stdout, h.GCSAddress(), h.DashboardURL())
		<-ctx.Done()
		logger.Printf("signal received; stopping the head")
		h.Close()
		return 0
	}

	addr := withDefaultPort(f.str("address"), defaultGCSPort)
	w, err := node.StartWorker(ctx, node.WorkerConfig{
		GCSAddress: addr, BindHost: bind, NodeIP: f.str("node-ip-address"), NodeTypeName: os.Getenv("RAY_NODE_TYPE_NAME"),
		AgentPort: ports["dashboard-agent-listen-port"], MetricsPort: ports["metrics-export-port"],
		ServePort: defaultServePort, HeadServePort: defaultServePort,
		Resources:        res,
		ReconnectTimeout: time.Duration(envInt("RAY_gcs_rpc_server_reconnect_timeout_s", 60)) * time.Second,
		Version:          Version, AuthToken: token, AuthTokenSource: tokenSource, AuthCheck: check, Logf: logger.Printf,
	})
	if err != nil {
		if ctx.Err() != nil {
			return 0
		}
		fmt.Fprintln(stderr, "raysim: ray start:", err)
		return 1
	}
	pidFile := writePidFile(tempDir, "worker")
	defer os.Remove(pidFile)
	fmt.Fprintf(stdout, "raysim worker node %s joined the cluster at %s.\nThis command now blocks until it gets a signal or the head goes away.\n", w.NodeID(), addr)
	select {
	case <-ctx.Done():
		logger.Printf("signal received; leaving the cluster")
		w.Close()
		return 0
	case <-w.Done():
		fmt.Fprintln(stderr, "raysim: worker exiting:", w.Err())
		return 1
	}
}

func printHeadBanner(w io.Writer, gcsAddr, dashURL string) {
	fmt.Fprintf(w, `raysim head node started (an offline stand-in for Ray; no tasks, actors or object store).
  GCS address:  %s
  Dashboard:    %s
  Add a worker:        ray start --address='%s'
  Submit a job:        RAY_ADDRESS='%s' ray job submit -- <shell command>
  Stop local nodes:    ray stop
This command now blocks until it gets a signal.
`, gcsAddr, dashURL, gcsAddr, dashURL)
}

// startResources turns --num-cpus, --num-gpus, --memory and --resources into a set.
func startResources(f *flagSet) (resource.Set, error) {
	res := resource.Set{}
	if v, ok, err := f.floatValue("num-cpus"); err != nil {
		return nil, err
	} else if ok {
		res[resource.CPU] = v
	} else {
		res[resource.CPU] = float64(runtime.NumCPU())
	}
	if v, ok, err := f.floatValue("num-gpus"); err != nil {
		return nil, err
	} else if ok && v > 0 {
		res[resource.GPU] = v
	}
	visible := visibleMemory()
	if v, ok, err := f.floatValue("memory"); err != nil {
		return nil, err
	} else if ok {
		res[resource.Memory] = math.Floor(v)
	} else if visible > 0 {
		res[resource.Memory] = math.Floor(visible * 0.7)
	}
	if v, ok, err := f.floatValue("object-store-memory"); err != nil {
		return nil, err
	} else if ok {
		res[resource.ObjectStoreMemory] = math.Floor(v)
	} else if m := defaultObjectStore(visible); m > 0 {
		res[resource.ObjectStoreMemory] = m
	}
	if s := f.str("resources"); s != "" {
		var custom map[string]float64
		if err := json.Unmarshal([]byte(s), &custom); err != nil {
			return nil, fmt.Errorf("ray start: --resources must be a JSON object of numbers, e.g. '{\"CustomResource\": 1}': %v", err)
		}
		for k, v := range custom {
			switch k {
			case resource.CPU, resource.GPU:
				return nil, fmt.Errorf("ray start: use --num-cpus / --num-gpus instead of %q in --resources", k)
			}
			res[k] = v
		}
	}
	return res, nil
}

// visibleMemory is the memory available (the cgroup limit if lower), from which Ray sizes its defaults.
func visibleMemory() float64 {
	avail := float64(hostmem.Available())
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if b, err := os.ReadFile(p); err == nil {
			if lim, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64); err == nil && lim > 0 && lim < 1<<60 && (avail == 0 || lim < avail) {
				avail = lim
			}
		}
	}
	return avail
}

// defaultObjectStore is the object_store_memory resource Ray reports when --object-store-memory is not
// given: 30% of the visible memory, capped by the size of /dev/shm. raysim has no object store; the
// resource is accounting only, so that the cluster's resources read as Ray's do.
func defaultObjectStore(visible float64) float64 {
	m := math.Floor(visible * 0.3)
	var st syscall.Statfs_t
	if err := syscall.Statfs("/dev/shm", &st); err == nil {
		if shm := float64(st.Blocks) * float64(st.Bsize); shm > 0 && shm < m {
			m = math.Floor(shm)
		}
	}
	return m
}

func withDefaultPort(addr string, port int) string {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	return net.JoinHostPort(addr, strconv.Itoa(port))
}

// pidFiles live in <temp-dir>/raysim/<role>-<pid>.pid for `ray stop`.
func writePidFile(tempDir, role string) string {
	dir := node.StateDir(tempDir)
	_ = os.MkdirAll(dir, 0o755)
	p := filepath.Join(dir, fmt.Sprintf("%s-%d.pid", role, os.Getpid()))
	_ = os.WriteFile(p, []byte(strconv.Itoa(os.Getpid())), 0o644)
	return p
}

// daemonize runs `ray start … --block` again in the background (a new
// session, output to <temp-dir>/raysim/<role>-<time>.out), waits until it is
// up, and returns, as `ray start` without --block does.
func daemonize(args []string, head bool, tempDir string, stdout, stderr io.Writer) int {
	if tempDir == "" {
		tempDir = node.DefaultTempDir
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "raysim: cannot find my own executable:", err)
		return 1
	}
	role := "worker"
	if head {
		role = "head"
		if info, err := node.ReadHeadInfo(tempDir); err == nil && processAlive(info.PID) {
			fmt.Fprintf(stderr, "raysim: a head is already running here (pid %d, GCS %s); run `ray stop` first\n", info.PID, info.GCSAddress)
			return 1
		}
	}
	dir := node.StateDir(tempDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(stderr, "raysim:", err)
		return 1
	}
	outPath := filepath.Join(dir, fmt.Sprintf("%s-%s.out", role, time.Now().Format("20060102-150405.000000")))
	out, err := os.Create(outPath)
	if err != nil {
		fmt.Fprintln(stderr, "raysim:", err)
		return 1
	}
	defer out.Close()
	cmd := &exec.Cmd{
		Path:        exe,
		Args:        append([]string{"ray", "start"}, append(append([]string{}, args...), "--block")...),
		Env:         append(os.Environ(), DaemonEnv+"=1"),
		Stdout:      out,
		Stderr:      out,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(stderr, "raysim: starting the background node:", err)
		return 1
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	pid := cmd.Process.Pid
	pidFile := filepath.Join(dir, fmt.Sprintf("%s-%d.pid", role, pid))
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case err := <-exited:
			b, _ := os.ReadFile(outPath)
			fmt.Fprintf(stderr, "raysim: the background %s exited during start-up (%v):\n%s", role, err, b)
			return 1
		case <-time.After(50 * time.Millisecond):
		}
		if _, err := os.Stat(pidFile); err == nil {
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(stderr, "raysim: the background %s (pid %d) did not come up; see %s\n", role, pid, outPath)
			return 1
		}
	}
	if head {
		info, err := node.WaitHeadInfo(tempDir, pid, 5*time.Second)
		if err != nil {
			fmt.Fprintln(stderr, "raysim:", err)
			return 1
		}
		fmt.Fprintf(stdout, "raysim head started in the background (pid %d, log %s).\n  GCS address: %s\n  Dashboard:   %s\n  Stop it with: ray stop\n", pid, outPath, info.GCSAddress, info.DashboardURL)
	} else {
		fmt.Fprintf(stdout, "raysim worker started in the background (pid %d, log %s). Stop it with: ray stop\n", pid, outPath)
	}
	_ = cmd.Process.Release()
	return 0
}

func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func cmdStop(args []string, stdout, stderr io.Writer) int {
	f := newFlagSet("stop", stderr).boolean("force", "verbose").value("grace-period", "temp-dir")
	if err := f.parse(args); err != nil {
		fmt.Fprintln(stderr, "raysim:", err)
		return 2
	}
	grace, err := f.intValue("grace-period", 16)
	if err != nil {
		fmt.Fprintln(stderr, "raysim:", err)
		return 2
	}
	tempDir := f.str("temp-dir")
	if tempDir == "" {
		tempDir = node.DefaultTempDir
	}
	files, _ := filepath.Glob(filepath.Join(node.StateDir(tempDir), "*.pid"))
	var pids []int
	for _, p := range files {
		b, err := os.ReadFile(p)
		pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || perr != nil || pid == os.Getpid() || !processAlive(pid) || !sameExecutable(pid, p) {
			_ = os.Remove(p)
			continue
		}
		pids = append(pids, pid)
	}
	sig := syscall.SIGTERM
	if f.isSet("force") {
		sig = syscall.SIGKILL
	}
	killed, _ := procstop.PIDs(pids, sig, time.Duration(grace)*time.Second, func(pid int) bool { return processAlive(pid) && !isZombie(pid) })
	for _, pid := range killed {
		fmt.Fprintf(stderr, "raysim: pid %d did not exit within %ds; sending SIGKILL\n", pid, grace)
	}
	fmt.Fprintf(stdout, "raysim: stopped %d raysim process(es).\n", len(pids))
	return 0
}
