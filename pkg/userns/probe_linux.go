package userns

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// probeArg0 is argv[0] of the check that Supported runs: this binary started
// in the namespaces Reexec makes, under this name.
const probeArg0 = "rayctl-userns-probe"

// probeTimeout bounds the check: a probe that hangs is reported, not waited
// for.
const probeTimeout = 15 * time.Second

// probeTag starts the line in which the probe says where it failed:
// "<probeTag><stage> <errno> <message>".
const probeTag = "rayctl-userns-probe: "

// The steps of the probe, in order; each is a stage name in its failure line.
const (
	stageUID    = "uid"    // it must be uid 0 inside
	stageMounts = "mounts" // PrivateMounts
	stageNetns  = "netns"  // unshare(CLONE_NEWNET)
	stageBridge = "bridge" // a bridge in that network namespace
)

// The probe runs from init() so that any binary linking this package
// (rayctl, this package's tests) can be it, before main or the tests start.
func init() {
	if len(os.Args) > 0 && os.Args[0] == probeArg0 {
		os.Exit(probe())
	}
}

// probe is the check's child: it does in order what rayctl will do in its
// user namespace, and on the first step that fails it prints the failure
// line to stderr and returns 1.
func probe() int {
	// A network namespace unshared belongs to the thread that unshares it,
	// and netlink talks from the thread it runs on.
	runtime.LockOSThread()
	fail := func(stage string, err error) int {
		var errno syscall.Errno
		errors.As(err, &errno)
		fmt.Fprintf(os.Stderr, "%s%s %d %v\n", probeTag, stage, int(errno), err)
		return 1
	}
	if uid := os.Getuid(); uid != 0 {
		return fail(stageUID, fmt.Errorf("uid %d, not 0", uid))
	}
	if err := PrivateMounts(); err != nil {
		return fail(stageMounts, err)
	}
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return fail(stageNetns, fmt.Errorf("unshare(CLONE_NEWNET): %w", err))
	}
	// A bridge because rayctl needs one, and because creating one is where
	// a kernel without the bridge driver, or an LSM that lets the namespace
	// be made but no capability be used in it, says no.
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "rayctl-probe0"}}
	if err := netlink.LinkAdd(br); err != nil {
		return fail(stageBridge, fmt.Errorf("creating a bridge: %w", err))
	}
	return 0
}

// check runs the probe and explains its outcome.
func check() error {
	facts := readFacts()
	if facts.noProc {
		// Everything below needs /proc: the probe is /proc/self/exe.
		return explain(facts, probeResult{})
	}
	cmd := command(probeArg0, nil, os.Environ())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	// Nothing but the probe writes to stderr; should it leave a process
	// holding it, Wait gives up on the copy after this.
	cmd.WaitDelay = time.Second
	started, done := runLocked(cmd)
	r := probeResult{}
	if err := <-started; err != nil {
		r.startErr = err
		return explain(facts, r)
	}
	var w waited
	select {
	case w = <-done:
	case <-time.After(probeTimeout):
		_ = cmd.Process.Kill()
		w = <-done
		r.timedOut = true
	}
	r.exitCode = -1
	if w.state != nil {
		r.exitCode = exitStatus(w.state)
	}
	r.parseStderr(stderr.Bytes())
	return explain(facts, r)
}

// probeResult is how the probe went.
type probeResult struct {
	// startErr is why the probe could not be started: creating the
	// namespaces, writing the id maps, or executing this binary.
	startErr error
	timedOut bool
	exitCode int
	// stage, errno and detail come from the probe's failure line; when it
	// printed none, stage is "" and detail is its last line of stderr.
	stage  string
	errno  syscall.Errno
	detail string
}

// parseStderr fills stage, errno and detail from what the probe printed.
func (r *probeResult) parseStderr(b []byte) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	var last string
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		last = line
		rest, ok := strings.CutPrefix(line, probeTag)
		if !ok {
			continue
		}
		f := strings.SplitN(rest, " ", 3)
		if len(f) != 3 {
			continue
		}
		n, err := strconv.Atoi(f[1])
		if err != nil {
			continue
		}
		r.stage, r.errno, r.detail = f[0], syscall.Errno(n), f[2]
		return
	}
	r.detail = last
}

// hostFacts are what the kernel's settings say about user namespaces, read
// to explain a failed probe.
type hostFacts struct {
	root   bool // the effective uid is 0
	noProc bool // /proc is not mounted
	// noUserNS: the kernel has no user namespaces (no /proc/self/ns/user).
	noUserNS bool
	// The sysctls, "" where the kernel has none: user.max_user_namespaces,
	// Debian's kernel.unprivileged_userns_clone and Ubuntu's (23.10 and
	// later) kernel.apparmor_restrict_unprivileged_userns.
	maxUserNS, unprivClone, apparmorRestrict string
	seccomp                                  bool // this process runs under a seccomp filter
	// exeUnreadable: this binary is not readable by its user, who may only
	// execute it.
	exeUnreadable bool
}

// readFacts reads this host's facts.
func readFacts() hostFacts {
	f := hostFacts{root: os.Geteuid() == 0}
	if _, err := os.Stat("/proc/self"); err != nil {
		f.noProc = true
		return f
	}
	f.exeUnreadable = unix.Access(selfExe, unix.R_OK) != nil
	_, err := os.Stat("/proc/self/ns/user")
	f.noUserNS = errors.Is(err, fs.ErrNotExist)
	f.maxUserNS = sysctl("user/max_user_namespaces")
	f.unprivClone = sysctl("kernel/unprivileged_userns_clone")
	f.apparmorRestrict = sysctl("kernel/apparmor_restrict_unprivileged_userns")
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "Seccomp:"); ok {
				f.seccomp = strings.TrimSpace(v) == "2" // SECCOMP_MODE_FILTER
			}
		}
	}
	return f
}

// sysctl is the value of /proc/sys/name, "" when it cannot be read.
func sysctl(name string) string {
	b, err := os.ReadFile("/proc/sys/" + name)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// explain turns the probe's outcome on a host with facts f into Supported's
// answer: nil when the probe succeeded, else one line saying why rayctl
// cannot use user namespaces here, naming the setting to change when one is
// known to be the cause.
func explain(f hostFacts, r probeResult) error {
	ok := !f.noProc && r.startErr == nil && !r.timedOut && r.exitCode == 0
	switch {
	case ok:
		return nil
	case f.noProc:
		return errors.New("/proc is not mounted, and user namespaces need it")
	case f.noUserNS:
		return errors.New("this kernel has no user namespaces (built without CONFIG_USER_NS)")
	case f.maxUserNS == "0":
		return errors.New("user.max_user_namespaces is 0")
	case r.timedOut:
		return fmt.Errorf("the check for user namespaces did not finish within %v", probeTimeout)
	case r.startErr != nil:
		return explainStart(f, r.startErr)
	}
	return explainProbe(f, r)
}

// explainStart explains why the probe could not be started.
func explainStart(f hostFacts, err error) error {
	var errno syscall.Errno
	errors.As(err, &errno)
	switch errno {
	case unix.ENOSPC, unix.EUSERS:
		// ENOSPC since Linux 4.9 for both limits, EUSERS before for nesting.
		return fmt.Errorf("no more user namespaces may be made: user.max_user_namespaces (%s) is reached, or 32 are nested", f.maxUserNS)
	case unix.EPERM, unix.EACCES:
		switch {
		case f.unprivClone == "0" && !f.root:
			return errors.New("unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone=0)")
		case f.apparmorRestrict == "1":
			return apparmorError(err)
		case f.seccomp:
			return fmt.Errorf("a seccomp filter forbids making user namespaces (is rayctl in a container?): %v", err)
		case f.exeUnreadable && !f.root:
			// Not readable, the binary makes its process non-dumpable, and
			// so its child's /proc/<pid>/uid_map belongs to root: the
			// launcher cannot write the child's id map.
			return fmt.Errorf("rayctl's binary is not readable by this user, so it cannot set up a user namespace (make it readable: chmod a+r): %v", err)
		}
		return fmt.Errorf("making a user namespace is not permitted (in a chroot, or denied by a security module?): %v", err)
	case unix.EINVAL:
		return fmt.Errorf("this kernel does not support user namespaces: %v", err)
	}
	return fmt.Errorf("cannot start rayctl in a new user namespace: %v", err)
}

// explainProbe explains a probe that started but failed inside.
func explainProbe(f hostFacts, r probeResult) error {
	what := map[string]string{
		stageMounts: "making mounts private",
		stageNetns:  "making a network namespace",
		stageBridge: "creating a bridge",
	}[r.stage]
	switch {
	case r.stage == stageUID:
		return fmt.Errorf("in its user namespace rayctl is not root: %s", r.detail)
	case what == "":
		detail := r.detail
		if detail == "" {
			detail = "it printed nothing"
		}
		return fmt.Errorf("the check for user namespaces failed (exit status %d): %s", r.exitCode, detail)
	case r.errno == unix.EPERM || r.errno == unix.EACCES:
		if f.apparmorRestrict == "1" {
			return apparmorError(errors.New(r.detail))
		}
		return fmt.Errorf("a user namespace can be made, but %s in it is not permitted (denied by a security module?): %s", what, r.detail)
	case r.stage == stageBridge && r.errno == unix.EOPNOTSUPP:
		return fmt.Errorf("this kernel cannot create a bridge (is the bridge module available? as root: modprobe bridge): %s", r.detail)
	}
	return fmt.Errorf("a user namespace can be made, but %s in it failed: %s", what, r.detail)
}

// apparmorError is the answer on Ubuntu 23.10 and later, whose AppArmor lets
// an unconfined program make a user namespace but holds back every
// capability in it.
func apparmorError(err error) error {
	return fmt.Errorf("AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1): rayctl needs an AppArmor profile allowing userns, or that sysctl set to 0 (%v)", err)
}
