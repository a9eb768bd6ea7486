package process

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rayctl/rayctl/pkg/runtime"
	"github.com/rayctl/rayctl/pkg/runtime/crilog"
)

// CreateContainer records the container: its program (see the package doc),
// environment (image env, then the config's, with raysim's dir first in PATH
// when `ray` must be raysim), user, working dir and namespaces.
func (r *Runtime) CreateContainer(ctx context.Context, sb *runtime.Sandbox, cfg runtime.ContainerConfig) (string, error) {
	if sb == nil || cfg.LogPath == "" {
		return "", errors.New("create container: a sandbox and a log path are required")
	}
	img, err := r.EnsureImage(ctx, cfg.Image, runtime.PullIfNotPresent, nil)
	if err != nil {
		return "", err
	}
	prog, err := r.resolve(cfg.Image, img.Argv(cfg.Command, cfg.Args))
	if err != nil {
		return "", fmt.Errorf("create container %s: %w", cfg.Name, err)
	}
	progMounts := r.containerProgram(prog)
	hostname := sb.Config.Hostname
	if hostname == "" {
		hostname = sb.Config.Name
	}
	if !r.isolated || sb.Config.HostNetwork {
		hostname, _ = os.Hostname()
	}
	uid, gid, userNote := cfg.RunAsUser, cfg.RunAsGroup, ""
	if os.Geteuid() == 0 { // elsewhere no user is applied
		uid, gid, userNote = containerUser(r.runAs, r.ids, uid, gid)
	}
	own, err := r.privateDirs(sb, cfg.Name, uid, gid, isRayImage(cfg.Image))
	if err != nil {
		return "", fmt.Errorf("create container %s: %w", cfg.Name, err)
	}
	env := containerEnv(cfg, img, hostname, own.home)
	if prog.SimOnPath {
		env = prependPath(env, r.simDir())
	}
	if prog.RayBinDir != "" {
		env = prependPath(env, prog.RayBinDir)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	short := sb.PodUID
	if len(short) > 8 {
		short = short[:8]
	}
	rec := &record{ContainerStatus: runtime.ContainerStatus{
		ID: fmt.Sprintf("%s-%s-%d-%s", short, cfg.Name, cfg.Attempt, hex.EncodeToString(b)), PodUID: sb.PodUID, Name: cfg.Name,
		Attempt: cfg.Attempt, Image: cfg.Image, ImageID: img.ID, State: runtime.StateCreated, CreatedAt: now(),
		Message: joinMessages(prog.Warning, userNote), Labels: cfg.Labels, LogPath: cfg.LogPath},
		Program: prog.Path, Argv: prog.Args, Env: env, Dir: r.workingDir(sb, cfg, img), UID: uid, GID: gid}
	if r.isolated {
		if !sb.Config.HostNetwork {
			rec.Hostname = hostname
		}
		if err := r.isolate(rec, sb, cfg, own, progMounts); err != nil {
			return "", fmt.Errorf("create container %s: %w", cfg.Name, err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.save(rec); err != nil {
		removeCgroups(rec.Cgroups)
		return "", err
	}
	return rec.ID, nil
}

// workingDir is the container's working dir: the config's, else the image's,
// else (isolated) Ray's images' home, or / for a container that runs as
// RunAs or whose pod dir is hidden, else the pod dir.
func (r *Runtime) workingDir(sb *runtime.Sandbox, cfg runtime.ContainerConfig, img *runtime.Image) string {
	switch {
	case cfg.WorkingDir != "":
		return cfg.WorkingDir
	case img.WorkingDir != "":
		return img.WorkingDir
	case r.isolated && isRayImage(cfg.Image):
		return rayHome
	case r.isolated && (r.runAs != nil || len(r.hidden) > 0):
		// The pod dir is under rayctl's data dir, which the pod's user may not enter, or which is hidden.
		return "/"
	}
	return sb.Config.Dir
}

// isolate fills in an isolated container's namespaces: its network namespace
// and mounts (private dirs, the pod's user's account files, the
// sandbox's /etc files, its volumes, what its program needs) and its
// cgroups. Limits that cannot be applied here leave a note in its message.
func (r *Runtime) isolate(rec *record, sb *runtime.Sandbox, cfg runtime.ContainerConfig, own *ownDirs, progMounts []runtime.Mount) error {
	rec.NetNSPath = sb.NetNSPath
	rec.Mounts = own.mounts
	if r.runAs != nil {
		accounts, err := writeAccountFiles(own.base, *r.runAs, isRayImage(cfg.Image), envValue(rec.Env, "HOME"))
		if err != nil {
			return err
		}
		rec.Mounts = append(rec.Mounts, accounts...)
	}
	rec.Mounts = append(rec.Mounts, withSandboxFiles(sb, cfg.Mounts)...)
	rec.Mounts = append(rec.Mounts, progMounts...)
	var err error
	rec.Cgroups, err = makeCgroups(rec.ID, cfg.Resources)
	if errors.Is(err, errNoCgroups) {
		rec.Message = joinMessages(rec.Message, err.Error())
	} else if err != nil {
		return fmt.Errorf("resource limits: %w", err)
	}
	rec.Mounts = append(rec.Mounts, rec.Cgroups...)
	return nil
}

// joinMessages joins the non-empty of msgs with "; ".
func joinMessages(msgs ...string) string {
	var out []string
	for _, m := range msgs {
		if m != "" {
			out = append(out, m)
		}
	}
	return strings.Join(out, "; ")
}

// envValue is name's value in env, "" if unset.
func envValue(env []string, name string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// withSandboxFiles adds the sandbox's hosts, resolv.conf and hostname at the
// /etc paths the config's mounts leave free.
func withSandboxFiles(sb *runtime.Sandbox, ms []runtime.Mount) []runtime.Mount {
	out := append([]runtime.Mount{}, ms...)
	taken := map[string]bool{}
	for _, m := range ms {
		taken[path.Clean(m.ContainerPath)] = true
	}
	for _, f := range []struct{ dest, src string }{{"/etc/hosts", sb.HostsPath}, {"/etc/resolv.conf", sb.ResolvConfPath}, {"/etc/hostname", sb.HostnamePath}} {
		if f.src != "" && !taken[f.dest] {
			out = append(out, runtime.Mount{HostPath: f.src, ContainerPath: f.dest})
		}
	}
	return out
}

// mergeEnv layers environments; a later name replaces an earlier one in place.
func mergeEnv(base, image []string, cfg []runtime.EnvVar) []string {
	var out []string
	at := map[string]int{}
	set := func(kv string) {
		name, _, _ := strings.Cut(kv, "=")
		if i, ok := at[name]; ok {
			out[i] = kv
			return
		}
		at[name] = len(out)
		out = append(out, kv)
	}
	for _, kv := range base {
		set(kv)
	}
	for _, kv := range image {
		set(kv)
	}
	for _, e := range cfg {
		set(e.Name + "=" + e.Value)
	}
	return out
}

func prependPath(env []string, dir string) []string {
	for i, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			env[i] = "PATH=" + dir + string(os.PathListSeparator) + v
			return env
		}
	}
	return append(env, "PATH="+dir+string(os.PathListSeparator)+"/usr/local/bin:/usr/bin:/bin")
}

// StartContainer starts the process in its own session, with stdout and
// stderr on FIFOs the runtime copies into the log. The process holds its
// FIFOs open read-write, so it never gets SIGPIPE while no rayctl reads them
// (output waits in the pipe for the next Runtime).
func (r *Runtime) StartContainer(ctx context.Context, id string) error {
	r.mu.Lock()
	rec, err := r.load(id)
	r.mu.Unlock()
	if err != nil {
		return err
	}
	if rec.State != runtime.StateCreated {
		return fmt.Errorf("container %s is %s, not created", id, rec.State)
	}
	fail := func(err error) error {
		_ = r.update(id, func(rec *record) {
			rec.State, rec.ExitCode, rec.Reason, rec.Message = runtime.StateExited, 128, "StartError", err.Error()
			rec.FinishedAt = now()
		})
		return fmt.Errorf("start container %s: %w", id, err)
	}
	if err := os.MkdirAll(filepath.Dir(rec.LogPath), 0o755); err != nil {
		return fail(err)
	}
	readers, writers, err := r.makeFIFOs(id, rec.credential())
	if err != nil {
		return fail(err)
	}
	defer func() {
		for _, w := range writers {
			w.Close()
		}
	}()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return fail(err)
	}
	defer devnull.Close()
	cmd := &exec.Cmd{Path: rec.Program, Args: rec.Argv, Env: rec.Env, Dir: rec.Dir, Stdin: devnull, Stdout: writers[0], Stderr: writers[1],
		SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	cmd.SysProcAttr.Credential = rec.credential()
	if _, err := os.Stat(cmd.Dir); err != nil && !r.isolated {
		return fail(fmt.Errorf("working dir %s: %w", cmd.Dir, err))
	}
	ns := nsSetup{netns: rec.NetNSPath, hostname: rec.Hostname, mounts: rec.Mounts, readOnlyHost: r.readOnlyHost, hidden: r.hidden}
	if r.isolated {
		if ns.pidns, err = r.podPIDNS(rec.PodUID); err != nil {
			readers[0].Close()
			readers[1].Close()
			return fail(err)
		}
	}
	for _, cg := range rec.Cgroups {
		ns.cgroups = append(ns.cgroups, cg.ContainerPath)
	}
	if err := spawn(cmd, r.isolated, ns); err != nil {
		readers[0].Close()
		readers[1].Close()
		return fail(err)
	}
	ticks, _ := startTicks(cmd.Process.Pid)
	if err := r.update(id, func(rec *record) {
		rec.State, rec.StartedAt, rec.Pid, rec.StartTicks = runtime.StateRunning, now(), cmd.Process.Pid, ticks
	}); err != nil {
		_ = cmd.Process.Kill()
		return err
	}
	w := r.follow(id, rec.LogPath, readers)
	go func() {
		err := cmd.Wait()
		code := exitCode(cmd.ProcessState, err)
		r.finish(id, w, code, "")
	}()
	return nil
}

// makeFIFOs makes the container's stdout and stderr FIFOs and opens each
// for reading (the runtime) and read-write (the process). They belong to the
// container's user (owner; nil: rayctl's), so that its programs may open
// /dev/stdout and /dev/stderr, which reopen them.
func (r *Runtime) makeFIFOs(id string, owner *syscall.Credential) (readers, writers []*os.File, err error) {
	dir := r.fifoDir(id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	for _, name := range []string{"stdout", "stderr"} {
		p := filepath.Join(dir, name)
		if err := unix.Mkfifo(p, 0o600); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, nil, err
		}
		if owner != nil {
			if err := os.Chown(p, int(owner.Uid), int(owner.Gid)); err != nil {
				return nil, nil, err
			}
		}
		w, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			return nil, nil, err
		}
		rd, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			w.Close()
			return nil, nil, err
		}
		readers, writers = append(readers, rd), append(writers, w)
	}
	return readers, writers, nil
}

// follow copies the FIFOs into the log until they end or Close stops it.
func (r *Runtime) follow(id, logPath string, readers []*os.File) *watch {
	w := &watch{exited: make(chan struct{}), stop: make(chan struct{})}
	r.mu.Lock()
	r.live[id] = w
	r.mu.Unlock()
	log, err := crilog.Open(logPath)
	if err != nil {
		for _, rd := range readers {
			rd.Close()
		}
		return w
	}
	for i, rd := range readers {
		stream := []string{"stdout", "stderr"}[i]
		w.logs.Add(1)
		go func() {
			defer w.logs.Done()
			_ = log.Copy(stream, rd)
		}()
	}
	go func() {
		// Close unblocks the copies by closing the readers; otherwise they
		// end when the process (and whatever inherited its output) is gone.
		done := make(chan struct{})
		go func() { w.logs.Wait(); close(done) }()
		select {
		case <-done:
		case <-w.stop:
			for _, rd := range readers {
				rd.Close()
			}
			<-done
		}
		for _, rd := range readers {
			rd.Close()
		}
		log.Close()
	}()
	return w
}

// finish records the exit, wakes StopContainer and tells the kubelet (ExitNotifier).
func (r *Runtime) finish(id string, w *watch, code int, message string) {
	_ = r.updateUnlessClosed(id, func(rec *record) {
		rec.State, rec.ExitCode, rec.Reason, rec.FinishedAt = runtime.StateExited, code, exitReason(code), now()
		if message != "" {
			rec.Message = message
		}
	})
	close(w.exited)
	r.Exited(id)
}

// exitCode is the shell's way of telling an exit: the status, or 128+signal.
func exitCode(st *os.ProcessState, err error) int {
	if st == nil {
		return 255
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}

// readopt watches the running containers a previous Runtime started, or, with
// ContainersEndWithRuntime, kills them.
func (r *Runtime) readopt() error {
	entries, err := os.ReadDir(filepath.Join(r.dir, "containers"))
	if err != nil {
		return err
	}
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		rec, err := r.load(id)
		if err != nil || rec.State != runtime.StateRunning {
			continue
		}
		if !sameProcess(rec.Pid, rec.StartTicks) {
			r.finish(id, &watch{exited: make(chan struct{})}, 255, "the process ended while no rayctl watched it; its exit status is unknown")
			continue
		}
		if r.endWithRuntime {
			killLeftover(rec.Pid, rec.StartTicks)
			r.finish(id, &watch{exited: make(chan struct{})}, 128+int(unix.SIGKILL), leftoverMessage)
			continue
		}
		var readers []*os.File
		for _, name := range []string{"stdout", "stderr"} {
			rd, err := os.OpenFile(filepath.Join(r.fifoDir(id), name), os.O_RDONLY|syscall.O_NONBLOCK, 0)
			if err == nil {
				readers = append(readers, rd)
			}
		}
		w := r.follow(id, rec.LogPath, readers)
		go r.poll(id, rec.Pid, rec.StartTicks, w)
	}
	return nil
}

// poll waits for a process that is not this Runtime's child to end.
func (r *Runtime) poll(id string, pid int, ticks uint64, w *watch) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		if !sameProcess(pid, ticks) {
			r.finish(id, w, 255, "the process was started by an earlier rayctl, so its exit status is unknown")
			return
		}
	}
}

// StopContainer sends SIGTERM to the container's process group, waits up to
// grace, then SIGKILLs the group. Stopping a stopped container is not an error.
func (r *Runtime) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	r.mu.Lock()
	rec, err := r.load(id)
	w := r.live[id]
	r.mu.Unlock()
	if err != nil {
		return err
	}
	if rec.State != runtime.StateRunning {
		return nil
	}
	if w == nil {
		return fmt.Errorf("stop container %s: it is not watched by this runtime", id)
	}
	if !sameProcess(rec.Pid, rec.StartTicks) {
		<-w.exited
		return nil
	}
	if grace > 0 {
		_ = unix.Kill(-rec.Pid, unix.SIGTERM)
		select {
		case <-w.exited:
			_ = unix.Kill(-rec.Pid, unix.SIGKILL) // what is left of the group
			return nil
		case <-time.After(grace):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	_ = unix.Kill(-rec.Pid, unix.SIGKILL)
	select {
	case <-w.exited:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// RemoveContainer kills the container if it still runs and deletes its
// record and FIFOs. Removing a missing container is not an error.
func (r *Runtime) RemoveContainer(ctx context.Context, id string) error {
	if err := r.StopContainer(ctx, id, 0); err != nil && !errors.Is(err, runtime.ErrNotFound) {
		return err
	}
	r.mu.Lock()
	w := r.live[id]
	delete(r.live, id)
	r.mu.Unlock()
	if w != nil {
		w.logs.Wait()
	}
	if rec, err := r.load(id); err == nil {
		removeCgroups(rec.Cgroups)
	}
	if err := os.RemoveAll(r.fifoDir(id)); err != nil {
		return err
	}
	if err := os.Remove(r.recordPath(id)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// Exec runs cmd in the container's namespaces (when isolated) as its user,
// with its environment and working dir. TTY is not supported: the command runs
// without a terminal.
func (r *Runtime) Exec(ctx context.Context, id string, cmd []string, stdio runtime.ExecIO) (int, error) {
	if len(cmd) == 0 {
		return -1, errors.New("exec: empty command")
	}
	r.mu.Lock()
	rec, err := r.load(id)
	r.mu.Unlock()
	if err != nil {
		return -1, err
	}
	if rec.State != runtime.StateRunning || !sameProcess(rec.Pid, rec.StartTicks) {
		return -1, fmt.Errorf("exec in container %s: it is not running", id)
	}
	prog, err := r.resolve(rec.Image, cmd)
	if err != nil {
		return -1, fmt.Errorf("exec in container %s: %w", id, err)
	}
	r.containerProgram(prog) // its mounts are the container's already
	c := exec.CommandContext(ctx, prog.Path)
	c.Args, c.Env, c.Dir = prog.Args, rec.Env, rec.Dir
	c.SysProcAttr = &syscall.SysProcAttr{Credential: rec.credential()}
	c.Stdin, c.Stdout, c.Stderr = stdio.Stdin, stdio.Stdout, stdio.Stderr
	if stdio.TTY && stdio.Stderr == nil {
		c.Stderr = stdio.Stdout
	}
	if c.Stdout == nil {
		c.Stdout = io.Discard
	}
	if c.Stderr == nil {
		c.Stderr = io.Discard
	}
	if err := enter(c, r.isolated, rec.Pid); err != nil {
		return -1, fmt.Errorf("exec in container %s: %w", id, err)
	}
	err = c.Wait()
	if c.ProcessState == nil {
		return -1, err
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return -1, err
	}
	return exitCode(c.ProcessState, nil), nil
}

// credential is the user the container's processes run as: nil (rayctl's
// own) when it has no uid or rayctl is not root, else uid:gid (gid 0 when unset).
func (rec *record) credential() *syscall.Credential {
	if rec.UID == nil || os.Geteuid() != 0 {
		return nil
	}
	gid := int64(0)
	if rec.GID != nil {
		gid = *rec.GID
	}
	return credential(uint32(*rec.UID), uint32(gid))
}
