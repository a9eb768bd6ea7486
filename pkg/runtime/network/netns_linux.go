package network

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// nsfsMagic is the filesystem type of a namespace file (NSFS_MAGIC).
const nsfsMagic = 0x6e736673

// createNetNS makes a new network namespace and bind-mounts it at path, the way
// `ip netns add` does, so it outlives every process in it.
func createNetNS(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
	if err != nil {
		return fmt.Errorf("creating netns file: %w", err)
	}
	f.Close()
	errc := make(chan error, 1)
	go func() {
		// The thread is left locked: when this goroutine ends, Go discards it
		// with the namespace it unshared instead of reusing it.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare network namespace: %w", err)
			return
		}
		src := fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
		if err := unix.Mount(src, path, "none", unix.MS_BIND, ""); err != nil {
			errc <- fmt.Errorf("bind-mounting network namespace at %s: %w", path, err)
			return
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		os.Remove(path)
		return err
	}
	return nil
}

// isNetNS reports whether path is a mounted namespace file.
func isNetNS(path string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return false
	}
	return st.Type == nsfsMagic
}

// removeNetNS unmounts and deletes a namespace file made by createNetNS;
// a missing file is not an error.
func removeNetNS(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmounting %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// Do runs fn on an OS thread that has joined the network namespace at path.
// Sockets fn opens stay in that namespace after Do returns, so a listener
// made inside fn serves the pod's IP. An empty path runs fn as is.
func Do(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	target, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("opening network namespace: %w", err)
	}
	defer target.Close()
	errc := make(chan error, 1)
	go func() {
		// Left locked on purpose: the thread's namespace is changed and Go
		// must not hand it to other goroutines.
		runtime.LockOSThread()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("entering network namespace %s: %w", path, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// dialKeepAlive is the keep-alive period of connections DialIn makes, as net.Dialer's default.
const dialKeepAlive = 15 * time.Second

// DialIn connects to addr from inside the network namespace at path (from this process's own for an
// empty path). The socket is made in that namespace and stays there; only the connect waits for ctx.
func DialIn(ctx context.Context, path, network, addr string) (net.Conn, error) {
	d := net.Dialer{KeepAlive: dialKeepAlive}
	if path == "" {
		return d.DialContext(ctx, network, addr)
	}
	var conn net.Conn
	err := Do(path, func() error {
		var err error
		conn, err = d.DialContext(ctx, network, addr)
		return err
	})
	return conn, err
}

// handleIn returns a netlink handle on the network namespace at path. The handle's socket is made on a
// thread that enters the namespace and is then discarded, never on one that goes back: netlink's own
// NewHandleAt enters the namespace and returns to the thread's first one, which an unprivileged user
// namespace (rootless) may not do, so the thread would stay behind in the namespace and later serve
// other goroutines there (their dials to the host's 127.0.0.1 refused).
func handleIn(path string) (*netlink.Handle, error) {
	var h *netlink.Handle
	err := Do(path, func() error {
		var err error
		h, err = netlink.NewHandle()
		return err
	})
	return h, err
}
