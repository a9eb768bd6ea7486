package selfpages

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Drop unmaps the pages of rayctl's own binary that the process holds mapped but has not
// written (its code and read-only data), and returns how many bytes of mappings it advised. The pages stay
// in the page cache: what the process touches again comes back with a minor fault, and RSS counts only
// that. A mapping with anonymous pages (written copies, as relocated read-only data of a dynamically linked
// binary would be) is left alone: dropping those would lose the writes.
func Drop() (int64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	type mapping struct {
		start, end uint64
		anon       bool
	}
	var maps []mapping
	var cur *mapping
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			cur = nil
			if len(f) < 6 || strings.Join(f[5:], " ") != exe || strings.Contains(f[1], "w") {
				continue
			}
			lo, hi, _ := strings.Cut(f[0], "-")
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 != nil || err2 != nil {
				continue
			}
			maps = append(maps, mapping{start: start, end: end})
			cur = &maps[len(maps)-1]
			continue
		}
		if cur != nil && len(f) >= 2 && f[0] == "Anonymous:" && f[1] != "0" {
			cur.anon = true
		}
	}
	var advised int64
	for _, m := range maps {
		if m.anon {
			continue
		}
		// The raw system calls: the range is the process's own mapping, not memory Go allocated. First,
		// no huge pages: where the page cache holds the binary in 2 MiB folios (as it may right after the
		// binary was written), the kernel maps each touch as a whole 2 MiB page, and the few pages an idle
		// process runs would count as tens of MB again. Not every kernel has huge pages: an error only
		// leaves them possible.
		_, _, _ = unix.Syscall(unix.SYS_MADVISE, uintptr(m.start), uintptr(m.end-m.start), unix.MADV_NOHUGEPAGE)
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(m.start), uintptr(m.end-m.start), unix.MADV_DONTNEED); errno != 0 {
			return advised, errno
		}
		advised += int64(m.end - m.start)
	}
	return advised, nil
}
