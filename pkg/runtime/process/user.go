package process

import (
	"bufio"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// User is a numeric user and group a container's processes run as.
type User struct {
	UID, GID uint32
}

// The range PodUser picks from: far above the ids distributions give people
// (1000…60000) and the subordinate ranges tools such as useradd hand out by
// default (100000 onwards, 65536 each), below 2^31 so no tool reads it as negative.
const (
	podUIDBase  = 1_000_000_000
	podUIDRange = 100_000_000
)

// PodUser is the unprivileged user rayctl's containers run as when rayctl is
// real root (Options.RunAs): a uid, and a gid equal to it, derived from
// dataDir's absolute path. It is never the id of a host user or group: ids
// that /etc/passwd, /etc/group, /etc/subuid or /etc/subgid use are skipped,
// since a container running as a host user could write that user's files. It
// is the same across restarts of the same instance, so what a pod wrote in a
// volume stays the pod's, and differs between instances (data dirs), so two
// rayctls on one host do not share a user.
func PodUser(dataDir string) User {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		abs = dataDir
	}
	id := pickID(abs, usedIDs())
	return User{UID: id, GID: id}
}

// pickID hashes key into the pod range and walks on past ids in used.
func pickID(key string, used func(uint32) bool) uint32 {
	h := fnv.New64a()
	h.Write([]byte(key))
	off := h.Sum64() % podUIDRange
	for i := uint64(0); i < podUIDRange; i++ {
		id := uint32(podUIDBase + (off+i)%podUIDRange)
		if !used(id) {
			return id
		}
	}
	return uint32(podUIDBase + off) // unreachable: the files would need 10^8 entries
}

// usedIDs reports whether an id is a host user's or group's (as either: the
// pod's uid and gid are one number), or in someone's subordinate ranges.
func usedIDs() func(uint32) bool {
	ids := map[uint32]bool{}
	for _, f := range []string{"/etc/passwd", "/etc/group"} {
		for _, fields := range colonLines(f) {
			if len(fields) > 2 {
				if id, err := strconv.ParseUint(fields[2], 10, 32); err == nil {
					ids[uint32(id)] = true
				}
			}
		}
	}
	var ranges [][2]uint64
	for _, f := range []string{"/etc/subuid", "/etc/subgid"} {
		for _, fields := range colonLines(f) {
			start, err1 := strconv.ParseUint(fieldAt(fields, 1), 10, 32)
			n, err2 := strconv.ParseUint(fieldAt(fields, 2), 10, 32)
			if err1 == nil && err2 == nil {
				ranges = append(ranges, [2]uint64{start, start + n})
			}
		}
	}
	return func(id uint32) bool {
		for _, r := range ranges {
			if uint64(id) >= r[0] && uint64(id) < r[1] {
				return true
			}
		}
		return ids[id]
	}
}

// colonLines are the colon-separated fields of each line of a passwd-style
// file; a missing file has none.
func colonLines(path string) [][]string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := sc.Text(); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, strings.Split(line, ":"))
		}
	}
	return out
}

func fieldAt(fields []string, i int) string {
	if i < len(fields) {
		return fields[i]
	}
	return ""
}

// Names the pod user has in its container's /etc/passwd and /etc/group.
const (
	rayUserName = "ray" // Ray's images' user, as in rayproject/ray
	podUserName = "rayctl-pod"
)

// accountFiles are the /etc/passwd and /etc/group a container running as u
// sees: the host's, less any entry for u's name or ids, plus one naming u
// (name, home), so that whoami, Python's pwd and getpass, and Ray (which
// looks its user up) work as in an image that has the user.
func accountFiles(u User, name, home string) (passwd, group []byte) {
	uid, gid := strconv.FormatUint(uint64(u.UID), 10), strconv.FormatUint(uint64(u.GID), 10)
	passwd = withEntry("/etc/passwd", name, uid, name+":x:"+uid+":"+gid+":rayctl pod user:"+home+":/bin/sh")
	group = withEntry("/etc/group", name, gid, name+":x:"+gid+":")
	return passwd, group
}

// withEntry is the host file at path without the lines for name or id
// (fields 1 and 3), and with entry at the end.
func withEntry(path, name, id, entry string) []byte {
	var b strings.Builder
	for _, fields := range colonLines(path) {
		if fields[0] == name || fieldAt(fields, 2) == id {
			continue
		}
		b.WriteString(strings.Join(fields, ":") + "\n")
	}
	b.WriteString(entry + "\n")
	return []byte(b.String())
}
