package process

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/rayctl/rayctl/pkg/userns"
)

// idMap is what the user namespace rayctl runs in maps of one kind of id
// (/proc/self/uid_map or gid_map): ranges [first, first+count) of ids inside.
// Rootless, rayctl runs in a user namespace of its own that maps only 0 (the
// user who started it), so no other id can be given to a process there.
type idMap [][2]uint64

// readIDMap reads a uid_map or gid_map. Where there is none (not Linux) every
// id counts as mapped.
func readIDMap(path string) idMap {
	b, err := os.ReadFile(path)
	if err != nil {
		return idMap{{0, 1 << 32}}
	}
	return parseIDMap(string(b))
}

// parseIDMap parses a uid_map's or gid_map's lines: "inside outside count".
func parseIDMap(text string) idMap {
	var m idMap
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		first, err1 := strconv.ParseUint(f[0], 10, 32)
		n, err2 := strconv.ParseUint(f[2], 10, 64)
		if err1 == nil && err2 == nil {
			m = append(m, [2]uint64{first, first + n})
		}
	}
	return m
}

// has reports whether id is mapped.
func (m idMap) has(id uint32) bool {
	for _, r := range m {
		if uint64(id) >= r[0] && uint64(id) < r[1] {
			return true
		}
	}
	return false
}

// idMaps are the current user namespace's uid and gid maps.
type idMaps struct{ uids, gids idMap }

// currentIDMaps are the ids a container may run as: those the current user namespace maps, save
// inside rayctl's own (rootless), where only 0 is. The user's subordinate ids that namespace may map
// too are for containerd's images: a host process running as one could not reach its home and Ray's
// files under the user's owner-only data dir.
func currentIDMaps() idMaps {
	if userns.Inside() {
		return idMaps{uids: idMap{{0, 1}}, gids: idMap{{0, 1}}}
	}
	return idMaps{uids: readIDMap("/proc/self/uid_map"), gids: readIDMap("/proc/self/gid_map")}
}

// containerUser is the uid and gid a container runs as (nil: rayctl's own, uid 0
// when rayctl is root) and a note for its status when that is not what it asked.
// With runAs set (rayctl is real root) it is always runAs, whatever the pod asks:
// runAsUser 0, or the uid of a host user, must not become that host user.
// Otherwise it is the pod's runAsUser and runAsGroup, save those rayctl's user
// namespace does not map (rootless), which become 0 there: the user who started
// rayctl, the only user such a rayctl can run anything as.
func containerUser(runAs *User, maps idMaps, uid, gid *int64) (outUID, outGID *int64, note string) {
	if runAs != nil {
		u, g := int64(runAs.UID), int64(runAs.GID)
		return &u, &g, ""
	}
	var notes []string
	keep := func(kind string, id *int64, m idMap) *int64 {
		if id == nil || (*id >= 0 && *id <= 0xFFFFFFFE && m.has(uint32(*id))) {
			return id
		}
		notes = append(notes, fmt.Sprintf("%s %d", kind, *id))
		zero := int64(0)
		return &zero
	}
	outUID, outGID = keep("runAsUser", uid, maps.uids), keep("runAsGroup", gid, maps.gids)
	if len(notes) > 0 {
		note = strings.Join(notes, " and ") + " cannot be used: rayctl's user namespace does not map it (rootless, it maps only 0, the user who started rayctl), so the container runs as 0 there"
	}
	return outUID, outGID, note
}

// credential is the syscall form of uid:gid. Supplementary groups are dropped
// (root's must not stay with the pod's user), save where the user namespace
// forbids setgroups (rootless): there they are the groups of the user who
// started rayctl, which no process in it can shed.
func credential(uid, gid uint32) *syscall.Credential {
	c := &syscall.Credential{Uid: uid, Gid: gid}
	if b, err := os.ReadFile("/proc/self/setgroups"); err == nil && strings.TrimSpace(string(b)) == "deny" {
		c.NoSetGroups = true
	}
	return c
}
