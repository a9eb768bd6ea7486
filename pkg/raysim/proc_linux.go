package raysim

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// sameExecutable reports whether pid runs the same binary as this process, so `ray stop` never signals
// an unrelated process that reused a pid (pidFile, which that process wrote, is not needed here).
func sameExecutable(pid int, _ string) bool {
	self, err := os.Executable()
	if err != nil {
		return false
	}
	other, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return false
	}
	other = strings.TrimSuffix(other, " (deleted)")
	if a, err := filepath.EvalSymlinks(self); err == nil {
		self = a
	}
	return other == self
}

// isZombie reports whether pid has exited but not been reaped (its parent,
// e.g. a test, has not waited yet).
func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z'
	}
	return false
}
