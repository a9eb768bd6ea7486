package userns

import (
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// startErr is how os/exec reports a failed start: errno wrapped in a
// PathError.
func startErr(errno unix.Errno) error {
	return &fs.PathError{Op: "fork/exec", Path: selfExe, Err: errno}
}

// probeFailed is the result of a probe that printed line and exited 1.
func probeFailed(line string) probeResult {
	r := probeResult{exitCode: 1}
	r.parseStderr([]byte("some noise\n" + line + "\n"))
	return r
}

func TestExplain(t *testing.T) {
	user := hostFacts{maxUserNS: "63000"}
	with := func(f hostFacts, change func(*hostFacts)) hostFacts {
		change(&f)
		return f
	}
	netnsEPERM := probeFailed(fmt.Sprintf("%snetns %d unshare(CLONE_NEWNET): %v", probeTag, int(unix.EPERM), unix.EPERM))
	for _, c := range []struct {
		name string
		f    hostFacts
		r    probeResult
		want string // the error's start; "" for nil
	}{
		{"ok", user, probeResult{}, ""},
		{"no /proc", hostFacts{noProc: true}, probeResult{}, "/proc is not mounted"},
		{"no CONFIG_USER_NS", with(user, func(f *hostFacts) { f.noUserNS = true }), probeResult{startErr: startErr(unix.EINVAL)},
			"this kernel has no user namespaces (built without CONFIG_USER_NS)"},
		{"max_user_namespaces 0", with(user, func(f *hostFacts) { f.maxUserNS = "0" }), probeResult{startErr: startErr(unix.ENOSPC)},
			"user.max_user_namespaces is 0"},
		{"limit reached", user, probeResult{startErr: startErr(unix.ENOSPC)},
			"no more user namespaces may be made: user.max_user_namespaces (63000) is reached"},
		{"Debian's switch", with(user, func(f *hostFacts) { f.unprivClone = "0" }), probeResult{startErr: startErr(unix.EPERM)},
			"unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone=0)"},
		{"Debian's switch binds no root", with(user, func(f *hostFacts) { f.unprivClone, f.root = "0", true }), probeResult{startErr: startErr(unix.EPERM)},
			"making a user namespace is not permitted"},
		{"AppArmor refuses the namespace", with(user, func(f *hostFacts) { f.apparmorRestrict = "1" }), probeResult{startErr: startErr(unix.EPERM)},
			"AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1)"},
		{"AppArmor denies capabilities in it", with(user, func(f *hostFacts) { f.apparmorRestrict = "1" }), netnsEPERM,
			"AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1)"},
		{"AppArmor off", with(user, func(f *hostFacts) { f.apparmorRestrict = "0" }), netnsEPERM,
			"a user namespace can be made, but making a network namespace in it is not permitted"},
		{"seccomp", with(user, func(f *hostFacts) { f.seccomp = true }), probeResult{startErr: startErr(unix.EPERM)},
			"a seccomp filter forbids making user namespaces"},
		{"binary unreadable", with(user, func(f *hostFacts) { f.exeUnreadable = true }), probeResult{startErr: startErr(unix.EACCES)},
			"rayctl's binary is not readable by this user, so it cannot set up a user namespace (make it readable: chmod a+r)"},
		{"old kernel", user, probeResult{startErr: startErr(unix.EINVAL)}, "this kernel does not support user namespaces"},
		{"binary gone", user, probeResult{startErr: startErr(unix.ENOENT)}, "cannot start rayctl in a new user namespace"},
		{"timeout", user, probeResult{timedOut: true, exitCode: 137}, "the check for user namespaces did not finish within 15s"},
		{"no bridge", user, probeFailed(fmt.Sprintf("%sbridge %d creating a bridge: %v", probeTag, int(unix.EOPNOTSUPP), unix.EOPNOTSUPP)),
			"this kernel cannot create a bridge (is the bridge module available? as root: modprobe bridge): creating a bridge: operation not supported"},
		{"bridge fails otherwise", user, probeFailed(fmt.Sprintf("%sbridge %d creating a bridge: %v", probeTag, int(unix.ENOMEM), unix.ENOMEM)),
			"a user namespace can be made, but creating a bridge in it failed: creating a bridge: cannot allocate memory"},
		{"mounts denied", user, probeFailed(fmt.Sprintf("%smounts %d making mounts private: %v", probeTag, int(unix.EPERM), unix.EPERM)),
			"a user namespace can be made, but making mounts private in it is not permitted"},
		{"not root inside", user, probeFailed(probeTag + "uid 0 uid 65534, not 0"), "in its user namespace rayctl is not root: uid 65534, not 0"},
		{"crash", user, probeResult{exitCode: 2, detail: "panic: boom"}, "the check for user namespaces failed (exit status 2): panic: boom"},
		{"silent", user, probeResult{exitCode: 1}, "the check for user namespaces failed (exit status 1): it printed nothing"},
	} {
		err := explain(c.f, c.r)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want nil", c.name, err)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)):
			t.Errorf("%s: %v, want it to start %q", c.name, err, c.want)
		case err != nil && strings.Contains(err.Error(), "\n"):
			t.Errorf("%s: %q is more than one line", c.name, err)
		}
	}
}

func TestParseStderr(t *testing.T) {
	r := probeFailed(probeTag + "netns 1 unshare(CLONE_NEWNET): operation not permitted")
	if r.stage != stageNetns || r.errno != unix.EPERM || r.detail != "unshare(CLONE_NEWNET): operation not permitted" {
		t.Errorf("parsed %+v", r)
	}
	var other probeResult
	other.parseStderr([]byte("fatal error: out of memory\n\ngoroutine 1 [running]:\n"))
	if other.stage != "" || other.detail != "goroutine 1 [running]:" {
		t.Errorf("without a failure line: %+v", other)
	}
}

func TestIDMap(t *testing.T) {
	initial, err := parseIDMap([]byte("         0          0 4294967295\n"))
	if err != nil || !initial.initial() || !initial.contains(0) || !initial.contains(4294967294) {
		t.Errorf("the initial map: %v %v", initial, err)
	}
	reexec, err := parseIDMap([]byte("         0       1000          1\n"))
	if err != nil || reexec.initial() || !reexec.contains(0) || reexec.contains(1) || reexec.contains(1000) {
		t.Errorf("Reexec's map: %v %v", reexec, err)
	}
	// A rootless container's: root and a subordinate range.
	sub, err := parseIDMap([]byte("0 1000 1\n1 100000 65536\n"))
	if err != nil || sub.initial() || !sub.contains(65536) || sub.contains(65537) {
		t.Errorf("a map of two ranges: %v %v", sub, err)
	}
	for _, bad := range []string{"0 0\n", "0 0 x\n", "0 0 4294967296\n"} {
		if m, err := parseIDMap([]byte(bad)); err == nil {
			t.Errorf("parseIDMap(%q) = %v, want an error", bad, m)
		}
	}
	// Without the marker, whatever the map.
	if os.Getenv(MarkerEnv) == "" && Inside() {
		t.Error("Inside() without the marker = true")
	}
}
