package containerd

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// unmount detaches the mount at path; one already gone is not an error.
func unmount(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmounting %s: %w", path, err)
	}
	return nil
}
