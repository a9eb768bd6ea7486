package userns

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Subordinate ids. An ordinary user may map only its own uid and gid into a user namespace it makes;
// the ranges an administrator gave it in /etc/subuid and /etc/subgid can be mapped too, but only by the
// setuid helpers newuidmap and newgidmap (Debian's uidmap package), run on the new namespace's first
// process from outside. Reexec maps them when it can, after 0 (the user itself): ids 1… inside are the
// user's subordinate ids outside, so that the files of an image that belong to other users (a home
// owned by uid 1000) can be unpacked and a container can run as such a user, owning nothing of the
// user's. That needs the namespace's first process to wait, unmapped and without capabilities, until
// the maps are written, and then to execute this binary again, which gives it every capability over
// the namespace as uid 0 (mapStage is that wait).

// mapStage is MarkerEnv's value while the first process of a namespace Reexec makes waits for its maps.
const mapStage = "map"

// ParentEnv carries the launcher's pid to the process that runs after the maps are written: executing
// with capabilities it did not hold clears the parent-death signal Reexec set, so that process sets it
// again and checks that the launcher still lives.
const parentEnv = "RAYCTL_USERNS_PARENT"

// MapNoteEnv, when set in the namespace, says why only the user's own ids are mapped there (no
// subordinate ids), for the messages of what needs them (containerd's images).
const MapNoteEnv = "RAYCTL_USERNS_IDS"

// mapFD is the descriptor the waiting process reads: one byte once its maps are written, end of file
// if they could not be.
const mapFD = 3

// The waiting stage runs from init(), before main, as the probe does.
func init() {
	switch os.Getenv(MarkerEnv) {
	case mapStage:
		os.Exit(waitForMaps())
	case "1":
		if ppid := os.Getenv(parentEnv); ppid != "" {
			rearmParentDeath(ppid)
		}
	}
}

// waitForMaps is the first process of a namespace Reexec makes with subordinate ids: it waits for the
// launcher to write its maps, then executes this binary again as uid 0 with MarkerEnv=1. It returns
// only on failure, with the exit code.
func waitForMaps() int {
	f := os.NewFile(mapFD, "rayctl-userns-map")
	var b [1]byte
	n, _ := f.Read(b[:])
	f.Close()
	if n != 1 {
		return 1 // the launcher could not map the ids, and says so
	}
	if os.Getuid() != 0 {
		fmt.Fprintf(os.Stderr, "rayctl: the user namespace's maps do not make this process uid 0 (uid %d)\n", os.Getuid())
		return 1
	}
	env := withMarker(os.Environ())
	env = append(env, parentEnv+"="+strconv.Itoa(os.Getppid()))
	err := syscall.Exec(selfExe, os.Args, env)
	fmt.Fprintf(os.Stderr, "rayctl: executing %s in its user namespace: %v\n", selfExe, err)
	return 1
}

// rearmParentDeath sets the parent-death signal again after the capability-gaining exec cleared it,
// and exits at once if the launcher (pid ppid) died before that.
func rearmParentDeath(ppid string) {
	_ = os.Unsetenv(parentEnv)
	want, err := strconv.Atoi(ppid)
	if err != nil {
		return
	}
	_ = unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0)
	if os.Getppid() != want {
		os.Exit(1)
	}
}

// subIDs is what Reexec maps beyond 0: size ids from 1 inside to start outside, for uids and gids.
type subIDs struct {
	uidStart, uidSize uint32
	gidStart, gidSize uint32
	newuidmap         string
	newgidmap         string
}

// findSubIDs finds the helpers and the user's subordinate ranges (the first of each file's lines for
// the user, by name or uid). The error says what is missing, in words a user can act on.
func findSubIDs(uid, gid int) (subIDs, error) {
	var s subIDs
	var err error
	if s.newuidmap, err = exec.LookPath("newuidmap"); err != nil {
		return s, errors.New("newuidmap is not installed (on Debian and Ubuntu: apt-get install uidmap)")
	}
	if s.newgidmap, err = exec.LookPath("newgidmap"); err != nil {
		return s, errors.New("newgidmap is not installed (on Debian and Ubuntu: apt-get install uidmap)")
	}
	keys, name := accountKeys(uid)
	var ok bool
	if s.uidStart, s.uidSize, ok = subRange("/etc/subuid", keys); !ok {
		return s, fmt.Errorf("%s has no subordinate uids in /etc/subuid (sudo usermod --add-subuids 100000-165535 %s)", name, name)
	}
	if s.gidStart, s.gidSize, ok = subRange("/etc/subgid", keys); !ok {
		return s, fmt.Errorf("%s has no subordinate gids in /etc/subgid (sudo usermod --add-subgids 100000-165535 %s)", name, name)
	}
	return s, nil
}

// accountKeys are the names uid goes by in /etc/subuid and /etc/subgid (its number, and its account's
// name when it has one), and the one to show.
func accountKeys(uid int) (keys []string, name string) {
	name = strconv.Itoa(uid)
	keys = []string{name}
	if u, err := user.LookupId(name); err == nil {
		keys, name = append(keys, u.Username), u.Username
	}
	return keys, name
}

// SubordinateUIDs is the first of uid's subordinate uids (/etc/subuid, under its account's name or its
// number) and how many there are; ok is false when it has none.
func SubordinateUIDs(uid int) (first, count uint32, ok bool) {
	keys, _ := accountKeys(uid)
	return subRange("/etc/subuid", keys)
}

// subRange reads the first range of path ("user:start:count" lines) whose user is one of keys.
func subRange(path string, keys []string) (start, size uint32, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(strings.TrimSpace(sc.Text()), ":")
		if len(fields) != 3 {
			continue
		}
		for _, k := range keys {
			if fields[0] != k {
				continue
			}
			st, err1 := strconv.ParseUint(fields[1], 10, 32)
			n, err2 := strconv.ParseUint(fields[2], 10, 32)
			if err1 == nil && err2 == nil && n > 0 {
				return uint32(st), uint32(n), true
			}
		}
	}
	return 0, 0, false
}

// writeMaps runs newuidmap and newgidmap on pid: 0 is the user's own id, 1… its subordinate ids.
func (s subIDs) writeMaps(pid, uid, gid int) error {
	p := strconv.Itoa(pid)
	run := func(helper string, own int, start, size uint32) error {
		out, err := exec.Command(helper, p, "0", strconv.Itoa(own), "1", "1", strconv.FormatUint(uint64(start), 10),
			strconv.FormatUint(uint64(size), 10)).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %v: %s", helper, err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	if err := run(s.newuidmap, uid, s.uidStart, s.uidSize); err != nil {
		return err
	}
	return run(s.newgidmap, gid, s.gidStart, s.gidSize)
}

// SubordinateIDs reports whether this process's user namespace maps ids beyond 0 (Reexec mapped the
// user's subordinate ids); when it does not, why says why, from the launcher, e.g. "newuidmap is not
// installed (…)". Outside a namespace Reexec made it reports true.
func SubordinateIDs() (ok bool, why string) {
	if !Inside() {
		return true, ""
	}
	m, err := readIDMap("/proc/self/uid_map")
	if err == nil && m.contains(1) {
		return true, ""
	}
	why = os.Getenv(MapNoteEnv)
	if why == "" {
		why = "only the user's own uid and gid are mapped"
	}
	return false, why
}
