package instance

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// OwnNetwork returns args with a pod CIDR and a bridge of the instance's own added unless args name
// them, so that instances side by side (parallel tests, bench, CI) never share a bridge or hand out the
// same pod IPs.
func OwnNetwork(args []string) []string {
	out := append([]string{}, args...)
	cidr, bridge := nextNetwork()
	if !HasFlag(args, "--pod-cidr") {
		out = append(out, "--pod-cidr", cidr)
	}
	if !HasFlag(args, "--bridge") {
		out = append(out, "--bridge", bridge)
	}
	return out
}

// HasFlag reports whether args name flag, as "--flag value" or "--flag=value".
func HasFlag(args []string, flag string) bool {
	for _, a := range args {
		if a == flag || strings.HasPrefix(a, flag+"=") {
			return true
		}
	}
	return false
}

// networks counts the networks this process has tried; claimed holds the lock files of those it took.
var (
	networks  atomic.Uint32
	claimMu   sync.Mutex
	claimed   []*os.File
	netLocks  = filepath.Join(os.TempDir(), "rayctl-e2e-networks")
	netsInAll = uint32(8 * 256)
)

// nextNetwork returns a pod CIDR (a /24 in 10.200.0.0/13) and a bridge name that no other instance
// started by any process on this machine through this package has at the same time. Each process
// claims a network with an flock on a file of its own under the temporary directory, held until it
// exits (the kernel lets go of it even when the process is killed); the search starts at an offset from
// the process id, so processes side by side seldom even try the same one.
func nextNetwork() (cidr, bridge string) {
	start := uint32(os.Getpid()) * 64
	var n uint32
	for range netsInAll {
		n = (start + networks.Add(1)) % netsInAll
		if claimNetwork(n) {
			break
		}
	}
	return fmt.Sprintf("10.%d.%d.0/24", 200+n/256, n%256), fmt.Sprintf("rte%04d", n)
}

// claimNetwork takes network n for this process unless another process holds it.
func claimNetwork(n uint32) bool {
	if err := os.MkdirAll(netLocks, 0o700); err != nil {
		return true // no lock directory: fall back on the offset alone
	}
	f, err := os.OpenFile(filepath.Join(netLocks, fmt.Sprintf("%04d.lock", n)), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	claimMu.Lock()
	claimed = append(claimed, f)
	claimMu.Unlock()
	return true
}
