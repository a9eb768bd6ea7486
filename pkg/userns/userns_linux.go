package userns

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// selfExe is this binary, wherever it sits: the kernel resolves the link to
// the file the process was started from, without looking up its path, so it
// works even if the binary was moved or deleted since, or sits in a directory
// the user may search but not list.
const selfExe = "/proc/self/exe"

// forwarded are the signals Reexec passes on to its child: those that ask a
// program to stop or reload. The launcher catches them (it would otherwise
// die of them) and the child decides.
var forwarded = []os.Signal{unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT}

// supported is Supported's answer, found once.
var supported struct {
	once sync.Once
	err  error
}

// Supported reports whether this machine lets the current user make a user
// namespace in which a network namespace with a bridge can be created: nil
// if so, else an error saying why in one line (user namespaces disabled by a
// sysctl, their limit at 0, a seccomp filter, AppArmor denying capabilities
// inside them, no bridge support...). It finds out by trying: it starts this
// binary in the namespaces Reexec makes, where it makes its mounts private,
// unshares a network namespace and creates a bridge, then exits. The answer
// is kept: later calls return it at once.
func Supported() error {
	supported.once.Do(func() { supported.err = check() })
	return supported.err
}

// Inside reports whether this process runs inside a user namespace made by
// Reexec: MarkerEnv is "1" and the process's user namespace is not the
// initial one (whose uid_map is "0 0 4294967295"). The marker alone would
// trust a variable anyone can set; the map alone would also match rootless
// containers that rayctl did not make.
func Inside() bool {
	if os.Getenv(MarkerEnv) != "1" {
		return false
	}
	m, err := readIDMap("/proc/self/uid_map")
	return err == nil && !m.initial()
}

// Reexec runs this binary again (/proc/self/exe) in a new user namespace and
// a new mount namespace, and returns its exit code once it ends (128+n when
// signal n killed it). The child has argv[0] os.Args[0] followed by args,
// the environment env (os.Environ() when nil) with MarkerEnv=1, and this
// process's stdin, stdout and stderr. In the namespace it is uid 0 and gid 0,
// mapped to this process's effective uid and gid, so that the files it
// creates belong to this process's user. Where the user has subordinate ids
// (/etc/subuid, /etc/subgid) and newuidmap and newgidmap are installed, ids
// 1… map to them and setgroups(2) is allowed (see SubordinateIDs); else 0 is
// the only id mapped, setgroups(2) is denied and MapNoteEnv says why. It
// holds every capability over the namespace and those it makes; it stays in the host's network, PID, IPC and UTS namespaces. Its
// mounts are copies of the host's; it should call PrivateMounts before it
// mounts anything.
//
// While the child runs, SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to this
// process are passed on to it, and if this process dies (even of SIGKILL) the
// kernel kills the child. The child stays in this process's process group,
// so that it may use the terminal: a signal sent to the whole group (a
// terminal's Ctrl-C) reaches it twice, once from the kernel and once
// forwarded. err is non-nil only when the child could not be started or
// waited for; exitCode is then -1. It is an error to call Reexec from inside
// a namespace it made.
//
// The binary must be readable by the user, not only executable: else the
// kernel makes this process non-dumpable, its child's /proc files belong to
// root, and this process cannot write the child's id maps (EACCES).
func Reexec(args []string, env []string) (exitCode int, err error) {
	if Inside() {
		return -1, errors.New("already inside a user namespace made by rayctl")
	}
	if env == nil {
		env = os.Environ()
	}
	// Caught before the child starts: one that comes while it starts waits in
	// the channel instead of killing this process.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	cmd, done, err := start(args, env)
	if err != nil {
		return -1, err
	}
	for {
		select {
		case s := <-sigs:
			// Signal uses the process's pidfd: once the child is gone this fails
			// rather than reaching a process that got its pid.
			_ = cmd.Process.Signal(s)
		case r := <-done:
			if r.state == nil {
				return -1, fmt.Errorf("waiting for rayctl in its user namespace: %w", r.err)
			}
			return exitStatus(r.state), nil
		}
	}
}

// start starts this binary in a new user namespace and mount namespace, mapping the user's
// subordinate ids beyond 0 where the user has them and newuidmap and newgidmap are installed, else
// the user's own ids alone, with MapNoteEnv saying why.
func start(args, env []string) (*exec.Cmd, <-chan waited, error) {
	uid, gid := os.Geteuid(), os.Getegid()
	sub, why := findSubIDs(uid, gid)
	if why == nil {
		cmd, done, err := startWithSubIDs(sub, uid, gid, args, env)
		if err == nil {
			return cmd, done, nil
		}
		why = err
	}
	cmd := command(os.Args[0], args, withEnv(env, MapNoteEnv, why.Error()))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	started, done := runLocked(cmd)
	if err := <-started; err != nil {
		return nil, nil, fmt.Errorf("starting %s in a new user namespace: %w", selfExe, err)
	}
	return cmd, done, nil
}

// startWithSubIDs starts this binary unmapped in a new user namespace, where it waits (mapStage) while
// newuidmap and newgidmap map 0 to uid and gid and 1… to the subordinate ids, then executes itself
// again as uid 0. When the helpers fail the child exits and the error says why.
func startWithSubIDs(sub subIDs, uid, gid int, args, env []string) (*exec.Cmd, <-chan waited, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	defer w.Close()
	cmd := command(os.Args[0], args, env)
	cmd.Env = withEnv(cmd.Env, MarkerEnv, mapStage)
	cmd.SysProcAttr.UidMappings, cmd.SysProcAttr.GidMappings = nil, nil
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{r} // mapFD
	started, done := runLocked(cmd)
	err = <-started
	r.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("starting %s in a new user namespace: %w", selfExe, err)
	}
	if err := sub.writeMaps(cmd.Process.Pid, uid, gid); err != nil {
		w.Close() // the child sees end of file and exits
		<-done
		return nil, nil, err
	}
	if _, err := w.Write([]byte{1}); err != nil {
		<-done
		return nil, nil, fmt.Errorf("releasing rayctl in its user namespace: %w", err)
	}
	return cmd, done, nil
}

// command is an unstarted run of this binary as argv0 with args in the
// namespaces Reexec makes, with env plus MarkerEnv=1.
func command(argv0 string, args, env []string) *exec.Cmd {
	// The effective ids: the kernel lets an unprivileged process map only
	// those, and they are what owns the files the child creates.
	uid, gid := os.Geteuid(), os.Getegid()
	return &exec.Cmd{
		Path: selfPath(),
		Args: append([]string{argv0}, args...),
		Env:  withMarker(env),
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:  unix.CLONE_NEWUSER | unix.CLONE_NEWNS,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}},
			// An unprivileged user may map its own gid only with setgroups
			// denied: otherwise the child could drop a supplementary group
			// that a file's permissions deny access to.
			GidMappingsEnableSetgroups: false,
			// The child must not outlive the launcher, whatever kills it.
			Pdeathsig: unix.SIGKILL,
		},
	}
}

// withMarker is env with MarkerEnv=1 in place of any value it had.
func withMarker(env []string) []string { return withEnv(env, MarkerEnv, "1") }

// withEnv is env with key=value in place of any value key had.
func withEnv(env []string, key, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}

// waited is how a child ended: state is nil when waiting failed.
type waited struct {
	state *os.ProcessState
	err   error
}

// runLocked starts cmd and waits for it from a goroutine locked to its OS
// thread for good. The kernel sends Pdeathsig when the thread that forked
// the child exits, not the process: were the goroutine free to move, that
// thread could later run a goroutine that locks it and exits, and the Go
// runtime would end the thread, killing the child while the launcher lives.
// Locked, the thread ends only after the child has.
func runLocked(cmd *exec.Cmd) (started <-chan error, done <-chan waited) {
	s, d := make(chan error, 1), make(chan waited, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		if err := cmd.Start(); err != nil {
			s <- err
			return
		}
		s <- nil
		err := cmd.Wait()
		d <- waited{state: cmd.ProcessState, err: err}
	}()
	return s, d
}

// exitStatus is st as a shell reports it: the exit code, or 128+n when
// signal n killed the process.
func exitStatus(st *os.ProcessState) int {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}

// PrivateMounts makes every mount of this process's mount namespace
// private, recursively, so that no mount or unmount made here reaches another
// namespace and none made elsewhere (on the host) reaches this one. The
// child of Reexec calls it before it mounts anything. It refuses outside a
// namespace made by Reexec: in the host's mount namespace it would cut the
// propagation that the host's services rely on.
func PrivateMounts() error {
	if !Inside() {
		return errors.New("making mounts private: not inside a user namespace made by rayctl")
	}
	// Created with a user namespace, this mount namespace is "less
	// privileged" than the host's, so the kernel has already turned its
	// shared mounts into slaves: nothing made here propagates out. Private
	// also stops what the host mounts later from propagating in, so the
	// mounts rayctl sees are only the ones it expects.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	return nil
}

// MappedUID reports whether uid is mapped in this process's user namespace,
// that is whether a process here can setuid to it (given the capability).
// Inside a namespace made by Reexec only 0 is. When the map cannot be read
// (no /proc, or a kernel without user namespaces) it reports true: no user
// namespace restricts uids then.
func MappedUID(uid uint32) bool { return mapped("/proc/self/uid_map", uid) }

// MappedGID reports whether gid is mapped in this process's user namespace,
// as MappedUID does for uids. Inside a namespace made by Reexec only 0 is.
func MappedGID(gid uint32) bool { return mapped("/proc/self/gid_map", gid) }

// mapped reports whether the id map at path maps id (true when it cannot be
// read).
func mapped(path string, id uint32) bool {
	m, err := readIDMap(path)
	return err != nil || m.contains(id)
}

// SetgroupsAllowed reports whether this process's user namespace lets it
// call setgroups(2). Inside a namespace made by Reexec it does not, so a
// process started there with a syscall.Credential needs NoSetGroups (Go calls
// setgroups otherwise, and fails with EPERM); the process keeps the groups
// the launcher had. True when /proc/self/setgroups cannot be read (kernels
// before 3.19, no /proc).
func SetgroupsAllowed() bool {
	b, err := os.ReadFile("/proc/self/setgroups")
	return err != nil || strings.TrimSpace(string(b)) != "deny"
}

// idRange is one line of a uid_map or gid_map: size ids from inside (in the
// namespace) map to outside (in the parent namespace).
type idRange struct {
	inside, outside, size uint32
}

// idMap is a whole uid_map or gid_map.
type idMap []idRange

// initial reports whether m is the map of the initial user namespace, which
// maps every id to itself.
func (m idMap) initial() bool {
	return len(m) == 1 && m[0] == idRange{0, 0, 4294967295}
}

// contains reports whether id is mapped by m.
func (m idMap) contains(id uint32) bool {
	for _, r := range m {
		if id >= r.inside && uint64(id) < uint64(r.inside)+uint64(r.size) {
			return true
		}
	}
	return false
}

// readIDMap reads the id map at path.
func readIDMap(path string) (idMap, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseIDMap(b)
}

// parseIDMap parses the text of a uid_map or gid_map: one range a line, as
// three decimal numbers in columns.
func parseIDMap(b []byte) (idMap, error) {
	var m idMap
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) != 3 {
			return nil, fmt.Errorf("bad id map line %q", sc.Text())
		}
		var n [3]uint32
		for i, s := range f {
			v, err := strconv.ParseUint(s, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("bad id map line %q", sc.Text())
			}
			n[i] = uint32(v)
		}
		m = append(m, idRange{n[0], n[1], n[2]})
	}
	return m, sc.Err()
}

// selfPath is this binary's path, so that the child's command name (ps, pgrep) is the binary's own;
// /proc/self/exe, which works wherever the binary went, when the path no longer leads to it.
func selfPath() string {
	p, err := os.Executable()
	if err != nil {
		return selfExe
	}
	want, err1 := os.Stat(selfExe)
	got, err2 := os.Stat(p)
	if err1 != nil || err2 != nil || !os.SameFile(want, got) {
		return selfExe
	}
	return p
}
