// Package hostmem measures this machine's memory, for the Node's capacity and raysim's defaults: from
// /proc/meminfo on Linux, from sysctl hw.memsize on macOS (which has no figure for memory available,
// so Available is the total there).
package hostmem

import (
	"bufio"
	"io"
	"strconv"
	"strings"
)

// meminfoField is the value in bytes of field (e.g. "MemTotal") in /proc/meminfo's text, 0 when absent.
func meminfoField(r io.Reader, field string) int64 {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == field+":" {
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}
