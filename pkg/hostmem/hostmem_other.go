//go:build !linux

package hostmem

import "golang.org/x/sys/unix"

// Total is the machine's memory in bytes (sysctl hw.memsize, as on macOS), 0 when unknown.
func Total() int64 {
	n, err := unix.SysctlUint64("hw.memsize")
	if err != nil {
		return 0
	}
	return int64(n)
}

// Available is Total: there is no figure for memory available to read here.
func Available() int64 { return Total() }
