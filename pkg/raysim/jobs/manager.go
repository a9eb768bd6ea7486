package jobs

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rayctl/rayctl/pkg/raysim/resource"
)

// Cluster is what the manager needs from the node table: somewhere to hold
// a job's entrypoint resources while it runs.
type Cluster interface {
	// Reserve holds req on some node and returns that node's id, or ok=false
	// when no node has room right now.
	Reserve(req resource.Set) (nodeID string, ok bool)
	// Release returns a reservation.
	Release(nodeID string, req resource.Set)
}

// Config configures a Manager.
type Config struct {
	// LogDir receives one job-driver-<submission_id>.log per job.
	LogDir string
	// Cluster holds entrypoint resources; nil means every job starts at once.
	Cluster Cluster
	// Env is added to the entrypoint's environment (after the manager's own
	// environment), e.g. RAY_ADDRESS.
	Env []string
	// NodeID, NodeIP and AgentAddress describe the node that runs the
	// entrypoints (the head), for driver_node_id, driver_info and
	// driver_agent_http_address.
	NodeID, NodeIP, AgentAddress string
	// StopGrace is how long a stopped job has between SIGTERM and SIGKILL;
	// zero means 3 s (or $RAY_JOB_STOP_WAIT_TIME_S).
	StopGrace time.Duration
	// Shell runs the entrypoint as `Shell -c ENTRYPOINT`; empty means /bin/sh.
	Shell string
	// Logf, if set, receives the manager's log lines.
	Logf func(format string, args ...any)
}

type job struct {
	d          Details
	req        resource.Set
	nodeID     string // where req is reserved; "" while pending
	seq        int
	logPath    string
	cmd        *exec.Cmd
	stopping   bool
	done       chan struct{} // closed when the job reaches a terminal state
	hasProcess bool
}

// Manager keeps the jobs of one head. Job state lives only in memory: it is
// gone when the head exits, as in Ray without GCS fault tolerance.
type Manager struct {
	cfg  Config
	kick chan struct{}
	quit chan struct{}
	wg   sync.WaitGroup

	mu     sync.Mutex
	jobs   map[string]*job
	seq    int
	closed bool
}

// NewManager starts a manager; call Close to stop it and its jobs.
func NewManager(cfg Config) *Manager {
	if cfg.Shell == "" {
		cfg.Shell = "/bin/sh"
	}
	if cfg.StopGrace == 0 {
		cfg.StopGrace = 3 * time.Second
		if v, err := strconv.Atoi(os.Getenv("RAY_JOB_STOP_WAIT_TIME_S")); err == nil && v >= 0 {
			cfg.StopGrace = time.Duration(v) * time.Second
		}
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	m := &Manager{cfg: cfg, kick: make(chan struct{}, 1), quit: make(chan struct{}), jobs: map[string]*job{}}
	m.wg.Add(1)
	go m.scheduler()
	return m
}

// Kick asks the manager to retry starting pending jobs (call it when the
// cluster's capacity may have grown). It never blocks.
func (m *Manager) Kick() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

func (m *Manager) scheduler() {
	defer m.wg.Done()
	for {
		select {
		case <-m.quit:
			return
		case <-m.kick:
			m.schedule()
		}
	}
}

var validID = regexp.MustCompile(`^[A-Za-z0-9._:-]+$`)

const idAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

func newSubmissionID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = idAlphabet[int(b[i])%len(idAlphabet)]
	}
	return "raysubmit_" + string(b)
}

func ptr[T any](v T) *T { return &v }

// Submit records a job as PENDING and returns its ids; it starts as soon as
// the cluster can hold its entrypoint resources.
func (m *Manager) Submit(req SubmitRequest) (SubmitResponse, error) {
	id := req.SubmissionID
	if id == "" {
		id = req.JobID
	}
	if id == "" {
		id = newSubmissionID()
	}
	if !validID.MatchString(id) {
		return SubmitResponse{}, &BadRequestError{Msg: fmt.Sprintf("submission_id %q may only contain letters, digits, '.', '_', ':' and '-'", id)}
	}
	res := resource.Set{}
	if req.EntrypointNumCPUs != nil && *req.EntrypointNumCPUs > 0 {
		res[resource.CPU] = *req.EntrypointNumCPUs
	}
	if req.EntrypointNumGPUs != nil && *req.EntrypointNumGPUs > 0 {
		res[resource.GPU] = *req.EntrypointNumGPUs
	}
	if req.EntrypointMemory != nil && *req.EntrypointMemory > 0 {
		res[resource.Memory] = float64(*req.EntrypointMemory)
	}
	for k, v := range req.EntrypointResources {
		if v > 0 {
			res[k] += v
		}
	}
	msg := MessagePending
	if !res.IsZero() {
		msg = MessagePendingResources
	}
	if len(req.RuntimeEnv) > 0 {
		msg += MessagePendingRuntimeEnv
	}
	now := time.Now().UnixMilli()

	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return SubmitResponse{}, errors.New("the head is shutting down")
	}
	if _, taken := m.jobs[id]; taken {
		m.mu.Unlock()
		return SubmitResponse{}, &DuplicateError{ID: id}
	}
	m.seq++
	j := &job{
		d: Details{
			Type:         TypeSubmission,
			SubmissionID: ptr(id),
			Status:       StatusPending,
			Entrypoint:   req.Entrypoint,
			Message:      ptr(msg),
			StartTime:    ptr(now),
			Metadata:     req.Metadata,
			RuntimeEnv:   req.RuntimeEnv,
		},
		req:     res,
		seq:     m.seq,
		logPath: filepath.Join(m.cfg.LogDir, "job-driver-"+id+".log"),
		done:    make(chan struct{}),
	}
	m.jobs[id] = j
	m.mu.Unlock()
	m.cfg.Logf("job %s submitted: %s", id, req.Entrypoint)
	m.Kick()
	return SubmitResponse{JobID: id, SubmissionID: id}, nil
}

// schedule starts every pending job that fits, oldest first.
func (m *Manager) schedule() {
	m.mu.Lock()
	pending := make([]*job, 0)
	for _, j := range m.jobs {
		if j.d.Status == StatusPending && !j.stopping {
			pending = append(pending, j)
		}
	}
	m.mu.Unlock()
	sort.Slice(pending, func(a, b int) bool { return pending[a].seq < pending[b].seq })
	for _, j := range pending {
		nodeID := m.cfg.NodeID
		if m.cfg.Cluster != nil {
			var ok bool
			nodeID, ok = m.cfg.Cluster.Reserve(j.req)
			if !ok {
				continue
			}
		}
		m.mu.Lock()
		if j.d.Status != StatusPending || j.stopping || m.closed {
			m.mu.Unlock()
			m.release(nodeID, j.req)
			continue
		}
		j.nodeID = nodeID
		m.start(j)
		m.mu.Unlock()
	}
}

func (m *Manager) release(nodeID string, req resource.Set) {
	if m.cfg.Cluster != nil && nodeID != "" {
		m.cfg.Cluster.Release(nodeID, req)
	}
}

// entrypointEnv builds the entrypoint's environment.
func (m *Manager) entrypointEnv(j *job) []string {
	env := append(os.Environ(), m.cfg.Env...)
	id := *j.d.SubmissionID
	cfg, _ := json.Marshal(map[string]any{"runtime_env": j.d.RuntimeEnv, "metadata": j.d.Metadata})
	env = append(env,
		"RAY_JOB_SUBMISSION_ID="+id,
		"RAY_JOB_CONFIG_JSON_ENV_VAR="+string(cfg),
		"PYTHONUNBUFFERED=1",
	)
	if vars, ok := j.d.RuntimeEnv["env_vars"].(map[string]any); ok {
		keys := make([]string, 0, len(vars))
		for k := range vars {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			switch v := vars[k].(type) {
			case string:
				env = append(env, k+"="+v)
			default:
				b, _ := json.Marshal(v)
				env = append(env, k+"="+string(b))
			}
		}
	}
	return env
}

// start launches j's entrypoint; m.mu is held. The entrypoint is a shell
// command that never connects a Ray driver, so, as in Ray for such an
// entrypoint, job_id and driver_info stay null.
func (m *Manager) start(j *job) {
	id := *j.d.SubmissionID
	j.d.DriverNodeID = ptr(m.cfg.NodeID)
	if m.cfg.AgentAddress != "" {
		j.d.DriverAgentHTTPAddress = ptr(m.cfg.AgentAddress)
	}

	fail := func(err error) {
		j.d.Status = StatusFailed
		j.d.Message = ptr("Job entrypoint command could not be started: " + err.Error())
		j.d.ErrorType = ptr(ErrorTypeEntrypointStart)
		j.d.EndTime = ptr(time.Now().UnixMilli())
		close(j.done)
		nodeID, req := j.nodeID, j.req
		go func() { m.release(nodeID, req); m.Kick() }()
		m.cfg.Logf("job %s failed to start: %v", id, err)
	}

	if err := os.MkdirAll(m.cfg.LogDir, 0o755); err != nil {
		fail(err)
		return
	}
	logf, err := os.OpenFile(j.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fail(err)
		return
	}
	cmd := exec.Command(m.cfg.Shell, "-c", j.d.Entrypoint)
	cmd.Env = m.entrypointEnv(j)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if wd, ok := j.d.RuntimeEnv["working_dir"].(string); ok && filepath.IsAbs(wd) {
		if st, err := os.Stat(wd); err == nil && st.IsDir() {
			cmd.Dir = wd
		} else {
			fmt.Fprintf(logf, "raysim: runtime_env.working_dir %q is not a local directory on the head; running in the head's working directory\n", wd)
		}
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		fail(err)
		return
	}
	j.cmd = cmd
	j.hasProcess = true
	j.d.Status = StatusRunning
	j.d.Message = ptr(MessageRunning)
	m.cfg.Logf("job %s running as pid %d", id, cmd.Process.Pid)

	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		werr := cmd.Wait()
		logf.Close()
		code := 0
		if werr != nil {
			var ee *exec.ExitError
			if errors.As(werr, &ee) {
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					code = -int(ws.Signal())
				} else {
					code = ee.ExitCode()
				}
			} else {
				code = -1
			}
		}
		m.finish(j, code)
	}()
}

// finish records the end of j's entrypoint.
func (m *Manager) finish(j *job, code int) {
	m.mu.Lock()
	id := *j.d.SubmissionID
	j.d.EndTime = ptr(time.Now().UnixMilli())
	switch {
	case j.stopping:
		j.d.Status = StatusStopped
		j.d.Message = ptr(MessageStopped)
	case code == 0:
		j.d.Status = StatusSucceeded
		j.d.Message = ptr(MessageSucceeded)
		j.d.DriverExitCode = ptr(0)
	default:
		j.d.Status = StatusFailed
		j.d.DriverExitCode = ptr(code)
		j.d.ErrorType = ptr(ErrorTypeEntrypointFailed)
		j.d.Message = ptr(failedMessage(code, lastLogs(j.logPath, 20000)))
	}
	status := j.d.Status
	nodeID, req := j.nodeID, j.req
	close(j.done)
	m.mu.Unlock()
	m.cfg.Logf("job %s %s (exit code %d)", id, status, code)
	m.release(nodeID, req)
	m.Kick()
}

func lastLogs(path string, max int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := st.Size() - max
	if off < 0 {
		off = 0
	}
	buf := make([]byte, st.Size()-off)
	n, _ := f.ReadAt(buf, off)
	return string(buf[:n])
}

func (m *Manager) lookup(id string) (*job, error) {
	if j, ok := m.jobs[id]; ok {
		return j, nil
	}
	return nil, &NotFoundError{ID: id}
}

func cloneDetails(d Details) Details {
	out := d
	if d.DriverInfo != nil {
		di := *d.DriverInfo
		out.DriverInfo = &di
	}
	return out
}

// Get returns a job by submission id.
func (m *Manager) Get(id string) (Details, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j, err := m.lookup(id)
	if err != nil {
		return Details{}, err
	}
	return cloneDetails(j.d), nil
}

// List returns every job, oldest submission first.
func (m *Manager) List() []Details {
	m.mu.Lock()
	all := make([]*job, 0, len(m.jobs))
	for _, j := range m.jobs {
		all = append(all, j)
	}
	m.mu.Unlock()
	sort.Slice(all, func(a, b int) bool { return all[a].seq < all[b].seq })
	out := make([]Details, 0, len(all))
	m.mu.Lock()
	for _, j := range all {
		out = append(out, cloneDetails(j.d))
	}
	m.mu.Unlock()
	return out
}

// PendingDemands returns the resources each job still waiting to start asks for (those asking for
// nothing start at once and are left out), oldest submission first.
func (m *Manager) PendingDemands() []resource.Set {
	m.mu.Lock()
	defer m.mu.Unlock()
	var pending []*job
	for _, j := range m.jobs {
		if j.d.Status == StatusPending && !j.stopping && !j.req.IsZero() {
			pending = append(pending, j)
		}
	}
	sort.Slice(pending, func(a, b int) bool { return pending[a].seq < pending[b].seq })
	out := make([]resource.Set, len(pending))
	for i, j := range pending {
		out[i] = j.req.Clone()
	}
	return out
}

// Counts returns how many jobs are in each state.
func (m *Manager) Counts() map[Status]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[Status]int{}
	for _, j := range m.jobs {
		out[j.d.Status]++
	}
	return out
}

// Stop stops a job: a pending job becomes STOPPED at once; a running one gets
// SIGTERM (or $RAY_JOB_STOP_SIGNAL=SIGINT) on its process group, then SIGKILL
// after the grace period. stopped is false when the job had already ended.
func (m *Manager) Stop(id string) (stopped bool, err error) {
	m.mu.Lock()
	j, err := m.lookup(id)
	if err != nil {
		m.mu.Unlock()
		return false, err
	}
	if j.d.Status.IsTerminal() || j.stopping {
		m.mu.Unlock()
		return !j.d.Status.IsTerminal(), nil
	}
	j.stopping = true
	if j.d.Status == StatusPending {
		j.d.Status = StatusStopped
		j.d.Message = ptr(MessageStopped)
		j.d.EndTime = ptr(time.Now().UnixMilli())
		close(j.done)
		m.mu.Unlock()
		m.cfg.Logf("job %s stopped while pending", id)
		return true, nil
	}
	pid := j.cmd.Process.Pid
	done := j.done
	m.mu.Unlock()

	sig := syscall.SIGTERM
	if os.Getenv("RAY_JOB_STOP_SIGNAL") == "SIGINT" {
		sig = syscall.SIGINT
	}
	_ = syscall.Kill(-pid, sig)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		t := time.NewTimer(m.cfg.StopGrace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			m.cfg.Logf("job %s did not exit within %s of %s; sending SIGKILL", id, m.cfg.StopGrace, sig)
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}()
	return true, nil
}

// Delete forgets a job in a terminal state (its log file stays on disk).
func (m *Manager) Delete(id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j, err := m.lookup(id)
	if err != nil {
		return false, err
	}
	if !j.d.Status.IsTerminal() {
		return false, &NotTerminalError{ID: id, Status: j.d.Status}
	}
	delete(m.jobs, *j.d.SubmissionID)
	return true, nil
}

// Logs returns everything the job's entrypoint has written so far ("" if it
// has not started).
func (m *Manager) Logs(id string) (string, error) {
	m.mu.Lock()
	j, err := m.lookup(id)
	m.mu.Unlock()
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(j.logPath)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	return string(b), err
}

// Follow calls emit with each new piece of the job's logs until the job is
// in a terminal state and all of its logs were emitted, or until stop is
// closed, or emit fails.
func (m *Manager) Follow(id string, stop <-chan struct{}, emit func(string) error) error {
	m.mu.Lock()
	j, err := m.lookup(id)
	m.mu.Unlock()
	if err != nil {
		return err
	}
	var off int64
	buf := make([]byte, 64<<10)
	tk := time.NewTicker(100 * time.Millisecond)
	defer tk.Stop()
	for {
		finished := false
		select {
		case <-j.done:
			finished = true
		default:
		}
		for {
			n, err := readAt(j.logPath, buf, off)
			if n > 0 {
				off += int64(n)
				if err := emit(string(buf[:n])); err != nil {
					return err
				}
			}
			if n < len(buf) || err != nil {
				break
			}
		}
		if finished {
			return nil
		}
		select {
		case <-stop:
			return nil
		case <-j.done:
		case <-tk.C:
		}
	}
}

func readAt(path string, buf []byte, off int64) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n, err := f.ReadAt(buf, off)
	if err != nil && n > 0 {
		err = nil
	}
	return n, err
}

// Close stops taking jobs, kills every running entrypoint's process group
// and waits for them to be reaped. Job records die with the manager.
func (m *Manager) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	for _, j := range m.jobs {
		if j.d.Status == StatusRunning && j.cmd != nil {
			j.stopping = true
			_ = syscall.Kill(-j.cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	m.mu.Unlock()
	close(m.quit)
	m.wg.Wait()
}

// String summarises the manager for logs.
func (m *Manager) String() string {
	c := m.Counts()
	parts := []string{}
	for _, s := range []Status{StatusPending, StatusRunning, StatusSucceeded, StatusFailed, StatusStopped} {
		parts = append(parts, fmt.Sprintf("%s=%d", strings.ToLower(string(s)), c[s]))
	}
	return "jobs(" + strings.Join(parts, " ") + ")"
}
