package process

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestPodUserIsStableUnprivilegedAndNoHostUsers(t *testing.T) {
	dir := t.TempDir()
	u := PodUser(dir)
	if u != PodUser(dir) || u != PodUser(dir+"/.") {
		t.Errorf("PodUser(%s) changes: %v %v", dir, u, PodUser(dir))
	}
	if u.UID != u.GID || u.UID < podUIDBase || u.UID >= podUIDBase+podUIDRange {
		t.Errorf("PodUser = %+v, not in the pod range", u)
	}
	if other := PodUser(filepath.Join(dir, "other")); other == u {
		t.Errorf("two data dirs share user %v", u)
	}
	used := usedIDs()
	if used(u.UID) {
		t.Errorf("PodUser %v is a host user's or group's", u)
	}
	for _, f := range []string{"/etc/passwd", "/etc/group"} {
		for _, fields := range colonLines(f) {
			if fieldAt(fields, 2) == strconv.FormatUint(uint64(u.UID), 10) {
				t.Errorf("%s uses the pod user's id: %v", f, fields)
			}
		}
	}
}

func TestPickIDSkipsUsedIDs(t *testing.T) {
	first := pickID("/data", func(uint32) bool { return false })
	taken := map[uint32]bool{first: true, first + 1: true}
	if got := pickID("/data", func(id uint32) bool { return taken[id] }); got != first+2 {
		t.Errorf("pickID past %d and %d = %d", first, first+1, got)
	}
	// Past the top of the range it wraps to the bottom.
	if first != podUIDBase {
		if got := pickID("/data", func(id uint32) bool { return id >= first }); got != podUIDBase {
			t.Errorf("pickID did not wrap: %d", got)
		}
	}
}

func TestAccountFilesNameThePodUser(t *testing.T) {
	passwd, group := accountFiles(User{UID: 1_000_000_123, GID: 1_000_000_123}, "root", "/home/ray")
	lines := strings.Split(strings.TrimSpace(string(passwd)), "\n")
	if want := "root:x:1000000123:1000000123:rayctl pod user:/home/ray:/bin/sh"; lines[len(lines)-1] != want {
		t.Errorf("last passwd line %q, want %q", lines[len(lines)-1], want)
	}
	for _, l := range lines[:len(lines)-1] {
		if strings.HasPrefix(l, "root:") {
			t.Errorf("the host's entry for the name stayed: %q", l)
		}
	}
	if !strings.HasSuffix(string(group), "\nroot:x:1000000123:\n") || strings.Count(string(group), "\nroot:") != 1 {
		t.Errorf("group:\n%s", group)
	}
	if _, err := os.Stat("/etc/passwd"); err == nil && len(lines) < 2 {
		t.Errorf("the host's users are missing:\n%s", passwd)
	}
}

func TestContainerUser(t *testing.T) {
	all := idMaps{uids: idMap{{0, 1 << 32}}, gids: idMap{{0, 1 << 32}}}
	rootless := idMaps{uids: parseIDMap("0 1000 1\n"), gids: parseIDMap("0 1000 1\n")}
	pod := &User{UID: 1_000_000_001, GID: 1_000_000_001}
	show := func(p *int64) string {
		if p == nil {
			return "-"
		}
		return strconv.FormatInt(*p, 10)
	}
	for _, tc := range []struct {
		name     string
		runAs    *User
		maps     idMaps
		uid, gid *int64
		want     string
		note     bool
	}{
		{"RunAs over root", pod, all, int64p(0), int64p(0), "1000000001:1000000001", false},
		{"RunAs over a host user", pod, all, int64p(1000), nil, "1000000001:1000000001", false},
		{"RunAs when nothing is asked", pod, all, nil, nil, "1000000001:1000000001", false},
		{"the pod's own", nil, all, int64p(1000), int64p(100), "1000:100", false},
		{"nothing asked", nil, all, nil, nil, "-:-", false},
		{"rootless, unmapped", nil, rootless, int64p(1000), int64p(1000), "0:0", true},
		{"rootless, root", nil, rootless, int64p(0), nil, "0:-", false},
		{"rootless, unmapped group", nil, rootless, int64p(0), int64p(5), "0:0", true},
	} {
		uid, gid, note := containerUser(tc.runAs, tc.maps, tc.uid, tc.gid)
		if got := show(uid) + ":" + show(gid); got != tc.want || (note != "") != tc.note {
			t.Errorf("%s: %s, note %q; want %s, a note: %v", tc.name, got, note, tc.want, tc.note)
		}
	}
}

func TestReadIDMap(t *testing.T) {
	m := parseIDMap("         0       1000          1\n         1     100000      65536\n")
	for id, want := range map[uint32]bool{0: true, 1: true, 65536: true, 65537: false, 1000: true, 4294967295: false} {
		if m.has(id) != want {
			t.Errorf("has(%d) = %v", id, !want)
		}
	}
	if m := readIDMap(filepath.Join(t.TempDir(), "none")); !m.has(0) || !m.has(4294967294) {
		t.Errorf("no map file should map everything: %v", m)
	}
}

func int64p(n int64) *int64 { return &n }
