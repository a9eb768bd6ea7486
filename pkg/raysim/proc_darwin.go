package raysim

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// szomb is a zombie's p_stat in macOS's <sys/proc.h>.
const szomb = 5

// sameExecutable reports whether pid is the raysim process that wrote pidFile, so `ray stop` never
// signals an unrelated process that reused a pid: macOS has no /proc/<pid>/exe, so the process must
// have started no later than the file was written.
func sameExecutable(pid int, pidFile string) bool {
	fi, err := os.Stat(pidFile)
	if err != nil {
		return false
	}
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil || kp.Proc.P_pid != int32(pid) {
		return false
	}
	return !time.Unix(kp.Proc.P_starttime.Unix()).After(fi.ModTime())
}

// isZombie reports whether pid has exited but not been reaped.
func isZombie(pid int) bool {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	return err == nil && kp.Proc.P_pid == int32(pid) && kp.Proc.P_stat == szomb
}
