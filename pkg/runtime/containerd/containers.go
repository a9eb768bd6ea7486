package containerd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	ctrd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"

	"github.com/rayctl/rayctl/pkg/runtime"
	"github.com/rayctl/rayctl/pkg/runtime/crilog"
)

// Labels rayctl keeps on each container, besides the caller's own. They let
// a later Runtime report the container without any other state.
const (
	labelPrefix     = "rayctl.runtime/"
	labelPodUID     = labelPrefix + "pod-uid"
	labelName       = labelPrefix + "name"
	labelAttempt    = labelPrefix + "attempt"
	labelLogPath    = labelPrefix + "log-path"
	labelImage      = labelPrefix + "image"
	labelImageID    = labelPrefix + "image-id"
	labelTTY        = labelPrefix + "tty"
	labelStopSignal = labelPrefix + "stop-signal"
	labelStartedAt  = labelPrefix + "started-at"
	labelFinishedAt = labelPrefix + "finished-at"
	labelExitCode   = labelPrefix + "exit-code"
	labelOOM        = labelPrefix + "oom-killed"
	labelMessage    = labelPrefix + "message"
	labelReason     = labelPrefix + "reason"
)

// A container that could not be started is reported exited with this code and reason, as containerd's
// CRI plugin reports one.
const (
	startErrorCode   = 128
	reasonStartError = "StartError"
)

var unsafeIDChars = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// containerID is unique per creation (containerd 1.6 keeps runc state by id
// under /run/containerd/runc/<ns>, so an id is never reused):
// <pod UID prefix>-<name>-<attempt>-<random>.
func containerID(podUID, name string, attempt int) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	uid := unsafeIDChars.ReplaceAllString(podUID, "")
	if len(uid) > 8 {
		uid = uid[:8]
	}
	name = unsafeIDChars.ReplaceAllString(name, "_")
	if len(name) > 40 {
		name = name[:40]
	}
	return fmt.Sprintf("%s-%s-%d-%s", uid, name, attempt, hex.EncodeToString(b))
}

func (r *Runtime) load(ctx context.Context, id string) (ctrd.Container, error) {
	c, err := r.client.LoadContainer(ctx, id)
	if errdefs.IsNotFound(err) {
		return nil, fmt.Errorf("container %s: %w", id, runtime.ErrNotFound)
	}
	return c, err
}

// CreateContainer makes the container (its snapshot and OCI spec) in the
// sandbox; StartContainer runs it.
func (r *Runtime) CreateContainer(ctx context.Context, sb *runtime.Sandbox, cfg runtime.ContainerConfig) (string, error) {
	ctx = r.ctx(ctx)
	if sb == nil {
		return "", errors.New("create container: no sandbox")
	}
	if cfg.LogPath == "" {
		return "", errors.New("create container: no log path")
	}
	img, err := r.getImage(ctx, cfg.Image)
	if err != nil {
		return "", fmt.Errorf("create container %s: %w", cfg.Name, err)
	}
	desc, err := describe(ctx, img, cfg.Image)
	if err != nil {
		return "", err
	}
	spec, err := r.specOpts(sb, cfg, desc)
	if err != nil {
		return "", fmt.Errorf("create container %s: %w", cfg.Name, err)
	}
	id := containerID(sb.PodUID, cfg.Name, cfg.Attempt)
	cgroup := r.cgroupParent + "/" + id
	if r.noLimits != "" {
		cgroup = "" // containerd's default names one, which runc could not make
	}
	spec = append(spec, withCgroupPath(cgroup))
	labels := map[string]string{}
	for k, v := range cfg.Labels {
		labels[k] = v
	}
	labels[labelPodUID] = sb.PodUID
	labels[labelName] = cfg.Name
	labels[labelAttempt] = strconv.Itoa(cfg.Attempt)
	labels[labelLogPath] = cfg.LogPath
	labels[labelImage] = cfg.Image
	labels[labelImageID] = desc.ID
	labels[labelTTY] = strconv.FormatBool(cfg.TTY)
	if stop, _ := stopSignal(ctx, img); stop != "" {
		labels[labelStopSignal] = stop
	}
	_, err = r.client.NewContainer(ctx, id,
		ctrd.WithImage(img),
		ctrd.WithSnapshotter(r.snap),
		ctrd.WithNewSnapshot(id, img),
		ctrd.WithNewSpec(spec...),
		ctrd.WithContainerLabels(labels),
	)
	if err != nil {
		// A half-made container would keep its snapshot.
		dctx, cancel := r.teardownCtx(ctx)
		if c, lerr := r.client.LoadContainer(dctx, id); lerr == nil {
			_ = c.Delete(dctx, ctrd.WithSnapshotCleanup)
		}
		cancel()
		return "", fmt.Errorf("create container %s: %w", cfg.Name, err)
	}
	return id, nil
}

func stopSignal(ctx context.Context, img ctrd.Image) (string, error) {
	spec, err := img.Spec(ctx)
	if err != nil {
		return "", err
	}
	return spec.Config.StopSignal, nil
}

// StartContainer starts the container's task with its output going to the
// log file. A container that fails to start is recorded as exited with code
// 128 and reason StartError (as containerd's CRI reports it), so that the
// kubelet restarts it per its pod's policy.
func (r *Runtime) StartContainer(ctx context.Context, id string) error {
	ctx = r.ctx(ctx)
	c, err := r.load(ctx, id)
	if err != nil {
		return err
	}
	labels, err := c.Labels(ctx)
	if err != nil {
		return err
	}
	if labels[labelStartedAt] != "" || labels[labelExitCode] != "" {
		return fmt.Errorf("container %s was started already", id)
	}
	// Re-adoption (after containerd restarts) must leave a container alone while it is being started.
	r.mu.Lock()
	r.starting[id] = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.starting, id)
		r.mu.Unlock()
	}()
	a, err := r.newAttachment(labels)
	if err != nil {
		return err
	}
	opts := []cio.Opt{cio.WithStreams(nil, a.out, a.err), cio.WithFIFODir(r.fifoDir)}
	if labels[labelTTY] == "true" {
		opts = append(opts, cio.WithTerminal)
	}
	task, err := c.NewTask(ctx, cio.NewCreator(opts...))
	if err != nil {
		a.closeLog()
		return r.startFailed(ctx, c, err)
	}
	crashPoint(crashAfterNewTask)
	a.io = task.IO()
	a.task = task
	a.waitCtx, a.cancelWait = context.WithCancel(r.ctx(context.Background()))
	exitC, err := task.Wait(a.waitCtx)
	if err != nil {
		a.cancelWait()
		a.closeLog()
		r.deleteTask(ctx, task)
		return r.startFailed(ctx, c, fmt.Errorf("waiting for task %s: %w", id, err))
	}
	// Stamped before Start returns: a process that exits at once has its exit time taken by containerd
	// before Start returns, and the start must not read as later than the finish.
	started := time.Now()
	if err := task.Start(ctx); err != nil {
		a.cancelWait()
		a.closeLog()
		r.deleteTask(ctx, task)
		return r.startFailed(ctx, c, err)
	}
	if _, err := c.SetLabels(ctx, map[string]string{labelStartedAt: started.UTC().Format(time.RFC3339Nano)}); err != nil {
		// The process runs: follow it all the same, so its output and exit are not lost.
		r.track(id, a, exitC)
		return fmt.Errorf("start container %s: recording its start: %w", id, err)
	}
	r.track(id, a, exitC)
	return nil
}

// startFailed records that container c could not be started (exit code 128, reason StartError, the
// error as its message) and returns the error. If containerd cannot record it either, the container
// stays Created, which the kubelet also restarts.
func (r *Runtime) startFailed(ctx context.Context, c ctrd.Container, err error) error {
	err = fmt.Errorf("start container %s: %w", c.ID(), err)
	// The caller's context may be what ended the start.
	lctx, cancel := r.teardownCtx(ctx)
	defer cancel()
	_, _ = c.SetLabels(lctx, map[string]string{
		labelExitCode:   strconv.Itoa(startErrorCode),
		labelFinishedAt: time.Now().UTC().Format(time.RFC3339Nano),
		labelReason:     reasonStartError,
		labelMessage:    err.Error(),
	})
	return err
}

func (r *Runtime) newAttachment(labels map[string]string) (*attachment, error) {
	logPath := labels[labelLogPath]
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	log, err := crilog.Open(logPath)
	if err != nil {
		return nil, err
	}
	return &attachment{log: log, out: log.Stream("stdout"), err: log.Stream("stderr"), done: make(chan struct{})}, nil
}

func (a *attachment) closeLog() {
	a.out.Close()
	a.err.Close()
	a.log.Close()
}

// track copies output until the task exits (then records how it ended) or
// the runtime detaches. When containerd goes away meanwhile, the output keeps
// flowing (the shim holds the FIFOs' other ends) and the wait for the exit is
// made again until containerd answers it.
func (r *Runtime) track(id string, a *attachment, exitC <-chan ctrd.ExitStatus) {
	r.mu.Lock()
	r.attached[id] = a
	r.mu.Unlock()
	go func() {
		defer close(a.done)
		st, ok := r.awaitExit(a, exitC)
		if !ok {
			// Detached or removed; or gone from containerd, which ContainerStatus reports.
			a.io.Cancel()
		}
		a.io.Wait()
		a.closeLog()
		if ok {
			r.recordExit(id, int(st.ExitCode()), st.ExitTime())
			r.Exited(id)
		}
	}()
}

// awaitExit returns the task's exit status from exitC, waiting again (with back-off) each time
// containerd breaks the wait off. It reports false if the wait was cancelled or the task is gone.
func (r *Runtime) awaitExit(a *attachment, exitC <-chan ctrd.ExitStatus) (ctrd.ExitStatus, bool) {
	backoff := waitRetryMin
	for {
		st := <-exitC
		err := errgrpc.ToNative(st.Error())
		switch {
		case err == nil:
			return st, true
		case a.waitCtx.Err() != nil || errdefs.IsNotFound(err):
			return st, false
		}
		select {
		case <-a.waitCtx.Done():
			return st, false
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, waitRetryMax)
		if exitC, err = a.task.Wait(a.waitCtx); err != nil {
			return st, false
		}
	}
}

// How soon a wait for a task's exit that containerd broke off (it died or restarted) is made again.
const (
	waitRetryMin = 50 * time.Millisecond
	waitRetryMax = 2 * time.Second
)

// recordExit stores how the container ended in its labels, so the status
// outlives the task.
func (r *Runtime) recordExit(id string, code int, at time.Time) {
	ctx, cancel := context.WithTimeout(r.ctx(context.Background()), 10*time.Second)
	defer cancel()
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return
	}
	if at.IsZero() {
		at = time.Now()
	}
	_, _ = c.SetLabels(ctx, map[string]string{
		labelExitCode:   strconv.Itoa(code),
		labelFinishedAt: at.UTC().Format(time.RFC3339Nano),
		labelOOM:        strconv.FormatBool(r.oomKilled(id)),
	})
}

// oomKilled reads the container's memory cgroup (v1 memory.oom_control or
// v2 memory.events) for the kernel's OOM-kill count. The cgroup lasts until
// the task is deleted. Containers made before cgroups had a parent per data
// dir sit directly under the namespace's.
func (r *Runtime) oomKilled(id string) bool {
	var paths []string
	for _, parent := range []string{r.cgroupParent, "/" + r.ns} {
		paths = append(paths,
			filepath.Join("/sys/fs/cgroup/memory", parent, id, "memory.oom_control"),
			filepath.Join("/sys/fs/cgroup", parent, id, "memory.events"))
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "oom_kill" && f[1] != "0" {
				return true
			}
		}
		return false
	}
	return false
}

// readopt attaches to the output of running containers a previous Runtime
// started (or that this one lost track of when containerd restarted).
func (r *Runtime) readopt(ctx context.Context) error {
	ctx = r.ctx(ctx)
	cs, err := r.client.Containers(ctx)
	if err != nil {
		return fmt.Errorf("listing containers: %w", err)
	}
	for _, c := range cs {
		labels, err := c.Labels(ctx)
		if err != nil || labels[labelPodUID] == "" || labels[labelExitCode] != "" {
			continue
		}
		r.mu.Lock()
		cur, starting := r.attached[c.ID()], r.starting[c.ID()]
		r.mu.Unlock()
		if starting || (cur != nil && !isClosed(cur.done)) {
			continue // being started, or still tracked
		}
		if labels[labelStartedAt] == "" && r.taskCreated(ctx, c) {
			continue // made but never started: nothing runs to follow (Sweep removes the task)
		}
		a, err := r.newAttachment(labels)
		if err != nil {
			continue
		}
		attach := cio.NewAttach(cio.WithStreams(nil, a.out, a.err))
		task, err := c.Task(ctx, attach)
		if err != nil {
			a.closeLog()
			continue
		}
		a.io, a.task = task.IO(), task
		a.waitCtx, a.cancelWait = context.WithCancel(r.ctx(context.Background()))
		exitC, err := task.Wait(a.waitCtx)
		if err != nil {
			a.cancelWait()
			a.io.Cancel()
			a.closeLog()
			continue
		}
		r.track(c.ID(), a, exitC)
	}
	return nil
}

// taskCreated reports whether the container's task exists and was never started.
func (r *Runtime) taskCreated(ctx context.Context, c ctrd.Container) bool {
	task, err := c.Task(ctx, nil)
	if err != nil {
		return false
	}
	st, err := task.Status(ctx)
	return err == nil && st.Status == ctrd.Created
}

// StopContainer sends the stop signal (SIGTERM unless the image names
// another), waits up to grace, then SIGKILLs and waits for the exit.
func (r *Runtime) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	ctx = r.ctx(ctx)
	c, err := r.load(ctx, id)
	if err != nil {
		return err
	}
	task, err := c.Task(ctx, nil)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	st, err := task.Status(ctx)
	if err != nil || st.Status == ctrd.Stopped {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	exitC, err := task.Wait(wctx)
	if err != nil {
		return fmt.Errorf("stop container %s: %w", id, err)
	}
	// exited is nil once the task has exited; an error means containerd broke the wait off.
	exited := func(st ctrd.ExitStatus) error {
		if err := st.Error(); err != nil {
			return fmt.Errorf("stop container %s: waiting for its exit: %w", id, err)
		}
		return r.awaitRecorded(ctx, id)
	}
	sig := syscall.SIGTERM
	if labels, err := c.Labels(ctx); err == nil && labels[labelStopSignal] != "" {
		if s, ok := parseSignal(labels[labelStopSignal]); ok {
			sig = s
		}
	}
	if grace > 0 {
		if err := task.Kill(ctx, sig); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("stop container %s: %w", id, err)
		}
		select {
		case st := <-exitC:
			return exited(st)
		case <-time.After(grace):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := task.Kill(ctx, syscall.SIGKILL, ctrd.WithKillAll); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("kill container %s: %w", id, err)
	}
	select {
	case st := <-exitC:
		return exited(st)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// awaitRecorded waits for the tracker of a container that just exited to
// finish its log and record the exit, so a status read next sees it.
func (r *Runtime) awaitRecorded(ctx context.Context, id string) error {
	r.mu.Lock()
	a := r.attached[id]
	r.mu.Unlock()
	if a == nil {
		return nil
	}
	select {
	case <-a.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func parseSignal(s string) (syscall.Signal, bool) {
	names := map[string]syscall.Signal{"SIGTERM": syscall.SIGTERM, "SIGINT": syscall.SIGINT, "SIGQUIT": syscall.SIGQUIT,
		"SIGKILL": syscall.SIGKILL, "SIGHUP": syscall.SIGHUP, "SIGUSR1": syscall.SIGUSR1, "SIGUSR2": syscall.SIGUSR2, "SIGWINCH": syscall.SIGWINCH}
	s = strings.ToUpper(s)
	if !strings.HasPrefix(s, "SIG") {
		s = "SIG" + s
	}
	if sig, ok := names[s]; ok {
		return sig, true
	}
	if n, err := strconv.Atoi(strings.TrimPrefix(s, "SIG")); err == nil && n > 0 && n < 65 {
		return syscall.Signal(n), true
	}
	return 0, false
}

// RemoveContainer deletes the container's task (killing it if it still
// runs), the container and its snapshot. Removing a missing container is
// not an error.
func (r *Runtime) RemoveContainer(ctx context.Context, id string) error {
	ctx = r.ctx(ctx)
	c, err := r.client.LoadContainer(ctx, id)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if task, err := c.Task(ctx, cio.Load); err == nil {
		if st, err := task.Status(ctx); err == nil && st.Status != ctrd.Stopped && st.Status != ctrd.Created {
			if err := r.StopContainer(ctx, id, 0); err != nil {
				return err
			}
		}
		if err := r.awaitRecorded(ctx, id); err != nil {
			return err
		}
		dctx, cancel := r.teardownCtx(ctx)
		_, err := task.Delete(dctx, ctrd.WithProcessKill)
		cancel()
		if err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("remove container %s: deleting its task: %w", id, err)
		}
	} else if !errdefs.IsNotFound(err) {
		return err
	}
	r.mu.Lock()
	a := r.attached[id]
	delete(r.attached, id)
	r.mu.Unlock()
	if a != nil {
		a.cancelWait()
		<-a.done
	}
	dctx, cancel := r.teardownCtx(ctx)
	defer cancel()
	if err := c.Delete(dctx, ctrd.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("remove container %s: %w", id, err)
	}
	return nil
}

// teardownCtx is for the calls that take a task or container apart: once begun they run to the end
// even when the caller's context ends (rayctl stopping), because a task deletion cut off half-way can
// leave containerd without the task while its shim lives on, which nothing then removes.
func (r *Runtime) teardownCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.ctx(context.WithoutCancel(ctx)), teardownTimeout)
}

// teardownTimeout bounds a teardown call (see teardownCtx).
const teardownTimeout = 30 * time.Second

// deleteTask deletes a task that is not to run, killing its process, even if ctx has ended.
func (r *Runtime) deleteTask(ctx context.Context, task ctrd.Task) {
	dctx, cancel := r.teardownCtx(ctx)
	defer cancel()
	_, _ = task.Delete(dctx, ctrd.WithProcessKill)
}

// ContainerStatus reports the container from its labels and task.
func (r *Runtime) ContainerStatus(ctx context.Context, id string) (*runtime.ContainerStatus, error) {
	ctx = r.ctx(ctx)
	c, err := r.load(ctx, id)
	if err != nil {
		return nil, err
	}
	return r.status(ctx, c)
}

func (r *Runtime) status(ctx context.Context, c ctrd.Container) (*runtime.ContainerStatus, error) {
	info, err := c.Info(ctx)
	if errdefs.IsNotFound(err) {
		return nil, fmt.Errorf("container %s: %w", c.ID(), runtime.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	l := info.Labels
	s := &runtime.ContainerStatus{ID: c.ID(), PodUID: l[labelPodUID], Name: l[labelName], Image: l[labelImage],
		ImageID: l[labelImageID], CreatedAt: info.CreatedAt, LogPath: l[labelLogPath], Message: l[labelMessage],
		State: runtime.StateCreated, Labels: map[string]string{}}
	s.Attempt, _ = strconv.Atoi(l[labelAttempt])
	for k, v := range l {
		if !strings.HasPrefix(k, labelPrefix) {
			s.Labels[k] = v
		}
	}
	s.StartedAt, _ = time.Parse(time.RFC3339Nano, l[labelStartedAt])
	if l[labelExitCode] != "" {
		s.State = runtime.StateExited
		s.ExitCode, _ = strconv.Atoi(l[labelExitCode])
		s.FinishedAt, _ = time.Parse(time.RFC3339Nano, l[labelFinishedAt])
		s.Reason = exitReason(s.ExitCode, l[labelOOM] == "true")
		if l[labelReason] != "" {
			s.Reason = l[labelReason]
		}
		return s, nil
	}
	task, err := c.Task(ctx, nil)
	if errdefs.IsNotFound(err) {
		if !s.StartedAt.IsZero() {
			// Started, yet neither a task nor a recorded exit: containerd lost it.
			s.State, s.ExitCode, s.Reason = runtime.StateExited, 255, "Error"
			s.Message = "the container's task is gone and its exit was not recorded"
		}
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	st, err := task.Status(ctx)
	if err != nil {
		s.State = runtime.StateUnknown
		s.Message = err.Error()
		return s, nil
	}
	switch st.Status {
	case ctrd.Running, ctrd.Paused, ctrd.Pausing:
		s.State = runtime.StateRunning
	case ctrd.Created:
		s.State = runtime.StateCreated
	case ctrd.Stopped:
		// Exited while nobody tracked it: record it now (the cgroup still
		// tells of an OOM kill until the task is deleted).
		r.recordExit(c.ID(), int(st.ExitStatus), st.ExitTime)
		s.State, s.ExitCode, s.FinishedAt = runtime.StateExited, int(st.ExitStatus), st.ExitTime
		s.Reason = exitReason(s.ExitCode, r.oomKilled(c.ID()))
	default:
		s.State = runtime.StateUnknown
	}
	return s, nil
}

func exitReason(code int, oom bool) string {
	switch {
	case oom:
		return "OOMKilled"
	case code == 0:
		return "Completed"
	}
	return "Error"
}

// ListContainers reports every container rayctl made in the namespace.
func (r *Runtime) ListContainers(ctx context.Context) ([]*runtime.ContainerStatus, error) {
	ctx = r.ctx(ctx)
	cs, err := r.client.Containers(ctx, fmt.Sprintf("labels.%q", labelPodUID))
	if err != nil {
		return nil, err
	}
	out := make([]*runtime.ContainerStatus, 0, len(cs))
	for _, c := range cs {
		s, err := r.status(ctx, c)
		if errors.Is(err, runtime.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}
