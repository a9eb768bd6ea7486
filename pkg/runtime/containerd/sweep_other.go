//go:build !linux

package containerd

import "errors"

// unmount is Linux-only: containerd runs containers on Linux alone.
func unmount(path string) error { return errors.New("unmounting " + path + ": not on this OS") }
