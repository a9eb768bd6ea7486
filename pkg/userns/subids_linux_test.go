package userns

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// subIDsReport is what the child of scenario subids saw.
type subIDsReport struct {
	UIDMap, GIDMap string
	Subordinate    bool
	Why            string
	// PdeathSig is the child's parent-death signal after the exec that gave it its capabilities.
	PdeathSig int
	// AsUID1000 is what `id -u` printed when run as uid 1000 there, or why it could not run.
	AsUID1000 string
}

func init() {
	// subids: the child of Reexec reports its maps and runs a program as uid 1000.
	scenarios["subids"] = func(string) int {
		r := subIDsReport{}
		b, _ := os.ReadFile("/proc/self/uid_map")
		r.UIDMap = strings.Join(strings.Fields(string(b)), " ")
		b, _ = os.ReadFile("/proc/self/gid_map")
		r.GIDMap = strings.Join(strings.Fields(string(b)), " ")
		r.Subordinate, r.Why = SubordinateIDs()
		var sig int32
		_ = unix.Prctl(unix.PR_GET_PDEATHSIG, uintptr(unsafe.Pointer(&sig)), 0, 0, 0)
		r.PdeathSig = int(sig)
		cmd := exec.Command("/usr/bin/id", "-u")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1000, Gid: 1000}}
		out, err := cmd.CombinedOutput()
		r.AsUID1000 = strings.TrimSpace(string(out))
		if err != nil {
			r.AsUID1000 = err.Error() + ": " + r.AsUID1000
		}
		return printJSON(r)
	}
}

// subIDsUser is an account of this machine with subordinate uids and gids (as useradd gives new users),
// its uid, gid and first subordinate uid; the test is skipped where there is none or newuidmap is
// missing, and fails in CI, whose .ci/run makes one.
func subIDsUser(t *testing.T) (uid, gid int, first string) {
	t.Helper()
	if _, err := exec.LookPath("newuidmap"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("CI installs uidmap (.ci/run)")
		}
		t.Skip("newuidmap is not installed (apt-get install uidmap)")
	}
	f, err := os.Open("/etc/subuid")
	if err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Split(sc.Text(), ":")
			if len(fields) != 3 {
				continue
			}
			u, err := user.Lookup(fields[0])
			if err != nil || u.Uid == "0" {
				continue
			}
			uid, _ = strconv.Atoi(u.Uid)
			gid, _ = strconv.Atoi(u.Gid)
			return uid, gid, fields[1]
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("CI gives uid 4242 subordinate ids (.ci/run)")
	}
	t.Skip("no account here has subordinate ids")
	return 0, 0, ""
}

// TestReexecSubordinateIDsAsUser: for a user with subordinate ids, Reexec maps them from 1 beside 0,
// the child holds its capabilities (a program runs there as uid 1000) and keeps dying with its launcher.
func TestReexecSubordinateIDsAsUser(t *testing.T) {
	bin := nobodyBinary(t)
	skipUnlessUserns(t)
	uid, gid, first := subIDsUser(t)
	cmd := asNobody(bin, "launch:subids", "/")
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	out, err := cmd.Output()
	if code := exitCodeOf(t, cmd, err); code != 0 {
		t.Fatalf("the launcher exited %d: %s", code, out)
	}
	var r subIDsReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("the child's report %q: %v", out, err)
	}
	if want := "0 " + strconv.Itoa(uid) + " 1 1 " + first + " "; !strings.HasPrefix(r.UIDMap, want) {
		t.Errorf("uid_map %q, want it to begin %q", r.UIDMap, want)
	}
	if !r.Subordinate || r.Why != "" {
		t.Errorf("SubordinateIDs = %v %q, want true", r.Subordinate, r.Why)
	}
	if r.AsUID1000 != "1000" {
		t.Errorf("a program run as uid 1000 in the namespace printed %q", r.AsUID1000)
	}
	if r.PdeathSig != int(unix.SIGKILL) {
		t.Errorf("the child's parent-death signal is %d, want SIGKILL (%d)", r.PdeathSig, unix.SIGKILL)
	}
}

// TestReexecWithoutSubordinateIDsAsNobody: for a user without subordinate ids, only its own ids are
// mapped and SubordinateIDs says why.
func TestReexecWithoutSubordinateIDsAsNobody(t *testing.T) {
	bin := nobodyBinary(t)
	skipUnlessUserns(t)
	cmd := asNobody(bin, "launch:subids", "/")
	out, err := cmd.Output()
	if code := exitCodeOf(t, cmd, err); code != 0 {
		t.Fatalf("the launcher exited %d: %s", code, out)
	}
	var r subIDsReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("the child's report %q: %v", out, err)
	}
	if r.UIDMap != "0 65534 1" || r.Subordinate {
		t.Errorf("uid_map %q (subordinate %v), want 0 alone", r.UIDMap, r.Subordinate)
	}
	if !strings.Contains(r.Why, "subordinate") && !strings.Contains(r.Why, "newuidmap") {
		t.Errorf("SubordinateIDs says %q, want the reason (no subordinate ids, or newuidmap missing)", r.Why)
	}
	if !strings.HasPrefix(r.AsUID1000, "fork/exec") && !strings.Contains(r.AsUID1000, "invalid argument") {
		t.Errorf("a program run as uid 1000 there printed %q, want a refusal", r.AsUID1000)
	}
}
